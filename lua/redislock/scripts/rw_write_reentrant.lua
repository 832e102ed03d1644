-- rw_write_reentrant: take the write side of a read-write lock as an owner
-- that may take it again (client:rwlock(name, {reentrant = true})): the
-- writer key holds the owner's token, and the grant's entries are counted
-- as a reentrant lock's (acquire_reentrant.lua). An owner that reads
-- without writing is refused at once: a reader never upgrades (it would
-- wait for its own share). Otherwise as rw_write.lua.
-- KEYS[1] writer key, KEYS[2] readers, KEYS[3] writer-waiting marker,
-- KEYS[4] fence counter, KEYS[5] waiting writers, KEYS[6] the writer's
-- holder record, KEYS[7] the grant (hash: n, fence; the writer key's
-- ':grant', living as the writer key does: new_grant.lua)
-- ARGV[1] owner token, ARGV[2] lease in ms, ARGV[3] how long (ms) the
-- caller will block for a wakeup if it is not taken (0: it will not),
-- ARGV[4] fence_ttl in ms, ARGV[5] the marker's life in ms, ARGV[6] the
-- holder's label ("" for none)
-- Returns {1, fence, n} when taken (n 1) or entered again, {0, ms} when
-- not, {0, -3} when the owner reads and does not write.
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice add_waiter
--@splice next_fence
--@splice record_holder
--@splice reenter
--@splice new_grant
--@splice try_write
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local again = reenter(KEYS[1], KEYS[7], KEYS[6], ARGV[1], ARGV[2])
if again then return again end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return {0, -3}
end
local t, refused = try_write({ writer = KEYS[1], readers = KEYS[2], marker = KEYS[3], waiting = KEYS[5],
  record = KEYS[6], token = ARGV[1], lease = ARGV[2], block_ms = tonumber(ARGV[3]), marker_ms = ARGV[5],
  label = ARGV[6] }, now)
if not t then return refused end
local f = next_fence(KEYS[4], t, ARGV[4])
new_grant(KEYS[7], f, ARGV[2])
return {1, f, 1}

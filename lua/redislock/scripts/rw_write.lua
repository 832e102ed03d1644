-- rw_write: take the write side of a read-write lock: no reader and no
-- other writer. A writer that is kept out leaves a marker that keeps new
-- readers out while it waits (writer preference); the marker lives a
-- little longer than the writer's next attempt, so a writer that died or
-- gave up stops blocking readers soon.
-- KEYS[1] writer key, KEYS[2] readers, KEYS[3] writer-waiting marker,
-- KEYS[4] fence counter, KEYS[5] waiting writers (token -> until when it
-- blocks, ms), KEYS[6] the writer's holder record (as acquire.lua's)
-- ARGV[1] writer token, ARGV[2] lease in ms, ARGV[3] how long (ms) the
-- caller will block for a wakeup if it is not taken (0: it will not),
-- ARGV[4] fence_ttl in ms, ARGV[5] the marker's life in ms, ARGV[6] the
-- holder's label ("" for none)
-- Returns {1, fence} when taken, {0, ms} when not (ms: until the writer's
-- lease or the first reader's lease ends).
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice add_waiter
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
--@splice next_fence
--@splice record_holder
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #first == 0 and redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
  redis.call('ZREM', KEYS[5], ARGV[1])
  local t = redis.call('TIME')
  record_holder(KEYS[6], t, ARGV[1], ARGV[6], ARGV[2])
  return {1, next_fence(KEYS[4], t, ARGV[4])}
end
-- Keep new readers out while we wait. Another waiting writer's marker
-- does that as well: one is enough, and it is that writer's to refresh.
if not redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[5]) and
    redis.call('GET', KEYS[3]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[3], ARGV[5])
end
local wait = redis.call('PTTL', KEYS[1])
if wait < 0 and #first > 0 then wait = tonumber(first[2]) - now end
add_waiter(KEYS[5], ARGV[1], tonumber(ARGV[3]), now)
return {0, wait}

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
--@splice next_fence
--@splice record_holder
--@splice try_write
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local t, refused = try_write({ writer = KEYS[1], readers = KEYS[2], marker = KEYS[3], waiting = KEYS[5],
  record = KEYS[6], token = ARGV[1], lease = ARGV[2], block_ms = tonumber(ARGV[3]), marker_ms = ARGV[5],
  label = ARGV[6] }, now)
if not t then return refused end
return {1, next_fence(KEYS[4], t, ARGV[4])}

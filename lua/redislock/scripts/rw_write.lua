-- rw_write: take the write side of a read-write lock: no reader and no
-- other writer. A writer that finds readers (or another writer) leaves a
-- marker that keeps new readers out while it waits (writer preference);
-- the marker lives a little longer than the writer's next attempt.
-- KEYS[1] writer key, KEYS[2] readers, KEYS[3] writer-waiting marker,
-- KEYS[4] fence counter, KEYS[5] waiters flag
-- ARGV[1] writer token, ARGV[2] lease in ms, ARGV[3] "1" when the caller
-- will wait for a release notification, ARGV[4] fence_ttl in ms,
-- ARGV[5] how long (ms) the marker keeps readers out without a new attempt
-- Returns {1, fence} when taken, {0, ms} when not.
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- The fence rule of acquire.lua: max(last + 1, the server's clock in us).
local function next_fence(key)
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local f = tonumber(redis.call('GET', key) or '0') + 1
  if f < us then f = us end
  redis.call('SET', key, string.format('%.0f', f), 'PX', ARGV[4])
  return f
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local readers = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #readers == 0 and redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
  return {1, next_fence(KEYS[4])}
end
-- keep readers out while we wait (a marker of another waiting writer
-- stands: one is enough)
redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[5])
if redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('PEXPIRE', KEYS[3], ARGV[5]) end
local wait = redis.call('PTTL', KEYS[1])
if wait < 0 and #readers > 0 then wait = tonumber(readers[2]) - now end
if ARGV[3] == '1' then
  redis.call('SET', KEYS[5], '1', 'PX', math.max(wait, 0) + 1000)
end
return {0, wait}

-- rw_read: take a read share of a read-write lock. Many readers, or one
-- writer; and writers are not starved: while a writer waits (it leaves a
-- short-lived marker at every attempt), new readers wait too, so the
-- readers in place drain and the writer gets its turn.
-- KEYS[1] writer key (the lock itself), KEYS[2] readers (token -> lease end
-- on the server's clock, ms), KEYS[3] writer-waiting marker, KEYS[4] waiters
-- flag
-- ARGV[1] reader token, ARGV[2] lease in ms, ARGV[3] "1" when the caller
-- will wait for a release notification
-- Returns {1} when taken, {0, ms} when not (ms: the shortest wait worth
-- doing, -1 when none is known).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local blocked = redis.call('PTTL', KEYS[1])
if blocked == -2 then blocked = redis.call('PTTL', KEYS[3]) end
if blocked ~= -2 then
  if ARGV[3] == '1' then
    redis.call('SET', KEYS[4], '1', 'PX', math.max(blocked, 0) + 1000)
  end
  return {0, blocked}
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return {1}

-- sem_acquire: take one permit of a counting semaphore. Each permit is a
-- lease of its own (token -> lease end on the server's clock), so a crashed
-- holder's permit comes back at its lease end. The limit is the one stored
-- by the latest client:semaphore(name, permits) (ARGV[4] is only used if
-- none is stored): lowering it revokes no permit, the extra ones drain as
-- they are released or expire.
-- KEYS[1] permits (token -> lease end, ms), KEYS[2] the limit, KEYS[3]
-- waiters flag
-- ARGV[1] token, ARGV[2] lease in ms, ARGV[3] "1" when the caller will wait
-- for a release notification, ARGV[4] the limit when none is stored
-- Returns {1, in_use} when taken, {0, ms} when not (ms: until the first
-- lease ends).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local limit = tonumber(redis.call('GET', KEYS[2]) or ARGV[4])
local in_use = redis.call('ZCARD', KEYS[1])
if in_use < limit then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return {1, in_use + 1}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local wait = first[2] and (tonumber(first[2]) - now) or -1
if ARGV[3] == '1' then
  redis.call('SET', KEYS[3], '1', 'PX', math.max(wait, 0) + 1000)
end
return {0, wait}

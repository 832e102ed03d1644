-- zset_release: give back one member's share (a reader, a permit) and
-- wake one waiter if someone waits (the same wake-up as a lock release).
-- KEYS[1] the set, KEYS[2] waiters flag, KEYS[3] signal list
-- ARGV[1] the member's token
-- Returns 1 when it was there (lease still running), 0 otherwise.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ends = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0')
if ends == 0 then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
local waiting = redis.call('PTTL', KEYS[2])
if waiting > 0 then
  redis.call('RPUSH', KEYS[3], '1')
  redis.call('LTRIM', KEYS[3], -1, -1)
  redis.call('PEXPIRE', KEYS[3], waiting)
end
if ends <= now then
  return 0
end
return 1

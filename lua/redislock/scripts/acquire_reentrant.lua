-- acquire_reentrant: take a lock that its owner may take again (reentrant =
-- true). The owner is an explicit token, not a thread: the same token
-- counts up, and the lock is released when the count is back to zero.
-- A plain acquire and a reentrant one exclude each other (same lock key).
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] waiters flag,
-- KEYS[4] entry count
-- ARGV[1] owner token, ARGV[2] lease in ms, ARGV[3] "1" when the caller
-- will wait for a release notification, ARGV[4] fence_ttl in ms
-- Returns {1, fence, count} when taken (count 1) or entered again (count
-- > 1: the fence is the one drawn when it was taken), {0, pttl} otherwise.
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
-- The fence rule of acquire.lua: max(last + 1, the server's clock in us).
local function next_fence(key)
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local f = tonumber(redis.call('GET', key) or '0') + 1
  if f < us then f = us end
  redis.call('SET', key, string.format('%.0f', f), 'PX', ARGV[4])
  return f
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local n = redis.call('INCR', KEYS[4])
  redis.call('PEXPIRE', KEYS[4], ARGV[4])
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return {1, tonumber(redis.call('GET', KEYS[2]) or '0'), n}
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('SET', KEYS[4], 1, 'PX', ARGV[4])
  return {1, next_fence(KEYS[2]), 1}
end
local pttl = redis.call('PTTL', KEYS[1])
if ARGV[3] == '1' then
  redis.call('SET', KEYS[3], '1', 'PX', math.max(pttl, 0) + 1000)
end
return {0, pttl}

-- release: compare-and-delete; only the owner's token removes the key.
-- Then wake whoever waits: the first in line of a fair queue gets a wakeup
-- in its own list; other waiters (the waiters flag is set) share one list
-- that keeps one pending wakeup. One is enough: whoever takes it retries at
-- once, and the next release leaves another.
-- KEYS[1] lock key, KEYS[2] waiters flag, KEYS[3] signal list,
-- KEYS[4] fair queue (a fair waiter's own list is KEYS[3] .. ':' .. token)
-- ARGV[1] owner token
-- Returns 1 when deleted, 0 when the key is gone or belongs to someone else.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
local head = redis.call('LINDEX', KEYS[4], 0)
if head then
  local own = KEYS[3] .. ':' .. head
  redis.call('RPUSH', own, '1')
  redis.call('LTRIM', own, -1, -1)
  redis.call('PEXPIRE', own, 10000)
end
local waiting = redis.call('PTTL', KEYS[2])
if waiting > 0 then
  redis.call('RPUSH', KEYS[3], '1')
  redis.call('LTRIM', KEYS[3], -1, -1)
  redis.call('PEXPIRE', KEYS[3], waiting)
end
return 1

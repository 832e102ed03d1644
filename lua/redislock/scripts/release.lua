-- release: compare-and-delete; only the owner's token removes the key.
-- When someone waits (the waiters flag is set), leave one wakeup in the
-- signal list for a waiter blocked in BLPOP. One pending wakeup is enough:
-- whoever takes it retries at once, and the next release leaves another.
-- KEYS[1] lock key, KEYS[2] waiters flag, KEYS[3] signal list
-- ARGV[1] owner token
-- Returns 1 when deleted, 0 when the key is gone or belongs to someone else.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
local waiting = redis.call('PTTL', KEYS[2])
if waiting > 0 then
  redis.call('RPUSH', KEYS[3], '1')
  redis.call('LTRIM', KEYS[3], -1, -1)
  redis.call('PEXPIRE', KEYS[3], waiting)
end
return 1

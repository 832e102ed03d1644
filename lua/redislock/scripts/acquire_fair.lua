-- acquire_fair: take the lock only in arrival order (fair = true).
-- Waiters queue up in a list; only the first in line may take a free lock.
-- A waiter that stops trying (gave up without leaving, or died) stays in
-- line only until its deadline, which it pushes forward on every attempt.
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] queue (list of tokens),
-- KEYS[4] queue deadlines (sorted set token -> ms)
-- ARGV[1] owner token (also the waiter's place in line), ARGV[2] lease in ms,
-- ARGV[3] how long in ms the waiter keeps its place without trying again
-- Returns {1, fence} when granted, {0, pttl} otherwise (pttl -2: the lock
-- is free but someone is ahead in line).
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
-- The fence counter starts at the server's clock in microseconds when it is
-- created, and grows by one per grant: if Redis loses it (a restart without
-- persistence), the new counter starts above every fence handed out before,
-- unless the server's clock went back.
local function next_fence(key)
  if redis.call('EXISTS', key) == 0 then
    local t = redis.call('TIME')
    redis.call('SET', key, string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2])))
  end
  return redis.call('INCR', key)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = redis.call('LINDEX', KEYS[3], 0)
while head do
  local deadline = redis.call('ZSCORE', KEYS[4], head)
  if deadline and tonumber(deadline) > now then break end
  redis.call('LPOP', KEYS[3])
  redis.call('ZREM', KEYS[4], head)
  head = redis.call('LINDEX', KEYS[3], 0)
end
if (not head or head == ARGV[1]) and
    redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if head then
    redis.call('LPOP', KEYS[3])
    redis.call('ZREM', KEYS[4], ARGV[1])
  end
  return {1, next_fence(KEYS[2])}
end
if not redis.call('ZSCORE', KEYS[4], ARGV[1]) then
  redis.call('RPUSH', KEYS[3], ARGV[1])
end
local keep = tonumber(ARGV[3])
redis.call('ZADD', KEYS[4], now + keep, ARGV[1])
-- An abandoned queue disappears on its own.
redis.call('PEXPIRE', KEYS[3], keep + 60000)
redis.call('PEXPIRE', KEYS[4], keep + 60000)
return {0, redis.call('PTTL', KEYS[1])}

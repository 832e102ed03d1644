-- acquire: take the lock and draw its fencing token in one atomic step.
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] waiters flag
--   (all three share the name's hash tag: one Cluster slot)
-- ARGV[1] owner token, ARGV[2] lease in milliseconds,
-- ARGV[3] "1" when the caller will wait for a release notification
-- Returns {1, fence} when granted, {0, pttl} when someone else holds it
-- (pttl: the holder's remaining lease in ms, so a waiter never sleeps past it).
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
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, next_fence(KEYS[2])}
end
local pttl = redis.call('PTTL', KEYS[1])
if ARGV[3] == '1' then
  -- Tell release that someone waits, for longer than the waiter may block
  -- (it blocks at most until this lease ends).
  redis.call('SET', KEYS[3], '1', 'PX', math.max(pttl, 0) + 1000)
end
return {0, pttl}

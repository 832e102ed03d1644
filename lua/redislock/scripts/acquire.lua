-- acquire: take the lock and draw its fencing token in one atomic step, and
-- record who took it.
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] waiters flag, KEYS[4] the
--   holder record, KEYS[5] the notify waiters (token -> until when, ms)
--   (all five share the name's hash tag: one Cluster slot)
-- ARGV[1] owner token, ARGV[2] lease in milliseconds,
-- ARGV[3] "1" when the caller will wait for a release notification, "0"
--   when it tries once (a refusal then names the holder), "2" when it polls,
-- ARGV[4] fence_ttl: how long (ms) the fence counter outlives its last fence
--   on the server's clock (next_fence),
-- ARGV[5] the holder's label ("" for none)
-- Returns {1, fence} when granted, {0, pttl} when someone else holds it
-- (pttl: the holder's remaining lease in ms, so a waiter never sleeps past
-- it), or, trying once, {0, pttl, label, held_ms} when the holder has a
-- label: what it chose to be known by, and how long it has held the lock.
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice next_fence
--@splice record_holder
--@splice holder_of
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local t = redis.call('TIME')
  record_holder(KEYS[4], t, ARGV[1], ARGV[5], ARGV[2])
  if ARGV[3] == '1' then redis.call('ZREM', KEYS[5], ARGV[1]) end
  return {1, next_fence(KEYS[2], t, ARGV[4])}
end
local pttl = redis.call('PTTL', KEYS[1])
if ARGV[3] == '1' then
  -- Tell release that someone waits, for longer than the waiter may block
  -- (it blocks at most until this lease ends).
  -- (never shortened: fair waiters keep it as long as their line)
  local keep = math.max(pttl, 0) + 1000
  if redis.call('PTTL', KEYS[3]) < keep then
    redis.call('SET', KEYS[3], '1', 'PX', keep)
  end
  -- and count us among the waiters for as long (client:inspect)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
  redis.call('ZADD', KEYS[5], now + keep, ARGV[1])
  if redis.call('PTTL', KEYS[5]) < keep then redis.call('PEXPIRE', KEYS[5], keep) end
  return {0, pttl}
end
if ARGV[3] == '0' then
  -- who holds it, and since when, for the caller's "busy" (the record
  -- only if it is this holder's)
  local label, _, held = holder_of(KEYS[4], redis.call('GET', KEYS[1]))
  if label then return {0, pttl, label, held} end
end
return {0, pttl}

-- acquire_reentrant: take a lock that its owner may take again (reentrant =
-- true). The owner is an explicit token, not a thread: the same token
-- counts up, and the lock is released when the count is back to zero.
-- A plain acquire and a reentrant one exclude each other (same lock key).
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] waiters flag,
-- KEYS[4] the grant: a hash of its entry count (n) and fence (KEYS[1] ..
-- ':grant', where extend_grant.lua finds it), KEYS[5] the holder record,
-- KEYS[6] the notify waiters (both as in acquire.lua)
-- ARGV[1] owner token, ARGV[2] lease in ms, ARGV[3] "1" when the caller
-- will wait for a release notification, "0" when it tries once, "2" when
-- it polls (as in acquire.lua), ARGV[4] fence_ttl in ms, ARGV[5] the
-- holder's label ("" for none; a further entry keeps the first's)
-- Returns {1, fence, count} when taken (count 1) or entered again (count
-- > 1: the fence is the one drawn when it was taken), {0, pttl} otherwise
-- ({0, pttl, label, held_ms} trying once, as acquire.lua).
-- The fence names the grant: a hold of an earlier grant to the same owner
-- (lost since) cannot release this one (release_reentrant.lua compares it).
-- The hash lives as the lock (new_grant.lua): given its lease, renewed
-- with it (extend_reentrant.lua, the watchdog's extend_grant.lua), deleted
-- with it; one a holder that died left expires with its lease, and a fresh
-- grant overwrites it.
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice next_fence
--@splice record_holder
--@splice holder_of
--@splice reenter
--@splice new_grant
local again = reenter(KEYS[1], KEYS[4], KEYS[5], ARGV[1], ARGV[2])
if again then return again end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local t = redis.call('TIME')
  local f = next_fence(KEYS[2], t, ARGV[4])
  new_grant(KEYS[4], f, ARGV[2])
  record_holder(KEYS[5], t, ARGV[1], ARGV[5], ARGV[2])
  if ARGV[3] == '1' then redis.call('ZREM', KEYS[6], ARGV[1]) end
  return {1, f, 1}
end
local pttl = redis.call('PTTL', KEYS[1])
if ARGV[3] == '1' then
  -- (never shortened: fair waiters keep it as long as their line)
  local keep = math.max(pttl, 0) + 1000
  if redis.call('PTTL', KEYS[3]) < keep then
    redis.call('SET', KEYS[3], '1', 'PX', keep)
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
  redis.call('ZADD', KEYS[6], now + keep, ARGV[1])
  if redis.call('PTTL', KEYS[6]) < keep then redis.call('PEXPIRE', KEYS[6], keep) end
elseif ARGV[3] == '0' then
  local label, _, held = holder_of(KEYS[5], redis.call('GET', KEYS[1]))
  if label then return {0, pttl, label, held} end
end
return {0, pttl}

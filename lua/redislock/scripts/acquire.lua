-- acquire: take the lock and draw its fencing token in one atomic step.
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] waiters flag
--   (all three share the name's hash tag: one Cluster slot)
-- ARGV[1] owner token, ARGV[2] lease in milliseconds,
-- ARGV[3] "1" when the caller will wait for a release notification,
-- ARGV[4] fence_ttl: how long (ms) the fence counter outlives its last grant
-- Returns {1, fence} when granted, {0, pttl} when someone else holds it
-- (pttl: the holder's remaining lease in ms, so a waiter never sleeps past it).
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
-- A fence is max(last fence + 1, the server's clock in microseconds), and
-- the counter keeps it for fence_ttl ms (ARGV[4]), refreshed by every grant. So
-- fences order grants even across a failover to a replica that lacks the
-- latest counter, a restart without persistence, or the counter's expiry:
-- the next fence is at least the new server's clock, above every fence
-- handed out before as long as the servers' clocks agree to within the
-- time between those grants (a fence runs ahead of the clock only when
-- grants come faster than one per microsecond, which a script cannot).
local function next_fence(key)
  local t = redis.call('TIME')
  local f = tonumber(t[1]) * 1000000 + tonumber(t[2])
  -- one write in the common case: the clock is ahead of the last fence
  local last = redis.call('SET', key, string.format('%.0f', f), 'PX', ARGV[4], 'GET')
  if last and tonumber(last) >= f then
    f = tonumber(last) + 1
    redis.call('SET', key, string.format('%.0f', f), 'PX', ARGV[4])
  end
  return f
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, next_fence(KEYS[2])}
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
end
return {0, pttl}

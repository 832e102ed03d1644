-- acquire: take the lock and draw its fencing token in one atomic step, and
-- record who took it.
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] waiters flag, KEYS[4] the
--   holder record, KEYS[5] the notify waiters (token -> until when, ms)
--   (all five share the name's hash tag: one Cluster slot)
-- ARGV[1] owner token, ARGV[2] lease in milliseconds,
-- ARGV[3] "1" when the caller will wait for a release notification, "0"
--   when it tries once (a refusal then names the holder), "2" when it polls,
-- ARGV[4] fence_ttl: how long (ms) the fence counter outlives its last grant,
-- ARGV[5] the holder's label ("" for none)
-- Returns {1, fence} when granted, {0, pttl} when someone else holds it
-- (pttl: the holder's remaining lease in ms, so a waiter never sleeps past
-- it), or, trying once, {0, pttl, label, held_ms} when the holder has a
-- label: what it chose to be known by, and how long it has held the lock.
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
-- A fence is max(last fence + 1, the server's clock in microseconds), and
-- the counter keeps it for fence_ttl ms (ARGV[4]), refreshed by every grant. So
-- fences order grants even across a failover to a replica that lacks the
-- latest counter, a restart without persistence, or the counter's expiry:
-- the next fence is at least the new server's clock, above every fence
-- handed out before as long as the servers' clocks agree to within the
-- time between those grants (a fence runs ahead of the clock only when
-- grants come faster than one per microsecond, which a script cannot).
local function next_fence(key, f)
  -- one write in the common case: the clock is ahead of the last fence
  local last = redis.call('SET', key, string.format('%.0f', f), 'PX', ARGV[4], 'GET')
  if last and tonumber(last) >= f then
    f = tonumber(last) + 1
    redis.call('SET', key, string.format('%.0f', f), 'PX', ARGV[4])
  end
  return f
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local t = redis.call('TIME')
  local us = t[1] .. string.format('%06d', tonumber(t[2]))
  -- The holder record: when, whose (the token, so that a reader tells it
  -- from a record left by an earlier grant: only the lock's own counts),
  -- and the label. It lives as long as the fence counter, needing no
  -- renewal and no delete: the lock's key alone says whether it holds.
  if ARGV[5] ~= '' then
    redis.call('SET', KEYS[4], us .. ' ' .. ARGV[1] .. ' ' .. ARGV[5], 'PX', ARGV[4])
  end
  if ARGV[3] == '1' then redis.call('ZREM', KEYS[5], ARGV[1]) end
  return {1, next_fence(KEYS[2], tonumber(us))}
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
  local holder = redis.call('GET', KEYS[1])
  local rec = holder and redis.call('GET', KEYS[4])
  if rec then
    local since, rest = rec:match('^(%d+) (.*)$')
    if since and rest:sub(1, #holder + 1) == holder .. ' ' then
      local t = redis.call('TIME')
      local held = (tonumber(t[1]) * 1000000 + tonumber(t[2]) - tonumber(since)) / 1000
      return {0, pttl, rest:sub(#holder + 2), math.max(0, math.floor(held))}
    end
  end
end
return {0, pttl}

-- next_fence(key, t, ttl): the fence of a grant, drawn by every script that
-- grants a lock (spliced into each by tools/gen_scripts.lua at its
-- "--@splice next_fence" line: written once, sent whole).
-- t is the reply of TIME, key the fence counter, ttl how long (ms) the
-- counter outlives this grant. A fence is max(last fence + 1, the
-- server's clock in microseconds), and the counter keeps it for ttl ms,
-- refreshed by every grant. So fences order grants even across a failover
-- to a replica that lacks the latest counter, a restart without
-- persistence, or the counter's expiry: the next fence is at least the new
-- server's clock, above every fence handed out before as long as the
-- servers' clocks agree to within the time between those grants (a fence
-- runs ahead of the clock only when grants come faster than one per
-- microsecond, which a script cannot). Below 2^53: exact in a double.
local function next_fence(key, t, ttl)
  local f = tonumber(t[1]) * 1000000 + tonumber(t[2])
  -- one write in the common case: the clock is ahead of the last fence
  local last = redis.call('SET', key, string.format('%.0f', f), 'PX', ttl, 'GET')
  if last and tonumber(last) >= f then
    f = tonumber(last) + 1
    redis.call('SET', key, string.format('%.0f', f), 'PX', ttl)
  end
  return f
end

-- next_fence(key, t, keep): the fence of a grant, drawn by every script that
-- grants a lock (spliced into each by tools/gen_scripts.lua at its
-- "--@splice next_fence" line: written once, sent whole).
-- t is the reply of TIME, key the fence counter. A fence is max(last fence
-- + 1, the server's clock in microseconds). Fences order grants even
-- across a failover to a replica that lacks the latest counter, a restart
-- without persistence, or the counter's expiry: the next fence is at least
-- the new server's clock, above every fence handed out before as long as
-- the servers' clocks agree to within the time between those grants (a
-- fence runs ahead of the clock only when grants come faster than one per
-- microsecond, which a script cannot). So the counter matters only when
-- the clock steps back: it keeps the last fence until the server's clock
-- has passed it by `keep` ms (fence_ttl), whatever it read at the grant: a
-- fence drawn on a clock that stepped back keeps its counter until the
-- clock is past it again, and a step back of up to `keep` ms at any later
-- time finds the counter still there. Below 2^53: exact in a double.
local function next_fence(key, t, keep)
  local f = tonumber(t[1]) * 1000000 + tonumber(t[2])
  -- one write in the common case: the clock is ahead of the last fence
  -- (the fence is the clock: it expires keep ms from now)
  local last = redis.call('SET', key, string.format('%.0f', f), 'PX', keep, 'GET')
  if last and tonumber(last) >= f then
    f = tonumber(last) + 1
    local until_ms = math.floor(f / 1000) + tonumber(keep)
    redis.call('SET', key, string.format('%.0f', f), 'PXAT', string.format('%.0f', until_ms))
  end
  return f
end

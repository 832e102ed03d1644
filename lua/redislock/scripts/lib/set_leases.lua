-- set_leases(leases, members, lease, now): the members of the sorted set
-- `leases` (a read-write lock's readers, a semaphore's permits: token ->
-- lease end, ms of the server's clock) given a lease of `lease` ms from
-- now, by a grant or a renewal; the set lives as long as its longest lease
-- (never shortened). Spliced by tools/gen_scripts.lua at
-- "--@splice set_leases".
local function set_leases(leases, members, lease, now)
  for _, m in ipairs(members) do redis.call('ZADD', leases, now + lease, m) end
  if redis.call('PTTL', leases) < lease then redis.call('PEXPIRE', leases, lease) end
end

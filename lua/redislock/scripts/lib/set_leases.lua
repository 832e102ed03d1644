-- set_leases(leases, members, lease, now, counts): the members of the
-- sorted set `leases` (a read-write lock's readers, a semaphore's permits:
-- token -> lease end, ms of the server's clock) given a lease of `lease`
-- ms from now, by a grant or a renewal; the set lives as long as its
-- longest lease (never shortened), and so does the hash `counts` when one
-- is given (a reentrant rwlock's readers' counts, rw_read_reentrant.lua:
-- it must outlive every share it counts, and is written before this call:
-- a hash that is not there gets no ttl; the callers for other sets give
-- none, and send nothing more). Spliced by tools/gen_scripts.lua at
-- "--@splice set_leases".
local function set_leases(leases, members, lease, now, counts)
  for _, m in ipairs(members) do redis.call('ZADD', leases, now + lease, m) end
  if redis.call('PTTL', leases) < lease then redis.call('PEXPIRE', leases, lease) end
  if counts and redis.call('PTTL', counts) < lease then redis.call('PEXPIRE', counts, lease) end
end

-- drop_lapsed(leases, holders, now, counts): the shares of a shared lock
-- (a read-write lock's readers, a semaphore's permits) whose lease ran out
-- by now (ms of the server's clock) leave the sorted set `leases` (token ->
-- lease end, ms), with their entries in the hash `holders` and, for a
-- reentrant rwlock's readers, their counts and grants in the hash `counts`
-- (owner -> n, owner .. ':g' -> the grant; nil: none). The entries of the
-- first 1000 only: the set drops them all. Spliced by
-- tools/gen_scripts.lua at "--@splice drop_lapsed".
local function drop_lapsed(leases, holders, now, counts)
  local over = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, 1000)
  if #over > 0 then
    redis.call('HDEL', holders, unpack(over))
    if counts then
      for _, m in ipairs(over) do redis.call('HDEL', counts, m, m .. ':g') end
    end
    redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
  end
end

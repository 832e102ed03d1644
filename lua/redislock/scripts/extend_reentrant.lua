-- extend_reentrant: compare-and-expire for a hold of a reentrant lock: the
-- owner's token and the grant's fence must both match, so a hold of an
-- earlier grant to the same owner (lost since) can neither renew a newer
-- grant nor go on believing it holds. Never brings back an expired key.
-- The holder record and the grant are renewed with the lock (they live as
-- it does: extend_grant.lua).
-- KEYS[1] lock key, KEYS[2] the grant (hash: n, fence)
-- ARGV[1] owner token, ARGV[2] new lease in milliseconds, ARGV[3] the
-- hold's fence
-- Returns 1 when renewed, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] and redis.call('HGET', KEYS[2], 'fence') == ARGV[3] then
  redis.call('PEXPIRE', KEYS[1] .. ':holder', ARGV[2])   -- (the record lives as the lock, extend.lua)
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0

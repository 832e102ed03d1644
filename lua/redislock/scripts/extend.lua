-- extend: compare-and-expire; only the owner's token renews the lease,
-- and a key that already expired is never brought back. The holder record
-- (KEYS[1] .. ':holder', record_holder) is renewed with it: it lives as
-- the lock does (none: nothing to renew).
-- KEYS[1] lock key
-- ARGV[1] owner token, ARGV[2] new lease in milliseconds
-- Returns 1 when renewed, 0 when the key is gone or belongs to someone else.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1] .. ':holder', ARGV[2])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0

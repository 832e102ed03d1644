-- release_reentrant: leave a reentrant lock once: the count goes down, and
-- at zero the lock is deleted (compare-and-delete) and one waiter woken.
-- Only a hold of the current grant counts: its token and its fence must
-- both match, so a hold of an earlier grant to the same owner, lost since,
-- never releases a newer one.
-- KEYS[1] lock key, KEYS[2] waiters flag, KEYS[3] signal list,
-- KEYS[4] the grant (hash: n, fence)
-- ARGV[1] owner token, ARGV[2] the hold's fence
-- Returns 1 when released, 2 when still held (entered more than once), 0
-- when the key is gone, someone else's, or another grant's.
--@splice leave_grant
local left = leave_grant(KEYS[1], KEYS[4], ARGV[1], ARGV[2])
if left ~= 1 then return left end
local waiting = redis.call('PTTL', KEYS[2])
if waiting > 0 then
  redis.call('RPUSH', KEYS[3], '1')
  redis.call('LTRIM', KEYS[3], -1, -1)
  redis.call('PEXPIRE', KEYS[3], waiting)
end
return 1

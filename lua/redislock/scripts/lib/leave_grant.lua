-- leave_grant(lock, grant, token, fence): one hold of a reentrant lock's
-- grant given back (release_reentrant.lua, rw_release_reentrant.lua's
-- write side): only a hold of the current grant counts (the key `lock`
-- holds token, the hash `grant` the hold's fence: new_grant.lua), so a
-- hold of an earlier grant to the same owner, lost since, never releases a
-- newer one. Returns 0 for such a hold or a lock that is gone, 2 when the
-- count is still above zero, 1 when it reached zero: the lock, its grant
-- and its holder record are then deleted, the caller's to wake whom it
-- wakes. Spliced by tools/gen_scripts.lua at "--@splice leave_grant".
local function leave_grant(lock, grant, token, fence)
  if redis.call('GET', lock) ~= token or redis.call('HGET', grant, 'fence') ~= fence then
    return 0
  end
  if redis.call('HINCRBY', grant, 'n', -1) > 0 then
    return 2
  end
  redis.call('DEL', lock, grant, lock .. ':holder')   -- (the holder record goes with it)
  return 1
end

-- reenter(lock, grant, record, token, ms): a further entry of a reentrant
-- lock's owner (acquire_reentrant.lua, rw_write_reentrant.lua). When the
-- key `lock` holds token under a grant (the hash `grant`: n, fence;
-- new_grant.lua), the count goes up and the lease is made at least ms
-- long, the holder record `record` and the grant with it (both live as the
-- lock): returns {1, fence, n} (the fence the one drawn when it was taken).
-- nil otherwise, the caller's to answer as to anyone: held with this token
-- but not as a reentrant lock (a plain acquire given the same token) is
-- busy, like any other holder. Spliced by tools/gen_scripts.lua at
-- "--@splice reenter".
local function reenter(lock, grant, record, token, ms)
  if redis.call('GET', lock) ~= token then return nil end
  local f = redis.call('HGET', grant, 'fence')
  if not f then return nil end
  local n = redis.call('HINCRBY', grant, 'n', 1)
  if redis.call('PTTL', lock) < tonumber(ms) then
    redis.call('PEXPIRE', lock, ms)
    redis.call('PEXPIRE', record, ms)   -- (the record lives as the lock)
    redis.call('PEXPIRE', grant, ms)    -- (and so does the grant)
  end
  return {1, tonumber(f), n}
end

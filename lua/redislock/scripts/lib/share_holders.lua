-- share_holders(holders, members, t, label, keep): the holder entries of
-- a grant of shares (a read share, n permits): each member of the set of
-- leases named in the hash `holders` as "<since µs> <label>" (t, the
-- reply of TIME; shares_of.lua reads them), the hash living at least keep
-- ms from now (it outlives the leases: an entry goes with its member, by
-- a release or drop_lapsed.lua). No label (""), no entry: nor one left
-- by an earlier grant to the same member (a reentrant owner's token comes
-- back; some paths drop a lapsed share and not its entry), which would
-- name this grant. Spliced by tools/gen_scripts.lua at
-- "--@splice share_holders".
local function share_holders(holders, members, t, label, keep)
  if label == '' then
    redis.call('HDEL', holders, unpack(members))
    return
  end
  local entry = t[1] .. string.format('%06d', tonumber(t[2])) .. ' ' .. label
  for _, m in ipairs(members) do redis.call('HSET', holders, m, entry) end
  if redis.call('PTTL', holders) < tonumber(keep) then redis.call('PEXPIRE', holders, keep) end
end

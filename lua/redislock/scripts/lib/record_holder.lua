-- record_holder(key, t, token, label, ms): the holder record of a grant
-- (spliced by tools/gen_scripts.lua at "--@splice record_holder"): when
-- (t, the reply of TIME, as microseconds), whose (the token, so that a
-- reader tells it from a record of an earlier grant: only the lock's own
-- counts) and the label, as "<since> <token> <label>". It lives as the
-- lock does: the lease (ms) from the grant, renewed with the lock by every
-- extend (extend.lua: the key is the lock's .. ":holder"), deleted with it
-- by release; a holder that dies leaves it one lease, as it leaves the
-- lock. No label (""), no record.
local function record_holder(key, t, token, label, ms)
  if label ~= '' then
    redis.call('SET', key, t[1] .. string.format('%06d', tonumber(t[2])) .. ' ' .. token .. ' ' .. label, 'PX', ms)
  end
end

-- record_holder(key, t, token, label, ttl): the holder record of a grant
-- (spliced by tools/gen_scripts.lua at "--@splice record_holder"): when
-- (t, the reply of TIME, as microseconds), whose (the token, so that a
-- reader tells it from a record left by an earlier grant: only the lock's
-- own counts) and the label, as "<since> <token> <label>". It lives ttl ms
-- (as long as the fence counter), needing no renewal and no delete: the
-- lock's key alone says whether it holds. No label (""), no record.
local function record_holder(key, t, token, label, ttl)
  if label ~= '' then
    redis.call('SET', key, t[1] .. string.format('%06d', tonumber(t[2])) .. ' ' .. token .. ' ' .. label, 'PX', ttl)
  end
end

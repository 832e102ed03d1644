-- holder_of(key, token): the holder record at key (record_holder.lua) when
-- it is token's, the current holder's: its label, since when (microseconds
-- on the server's clock, a string) and for how long (ms); nil otherwise
-- (no record, or one left by an earlier grant). Spliced by
-- tools/gen_scripts.lua at "--@splice holder_of".
local function holder_of(key, token)
  local rec = token and redis.call('GET', key)
  if not rec then return nil end
  local since, rest = rec:match('^(%d+) (.*)$')
  if not since or rest:sub(1, #token + 1) ~= token .. ' ' then return nil end
  local t = redis.call('TIME')
  local held = (tonumber(t[1]) * 1000000 + tonumber(t[2]) - tonumber(since)) / 1000
  return rest:sub(#token + 2), since, math.max(0, math.floor(held))
end

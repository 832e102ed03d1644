-- redlock_inspect: what one Redlock master has for a lock (operators, CLI).
-- KEYS[1] lock key, KEYS[2] the holder record (redlock_acquire.lua)
-- Returns {token or false, pttl, label or false, since (µs on this
-- master's clock, a string) or false, held_ms or false}: the record only
-- when it is the token's.
local token = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local rec = token and redis.call('GET', KEYS[2])
if rec then
  local since, rest = rec:match('^(%d+) (.*)$')
  if since and rest:sub(1, #token + 1) == token .. ' ' then
    local t = redis.call('TIME')
    local held = (tonumber(t[1]) * 1000000 + tonumber(t[2]) - tonumber(since)) / 1000
    return {token, pttl, rest:sub(#token + 2), since, math.max(0, math.floor(held))}
  end
end
return {token, pttl, false, false, false}

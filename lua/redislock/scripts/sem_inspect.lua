-- sem_inspect: what Redis says about a semaphore now: its limit and every
-- permit, with their holders (sem_acquire.lua), in one round trip. Writes
-- nothing.
-- KEYS[1] permits (token -> lease end, ms), KEYS[2] the limit, KEYS[3] the
-- permits' holders, KEYS[4] waiting clients
-- ARGV[1] the most permits to list
-- Returns {limit in force (-1: none stored), permits in use, {label or
-- false, since (µs, a string) or false, held_ms or false, lease left ms,
-- ...} for the first ARGV[1] permits, waiters}.
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local after = '(' .. string.format('%.0f', math.floor(now_us / 1000))
local list = {}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], after, '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
for i = 1, #live, 2 do
  local entry = redis.call('HGET', KEYS[3], live[i])
  local s, label = false, false
  if entry then s, label = entry:match('^(%d+) (.*)$') end
  list[#list + 1] = label or false
  list[#list + 1] = s or false
  list[#list + 1] = s and math.max(0, math.floor((now_us - tonumber(s)) / 1000)) or false
  list[#list + 1] = math.max(0, math.floor(tonumber(live[i + 1]) - now_us / 1000))
end
local limit = redis.call('GET', KEYS[2])
return {limit and tonumber(limit) or -1, redis.call('ZCOUNT', KEYS[1], after, '+inf'), list,
  redis.call('ZCOUNT', KEYS[4], after, '+inf')}

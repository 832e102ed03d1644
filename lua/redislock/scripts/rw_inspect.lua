-- rw_inspect: what Redis says about a read-write lock now: the writer and
-- every reader, with their holders (rw_read.lua, rw_write.lua), in one
-- round trip. Writes nothing.
-- KEYS[1] writer key, KEYS[2] readers (token -> lease end, ms), KEYS[3]
-- writer-waiting marker, KEYS[4] the writer's holder record, KEYS[5] the
-- readers' holders, KEYS[6] waiting readers, KEYS[7] waiting writers
-- ARGV[1] the most readers to list
-- Returns {writer pttl (-2: none), writer label or false, its since (µs, a
-- string) or false, its held_ms or false, marker (1: a writer waits),
-- readers, {label or false, since or false, held_ms or false, lease
-- left ms, ...} for the first ARGV[1] readers, waiting readers, waiting
-- writers}.
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local after = '(' .. string.format('%.0f', math.floor(now_us / 1000))
local function held_for(since) return math.max(0, math.floor((now_us - tonumber(since)) / 1000)) end
local wpttl = redis.call('PTTL', KEYS[1])
local wlabel, wsince, wheld = false, false, false
local writer = redis.call('GET', KEYS[1])
local rec = writer and redis.call('GET', KEYS[4])
if rec then
  local s, rest = rec:match('^(%d+) (.*)$')
  if s and rest:sub(1, #writer + 1) == writer .. ' ' then
    wlabel, wsince, wheld = rest:sub(#writer + 2), s, held_for(s)
  end
end
local list = {}
local live = redis.call('ZRANGEBYSCORE', KEYS[2], after, '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
for i = 1, #live, 2 do
  local entry = redis.call('HGET', KEYS[5], live[i])
  local s, label = false, false
  if entry then s, label = entry:match('^(%d+) (.*)$') end
  local left = math.max(0, math.floor(tonumber(live[i + 1]) - now_us / 1000))
  list[#list + 1] = label or false
  list[#list + 1] = s or false
  list[#list + 1] = s and held_for(s) or false
  list[#list + 1] = left
end
return {wpttl, wlabel, wsince, wheld, redis.call('EXISTS', KEYS[3]), redis.call('ZCOUNT', KEYS[2], after, '+inf'),
  list, redis.call('ZCOUNT', KEYS[6], after, '+inf'), redis.call('ZCOUNT', KEYS[7], after, '+inf')}

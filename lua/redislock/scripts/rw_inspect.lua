-- rw_inspect: what Redis says about a read-write lock now: the writer and
-- every reader, with their holders (rw_read.lua, rw_write.lua), in one
-- round trip. Writes nothing.
-- KEYS[1] writer key, KEYS[2] readers (token -> lease end, ms), KEYS[3]
-- writer-waiting marker, KEYS[4] the writer's holder record, KEYS[5] the
-- readers' holders, KEYS[6] waiting readers, KEYS[7] waiting writers,
-- KEYS[8] a reentrant writer's grant (n, fence), KEYS[9] reentrant readers'
-- counts (rw_read_reentrant.lua)
-- ARGV[1] the most readers to list
-- Returns {writer pttl (-2: none), writer label or false, its since (µs, a
-- string) or false, its held_ms or false, marker (1: a writer waits),
-- readers, {label or false, since or false, held_ms or false, lease
-- left ms, ...} for the first ARGV[1] readers, waiting readers, waiting
-- writers, the writer's entries, the readers' entries (a reentrant
-- owner's counted)}.
--@splice holder_of
--@splice shares_of
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local after = '(' .. string.format('%.0f', math.floor(now_us / 1000))
local wpttl = redis.call('PTTL', KEYS[1])
local wlabel, wsince, wheld = holder_of(KEYS[4], redis.call('GET', KEYS[1]))
local list = shares_of(KEYS[2], KEYS[5], tonumber(ARGV[1]), now_us)
local writes = 0
if wpttl ~= -2 then writes = tonumber(redis.call('HGET', KEYS[8], 'n') or '1') end
local live = redis.call('ZRANGEBYSCORE', KEYS[2], after, '+inf', 'LIMIT', 0, 10000)
local reads = #live
for _, m in ipairs(live) do
  local n = redis.call('HGET', KEYS[9], m)
  if n then reads = reads + tonumber(n) - 1 end
end
return {wpttl, wlabel or false, wsince or false, wheld or false, redis.call('EXISTS', KEYS[3]),
  redis.call('ZCOUNT', KEYS[2], after, '+inf'), list, redis.call('ZCOUNT', KEYS[6], after, '+inf'),
  redis.call('ZCOUNT', KEYS[7], after, '+inf'), writes, reads}

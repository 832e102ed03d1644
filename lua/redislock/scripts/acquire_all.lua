-- acquire_all: take the locks of several names, every one or none, in one
-- atomic step (client:acquire_all): one token and one lease for them all,
-- a fence and a holder record per name, as acquire.lua gives one name.
--@keys variadic
-- KEYS: three per name, in the caller's order: its lock key, its fence
--   counter, its holder record (KEYS[1], KEYS[2], KEYS[3] for the first)
-- ARGV[1] owner token, ARGV[2] lease in milliseconds (the holder records'
-- too: they live as the locks do), ARGV[3] fence_ttl: how long (ms) a fence
-- counter outlives its last fence (next_fence), ARGV[4] the holder's label
-- ("" for none)
-- Returns {1, {fence, ...}} (one per name, in order) when all were taken,
-- {0, i, pttl} when the i-th name is held (pttl: its remaining lease in ms),
-- or {0, i, pttl, label, held_ms} when its holder has a label. Nothing is
-- written unless every name is free.
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice next_fence
--@splice record_holder
--@splice holder_of
local n = #KEYS / 3
for i = 1, n do
  local holder = redis.call('GET', KEYS[3 * i - 2])
  if holder then
    local pttl = redis.call('PTTL', KEYS[3 * i - 2])
    local label, _, held = holder_of(KEYS[3 * i], holder)
    if label then return {0, i, pttl, label, held} end
    return {0, i, pttl}
  end
end
local t = redis.call('TIME')
local fences = {}
for i = 1, n do
  redis.call('SET', KEYS[3 * i - 2], ARGV[1], 'PX', ARGV[2])
  record_holder(KEYS[3 * i], t, ARGV[1], ARGV[4], ARGV[2])   -- (lives as the lock)
  fences[i] = next_fence(KEYS[3 * i - 1], t, ARGV[3])
end
return {1, fences}

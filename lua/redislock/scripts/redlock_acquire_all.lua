-- redlock_acquire_all: take the locks of several names on one Redlock
-- master, every one or none (client:acquire_all on a Redlock client; a
-- master counts toward the quorum only when it granted the whole set). No
-- fence counter, as redlock_acquire.lua. Idempotent: sent again, it finds
-- the keys already ours and says so.
--@keys variadic
-- KEYS: two per name: its lock key, its holder record
-- ARGV[1] owner token, ARGV[2] lease in milliseconds, ARGV[3] the holder's
-- label ("" for none); a holder record lives as its lock does
-- Returns {1} when every name was taken (or already ours), {0, pttl} when
-- a name is someone else's, {0, pttl, label, held_ms} when that holder has
-- a label here. Nothing is written unless every name is free or ours.
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice record_holder
--@splice holder_of
local n = #KEYS / 2
for i = 1, n do
  local v = redis.call('GET', KEYS[2 * i - 1])
  if v and v ~= ARGV[1] then
    local pttl = redis.call('PTTL', KEYS[2 * i - 1])
    local label, _, held = holder_of(KEYS[2 * i], v)
    if label then return {0, pttl, label, held} end
    return {0, pttl}
  end
end
local t = redis.call('TIME')
for i = 1, n do
  redis.call('SET', KEYS[2 * i - 1], ARGV[1], 'PX', ARGV[2])
  if ARGV[3] ~= '' then record_holder(KEYS[2 * i], t, ARGV[1], ARGV[3], ARGV[2]) end
end
return {1}

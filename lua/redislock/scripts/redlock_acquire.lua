-- redlock_acquire: take the lock on one Redlock master. SET NX PX, and no
-- fence counter (a fence from one master orders nothing across masters)
-- or wake-up bookkeeping (a release reaches the masters at different
-- times: Redlock waiters retry with backoff instead). Idempotent: sent
-- again on a new connection after the old one was lost, it finds the key
-- already ours and says so. A grant records its holder on this master as
-- acquire.lua does (a reader counts only the record of the token that a
-- majority holds).
-- KEYS[1] lock key, KEYS[2] the holder record
-- ARGV[1] owner token, ARGV[2] lease in milliseconds, ARGV[3] the holder's
-- label ("" for none)
-- Returns {1} when taken (or already ours), {0, pttl} when someone else
-- holds it, {0, pttl, label, held_ms} when that holder has a label here.
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice record_holder
--@splice holder_of
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return {1}
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if ARGV[3] ~= '' then record_holder(KEYS[2], redis.call('TIME'), ARGV[1], ARGV[3], ARGV[2]) end
  return {1}
end
local pttl = redis.call('PTTL', KEYS[1])
local label, _, held = holder_of(KEYS[2], redis.call('GET', KEYS[1]))
if label then return {0, pttl, label, held} end
return {0, pttl}

-- rw_release_reentrant: leave a reentrant read-write lock once (a read
-- share or the write side: rw_read_reentrant.lua, rw_write_reentrant.lua):
-- the count goes down, and at zero the share or the writer key goes and
-- waiters are woken as a plain release wakes them (release_share.lua: the
-- writer's release every waiting reader and one writer, the last reader's
-- one writer). Only a hold of the current grant counts: a hold of an
-- earlier grant to the same owner, lost since, never releases a newer one.
-- KEYS[1] writer key, KEYS[2] readers, KEYS[3] the writer's grant (hash:
-- n, fence), KEYS[4] the readers' counts, KEYS[5] the readers' holders,
-- KEYS[6] waiting readers, KEYS[7] their signal list, KEYS[8] waiting
-- writers, KEYS[9] their signal list
-- ARGV[1] owner token, ARGV[2] "write" or "read", ARGV[3] the hold's grant
-- (its fence, or its read grant)
-- Returns 1 when released, 2 when still held (entered more than once), 0
-- when gone, someone else's, or another grant's.
--@splice wake_waiters
--@splice leave_grant
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[2] == 'write' then
  local left = leave_grant(KEYS[1], KEYS[3], ARGV[1], ARGV[3])
  if left ~= 1 then return left end
  wake_waiters(KEYS[6], KEYS[7], 1000, now)
  wake_waiters(KEYS[8], KEYS[9], 1, now)
  return 1
end
local ends = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]) or '0')
if ends <= now or redis.call('HGET', KEYS[4], ARGV[1] .. ':g') ~= ARGV[3] then return 0 end
if redis.call('HINCRBY', KEYS[4], ARGV[1], -1) > 0 then return 2 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[5], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1], ARGV[1] .. ':g')
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) == 0 then wake_waiters(KEYS[8], KEYS[9], 1, now) end
return 1

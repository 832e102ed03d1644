-- fenced_set: write a resource only if the writer's fence is not older than
-- the newest fence the resource has seen (Kleppmann's fencing token, done
-- atomically in Redis). A holder paused past its lease comes back with an old
-- fence and is refused.
-- KEYS[1] the resource: one hash with its value, the newest fence seen and
--   the write version, so that eviction can never drop the fence and keep
--   the value (which would let a stale writer in)
-- ARGV[1] value, ARGV[2] writer's fence (a positive integer)
-- Returns the write's version (1, 2, ...: the order writes were accepted),
-- or 0 when the fence is stale.
local fence = tonumber(ARGV[2])
local seen = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if fence < seen then
  return 0
end
redis.call('HSET', KEYS[1], 'fence', ARGV[2], 'value', ARGV[1])
return redis.call('HINCRBY', KEYS[1], 'version', 1)

-- fenced_set: write a resource only if the writer's fence is not older than
-- the newest fence the resource has seen (Kleppmann's fencing token, done
-- atomically in Redis). A holder paused past its lease comes back with an old
-- fence and is refused.
-- KEYS[1] resource value, KEYS[2] newest fence seen, KEYS[3] write version
-- ARGV[1] value, ARGV[2] writer's fence (a positive integer)
-- Returns the write's version (1, 2, ...: the order writes were accepted),
-- or 0 when the fence is stale.
local fence = tonumber(ARGV[2])
local seen = tonumber(redis.call('GET', KEYS[2]) or '0')
if fence < seen then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], ARGV[1])
return redis.call('INCR', KEYS[3])

-- fenced_get: read a resource as the holder of `fence`, and from now on
-- refuse writers with an older fence. Reading through the fence closes the
-- gap a write-only check leaves: a paused old holder that writes after the
-- new holder has read (but before it has written) is refused too.
-- KEYS[1] the resource: one hash with its value, the newest fence seen and
--   the write version, so that they live and die together
-- ARGV[1] reader's fence (a positive integer)
-- Returns {1, value or false}, or {0} when the fence is stale.
local fence = tonumber(ARGV[1])
local seen = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if fence < seen then
  return {0}
end
if fence > seen then
  redis.call('HSET', KEYS[1], 'fence', ARGV[1])
end
return {1, redis.call('HGET', KEYS[1], 'value')}

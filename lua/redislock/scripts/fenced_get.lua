-- fenced_get: read a resource as the holder of `fence`, and from now on
-- refuse writers with an older fence. Reading through the fence closes the
-- gap a write-only check leaves: a paused old holder that writes after the
-- new holder has read (but before it has written) is refused too.
-- KEYS[1] resource value, KEYS[2] newest fence seen
-- ARGV[1] reader's fence (a positive integer)
-- Returns {1, value or false}, or {0} when the fence is stale.
local fence = tonumber(ARGV[1])
local seen = tonumber(redis.call('GET', KEYS[2]) or '0')
if fence < seen then
  return {0}
end
if fence > seen then
  redis.call('SET', KEYS[2], ARGV[1])
end
return {1, redis.call('GET', KEYS[1])}

-- adopt: take over a lock held with `token` (another process's, e.g. the
-- job started by `redislock run` through REDISLOCK_TOKEN). Only the
-- holder's token does it. The lease is brought up to the adopter's, never
-- shortened: the first holder may still count on its own. The adopter gets
-- a fence of its own, drawn now by the rule of acquire.lua: it is a new
-- holder in the order of fences, above the first holder's (whose writes a
-- fenced resource refuses once the adopter has written), and it is a real
-- fence even when the lock was taken without one (fence = false).
-- KEYS[1] lock key, KEYS[2] fence counter
-- ARGV[1] token, ARGV[2] lease in ms, ARGV[3] fence_ttl in ms
-- Returns {1, fence} when adopted, {0} when the key is gone or someone
-- else's.
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice next_fence
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0}
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[1] .. ':holder', ARGV[2])   -- (its holder record lives as it does)
end
return {1, next_fence(KEYS[2], redis.call('TIME'), ARGV[3])}

-- adopt: take over a lock held with `token` (another process's, e.g. the
-- job started by `redislock run` through REDISLOCK_TOKEN), and read its
-- fence. Only the holder's token does it. The lease is brought up to the
-- adopter's, never shortened: the first holder may still count on its own.
-- KEYS[1] lock key, KEYS[2] fence counter
-- ARGV[1] token, ARGV[2] lease in ms
-- Returns {1, fence} when adopted, {0} when the key is gone or someone
-- else's.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0}
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local f = redis.call('GET', KEYS[2])
return {1, f and tonumber(f) or 0}

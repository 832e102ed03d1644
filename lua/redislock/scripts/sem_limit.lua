-- sem_limit: store a semaphore's limit (client:semaphore(name, permits))
-- and say how many permits are in use. The latest call's limit is the one
-- in force; it lives ARGV[2] ms after that call (fence_ttl), after which an
-- acquire falls back to the limit its own client was opened with.
-- KEYS[1] permits (token -> lease end, ms), KEYS[2] the limit
-- ARGV[1] permits (a positive integer, or "" to only read), ARGV[2] its
-- life in ms
-- Returns {limit in force, permits in use}.
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ARGV[1] ~= '' then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
end
local limit = redis.call('GET', KEYS[2])
return {limit and tonumber(limit) or -1, redis.call('ZCARD', KEYS[1])}

-- sem_limit: store a semaphore's limit (client:semaphore(name, permits))
-- and say how many permits are in use. The latest call's limit is the one
-- in force; it lives ARGV[2] ms after that call (7 days), after which an
-- acquire falls back to the limit its own client was opened with. With
-- ARGV[3] "nx" the limit is stored only when none is (Redisson's
-- trySetPermits). A limit stored that leaves permits free wakes as many
-- waiters at once (they would otherwise try again only at a lease end or
-- their deadline).
-- KEYS[1] permits (token -> lease end, ms), KEYS[2] the limit, KEYS[3]
-- waiting clients (token -> until when it blocks, ms), KEYS[4] their signal
-- list
-- ARGV[1] permits (a positive integer, or "" to only read), ARGV[2] its
-- life in ms, ARGV[3] "nx" (only if none is stored) or ""
-- Returns {limit in force (-1: none stored), permits in use}.
--@splice wake_waiters
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local stored = false
if ARGV[1] ~= '' then
  if ARGV[3] == 'nx' then
    stored = redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2], 'NX') ~= false
  else
    redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
    stored = true
  end
end
local limit = redis.call('GET', KEYS[2])
local in_use = redis.call('ZCARD', KEYS[1])
if stored and tonumber(limit) > in_use then
  wake_waiters(KEYS[3], KEYS[4], tonumber(limit) - in_use, now)
end
return {limit and tonumber(limit) or -1, in_use}

-- rw_break: remove the writer and every reader of a read-write lock,
-- whoever holds them (rw:break_lock, an operator's tool), reentrant counts
-- included, and wake every waiter. The holders learn it at their next
-- renewal.
-- KEYS[1] writer key, KEYS[2] readers, KEYS[3] writer-waiting marker,
-- KEYS[4] the writer's grant, KEYS[5] the readers' counts, KEYS[6] the
-- readers' holders, KEYS[7] waiting readers, KEYS[8] their signal list,
-- KEYS[9] waiting writers, KEYS[10] their signal list
-- Returns 1 when a writer or a reader was removed, 0 when none held it.
--@splice wake_waiters
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local had = redis.call('EXISTS', KEYS[1]) + redis.call('ZCARD', KEYS[2])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
wake_waiters(KEYS[7], KEYS[8], 1000, now)
wake_waiters(KEYS[9], KEYS[10], 1000, now)
return had > 0 and 1 or 0

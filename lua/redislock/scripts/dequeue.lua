-- dequeue: a fair waiter gives up its place in line. (If a release handed
-- it the lock at that very moment, the client then releases it, which hands
-- it on to the next in line.)
-- KEYS[1] queue, KEYS[2] queue deadlines, KEYS[3] queued leases
-- ARGV[1] the waiter's token
-- Returns 1.
redis.call('LREM', KEYS[1], 0, ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1

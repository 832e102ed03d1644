-- sem_limit: store a semaphore's limit (client:semaphore(name, permits)).
-- It lives as long as the permits set would at most plus a margin, and is
-- set again by every client that opens the semaphore, so the latest
-- opener's limit is the one in force.
-- KEYS[1] the limit
-- ARGV[1] permits (a positive integer)
-- Returns the limit now in force.
redis.call('SET', KEYS[1], ARGV[1])
return tonumber(ARGV[1])

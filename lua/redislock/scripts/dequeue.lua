-- dequeue: a fair waiter gives up its place in line. If the lock is free,
-- the wakeup it may have been owed passes to the new first in line, so a
-- waiter that times out never strands the ones behind it.
-- KEYS[1] lock key, KEYS[2] queue, KEYS[3] queue deadlines,
-- KEYS[4] signal list (a waiter's own list is this name plus ":" .. token)
-- ARGV[1] the waiter's token
-- Returns 1.
redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  local head = redis.call('LINDEX', KEYS[2], 0)
  if head then
    local signal = KEYS[4] .. ':' .. head
    redis.call('RPUSH', signal, '1')
    redis.call('LTRIM', signal, -1, -1)
    redis.call('PEXPIRE', signal, 10000)
  end
end
return 1

-- acquire: take the lock and draw its fencing token in one atomic step.
-- KEYS[1] lock key, KEYS[2] fence counter (same hash tag, same Cluster slot)
-- ARGV[1] owner token, ARGV[2] lease in milliseconds
-- Returns {1, fence} when granted, {0, pttl} when someone else holds it
-- (pttl: the holder's remaining lease in ms, so a waiter never sleeps past it).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('INCR', KEYS[2])}
end
return {0, redis.call('PTTL', KEYS[1])}

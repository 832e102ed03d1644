-- redlock_acquire: take the lock on one Redlock master. SET NX PX, and no
-- fence counter (a fence from one master orders nothing across masters)
-- or wake-up bookkeeping (a release reaches the masters at different
-- times: Redlock waiters retry with backoff instead). Idempotent: sent
-- again on a new connection after the old one was lost, it finds the key
-- already ours and says so.
-- KEYS[1] lock key
-- ARGV[1] owner token, ARGV[2] lease in milliseconds
-- Returns {1} when taken (or already ours), {0, pttl} when someone else
-- holds it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1}
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1}
end
return {0, redis.call('PTTL', KEYS[1])}

-- release: compare-and-delete; only the owner's token removes the key.
-- Then, if someone waits (the waiters flag, which fair waiters set too), and
-- fair waiters are queued, hand the lock straight to the first live
-- one: the lock is set to its token with its lease and a new fence, and the
-- fence is pushed to that waiter's own list, where its BLPOP returns it as
-- the grant (one hop, no retry race). Otherwise, if non-fair waiters wait
-- (the waiters flag is set), leave one wakeup in their shared list; one is
-- enough: whoever takes it retries at once, and the next release leaves
-- another.
-- KEYS[1] lock key, KEYS[2] waiters flag, KEYS[3] signal list,
-- KEYS[4] fair queue, KEYS[5] its deadlines, KEYS[6] its leases (token ->
-- "ttl ms[ label]"), KEYS[7] fence counter, KEYS[8] the holder record
-- (acquire.lua; a hand-over records the new holder there)
-- (a fair waiter's own list is KEYS[3] .. ':' .. token: same hash tag)
-- ARGV[1] owner token, ARGV[2] fence_ttl in ms (for a hand-over's fence)
-- The holder record goes with the lock (a hand-over writes the new one).
-- Returns 1 when deleted, 0 when the key is gone or belongs to someone else.
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice next_fence
--@splice record_holder
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[8])
-- Every waiter, fair or not, keeps the waiters flag set while it waits:
-- one check, and the uncontended release is done.
local waiting = redis.call('PTTL', KEYS[2])
if waiting <= 0 then
  return 1
end
local head = redis.call('LINDEX', KEYS[4], 0)
if head then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  while head do
    local deadline = redis.call('ZSCORE', KEYS[5], head)
    local lease = redis.call('HGET', KEYS[6], head)
    local ttl, label = (lease or ''):match('^(%d+) ?(.*)$')
    redis.call('LPOP', KEYS[4])
    redis.call('ZREM', KEYS[5], head)
    redis.call('HDEL', KEYS[6], head)
    if deadline and tonumber(deadline) > now and ttl then
      redis.call('SET', KEYS[1], head, 'PX', ttl)
      record_holder(KEYS[8], t, head, label, ttl)
      local own = KEYS[3] .. ':' .. head
      redis.call('RPUSH', own, next_fence(KEYS[7], t, ARGV[2]))
      redis.call('PEXPIRE', own, 60000)
      return 1
    end
    head = redis.call('LINDEX', KEYS[4], 0)
  end
end
redis.call('RPUSH', KEYS[3], '1')
redis.call('LTRIM', KEYS[3], -1, -1)
redis.call('PEXPIRE', KEYS[3], waiting)
return 1

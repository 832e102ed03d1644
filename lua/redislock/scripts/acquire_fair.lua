-- acquire_fair: take the lock only in arrival order (fair = true). Also the
-- waiter's heartbeat while it waits.
-- Waiters queue up in a list; only the first in line may take a free lock,
-- and release hands the lock straight to the first live waiter (see
-- release.lua). A waiter that stops trying (gave up without leaving, or
-- died) keeps its place only until its deadline, which every attempt pushes
-- forward.
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] queue (list of tokens),
-- KEYS[4] queue deadlines (sorted set token -> ms), KEYS[5] queued leases
-- (hash token -> "ttl ms[ label]"), KEYS[6] this waiter's own signal list,
-- KEYS[7] the waiters flag (set while the line exists: release looks at
-- the line only when it is set), KEYS[8] the holder record (acquire.lua)
-- ARGV[1] owner token (also the waiter's place in line), ARGV[2] lease in ms,
-- ARGV[3] how long in ms the waiter keeps its place without trying again,
-- ARGV[4] the lease in ms a release hands over with the lock (short, so a
-- waiter that died in line blocks the name only briefly; the new holder's
-- watchdog renews it to the full lease at once), ARGV[5] fence_ttl in ms,
-- ARGV[6] the holder's label ("" for none: a release that hands the lock
-- over records it too)
-- Returns {1, fence} when taken now, {1, fence, pttl} when a release handed
-- it to us since our last attempt (pttl: what remains of that lease),
-- {0, pttl} otherwise (pttl -2: the lock
-- is free but someone is ahead in line).
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice next_fence
--@splice record_holder
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('GET', KEYS[1]) == ARGV[1] then
  -- A release handed it to us (we missed the wakeup). Its fence is the one
  -- it pushed to our own list (the counter may have expired or moved on
  -- since), and the lease is what remains of the one handed over. Every
  -- element is a number: a nil would cut the reply short, and a reply
  -- without the lease left would read as a fresh grant of the full ttl.
  local fence = tonumber(redis.call('LINDEX', KEYS[6], -1) or redis.call('GET', KEYS[2]) or '0') or 0
  redis.call('DEL', KEYS[6])
  return {1, fence, math.max(redis.call('PTTL', KEYS[1]), 0)}
end
local head = redis.call('LINDEX', KEYS[3], 0)
while head do
  local deadline = redis.call('ZSCORE', KEYS[4], head)
  if deadline and tonumber(deadline) > now then break end
  redis.call('LPOP', KEYS[3])
  redis.call('ZREM', KEYS[4], head)
  redis.call('HDEL', KEYS[5], head)
  head = redis.call('LINDEX', KEYS[3], 0)
end
if (not head or head == ARGV[1]) and
    redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if head then
    redis.call('LPOP', KEYS[3])
    redis.call('ZREM', KEYS[4], ARGV[1])
    redis.call('HDEL', KEYS[5], ARGV[1])
  end
  record_holder(KEYS[8], t, ARGV[1], ARGV[6], ARGV[2])
  return {1, next_fence(KEYS[2], t, ARGV[5])}
end
if not redis.call('ZSCORE', KEYS[4], ARGV[1]) then
  -- (Re-)entering the line: a hand-over left in our list from before (we
  -- missed it, and its lease ran out) must not be taken for a new one.
  redis.call('DEL', KEYS[6])
  redis.call('RPUSH', KEYS[3], ARGV[1])
end
local keep = tonumber(ARGV[3])
redis.call('ZADD', KEYS[4], now + keep, ARGV[1])
redis.call('HSET', KEYS[5], ARGV[1], ARGV[6] == '' and ARGV[4] or (ARGV[4] .. ' ' .. ARGV[6]))
-- An abandoned queue disappears on its own; the flag lives as long.
for i = 3, 5 do redis.call('PEXPIRE', KEYS[i], keep + 60000) end
if redis.call('PTTL', KEYS[7]) < keep + 60000 then
  redis.call('SET', KEYS[7], '1', 'PX', keep + 60000)
end
return {0, redis.call('PTTL', KEYS[1])}

-- release_share: give back a share of a read-write lock or a semaphore (a
-- reader, a permit: a member of a set of leases; or the writer's key, or a
-- waiting writer's marker: a plain key), only with its owner's token, and
-- wake who can use it. Waiters of the shared primitives register with a
-- deadline (token -> until when it blocks), so a release knows how many
-- block and can wake one or all of them: each takes one wakeup from the
-- signal list; no more wakeups are kept than there are waiters.
-- KEYS[1] the set of leases or the key, KEYS[2]/KEYS[3] the first group of
-- waiters and its signal list, KEYS[4]/KEYS[5] the second group's, KEYS[6]
-- the members' holders (a member's entry goes with it; a key's holder
-- record, KEYS[1] .. ':holder', goes with the key)
-- ARGV[1] token, ARGV[2] "member" (KEYS[1] is a set) or "key",
-- ARGV[3]/ARGV[4] how to wake the first/second group: "one", "all",
-- "if_empty" (one, when no member is left in KEYS[1]), or "none"
-- Returns 1 when it was ours and its lease still ran, 0 otherwise.
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice wake_waiters
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local held
if ARGV[2] == 'member' then
  local ends = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0')
  if ends == 0 then return 0 end
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[6], ARGV[1])
  held = ends > now
else
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
  redis.call('DEL', KEYS[1], KEYS[1] .. ':holder')
  held = true
end
local function wake(waiters, signal, how)
  if how == 'none' then return end
  if how == 'if_empty' then
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
    if redis.call('ZCARD', KEYS[1]) > 0 then return end
  end
  -- (all: as many as wait, wake_waiters' most)
  wake_waiters(waiters, signal, how == 'all' and 1000 or 1, now)
end
wake(KEYS[2], KEYS[3], ARGV[3])
wake(KEYS[4], KEYS[5], ARGV[4])
return held and 1 or 0

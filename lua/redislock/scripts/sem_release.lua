-- sem_release: give back a permit of a counting semaphore (sem_acquire.lua),
-- only with its token, and wake one waiter per permit it held. Also what
-- sem:release_permit(id) sends, from any client: the id is the token.
-- KEYS[1] permits (member -> lease end, ms), KEYS[2] waiting clients (token
-- -> until when it blocks, ms), KEYS[3] their signal list, KEYS[4] the
-- permits' holders (member -> "<since us> <label>")
-- ARGV[1] the permit's token ("<random>" for one, "<random>*n" for n)
-- Returns 1 when it was ours and its lease still ran, 0 otherwise.
--@splice permit_members
--@splice wake_waiters
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local members = permit_members(ARGV[1])
if not members then return 0 end
local held, found = true, 0
for _, m in ipairs(members) do
  local ends = tonumber(redis.call('ZSCORE', KEYS[1], m) or '0')
  if ends > 0 then
    found = found + 1
    if ends <= now then held = false end
  end
end
if found == 0 then return 0 end
redis.call('ZREM', KEYS[1], unpack(members))
redis.call('HDEL', KEYS[4], unpack(members))
wake_waiters(KEYS[2], KEYS[3], #members, now)
return (held and found == #members) and 1 or 0

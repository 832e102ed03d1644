-- zset_renew: renew one member's lease in a set of leases (a reader of a
-- read-write lock, a permit of a semaphore): compare-and-expire on the
-- server's clock. A member whose lease already ran out is never brought
-- back: its share may have been given to someone else.
-- n permits taken at once (token "<random>*n", permit_members.lua) are n
-- members: all are renewed, or none when one is gone.
-- KEYS[1] the set (member -> lease end, ms of the server's clock)
-- ARGV[1] the member's token, ARGV[2] the lease in milliseconds
-- Returns 1 when renewed, 0 when the member is gone or its lease is over.
--@splice permit_members
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice set_leases
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- (a member of that name is itself: a reentrant reader's owner may end in "*2")
local members = redis.call('ZSCORE', KEYS[1], ARGV[1]) and {ARGV[1]} or permit_members(ARGV[1])
if not members then return 0 end
for _, m in ipairs(members) do
  local ends = tonumber(redis.call('ZSCORE', KEYS[1], m) or '0')
  if ends <= now then
    return 0
  end
end
set_leases(KEYS[1], members, tonumber(ARGV[2]), now)
return 1

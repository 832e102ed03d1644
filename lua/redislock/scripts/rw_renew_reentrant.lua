-- rw_renew_reentrant: renew a reentrant reader's share of a read-write
-- lock (rw_read_reentrant.lua; the watchdog's renewal of it, and its
-- extend): zset_renew.lua's compare-and-expire on the server's clock for
-- the owner's one member, never bringing back a member whose lease already
-- ran out, with the readers' counts (the hash KEYS[1] .. ':counts': owner
-- -> n, owner .. ':g' -> the grant) kept at least as long as the lease:
-- they live as the shares they count, so a share renewed past its first
-- lease keeps its count and grant, and those of an owner that died expire
-- with its lease. (zset_renew.lua, which plain readers and permits renew
-- with, is left as it is: their renewals send nothing more.)
-- KEYS[1] the readers (member -> lease end, ms of the server's clock)
-- ARGV[1] the owner's token (its member: whatever it ends in, never a
-- permit's "*n"), ARGV[2] the lease in milliseconds
-- Returns 1 when renewed, 0 when the member is gone or its lease is over.
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice set_leases
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0') <= now then
  return 0
end
set_leases(KEYS[1], {ARGV[1]}, tonumber(ARGV[2]), now, KEYS[1] .. ':counts')
return 1

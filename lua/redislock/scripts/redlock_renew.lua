-- redlock_renew: the watchdog's renewal of a Redlock lock on one master,
-- sent to every master in every round, whatever the master said before.
-- Where the key holds our token it is renewed for the full lease. Where it
-- is gone (a restart without persistence, an eviction, an early expiry) it
-- is taken back with SET NX, for the validity left (ARGV[3]: how long the
-- majority behind the lock holds it still, never a fresh lease). Where
-- someone else's value is there (most often a rival's attempt, which holds
-- a master for a moment before it fails and releases) nothing is done:
-- this master counts as "not held" in this round, and the next round asks
-- again.
-- Why taking a master back is safe: the watchdog sends this only while the
-- lock is held (a majority confirmed it, at the acquire or in the last
-- round, and its lease has time left), never once the release was sent.
-- A rival needs a majority too and cannot have one while we do, and SET NX
-- takes no master from anyone: a claim only restores a master of ours, and
-- for no longer than the majority holds the lock anyway. (A claim already
-- on the wire when the release is sent, and run after it, leaves our key
-- on that one master for at most that validity: it blocks that master,
-- never makes a second holder.)
-- KEYS[1] lock key
-- ARGV[1] owner token, ARGV[2] lease in milliseconds, ARGV[3] validity left
-- in milliseconds (0: take nothing back)
-- Returns 1 when renewed, 3 when taken back, 2 when the key is gone and
-- ARGV[3] is 0, 0 when someone else's.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1] .. ':holder', ARGV[2])   -- (its holder record, redlock_acquire)
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if v then return 0 end
local left = tonumber(ARGV[3])
if left and left > 0 and redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[3]) then
  return 3
end
return 2

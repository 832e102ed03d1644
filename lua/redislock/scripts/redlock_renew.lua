-- redlock_renew: the watchdog's renewal of a Redlock lock on one master.
-- Compare-and-expire, telling apart a key that is gone from one that is
-- someone else's: the watchdog counts a missing key as "not held" in this
-- round, and only once a round (or the acquire) has confirmed a majority
-- does it take the key back on that master (redlock_claim.lua).
-- KEYS[1] lock key
-- ARGV[1] owner token, ARGV[2] lease in milliseconds
-- Returns 1 when renewed, 2 when the key is gone, 0 when someone else's.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if not v then return 2 end
return 0

-- redlock_claim: take a Redlock lock back on one master that lost its key
-- (a restart without persistence, an eviction, an early expiry) while the
-- previous renewal round had confirmed our token on a majority, or that
-- refused the acquire (a rival's attempt was there), which confirmed one
-- too, at the first renewal. SET NX
-- arbitrates as in any acquire: if a rival took this master meanwhile, it
-- keeps it and we count "not held" here. A rival needs a majority too, so
-- while a majority holds our token no rival can be granted, and taking a
-- minority master back only restores what we hold (the spec shows it).
-- KEYS[1] lock key
-- ARGV[1] owner token, ARGV[2] lease in milliseconds
-- Returns 1 when renewed (it was ours after all), 3 when taken back, 0
-- when someone else's.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if not v and redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 3
end
return 0

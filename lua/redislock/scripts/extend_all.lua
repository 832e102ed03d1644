-- extend_all: compare-and-expire the locks of a set (acquire_all.lua), all
-- or none: each key must still hold the set's token, and its lease is then
-- set to the new one. A set with one name gone is not extended anywhere:
-- it is not held.
--@keys variadic
-- KEYS: the lock key of each name
-- ARGV[1] owner token, ARGV[2] the lease in milliseconds
-- Returns 1 when every one was extended, 0 when one is gone or someone
-- else's.
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i] .. ':holder', ARGV[2])   -- (its holder record lives as it does)
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1

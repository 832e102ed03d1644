-- redlock_release: compare-and-delete on one Redlock master.
-- KEYS[1] lock key
-- ARGV[1] owner token
-- Returns 1 when deleted, 0 when the key is gone or someone else's.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1] .. ':holder')   -- (its holder record goes with it)
  return redis.call('DEL', KEYS[1])
end
return 0

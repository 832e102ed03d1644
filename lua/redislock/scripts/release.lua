-- release: compare-and-delete; only the owner's token removes the key.
-- KEYS[1] lock key
-- ARGV[1] owner token
-- Returns 1 when deleted, 0 when the key is gone or belongs to someone else.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0

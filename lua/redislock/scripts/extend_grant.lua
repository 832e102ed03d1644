-- extend_grant: the watchdog's renewal of a reentrant lock or a reentrant
-- rwlock's writer (1 key, token, ttl, as extend.lua): compare-and-expire,
-- the holder record (KEYS[1] .. ':holder') and the grant (KEYS[1] ..
-- ':grant': n, fence; new_grant.lua) renewed with the lock, so that both
-- live as it does however long the watchdog keeps it, and a holder that
-- dies leaves neither behind. Only the owner's token renews, as with
-- extend.lua (the holds of an earlier grant to the same owner are taken off
-- the watchdog when a newer grant is seen: reentrant.lua, rwlock.lua); a
-- key that already expired is never brought back.
-- KEYS[1] lock key (a reentrant lock's, or a reentrant rwlock's writer key)
-- ARGV[1] owner token, ARGV[2] new lease in milliseconds
-- Returns 1 when renewed, 0 when the key is gone or belongs to someone else.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1] .. ':holder', ARGV[2])
  redis.call('PEXPIRE', KEYS[1] .. ':grant', ARGV[2])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0

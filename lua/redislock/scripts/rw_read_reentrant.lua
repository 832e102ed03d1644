-- rw_read_reentrant: take a read share of a read-write lock as an owner
-- that may take it again (client:rwlock(name, {reentrant = true})): the
-- owner's share is one member of the readers' set, its token the owner's,
-- and its entries are counted. The owner enters again whatever waits
-- (writer preference would have it wait for a writer that waits for it),
-- and the writer may read while it writes (a downgrade).
-- KEYS[1] writer key, KEYS[2] readers (token -> lease end, ms), KEYS[3]
-- writer-waiting marker, KEYS[4] waiting readers (token -> until when it
-- blocks, ms), KEYS[5] the readers' holders, KEYS[6] the readers' counts
-- (owner -> n, owner .. ':g' -> the grant: when it was made, µs; KEYS[2]
-- .. ':counts', where rw_renew_reentrant.lua finds it; it lives at least as
-- long as every share it counts, raised with each lease by set_leases, so
-- an owner that died leaves its entries to expire; a fresh grant
-- overwrites an entry left by a share that ran out)
-- ARGV[1] owner token, ARGV[2] lease in ms, ARGV[3] how long (ms) the
-- caller will block for a wakeup if it is not taken (0: it will not),
-- ARGV[4] how long (ms) the holders' hash lives after a grant, ARGV[5] the
-- holder's label ("" for none)
-- Returns {1, grant, n} when taken (n 1) or entered again, {0, ms} when
-- not (as rw_read.lua).
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice add_waiter
--@splice drop_lapsed
--@splice set_leases
--@splice share_holders
--@splice reader_refused
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- readers whose lease ran out: gone, their holders' entries and their
-- owners' counts with them
drop_lapsed(KEYS[2], KEYS[5], now, KEYS[6])
local lease = tonumber(ARGV[2])
local grant = redis.call('HGET', KEYS[6], ARGV[1] .. ':g')
local live = redis.call('ZSCORE', KEYS[2], ARGV[1])
if live and grant then
  local n = redis.call('HINCRBY', KEYS[6], ARGV[1], 1)
  if tonumber(live) < now + lease then
    set_leases(KEYS[2], {ARGV[1]}, lease, now, KEYS[6])
  end
  return {1, tonumber(grant), n}
end
if live then
  -- The owner's share lives and its entries do not (renewed by a client
  -- of an earlier version, whose renewals leave the counts to expire): a
  -- grant over it would count its holds from 1, and their release would
  -- end the share under that client's hold, letting a writer in. Refused
  -- until that share ends.
  return {0, math.max(tonumber(live) - now, 1)}
end
-- (the writer reads while it writes: a downgrade)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  local refused = reader_refused(KEYS[1], KEYS[3], KEYS[4], ARGV[1], tonumber(ARGV[3]), now)
  if refused then return refused end
end
grant = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('HSET', KEYS[6], ARGV[1], 1, ARGV[1] .. ':g', grant)
set_leases(KEYS[2], {ARGV[1]}, lease, now, KEYS[6])   -- (after the HSET: the counts live as the lease)
redis.call('ZREM', KEYS[4], ARGV[1])
share_holders(KEYS[5], {ARGV[1]}, t, ARGV[5], ARGV[4])
return {1, tonumber(grant), 1}

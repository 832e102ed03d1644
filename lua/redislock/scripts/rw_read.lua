-- rw_read: take a read share of a read-write lock. Many readers, or one
-- writer; and writers are not starved: while a writer waits (it leaves a
-- short-lived marker at every attempt), new readers wait too, so the
-- readers in place drain and the writer gets its turn.
-- KEYS[1] writer key, KEYS[2] readers (token -> lease end on the server's
-- clock, ms), KEYS[3] writer-waiting marker, KEYS[4] waiting readers
-- (token -> until when it blocks, ms), KEYS[5] the readers' holders (token
-- -> "<since us> <label>": an entry goes with its reader, here when its
-- lease ran out, in release_share.lua when it is released)
-- ARGV[1] reader token, ARGV[2] lease in ms, ARGV[3] how long (ms) the
-- caller will block for a wakeup if it is not taken (0: it will not),
-- ARGV[4] how long (ms) the holders' hash lives after a grant, ARGV[5] the
-- holder's label ("" for none)
-- Returns {1} when taken, {0, ms} when not (ms: until the writer's lease or
-- marker ends; a writer's release wakes the waiting readers sooner).
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice add_waiter
--@splice drop_lapsed
--@splice set_leases
--@splice share_holders
--@splice reader_refused
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- readers whose lease ran out: gone, their holders' entries with them
drop_lapsed(KEYS[2], KEYS[5], now)
local refused = reader_refused(KEYS[1], KEYS[3], KEYS[4], ARGV[1], tonumber(ARGV[3]), now)
if refused then return refused end
set_leases(KEYS[2], {ARGV[1]}, tonumber(ARGV[2]), now)
redis.call('ZREM', KEYS[4], ARGV[1])
share_holders(KEYS[5], {ARGV[1]}, t, ARGV[5], ARGV[4])
return {1}

-- sem_acquire: take one permit of a counting semaphore. Each permit is a
-- lease of its own (token -> lease end on the server's clock), so a crashed
-- holder's permit comes back at its lease end. The limit is the one stored
-- by the latest client:semaphore(name, permits) (ARGV[4] is used only when
-- none is stored): lowering it revokes no permit, the extra ones drain as
-- they are released or expire.
-- KEYS[1] permits (token -> lease end, ms), KEYS[2] the limit, KEYS[3]
-- waiting clients (token -> until when it blocks, ms), KEYS[4] the permits'
-- holders (token -> "<since us> <label>", as rw_read.lua's readers)
-- ARGV[1] token ("<random>*n" for n permits at once: permit_members.lua),
-- ARGV[2] lease in ms, ARGV[3] how long (ms) the caller will
-- block for a wakeup if it is not taken (0: it will not), ARGV[4] the limit
-- when none is stored, ARGV[5] how long (ms) the holders' hash lives after
-- a grant, ARGV[6] the holder's label ("" for none)
-- Returns {1, in_use} when taken, {0, ms} when not (ms: until the first
-- lease ends). n permits are taken all at once or none.
--@splice permit_members
if redis.replicate_commands then redis.replicate_commands() end -- TIME before writes (Redis < 7)
--@splice add_waiter
--@splice drop_lapsed
--@splice set_leases
--@splice share_holders
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- permits whose lease ran out: back, their holders' entries gone with them
drop_lapsed(KEYS[1], KEYS[4], now)
local limit = tonumber(redis.call('GET', KEYS[2]) or ARGV[4])
local in_use = redis.call('ZCARD', KEYS[1])
local members = permit_members(ARGV[1])
if members and in_use + #members <= limit then
  set_leases(KEYS[1], members, tonumber(ARGV[2]), now)
  redis.call('ZREM', KEYS[3], ARGV[1])
  share_holders(KEYS[4], members, t, ARGV[6], ARGV[5])
  return {1, in_use + #members}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local wait = first[2] and (tonumber(first[2]) - now) or -1
add_waiter(KEYS[3], ARGV[1], tonumber(ARGV[3]), now)
return {0, wait}

--- redislock.rwlock: read-write locks (client:rwlock(name)).
--
-- Many readers, or one writer. Each reader's lease is its own (a member of
-- a sorted set: token -> lease end on the server's clock), renewed by the
-- watchdog like a lock key, so a crashed reader frees its share at its own
-- lease end. The writer is a lock key with a fence, like a mutex.
--
-- Policy: writer preference. A writer that is kept out leaves a marker
-- (refreshed at each of its attempts, at least every WRITER_HEARTBEAT) that
-- keeps new readers out, so the readers in place drain and the writer gets
-- its turn however many readers keep arriving. Readers can in turn wait
-- behind a stream of writers. A reader that asks for a second read share
-- while a writer waits waits too: read shares are not reentrant.

local checks = require "redislock.checks"
local keysmod = require "redislock.keys"
local lockmod = require "redislock.lock"
local shares = require "redislock.shares"
local admin = require "redislock.admin"
checks.own(debug.getinfo(1, "S").source)

local ttl_ms = lockmod.ttl_ms
local block_ms, verdict = shares.block_ms, shares.verdict

local _M = {}

-- A waiting writer attempts again at least this often (seconds); its
-- marker lasts WRITER_MARKER_MS from each attempt, so a writer that died or
-- gave up keeps readers out that long at most.
local WRITER_HEARTBEAT = 1
local WRITER_MARKER_MS = 3000

-- A reader: one member of the readers' set.
local READ = {
  key = "readers",
  renew = "zset_renew",
}
_M.READ = READ

function READ.extend(ch, keys, token, ms)
  return ch:script("zset_renew", keys.readers, token, ms)
end

-- the last reader out wakes a waiting writer
function READ.release(client, keys, token)
  return client._conn:script("release_share", keys.readers, keys.writers_waiting,
    keys.writers_signal, keys.readers_waiting, keys.readers_signal, keys.reader_holders, token, "member",
    "if_empty", "none")
end

function READ.try(rec, t0)
  local client, keys = rec.client, rec.keys
  local ch = client._conn
  ch:deadline(rec.deadline)
  local r, err = ch:script("rw_read", keys.writer, keys.readers, keys.marker, keys.readers_waiting,
    keys.reader_holders, rec.token, ttl_ms(rec.ttl), block_ms(rec, t0), client._keep_ms, rec.label)
  if not r then return nil, err end
  return verdict(rec, r, t0)
end

function READ.signal(rec)
  return rec.keys.readers_signal
end

-- (a call cut short gives back a share it may have got)
function READ.give_up(rec, how)
  if how == "raised" then READ.release(rec.client, rec.keys, rec.token) end
end

-- The writer: the writer key, with a fence; its release wakes every
-- waiting reader and one waiting writer.
local WRITE = {
  key = "writer",
  renew = "extend",
  fenced = true,
}
_M.WRITE = WRITE

function WRITE.heartbeat()
  return WRITER_HEARTBEAT
end

function WRITE.extend(ch, keys, token, ms)
  return ch:script("extend", keys.writer, token, ms)
end

function WRITE.release(client, keys, token)
  return client._conn:script("release_share", keys.writer, keys.readers_waiting,
    keys.readers_signal, keys.writers_waiting, keys.writers_signal, keys.reader_holders, token, "key", "all",
    "one")
end

function WRITE.try(rec, t0)
  local client, keys = rec.client, rec.keys
  local ch = client._conn
  ch:deadline(rec.deadline)
  local r, err = ch:script("rw_write", keys.writer, keys.readers, keys.marker, keys.fence,
    keys.writers_waiting, keys.writer_holder, rec.token, ttl_ms(rec.ttl), block_ms(rec, t0),
    client._fence_ttl_ms, WRITER_MARKER_MS, rec.label)
  if not r then return nil, err end
  return verdict(rec, r, t0)
end

function WRITE.signal(rec)
  return rec.keys.writers_signal
end

-- Gave up: take our marker back now (readers need not wait it out); a
-- call cut short gives back the writer key it may have got.
function WRITE.give_up(rec, how)
  local client, keys = rec.client, rec.keys
  if how == "raised" then return WRITE.release(client, keys, rec.token) end
  client._conn:script("release_share", keys.marker, keys.readers_waiting, keys.readers_signal,
    keys.writers_waiting, keys.writers_signal, keys.reader_holders, rec.token, "key", "all", "none")
end

local RWLock = {}
RWLock.__index = RWLock
_M.RWLock = RWLock

--- A read share: a lock object (held, extend, release, lease_end,
-- on_lost); its fence is nil.
-- syntax: lock, err = rw:read({ttl=30, wait=0, watchdog=true, on_lost=fn,
--           max_hold=nil, notify=true, spin=0})
-- err: "busy" (tried once), "timeout" (waited), or a connection error.
function RWLock:read(opts)
  return shares.acquire(self, "read", opts, READ)
end

--- The write side: a lock object like acquire's, with a fence that grows
-- with every writer's grant.
-- syntax: lock, err = rw:write({ttl=30, wait=0, ...same as read})
function RWLock:write(opts)
  return shares.acquire(self, "write", opts, WRITE)
end

--- What Redis says about the lock now (one round trip): { readers = n,
-- writer = bool, writer_waiting = bool, waiters = n, holders = { {kind =
-- "write" | "read", holder =, since =, held_for =, ttl =}, ... } } (the
-- writer first, then each reader; see client:inspect for the fields).
-- syntax: info, err, kind = rw:inspect()
function RWLock:inspect()
  local rows, waiters, r = admin.rw_holders(self._client, self.name)
  if not rows then return nil, waiters, r end
  return { readers = r[6], writer = r[1] ~= -2, writer_waiting = r[5] == 1, waiters = waiters, holders = rows }
end

function RWLock:__tostring()
  return string.format("redislock.rwlock (%s)", self.name:sub(1, 64))
end

--- client:rwlock: a read-write lock over `name` (no round trip).
function _M.new(client, name)
  checks.check_name("rwlock", name)
  client:_open()
  return setmetatable({ name = name, _client = client, _keys = keysmod.rwlock(client._prefix, name) }, RWLock)
end

return _M

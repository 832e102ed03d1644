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
local waiting = require "redislock.waiting"
local errors = require "redislock.errors"
checks.own(debug.getinfo(1, "S").source)


local _M = {}

-- A waiting writer attempts again at least this often (seconds); its
-- marker lasts WRITER_MARKER_MS from each attempt, so a writer that died or
-- gave up keeps readers out that long at most.
local WRITER_HEARTBEAT = 1
local WRITER_MARKER_MS = 3000

-- A reader: one member of the readers' set.
_M.READ = {
  extend = function(ch, keys, token, ms) return ch:script("zset_renew", keys.readers, token, ms) end,
  -- the last reader out wakes a waiting writer
  release = function(client, keys, token)
    return client._conn:script("release_share", keys.readers, keys.writers_waiting,
      keys.writers_signal, keys.readers_waiting, keys.readers_signal, keys.reader_holders, token, "member",
      "if_empty", "none")
  end,
  renew = "zset_renew",
  key = function(keys) return keys.readers end,
}

-- The writer: the writer key; its release wakes every waiting reader and
-- one waiting writer.
_M.WRITE = {
  extend = function(ch, keys, token, ms) return ch:script("extend", keys.writer, token, ms) end,
  release = function(client, keys, token)
    return client._conn:script("release_share", keys.writer, keys.readers_waiting,
      keys.readers_signal, keys.writers_waiting, keys.writers_signal, keys.reader_holders, token, "key", "all",
      "one")
  end,
  renew = "extend",
  key = function(keys) return keys.writer end,
  fenced = true,
}

local RWLock = {}
RWLock.__index = RWLock
_M.RWLock = RWLock

--- A read share: a lock object (held, extend, release, lease_end,
-- on_lost); its fence is nil.
-- syntax: lock, err = rw:read({ttl=30, wait=0, watchdog=true, on_lost=fn,
--           max_hold=nil, notify=true, spin=0})
-- err: "busy" (tried once), "timeout" (waited), or a connection error.
function RWLock:read(opts)
  local keys, fence_ttl = self._keys, self._client._fence_ttl_ms
  local lock, err = waiting.acquire(self, "read", opts, _M.READ, keys.readers_signal,
    function(ch, token, ms, block_ms, label)
      return ch:script("rw_read", keys.writer, keys.readers, keys.marker, keys.readers_waiting,
        keys.reader_holders, token, ms, block_ms, fence_ttl, label)
    end)
  return errors.result(lock, err)
end

--- The write side: a lock object like acquire's, with a fence that grows
-- with every writer's grant.
-- syntax: lock, err = rw:write({ttl=30, wait=0, ...same as read})
function RWLock:write(opts)
  local keys, fence_ttl = self._keys, self._client._fence_ttl_ms
  local lock, err, token = waiting.acquire(self, "write", opts, _M.WRITE, keys.writers_signal,
    function(ch, tok, ms, block_ms, label)
      return ch:script("rw_write", keys.writer, keys.readers, keys.marker, keys.fence,
        keys.writers_waiting, keys.writer_holder, tok, ms, block_ms, fence_ttl, WRITER_MARKER_MS, label)
    end, WRITER_HEARTBEAT)
  if not lock then
    -- Gave up: take our marker back now (readers need not wait it out).
    self._client._conn:script("release_share", keys.marker, keys.readers_waiting, keys.readers_signal,
      keys.writers_waiting, keys.writers_signal, keys.reader_holders, token, "key", "all", "none")
  end
  return errors.result(lock, err)
end

--- What Redis says about the lock now (one round trip): { readers = n,
-- writer = bool, writer_waiting = bool, waiters = n, holders = { {kind =
-- "write" | "read", holder =, since =, held_for =, ttl =}, ... } } (the
-- writer first, then each reader; see client:inspect for the fields).
-- syntax: info, err, kind = rw:inspect()
function RWLock:inspect()
  local rows, waiters, r = self._client:_rw_holders(self.name)
  if not rows then return nil, waiters, r end
  return { readers = r[6], writer = r[1] ~= -2, writer_waiting = r[5] == 1, waiters = waiters, holders = rows }
end

function RWLock:__tostring()
  return string.format("redislock.rwlock (%s)", self.name:sub(1, 64))
end

function _M.install(Client)
  --- A read-write lock over `name` (no round trip: its keys, in one slot,
  -- apart from the mutex of the same name).
  -- syntax: rw = client:rwlock(name)
  function Client:rwlock(name)
    checks.check_name("rwlock", name)
    self:_open()
    return setmetatable({ name = name, _client = self, _keys = keysmod.rwlock(self._prefix, name) },
      RWLock)
  end
end

return _M

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
-- while a writer waits waits too: read shares are not reentrant, unless
-- the rwlock is (client:rwlock(name, {reentrant = true})): then its owner
-- (a token, as reentrant locks have) writes again, counted; reads while it
-- writes (a downgrade); reads again whatever waits; and never upgrades a
-- read to a write (refused at once). Each hold is renewed by its own
-- watchdog registration.

local checks = require "redislock.checks"
local keysmod = require "redislock.keys"
local lockmod = require "redislock.lock"
local shares = require "redislock.shares"
local admin = require "redislock.admin"
local engine = require "redislock.engine"
local errors = require "redislock.errors"
local reentrant = require "redislock.reentrant"
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

-- The reentrant kinds: one owner token for every hold, its entries
-- counted in Redis; a hold names the grant it belongs to (the writer's
-- fence, a read share's grant), so that a hold of a lost grant never
-- releases a newer one.
local function release_reentrant(client, keys, token, what, grant)
  return client._conn:script("rw_release_reentrant", keys.writer, keys.readers, keys.writer_grant,
    keys.reader_counts, keys.reader_holders, keys.readers_waiting, keys.readers_signal, keys.writers_waiting,
    keys.writers_signal, token, what, string.format("%.0f", grant or 0))
end

-- A grant seen here supersedes every hold of an earlier grant to the same
-- owner on the same side (their grant was lost: broken, or expired, and
-- someone else may have held the lock since). Their renewals compare only
-- the owner's token, which the newer grant's key holds again: unless they
-- are lost here, their watchdog renews the newer grant for them and they
-- never learn of the gap. (The holds of one owner in other clients are
-- not seen here: opts.owner shared across clients stays exposed.)
local function supersede(rec, lock, side, grant)
  local client = rec.client
  local by = client._rw_grants
  if not by then
    by = setmetatable({}, { __mode = "v" })
    client._rw_grants = by
  end
  local k = rec.keys.writer .. "\0" .. side .. "\0" .. rec.token
  local entry = by[k]
  if entry and entry.grant ~= grant then
    for hold in pairs(entry.holds) do
      if hold._state == "held" then
        if hold._watch then
          hold._watch:unwatch()
          client._locks[hold._watch_id] = nil
          hold._watch = nil
        end
        hold:_lose("not held")
      end
    end
    entry = nil
  end
  if not entry then
    entry = { grant = grant, holds = setmetatable({}, { __mode = "k" }) }
    by[k] = entry
  end
  entry.holds[lock] = true
  lock._rw_entry = entry   -- (the entry lives as long as one of its holds)
end

-- (renewed, by the watchdog or extend, with the readers' counts, which
-- rw_renew_reentrant finds as readers .. ":counts": they live as the shares)
local READ_RE = { key = "readers", renew = "rw_renew_reentrant", signal = READ.signal }
_M.READ_RE = READ_RE

function READ_RE.extend(ch, keys, token, ms)
  return ch:script("rw_renew_reentrant", keys.readers, token, ms)
end

function READ_RE.release(client, keys, token, grant)
  return release_reentrant(client, keys, token, "read", grant)
end

function READ_RE.try(rec, t0)
  local client, keys = rec.client, rec.keys
  local ch = client._conn
  ch:deadline(rec.deadline)
  local r, err = ch:script("rw_read_reentrant", keys.writer, keys.readers, keys.marker, keys.readers_waiting,
    keys.reader_holders, keys.reader_counts, rec.token, ttl_ms(rec.ttl), block_ms(rec, t0),
    client._keep_ms, rec.label)
  if not r then return nil, err end
  if r[1] ~= 1 then return nil, "busy", r[2] end
  -- (the grant rides as the engine's fence, and is kept as _grant)
  return engine.grant(rec, r[2], t0, rec.ttl)
end

function READ_RE.granted(rec, lock)
  lock._grant, lock.fence = lock.fence, nil
  supersede(rec, lock, "read", lock._grant)
end

-- (the watchdog renews its grant, keys.writer_grant: writer .. ":grant", with it)
local WRITE_RE = { key = "writer", renew = "extend_grant", heartbeat = WRITE.heartbeat, signal = WRITE.signal }
_M.WRITE_RE = WRITE_RE

function WRITE_RE.extend(ch, keys, token, ms, fence)
  return ch:script("extend_reentrant", keys.writer, keys.writer_grant, token, ms, string.format("%.0f", fence))
end

function WRITE_RE.release(client, keys, token, fence)
  return release_reentrant(client, keys, token, "write", fence)
end

function WRITE_RE.granted(rec, lock)
  supersede(rec, lock, "write", lock.fence)
end

function WRITE_RE.try(rec, t0)
  local client, keys = rec.client, rec.keys
  local ch = client._conn
  rec.upgrade = false
  ch:deadline(rec.deadline)
  local r, err = ch:script("rw_write_reentrant", keys.writer, keys.readers, keys.marker, keys.fence,
    keys.writers_waiting, keys.writer_holder, keys.writer_grant, rec.token, ttl_ms(rec.ttl), block_ms(rec, t0),
    client._fence_ttl_ms, WRITER_MARKER_MS, rec.label)
  if not r then return nil, err end
  if r[1] ~= 1 then
    rec.upgrade = r[2] == -3
    return nil, "busy", r[2] >= 0 and r[2] or nil
  end
  return engine.grant(rec, r[2], t0, rec.ttl)
end

-- An owner that reads asks to write: no wait can end that (its own share
-- keeps the writer out), so the call ends at once (redislock.engine).
function WRITE_RE.mine(rec)
  if rec.upgrade then
    return errors.about("busy", rec.name, "is read by this owner: a reader never upgrades to a writer")
  end
end

-- Gave up: take our marker back (a call cut short leaves what it may have
-- got to its lease: which grant it was is not known here).
function WRITE_RE.give_up(rec, how)
  if how ~= "raised" then WRITE.give_up(rec) end
end

local RWLock = {}
RWLock.__index = RWLock
_M.RWLock = RWLock

--- A read share: a lock object (held, extend, release, lease_end,
-- on_lost); its fence is nil.
-- syntax: lock, err = rw:read({ttl=30, wait=0, watchdog=true, on_lost=fn,
--           max_hold=nil, notify=true, spin=0})
-- err: "busy" (tried once), "timeout" (waited), or a connection error.
-- The owner of a reentrant rwlock's holds: drawn again in a fork child
-- (reentrant.owner), so that a child never enters its parent's holds.
local function owner_of(rw)
  if not rw._reentrant then return nil end
  return rw._owner or reentrant.owner(rw._client)
end

function RWLock:read(opts)
  local owner = owner_of(self)
  return shares.acquire(self, "read", opts, owner and READ_RE or READ, owner)
end

--- The write side: a lock object like acquire's, with a fence that grows
-- with every writer's grant.
-- syntax: lock, err = rw:write({ttl=30, wait=0, ...same as read})
function RWLock:write(opts)
  local owner = owner_of(self)
  return shares.acquire(self, "write", opts, owner and WRITE_RE or WRITE, owner)
end

--- Removes the writer and every reader, whoever holds them (an operator's
-- tool, as client:break_lock is for a lock), and wakes every waiter. The
-- holders learn it at their next renewal (on_lost, "not held").
-- syntax: ok, err, kind = rw:break_lock()
-- err: "not held: NAME" when nobody held it.
function RWLock:break_lock()
  local client = self._client
  local k = self._keys
  client:_open()
  client:poll()
  local r, err, kind = client._conn:script("rw_break", k.writer, k.readers, k.marker, k.writer_grant,
    k.reader_counts, k.reader_holders, k.readers_waiting, k.readers_signal, k.writers_waiting, k.writers_signal)
  if not r then return errors.fail(err, kind) end
  if r ~= 1 then return errors.not_held(self.name) end
  return true
end

--- What Redis says about the lock now (one round trip): { readers = n,
-- writer = bool, writer_waiting = bool, waiters = n, writes = the writer's
-- entries (a reentrant writer's count; 0 or 1 otherwise), reads = the
-- readers' entries (each reentrant owner's counted), holders = { {kind =
-- "write" | "read", holder =, since =, held_for =, ttl =}, ... } } (the
-- writer first, then each reader; see client:inspect for the fields).
-- syntax: info, err, kind = rw:inspect()
function RWLock:inspect()
  local rows, waiters, r = admin.rw_holders(self._client, self.name)
  if not rows then return nil, waiters, r end
  return { readers = r[6], writer = r[1] ~= -2, writer_waiting = r[5] == 1, waiters = waiters, holders = rows,
    writes = r[10], reads = r[11] }
end

function RWLock:__tostring()
  return string.format("redislock.rwlock (%s)", self.name:sub(1, 64))
end

--- client:rwlock: a read-write lock over `name` (no round trip); with
-- reentrant = true, held per owner (opts.owner, or the client's).
function _M.new(client, name, opts)
  checks.check_name("rwlock", name)
  opts = checks.check_options("rwlock", opts, { reentrant = true, owner = true })
  checks.check_type("rwlock", "reentrant", opts.reentrant, "boolean", true)
  if opts.owner ~= nil then
    if not opts.reentrant then checks.argerror("rwlock", "owner", "only with reentrant = true") end
    checks.check_string("rwlock", "owner", opts.owner)
    if #opts.owner >= 64 then checks.argerror("rwlock", "owner", "at most 63 bytes") end
  end
  client:_open()
  return setmetatable({ name = name, _client = client, _keys = keysmod.rwlock(client._prefix, name),
    _reentrant = opts.reentrant or false, _owner = opts.owner }, RWLock)
end

return _M

--- redislock.client: the client object that redislock.connect returns
-- (over one Redis, Sentinel or Cluster; Redlock's is redlock.lua's).
--
-- Its whole surface is here; each method hands its call to the module of
-- its concern, as a plain function of the client: acquire.lua (acquire,
-- adopt), engine.lua (with_lock, and the waiting behind every acquire),
-- rwlock.lua, semaphore.lua, fencing.lua (fenced resources), admin.lua
-- (inspect, list, release_token, break_lock); client_base.lua what every
-- client has (poll, fd, stats, metrics, warnings, server_info, close).

local core = require "redislock.core"
local checks = require "redislock.checks"
local base = require "redislock.client_base"
local acquire = require "redislock.acquire"
local engine = require "redislock.engine"
local rwlock = require "redislock.rwlock"
local semaphore = require "redislock.semaphore"
local fencing = require "redislock.fencing"
local admin = require "redislock.admin"
local lockset = require "redislock.lockset"
checks.own(debug.getinfo(1, "S").source)

local take = acquire.acquire

local _M = {}

local Client = {}
Client.__index = Client
_M.Client = Client

for _, m in ipairs(base.METHODS) do Client[m] = base[m] end

--- A client over channel `ch` (redislock.channel).
-- settings: prefix, fence_ttl (seconds), warnings (a list of strings),
-- on_event (a function, or nil), holder.
function _M.new(ch, settings)
  local self = base.new(ch, settings)
  self._wait_avg, self._wait_names = {}, 0         -- waits that ended with a release, per name (engine.lua)
  self._groups = setmetatable({}, { __mode = "v" }) -- a reentrant lock's holds (reentrant.lua)
  -- The owner token of this client's reentrant locks (secret, like a
  -- lock's token): acquire(name, {reentrant = true}) enters as this owner
  -- unless opts.owner says otherwise.
  self.owner = assert(core.token())
  self._owner_pid = core.getpid()                  -- where `owner` was drawn (reentrant.lua)
  return setmetatable(self, Client)
end

--- Takes the lock `name`, waiting up to opts.wait seconds for it.
-- syntax: lock, err = client:acquire(name, {ttl=30, wait=0, watchdog=true,
--           on_lost=fn, max_hold=nil, notify=true, fair=false, spin=0})
-- err, kind: "busy" (tried once), "timeout" (waited), or another kind of
-- redislock.errors (connection, redis, watchdog, ...).
function Client:acquire(name, opts)
  return take(self, "acquire", name, opts)
end

--- Runs fn(lock, ...) holding the lock, and releases it on every path.
-- syntax: ok, ... = client:with_lock(name, opts, fn, ...)
-- Returns true and fn's results, or nil, err when the lock was not taken.
-- An error raised by fn is raised again after the release.
function Client:with_lock(name, opts, fn, ...)
  return engine.with_lock(take, self, name, opts, fn, ...)
end

--- Takes the locks of every name in `names` (a list), or none: one
-- script, one token and lease, a fence per name (set.fences[name]);
-- set:held(), set:extend(ttl), set:release() act on all of them.
-- syntax: set, err, kind = client:acquire_all(names, {ttl=30, wait=0,
--           watchdog=true, on_lost=fn, max_hold=nil, holder=nil})
function Client:acquire_all(names, opts)
  return lockset.acquire_all(self, names, opts)
end

--- Takes over a lock held with `token` (e.g. REDISLOCK_TOKEN, in the job
-- that `redislock run` started): from now on this client renews it (with
-- the watchdog) and may release it. The lease becomes at least opts.ttl.
-- syntax: lock, err = client:adopt(name, token, {ttl=30, watchdog=true,
--           on_lost=fn, max_hold=nil})
-- err: "not held" when the lock is gone or held with another token.
function Client:adopt(name, token, opts)
  return acquire.adopt(self, name, token, opts)
end

--- A read-write lock over `name` (no round trip: its keys, in one slot,
-- apart from the mutex of the same name).
-- syntax: rw = client:rwlock(name, {reentrant = false, owner = client.owner})
-- reentrant: per owner (a token, as acquire's reentrant = true): the
-- writer writes again (counted) and reads while it writes; a reader never
-- upgrades.
function Client:rwlock(name, opts)
  return rwlock.new(self, name, opts)
end

--- A counting semaphore of `permits` over `name`; stores the limit (one
-- round trip), which is then in force for every client. if_absent: only
-- when none is stored (Redisson's trySetPermits). Without permits: the
-- semaphore with the limit stored (nil, "absent: ...", "absent" if none).
-- syntax: sem, err, kind = client:semaphore(name, permits?, {if_absent=false})
function Client:semaphore(name, permits, opts)
  return semaphore.new(self, name, permits, opts)
end

--- Writes `value` to the resource only if `fence` is not older than the
-- newest fence the resource has seen (from fenced_set or fenced_get).
-- syntax: version, err = client:fenced_set(resource, value, fence)
-- version: the order in which writes were accepted (1, 2, ...);
-- err: "stale" when refused, or a connection/redis error.
function Client:fenced_set(resource, value, fence)
  return fencing.set(self, resource, value, fence)
end

--- Reads the resource as the holder of `fence`, and refuses older fences
-- from then on. Returns the value, or false when it was never written
-- (or was evicted).
-- syntax: value, err = client:fenced_get(resource, fence)
-- err: "stale" when a newer fence has been seen, or a connection/redis error.
function Client:fenced_get(resource, fence)
  return fencing.get(self, resource, fence)
end

--- What Redis says about the lock `name` now (one round trip).
-- syntax: info, err, kind = client:inspect(name)
-- info: { held = bool, ttl = seconds or nil, fence = last fence drawn (0
-- if never or expired), token = the holder's token or nil (a secret:
-- show it only to operators), holder = its label or nil, since = when
-- it was granted (seconds since the epoch, the server's clock) or nil,
-- held_for = seconds or nil, waiters = n }. holder, since and held_for
-- are nil for a lock granted without a label (holder = false, fence =
-- false) or by an older version.
function Client:inspect(name)
  return admin.inspect(self, name)
end

--- Every lock held now whose name matches `pattern` (a glob as Redis'
-- MATCH has it: *, ?, [abc]; default "*"), found with SCAN (never KEYS)
-- on every node: the one Redis, the Sentinel's master, every master of a
-- Cluster. One row per holder: a lock's, a rwlock's writer and each
-- reader, each permit of a semaphore; sorted by name.
-- syntax: rows, err, kind = client:list(pattern)
-- row: { name =, kind = "lock" | "write" | "read" | "permit", holder =,
--        since =, held_for =, ttl =, waiters =, fence = (locks, writers) }
function Client:list(pattern)
  return admin.list(self, pattern)
end

--- Releases `name` on behalf of its holder, given the holder's token (an
-- operator's tool): the same compare-and-delete as lock:release().
-- syntax: ok, err = client:release_token(name, token)
function Client:release_token(name, token)
  return admin.release_token(self, name, token)
end

--- Deletes `name` whoever holds it (a stuck lock), waking its waiters. The
-- holder is not told until its next renewal; prefer release_token.
-- syntax: ok, err = client:break_lock(name)
function Client:break_lock(name)
  return admin.break_lock(self, name)
end

return _M

--- redislock.redlock: one lock over N independent masters (Redlock).
--
-- redislock.connect{ redlock = { url1, url2, url3, ... } } gives a client
-- of its own class: the surface every client has (poll, fd, stats,
-- metrics, warnings, server_info, close), acquire and with_lock, inspect,
-- list, release_token and break_lock; locks with held, extend, release,
-- lease_end, on_lost. fenced_set, fenced_get, rwlock, semaphore, adopt and
-- reentrant = true raise, saying why. Its lock lives on every master and
-- counts as held while a majority (N/2 + 1) holds it:
--
-- acquire   one token for all masters; SET NX PX sent to all of them at
--           once (one polled fan-out in C, csrc/topo/fanout.c, under one
--           deadline); granted iff a majority granted it AND the validity
--           ttl - elapsed - drift is still positive (drift: csrc/base/lease.h,
--           the one definition). Each master gets master_timeout(ttl):
--           ttl/20, at least 10 ms, at most the client's timeout. On
--           failure it releases on every master, including those that did
--           not answer (the release is queued behind the attempt on the
--           same connection, so it runs after it on that master), and also
--           when the caller's code raised in between: no residue.
-- waiting   retries with backoff and full jitter, never past `wait`. No
--           wake-on-release: a release reaches the masters at different
--           times, and a waiter woken by one master cannot tell whether a
--           majority is free; a BLPOP per master would cost N connections
--           per waiter for a hint.
-- extend    needs a majority within the validity; a partial extend is
--           reported ("quorum: extend reached only K of N masters"),
--           never quietly half-done.
-- watchdog  renews on all N masters in one polled fan-out (the C thread):
--           held while a majority renewed within the lease; lost as soon as
--           more than N - quorum answer "not held", or at the lease end
--           without a majority. Every round also takes the key back (SET
--           NX, for the validity left) on each master that lacks it: after
--           a restart, or where the acquire met a rival's attempt; a master
--           holding someone else's value counts as "not held" in that round
--           and is asked again in the next
--           (lua/redislock/scripts/redlock_renew.lua says why that is safe).
-- release   on all masters; "not held" only if no master still had our
--           token (and every master answered).
-- fence     nil: per-master counters give no order across masters (a
--           majority of grants says nothing about which master's counter
--           is highest), and no sound rule is known without a consensus
--           system. Use a single Redis (or Sentinel/Cluster) for fencing.
--
-- What it does not promise (Kleppmann's critique, antirez's reply): safety
-- rests on bounded clock drift and bounded pauses; a master that restarts
-- without persistence forgets its locks, so restart masters only after the
-- longest ttl in use (or persist with fsync); a process paused past its
-- lease cannot tell, and there is no fence to save the resource then.

local core = require "redislock.core"
local checks = require "redislock.checks"
local lockmod = require "redislock.lock"
local base = require "redislock.client_base"
local engine = require "redislock.engine"
local options = require "redislock.options"
local metrics = require "redislock.metrics"
local holdermod = require "redislock.holder"
local admin = require "redislock.admin"
local errors = require "redislock.errors"
local lockset = require "redislock.lockset"
checks.own(debug.getinfo(1, "S").source)

local monotime = core.monotime
local ttl_ms = lockmod.ttl_ms
local DEFAULT_TTL = options.DEFAULT_TTL

local _M = {}

-- The client: what every client has (client_base.lua), acquire and
-- with_lock, the operator's tools, and clear errors for the rest of
-- client.lua's surface, which Redlock cannot offer.
local RedlockClient = {}
RedlockClient.__index = RedlockClient
_M.Client = RedlockClient

for _, m in ipairs(base.METHODS) do RedlockClient[m] = base[m] end

local Lock = lockmod.Lock
local RedlockLock = setmetatable({}, { __index = Lock })
RedlockLock.__index = RedlockLock
RedlockLock.__close = Lock.__close
RedlockLock.__tostring = Lock.__tostring

local MIN_MASTER_TIMEOUT = 0.01

--- How long each master gets for one attempt: a twentieth of the ttl (a
-- slow master then costs at most 5% of the lease), at least 10 ms, at
-- most the client's timeout.
function RedlockClient:master_timeout(ttl)
  return math.min(self._master_cap, math.max(ttl / 20, MIN_MASTER_TIMEOUT))
end

-- Counts the masters whose answer is 1 (or {1, ...}), and the ones that
-- answered at all.
local function tally(results)
  local yes, answered = 0, 0
  for _, r in ipairs(results) do
    if r.ok ~= nil then
      answered = answered + 1
      local v = type(r.ok) == "table" and r.ok[1] or r.ok
      if v == 1 or v == 2 then yes = yes + 1 end
    end
  end
  return yes, answered
end

-- The first master's failure: err, kind (a message without a place, such
-- as the fan-out's "no answer in time", gets the master's number).
local function first_error(results)
  for i, r in ipairs(results) do
    if r.err then
      local err = r.err
      if not err:find("%(.*%)$") then err = err .. " (master " .. i .. " of " .. #results .. ")" end
      return err, r.kind
    end
  end
end

-- ch:fanout, with a fan-out that could not start at all (out of memory,
-- no topology) read as every master failing that way.
local function fanout(ch, n, ...)
  local results, err, kind = ch:fanout(...)
  if results then return results end
  results = {}
  for i = 1, n do results[i] = { err = err, kind = kind or "memory" } end
  return results
end

--- Deletes key on every master where it still holds token. Returns how
-- many masters had it, whether every master answered, and the answers.
local function release_all(client, key, token, ttl)
  local results = fanout(client._conn, client._masters, client:master_timeout(ttl or DEFAULT_TTL), 0,
    "redlock_release", key, token)
  local had, answered = tally(results)
  return had, answered == #results, results
end

-- How many masters refused the acquire because another value was there,
-- the shortest lease left among the holders they named (holder_ms: a
-- waiter never sleeps past it), and a holder's label and how long it has
-- held the lock (ms), from the first that had them.
local function refusals(results)
  local count, holder_ms, label, held = 0, nil, nil, nil
  for _, r in ipairs(results) do
    if type(r.ok) == "table" and r.ok[1] == 0 then
      count = count + 1
      if r.ok[2] and r.ok[2] > 0 then holder_ms = math.min(holder_ms or math.huge, r.ok[2]) end
      if not label and r.ok[3] then label, held = r.ok[3], r.ok[4] end
    end
  end
  return count, holder_ms, label, held
end

--- A Redlock lock: one key on every master, renewed there by the
-- watchdog's fan-out (the transport's default renewal); how it is taken
-- (redislock.engine). No signal: a waiter polls.
local REDLOCK = {
  key = "lock",
  class = RedlockLock,
  mutex = true,
}
_M.REDLOCK = REDLOCK

-- (the engine's give-backs: a grant it cannot keep, a call cut short)
function REDLOCK.release(client, keys, token, _, ttl)
  return release_all(client, keys.lock, token, ttl)
end

-- One attempt: a majority must grant it; anything less leaves nothing
-- behind on any master.
function REDLOCK.try(rec, t0)
  local client, key = rec.client, rec.keys.lock
  local ttl, quorum = rec.ttl, client._quorum
  local results = fanout(client._conn, client._masters, client:master_timeout(ttl), quorum, "redlock_acquire",
    key, key .. ":holder", rec.token, ttl_ms(ttl), rec.label)
  if tally(results) >= quorum then return engine.grant(rec, nil, t0, ttl) end
  release_all(client, key, rec.token, ttl)
  local busy, holder_ms, hlabel, held = refusals(results)
  if busy > #results - quorum then return nil, "busy", holder_ms, hlabel, held end
  return nil, first_error(results) or "busy", holder_ms, hlabel, held
end

-- Whatever happens in a call, an error included, no master keeps its
-- token unless a lock is returned.
function REDLOCK.give_up(rec, how)
  if how == "raised" then release_all(rec.client, rec.keys.lock, rec.token, rec.ttl) end
end

-- client:acquire, with argument errors naming `fname`.
local function take(client, fname, name, opts)
  local ttl, wait
  opts, ttl, wait = options.settings(fname, name, opts, options.REDLOCK)
  base.poll(client)   -- (raises once the client is closed)
  local token = assert(core.token())
  local label = holdermod.label(client, opts.holder, token, fname)
  local rec = engine.record(client, REDLOCK, name, client._keys_of(name), opts, ttl, wait)
  rec.token, rec.label = token, label
  return engine.run(rec)
end

--- Takes the lock `name` on a majority of the masters, waiting up to
-- opts.wait seconds for it (options: ttl, wait, watchdog, on_lost,
-- max_hold, holder).
-- syntax: lock, err = client:acquire(name, opts)
function RedlockClient:acquire(name, opts)
  return take(self, "acquire", name, opts)
end

--- Runs fn(lock, ...) holding the lock, and releases it on every path.
-- syntax: ok, ... = client:with_lock(name, opts, fn, ...)
function RedlockClient:with_lock(name, opts, fn, ...)
  return engine.with_lock(take, self, name, opts, fn, ...)
end

local function unsupported(what)
  return function() checks.raise(what .. " is not offered by a Redlock client (no fences across masters)") end
end
RedlockClient.fenced_set = unsupported("fenced_set")
RedlockClient.fenced_get = unsupported("fenced_get")
-- The shared primitives and re-entry rest on one server's atomic view of
-- their keys (a set of leases, an entry count); over independent masters
-- that would need a quorum protocol of its own, which this library does
-- not claim to have.
local function single_server(what)
  return function() checks.raise(what .. " is not offered by a Redlock client (one server's atomic view needed)") end
end
RedlockClient.rwlock = single_server("rwlock")
RedlockClient.semaphore = single_server("semaphore")
RedlockClient.adopt = single_server("adopt")
--- A Redlock set (client:acquire_all): every name on a majority of the
-- masters, each of which granted the whole set in one script
-- (redlock_acquire_all.lua); no fences; each name renewed by the
-- watchdog's fan-out; extended with a majority within the validity;
-- released on every master. How it is taken and held otherwise is
-- lockset.lua's.
local RSET = {
  class = lockset.LockSet,
  options = options.SET,
  granted = lockset.SET.granted,
  join = lockset.SET.join_each,
  mine = lockset.SET.mine,
}
_M.RSET = RSET

function RSET.release(client, keys, token, _, ttl)
  local released, gone, first_err, first_kind = 0, 0, nil, nil
  for _, k in ipairs(keys) do
    local had, all, results = release_all(client, k.lock, token, ttl)
    if had > 0 then
      released = released + 1
    elseif all then
      gone = gone + 1
    elseif not first_err then
      first_err, first_kind = first_error(results)
    end
  end
  if released == #keys then return 1 end
  if first_err and released == 0 then return nil, first_err, first_kind end
  return released == 0 and 0 or 3
end

function RSET.try(rec, t0)
  local client, ttl, quorum = rec.client, rec.ttl, rec.client._quorum
  local args = { string.format("%d", #rec.keys * 2) }
  for _, k in ipairs(rec.keys) do
    args[#args + 1] = k.lock
    args[#args + 1] = k.lock .. ":holder"
  end
  -- (then as redlock_acquire's: token, lease, label)
  args[#args + 1] = rec.token
  args[#args + 1] = ttl_ms(ttl)
  args[#args + 1] = rec.label
  local results = fanout(client._conn, client._masters, client:master_timeout(ttl), quorum, "redlock_acquire_all",
    (table.unpack or unpack)(args)) -- luacheck: ignore 143
  if tally(results) >= quorum then return engine.grant(rec, nil, t0, ttl) end
  RSET.release(client, rec.keys, rec.token, nil, ttl)
  local busy, holder_ms, hlabel, held = refusals(results)
  if busy > #results - quorum then return nil, "busy", holder_ms, hlabel, held end
  return nil, first_error(results) or "busy", holder_ms, hlabel, held
end

-- A majority within the validity: 1; lost on too many masters: 0;
-- otherwise the quorum failure, as lock:extend's.
function RSET.extend_set(client, keys, token, ms)
  local t0 = monotime()
  local args = lockset.extend_args(keys, token, ms)
  local results = fanout(client._conn, client._masters, client:master_timeout(tonumber(ms) / 1000),
    client._quorum, "extend_all", (table.unpack or unpack)(args)) -- luacheck: ignore 143
  local yes, answered = tally(results)
  if yes >= client._quorum and monotime() < lockmod.lease_end(t0, tonumber(ms) / 1000) then return 1 end
  if answered - yes > #results - client._quorum then return 0 end
  return nil, string.format("quorum: extend reached only %d of %d masters (a majority is %d)", yes,
    #results, client._quorum), "quorum"
end

function RSET.give_up(rec, how)
  if how == "raised" then RSET.release(rec.client, rec.keys, rec.token, nil, rec.ttl) end
end

--- Takes every name of `names` on a majority of the masters, or none
-- (lockset.lua says the rest).
-- syntax: set, err, kind = client:acquire_all(names, opts)
function RedlockClient:acquire_all(names, opts)
  return lockset.acquire_all(self, names, opts, RSET)
end

--- What each master says about `name`: held when a majority has the same
-- token. { held =, ttl = (the shortest among those), token =, holder =,
-- since =, held_for = (from the first of those that recorded a holder),
-- waiters = 0 (Redlock waiters do not register), fence = 0, masters =
-- { {held = (has the majority's token), ttl =} or {err =}, ... } }
function RedlockClient:inspect(name)
  checks.check_name("inspect", name)
  self:_open()
  local key = self._keys_of(name).lock
  local results = fanout(self._conn, self._masters, self:master_timeout(DEFAULT_TTL), 0, "redlock_inspect", key,
    key .. ":holder")
  local counts, tokens, best = {}, {}, nil
  for i, r in ipairs(results) do
    local token = r.ok and r.ok[1] or nil
    tokens[i] = token
    if token then
      counts[token] = (counts[token] or 0) + 1
      if not best or counts[token] > counts[best] then best = token end
    end
  end
  local held = best ~= nil and counts[best] >= self._quorum
  local info = { held = held, token = held and best or nil, fence = 0, waiters = 0, masters = {} }
  for i, r in ipairs(results) do
    if r.ok then
      local pttl = r.ok[2]
      local mine = held and tokens[i] == best
      info.masters[i] = { held = mine, ttl = pttl and pttl > 0 and pttl / 1000 or nil }
      if mine and info.masters[i].ttl then info.ttl = math.min(info.ttl or math.huge, info.masters[i].ttl) end
      if mine and r.ok[3] and not info.holder then
        info.holder, info.since, info.held_for = r.ok[3], holdermod.since(r.ok[4]), r.ok[5] / 1000
      end
    else
      info.masters[i] = { err = r.err }
    end
  end
  return info
end

--- Every lock held now (by a majority) whose name matches `pattern`, found
-- with SCAN on every master: rows as client:list gives them.
function RedlockClient:list(pattern)
  if pattern == nil then pattern = "*" end
  checks.check_string("list", "pattern", pattern)
  local found, err, kind = admin.scan(self:_open(), self._prefix, pattern)
  if not found then return nil, err, kind end
  local rows = {}
  for _, f in ipairs(found) do
    if f[2] == "lock" then
      local info
      info, err, kind = self:inspect(f[1])
      if not info then return nil, err, kind end
      if info.held then
        rows[#rows + 1] = { name = f[1], kind = "lock", holder = info.holder, since = info.since,
          held_for = info.held_for, ttl = info.ttl, waiters = 0 }
      end
    end
  end
  return rows
end

function RedlockClient:release_token(name, token)
  checks.check_name("release_token", name)
  checks.check_string("release_token", "token", token)
  self:_open()
  local had, all, results = release_all(self, self._keys_of(name).lock, token)
  if had > 0 then return true end
  if not all then return errors.fail(first_error(results)) end
  return errors.not_held(name)
end

-- (admin's: inspect, then release_token on the token a majority holds)
RedlockClient.break_lock = admin.break_lock

--- lock:extend(ttl): a majority within the validity, or reported.
function RedlockLock:extend(ttl)
  if ttl == nil then ttl = self.ttl end
  lockmod.check_ttl("extend", ttl)
  local client = self._client
  client:_open()
  client:poll()
  if self._state ~= "held" or self._pid ~= core.getpid() then return errors.not_held(self.name) end
  local t0 = monotime()
  local results = fanout(client._conn, client._masters, client:master_timeout(ttl), client._quorum, "extend",
    self._keys.lock, self.token, ttl_ms(ttl))
  local yes, answered = tally(results)
  local expires = lockmod.lease_end(t0, ttl)
  if yes >= client._quorum and monotime() < expires then
    self.ttl = ttl
    self._expires = expires
    if self._watch then self._watch:renewed(ttl, expires, t0) end
    metrics.extended(self)   -- [metrics]
    return true
  end
  if answered - yes > #results - client._quorum then
    self:_lose("not held")
    return errors.not_held(self.name)
  end
  return errors.fail(string.format("quorum: extend reached only %d of %d masters (a majority is %d)", yes,
    #results, client._quorum))
end

--- lock:release(): on every master.
function RedlockLock:release()
  local client = self._client
  client:_open()
  client:poll()
  if self._state == "released" then return errors.not_held(self.name) end
  if self._pid ~= core.getpid() then return errors.not_held(self.name) end
  if self._watch then
    self._watch:unwatch()
    self._watch = nil
  end
  local had, all, results = release_all(client, self._keys.lock, self.token, self.ttl)
  if had == 0 and not all then
    self:_lose("unreachable")
    return errors.fail(first_error(results))
  end
  if had == 0 then self:_lose("not held") end   -- (counted, once, like Lock's)
  self._state = "released"
  self._expires = math.min(self._expires, monotime())
  if had == 0 then
    self.lost_reason = self.lost_reason or "not held"
    return errors.not_held(self.name)
  end
  metrics.released(self)   -- [metrics]
  return true
end

--- The client for `masters` (connect fields, one table per master).
function _M.connect(masters, settings, cfg)
  local nodes = {}
  for i, m in ipairs(masters) do
    nodes[i] = { host = m.host, port = m.port, path = m.path, username = m.username,
      password = m.password, db = m.db, tls = m.tls }
  end
  local native = require "redislock.native"
  local ch, err, kind = native.open({ mode = "redlock", nodes = nodes,
    connect_timeout = cfg.connect_timeout, timeout = cfg.timeout, native_commands = cfg.native_commands })
  if not ch then return nil, err, kind end
  local quorum = math.floor(#nodes / 2) + 1
  local client = setmetatable(base.new(ch, settings), RedlockClient)
  client._quorum = quorum
  client._masters = #nodes
  client._master_cap = cfg.timeout and cfg.timeout > 0 and cfg.timeout or 2
  -- a majority must answer now, as connect checks the server elsewhere
  local results = fanout(ch, #nodes, math.min(cfg.connect_timeout or 2, client._master_cap), quorum,
    "redlock_ping")
  local up = tally(results)
  if up < quorum then
    ch:close()
    local why = first_error(results) or "?"
    return nil, string.format("connection failed: %d of %d Redlock masters answered, a majority is %d (%s)",
      up, #nodes, quorum, why), "connection"
  end
  return client
end

return _M

--- redislock.lockset: client:acquire_all, several names at once
-- (node-redlock's multi-resource locks): every name or none, taken in one
-- script on one Redis (acquire_all.lua), with one token and one lease for
-- them all and a fence per name; extended all or none (extend_all.lua);
-- released together.
--
-- Each name's key is the same key a plain lock of that name uses, so a
-- plain acquire of one of them is kept out as by any holder, and a set is
-- kept out by any plain holder of one of its names. Under Cluster the
-- names must share a slot (one script runs on one node): an argument
-- error otherwise. The watchdog renews the set as one registration, every
-- key in one script (extend_all.lua, all or none); on Redlock each name's
-- key on a registration of its own (the same lease end): the set is held
-- while every one is, and lost as soon as one is. A waiter polls
-- (backoff, never past the lease in its way): a release of one name is no
-- wakeup for a set.

local core = require "redislock.core"
local checks = require "redislock.checks"
local lockmod = require "redislock.lock"
local engine = require "redislock.engine"
local options = require "redislock.options"
local holdermod = require "redislock.holder"
local errors = require "redislock.errors"
local metrics = require "redislock.metrics"
local MUTEX = require("redislock.acquire").MUTEX
local poll = require("redislock.client_base").poll
checks.own(debug.getinfo(1, "S").source)

local monotime, getpid = core.monotime, core.getpid
local ttl_arg, lease_end = lockmod.ttl_arg, lockmod.lease_end

local _M = {}

--- The most names one set takes (three keys each in one script call).
_M.MAX_NAMES = 16

local LockSet = setmetatable({}, { __index = lockmod.Lock })
LockSet.__index = LockSet
LockSet.__close = lockmod.Lock.__close
_M.LockSet = LockSet

-- The arguments of acquire_all.lua for the names' keys (`keys`, a list).
local function acquire_args(rec)
  local args = { string.format("%d", #rec.keys * 3) }
  for _, k in ipairs(rec.keys) do
    args[#args + 1] = k.lock
    args[#args + 1] = k.fence
    args[#args + 1] = k.holder
  end
  args[#args + 1] = rec.token
  args[#args + 1] = ttl_arg(rec.ttl)
  args[#args + 1] = rec.client._fence_ttl_ms
  args[#args + 1] = rec.label
  return args
end

local function extend_args(keys, token, ms)
  local args = { string.format("%d", #keys) }
  for _, k in ipairs(keys) do args[#args + 1] = k.lock end
  args[#args + 1] = token
  args[#args + 1] = ms
  return args
end

local unpack = table.unpack or unpack -- luacheck: ignore 143

--- The kind of a set (redislock.engine): how it is taken, extended,
-- released and renewed.
local SET = { class = LockSet }
_M.SET = SET

-- (a set's kind extends with the client: 1 | 0 | nil, err, kind)
function SET.extend_set(client, keys, token, ms)
  return client._conn:script("extend_all", unpack(extend_args(keys, token, ms)))
end
_M.extend_args = extend_args

-- Releases every name still held with the set's token (each wakes its own
-- waiters): 1 when every one was, 0 when none was, 3 when some were (the
-- set was partly lost), nil, err, kind when one could not be sent.
function SET.release(client, keys, token)
  local released, first_err, first_kind = 0, nil, nil
  for _, k in ipairs(keys) do
    local r, err, kind = MUTEX.release(client, k, token)
    if r == 1 then
      released = released + 1
    elseif not r and not first_err then
      first_err, first_kind = err, kind
    end
  end
  if first_err then return nil, first_err, first_kind end
  if released == #keys then return 1 end
  return released == 0 and 0 or 3
end

function SET.try(rec, t0)
  local ch = rec.client._conn
  ch:deadline(rec.deadline)
  local r, err = ch:script("acquire_all", unpack(acquire_args(rec)))
  if not r then return nil, err end
  if r[1] ~= 1 then return nil, "busy", r[3], r[4], r[5] end
  return engine.grant(rec, r[2], t0, rec.ttl)
end

-- A name of the set that this client holds already (a lock, a set): no
-- wait can end that.
function SET.mine(rec)
  for _, name in ipairs(rec.names) do
    local busy = engine.held_here(rec.client, name, rec.token)
    if busy then return busy end
  end
end

-- The fences by name (none on Redlock); the names this client now holds
-- (redislock.engine).
function SET.granted(rec, set)
  local fences, list = {}, set.fence or {}
  for i, name in ipairs(rec.names) do fences[name] = list[i] end
  set.names, set.fences, set.fence = rec.names, fences, nil
  for _, name in ipairs(rec.names) do engine.remember_as(rec.client, name, set) end
end

-- One watchdog registration for the whole set: its keys renewed together
-- by one script (extend_all.lua), all or none, so that the set is one
-- lease. (A set of one name: its key, as a lock's.)
function SET.join(rec, set, expires, hold_until)
  if rec.opts.watchdog == false then return set end
  local client, keys = rec.client, rec.keys
  local w, id
  if #keys == 1 then
    w, id = client._conn:watch(keys[1].lock, rec.token, rec.ttl, expires, hold_until, "extend")
  else
    local list = {}
    for i, k in ipairs(keys) do list[i] = k.lock end
    w, id = client._conn:watch(list, rec.token, rec.ttl, expires, hold_until, "extend_all")
  end
  if not w then return nil, id end
  client._locks[id] = set
  set._watches = { w }
  return set
end

-- One registration per name, all with the set's lease (Redlock: each
-- name's renewal is a fan-out of its own); any that cannot be made takes
-- back those made before it.
function SET.join_each(rec, set, expires, hold_until)
  if rec.opts.watchdog == false then return set end
  local client = rec.client
  local watches = {}
  for _, k in ipairs(rec.keys) do
    local w, id = client._conn:watch(k.lock, rec.token, rec.ttl, expires, hold_until, "extend")
    if not w then
      for _, made in ipairs(watches) do made:unwatch() end
      return nil, id
    end
    watches[#watches + 1] = w
    client._locks[id] = set
  end
  set._watches = watches
  return set
end

-- (a call cut short gives back what it may have got)
function SET.give_up(rec, how)
  if how then SET.release(rec.client, rec.keys, rec.token) end
end

-- The watchdog's word on the set (Lock:_watched, which held() and
-- lease_end() ask): held while every watch is, lost as soon as one is, and
-- the earliest end they know.
function LockSet:_watched()
  local watches = self._watches
  if not watches then return false end
  local known
  for _, w in ipairs(watches) do
    local state, e = w:state()
    if state ~= "held" then return true, state end
    if e and (known == nil or e < known) then known = e end
  end
  return true, "held", known
end

--- Renews every name's lease to ttl seconds from now, all or none.
-- syntax: ok, err, kind = set:extend(ttl?)
function LockSet:extend(ttl)
  if ttl == nil then ttl = self.ttl end
  lockmod.check_ttl("extend", ttl)
  local client = self._client
  client:_open()
  client:poll()
  if self._state ~= "held" or self._pid ~= getpid() then return errors.not_held(self.name) end
  -- (one Redis: as lock:extend, the replicas a failover could promote in
  -- the master's place must have the new lease before it counts; all the
  -- set's keys are on one node. Redlock's masters have no such replicas.)
  local ch, need = client._conn, 0
  if self._kind == SET then
    need = ch:failover_acks(self._keys[1].lock)
    if need > 0 then ch:wait_next(need, math.min(math.max(ttl / 10, 0.01), 0.5)) end
  end
  local t0 = monotime()
  local r, err, kind = self._kind.extend_set(client, self._keys, self.token, ttl_arg(ttl))
  if not r then return errors.fail(err, kind) end
  if r ~= 1 then
    self:_lose("not held")
    return errors.not_held(self.name)
  end
  if need > 0 then
    local acks, werr, wkind = ch:waited()
    if not (acks and acks >= need) then
      -- extended on the master, but no replica has it: the lease stays
      if not acks then return errors.fail(werr, wkind) end
      return errors.fail(string.format("replicas: %d of %d acknowledged: the lease counts as before"
        .. " (a failover could lose this extend)", acks, need), "replicas")
    end
  end
  self.ttl = ttl
  self._expires = lease_end(t0, ttl)
  for _, w in ipairs(self._watches or {}) do w:renewed(ttl, self._expires, t0) end
  metrics.extended(self)   -- [metrics]
  return true
end

--- Releases every name (each a compare-and-delete, waking its waiters).
-- true when every one was still ours; nil, "not held: ..." when one or
-- more had been lost (those still held are released all the same).
-- syntax: ok, err, kind = set:release()
function LockSet:release()
  local client = self._client
  client:poll()
  if self._state == "released" or self._pid ~= getpid() then return errors.not_held(self.name) end
  for _, w in ipairs(self._watches or {}) do w:unwatch() end
  self._watches = nil
  local r, err, kind = self._kind.release(client, self._keys, self.token, nil, self.ttl)
  if not r then
    self:_lose("unreachable")
    return errors.fail(err, kind)
  end
  if r ~= 1 then
    self:_lose("not held")
    self._state = "released"
    return errors.not_held(self.name)
  end
  self._state = "released"
  self._expires = math.min(self._expires, monotime())
  metrics.released(self)   -- [metrics]
  return true
end

function LockSet:__tostring()
  local state = self._state == "held" and not self:held() and "lost" or self._state
  return string.format("redislock.lockset (%s, %s)", self.name:sub(1, 64), state)
end

-- The names, checked: a list of 1 to MAX_NAMES distinct names.
local function check_names(names)
  checks.check_type("acquire_all", "names", names, "table")
  local n = #names
  if n == 0 or n > _M.MAX_NAMES then
    checks.argerror("acquire_all", "names", "1 to " .. _M.MAX_NAMES .. " names expected, got " .. n)
  end
  local seen = {}
  for i = 1, n do
    local name = names[i]
    if type(name) ~= "string" or name == "" then
      checks.argerror("acquire_all", "names", "a non-empty string expected at [" .. i .. "], got " ..
        (type(name) == "string" and "an empty one" or type(name)))
    end
    if seen[name] then checks.argerror("acquire_all", "names", "'" .. errors.shown_name(name) .. "' twice") end
    seen[name] = true
  end
end

-- Under Cluster one script runs on one node: the names' keys must share a
-- slot (their hash tags: "{acct}:1" and "{acct}:2" do not; names whose
-- keys someone made share one, as Redis' rule has it, only by chance).
local function check_slot(client, keys, names)
  if client._mode ~= "cluster" then return end
  local slot = core.slot(keys[1].lock)
  for i = 2, #keys do
    if core.slot(keys[i].lock) ~= slot then
      checks.argerror("acquire_all", "names", "under Cluster the names must share a slot: '" ..
        errors.shown_name(names[1]) .. "' and '" .. errors.shown_name(names[i]) .. "' do not")
    end
  end
end

--- client:acquire_all(names, opts): a set of locks, every name or none;
-- kind: the set's kind (SET, or the Redlock client's).
-- syntax: set, err, kind = lockset.acquire_all(client, names, opts, kind)
function _M.acquire_all(client, names, opts, kind)
  check_names(names)
  local ttl, wait
  opts, ttl, wait = options.settings("acquire_all", names[1], opts, kind and kind.options or options.SET)
  poll(client)
  local list, keys = {}, {}
  for i, name in ipairs(names) do
    list[i] = name
    keys[i] = client._keys_of(name)
  end
  check_slot(client, keys, list)
  local token = core.token() or assert(core.token())
  local rec = engine.record(client, kind or SET, table.concat(list, ", "), keys, opts, ttl, wait)
  rec.token = token
  rec.label = holdermod.label(client, opts.holder, token, "acquire_all")
  rec.names = list
  return engine.run(rec)
end

return _M

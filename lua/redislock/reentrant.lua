--- redislock.reentrant: reentrant locks (acquire with reentrant = true).
--
-- Ownership is an explicit owner token, never a thread or a coroutine: the
-- client's own (client.owner, random, one per client) unless opts.owner
-- names another, so async code passes ownership along by passing the
-- token. Redis counts the entries (acquire_reentrant.lua); in one client,
-- the holds of one lock share one watchdog registration (a group), which
-- is renewed once and taken back when the last of them is released.

local checks = require "redislock.checks"
local core = require "redislock.core"
local engine = require "redislock.engine"
local lockmod = require "redislock.lock"
checks.own(debug.getinfo(1, "S").source)

local getpid = core.getpid
local ttl_arg = lockmod.ttl_arg
local FLAG = engine.FLAG

local _M = {}

local Group = {}
Group.__index = Group
_M.Group = Group

-- One hold fewer. r: what its release answered (1 released, 2 still held,
-- 0 not held, nil unknown). When Redis says the lock is gone while other
-- holds remain here (someone released it with the token, or broke it),
-- they are lost too, and the registration is taken back.
function Group:leave(lock, r)
  if self._holds[lock] then
    self._holds[lock] = nil
    self.n = self.n - 1
  end
  lock._group = nil
  if self.n == 0 and self.watch then
    -- the last hold here is gone: nothing of this grant is renewed any more
    self.watch:unwatch()
    self.watch = nil
  end
  if (r == 1 or r == 0) and self.n > 0 then
    if self.watch then self.watch:unwatch() end
    self.watch = nil
    for other in pairs(self._holds) do
      other._watch = nil
      other:_lose("not held")
    end
  end
end

local function new_group(fence)
  return setmetatable({ n = 0, watch = nil, fence = fence, _holds = setmetatable({}, { __mode = "k" }) }, Group)
end

-- Losses reported for a group's registration reach every hold
-- (losses.deliver).
function Group:holds()
  local out = {}
  for lock in pairs(self._holds) do out[#out + 1] = lock end
  return out
end

--- The client's owner token, drawn again in a fork child (whose first
-- reentrant acquire finds the pid changed): a child must never enter its
-- parent's locks as the same owner. An explicit opts.owner shared across
-- processes is deliberate sharing, and stays as given.
function _M.owner(client)
  local pid = getpid()
  if pid ~= client._owner_pid then
    client.owner = assert(core.token())
    client._owner_pid = pid
    client._groups = setmetatable({}, { __mode = "v" })
  end
  return client.owner
end

-- The group of `token`'s holds of one grant of `keys` in this client
-- (made on the grant's first hold here; kept only as long as one of its
-- holds is). A group of an earlier grant, now gone, is never joined.
local function group_of(client, keys, token, fence)
  local gk = keys.lock .. "\0" .. token
  local g = client._groups[gk]
  if g and g.n > 0 and g.fence ~= fence then
    -- A grant seen here supersedes the holds of an earlier one: that grant
    -- was lost (broken, or expired, and someone else may have held the
    -- lock since). Their registration renews by the owner's token alone,
    -- which the newer grant's key holds again: unless they are lost here,
    -- it would renew the newer grant for them and they would never learn
    -- of the gap. (Holds of the same owner in other clients are not seen
    -- here: an opts.owner shared across clients stays exposed.)
    if g.watch then
      g.watch:unwatch()
      client._locks[g.watch_id] = nil
      g.watch = nil
    end
    for hold in pairs(g._holds) do
      hold._watch = nil
      if hold._state == "held" then hold:_lose("not held") end
    end
  end
  if not g or g.n == 0 or g.fence ~= fence then
    g = new_group(fence)
    client._groups[gk] = g
  end
  return g
end

--- A reentrant lock: the key of a plain lock, released once its entry
-- count is back at zero; how it is taken (redislock.engine). The watchdog
-- renews its grant (keys.grant: lock .. ":grant") with it.
local REENTRANT = {
  key = "lock",
  renew = "extend_grant",
  auto_spin = true,
  mutex = true,
}
_M.REENTRANT = REENTRANT

-- token and grant: a hold of an earlier grant renews nothing
function REENTRANT.extend(ch, keys, token, ms, fence)
  return ch:script("extend_reentrant", keys.lock, keys.grant, token, ms, string.format("%.0f", fence))
end

function REENTRANT.release(client, keys, token, fence)
  return client._conn:script("release_reentrant", keys.lock, keys.waiters, keys.signal,
    keys.grant, token, string.format("%.0f", fence))
end

-- One attempt: a first entry or a further one.
function REENTRANT.try(rec, t0)
  local ch, keys = rec.client._conn, rec.keys
  ch:deadline(rec.deadline)
  local r, err = ch:script("acquire_reentrant", keys.lock, keys.fence, keys.waiters, keys.grant, keys.holder,
    keys.waiting, rec.token, ttl_arg(rec.ttl), FLAG[rec.mode], rec.client._fence_ttl_ms, rec.label)
  if not r then return nil, err end
  if r[1] ~= 1 then return nil, "busy", r[2], r[3], r[4] end
  return engine.grant(rec, r[2], t0, rec.ttl)
end

function REENTRANT.signal(rec)
  return rec.keys.signal
end

-- A waiter that gave up leaves the waiters inspect counts; a grant it may
-- have got stays: its token is the owner's, whose other holds stay.
function REENTRANT.give_up(rec)
  if rec.mode == "notify" then rec.client._conn:command("ZREM", rec.keys.waiting, rec.token) end
end

-- Joins a granted hold to its group, registering the group with the
-- watchdog on its first hold that asks for one. Returns the lock, or nil,
-- err when the watchdog could not take it.
function REENTRANT.join(rec, lock, expires, hold_until)
  local client, keys, token = rec.client, rec.keys, rec.token
  local g = group_of(client, keys, token, lock.fence)
  local opts = rec.opts
  if opts.watchdog ~= false and not g.watch then
    local watch, err = client._conn:watch(keys.lock, token, rec.ttl, expires, hold_until, REENTRANT.renew)
    if not watch then return nil, err end
    if opts.replicas and opts.replicas > 1 then watch:replicas(opts.replicas) end
    g.watch, g.watch_id = watch, err
    client._locks[err] = g   -- (err: the watch's id)
    for hold in pairs(g._holds) do hold._watch = watch end
  end
  g._holds[lock] = true
  g.n = g.n + 1
  lock._group = g
  lock._watch = g.watch
  return lock
end

return _M

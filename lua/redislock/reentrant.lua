--- redislock.reentrant: reentrant locks (acquire with reentrant = true) and
-- adopting a held lock (Client methods).
--
-- Ownership is an explicit owner token, never a thread or a coroutine: the
-- client's own (client.owner, random, one per client) unless opts.owner
-- names another, so async code passes ownership along by passing the
-- token. Redis counts the entries (acquire_reentrant.lua); in one client,
-- the holds of one lock share one watchdog registration (a group), which
-- is renewed once and taken back when the last of them is released.

local checks = require "redislock.checks"
local core = require "redislock.core"
local lockmod = require "redislock.lock"
local metrics = require "redislock.metrics"
local errors = require "redislock.errors"
checks.own(debug.getinfo(1, "S").source)

local monotime, getpid = core.monotime, core.getpid

local _M = {}

local Group = {}
Group.__index = Group

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

function _M.install(Client)

  -- The client's owner token, drawn again in a fork child (whose first
  -- reentrant acquire finds the pid changed): a child must never enter its
  -- parent's locks as the same owner. An explicit opts.owner shared across
  -- processes is deliberate sharing, and stays as given.
  function Client:_owner()
    local pid = getpid()
    if pid ~= self._owner_pid then
      self.owner = assert(core.token())
      self._owner_pid = pid
      self._groups = setmetatable({}, { __mode = "v" })
    end
    return self.owner
  end

  -- The group of `token`'s holds of one grant of `keys` in this client
  -- (made on the grant's first hold here; kept only as long as one of its
  -- holds is). A group of an earlier grant, now gone, is never joined.
  function Client:_group(keys, token, fence)
    local gk = keys.lock .. "\0" .. token
    local g = self._groups[gk]
    if not g or g.n == 0 or g.fence ~= fence then
      g = new_group(fence)
      self._groups[gk] = g
    end
    return g
  end

  -- Joins a granted reentrant hold to its group, registering the group
  -- with the watchdog on its first hold that asks for one.
  function Client:_join(lock, keys, token, ttl, expires, opts, hold_until)
    local g = self:_group(keys, token, lock.fence)
    if opts.watchdog ~= false and not g.watch then
      local watch, err = self._conn:watch(keys.lock, token, ttl, expires, hold_until, "extend")
      if not watch then return nil, err end
      if opts.replicas and opts.replicas > 1 then watch:replicas(opts.replicas) end
      g.watch = watch
      self._locks[err] = g   -- (err: the watch's id)
      for hold in pairs(g._holds) do hold._watch = watch end
    end
    g._holds[lock] = true
    g.n = g.n + 1
    lock._group = g
    lock._watch = g.watch
    return lock
  end

  --- Takes over a lock held with `token` (e.g. REDISLOCK_TOKEN, in the job
  -- that `redislock run` started): from now on this client renews it (with
  -- the watchdog) and may release it. The lease becomes at least opts.ttl.
  -- syntax: lock, err = client:adopt(name, token, {ttl=30, watchdog=true,
  --           on_lost=fn, max_hold=nil})
  -- err: "not held" when the lock is gone or held with another token.
  function Client:adopt(name, token, opts)
    checks.check_name("adopt", name)
    checks.check_string("adopt", "token", token)
    if #token >= 64 then checks.argerror("adopt", "token", "at most 63 bytes") end
    opts = checks.check_options("adopt", opts,
      { ttl = true, watchdog = true, on_lost = true, max_hold = true })
    local ttl = opts.ttl == nil and 30 or opts.ttl
    lockmod.check_ttl("adopt", ttl)
    checks.check_type("adopt", "watchdog", opts.watchdog, "boolean", true)
    checks.check_callable("adopt", "on_lost", opts.on_lost, true)
    if opts.max_hold ~= nil then
      checks.check_number("adopt", "max_hold", opts.max_hold, lockmod.MIN_TTL, lockmod.MAX_TTL)
    end
    local ch = self:_open()
    self:poll()
    local keys = self._keys_of(name)
    local t0 = monotime()
    local r, err = ch:script("adopt", keys.lock, keys.fence, token, lockmod.ttl_ms(ttl), self._fence_ttl_ms)
    local lock
    if r and r[1] == 1 then
      -- undo = false: if the grant cannot be kept, the lock stays its first
      -- holder's
      lock, err = self:_grant(name, keys, token, r[2], t0, ttl, ttl, opts, opts.max_hold, nil, false)
    elseif r then
      err = "not held"
    end
    metrics.acquire_done(self, name, lock, err, t0, 0)   -- [metrics]
    return errors.result(lock, err)
  end
end

_M.Group = Group
return _M

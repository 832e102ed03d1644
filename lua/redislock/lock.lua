--- redislock.lock: a held lock (what client:acquire returns).
--
-- The lease is judged on the monotonic clock only. With the watchdog, the
-- native thread renews it and reports a loss; without it, the lease ends
-- where the last acquire or extend said. A lock is "held", then "released"
-- or "lost" (lost_reason says why: "not held", "unreachable", "expired",
-- "max_hold", "forked", "stopped"), and never held again.

local core = require "redislock.core"
local setmetatable = setmetatable
local checks = require "redislock.checks"
local metrics = require "redislock.metrics"
local errors = require "redislock.errors"
local poll = require("redislock.client_base").poll
local not_held = errors.not_held
checks.own(debug.getinfo(1, "S").source)

local monotime = core.monotime
local getpid = core.getpid

local _M = {}

local Lock = {}
Lock.__index = Lock
_M.Lock = Lock

-- The part of a lease we may count on after an operation that started at
-- t0: the ttl minus the time the operation took, minus a margin for the
-- server's and our clocks running at slightly different rates (Redlock's
-- 1% + 2 ms; defined once, in csrc/base/lease.h, for us and the watchdog).
local drift_ttl, drift_of = nil, nil    -- the last ttl asked, and its margin
function _M.lease_end(t0, ttl)
  if ttl ~= drift_ttl then drift_ttl, drift_of = ttl, core.drift(ttl) end
  return t0 + ttl - drift_of
end
local lease_end = _M.lease_end

function _M.ttl_ms(ttl)
  return math.floor(ttl * 1000 + 0.5)
end

-- The same as the argument a script gets, formatted once per ttl (the hot
-- path sends the same ttl again and again).
local arg_ttl, arg_ms
function _M.ttl_arg(ttl)
  if ttl ~= arg_ttl then
    arg_ttl, arg_ms = ttl, string.format("%.0f", math.floor(ttl * 1000 + 0.5))
  end
  return arg_ms
end
local ttl_arg = _M.ttl_arg

-- The shortest ttl that can work: it must outlast the drift margin (1% + 2
-- ms) and a round trip, or no grant would ever be valid when it arrives.
_M.MIN_TTL = 0.05
_M.MAX_TTL = 2 ^ 31             -- seconds; keeps PX far from overflow

function _M.check_ttl(fname, ttl)
  checks.check_number(fname, "ttl", ttl, _M.MIN_TTL, _M.MAX_TTL)
end

function _M.check_replicas(fname, replicas, timeout)
  if replicas ~= nil then checks.check_integer(fname, "replicas", replicas, 0, 1000) end
  if timeout ~= nil then checks.check_number(fname, "replicas_timeout", timeout, 0.001, 86400) end
end

--- WAIT for `n` replicas to acknowledge the channel's last write, within
-- `timeout` seconds (default 1). true, or nil, "replicas: K of N
-- acknowledged" / err. The Redis docs' caveat: WAIT does not make Redis
-- strongly consistent; a write acknowledged by replicas can still be lost
-- in a failover (to a replica that had not received it).
function _M.wait_replicas(ch, n, timeout)
  local acks, err, kind = ch:replicas(n, timeout or 1)
  if not acks then return errors.fail(err, kind) end
  if acks < n then
    return errors.fail(string.format("replicas: %d of %d acknowledged", acks, n))
  end
  return true
end

--- What kind of lease a lock is (its _kind): how it is extended and
-- released, and how the watchdog renews it. Each primitive brings its own
-- (acquire.lua: a plain lock; reentrant.lua, rwlock.lua, semaphore.lua,
-- redlock.lua), with how one is taken (redislock.engine says what else).
--   extend(ch, keys, token, ms, fence)  -> 1 | 0 | nil, err, kind
--   release(client, keys, token, fence, ttl) -> 1 released | 2 still held (an
--       inner entry of a reentrant lock left) | 0 not held | nil, err, kind
--   renew: the script the watchdog renews with (KEYS[1] key, token, ms; nil:
--       the transport's default)
--   key: the name in `keys` of the key it renews

--- The lock granted to the attempt `rec` (redislock.engine), its lease
-- ending at `expires`; its class is its kind's (Lock unless the kind says).
-- Fields that start nil (so not set here): lost_reason (why the lease was
-- lost, once it was), _watch (the watchdog handle, when renewed natively),
-- _group (a reentrant lock's holds in this client), _reported (on_lost
-- already called), _replicas and _replicas_timeout (acquire's WAIT).
function _M.new(rec, fence, expires)
  local kind = rec.kind
  return setmetatable({
    name = rec.name,
    token = rec.token,
    fence = fence,
    ttl = rec.ttl,
    _client = rec.client,
    _keys = rec.keys,
    _expires = expires,       -- monotonic time when our lease surely ends
    _state = "held",          -- "held", "released" or "lost"
    _pid = rec.pid or getpid(), -- a forked child must not act on our lock
    _on_lost = rec.opts.on_lost,
    _kind = kind,
  }, kind.class or Lock)
end

function Lock:_lose(reason)
  if self._state == "held" then
    self._state = "lost"
    self.lost_reason = reason
    self._expires = math.min(self._expires, monotime())
    metrics.lost(self, reason)   -- [metrics]
  end
end

-- What the watchdog says of this lease: whether it is watched (false: its
-- end is _expires alone), its state there ("held", else why it was lost)
-- and the end it knows (nil: none yet). A set has several watches
-- (redislock.lockset): one answer for them all.
function Lock:_watched()
  local w = self._watch
  if not w then return false end
  local state, known_end = w:state()
  return true, state, known_end
end

--- Is the lease still ours? False once released or lost: Redis said so, the
-- watchdog could not renew it in time, or (without the watchdog) its end
-- passed on the monotonic clock, judged conservatively. Always false in a
-- forked child: the lock belongs to the parent.
-- syntax: ok = lock:held()
function Lock:held()
  local client = self._client
  if not client._closed then client:poll() end
  if self._state ~= "held" then return false end
  if self._pid ~= getpid() then
    self:_lose("forked")
    return false
  end
  local watched, state = self:_watched()
  if watched then
    if state ~= "held" then
      self:_lose(state)
      return false
    end
  elseif monotime() >= self._expires then
    self:_lose(client._closed and "stopped" or "expired")
    return false
  end
  return true
end

--- The moment (on core.monotime's clock) until which the lease is surely
-- ours: when the last successful acquire/extend/renewal was sent, plus the
-- ttl, minus the drift margin. Past it, act as if the lock were gone.
-- syntax: t = lock:lease_end()
function Lock:lease_end()
  if not self:held() then return self._expires end -- in the past by now
  local _, _, known_end = self:_watched()
  return known_end or self._expires
end

-- How long an extend waits for the replica a failover needs (see
-- Lock:extend) when the caller asked for no WAIT of its own: the
-- watchdog's rule (csrc/watchdog/wd_ack.c), a tenth of the ttl within
-- [10 ms, 500 ms].
local function failover_wait(ttl)
  return math.min(math.max(ttl / 10, 0.01), 0.5)
end

--- Renews the lease to ttl seconds from now, if it is still ours.
-- syntax: ok, err = lock:extend(ttl?, {replicas=, replicas_timeout=})
-- ttl defaults to the lock's ttl; replicas defaults to the acquire's. With
-- replicas, fewer acknowledgements answer nil, "replicas: K of N
-- acknowledged": the lease was extended on the master all the same.
-- Where a failover could put a replica in the master's place (Sentinel,
-- Cluster with replicas), the new lease counts only once a replica has it,
-- as the watchdog's renewals: without that acknowledgement the lock keeps
-- the lease it had and the answer is nil, "replicas: 0 of 1 acknowledged
-- ...", kind "replicas".
function Lock:extend(ttl, opts)
  if ttl == nil then ttl = self.ttl end
  _M.check_ttl("extend", ttl)
  opts = checks.check_options("extend", opts, { replicas = true, replicas_timeout = true })
  _M.check_replicas("extend", opts.replicas, opts.replicas_timeout)
  local replicas = opts.replicas == nil and self._replicas or opts.replicas
  local replicas_timeout = opts.replicas_timeout or self._replicas_timeout
  local client = self._client
  local ch = client:_open()
  client:poll()
  -- A lost lock stays lost: the caller may already have acted on the loss.
  if self._state ~= "held" or self._pid ~= getpid() then return not_held(self.name) end
  -- (the replicas a failover could promote in the master's place: every
  -- one must have the new lease; 0 where none could, by the node of the key)
  local need = ch:failover_acks(self._keys[self._kind.key])
  local want = math.max(replicas or 0, need)
  if want > 0 then
    ch:wait_next(want, (replicas or 0) > 0 and replicas_timeout or failover_wait(ttl))
  end
  local t0 = monotime()
  local r, err, kind = self._kind.extend(ch, self._keys, self.token, ttl_arg(ttl), self.fence)
  if not r then return errors.fail(err, kind) end
  if r ~= 1 then
    self:_lose("not held")
    return not_held(self.name)
  end
  local acks, werr, wkind
  if want > 0 then acks, werr, wkind = ch:waited() end
  if need > 0 and not (acks and acks >= need) then
    -- Extended on the master, but no replica has it: a failover now would
    -- lose it, so the lease stays what it was.
    if not acks then return errors.fail(werr, wkind) end
    return errors.fail(string.format("replicas: %d of %d acknowledged: the lease counts as before"
      .. " (a failover could lose this extend)", acks, need), "replicas")
  end
  self.ttl = ttl
  self._expires = lease_end(t0, ttl)
  if self._watch then self._watch:renewed(ttl, self._expires, t0) end
  metrics.extended(self)   -- [metrics]
  if replicas and replicas > 0 then
    if not acks then return errors.fail(werr, wkind) end
    if acks < replicas then
      return errors.fail(string.format("replicas: %d of %d acknowledged", acks, replicas))
    end
  end
  return true
end

--- Deletes the key if it still holds our token. Never touches a key that
-- expired and was taken by someone else.
-- syntax: ok, err = lock:release()
function Lock:release()
  local client = self._client
  poll(client)   -- (raises once the client is closed; every client's poll)
  if self._state == "released" then return not_held(self.name) end
  if self._pid ~= getpid() then return not_held(self.name) end
  -- Unregister first: from here on the watchdog queues nothing for this
  -- key, and a renewal not yet written is taken back (it never waits). A
  -- reentrant lock's registration is shared by its holds: only the last
  -- one to leave takes it back.
  local group = self._group
  local watch = group and group.watch or self._watch
  if watch and (not group or group.n == 1) then watch:unwatch() end
  self._watch = nil
  -- A handle of our own alone, unwatched and now used by nothing: the
  -- client's next watch binds it anew (no allocation on the hot path).
  if watch and not group then
    client._spare_watch = watch
    -- (and its loss reports, which its unwatch ended, need it no more)
    client._locks[self._watch_id] = nil
  end
  -- (_grant: which grant a hold of a reentrant read share belongs to)
  local r, err, kind = self._kind.release(client, self._keys, self.token, self._grant or self.fence)
  if group then group:leave(self, r) end
  if not r then
    -- Not renewed any more, and we cannot tell whether the delete ran:
    -- count the lock as lost; its ttl frees the name if it did not.
    self:_lose("unreachable")
    return errors.fail(err, kind)
  end
  if r == 0 then
    self:_lose("not held")
    self._state = "released"
    return not_held(self.name)
  end
  self._state = "released"
  local now = monotime()
  if now < self._expires then self._expires = now end
  metrics.released(self)   -- [metrics]
  return true
end

-- Lua 5.4 `local l <close> = ...`: leaving the scope releases. Errors (even
-- a closed client's) are dropped: a __close handler must not mask the
-- block's own error.
function Lock:__close()
  if self._state ~= "released" then pcall(self.release, self) end
end

-- Never shows the token: it is the proof of ownership.
function Lock:__tostring()
  local state = self._state == "held" and not self:held() and "lost" or self._state
  return string.format("redislock.lock (%s, %s)", self.name:sub(1, 64), state)
end

return _M

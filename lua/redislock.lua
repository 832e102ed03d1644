--- redislock: safe Redis locks for Lua.
--
-- Policy lives here (options, defaults, waiting, guards); mechanics live in
-- the C core `redislock.core` (connections, the Redis-side scripts, tokens,
-- the monotonic clock). Every lock operation is one embedded script from
-- lua/redislock/scripts/, sent by the C core as EVALSHA with EVAL fallback.
--
-- Error conventions (lua-resty style): a wrong argument raises an error that
-- names it; a failure of the world returns nil, err whose first word is one of
-- busy, timeout, not held, connection, redis.

local core = require "redislock.core"
local url = require "redislock.url"
local backoff = require "redislock.backoff"

local unpack = table.unpack or unpack -- luacheck: ignore 143
local monotime = core.monotime
local getpid = core.getpid
local function pack(...) return { n = select("#", ...), ... } end
local huge = math.huge

local _M = { _VERSION = "0.1.0", core = core }

local DEFAULT_TTL = 30
local MAX_TTL = 2 ^ 31            -- seconds; keeps PX far from overflow
local MIN_TTL = 0.001             -- PX has millisecond resolution
local MAX_SPIN = 1                -- seconds of busy-polling per wait, at most

--- argument checking ------------------------------------------------------

local SOURCE = debug.getinfo(1, "S").source

-- Raises at the caller's line: the first stack level outside this file.
local function argerror(fname, argname, msg)
  local level = 2
  while true do
    local info = debug.getinfo(level, "S")
    if not info or info.source ~= SOURCE then break end
    level = level + 1
  end
  error(string.format("redislock: bad argument '%s' to '%s' (%s)", argname, fname, msg), level)
end

local function check_type(fname, argname, value, want, optional)
  if value == nil and optional then return end
  if type(value) ~= want then
    argerror(fname, argname, want .. " expected, got " .. type(value))
  end
end

-- A finite number within [lo, hi]; NaN fails every comparison and so fails.
local function check_number(fname, argname, value, lo, hi, allow_inf)
  if type(value) ~= "number" then
    argerror(fname, argname, "number expected, got " .. type(value))
  end
  if value ~= value then argerror(fname, argname, "number expected, got NaN") end
  if value == huge and allow_inf then return end
  if not (value >= lo and value <= hi) then
    argerror(fname, argname, string.format("must be between %g and %g", lo, hi))
  end
end

local function check_options(fname, opts, known)
  if opts == nil then return {} end
  check_type(fname, "opts", opts, "table")
  for k in pairs(opts) do
    if not known[k] then
      argerror(fname, "opts", "unknown option '" .. tostring(k) .. "'")
    end
  end
  return opts
end

local function check_name(fname, name)
  check_type(fname, "name", name, "string")
  if name == "" then argerror(fname, "name", "non-empty string expected") end
end

local function check_ttl(fname, ttl)
  check_number(fname, "ttl", ttl, MIN_TTL, MAX_TTL)
end

local function ttl_ms(ttl)
  return math.floor(ttl * 1000 + 0.5)
end

-- The part of a lease we may count on after an operation that started at
-- t0: the ttl minus the time the operation took, minus a margin for the
-- server's and our clocks running at slightly different rates (Redlock's
-- 1% + 2 ms; defined once, in csrc/lease.h, for us and the watchdog).
local function lease_end(t0, ttl)
  return t0 + ttl - core.drift(ttl)
end

--- Lock -------------------------------------------------------------------

local Lock = {}
Lock.__index = Lock

local function new_lock(client, name, keys, token, fence, ttl, expires, on_lost)
  return setmetatable({
    name = name,
    token = token,
    fence = fence,
    ttl = ttl,
    lost_reason = nil,        -- why the lease was lost, once it was
    _client = client,
    _keys = keys,
    _expires = expires,       -- monotonic time when our lease surely ends
    _state = "held",          -- "held", "released" or "lost"
    _pid = getpid(),          -- a forked child must not act on our lock
    _watch = nil,             -- the watchdog handle, when renewed natively
    _on_lost = on_lost,
    _reported = false,        -- on_lost already called
  }, Lock)
end

function Lock:_lose(reason)
  if self._state == "held" then
    self._state = "lost"
    self.lost_reason = reason
    self._expires = math.min(self._expires, monotime())
  end
end

--- Is the lease still ours? False once released or lost: Redis said so, the
-- watchdog could not renew it in time, or (without the watchdog) its end
-- passed on the monotonic clock, judged conservatively. Always false in a
-- forked child: the lock belongs to the parent.
-- syntax: ok = lock:held()
function Lock:held()
  self._client:poll()
  if self._state ~= "held" then return false end
  if self._pid ~= getpid() then
    self:_lose("forked")
    return false
  end
  if self._watch then
    local state = self._watch:state()
    if state ~= "held" then
      self:_lose(state)
      return false
    end
  elseif monotime() >= self._expires then
    self:_lose("expired")
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
  if self._watch then
    local _, known_end = self._watch:state()
    if known_end then return known_end end
  end
  return self._expires
end

--- Renews the lease to ttl seconds from now, if it is still ours.
-- syntax: ok, err = lock:extend(ttl?)   -- ttl defaults to the lock's ttl
function Lock:extend(ttl)
  if ttl == nil then ttl = self.ttl end
  check_ttl("extend", ttl)
  self._client:poll()
  -- A lost lock stays lost: the caller may already have acted on the loss.
  if self._state ~= "held" or self._pid ~= getpid() then return nil, "not held" end
  local t0 = monotime()
  local r, err = self._client._conn:script("extend", self._keys.lock, self.token, ttl_ms(ttl))
  if not r then return nil, err end
  if r ~= 1 then
    self:_lose("not held")
    return nil, "not held"
  end
  self.ttl = ttl
  self._expires = lease_end(t0, ttl)
  if self._watch then self._watch:renewed(ttl, self._expires, t0) end
  return true
end

--- Deletes the key if it still holds our token. Never touches a key that
-- expired and was taken by someone else.
-- syntax: ok, err = lock:release()
function Lock:release()
  self._client:poll()
  if self._state == "released" then return nil, "not held" end
  if self._pid ~= getpid() then return nil, "not held" end
  -- Unregister first: unwatch waits for a renewal on the wire, so the
  -- watchdog sends nothing for this key once the release is on its way.
  if self._watch then self._watch:unwatch() end
  local r, err = self._client:_release_keys(self._keys, self.token)
  if not r then return nil, err end
  self._state = "released"
  self._expires = math.min(self._expires, monotime())
  if r ~= 1 then return nil, "not held" end
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

--- Client -------------------------------------------------------------------

local Client = {}
Client.__index = Client

local ACQUIRE_OPTIONS = {
  ttl = true, wait = true, watchdog = true, on_lost = true, max_hold = true,
  notify = true, fair = true, spin = true,
}

-- Fair waiters try again at least this often (seconds), which keeps their
-- place in line; one that stops trying loses its place after FAIR_KEEP.
local FAIR_HEARTBEAT = 1
local FAIR_KEEP_MS = 2500
-- The lease a release hands over with the lock to a fair waiter: short, so
-- one that died in line blocks the name only this long; the new holder's
-- watchdog renews it to the full ttl at once.
local FAIR_GRANT_MS = 3000

-- The lease (ms) a release hands to a fair waiter asking for ttl seconds:
-- what acquire_fair records for the release and what the waiter counts on.
local function fair_grant_ms(ttl)
  return math.min(ttl_ms(ttl), FAIR_GRANT_MS)
end

-- Key layout: the name is the hash tag, so the lock, its fence counter and
-- its wait signals land in one Cluster slot and one script may touch them.
function Client:_keys(name)
  local key = self._prefix .. "{" .. name .. "}"
  return {
    lock = key,
    fence = key .. ":fence",        -- grows with every grant; no ttl
    waiters = key .. ":waiters",    -- set while someone waits for a release
    signal = key .. ":signal",      -- release leaves a wakeup here (fair
                                    -- waiters: here .. ":" .. their token)
    queue = key .. ":queue",        -- fair waiters in arrival order
    deadlines = key .. ":queue:deadlines",
    leases = key .. ":queue:leases",
  }
end

-- The connection that waiters block on, so that a BLPOP never holds up the
-- client's main connection (and the watchdog has its own anyway).
function Client:_wait_conn()
  if not self._waiter then
    local conn, err = self._transport.wait_conn(self._cfg)
    if not conn then return nil, err end
    self._waiter = conn
  end
  return self._waiter
end

-- Blocks until a release leaves a wakeup in `signal`, or `seconds` pass.
-- Returns true and the wakeup (nil when timed out); nil, err when the wait
-- connection failed (the caller falls back to sleeping).
--
-- Redis checks blocking timeouts only as often as its `hz` (every 100 ms by
-- default), so a BLPOP may return well after its timeout. Our own socket
-- timeout, a hair after it, is what keeps the caller's deadline: when it
-- fires, the connection is dropped (the server forgets the BLPOP with it)
-- and the next wait reconnects.
--
-- spin: seconds to poll for the wakeup before sleeping in the kernel (the
-- `spin` option of acquire; see conn_spin in csrc/conn.c).
function Client:_wait_release(signal, seconds, exact, spin)
  local conn, err = self:_wait_conn()
  if not conn then return nil, err end
  -- exact: `seconds` ends at the caller's deadline, so our socket timeout
  -- must end it; otherwise let Redis end the BLPOP and keep the connection.
  conn:set_timeout(seconds + (exact and 0.005 or 0.25))
  conn:set_spin(spin)
  local r
  r, err = conn:command("BLPOP", signal, string.format("%.3f", seconds))
  if r == nil and not err:find("timed out", 1, true) then return nil, err end
  return true, r and r[2] or nil
end

function Client:_release_keys(keys, token)
  return self._conn:script("release", keys.lock, keys.waiters, keys.signal, keys.queue,
    keys.deadlines, keys.leases, keys.fence, token)
end

-- Turns a grant into a held lock: checks the lease is still running (the
-- reply may have come so late that it is over: handing it out would let the
-- caller act without a lock, etcd #11456) and registers the watchdog.
-- t0: when the request that led to the grant was sent; lease: seconds the
-- grant runs from then; ttl: what the lock is renewed to.
function Client:_grant(name, keys, token, fence, t0, lease, ttl, opts, max_hold)
  local expires = lease_end(t0, lease)
  if monotime() >= expires then
    self:_release_keys(keys, token)
    return nil, "timeout"
  end
  local lock = new_lock(self, name, keys, token, fence, ttl, expires, opts.on_lost)
  if opts.watchdog == false then
    if lease < ttl then
      -- handed over with a short lease: bring it to the asked ttl now
      local ok, err = lock:extend(ttl)
      if not ok then return nil, err == "not held" and "timeout" or err end
    end
    return lock
  end
  local watch, werr = self._conn:watch(keys.lock, token, ttl, expires, max_hold and t0 + max_hold)
  if not watch then
    -- No watchdog, no lock: the caller asked for a lease that lives as
    -- long as it does, and we cannot promise that.
    self:_release_keys(keys, token)
    return nil, "watchdog failed: " .. werr
  end
  lock._watch = watch
  self._locks[watch:id()] = lock
  return lock
end

-- One attempt, sent at t0. Returns the lock; or nil, err, holder_ms.
function Client:_try(name, keys, token, ttl, mode, opts, max_hold, t0)
  local conn = self._conn
  local r, err
  if mode == "fair" then
    r, err = conn:script("acquire_fair", keys.lock, keys.fence, keys.queue, keys.deadlines,
      keys.leases, keys.signal .. ":" .. token, token, ttl_ms(ttl), FAIR_KEEP_MS,
      fair_grant_ms(ttl))
  else
    r, err = conn:script("acquire", keys.lock, keys.fence, keys.waiters, token,
      ttl_ms(ttl), mode == "notify" and "1" or "0")
  end
  if not r then return nil, err end
  if r[1] ~= 1 then return nil, "busy", r[2] end
  -- r[3]: handed to us earlier, with this much of its lease left
  local lease = r[3] and r[3] / 1000 or ttl
  return self:_grant(name, keys, token, r[2], t0, lease, ttl, opts, max_hold)
end

--- Takes the lock `name`, waiting up to opts.wait seconds for it.
-- syntax: lock, err = client:acquire(name, {ttl=30, wait=0, watchdog=true,
--           on_lost=fn, max_hold=nil, notify=true, fair=false, spin=0})
-- err: "busy" (tried once), "timeout" (waited), or a connection/redis error.
--
-- Waiting: after a failed attempt the waiter blocks (BLPOP on its own
-- connection) until the holder's release leaves a wakeup, or until the
-- holder's lease would end, whichever is first, then tries again. No wakeup
-- is lost: the failed attempt marks the name as waited for, and a release
-- that comes before the BLPOP leaves its wakeup in the list. With
-- notify = false, or when the wait connection fails, it sleeps with
-- exponential backoff and full jitter instead. With fair = true waiters
-- queue in Redis and are granted in arrival order. The deadline is kept on
-- the monotonic clock. spin > 0: each wait for a wakeup first polls its
-- socket for up to `spin` seconds, burning this process's CPU (not Redis')
-- to see a release sooner than a sleeping process can be woken.
function Client:acquire(name, opts)
  return self:_acquire("acquire", name, opts)
end

-- acquire, with argument errors naming `fname` (acquire or with_lock).
function Client:_acquire(fname, name, opts)
  check_name(fname, name)
  opts = check_options(fname, opts, ACQUIRE_OPTIONS)
  local ttl = opts.ttl == nil and DEFAULT_TTL or opts.ttl
  check_ttl(fname, ttl)
  local wait = opts.wait == nil and 0 or opts.wait
  check_number(fname, "wait", wait, 0, MAX_TTL, true)
  check_type(fname, "watchdog", opts.watchdog, "boolean", true)
  check_type(fname, "on_lost", opts.on_lost, "function", true)
  check_type(fname, "notify", opts.notify, "boolean", true)
  check_type(fname, "fair", opts.fair, "boolean", true)
  local spin = opts.spin == nil and 0 or opts.spin
  check_number(fname, "spin", spin, 0, MAX_SPIN)
  local max_hold = opts.max_hold
  if max_hold ~= nil then check_number(fname, "max_hold", max_hold, MIN_TTL, MAX_TTL) end
  self:poll()

  local keys = self:_keys(name)
  -- One token for the whole call: it is also a fair waiter's place in line.
  local token = assert(core.token())
  local mode = opts.fair and wait > 0 and "fair"
    or (wait > 0 and opts.notify ~= false) and "notify" or "poll"
  local signal = mode == "fair" and keys.signal .. ":" .. token or keys.signal
  local deadline = monotime() + wait
  local attempt = 0
  local lock, err, holder_ms
  while true do
    local t_try = monotime()
    lock, err, holder_ms = self:_try(name, keys, token, ttl, mode, opts, max_hold, t_try)
    if lock or wait == 0 then break end
    local now = monotime()
    if now >= deadline then
      if err == "busy" then err = "timeout" end
      break
    end
    attempt = attempt + 1
    -- holder_ms is the holder's remaining lease: never wait past it. 0: it
    -- ends within a millisecond; -2: the key is gone (free, or, for a fair
    -- waiter, free for someone ahead in line); -1: no lease at all (not one
    -- of ours), so only its release can end the wait.
    local limit = deadline - now
    if holder_ms and holder_ms > 0 then limit = math.min(limit, holder_ms / 1000) end
    if mode == "fair" then limit = math.min(limit, FAIR_HEARTBEAT) end
    -- one BLPOP at most an hour: a huge `wait` just loops
    limit = math.min(limit, 3600)
    local free_now = err == "busy" and (holder_ms == 0 or (holder_ms == -2 and mode ~= "fair"))
    local woken, grant = false, nil
    if mode ~= "poll" and err == "busy" and not free_now and limit >= 0.001 then
      woken, grant = self:_wait_release(signal, limit, limit >= deadline - now, spin)
    end
    if mode == "fair" and grant then
      -- A release handed us the lock with a short lease. It did so after
      -- our last attempt ran (which cleared any older hand-over), so the
      -- lease is counted from when that attempt was sent.
      lock, err = self:_grant(name, keys, token, tonumber(grant), t_try, fair_grant_ms(ttl) / 1000,
        ttl, opts, max_hold)
      if lock then break end
    elseif free_now then
      if holder_ms == 0 then self._sleep(0.001) end
    elseif not woken then
      self._sleep(math.min(backoff.delay(attempt), limit))
    end
  end
  if not lock and mode == "fair" then
    -- Leave the line; if a release handed us the lock just now, releasing
    -- it hands it on to the next in line.
    self._conn:script("dequeue", keys.queue, keys.deadlines, keys.leases, token)
    self:_release_keys(keys, token)
  end
  if lock then return lock end
  return nil, err
end

-- Keys of a fenced resource: its own hash tag, apart from lock keys.
function Client:_resource_keys(resource)
  local key = self._prefix .. "{" .. resource .. "}:resource"
  return key, key .. ":fence", key .. ":version"
end

local function check_fence(fname, fence)
  check_number(fname, "fence", fence, 1, 2 ^ 53)
  if fence ~= math.floor(fence) then argerror(fname, "fence", "integer expected") end
end

--- Writes `value` to the resource only if `fence` is not older than the
-- newest fence the resource has seen (from fenced_set or fenced_get).
-- syntax: version, err = client:fenced_set(resource, value, fence)
-- version: the order in which writes were accepted (1, 2, ...);
-- err: "stale" when refused, or a connection/redis error.
function Client:fenced_set(resource, value, fence)
  check_name("fenced_set", resource)
  if type(value) ~= "string" and type(value) ~= "number" then
    argerror("fenced_set", "value", "string or number expected, got " .. type(value))
  end
  check_fence("fenced_set", fence)
  local data, seen, version = self:_resource_keys(resource)
  local r, err = self._conn:script("fenced_set", data, seen, version, value, fence)
  if not r then return nil, err end
  if r == 0 then return nil, "stale" end
  return r
end

--- Reads the resource as the holder of `fence`, and refuses older fences
-- from then on. Returns the value (false when never written).
-- syntax: value, err = client:fenced_get(resource, fence)
-- err: "stale" when a newer fence has been seen, or a connection/redis error.
function Client:fenced_get(resource, fence)
  check_name("fenced_get", resource)
  check_fence("fenced_get", fence)
  local data, seen = self:_resource_keys(resource)
  local r, err = self._conn:script("fenced_get", data, seen, fence)
  if not r then return nil, err end
  if r[1] ~= 1 then return nil, "stale" end
  return r[2]
end

--- What Redis says about the lock `name` now (for operators and the CLI).
-- syntax: info, err = client:inspect(name)
-- info: { held = bool, ttl = seconds or nil, fence = last fence drawn (0 if
-- never), token = the holder's token or nil }. Treat the token as a secret.
function Client:inspect(name)
  check_name("inspect", name)
  local keys = self:_keys(name)
  local conn = self._conn
  local token, err = conn:command("GET", keys.lock)
  if token == nil then return nil, err end
  local pttl
  pttl, err = conn:command("PTTL", keys.lock)
  if pttl == nil then return nil, err end
  local fence
  fence, err = conn:command("GET", keys.fence)
  if fence == nil then return nil, err end
  return {
    held = token ~= false,
    ttl = (token and pttl > 0) and pttl / 1000 or nil,
    fence = fence and tonumber(fence) or 0,
    token = token or nil,
  }
end

--- Releases `name` on behalf of its holder, given the holder's token (an
-- operator's tool): the same compare-and-delete as lock:release().
-- syntax: ok, err = client:release_token(name, token)
function Client:release_token(name, token)
  check_name("release_token", name)
  check_type("release_token", "token", token, "string")
  local r, err = self:_release_keys(self:_keys(name), token)
  if not r then return nil, err end
  if r ~= 1 then return nil, "not held" end
  return true
end

--- Deletes `name` whoever holds it (a stuck lock), waking its waiters. The
-- holder is not told until its next renewal; prefer release_token.
-- syntax: ok, err = client:break_lock(name)
function Client:break_lock(name)
  check_name("break_lock", name)
  local info, err = self:inspect(name)
  if not info then return nil, err end
  if not info.held then return nil, "not held" end
  -- Compare-and-delete on the token just read: if it changed hands in
  -- between, the new holder is left alone.
  return self:release_token(name, info.token)
end

--- Runs fn(lock, ...) holding the lock, and releases it on every path.
-- syntax: ok, ... = client:with_lock(name, opts, fn, ...)
-- Returns true and fn's results, or nil, err when the lock was not taken.
-- An error raised by fn is raised again after the release.
function Client:with_lock(name, opts, fn, ...)
  local mt = getmetatable(fn)
  if type(fn) ~= "function" and not (mt and mt.__call) then
    argerror("with_lock", "fn", "function expected, got " .. type(fn))
  end
  local lock, err = self:_acquire("with_lock", name, opts)
  if not lock then return nil, err end
  local res = pack(pcall(fn, lock, ...))
  -- Protected: if fn closed the client, the release raises, and fn's own
  -- error (or results) must still come back unchanged.
  pcall(lock.release, lock)
  if not res[1] then error(res[2], 0) end
  return true, unpack(res, 2, res.n)
end

--- Delivers the watchdog's loss reports: marks those locks lost and calls
-- their on_lost(lock, reason). Every call into the library does this too;
-- call it yourself when client:fd() becomes readable. An error raised by a
-- callback is caught; the last one is kept in client.callback_error.
-- syntax: n = client:poll()   -- how many losses were delivered
function Client:poll()
  local losses = self._conn:losses()
  if not losses then return 0 end
  local n = 0
  for i = 1, #losses, 2 do
    local lock = self._locks[losses[i]]
    if lock then
      lock:_lose(losses[i + 1])
      if lock._state == "lost" and not lock._reported then
        lock._reported = true
        n = n + 1
        if lock._on_lost then
          local ok, err = pcall(lock._on_lost, lock, lock.lost_reason)
          if not ok then self.callback_error = err end
        end
      end
    end
  end
  return n
end

--- A file descriptor that becomes readable when a loss report is pending,
-- for event loops (cqueues, luv, nginx); then call client:poll().
-- syntax: fd = client:fd()
function Client:fd()
  return self._conn:fd()
end

--- Watchdog counters: renewals, round_trips, failures, watched, last_batch,
-- and lost = { ["not held"] = n, unreachable = n, expired = n, ... }.
-- syntax: t = client:stats()
function Client:stats()
  return self._conn:stats()
end

--- Closes the connection and stops the watchdog thread. Idempotent. Locks
-- still held are no longer renewed and keep their lease until their ttl runs
-- out.
-- syntax: client:close()
function Client:close()
  self._conn:close()
  if self._waiter then self._waiter:close() end
  return true
end

function Client:__close()
  self:close()
end

function Client:__tostring()
  return tostring(self._conn)
end

--- connect ------------------------------------------------------------------

local CONNECT_OPTIONS = {
  url = true, host = true, port = true, path = true, username = true,
  password = true, db = true, connect_timeout = true, timeout = true,
  prefix = true, transport = true,
}

-- How a client talks to Redis. Each opens the main connection (checked at
-- once: a wrong address or password fails connect), makes the connection
-- waiters block on, and sleeps.
local TRANSPORTS = {
  -- hiredis in the C core: blocking calls; any Lua host.
  native = {
    open = function(cfg) return core.connect(cfg) end,
    wait_conn = function(cfg) return core.connect(cfg) end,
    sleep = core.sleep,
  },
  -- nginx cosockets (lua/redislock/cosocket.lua): calls yield to nginx.
  cosocket = {
    open = function(cfg)
      local cosocket = require "redislock.cosocket"
      local lazy = {}
      for k, v in pairs(cfg) do lazy[k] = v end
      lazy.lazy = true
      local native = core.connect(lazy) -- hosts the watchdog only
      local conn, err = cosocket.new(cfg, native)
      if not conn then
        native:close()
        return nil, err
      end
      local pong
      pong, err = conn:command("PING")
      if not pong then
        conn:close()
        return nil, err
      end
      return conn
    end,
    wait_conn = function(cfg) return require("redislock.cosocket").new(cfg) end,
    sleep = function(seconds) ngx.sleep(seconds) end,
  },
}
local ENDPOINT_FIELDS = { "host", "port", "path", "username", "password", "db" }

--- Opens a client with one connection to Redis.
-- syntax: client, err = redislock.connect{url=, host=, port=, path=, username=,
--           password=, db=, connect_timeout=2, timeout=2, prefix="",
--           transport="native"}
-- transport: "native" (hiredis in the C core) or "cosocket" (inside nginx:
-- calls yield to the event loop; see lua/redislock/cosocket.lua).
function _M.connect(opts)
  check_type("connect", "opts", opts, "table")
  check_options("connect", opts, CONNECT_OPTIONS)
  local cfg = {}
  if opts.url ~= nil then
    check_type("connect", "url", opts.url, "string")
    for _, f in ipairs(ENDPOINT_FIELDS) do
      if opts[f] ~= nil then
        argerror("connect", f, "give either url or " .. f .. ", not both")
      end
    end
    cfg = url.parse(opts.url)
  else
    for _, f in ipairs(ENDPOINT_FIELDS) do cfg[f] = opts[f] end
  end
  check_type("connect", "host", cfg.host, "string", true)
  check_type("connect", "path", cfg.path, "string", true)
  check_type("connect", "username", cfg.username, "string", true)
  check_type("connect", "password", cfg.password, "string", true)
  if cfg.host and cfg.path then argerror("connect", "path", "give either host or path, not both") end
  if cfg.username and not cfg.password then
    argerror("connect", "username", "a password is required with a user name")
  end
  if cfg.port ~= nil then check_number("connect", "port", cfg.port, 1, 65535) end
  if cfg.db ~= nil then check_number("connect", "db", cfg.db, 0, 2 ^ 20) end
  for _, f in ipairs({ "port", "db" }) do
    if cfg[f] ~= nil and cfg[f] ~= math.floor(cfg[f]) then
      argerror("connect", f, "integer expected")
    end
  end
  cfg.connect_timeout = opts.connect_timeout
  cfg.timeout = opts.timeout
  if cfg.connect_timeout ~= nil then
    check_number("connect", "connect_timeout", cfg.connect_timeout, 0.001, 86400)
  end
  if cfg.timeout ~= nil then check_number("connect", "timeout", cfg.timeout, 0, 86400) end
  local prefix = opts.prefix == nil and "" or opts.prefix
  check_type("connect", "prefix", prefix, "string")
  local transport = TRANSPORTS[opts.transport == nil and "native" or opts.transport]
  if not transport then
    argerror("connect", "transport", "'native' or 'cosocket' expected, got " .. tostring(opts.transport))
  end

  local conn, err = transport.open(cfg)
  if not conn then return nil, err end
  return setmetatable({
    _conn = conn,
    _cfg = cfg,                 -- for the wait connection, made on first wait
    _waiter = nil,
    _transport = transport,
    _prefix = prefix,
    _sleep = transport.sleep,
    _locks = setmetatable({}, { __mode = "v" }), -- watch id -> lock, for on_lost
  }, Client)
end

return _M

--- redislock.acquire: taking a lock, and waiting for it (Client methods).
--
-- Policy only: every Redis step is one embedded script sent through the
-- client's channel (redislock.channel), so the same logic serves every
-- transport. A waiter blocks until the holder's release leaves a wakeup, or
-- until the holder's lease would end, whichever is first; or, with
-- notify = false, sleeps with backoff and full jitter; or, with
-- fair = true, queues in Redis and is handed the lock in arrival order.

local core = require "redislock.core"
local type, next, getmetatable = type, next, getmetatable
local checks = require "redislock.checks"
local backoff = require "redislock.backoff"
local lockmod = require "redislock.lock"
local metrics = require "redislock.metrics"
local errors = require "redislock.errors"
local holdermod = require "redislock.holder"
checks.own(debug.getinfo(1, "S").source)

local monotime, new_token = core.monotime, core.token
local ttl_ms, ttl_arg = lockmod.ttl_ms, lockmod.ttl_arg
local lease_end = lockmod.lease_end
local check_number, check_type = checks.check_number, checks.check_type
local MUTEX, REENTRANT = lockmod.MUTEX, lockmod.REENTRANT

local MAX_SPIN = 1                -- seconds of busy-polling per wait, at most
local DEFAULT_TTL = 30

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

local MIN_TTL, MAX_TTL = lockmod.MIN_TTL, lockmod.MAX_TTL
local EMPTY = setmetatable({}, { __newindex = function() error("read-only", 2) end })

local function check_boolean(fname, argname, v)
  if type(v) ~= "boolean" then check_type(fname, argname, v, "boolean") end
end

-- acquire's options, each with its check. The common case costs one type
-- test and a range test per option given; only a bad value goes on to the
-- checks module, which words the error (the same words as everywhere).
local CHECK = {
  ttl = function(fname, v)
    if type(v) ~= "number" or not (v >= MIN_TTL and v <= MAX_TTL) then lockmod.check_ttl(fname, v) end
  end,
  wait = function(fname, v)
    if type(v) ~= "number" or not (v >= 0 and v <= MAX_TTL or v == math.huge) then
      check_number(fname, "wait", v, 0, MAX_TTL, true)
    end
  end,
  watchdog = function(fname, v) check_boolean(fname, "watchdog", v) end,
  on_lost = function(fname, v) checks.check_callable(fname, "on_lost", v) end,
  notify = function(fname, v) check_boolean(fname, "notify", v) end,
  fair = function(fname, v) check_boolean(fname, "fair", v) end,
  spin = function(fname, v) check_number(fname, "spin", v, 0, MAX_SPIN) end,
  max_hold = function(fname, v) check_number(fname, "max_hold", v, MIN_TTL, MAX_TTL) end,
  replicas = function(fname, v) lockmod.check_replicas(fname, v, nil) end,
  replicas_timeout = function(fname, v) lockmod.check_replicas(fname, nil, v) end,
  reentrant = function(fname, v) check_boolean(fname, "reentrant", v) end,
  owner = function(fname, v)
    checks.check_string(fname, "owner", v)
    if #v >= 64 then checks.argerror(fname, "owner", "at most 63 bytes") end
  end,
  fence = function(fname, v) check_boolean(fname, "fence", v) end,
  holder = function(fname, v) holdermod.check(fname, v) end,
}

-- The options whose combinations settings() checks.
local COMBINED = { owner = true, fence = true, fair = true, reentrant = true, holder = true }

-- Checks acquire's options once; returns the settings the loop uses.
local function settings(fname, name, opts)
  if type(name) ~= "string" or name == "" then checks.check_name(fname, name) end
  if opts == nil then return EMPTY, DEFAULT_TTL, 0, nil, nil end
  if type(opts) ~= "table" then check_type(fname, "opts", opts, "table") end
  local ttl, wait, combined = DEFAULT_TTL, 0, false
  for k, v in next, opts do
    -- the common options checked in line, the rest by CHECK
    if k == "ttl" then
      if type(v) ~= "number" or not (v >= MIN_TTL and v <= MAX_TTL) then lockmod.check_ttl(fname, v) end
      ttl = v
    elseif k == "wait" then
      if type(v) ~= "number" or not (v >= 0 and v <= MAX_TTL or v == math.huge) then
        check_number(fname, "wait", v, 0, MAX_TTL, true)
      end
      wait = v
    elseif k == "watchdog" or k == "notify" then
      if type(v) ~= "boolean" then check_type(fname, k, v, "boolean") end
    else
      local check = CHECK[k]
      if not check then checks.argerror(fname, "opts", "unknown option '" .. tostring(k) .. "'") end
      check(fname, v)
      combined = combined or COMBINED[k]
    end
  end
  if getmetatable(opts) ~= nil then
    -- options with defaults behind __index (or a proxy): every option read
    -- through it is checked too, and they are combined as given
    for k, check in next, CHECK do
      local v = opts[k]
      if v ~= nil then check(fname, v) end
    end
    ttl, wait, combined = opts.ttl or DEFAULT_TTL, opts.wait or 0, true
  end
  if combined then
    if opts.owner ~= nil and not opts.reentrant then
      checks.argerror(fname, "owner", "only with reentrant = true")
    end
    if opts.fence == false and (opts.fair or opts.reentrant) then
      checks.argerror(fname, "fence", "fair and reentrant locks always carry a fence")
    end
    if opts.reentrant and opts.fair then
      checks.argerror(fname, "fair", "a reentrant lock cannot be fair")
    end
    if opts.fence == false and opts.holder then
      -- (the plain SET NX PX of fence = false writes nothing else)
      checks.argerror(fname, "holder", "recorded by the acquire script: not with fence = false")
    end
  end
  return opts, ttl, wait, opts.spin, opts.max_hold
end

-- The default spin (spin = nil): the waits for a name that ended with a
-- release, in a moving average per name. When they are short (a few ms:
-- short critical sections), a waiter polls for the wakeup for a little
-- longer than that before sleeping, and the handoff skips the sleeping
-- process' wakeup; when they are long, or unknown, it sleeps at once, so a
-- waiter burns no CPU on a holder that keeps the lock (or died).
local AUTO_SPIN_MAX = 0.005       -- seconds: spin only for waits this short
local AUTO_SPIN_NAMES = 1024      -- names remembered (then forgotten at once)

local function auto_spin(client, name)
  local avg = client._wait_avg[name]
  if not avg then return 0 end
  local s = avg * 1.5
  return s <= AUTO_SPIN_MAX and s or 0
end

local function saw_wait(client, name, seconds)
  local avgs = client._wait_avg
  local avg = avgs[name]
  if not avg then
    if client._wait_names >= AUTO_SPIN_NAMES then
      avgs = {}
      client._wait_avg, client._wait_names = avgs, 0
    end
    client._wait_names = client._wait_names + 1
    avgs[name] = seconds
  else
    avgs[name] = avg + (seconds - avg) * 0.25
  end
end

return function(Client)

  -- Blocks until a release leaves a wakeup in `signal`, or `seconds` pass.
  -- Returns true and the wakeup (nil when timed out); nil, err when the wait
  -- connection failed (the caller falls back to sleeping). exact: `seconds`
  -- ends at the caller's deadline (see channel:block).
  function Client:_wait_release(signal, seconds, exact, spin)
    local r, err, kind = self._conn:block(signal, seconds, exact, spin)
    if r == nil and kind ~= "timeout" then return nil, err, kind end
    return true, r or nil
  end

  function Client:_release_keys(keys, token)
    return MUTEX.release(self, keys, token)
  end

  -- Turns a grant into a held lock: checks the lease is still running (the
  -- reply may have come so late that it is over: handing it out would let
  -- the caller act without a lock, etcd #11456) and registers the watchdog.
  -- t0: when the request that led to the grant was sent; lease: seconds the
  -- grant runs from then; ttl: what the lock is renewed to. kind: the
  -- lease's kind (lock.lua; MUTEX when nil); undo: false when a failed
  -- grant must not be given back (an adopted lock is someone else's too).
  local function grant(self, name, keys, token, fence, t0, lease, ttl, opts, max_hold, kind, undo)
    kind = kind or MUTEX
    local expires = lease_end(t0, lease)
    if monotime() >= expires then
      if undo ~= false then kind.release(self, keys, token, fence) end
      return nil, "connection too slow: the grant came after its lease ended"
    end
    local lock = lockmod.new(self, name, keys, token, fence, ttl, expires, opts.on_lost, kind)
    if opts.replicas or opts.replicas_timeout then
      lock._replicas, lock._replicas_timeout = opts.replicas, opts.replicas_timeout
    end
    if opts.watchdog == false then
      if kind.reentrant then self:_join(lock, keys, token, ttl, expires, opts) end
      if lease < ttl then
        -- handed over with a short lease: bring it to the asked ttl now
        local ok, err = lock:extend(ttl)
        if not ok then return nil, err == "not held" and "timeout" or err end
      end
      return lock
    end
    local watch, werr
    if kind.reentrant then
      watch, werr = self:_join(lock, keys, token, ttl, expires, opts, max_hold and t0 + max_hold)
      if watch then return lock end
    else
      -- (a released lock's handle, when there is one, is bound anew)
      local spare = self._spare_watch
      self._spare_watch = nil
      watch, werr = self._conn:watch(kind == MUTEX and keys.lock or kind.key(keys), token, ttl, expires,
        max_hold and t0 + max_hold, kind.renew, spare)   -- werr: the watch's id on success
    end
    if not watch then
      -- No watchdog, no lock: the caller asked for a lease that lives as
      -- long as it does, and we cannot promise that.
      if undo ~= false then kind.release(self, keys, token, fence) end
      return nil, "watchdog failed: " .. werr
    end
    -- (where its renewals wait for replicas, at least as many as it asked)
    if opts.replicas and opts.replicas > 1 then watch:replicas(opts.replicas) end
    lock._watch = watch
    self._locks[werr] = lock
    return lock
  end
  Client._grant = grant

  -- A reentrant grant (a first entry or a further one), with the WAIT the
  -- caller asked for; a failure gives the entry back.
  function Client:_grant_entry(name, keys, token, fence, t0, ttl, opts, max_hold)
    if opts.replicas and opts.replicas > 0 then
      local ok, werr = lockmod.wait_replicas(self._conn, opts.replicas, opts.replicas_timeout)
      if not ok then
        REENTRANT.release(self, keys, token, fence)
        return nil, werr
      end
    end
    return grant(self, name, keys, token, fence, t0, ttl, ttl, opts, max_hold, REENTRANT)
  end

  -- A grant of a fresh lease (not a hand-over): the WAIT the caller asked
  -- for, then the lock.
  local function granted(self, name, keys, token, fence, t0, ttl, opts, max_hold)
    if opts.replicas and opts.replicas > 0 then
      local ok, werr = lockmod.wait_replicas(self._conn, opts.replicas, opts.replicas_timeout)
      if not ok then
        self:_release_keys(keys, token)
        return nil, werr
      end
    end
    return grant(self, name, keys, token, fence, t0, ttl, ttl, opts, max_hold)
  end

  -- What the acquire scripts' ARGV[3] says of the caller, by mode: "1" it
  -- will wait for a release notification (and registers as a waiter); "0"
  -- it tries once (a refusal names the holder); "2" it polls.
  local FLAG = { notify = "1", once = "0", poll = "2", fair = "1" }

  -- One attempt, sent at t0. Returns the lock; or nil, err, holder_ms, and
  -- for a refusal of a caller trying once, the holder's label and how long
  -- it has held the lock (ms), when it recorded them. first: the call's
  -- first attempt; mode: "once" (wait = 0), "poll", "notify" or "fair";
  -- label: what the grant records ("" for nothing). deadline: the call's
  -- (the end of its wait): a refusal Redis asks to wait out (TRYAGAIN
  -- while the name's slot moves, LOADING) is waited out until then at
  -- most (channel deadline), not for the whole command timeout.
  local function try(self, name, keys, token, ttl, mode, opts, max_hold, t0, first, label, deadline)
    local ch = self._conn
    -- (a local: a cosocket call below yields, and other calls run meanwhile)
    local ms = ttl_arg(ttl)
    local r, err
    label = label or ""
    if opts.fence == false and (first or mode ~= "notify") then
      -- No fence asked for: a plain SET NX PX, no script (and no holder
      -- recorded). A waiter's later attempts use the script, which also
      -- tells releases someone waits.
      ch:deadline(deadline)
      r, err = ch:command("SET", keys.lock, token, "NX", "PX", ms)
      if r == nil then return nil, err end
      if r == "OK" then return granted(self, name, keys, token, nil, t0, ttl, opts, max_hold) end
      if mode ~= "notify" then return nil, "busy" end
      -- busy, and we will wait: the script registers us
    end
    ch:deadline(deadline)
    if opts.reentrant then
      r, err = ch:script("acquire_reentrant", keys.lock, keys.fence, keys.waiters, keys.count, keys.holder,
        keys.waiting, token, ms, FLAG[mode], self._fence_ttl_ms, label)
      if not r then return nil, err end
      if r[1] ~= 1 then return nil, "busy", r[2], r[3], r[4] end
      return self:_grant_entry(name, keys, token, r[2], t0, ttl, opts, max_hold)
    elseif mode == "fair" then
      r, err = ch:script("acquire_fair", keys.lock, keys.fence, keys.queue, keys.deadlines,
        keys.leases, keys.signal .. ":" .. token, keys.waiters, keys.holder, token, ttl_ms(ttl), FAIR_KEEP_MS,
        fair_grant_ms(ttl), self._fence_ttl_ms, label)
    else
      r, err = ch:script("acquire", keys.lock, keys.fence, keys.waiters, keys.holder, keys.waiting, token,
        ms, FLAG[mode], self._fence_ttl_ms, label)
    end
    if not r then return nil, err end
    if r[1] ~= 1 then return nil, "busy", r[2], r[3], r[4] end
    if r[3] then
      -- handed to us earlier, with this much of its lease left; the
      -- releaser wrote it: make our own write for WAIT to count
      local lock, gerr = grant(self, name, keys, token, r[2], t0, r[3] / 1000, ttl, opts, max_hold)
      if lock and opts.replicas and opts.replicas > 0 then
        local ok, xerr = lock:extend(ttl)
        if not ok then
          pcall(lock.release, lock)
          return nil, xerr
        end
      end
      return lock, gerr
    end
    return granted(self, name, keys, token, opts.fence ~= false and r[2] or nil, t0, ttl, opts, max_hold)
  end
  Client._try = try

  -- A notify waiter's wait with its next attempt queued behind it (see
  -- redislock.channel wait_try, csrc/topo/route_wait.c): the attempt runs the
  -- moment the BLPOP returns, before the releaser (or anyone) can answer
  -- the release, and the handoff costs one round trip fewer. Not for the
  -- waits WAIT must count (it counts writes of the main connection) or
  -- reentrant ones; not for short ttls: the grant's lease is counted from
  -- when the wait was sent, so the wait is kept to a quarter of the ttl
  -- (and Redis ends a BLPOP up to a tick of its clock late, 100 ms).
  -- (max_hold, which bounds liveness and not safety, counts from when the
  -- grant was seen.)
  -- Returns nil when it did not wait (the caller waits with block); or
  -- woken (false: the wait failed or Redis refused it, so back off), the
  -- wakeup, then the attempt's outcome: lock | nil, err, holder_ms, or
  -- nothing when the attempt did not run.
  local WAIT_TRY_MIN_TTL = 1       -- seconds
  local WAIT_TRY_SLACK = 0.25      -- seconds left after the wait, at least
  local function wait_try(self, name, keys, token, ttl, signal, limit, left, spin, opts, max_hold, label)
    if ttl < WAIT_TRY_MIN_TTL or opts.reentrant or (opts.replicas and opts.replicas > 0) then return nil end
    local seconds = math.min(limit, ttl / 4)
    if seconds + WAIT_TRY_SLACK > left then return nil end
    local t0 = monotime()
    local sent, v, r, unsent = self._conn:wait_try(signal, seconds, spin, "acquire", keys.lock, keys.fence,
      keys.waiters, keys.holder, keys.waiting, token, ttl_arg(ttl), "1", self._fence_ttl_ms, label)
    if sent == false then return nil end
    if sent == nil then
      -- the attempt may have run: take back what it may have granted
      if unsent ~= "unsent" then self:_release_keys(keys, token) end
      -- (a wait a signal ended: the call ends with it)
      if r == "interrupted" then return false, nil, nil, v end
      return false
    end
    local woken = v ~= nil   -- (nil: Redis refused the BLPOP, it did not wait)
    if v then saw_wait(self, name, monotime() - t0) end
    if not r then return woken, v end
    if r[1] ~= 1 then return woken, v, nil, "busy", r[2] end
    return woken, v, granted(self, name, keys, token, opts.fence ~= false and r[2] or nil, t0, ttl, opts,
      max_hold and max_hold + (monotime() - t0))
  end

  -- Did a signal end the call (intr.h)? Its err then starts with the word.
  local function interrupted(err)
    return type(err) == "string" and err:sub(1, 11) == "interrupted"
  end
  local STOPPED = "interrupted: a signal ended the wait"

  -- Waits for the lock: attempts until taken or `wait` passed. Returns the
  -- lock | nil, err; and the failed attempts.
  local function wait_loop(self, name, keys, token, ttl, wait, spin, max_hold, opts, mode, t_call, label)
    local signal = mode == "fair" and keys.signal .. ":" .. token or keys.signal
    local deadline = t_call + wait
    local attempt = 0
    local lock, err, holder_ms
    local tried   -- a refusal wait_try brought: it stands for the next attempt
    local ch = self._conn
    while true do
      local t_try = monotime()
      if tried then
        tried = nil
      else
        lock, err, holder_ms = try(self, name, keys, token, ttl, mode, opts, max_hold, t_try, attempt == 0, label,
          deadline)
      end
      if lock or interrupted(err) then break end
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
      local woken, handed, werr, wkind = false, nil, nil, nil
      local ran, got, gerr, gms
      local waits = mode ~= "poll" and err == "busy" and not free_now and limit >= 0.001
      if waits and mode == "notify" then
        local w
        w, handed, got, gerr, gms = wait_try(self, name, keys, token, ttl, signal, limit, deadline - now,
          spin or auto_spin(self, name), opts, max_hold, label)
        if w ~= nil then woken, waits = w, false end
        ran = got ~= nil or gerr ~= nil
      end
      if waits then
        local t_block = monotime()
        woken, handed, wkind = self:_wait_release(signal, limit, limit >= deadline - now,
          spin or auto_spin(self, name))
        if handed then saw_wait(self, name, monotime() - t_block) end
        if woken == nil then werr = handed end
      end
      local slept = true
      if wkind == "interrupted" then
        err = werr
        break
      elseif ran then
        -- the attempt queued behind the wait ran: its outcome is this round's
        lock, err, holder_ms, tried = got, gerr, gms, true
        if lock or interrupted(err) then break end
        -- a wait Redis refused at once (a wrong type, an ACL): no hot loop
        if not woken then slept = ch:sleep(math.min(backoff.delay(attempt), limit)) end
      elseif mode == "fair" and handed then
        -- A release handed us the lock with a short lease. It did so after
        -- our last attempt ran (which cleared any older hand-over), so the
        -- lease is counted from when that attempt was sent.
        lock, err = grant(self, name, keys, token, tonumber(handed), t_try, fair_grant_ms(ttl) / 1000,
          ttl, opts, max_hold)
        if lock and opts.replicas and opts.replicas > 0 then
          -- the releaser wrote the hand-over: our own extend is what WAIT counts
          local ok, xerr = lock:extend(ttl)
          if not ok then
            pcall(lock.release, lock)
            lock, err = nil, xerr
          end
        end
        if lock then break end
      elseif free_now then
        if holder_ms == 0 then slept = ch:sleep(0.001) end
      elseif not woken then
        slept = ch:sleep(math.min(backoff.delay(attempt), limit))
      end
      if slept == false then   -- (a signal ended the sleep: intr.h)
        err = STOPPED
        break
      end
    end
    return lock, err, attempt
  end

  -- What a call that waited and ended without a lock takes back: its place
  -- among the waiters inspect counts, or in a fair line; and, when it was
  -- cut short (an interrupt, an error in a callback), a grant it may have
  -- got (an attempt whose reply never came back to us). Not for a
  -- reentrant lock: its token is the owner's, whose other holds stay.
  local function undo(self, keys, token, mode, opts, cut)
    if mode == "fair" then
      -- Leave the line; if a release handed us the lock just now, releasing
      -- it hands it on to the next in line.
      self._conn:script("dequeue", keys.queue, keys.deadlines, keys.leases, token)
    elseif mode == "notify" then
      self._conn:command("ZREM", keys.waiting, token)
    end
    if (cut or mode == "fair") and not opts.reentrant then self:_release_keys(keys, token) end
  end

  -- client:acquire, with argument errors naming `fname` (acquire or with_lock).
  local function acquire(self, fname, name, opts)
    local ttl, wait, spin, max_hold
    opts, ttl, wait, spin, max_hold = settings(fname, name, opts)
    Client.poll(self)   -- (raises once the client is closed; not through __index: the hot path)

    local keys = self._keys_of(name)
    -- One token for the whole call: it is also a fair waiter's place in
    -- line. A reentrant lock's is its owner's.
    local token = opts.reentrant and (opts.owner or self:_owner()) or new_token()
    if not token then token = assert(new_token()) end   -- (raises with the reason)
    -- What the grant records as its holder (redislock.holder): only a
    -- label given here, or a reentrant owner's token, can hold the token
    local label = opts.holder
    if label == nil and not opts.reentrant then
      label = holdermod.label(self, nil)
    else
      label = holdermod.label(self, label, token, fname)
    end
    local t_call = monotime()
    -- Protected: a signal's hook (intr.h) may raise inside, after a grant
    -- whose reply it cut off; nothing granted to this token may stay then.
    local ok, lock, err, attempt, mode, _, hlabel, hheld
    if wait == 0 then
      -- one attempt, no loop (the uncontended path)
      mode, attempt = "once", 0
      ok, lock, err, _, hlabel, hheld = pcall(try, self, name, keys, token, ttl, "once", opts, max_hold,
        t_call, true, label, t_call)
      if err == "busy" then err = holdermod.busy(hlabel, hheld) end
    else
      mode = opts.fair and "fair" or opts.notify ~= false and "notify" or "poll"
      ok, lock, err, attempt = pcall(wait_loop, self, name, keys, token, ttl, wait, spin, max_hold, opts, mode,
        t_call, label)
    end
    if not ok then
      pcall(undo, self, keys, token, mode, opts, true)
      error(lock, 0)
    end
    if not lock and (mode == "notify" or mode == "fair" or interrupted(err)) then
      undo(self, keys, token, mode, opts, interrupted(err))
    end
    metrics.acquire_done(self, name, lock, err, t_call, attempt)   -- [metrics]
    if lock then return lock end
    return errors.fail(err)
  end
  Client._acquire = acquire

  --- Takes the lock `name`, waiting up to opts.wait seconds for it.
  -- syntax: lock, err = client:acquire(name, {ttl=30, wait=0, watchdog=true,
  --           on_lost=fn, max_hold=nil, notify=true, fair=false, spin=0})
  -- err, kind: "busy" (tried once), "timeout" (waited), or another kind of
  -- redislock.errors (connection, redis, watchdog, ...).
  function Client:acquire(name, opts)
    return acquire(self, "acquire", name, opts)
  end

  --- Runs fn(lock, ...) holding the lock, and releases it on every path.
  -- syntax: ok, ... = client:with_lock(name, opts, fn, ...)
  -- Returns true and fn's results, or nil, err when the lock was not taken.
  -- An error raised by fn is raised again after the release.
  function Client:with_lock(name, opts, fn, ...)
    if not checks.callable(fn) then
      checks.argerror("with_lock", "fn", "function expected, got " .. type(fn))
    end
    local lock, err, kind = self:_acquire("with_lock", name, opts)
    if not lock then return nil, err, kind end
    local res = { n = 0 }
    local function keep(ok, ...)
      res = { n = select("#", ...) + 1, ok, ... }
    end
    keep(pcall(fn, lock, ...))
    -- Protected: if fn closed the client, the release raises, and fn's own
    -- error (or results) must still come back unchanged.
    pcall(lock.release, lock)
    if not res[1] then error(res[2], 0) end
    return true, (table.unpack or unpack)(res, 2, res.n) -- luacheck: ignore 143
  end
end

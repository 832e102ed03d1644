--- redislock.waiting: options and the wait loop of the shared primitives
-- (read-write locks, semaphores).
--
-- An attempt that is kept out says how long the share in its way may last
-- at most; the caller then blocks on the primitive's signal list until a
-- release leaves a wakeup there, or that time passes, or the heartbeat
-- (a waiting writer's marker must be refreshed), whichever is first. The
-- attempt registers the waiter (token -> until when it blocks) so that a
-- release knows how many to wake (release_share.lua). With notify = false
-- it sleeps with backoff and full jitter instead.

local core = require "redislock.core"
local checks = require "redislock.checks"
local backoff = require "redislock.backoff"
local lockmod = require "redislock.lock"
local ttl_ms = lockmod.ttl_ms
local metrics = require "redislock.metrics"
local holdermod = require "redislock.holder"
checks.own(debug.getinfo(1, "S").source)

local monotime = core.monotime
local min = math.min

local _M = {}

local OPTIONS = {
  ttl = true, wait = true, watchdog = true, on_lost = true, max_hold = true,
  notify = true, spin = true, holder = true,
}
_M.DEFAULT_TTL = 30
local MAX_SPIN = 1

--- Checks the options of a share's acquire (read, write, a permit).
-- syntax: opts, ttl, wait, max_hold = waiting.settings(fname, opts)
function _M.settings(fname, opts)
  opts = checks.check_options(fname, opts, OPTIONS)
  local ttl = opts.ttl == nil and _M.DEFAULT_TTL or opts.ttl
  lockmod.check_ttl(fname, ttl)
  local wait = opts.wait == nil and 0 or opts.wait
  checks.check_number(fname, "wait", wait, 0, lockmod.MAX_TTL, true)
  checks.check_type(fname, "watchdog", opts.watchdog, "boolean", true)
  checks.check_callable(fname, "on_lost", opts.on_lost, true)
  checks.check_type(fname, "notify", opts.notify, "boolean", true)
  if opts.spin ~= nil then checks.check_number(fname, "spin", opts.spin, 0, MAX_SPIN) end
  if opts.max_hold ~= nil then
    checks.check_number(fname, "max_hold", opts.max_hold, lockmod.MIN_TTL, lockmod.MAX_TTL)
  end
  holdermod.check(fname, opts.holder)
  return opts, ttl, wait, opts.max_hold
end

--- Tries until taken or `wait` seconds passed.
-- try(t0, block_ms) -> lease | nil, err, holder_ms: one attempt sent at t0;
-- block_ms: how long we would block after it (0: we will not, so it must
-- not register us as a waiter). signal: the list a release wakes us on.
-- heartbeat: the longest block (seconds), nil for none. name: for the
-- metrics and events.
-- Returns the lease, or nil, "busy" / "timeout" / err.
function _M.run(client, name, try, signal, wait, opts, heartbeat)
  local ch = client._conn
  local notify = opts.notify ~= false and wait > 0
  local t_call = monotime()
  local deadline = t_call + wait
  local attempt = 0
  while true do
    local t0 = monotime()
    local limit = min(deadline - t0, 3600, heartbeat or 3600)
    -- (the attempt's refusals to wait out, TRYAGAIN, LOADING: until our
    -- deadline at most; try's first call is the attempt)
    ch:deadline(deadline)
    local got, err, holder_ms = try(t0, notify and math.ceil(limit * 1000) or 0)
    if got or wait == 0 then
      metrics.acquire_done(client, name, got, err, t_call, attempt)   -- [metrics]
      return got, err
    end
    local now = monotime()
    if now >= deadline then
      err = err == "busy" and "timeout" or err
      metrics.acquire_done(client, name, nil, err, t_call, attempt)   -- [metrics]
      return nil, err
    end
    attempt = attempt + 1
    limit = min(deadline - now, 3600, heartbeat or 3600)
    -- holder_ms: until the share in the way ends at most (0: within a
    -- millisecond; negative: none known)
    if holder_ms and holder_ms > 0 then limit = min(limit, holder_ms / 1000) end
    local slept, werr, wkind
    if err == "busy" and holder_ms == 0 then
      slept = ch:sleep(0.001)
    elseif notify and err == "busy" and limit >= 0.001 then
      local woken
      woken, werr, wkind = client:_wait_release(signal, limit, limit >= deadline - now, opts.spin)
      if not woken and wkind ~= "interrupted" then slept = ch:sleep(min(backoff.delay(attempt), limit)) end
    else
      slept = ch:sleep(min(backoff.delay(attempt), limit))
    end
    if wkind == "interrupted" or slept == false then   -- (a signal: csrc/base/intr.h)
      err = wkind and werr or "interrupted: a signal ended the wait"
      metrics.acquire_done(client, name, nil, err, t_call, attempt)   -- [metrics]
      return nil, err
    end
  end
end

--- A share's acquire (a read, a write, a permit): the options checked, one
-- token for the call, attempts until taken or `wait` passed.
-- owner: the rwlock or semaphore (its _client, _keys, name); kind: the
-- lease's kind (lock.lua), with .fenced when the reply's second value is a
-- fence; signal: the list its waiters block on; attempt(ch, token, ttl_ms,
-- block_ms, label) -> the script's reply ({1, ...} taken, {0, ms} not) |
-- nil, err (label: the holder the grant records, "" for none);
-- heartbeat: see run; on_grant(lock, reply): optional.
-- Returns lock | nil, err; and the token either way.
function _M.acquire(owner, fname, opts, kind, signal, attempt, heartbeat, on_grant)
  local ttl, wait, max_hold
  opts, ttl, wait, max_hold = _M.settings(fname, opts)
  local client, keys, name = owner._client, owner._keys, owner.name
  local ch = client:_open()
  client:poll()
  local token = assert(core.token())
  local label = holdermod.label(client, opts.holder, token, fname)
  local function try(t0, block_ms)
    local r, err = attempt(ch, token, ttl_ms(ttl), block_ms, label)
    if not r then return nil, err end
    if r[1] ~= 1 then return nil, "busy", r[2] end
    local lock, gerr = client:_grant(name, keys, token, kind.fenced and r[2] or nil, t0, ttl, ttl, opts,
      max_hold, kind)
    if lock and on_grant then on_grant(lock, r) end
    return lock, gerr
  end
  -- Protected: a signal's hook (csrc/base/intr.h) may raise inside, after a
  -- grant whose reply it cut off: the share is given back then.
  local ok, lock, err = pcall(_M.run, client, name, try, signal, wait, opts, heartbeat)
  if not ok then
    pcall(kind.release, client, keys, token)
    error(lock, 0)
  end
  return lock, err, token
end

return _M

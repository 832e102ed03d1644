--- redislock.engine: how every lease is taken. Plain, fair and reentrant
-- locks, adopt, read and write shares, permits and Redlock locks all go
-- through this one call: an attempt record, one wait loop, one grant path.
--
-- Policy only: what an attempt sends is its kind's (below), and every wait
-- is a channel call (redislock.channel), so the same logic serves every
-- transport. A waiter blocks until a release leaves a wakeup on its kind's
-- signal list, or until the lease in its way would end, whichever is
-- first; or, with notify = false (and for a kind with no signal: Redlock),
-- sleeps with backoff and full jitter; or, fair, queues in Redis and is
-- handed the lock in arrival order.
--
-- The attempt record (one per call; see record()):
--   client, kind, name, keys, opts   the call; opts as options.settings gives it
--   token, label                     the lease's token; the holder the grant records ("": none)
--   pid                              core.getpid() if the caller drew it (false: the lock draws it)
--   ttl                              the lease it asks for
--   mode                             "once" (wait = 0), "poll", "notify" or "fair"
--   t_call, deadline                 when the call began, and when its wait ends
--   permits                          a semaphore's limit
--   tries, t_try                     the wait loop's: attempts failed so far, when the last was sent
--
-- A kind: what a lease is, and how one is taken (lock.lua's extend and
-- release, with these):
--   try(rec, t0, first)      one attempt, sent at t0 (first: the call's
--       first): what grant() makes of a grant | nil, err, holder_ms, label,
--       held_ms (holder_ms: how long the lease in the way lasts at most;
--       label and held_ms: who holds it and since when, if it said)
--   signal(rec)              the list a release wakes this waiter on; nil
--       for a kind that only polls (its waits sleep)
--   queued(rec), verdict(rec, reply, t0)   optional: the attempt as a
--       script call that can wait behind a BLPOP (channel wait_try), and
--       its reply read as try's answer
--   handed_lease(rec)        optional: the lease (seconds) of the lock a
--       release hands over with the wakeup (fair)
--   join(rec, lock, expires, hold_until)   optional: registers a hold in the
--       client's group of holds of one grant (reentrant.lua): the lock | nil, err
--   granted(rec, lock)       optional: what a grant adds to its lock
--   give_up(rec, how)        optional: what a call that ends without a lock
--       takes back (how: nil, "interrupted" or "raised")
--   class                    the lock's metatable (lock.lua's Lock when nil)
--   auto_spin                the default spin from this client's recent waits
--   heartbeat(rec)           optional: the longest wait between two
--       attempts (seconds), nil for none
--   keeps                    a grant it cannot keep stays its first holder's
--       (adopt): nothing is given back
--   mutex                    its lease is the name's mutex (plain, fair,
--       reentrant, adopted, Redlock locks): a call of this client for a
--       name it holds so is refused at once, never waits for itself
--   mine(rec)                optional: that check for a kind of its own
--       (acquire_all: any of its names): the "busy" to answer, or nil

local core = require "redislock.core"
local checks = require "redislock.checks"
local backoff = require "redislock.backoff"
local lockmod = require "redislock.lock"
local metrics = require "redislock.metrics"
local errors = require "redislock.errors"
local holdermod = require "redislock.holder"
checks.own(debug.getinfo(1, "S").source)

local pcall, error, tonumber = pcall, error, tonumber
local min = math.min
local monotime = core.monotime
local new_lock = lockmod.new
local lease_end = lockmod.lease_end
local interrupted, STOPPED, fail = errors.interrupted, errors.STOPPED, errors.fail
local acquire_done, busy_by = metrics.acquire_done, holdermod.busy

local _M = {}

--- What the acquire scripts' ARGV[3] says of the caller, by mode: "1" it
-- will wait for a release notification (and registers as a waiter); "0"
-- it tries once (a refusal names the holder); "2" it polls.
_M.FLAG = { notify = "1", once = "0", poll = "2", fair = "1" }

---------------------------------------------------------------------------
-- The attempt record
---------------------------------------------------------------------------

--- The record of one call. Each client keeps the record of its last call
-- for the next one, so a call allocates none (a cosocket call that yields
-- leaves the spare to the calls meanwhile, which make their own). A field
-- a record may lack for its call (permits) is never read by it; the rest
-- are set here or by the caller before run(), never to nil, so a record
-- reused has the same keys (and needs no rehash).
-- syntax: rec = engine.record(client, kind, name, keys, opts, ttl, wait)
-- The caller then sets token and label (and permits, for a semaphore).
function _M.record(client, kind, name, keys, opts, ttl, wait)
  local rec = client._spare_rec
  if rec then client._spare_rec = false else rec = {} end
  local t_call = monotime()
  rec.client, rec.kind, rec.name, rec.keys, rec.opts = client, kind, name, keys, opts
  rec.ttl, rec.t_call, rec.deadline, rec.pid = ttl, t_call, t_call + wait, false
  if wait == 0 then
    rec.mode = "once"
  elseif opts.fair and kind.signal then
    -- (fair waits in line whatever notify says: its hand-over is the wakeup)
    rec.mode = "fair"
  elseif not kind.signal or opts.notify == false then
    rec.mode = "poll"
  else
    rec.mode = "notify"
  end
  return rec
end

-- Gives back what a grant we cannot keep may hold (not for a kind that
-- keeps it, adopt's: the lock stays its first holder's).
local function release(rec, fence)
  local kind = rec.kind
  if not kind.keeps then return kind.release(rec.client, rec.keys, rec.token, fence, rec.ttl) end
end

---------------------------------------------------------------------------
-- The grant path
---------------------------------------------------------------------------

-- Turns a grant into a held lock: checks the lease is still running (the
-- reply may have come so late that it is over: handing it out would let
-- the caller act without a lock, etcd #11456) and registers it for renewal
-- (a reentrant hold joins its group). No watchdog, no lock: the caller
-- asked for a lease that lives as long as it does, and we cannot promise
-- that. max_hold, which bounds liveness and not safety, counts from when
-- the grant is seen.
local function hold_lock(rec, fence, t0, lease)
  local kind, opts, client = rec.kind, rec.opts, rec.client
  local expires = lease_end(t0, lease)
  local now = monotime()
  if now >= expires then
    release(rec, fence)
    return nil, errors.TOO_SLOW
  end
  local lock = new_lock(rec, fence, expires)
  if kind.granted then kind.granted(rec, lock) end
  if opts.replicas or opts.replicas_timeout then
    lock._replicas, lock._replicas_timeout = opts.replicas, opts.replicas_timeout
  end
  if opts.watchdog == false then
    if kind.join then kind.join(rec, lock, expires) end
    if lease < rec.ttl then
      -- handed over with a short lease: bring it to the asked ttl now
      local ok, err, ekind = lock:extend(rec.ttl)
      if not ok then return nil, ekind == "not held" and "timeout" or err end
    end
    return lock
  end
  local max_hold = opts.max_hold
  local hold_until = max_hold and now + max_hold or nil
  local w, id
  if kind.join then
    w, id = kind.join(rec, lock, expires, hold_until)
    if w then return lock end
  else
    -- (a released lock's handle, when there is one, is bound anew)
    local spare = client._spare_watch
    client._spare_watch = false
    w, id = client._conn:watch(rec.keys[kind.key], rec.token, rec.ttl, expires, hold_until, kind.renew, spare)
  end
  if not w then
    release(rec, fence)
    return nil, errors.watchdog_failed(id)
  end
  -- (where its renewals wait for replicas, at least as many as it asked)
  if opts.replicas and opts.replicas > 1 then w:replicas(opts.replicas) end
  lock._watch, lock._watch_id = w, id
  client._locks[id] = lock   -- (id: the watch's, as loss reports name it; its release takes it out)
  return lock
end

-- Remembers a granted lock of a name's mutex in its client (a reentrant
-- hold: its group, whose holds all count), and the caller it was granted
-- to where others can run while one waits (the transport's caller()).
local function remember_as(client, name, entry)
  client._mine[name] = entry
  if client._yields then entry._caller = client._conn:caller() end
end
_M.remember_as = remember_as

local function remember(rec, lock)
  remember_as(rec.client, rec.name, lock._group or lock)
  return lock
end

local function hold(rec, fence, t0, lease)
  local lock, err = hold_lock(rec, fence, t0, lease)
  if lock and rec.kind.mutex then remember(rec, lock) end
  return lock, err
end

--- The one grant path: a lease granted at t0 for `lease` seconds becomes
-- a held lock. A fresh grant first waits for the replicas the caller asked
-- for; a lock a release handed over (handed) gets them through our own
-- extend, the write WAIT counts (the releaser wrote the hand-over).
-- Returns the lock | nil, err; a grant that cannot be kept is given back.
function _M.grant(rec, fence, t0, lease, handed)
  local replicas = rec.opts.replicas
  if not replicas or replicas == 0 then return hold(rec, fence, t0, lease) end
  if not handed then
    local ok, werr = lockmod.wait_replicas(rec.client._conn, replicas, rec.opts.replicas_timeout)
    if not ok then
      release(rec, fence)
      return nil, werr
    end
  end
  local lock, err = hold(rec, fence, t0, lease)
  if lock and handed then
    local ok, xerr = lock:extend(rec.ttl)
    if not ok then
      pcall(lock.release, lock)
      return nil, xerr
    end
  end
  return lock, err
end
local grant = _M.grant

---------------------------------------------------------------------------
-- Waiting
---------------------------------------------------------------------------

-- The default spin (spin = nil, for the kinds with auto_spin): the waits
-- for a name that ended with a release, in a moving average per name.
-- When they are short (a few ms: short critical sections), a waiter polls
-- for the wakeup for a little longer than that before sleeping, and the
-- handoff skips the sleeping process' wakeup; when they are long, or
-- unknown, it sleeps at once, so a waiter burns no CPU on a holder that
-- keeps the lock (or died).
local AUTO_SPIN_MAX = 0.005       -- seconds: spin only for waits this short
local AUTO_SPIN_NAMES = 1024      -- names remembered (then forgotten at once)

local function spin_of(rec)
  local spin = rec.opts.spin
  if spin or not rec.kind.auto_spin then return spin end
  local avg = rec.client._wait_avg[rec.name]
  if not avg then return 0 end
  local s = avg * 1.5
  return s <= AUTO_SPIN_MAX and s or 0
end

local function saw_wait(rec, seconds)
  if not rec.kind.auto_spin then return end
  local client, name = rec.client, rec.name
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

-- A notify waiter's wait with its next attempt queued behind it (see
-- redislock.channel wait_try, csrc/topo/route_wait.c): the attempt runs the
-- moment the BLPOP returns, before the releaser (or anyone) can answer
-- the release, and the handoff costs one round trip fewer. Only for kinds
-- whose attempt is one script (queued); not for the waits WAIT must count
-- (it counts writes of the main connection); not for short ttls: the
-- grant's lease is counted from when the wait was sent, so the wait is
-- kept to a quarter of the ttl (and Redis ends a BLPOP up to a tick of its
-- clock late, 100 ms).
-- Returns nil when it did not wait (the caller waits with block); or
-- woken (false: the wait failed or Redis refused it, so back off), the
-- wakeup, then the attempt's outcome: lock | nil, err, holder_ms, or
-- nothing when the attempt did not run.
local WAIT_TRY_MIN_TTL = 1       -- seconds
local WAIT_TRY_SLACK = 0.25      -- seconds left after the wait, at least
local function queued_wait(rec, signal, limit, left)
  local kind, opts = rec.kind, rec.opts
  if not kind.queued or rec.ttl < WAIT_TRY_MIN_TTL or (opts.replicas and opts.replicas > 0) then return nil end
  local seconds = min(limit, rec.ttl / 4)
  if seconds + WAIT_TRY_SLACK > left then return nil end
  local t0 = monotime()
  local sent, v, r, unsent = rec.client._conn:wait_try(signal, seconds, spin_of(rec), kind.queued(rec))
  if sent == false then return nil end
  if sent == nil then
    -- the attempt may have run: take back what it may have granted
    if unsent ~= "unsent" then release(rec) end
    -- (a wait a signal ended: the call ends with it)
    if r == "interrupted" then return false, nil, nil, v end
    return false
  end
  local woken = v ~= nil   -- (nil: Redis refused the BLPOP, it did not wait)
  if v then saw_wait(rec, monotime() - t0) end
  if not r then return woken, v end
  return woken, v, kind.verdict(rec, r, t0)
end

-- Blocks until a release leaves a wakeup on `signal`, or `limit` passes.
-- Returns true and the wakeup (nil when the time passed); nil, err, kind
-- when the wait failed (the caller backs off). exact: `limit` ends at the
-- caller's deadline (see channel:block).
local function block(rec, signal, limit, exact)
  local t0 = monotime()
  local r, err, kind = rec.client._conn:block(signal, limit, exact, spin_of(rec))
  if r == nil and kind ~= "timeout" then return nil, err, kind end
  if r then saw_wait(rec, monotime() - t0) end
  return true, r or nil
end

-- A pause of at most `limit` seconds before the next attempt (backoff with
-- full jitter). STOPPED when a signal ended it.
local function pause(rec, limit)
  if rec.client._conn:sleep(min(backoff.delay(rec.tries), limit)) == false then return STOPPED end
end

-- What comes between two attempts, when the last one was refused (err,
-- holder_ms) or failed: a wait for a release (with the next attempt queued
-- behind it where the kind can), or a pause. limit: the longest wait;
-- left: the time to the deadline. Returns ran (the next attempt ran behind
-- the wait: its outcome follows), then lock | nil, err, holder_ms (err
-- interrupted: the call ends).
local function between(rec, signal, limit, left, err, holder_ms, at_lease)
  local mode = rec.mode
  local busy = err == "busy"
  -- holder_ms is the holder's remaining lease: never wait past it. 0: it
  -- ends within a millisecond; -2: the key is gone (free, or, for a fair
  -- waiter, free for someone ahead in line); -1: no lease at all (not one
  -- of ours), so only its release can end the wait.
  if busy and (holder_ms == 0 or (holder_ms == -2 and mode ~= "fair")) then
    if holder_ms == 0 and rec.client._conn:sleep(0.001) == false then return false, nil, STOPPED end
    return false, nil, err, holder_ms
  end
  if mode == "poll" or not busy or limit < 0.001 then return false, nil, pause(rec, limit) or err, holder_ms end
  if mode == "notify" then
    -- (a wait that ends at the lease end is ended by our clock, not Redis':
    -- so the queued one only where it ends well before)
    local woken, _, got, gerr, gms = queued_wait(rec, signal, limit, at_lease and limit or left)
    if got ~= nil or gerr ~= nil then
      -- the attempt queued behind the wait ran: its outcome is this round's
      if got or interrupted(gerr) then return true, got, gerr end
      -- (a wait Redis refused at once: a wrong type, an ACL: no hot loop)
      return true, nil, not woken and pause(rec, limit) or gerr, gms
    end
    if woken ~= nil then return false, nil, not woken and pause(rec, limit) or err, holder_ms end
  end
  local woken, handed, wkind = block(rec, signal, limit, at_lease or limit >= left)
  if not woken then
    if wkind == "interrupted" then return false, nil, handed end
    return false, nil, pause(rec, limit) or err, holder_ms
  end
  if mode == "fair" and handed then
    -- A release handed us the lock with a short lease. It did so after our
    -- last attempt ran (which cleared any older hand-over), so the lease is
    -- counted from when that attempt was sent.
    return false, grant(rec, tonumber(handed), rec.t_try, rec.kind.handed_lease(rec), true)
  end
  return false, nil, err, holder_ms
end

-- Is `entry` (a lock, or a reentrant group) held now, and by a hold other
-- than `token`'s (a reentrant owner enters again)?
local function held_by_other(entry, token)
  if entry._state then return entry._state == "held" and entry.token ~= token and entry:held() end
  if entry.n == 0 then return false end
  for l in pairs(entry._holds) do
    if l._state == "held" and l:held() then return l.token ~= token end
  end
  return false
end

-- A call refused for a name whose mutex this client holds (and not as
-- the same reentrant owner) would wait for itself: until `wait` runs out,
-- or for ever. It ends at once: the "busy" it gets, or nil. Asked only
-- once Redis refused the first attempt: a hold this client has not yet
-- seen lost (its key deleted) does not keep it from a free name. Where
-- waits yield (cosocket: one client serves every request of an nginx
-- worker), only the caller that took it (its request: channel caller()):
-- another one waits for it as any rival does.
local function held_here(client, name, token)
  local entry = client._mine[name]
  if not entry or (client._yields and entry._caller ~= client._conn:caller()) then return nil end
  if held_by_other(entry, token) then
    return "busy: " .. errors.shown_name(name) .. " already held by this client"
  end
end
_M.held_here = held_here

local function self_held(rec)
  local kind = rec.kind
  if kind.mine then return kind.mine(rec) end
  if not kind.mutex or kind.keeps then return nil end
  return held_here(rec.client, rec.name, rec.token)
end

-- How long the next wait may last (seconds), from now to the deadline
-- (left), and whether it ends at the lease in the way (holder_ms): a
-- holder that died, or paused, frees the name only there, and a waiter
-- must get it then, not when Redis ends its BLPOP (up to a tick of its
-- clock, 100 ms, late for short waits): such a wait is ended by our
-- clock (block's exact), at the cost of the wait connection, made again
-- at the next wait. A release still wakes it at once.
local function wait_limit(left, holder_ms, heartbeat)
  local limit, at_lease = left, false
  if holder_ms and holder_ms > 0 and holder_ms / 1000 < limit then
    limit, at_lease = holder_ms / 1000, true
  end
  if heartbeat and heartbeat < limit then limit, at_lease = heartbeat, false end
  -- one wait at most an hour: a huge `wait` just loops
  if limit > 3600 then limit, at_lease = 3600, false end
  return limit, at_lease
end

-- Waits for the lease: attempts until taken or the deadline passed.
-- Returns the lock | nil, err; and the failed attempts.
local function wait_loop(rec)
  local deadline, heartbeat = rec.deadline, rec.kind.heartbeat
  if heartbeat then heartbeat = heartbeat(rec) end
  local try = rec.kind.try
  local signal = rec.mode ~= "poll" and rec.kind.signal(rec) or nil
  local n = 0
  local lock, err, holder_ms, ran
  while true do
    local t_try = monotime()
    -- (a refusal the wait brought stands for this round's attempt)
    if not ran then lock, err, holder_ms = try(rec, t_try, n == 0) end
    if lock or interrupted(err) then break end
    if n == 0 and err == "busy" then
      -- (refused for a hold of this very client: no wait can end that)
      local mine = self_held(rec)
      if mine then return nil, mine, 0 end
    end
    local now = monotime()
    if now >= deadline then
      err = errors.waited(err)
      break
    end
    n = n + 1
    rec.tries, rec.t_try = n, t_try
    local limit, at_lease = wait_limit(deadline - now, holder_ms, heartbeat)
    local got
    ran, got, err, holder_ms = between(rec, signal, limit, deadline - now, err, holder_ms, at_lease)
    if got or interrupted(err) then
      lock = got
      break
    end
  end
  return lock, err, n
end

---------------------------------------------------------------------------
-- The call
---------------------------------------------------------------------------


--- Runs the call of `rec` to its end: one attempt (mode "once") or the
-- wait loop; then what a call that ends without a lock takes back, and
-- its count (metrics). Protected: a signal's hook (csrc/base/intr.h) may
-- raise inside, after a grant whose reply it cut off; nothing granted to
-- the call's token may stay then, and the error is raised again.
-- syntax: lock, err, kind = engine.run(rec)
function _M.run(rec)
  local kind = rec.kind
  local ok, lock, err, n, _, label, held
  if rec.mode == "once" then
    -- one attempt, no loop (the uncontended path)
    n = 0
    ok, lock, err, _, label, held = pcall(kind.try, rec, rec.t_call, true)
    if err == "busy" then err = self_held(rec) or busy_by(rec.name, label, held) end
  else
    ok, lock, err, n = pcall(wait_loop, rec)
  end
  if not ok then
    if kind.give_up then pcall(kind.give_up, rec, "raised") end
    error(lock, 0)
  end
  if not lock and kind.give_up then kind.give_up(rec, interrupted(err) and "interrupted" or nil) end
  local client, name, t_call = rec.client, rec.name, rec.t_call
  -- the record is back with its client (the caller's options with it no
  -- longer)
  rec.opts = false
  client._spare_rec = rec
  acquire_done(client, name, lock, err, t_call, n)   -- [metrics]
  if lock then return lock end
  return fail(errors.named(err, name, monotime() - t_call))
end

--- Runs fn(lock, ...) holding a lock taken by take(client, "with_lock",
-- name, opts), and releases it on every path; an error raised by fn is
-- raised again after the release.
-- syntax: ok, ... = engine.with_lock(take, client, name, opts, fn, ...)
function _M.with_lock(take, client, name, opts, fn, ...)
  if not checks.callable(fn) then
    checks.argerror("with_lock", "fn", "function expected, got " .. type(fn))
  end
  local lock, err, kind = take(client, "with_lock", name, opts)
  if not lock then return nil, err, kind end
  local res = { n = 0 }
  local function keep(ok, ...)
    res = { n = select("#", ...) + 1, ok, ... }
  end
  keep(pcall(fn, lock, ...))
  -- Was the lease ours until fn returned? held() right before the release
  -- says so conservatively (the watchdog's view, or the lease's end); a
  -- release that finds another token (or none) says the key went before
  -- the watchdog saw it. Either way fn ran, at least in part, without the
  -- lock: its results cannot be answered as a success (redis-py raises
  -- LockNotOwnedError). A release that fails for another reason (the
  -- connection) casts no doubt on fn's run: the ttl frees the name.
  -- Protected: if fn closed the client, the release raises, and fn's own
  -- error (or results) must still come back unchanged.
  local ok, held = pcall(lock.held, lock)
  local rok, _, _, rkind = pcall(lock.release, lock)
  if not res[1] then error(res[2], 0) end
  if (ok and not held) or (rok and rkind == "not held") then
    return nil, errors.lost_in_fn(lock.name, lock.lost_reason), "not held"
  end
  return true, (table.unpack or unpack)(res, 2, res.n) -- luacheck: ignore 143
end

return _M

--- redislock.acquire: client:acquire and adopt; the kind of a plain lock
-- (a mutex: one key), and how one is taken, plain or fair, or adopted.
--
-- The waiting is the engine's (redislock.engine); this file says what an
-- attempt sends: the acquire script (or, with fence = false, a plain SET
-- NX PX first), or for fair = true the script that queues the waiter in
-- Redis, where a release hands the lock on in arrival order.

local core = require "redislock.core"
local checks = require "redislock.checks"
local lockmod = require "redislock.lock"
local engine = require "redislock.engine"
local options = require "redislock.options"
local holdermod = require "redislock.holder"
local reentrant = require "redislock.reentrant"
local poll = require("redislock.client_base").poll
checks.own(debug.getinfo(1, "S").source)

local new_token, getpid = core.token, core.getpid
local ttl_ms, ttl_arg = lockmod.ttl_ms, lockmod.ttl_arg
local settings, LOCK = options.settings, options.LOCK
local FLAG, grant = engine.FLAG, engine.grant
local record, run = engine.record, engine.run
local holder_label, default_label = holdermod.label, holdermod.default
local REENTRANT = reentrant.REENTRANT

local _M = {}

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

-- The acquire script's keys and arguments (flag: FLAG of the mode).
local function acquire_args(rec, flag)
  local keys = rec.keys
  return keys.lock, keys.fence, keys.waiters, keys.holder, keys.waiting, rec.token, ttl_arg(rec.ttl), flag,
    rec.client._fence_ttl_ms, rec.label
end

-- An acquire script's reply to an attempt sent at t0, as a kind's try
-- answers (redislock.engine).
local function verdict(rec, r, t0)
  if r[1] ~= 1 then return nil, "busy", r[2], r[3], r[4] end
  -- handed to us earlier, with this much of its lease left (acquire_fair)
  if r[3] then return grant(rec, r[2], t0, r[3] / 1000, true) end
  return grant(rec, rec.opts.fence ~= false and r[2] or nil, t0, rec.ttl)
end

--- A plain lock: one key, renewed with `extend`. extend and release are
-- the lock's (lock.lua); the rest says how it is taken (redislock.engine).
local MUTEX = {
  key = "lock",
  renew = "extend",
  auto_spin = true,
  mutex = true,
  verdict = verdict,
}
_M.MUTEX = MUTEX

function MUTEX.extend(ch, keys, token, ms)
  return ch:script("extend", keys.lock, token, ms)
end

function MUTEX.release(client, keys, token)
  return client._conn:script("release", keys.lock, keys.waiters, keys.signal, keys.queue,
    keys.deadlines, keys.leases, keys.fence, keys.holder, token, client._fence_ttl_ms)
end

-- One attempt. No fence asked for: a plain SET NX PX, no script (and no
-- holder recorded); a waiter's later attempts use the script, which also
-- tells releases someone waits. A refusal Redis asks to wait out (TRYAGAIN
-- while the name's slot moves, LOADING) is waited out until the call's
-- deadline at most (channel deadline), not for the whole command timeout.
function MUTEX.try(rec, t0, first)
  local ch, keys, mode = rec.client._conn, rec.keys, rec.mode
  local r, err
  if rec.opts.fence == false and (first or mode ~= "notify") then
    ch:deadline(rec.deadline)
    r, err = ch:command("SET", keys.lock, rec.token, "NX", "PX", ttl_arg(rec.ttl))
    if r == nil then return nil, err end
    if r == "OK" then return grant(rec, nil, t0, rec.ttl) end
    if r ~= false then
      -- (only OK grants and only nil is busy: any other answer is no
      -- Redis' SET NX, never read as busy: issue 33)
      return nil, "redis error: protocol error: SET NX answered " .. type(r) .. " " ..
        (type(r) == "table" and "" or tostring(r):sub(1, 40)) .. ", not OK or nil"
    end
    if mode ~= "notify" then return nil, "busy" end
    -- busy, and we will wait: the script registers us
  end
  ch:deadline(rec.deadline)
  if mode == "fair" then
    local ttl = rec.ttl
    r, err = ch:script("acquire_fair", keys.lock, keys.fence, keys.queue, keys.deadlines, keys.leases,
      keys.signal .. ":" .. rec.token, keys.waiters, keys.holder, rec.token, ttl_ms(ttl), FAIR_KEEP_MS,
      fair_grant_ms(ttl), rec.client._fence_ttl_ms, rec.label)
  else
    r, err = ch:script("acquire", acquire_args(rec, FLAG[mode]))
  end
  if not r then return nil, err end
  -- (a fresh grant, the hot path: verdict's last line)
  if r[1] == 1 and not r[3] then return grant(rec, rec.opts.fence ~= false and r[2] or nil, t0, rec.ttl) end
  return verdict(rec, r, t0)
end

-- A notify waiter's next attempt, queued behind its wait.
function MUTEX.queued(rec)
  return "acquire", acquire_args(rec, FLAG.notify)
end

-- A fair waiter waits on a list of its own, where a release hands it the
-- lock; the others on the name's.
function MUTEX.signal(rec)
  if rec.mode == "fair" then return rec.keys.signal .. ":" .. rec.token end
  return rec.keys.signal
end

function MUTEX.heartbeat(rec)
  if rec.mode == "fair" then return FAIR_HEARTBEAT end
end

function MUTEX.handed_lease(rec)
  return fair_grant_ms(rec.ttl) / 1000
end

-- What a call that waited and ended without a lock takes back: its place
-- among the waiters inspect counts, or in a fair line; and, when it was
-- cut short (an interrupt, an error in a callback), a grant it may have
-- got (an attempt whose reply never came back to us).
function MUTEX.give_up(rec, how)
  local ch, keys, mode = rec.client._conn, rec.keys, rec.mode
  if mode == "fair" then
    -- Leave the line; if a release handed us the lock just now, releasing
    -- it hands it on to the next in line.
    ch:script("dequeue", keys.queue, keys.deadlines, keys.leases, rec.token)
  elseif mode == "notify" then
    ch:command("ZREM", keys.waiting, rec.token)
  end
  if how or mode == "fair" then MUTEX.release(rec.client, keys, rec.token) end
end

--- client:acquire, with argument errors naming `fname` (acquire or
-- with_lock). A reentrant lock is taken as reentrant.lua says, the rest
-- as above.
-- syntax: lock, err, kind = acquire.acquire(client, fname, name, opts)
function _M.acquire(client, fname, name, opts)
  local ttl, wait
  opts, ttl, wait = settings(fname, name, opts, LOCK)
  poll(client)   -- (raises once the client is closed; not through __index: the hot path)
  -- One token for the whole call: it is also a fair waiter's place in
  -- line. A reentrant lock's is its owner's.
  local kind, label, pid = MUTEX, opts.holder, false
  local token
  if opts.reentrant then
    kind, token = REENTRANT, opts.owner or reentrant.owner(client)
    label = holder_label(client, label, token, fname)
  else
    token = new_token() or assert(new_token())   -- (raises with the reason)
    -- What the grant records as its holder (redislock.holder): only a
    -- label given here can hold the token. The client's own, or the
    -- default, in line (the hot path): the lock keeps the pid drawn here.
    if label == nil then
      label = client._holder
      if label == nil then
        pid = getpid()
        label = default_label(pid)
      elseif label == false then
        label = ""
      end
    else
      label = holder_label(client, label, token, fname)
    end
  end
  local rec = record(client, kind, name, client._keys_of(name), opts, ttl, wait)
  rec.token, rec.label, rec.pid = token, label, pid
  return run(rec)
end

-- An adopted lock: a plain lock's key and renewal, taken over from the
-- holder of its token (in one attempt, never waited for).
local ADOPT = { key = "lock", renew = "extend", extend = MUTEX.extend, release = MUTEX.release, keeps = true,
  mutex = true }

function ADOPT.try(rec, t0)
  local client, keys = rec.client, rec.keys
  local r, err = client._conn:script("adopt", keys.lock, keys.fence, rec.token, ttl_ms(rec.ttl),
    client._fence_ttl_ms)
  if not r then return nil, err end
  if r[1] ~= 1 then return nil, "not held" end
  return grant(rec, r[2], t0, rec.ttl)
end

--- client:adopt: takes over the lock `name` held with `token`. If the grant
-- cannot be kept (the watchdog refused it), the lock stays its first
-- holder's: nothing is given back.
-- syntax: lock, err, kind = acquire.adopt(client, name, token, opts)
function _M.adopt(client, name, token, opts)
  checks.check_name("adopt", name)
  checks.check_string("adopt", "token", token)
  if #token >= 64 then checks.argerror("adopt", "token", "at most 63 bytes") end
  local ttl
  opts, ttl = settings("adopt", name, opts, options.ADOPT)
  poll(client)
  local rec = record(client, ADOPT, name, client._keys_of(name), opts, ttl, 0)
  rec.token, rec.label = token, ""
  return run(rec)
end

return _M

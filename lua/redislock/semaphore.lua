--- redislock.semaphore: counting semaphores (client:semaphore(name,
-- permits)).
--
-- Each permit is a lease of its own (a member of a sorted set: token ->
-- lease end on the server's clock), renewed by the watchdog, so a crashed
-- holder's permit comes back at its lease end, never leaked. A release
-- wakes one waiter; a waiter also wakes when the first lease would end.
--
-- The limit: the latest client:semaphore(name, permits) stores it, and it
-- is in force for every client from then on. Raising it lets waiters in at
-- their next attempt; lowering it revokes no permit: the ones above the new
-- limit stay valid until released or expired, and no new one is granted
-- until the count is below the limit.

local checks = require "redislock.checks"
local keysmod = require "redislock.keys"
local lockmod = require "redislock.lock"
local shares = require "redislock.shares"
local admin = require "redislock.admin"
local errors = require "redislock.errors"
checks.own(debug.getinfo(1, "S").source)

local ttl_ms = lockmod.ttl_ms

local _M = {}

local MAX_PERMITS = 2 ^ 31 - 1

-- A permit: one member of the permits' set; its release wakes one waiter.
local PERMIT = {
  key = "permits",
  renew = "zset_renew",
}
_M.PERMIT = PERMIT

function PERMIT.extend(ch, keys, token, ms)
  return ch:script("zset_renew", keys.permits, token, ms)
end

function PERMIT.release(client, keys, token)
  return client._conn:script("release_share", keys.permits, keys.waiting, keys.signal,
    keys.waiting, keys.signal, keys.holders, token, "member", "one", "none")
end

function PERMIT.try(rec, t0)
  local client, keys = rec.client, rec.keys
  local ch = client._conn
  ch:deadline(rec.deadline)
  local r, err = ch:script("sem_acquire", keys.permits, keys.limit, keys.waiting, keys.holders, rec.token,
    ttl_ms(rec.ttl), shares.block_ms(rec, t0), rec.permits, client._keep_ms, rec.label)
  if not r then return nil, err end
  if r[1] == 1 then rec.in_use = r[2] end
  return shares.verdict(rec, r, t0)
end

-- (how many permits were in use with this one)
function PERMIT.granted(rec, permit)
  permit.in_use = rec.in_use
end

function PERMIT.signal(rec)
  return rec.keys.signal
end

-- (a call cut short gives back a permit it may have got)
function PERMIT.give_up(rec, how)
  if how == "raised" then PERMIT.release(rec.client, rec.keys, rec.token) end
end

local Semaphore = {}
Semaphore.__index = Semaphore
_M.Semaphore = Semaphore

--- Takes a permit: a lock object (release, extend, held, lease_end,
-- on_lost; fence nil); permit.in_use says how many were in use with it.
-- syntax: permit, err = sem:acquire({ttl=30, wait=0, watchdog=true,
--           on_lost=fn, max_hold=nil, notify=true, spin=0})
-- err: "busy" (tried once), "timeout" (waited), or a connection error.
function Semaphore:acquire(opts)
  return shares.acquire(self, "acquire", opts, PERMIT)
end

--- What Redis says now (one round trip): { limit = permits in force,
-- in_use = n, waiters = n, holders = { {kind = "permit", holder =, since
-- =, held_for =, ttl =}, ... } } (see client:inspect for the fields).
-- syntax: info, err, kind = sem:inspect()
function Semaphore:inspect()
  local rows, waiters, limit, in_use = admin.sem_holders(self._client, self.name)
  if not rows then return nil, waiters, limit end
  return { limit = limit >= 0 and limit or self.permits, in_use = in_use, waiters = waiters, holders = rows }
end

function Semaphore:__tostring()
  return string.format("redislock.semaphore (%s, %d)", self.name:sub(1, 64), self.permits)
end

--- client:semaphore: a counting semaphore of `permits` over `name`; stores
-- the limit (one round trip).
function _M.new(client, name, permits)
  checks.check_name("semaphore", name)
  checks.check_integer("semaphore", "permits", permits, 1, MAX_PERMITS)
  local ch = client:_open()
  client:poll()
  local keys = keysmod.semaphore(client._prefix, name)
  local r, err, kind = ch:script("sem_limit", keys.permits, keys.limit, string.format("%d", permits),
    client._keep_ms)
  if not r then return errors.fail(err, kind) end
  return setmetatable({ name = name, permits = permits, _client = client, _keys = keys }, Semaphore)
end

return _M

--- redislock.semaphore: counting semaphores (client:semaphore(name,
-- permits)).
--
-- Each permit is a lease of its own (a member of a sorted set: token ->
-- lease end on the server's clock), renewed by the watchdog, so a crashed
-- holder's permit comes back at its lease end, never leaked. A release
-- wakes one waiter; a waiter also wakes when the first lease would end.
--
-- The limit: the latest client:semaphore(name, permits) stores it, and it
-- is in force for every client from then on (with if_absent, only when
-- none is stored; client:semaphore(name) opens one with it). Raising it
-- wakes as many waiters as it frees permits; lowering it revokes no
-- permit: the ones above the new limit stay valid until released or
-- expired, and no new one is granted until the count is below the limit.
--
-- sem:acquire{permits = n} takes n at once, all or none, as one permit
-- object: n members of the set under one token that says n (one lease,
-- one renewal, one release; lua/redislock/scripts/lib/permit_members.lua).

local checks = require "redislock.checks"
local keysmod = require "redislock.keys"
local lockmod = require "redislock.lock"
local shares = require "redislock.shares"
local admin = require "redislock.admin"
local errors = require "redislock.errors"
local options = require "redislock.options"
checks.own(debug.getinfo(1, "S").source)

local ttl_ms = lockmod.ttl_ms

local _M = {}

local MAX_PERMITS = 2 ^ 31 - 1

-- A permit: one member of the permits' set; its release wakes one waiter.
local PERMIT = {
  key = "permits",
  renew = "zset_renew",
  options = options.PERMIT,
}
_M.PERMIT = PERMIT

function PERMIT.extend(ch, keys, token, ms)
  return ch:script("zset_renew", keys.permits, token, ms)
end

function PERMIT.release(client, keys, token)
  return client._conn:script("sem_release", keys.permits, keys.waiting, keys.signal, keys.holders, token)
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

-- (how many permits were in use with this one, and how many it holds)
function PERMIT.granted(rec, permit)
  permit.in_use = rec.in_use
  permit.permits = rec.opts.permits or 1
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
-- on_lost; fence nil); permit.in_use says how many were in use with it,
-- permit.permits how many it holds (opts.permits, all or none).
-- syntax: permit, err = sem:acquire({ttl=30, wait=0, watchdog=true,
--           on_lost=fn, max_hold=nil, notify=true, spin=0, permits=1})
-- err: "busy" (tried once), "timeout" (waited), or a connection error.
function Semaphore:acquire(opts)
  return shares.acquire(self, "acquire", opts, PERMIT)
end

--- Releases the permit whose token is `id` (permit.token), whoever holds
-- it: an operator's tool, as client:release_token is for locks. Its
-- holder learns it at its next renewal (on_lost, "not held").
-- syntax: ok, err, kind = sem:release_permit(id)
-- err: "not held: NAME" when no such permit is held.
function Semaphore:release_permit(id)
  checks.check_string("release_permit", "id", id)
  if #id > 80 then checks.argerror("release_permit", "id", "at most 80 bytes") end
  local client = self._client
  client:_open()
  client:poll()
  local r, err, kind = PERMIT.release(client, self._keys, id)
  if not r then return errors.fail(err, kind) end
  if r ~= 1 then return errors.not_held(self.name) end
  return true
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
-- the limit (one round trip): always, or with if_absent only when none is
-- stored; without permits, opens it with the limit stored (an error,
-- kind "absent", when there is none). sem.permits is the limit in force.
function _M.new(client, name, permits, opts)
  checks.check_name("semaphore", name)
  if permits ~= nil then checks.check_integer("semaphore", "permits", permits, 1, MAX_PERMITS) end
  opts = checks.check_options("semaphore", opts, { if_absent = true })
  checks.check_type("semaphore", "if_absent", opts.if_absent, "boolean", true)
  if opts.if_absent and permits == nil then
    checks.argerror("semaphore", "permits", "if_absent needs the limit to store")
  end
  local ch = client:_open()
  client:poll()
  local keys = keysmod.semaphore(client._prefix, name)
  local r, err, kind = ch:script("sem_limit", keys.permits, keys.limit, keys.waiting, keys.signal,
    permits and string.format("%d", permits) or "", client._keep_ms, opts.if_absent and "nx" or "")
  if not r then return errors.fail(err, kind) end
  local limit = r[1]
  if limit < 0 then
    if permits then limit = permits   -- (stored, and gone already: a fence_ttl this short)
    else
      return nil, errors.about("absent", name, "has no stored limit: client:semaphore(name, permits) stores one"),
        "absent"
    end
  end
  return setmetatable({ name = name, permits = limit, _client = client, _keys = keys }, Semaphore)
end

return _M

--- redislock.shares: what the shared primitives have in common (read-write
-- locks, semaphores: sets of leases): how a share's acquire starts, and
-- what its attempt sends and answers. The waiting is the engine's.
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
local engine = require "redislock.engine"
local options = require "redislock.options"
local holdermod = require "redislock.holder"
local poll = require("redislock.client_base").poll
checks.own(debug.getinfo(1, "S").source)

local min, ceil = math.min, math.ceil

local _M = {}

--- How long (ms) the caller of an attempt sent at t0 will block for a
-- wakeup if it is kept out (0: it will not, so the attempt must not
-- register it as a waiter): the scripts' block_ms argument.
function _M.block_ms(rec, t0)
  if rec.mode ~= "notify" then return 0 end
  local heartbeat = rec.kind.heartbeat
  return ceil(min(rec.deadline - t0, 3600, heartbeat and heartbeat(rec) or 3600) * 1000)
end

--- A share script's reply ({1, ...} taken, {0, ms} not) to an attempt
-- sent at t0, as a kind's try answers (redislock.engine); a fenced kind's
-- reply carries the fence.
function _M.verdict(rec, r, t0)
  if r[1] ~= 1 then return nil, "busy", r[2] end
  return engine.grant(rec, rec.kind.fenced and r[2] or nil, t0, rec.ttl)
end

--- A share's acquire (a read, a write, a permit): the options checked, one
-- token for the call, attempts until taken or `wait` passed.
-- owner: the rwlock or semaphore (its _client, _keys, name, permits);
-- kind: the share's (rwlock.lua, semaphore.lua).
-- owner_token: a reentrant rwlock's owner (nil: a token of the call's own).
-- syntax: lock, err, kind = shares.acquire(owner, fname, opts, kind, owner_token)
function _M.acquire(owner, fname, opts, kind, owner_token)
  local ttl, wait
  opts, ttl, wait = options.settings(fname, owner.name, opts, kind.options or options.SHARE)
  local client = owner._client
  poll(client)   -- (raises once the client is closed)
  -- (a reentrant rwlock's: its owner's, whose entries Redis counts)
  local token = owner_token or assert(core.token())
  -- n permits at once: one token for them all, which says how many
  -- (lua/redislock/scripts/lib/permit_members.lua)
  if opts.permits and opts.permits > 1 then token = token .. "*" .. string.format("%d", opts.permits) end
  local label = holdermod.label(client, opts.holder, token, fname)
  local rec = engine.record(client, kind, owner.name, owner._keys, opts, ttl, wait)
  rec.token, rec.label = token, label
  if owner.permits then rec.permits = owner.permits end
  return engine.run(rec)
end

return _M

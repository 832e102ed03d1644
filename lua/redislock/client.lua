--- redislock.client: the client object that redislock.connect returns.
--
-- Its methods come from files of one concern each: acquire.lua (taking and
-- waiting), fencing.lua (fenced resources), admin.lua (inspect, break);
-- this file holds the rest: loss delivery, counters, warnings, close.
-- Every method raises at the caller's line once the client is closed.

local core = require "redislock.core"
local checks = require "redislock.checks"
local keys = require "redislock.keys"
local losses = require "redislock.losses"
local metrics = require "redislock.metrics"
local events = require "redislock.events"
local errors = require "redislock.errors"
checks.own(debug.getinfo(1, "S").source)

local _M = {}

local Client = {}
Client.__index = Client
_M.Client = Client

require("redislock.acquire")(Client)
require("redislock.fencing")(Client)
require("redislock.admin")(Client)
require("redislock.reentrant").install(Client)
require("redislock.rwlock").install(Client)
require("redislock.semaphore").install(Client)

--- A client over channel `ch` (redislock.channel).
-- settings: prefix, fence_ttl (seconds), warnings (a list of strings),
-- on_event (a function, or nil).
function _M.new(ch, settings)
  return setmetatable({
    _conn = ch,
    _prefix = settings.prefix,
    _keys_of = keys.cache(settings.prefix),
    -- (a script argument: formatted once)
    _fence_ttl_ms = string.format("%.0f", math.floor(settings.fence_ttl * 1000 + 0.5)),
    _warnings = settings.warnings,
    _closed = false,
    _locks = setmetatable({}, { __mode = "v" }), -- watch id -> lock (or group), for on_lost
    _wait_avg = {}, _wait_names = 0, -- waits that ended with a release, per name (acquire.lua)
    _groups = setmetatable({}, { __mode = "v" }), -- a reentrant lock's holds (reentrant.lua)
    -- The owner token of this client's reentrant locks (secret, like a
    -- lock's token): acquire(name, {reentrant = true}) enters as this owner
    -- unless opts.owner says otherwise.
    owner = assert(core.token()),
    _owner_pid = core.getpid(),   -- where `owner` was drawn (reentrant.lua)
    _metrics = metrics.new(),        -- the Lua side's counters (redislock.metrics)
    _on_event = settings.on_event,   -- fn(event, fields) or nil (redislock.events)
    _holder = settings.holder,       -- the grants' label: nil (the default), a string, false
  }, Client)
end

-- The channel, or a raise at the caller's line once closed.
function Client:_open()
  if self._closed then checks.raise("attempt to use a closed client") end
  return self._conn
end

--- Delivers the watchdog's loss reports: marks those locks lost and calls
-- their on_lost(lock, reason). Every call into the library does this too;
-- call it yourself when client:fd() becomes readable. An error raised by a
-- callback is caught; the last one, with its traceback, is kept in
-- client.callback_error.
-- syntax: n = client:poll()   -- how many losses were delivered
function Client:poll()
  if self._closed then checks.raise("attempt to use a closed client") end
  local ch = self._conn
  if self._on_event then events.deliver(self, ch) end   -- [events] the C side's, first
  local reports = ch:losses()
  if not reports and not self._lost_queue and not self._event_queue then return 0 end
  return losses.deliver(self, reports, self._locks)
end

--- A file descriptor that becomes readable when a loss report is pending,
-- for event loops (cqueues, luv, nginx); then call client:poll().
-- syntax: fd, err, kind = client:fd()
-- err: "watchdog failed: ..." when no eventfd or thread could be made.
function Client:fd()
  local fd, err = self:_open():fd()
  if fd then return fd end
  return errors.fail("watchdog failed: " .. tostring(err))
end

--- Counters and histograms: the C core's (the watchdog's renewals,
-- round_trips, failures, watched, last_batch, lost = { [reason] = n };
-- reconnects, noscript_reloads, topology_changes, ...) and the Lua side's
-- (acquires, busy, timeouts, errors, waits, releases, extends, holds,
-- losses = { [reason] = n }, wait_time, hold_time, hold_ttl_ratio). See
-- redislock.metrics and docs/api.md, "Metrics and events".
-- syntax: t = client:stats()
function Client:stats()
  local ch = self:_open()
  self:poll()   -- losses waiting for delivery count as losses already
  return metrics.stats(self, ch:stats())
end

--- stats() in the Prometheus text exposition format. opts.labels: constant
-- labels for every sample. No label per lock name (unbounded cardinality).
-- syntax: text = client:metrics({labels = {k = v}})
function Client:metrics(opts)
  return metrics.render(self:stats(), opts)
end

--- What the client found risky about the server at connect, as sentences
-- for a human (empty when nothing): e.g. a maxmemory-policy that can evict
-- lock keys.
-- syntax: list = client:warnings()
function Client:warnings()
  self:_open()
  local out = {}
  for i, w in ipairs(self._warnings) do out[i] = w end
  return out
end

--- What the client learned of the server when it connected: maxmemory_policy
-- (or info_error), and native = { delifeq =, delex =, set_ifeq =, cad =,
-- cas = } (booleans), the native compare commands the main connection's
-- node has, with native_nodes = { ["host:port"] = {...} } for every node
-- connected so far (docs/native-commands.md).
-- syntax: t = client:server_info()
function Client:server_info()
  return self:_open():server_info()
end

--- Closes the connections and stops the watchdog thread (at once: it never
-- waits for Redis). Idempotent. Locks still held are no longer renewed and
-- keep their lease until their ttl runs out.
-- syntax: client:close()
function Client:close()
  if not self._closed then
    self._closed = true
    self._conn:close()
  end
  return true
end

function Client:__close()
  self:close()
end

function Client:__tostring()
  return tostring(self._conn)
end

return _M

--- redislock.client_base: what every client is, whatever it offers on top
-- (client.lua's, over one Redis, Sentinel or Cluster; redlock.lua's, over
-- independent masters): its state over one channel, loss delivery,
-- counters, warnings, close. Each client class takes these functions as
-- methods by name; nothing here knows a primitive. Every method raises at
-- the caller's line once the client is closed.

local checks = require "redislock.checks"
local keys = require "redislock.keys"
local losses = require "redislock.losses"
local metrics = require "redislock.metrics"
local events = require "redislock.events"
local errors = require "redislock.errors"
checks.own(debug.getinfo(1, "S").source)

local _M = {}

local KEEP_MS = "604800000"

--- The state of a client over channel `ch` (redislock.channel), as a
-- table its class then gets as its metatable.
-- settings: prefix, fence_ttl (seconds), warnings (a list of strings),
-- on_event (a function, or nil), holder, yields (the transport's waits
-- yield to other coroutines: cosocket), mode (the topology: nil for one
-- Redis).
function _M.new(ch, settings)
  return {
    _conn = ch,
    _prefix = settings.prefix,
    _keys_of = keys.cache(settings.prefix),
    -- (a script argument: formatted once)
    _fence_ttl_ms = string.format("%.0f", math.floor(settings.fence_ttl * 1000 + 0.5)),
    -- how long what outlives its grants lives after the latest one (a
    -- semaphore's stored limit, the shares' holder hashes): 7 days, as
    -- fence_ttl's old default (not fence_ttl: that one is a clock margin)
    _keep_ms = KEEP_MS,
    _warnings = settings.warnings,
    _closed = false,
    _locks = setmetatable({}, { __mode = "v" }), -- watch id -> lock (or group), for on_lost
    _spare_rec = false,              -- the last call's attempt record (redislock.engine)
    _spare_watch = false,            -- a released lock's watch handle, bound anew by the next grant
    _metrics = metrics.new(),        -- the Lua side's counters (redislock.metrics)
    _on_event = settings.on_event,   -- fn(event, fields) or nil (redislock.events)
    _holder = settings.holder,       -- the grants' label: nil (the default), a string, false
    -- name -> the last lock (or reentrant group of holds) this client was
    -- granted on a name's mutex (redislock.engine: no waiting for itself)
    _mine = setmetatable({}, { __mode = "v" }),
    _yields = settings.yields or false, -- a wait lets other coroutines of this client run (cosocket)
    _mode = settings.mode or "single",  -- "single", "sentinel", "cluster" or "redlock"
  }
end

local function closed()
  checks.raise("attempt to use a closed client")
end

-- The channel, or a raise at the caller's line once closed.
function _M._open(self)
  if self._closed then closed() end
  return self._conn
end

--- Delivers the watchdog's loss reports: marks those locks lost and calls
-- their on_lost(lock, reason). Every call into the library does this too;
-- call it yourself when client:fd() becomes readable. An error raised by a
-- callback is caught; the last one, with its traceback, is kept in
-- client.callback_error.
-- syntax: n = client:poll()   -- how many losses were delivered
function _M.poll(self)
  if self._closed then closed() end
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
function _M.fd(self)
  local fd, err = _M._open(self):fd()
  if fd then return fd end
  return errors.fail(errors.watchdog_failed(err))
end

--- Counters and histograms: the C core's (the watchdog's renewals,
-- round_trips, failures, watched, last_batch, lost = { [reason] = n };
-- reconnects, noscript_reloads, topology_changes, ...) and the Lua side's
-- (acquires, busy, timeouts, errors, waits, releases, extends, holds,
-- losses = { [reason] = n }, wait_time, hold_time, hold_ttl_ratio). See
-- redislock.metrics and docs/api.md, "Metrics and events".
-- syntax: t = client:stats()
function _M.stats(self)
  local ch = _M._open(self)
  _M.poll(self)   -- losses waiting for delivery count as losses already
  return metrics.stats(self, ch:stats())
end

--- stats() in the Prometheus text exposition format. opts.labels: constant
-- labels for every sample. No label per lock name (unbounded cardinality).
-- syntax: text = client:metrics({labels = {k = v}})
function _M.metrics(self, opts)
  return metrics.render(self:stats(), opts)
end

--- What the client found risky about the server at connect, as sentences
-- for a human (empty when nothing): e.g. a maxmemory-policy that can evict
-- lock keys.
-- syntax: list = client:warnings()
function _M.warnings(self)
  _M._open(self)
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
function _M.server_info(self)
  return _M._open(self):server_info()
end

--- Closes the connections and stops the watchdog thread (at once: it never
-- waits for Redis). Idempotent. Locks still held are no longer renewed and
-- keep their lease until their ttl runs out.
-- syntax: client:close()
function _M.close(self)
  if not self._closed then
    self._closed = true
    self._conn:close()
  end
  return true
end

function _M.__close(self)
  self:close()
end

function _M.__tostring(self)
  return tostring(self._conn)
end

--- The methods every client class has, as above.
_M.METHODS = { "_open", "poll", "fd", "stats", "metrics", "warnings", "server_info", "close", "__close",
  "__tostring" }

return _M

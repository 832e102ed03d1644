--- redislock.metrics: what a client counts on the Lua side, its log2
-- histograms, client:stats() and client:metrics() (Prometheus text).
--
-- The library counts what happens in its Lua code (acquires and how they
-- end, releases, extends, holds, losses as the application sees them, wait
-- and hold times); the C core counts what happens in C (renewals and
-- losses in the watchdog, NOSCRIPT reloads, reconnects, topology changes)
-- and client:stats() merges both. The hooks below are called from
-- acquire.lua, lock.lua and redlock.lua, one line each. On the hot path a
-- grant and a release each cost one call into the recorder (csrc/binding/hist.c),
-- which keeps the counters and histograms in C; with no on_event set the
-- hooks build no table at all.
--
-- Histograms have log2 buckets: bucket i counts the values in
-- (2^(lo+i-2), 2^(lo+i-1)], the last one everything above 2^hi (+Inf).
-- stats() gives them cumulative, as Prometheus wants them:
--   { buckets = { {le = 2^lo, count = n}, ..., {le = math.huge, count = N} },
--     sum = total, count = N }

local core = require "redislock.core"
local checks = require "redislock.checks"
local events = require "redislock.events"
local kind_of = require("redislock.errors").kind_of
local textmod = require "redislock.text"
checks.own(debug.getinfo(1, "S").source)

local monotime = core.monotime
local floor, huge = math.floor, math.huge
local format, concat = string.format, table.concat

local _M = {}

-- Bounds 2^lo .. 2^hi, seconds or a ratio.
local function layout(lo, hi)
  local b = { lo = lo, n = hi - lo + 1 }
  for i = 1, b.n do b[i] = 2 ^ (lo + i - 1) end
  return b
end
local WAIT = layout(-14, 12)     -- 61 us .. 68 min
local HOLD = layout(-14, 12)
local RATIO = layout(-10, 10)    -- hold / ttl: 1/1024 .. 1024
_M.LAYOUTS = { wait_time = WAIT, hold_time = HOLD, hold_ttl_ratio = RATIO }

-- Why a lease can be lost (lock.lua): listed so that every series exists
-- from the start, at 0.
local REASONS = { "not held", "unreachable", "expired", "max_hold", "forked", "stopped" }

-- The recorder's methods, called as functions (no lookup through the
-- userdata's metatable on the hot path).
local REC = getmetatable(core.recorder(0, 0, 0, 0, 0, 0)).__index
local rec_acquired, rec_hold_end, rec_add = REC.acquired, REC.hold_end, REC.add

--- A client's recorder (client._metrics): the hot counters and the
-- histograms in C (m.rec, csrc/binding/hist.c: one call per grant, one per
-- release), the losses by reason here.
function _M.new()
  local losses = {}
  for _, r in ipairs(REASONS) do losses[r] = 0 end
  return {
    rec = core.recorder(WAIT.lo, WAIT.lo + WAIT.n - 1, HOLD.lo, HOLD.lo + HOLD.n - 1,
      RATIO.lo, RATIO.lo + RATIO.n - 1),
    losses = losses,
  }
end

---------------------------------------------------------------------------
-- Hooks
---------------------------------------------------------------------------

--- [acquire.lua, redlock.lua] An acquire call ended with `lock`, or with
-- nil and err. t_call: core.monotime() when the call began; retries: how
-- many attempts failed before the last one (0: it did not wait).
function _M.acquire_done(client, name, lock, err, t_call, retries)
  local rec = client._metrics.rec
  if lock then
    local now = rec_acquired(rec, t_call, retries)
    lock._granted_at = now
    if client._on_event then
      events.emit(client, "acquired", { name = name, waited = now - t_call, ttl = lock.ttl,
        fence = lock.fence, attempts = retries + 1 })
    end
    return
  end
  if retries > 0 then rec_add(rec, "waits") end
  local kind = kind_of(err)
  if kind == "busy" then
    rec_add(rec, "busy")
    if client._on_event then events.emit(client, "busy", { name = name }) end
  elseif kind == "timeout" then
    rec_add(rec, "timeouts")
    if client._on_event then
      events.emit(client, "timeout", { name = name, waited = monotime() - t_call, attempts = retries + 1 })
    end
  else
    rec_add(rec, "errors")
  end
end

-- The hold of `lock` ended now: its time, or nil when it was not counted
-- as a grant (taken some other way) or already ended. released: it ended
-- by a release, counted as one either way.
local function hold_end(rec, lock, released)
  local t0 = lock._granted_at
  if not t0 then
    if released then rec_add(rec, "releases") end
    return nil
  end
  lock._granted_at = nil
  return rec_hold_end(rec, t0, lock.ttl, released)
end

--- [lock.lua, redlock.lua] lock:release() deleted the key.
function _M.released(lock)
  local client = lock._client
  -- (hold_end(rec, lock, true), in line: the hot path)
  local rec, held = client._metrics.rec, nil
  local t0 = lock._granted_at
  if t0 then
    lock._granted_at = nil
    held = rec_hold_end(rec, t0, lock.ttl, true)
  else
    rec_add(rec, "releases")
  end
  if client._on_event then
    events.emit(client, "released", { name = lock.name, held = held, ttl = lock.ttl, fence = lock.fence })
  end
end

--- [lock.lua, redlock.lua] lock:extend() renewed the lease.
function _M.extended(lock)
  rec_add(lock._client._metrics.rec, "extends")
end

--- [lock.lua] The lease of `lock` was lost (Lock:_lose, once per lock).
function _M.lost(lock, reason)
  local client = lock._client
  local m = client._metrics
  m.losses[reason] = (m.losses[reason] or 0) + 1
  local held = hold_end(m.rec, lock, false)
  if client._on_event then
    events.emit(client, "lost", { name = lock.name, reason = reason, held = held, ttl = lock.ttl,
      fence = lock.fence })
  end
end

---------------------------------------------------------------------------
-- stats()
---------------------------------------------------------------------------

local function hist_view(h, b)
  local buckets, acc = {}, 0
  for i = 1, b.n + 1 do
    acc = acc + h[i]
    buckets[i] = { le = b[i] or huge, count = acc }
  end
  return { buckets = buckets, sum = h.sum, count = acc }
end

--- client:stats(): the transport's C counters (`c`, a fresh table) with the
-- library's own added (the recorder's and the losses by reason).
function _M.stats(client, c)
  local m = client._metrics
  local r = m.rec:read()
  for _, k in ipairs({ "acquires", "busy", "timeouts", "errors", "waits", "releases", "extends", "holds" }) do
    c[k] = r[k]
  end
  local losses = {}
  for reason, n in pairs(m.losses) do losses[reason] = n end
  c.losses = losses
  c.wait_time = hist_view(r.wait, WAIT)
  c.hold_time = hist_view(r.hold, HOLD)
  c.hold_ttl_ratio = hist_view(r.ratio, RATIO)
  return c
end

---------------------------------------------------------------------------
-- metrics(): the Prometheus text exposition format (version 0.0.4)
---------------------------------------------------------------------------

-- What each metric is: name (without redislock_), type, help, and the
-- stats() field it comes from. Counters get _total.
local COUNTERS = {
  { "acquires", "acquires", "Locks granted by acquire (and with_lock)." },
  { "busy", "busy", "Acquires answered busy: tried once (wait = 0), someone else held the lock." },
  { "timeouts", "timeouts", "Acquires that waited their whole wait without getting the lock." },
  { "errors", "errors", "Acquires that failed on a connection or Redis error." },
  { "waits", "waits", "Acquires that found the lock held and waited for it, whatever the outcome." },
  { "releases", "releases", "Locks released by lock:release()." },
  { "extends", "extends", "Leases renewed by lock:extend()." },
  { "losses", "losses", "Leases lost while held, as the application saw them, by reason.", "reason" },
  { "renewals", "renewals", "Renewals the watchdog sent." },
  { "renewal_round_trips", "round_trips", "Watchdog passes that sent renewals (one pipeline each)." },
  { "renewal_failures", "failures", "Watchdog renewals that got no usable answer." },
  { "renewal_waits", "renewal_waits", "WAITs the watchdog sent behind renewals on a master a failover could replace." },
  { "renewals_unacked", "renewals_unacked", "Watchdog renewals not credited: no replica acknowledged them." },
  { "watchdog_losses", "lost", "Leases the watchdog found lost, by reason.", "reason" },
  { "noscript_reloads", "noscript_reloads", "Scripts sent again after a NOSCRIPT reply (SCRIPT LOAD + EVAL)." },
  { "reconnects", "reconnects", "Connections made again after one was lost (client and watchdog)." },
  { "topology_changes", "topology_changes", "Topology changes: Sentinel master switches, Cluster slot maps." },
  { "topology_failures", "topology_failures", "Topology reloads that failed." },
  { "events_dropped", "events_dropped", "Events for on_event dropped because their queue was full." },
}
local GAUGES = {
  { "holds", "holds", "Locks granted by this client and not yet released or lost." },
  { "watched", "watched", "Locks the watchdog renews now." },
}
local HISTOGRAMS = {
  { "wait_seconds", "wait_time", "Time from an acquire call to its grant, in seconds." },
  { "hold_seconds", "hold_time", "Time from a grant to its release or loss, in seconds." },
  { "hold_ttl_ratio", "hold_ttl_ratio", "Hold time divided by the lock's ttl." },
}

-- A sample value: integers with every digit, others as read back exactly.
local function num(x)
  if x ~= x then return "NaN" end
  if x == huge then return "+Inf" end
  if x == -huge then return "-Inf" end
  if x == floor(x) and x > -2 ^ 53 and x < 2 ^ 53 then return format("%d", x) end
  local s = format("%.15g", x)
  if tonumber(s) ~= x then s = format("%.17g", x) end
  return s
end
_M.num = num

-- A label value is at most this many bytes: a label is a name for people
-- and dashboards, and one as long as a file would make every sample as
-- long (a 10 MB label made a 1.18 GB exposition).
_M.MAX_LABEL_BYTES = 256

-- A label value, valid UTF-8 (the format requires it: an invalid byte
-- becomes U+FFFD), at most MAX_LABEL_BYTES, escaped as the format wants:
-- \ " and newline.
local function label_value(v)
  return (textmod.utf8(v, _M.MAX_LABEL_BYTES):gsub('[\\"\n]', { ["\\"] = "\\\\", ['"'] = '\\"',
    ["\n"] = "\\n" }))
end
_M.label_value = label_value

local RESERVED = { le = true, reason = true }

-- The constant labels of opts.labels as `k="v",` text, sorted, checked.
local function const_labels(opts)
  if opts == nil then return "" end
  opts = checks.check_options("metrics", opts, { labels = true })
  if opts.labels == nil then return "" end
  checks.check_type("metrics", "labels", opts.labels, "table")
  local names = {}
  for k, v in pairs(opts.labels) do
    if type(k) ~= "string" or not k:match("^[%a_][%w_]*$") or k:sub(1, 2) == "__" or RESERVED[k] then
      checks.argerror("metrics", "labels", "bad label name '" .. tostring(k) .. "'")
    end
    if type(v) ~= "string" and type(v) ~= "number" then
      checks.argerror("metrics", "labels", "string expected for label '" .. k .. "', got " .. type(v))
    end
    names[#names + 1] = k
  end
  table.sort(names)
  local out = {}
  for i, k in ipairs(names) do out[i] = k .. '="' .. label_value(opts.labels[k]) .. '",' end
  return concat(out)
end

-- A series name with its labels ("" and `extra`: a label set already
-- rendered, e.g. le="0.5").
local function series(name, labels, extra)
  local all = labels .. (extra or "")
  if all == "" then return name end
  return name .. "{" .. all:gsub(",$", "") .. "}"
end

local function help(out, name, kind, text)
  out[#out + 1] = "# HELP " .. name .. " " .. text:gsub("\\", "\\\\"):gsub("\n", "\\n")
  out[#out + 1] = "# TYPE " .. name .. " " .. kind
end

--- client:metrics(opts): stats `s` as Prometheus text. opts.labels: a
-- table of constant labels added to every sample (e.g. { client = "orders" }).
-- No label per lock name: names are unbounded, and so would be the series.
function _M.render(s, opts)
  local labels = const_labels(opts)
  local out = {}
  for _, c in ipairs(COUNTERS) do
    local name, v = "redislock_" .. c[1] .. "_total", s[c[2]]
    if v ~= nil then
      help(out, name, "counter", c[3])
      if c[4] then
        local keys = {}
        for k in pairs(v) do keys[#keys + 1] = k end
        table.sort(keys)
        for _, k in ipairs(keys) do
          out[#out + 1] = series(name, labels, c[4] .. '="' .. label_value(k) .. '"') .. " " .. num(v[k])
        end
      else
        out[#out + 1] = series(name, labels) .. " " .. num(v)
      end
    end
  end
  for _, g in ipairs(GAUGES) do
    local name, v = "redislock_" .. g[1], s[g[2]]
    if v ~= nil then
      help(out, name, "gauge", g[3])
      out[#out + 1] = series(name, labels) .. " " .. num(v)
    end
  end
  for _, h in ipairs(HISTOGRAMS) do
    local name, v = "redislock_" .. h[1], s[h[2]]
    if v ~= nil then
      help(out, name, "histogram", h[3])
      for _, b in ipairs(v.buckets) do
        out[#out + 1] = series(name .. "_bucket", labels, 'le="' .. num(b.le) .. '"') .. " " .. num(b.count)
      end
      out[#out + 1] = series(name .. "_sum", labels) .. " " .. num(v.sum)
      out[#out + 1] = series(name .. "_count", labels) .. " " .. num(v.count)
    end
  end
  out[#out + 1] = ""
  return concat(out, "\n")
end

return _M

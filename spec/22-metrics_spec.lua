-- Metrics and events (issue #13, point 5): client:stats() counters and
-- log2 histograms, client:metrics() in the Prometheus text format parsed
-- line by line against stats(), and connect{on_event = fn}: order, fields,
-- errors caught, and never a token or a password. Real redis-server
-- processes on loopback. Loadable on Lua 5.1 (make test51, make testjit).
local helpers = require "spec.helpers"
local redislock = require "redislock"
local core = require "redislock.core"
local metrics = require "redislock.metrics"
local prometheus = require "spec.support.prometheus"

-- Every event as { event, fields }.
local function recorder()
  local log = {}
  local function on_event(event, fields) log[#log + 1] = { event = event, fields = fields } end
  return log, on_event
end

local function names_of(log)
  local out = {}
  for i, e in ipairs(log) do out[i] = e.event end
  return out
end

local function find(log, event)
  for _, e in ipairs(log) do
    if e.event == event then return e.fields end
  end
end

-- The cumulative count of bucket `le` in a stats() histogram.
local function bucket(h, le)
  for _, b in ipairs(h.buckets) do
    if b.le == le then return b.count end
  end
  error("no bucket le=" .. tostring(le))
end

-- Every string in t (keys and values, recursively).
local function strings_in(t, out, seen)
  out, seen = out or {}, seen or {}
  if seen[t] then return out end
  seen[t] = true
  for k, v in pairs(t) do
    for _, x in ipairs({ k, v }) do
      if type(x) == "string" then out[#out + 1] = x end
      if type(x) == "table" then strings_in(x, out, seen) end
    end
  end
  return out
end

describe("metrics", function()
  local srv, admin

  local fx = helpers.redis_fixture { raw = true }
  setup(function() srv, admin = fx.srv, fx.raw end)

  local fresh = helpers.names("m")

  it("log2 buckets: (2^(k-1), 2^k], exact powers of two in their own bucket", function()
    local b = metrics.LAYOUTS.wait_time
    local h = {}
    for i = 1, b.n + 1 do h[i] = 0 end
    for _, x in ipairs({ 0, b[1], b[1] * 1.5, 0.25, 0.25 * 1.0000001, 0.5, 1, 3, b[b.n], b[b.n] * 2 }) do
      local i = core.hist_bucket(x, b.lo, b.n)
      h[i] = h[i] + 1
    end
    local function count_at(le)
      for i = 1, b.n do if b[i] == le then return h[i] end end
      return h[b.n + 1]
    end
    assert.equal(2, count_at(b[1]))          -- 0 and 2^-14 itself
    assert.equal(1, count_at(b[2]))          -- 1.5 * 2^-14
    assert.equal(1, count_at(0.25))          -- 0.25, not 0.25 + a bit
    assert.equal(2, count_at(0.5))           -- 0.25 + a bit, 0.5
    assert.equal(1, count_at(1))
    assert.equal(1, count_at(4))             -- 3
    assert.equal(1, count_at(b[b.n]))
    assert.equal(1, count_at(math.huge))
    local n = 0
    for i = 1, b.n + 1 do n = n + h[i] end
    assert.equal(10, n)
    -- the edges: negatives, +Inf and NaN, and the bounds of a small layout
    assert.equal(1, core.hist_bucket(-1, b.lo, b.n))
    assert.equal(b.n + 1, core.hist_bucket(math.huge, b.lo, b.n))
    assert.equal(b.n + 1, core.hist_bucket(0 / 0, b.lo, b.n))
    assert.same({ 1, 1, 2, 2, 3, 4 }, { core.hist_bucket(0.5, -1, 3), core.hist_bucket(0.25, -1, 3),
      core.hist_bucket(0.75, -1, 3), core.hist_bucket(1, -1, 3), core.hist_bucket(2, -1, 3),
      core.hist_bucket(2.0000001, -1, 3) })
  end)

  it("counts acquires, busy, timeouts, waits, releases, extends and holds", function()
    local c = assert(redislock.connect { url = srv.url })
    local other = assert(redislock.connect { url = srv.url })
    local s = c:stats()
    -- the watchdog's names stay
    for _, k in ipairs({ "renewals", "round_trips", "failures", "watched", "last_batch", "lost",
      "topology_changes", "reconnects", "noscript_reloads" }) do
      assert.is_not_nil(s[k], k)
    end
    for _, k in ipairs({ "acquires", "busy", "timeouts", "errors", "waits", "releases", "extends", "holds" }) do
      assert.equal(0, s[k], k)
    end
    local name = fresh()
    -- (busy and timeout against another client: this one's own names are
    -- refused at once, spec 45)
    local theirs = assert(other:acquire(name, { ttl = 5 }))
    assert.equal("busy", select(3, c:acquire(name)))
    assert.equal("timeout", select(3, c:acquire(name, { wait = 0.05 })))
    assert.is_true(theirs:release())
    local l = assert(c:acquire(name, { ttl = 5 }))
    assert.is_true(l:extend(6))
    assert.is_true(l:extend())
    s = c:stats()
    assert.equal(1, s.acquires)
    assert.equal(1, s.holds)
    assert.equal(1, s.busy)
    assert.equal(1, s.timeouts)
    assert.equal(1, s.waits)
    assert.equal(2, s.extends)
    assert.is_true(l:release())
    assert.equal(nil, (l:release()))      -- a second release changes nothing
    -- a wait that ends in a grant: held elsewhere for 0.3 s, no watchdog
    local held = assert(other:acquire(name, { ttl = 0.3, watchdog = false }))
    assert.truthy(held)
    local w = assert(c:acquire(name, { ttl = 5, wait = 2 }))
    assert.is_true(w:release())
    -- with_lock counts too
    assert.is_true((c:with_lock(fresh(), { ttl = 5 }, function() end)))
    s = c:stats()
    assert.equal(3, s.acquires)
    assert.equal(3, s.releases)
    assert.equal(0, s.holds)
    assert.equal(2, s.waits)
    assert.equal(0, s.errors)
    -- the wait histogram: one grant after about 0.3 s, two at once
    assert.equal(3, s.wait_time.count)
    assert.equal(2, bucket(s.wait_time, 0.25))
    assert.equal(3, bucket(s.wait_time, 0.5))
    assert.is_true(s.wait_time.sum > 0.25 and s.wait_time.sum < 0.6, tostring(s.wait_time.sum))
    c:close()
    other:close()
  end)

  it("counts the other primitives: reentrant holds, adopt, read and write shares, permits", function()
    local c = assert(redislock.connect { url = srv.url })
    local other = assert(redislock.connect { url = srv.url })
    local name = fresh()
    local outer = assert(c:acquire(name, { reentrant = true }))
    local inner = assert(c:acquire(name, { reentrant = true }))
    local adopted = assert(other:adopt(name, c.owner))
    assert.equal("not held", select(3, other:adopt(fresh(), c.owner)))
    local rw = c:rwlock(fresh())
    local r = assert(rw:read())
    assert.equal("busy", select(3, rw:write()))
    assert.equal("timeout", select(3, rw:write { wait = 0.05 }))
    local sem = assert(c:semaphore(fresh(), 1))
    local p = assert(sem:acquire())
    assert.equal("busy", select(3, sem:acquire()))
    local s = c:stats()
    assert.equal(4, s.acquires)        -- two entries, a read share, a permit
    assert.equal(4, s.holds)
    assert.equal(2, s.busy)
    assert.equal(1, s.timeouts)
    assert.equal(1, other:stats().acquires)
    assert.equal(1, other:stats().errors)   -- the adopt of a lock nobody held
    for _, l in ipairs { inner, outer, r, p } do assert.is_true(l:release()) end
    assert.equal("not held", select(3, adopted:release()))  -- released by its owner already
    s = c:stats()
    assert.equal(4, s.releases)
    assert.equal(0, s.holds)
    c:close()
    other:close()
  end)

  it("hold time and hold/ttl in log2 buckets", function()
    local c = assert(redislock.connect { url = srv.url })
    local l = assert(c:acquire(fresh(), { ttl = 1 }))
    helpers.sleep(0.2)
    assert.is_true(l:release())
    local s = c:stats()
    assert.equal(1, s.hold_time.count)
    assert.equal(0, bucket(s.hold_time, 0.125))
    assert.equal(1, bucket(s.hold_time, 0.25))
    assert.equal(0, bucket(s.hold_ttl_ratio, 0.125))
    assert.equal(1, bucket(s.hold_ttl_ratio, 0.25))
    assert.equal(1, s.hold_ttl_ratio.count)
    -- cumulative, ending at +Inf with the count
    for _, h in ipairs({ s.wait_time, s.hold_time, s.hold_ttl_ratio }) do
      local prev = 0
      for _, b in ipairs(h.buckets) do
        assert.is_true(b.count >= prev)
        prev = b.count
      end
      assert.equal(math.huge, h.buckets[#h.buckets].le)
      assert.equal(h.count, h.buckets[#h.buckets].count)
    end
    c:close()
  end)

  it("counts losses by reason, in the watchdog and as the application saw them", function()
    local log, on_event = recorder()
    local c = assert(redislock.connect { url = srv.url, on_event = on_event })
    local name = fresh()
    local l = assert(c:acquire(name, { ttl = 0.3 }))
    assert(admin:command("DEL", "{" .. name .. "}"))
    assert(helpers.wait_until(function() return not l:held() end, 3))
    local e = assert(c:acquire(fresh(), { ttl = 0.1, watchdog = false }))
    helpers.sleep(0.15)
    assert.is_false(e:held())
    local s = c:stats()
    assert.equal(1, s.lost["not held"])           -- the watchdog's
    assert.equal(1, s.losses["not held"])         -- the application's
    assert.equal(1, s.losses.expired)
    assert.equal(0, s.lost.expired)               -- (no watchdog for that one)
    assert.equal(0, s.holds)
    assert.equal(2, s.hold_time.count)
    local lost = find(log, "lost")
    assert.equal(name, lost.name)
    assert.equal("not held", lost.reason)
    assert.equal(0.3, lost.ttl)
    assert.equal(l.fence, lost.fence)
    assert.is_true(lost.held > 0.05 and lost.held < 1)
    c:close()
  end)

  it("counts NOSCRIPT reloads after SCRIPT FLUSH, the client's and the watchdog's", function()
    local c = assert(redislock.connect { url = srv.url })
    local l = assert(c:acquire(fresh(), { ttl = 0.3 }))
    local before = c:stats().noscript_reloads
    assert(admin:command("SCRIPT", "FLUSH"))
    assert.is_true(l:extend())                       -- the client: one EVAL
    assert.equal(before + 1, c:stats().noscript_reloads)
    assert(admin:command("SCRIPT", "FLUSH"))
    local renewals = c:stats().renewals
    assert(helpers.wait_until(function() return c:stats().renewals > renewals + 1 end, 3))
    assert.is_true(l:held())
    assert.is_true(c:stats().noscript_reloads >= before + 2)   -- and the watchdog's
    assert.is_true(l:release())
    c:close()
  end)

  it("counts a reconnect after CLIENT KILL, with an event naming the node", function()
    local log, on_event = recorder()
    local c = assert(redislock.connect { url = srv.url, on_event = on_event })
    assert(c:acquire(fresh())):release()
    local before = c:stats()
    admin:command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    -- the command that meets the closed connection fails (never retried);
    -- the next one reconnects
    local l, err = c:acquire(fresh())
    assert.is_nil(l)
    assert.matches("^connection lost", err)
    assert(c:acquire(fresh())):release()
    local s = c:stats()
    -- the client's, and the watchdog's (its connection was killed too)
    assert.is_true(s.reconnects >= before.reconnects + 1)
    assert.equal(before.errors + 1, s.errors)
    c:poll()
    local mine
    for _, e in ipairs(log) do
      if e.event == "reconnect" and e.fields.connection == "client" then
        assert.is_nil(mine, "one reconnect of the client's connection")
        mine = e.fields
      end
    end
    assert.same({ node = "127.0.0.1:" .. srv.port, attempts = 1, connection = "client" }, mine)
    c:close()
  end)

  it("queues the watchdog's renewal failures and reconnects; on_event sees them at the next call", function()
    local log, on_event = recorder()
    local c = assert(redislock.connect { url = srv.url, timeout = 0.3, on_event = on_event })
    local name = fresh()
    local l = assert(c:acquire(name, { ttl = 3 }))
    c:poll()                          -- (turns the C queues on: connect did already)
    assert(srv:kill("STOP"))
    local ok, perr = pcall(function()
      -- the renewal at ttl/3 times out after 0.3 s: a failure, the lease still runs
      assert(helpers.wait_until(function()
        c:poll()
        return find(log, "renewal_failed")
      end, 4, 0.02), "no renewal_failed event")
    end)
    assert(srv:kill("CONT"))
    assert(ok, perr)
    local f = find(log, "renewal_failed")
    assert.equal(name, f.name)
    assert.equal(l.fence, f.fence)
    assert.equal(3, f.ttl)
    assert.is_true(f.lease_left > 0 and f.lease_left < 3, tostring(f.lease_left))
    -- the next renewal reconnects, and the lock was never lost
    assert(helpers.wait_until(function()
      c:poll()
      return find(log, "reconnect")
    end, 4, 0.02), "no reconnect event")
    local r = find(log, "reconnect")
    assert.equal("watchdog", r.connection)
    assert.equal("127.0.0.1:" .. srv.port, r.node)
    assert.is_true(r.attempts >= 1)
    assert.is_true(l:held())
    local s = c:stats()
    assert.is_true(s.failures >= 1)
    assert.is_true(s.reconnects >= 1)
    assert.is_true(l:release())
    assert.is_nil(find(log, "lost"))
    c:close()
  end)

  it("on_event: order and fields of acquired, busy, timeout, released, lost", function()
    local log, on_event = recorder()
    local c = assert(redislock.connect { url = srv.url, on_event = on_event })
    local name = fresh()
    -- held by someone else (this client's own names are refused at once,
    -- spec 45): busy, then a wait that runs out
    assert(admin:command("SET", "{" .. name .. "}", "someone", "PX", "5000"))
    c:acquire(name)
    c:acquire(name, { wait = 0.05 })
    assert(admin:command("DEL", "{" .. name .. "}"))
    local l = assert(c:acquire(name, { ttl = 2 }))
    helpers.sleep(0.05)
    assert.is_true(l:release())
    local l2 = assert(c:acquire(name, { ttl = 0.5, watchdog = false }))
    assert(admin:command("DEL", "{" .. name .. "}"))
    assert.equal("not held", select(3, l2:release()))
    assert.same({ "busy", "timeout", "acquired", "released", "acquired", "lost" }, names_of(log))
    local a = log[3].fields
    assert.equal(name, a.name)
    assert.equal(2, a.ttl)
    assert.equal(l.fence, a.fence)
    assert.equal(1, a.attempts)
    assert.is_true(a.waited >= 0 and a.waited < 0.5)
    assert.same({ name = name }, log[1].fields)
    assert.equal(name, log[2].fields.name)
    assert.is_true(log[2].fields.waited >= 0.05)
    assert.is_true(log[2].fields.attempts >= 2)
    local r = log[4].fields
    assert.equal(name, r.name)
    assert.equal(l.fence, r.fence)
    assert.equal(2, r.ttl)
    assert.is_true(r.held >= 0.05)
    local lost = log[6].fields
    assert.equal("not held", lost.reason)
    assert.equal(l2.fence, lost.fence)
    c:close()
  end)

  it("an error in on_event is caught, kept with its traceback, and breaks nothing", function()
    local calls = 0
    local c = assert(redislock.connect { url = srv.url, on_event = function(event)
      calls = calls + 1
      error("boom in " .. event)
    end })
    local l = assert(c:acquire(fresh(), { ttl = 2 }))
    assert.matches("boom in acquired", c.callback_error)
    assert.matches("traceback", c.callback_error)
    assert.is_true(l:release())
    assert.matches("boom in released", c.callback_error)
    assert.equal(2, calls)
    assert.equal(1, c:stats().releases)
    c:close()
  end)

  it("on_event is checked at connect; without it no event is built and the C queues stay off", function()
    assert.has_error(function() redislock.connect { url = srv.url, on_event = "log" } end,
      "redislock: bad argument 'on_event' to 'connect' (function expected, got string)")
    local callable = setmetatable({}, { __call = function() end })
    local c1 = assert(redislock.connect { url = srv.url, on_event = callable })
    c1:close()
    local c = assert(redislock.connect { url = srv.url })
    local taken = 0
    -- a channel that counts the calls of its events method
    local real = c._conn
    c._conn = setmetatable({}, { __index = function(_, k)
      local f = real[k]
      if type(f) ~= "function" then return f end
      return function(_, ...)
        if k == "events" then taken = taken + 1 end
        return f(real, ...)
      end
    end })
    assert(c:acquire(fresh())):release()
    c:poll()
    assert.equal(0, taken)
    c:close()
  end)

  it("metrics(): valid Prometheus text that says what stats() says", function()
    local c = assert(redislock.connect { url = srv.url })
    local name = fresh()
    local l = assert(c:acquire(name, { ttl = 2 }))
    c:acquire(name)
    assert.is_true(l:extend())
    assert.is_true(l:release())
    local l2 = assert(c:acquire(name, { ttl = 2 }))
    assert(admin:command("DEL", "{" .. name .. "}"))
    assert.equal("not held", select(3, l2:extend()))
    local s = c:stats()
    local text = c:metrics({ labels = { app = 'a "quoted"\\ name\nx', zone = 1 } })
    local p = prometheus.parse(text)
    -- every family has HELP and TYPE, the redislock_ prefix, counters _total
    for fname, f in pairs(p.families) do
      assert.matches("^redislock_", fname)
      assert.is_string(f.help, fname)
      assert.is_string(f.type, fname)
      if f.type == "counter" then assert.matches("_total$", fname) end
    end
    -- the constant labels, escaped and read back, on every sample
    for _, smp in ipairs(p.samples) do
      assert.equal('a "quoted"\\ name\nx', smp.labels.app, smp.name)
      assert.equal("1", smp.labels.zone)
    end
    local map = {
      acquires = "redislock_acquires_total", busy = "redislock_busy_total",
      timeouts = "redislock_timeouts_total", errors = "redislock_errors_total",
      waits = "redislock_waits_total", releases = "redislock_releases_total",
      extends = "redislock_extends_total", renewals = "redislock_renewals_total",
      round_trips = "redislock_renewal_round_trips_total", failures = "redislock_renewal_failures_total",
      renewal_waits = "redislock_renewal_waits_total", renewals_unacked = "redislock_renewals_unacked_total",
      noscript_reloads = "redislock_noscript_reloads_total", reconnects = "redislock_reconnects_total",
      topology_changes = "redislock_topology_changes_total", holds = "redislock_holds",
      watched = "redislock_watched",
    }
    for field, series in pairs(map) do
      assert.equal(s[field], prometheus.sample(p, series), series)
    end
    assert.equal(2, prometheus.sample(p, "redislock_acquires_total"))
    assert.equal(1, prometheus.sample(p, "redislock_busy_total"))
    for reason, n in pairs(s.losses) do
      assert.equal(n, prometheus.sample(p, "redislock_losses_total", { reason = reason }), reason)
    end
    for reason, n in pairs(s.lost) do
      assert.equal(n, prometheus.sample(p, "redislock_watchdog_losses_total", { reason = reason }), reason)
    end
    assert.equal(1, prometheus.sample(p, "redislock_losses_total", { reason = "not held" }))
    -- histograms: cumulative buckets as stats() has them, +Inf = _count
    for family, field in pairs({ redislock_wait_seconds = "wait_time", redislock_hold_seconds = "hold_time",
      redislock_hold_ttl_ratio = "hold_ttl_ratio" }) do
      assert.equal("histogram", p.families[family].type)
      local h, n = s[field], 0
      for _, smp in ipairs(p.samples) do
        if smp.name == family .. "_bucket" then
          n = n + 1
          local le = smp.labels.le == "+Inf" and math.huge or tonumber(smp.labels.le)
          assert.equal(h.buckets[n].le, le)
          assert.equal(h.buckets[n].count, smp.value)
        end
      end
      assert.equal(#h.buckets, n)
      assert.equal(h.count, prometheus.sample(p, family .. "_count"))
      assert.equal(h.count, prometheus.sample(p, family .. "_bucket", { le = "+Inf" }))
      assert.is_true(math.abs(h.sum - prometheus.sample(p, family .. "_sum")) < 1e-9)
    end
    assert.equal(2, prometheus.sample(p, "redislock_hold_seconds_count"))
    -- no label per lock name: no sample carries the name
    assert.is_nil(text:find(name, 1, true))
    -- bad labels are argument errors
    assert.has_error(function() c:metrics({ labels = { ["bad-name"] = "x" } }) end)
    assert.has_error(function() c:metrics({ labels = { le = "x" } }) end)
    assert.has_error(function() c:metrics({ labels = { a = {} } }) end)
    c:close()
  end)

  it("no token and no password in any event's fields or in the metrics text", function()
    local password = "pw-Secret-77f1"
    local guarded = helpers.start_redis { password = password }
    local url = "redis://:" .. password .. "@127.0.0.1:" .. guarded.port
    local log, on_event = recorder()
    local c = assert(redislock.connect { url = url, timeout = 0.3, on_event = on_event })
    local g_admin = assert(core.connect { host = "127.0.0.1", port = guarded.port, password = password })
    local tokens = {}
    local function take(name, opts)
      local l, err = c:acquire(name, opts)
      if l then tokens[#tokens + 1] = l.token end
      return l, err
    end
    local name = fresh()
    local l = assert(take(name, { ttl = 3 }))
    take(name)
    -- (a timeout: a name held by someone else; this client's own is busy at once)
    local theirs = fresh()
    assert(g_admin:command("SET", "{" .. theirs .. "}", "someone", "PX", "5000"))
    take(theirs, { wait = 0.05 })
    assert.is_true(l:extend())
    assert.is_true(l:release())
    local gone = assert(take(fresh(), { ttl = 0.3 }))
    assert(g_admin:command("DEL", gone._keys.lock))
    assert(helpers.wait_until(function() return not gone:held() end, 3))
    -- a renewal failure, a watchdog reconnect and a client reconnect
    local slow = assert(take(fresh(), { ttl = 3 }))
    assert(guarded:kill("STOP"))
    local ok, perr = pcall(function()
      assert(helpers.wait_until(function()
        c:poll()
        return find(log, "renewal_failed")
      end, 4, 0.02), "no renewal_failed event")
    end)
    assert(guarded:kill("CONT"))
    assert(ok, perr)
    g_admin:command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    c:acquire(fresh())
    assert(take(fresh())):release()
    assert(helpers.wait_until(function()
      c:poll()
      local n = 0
      for _, e in ipairs(log) do if e.event == "reconnect" then n = n + 1 end end
      return n >= 2
    end, 4, 0.02), "no reconnect of both connections")
    assert.is_true(slow:release())
    local seen = {}
    for _, e in ipairs(log) do seen[e.event] = true end
    for _, want in ipairs({ "acquired", "busy", "timeout", "released", "lost", "renewal_failed", "reconnect" }) do
      assert.is_true(seen[want], want)
    end
    local text = c:metrics()
    local secrets = { password }
    for _, t in ipairs(tokens) do secrets[#secrets + 1] = t end
    assert.is_true(#tokens >= 4)
    for _, e in ipairs(log) do
      for _, s in ipairs(strings_in(e.fields)) do
        for _, secret in ipairs(secrets) do
          assert.is_nil(s:find(secret, 1, true), e.event .. " carries a secret")
        end
      end
    end
    for _, secret in ipairs(secrets) do assert.is_nil(text:find(secret, 1, true)) end
    for _, s in ipairs(strings_in(c:stats())) do
      for _, secret in ipairs(secrets) do assert.is_nil(s:find(secret, 1, true)) end
    end
    c:close()
    g_admin:close()
    guarded:stop()
  end)

  it("counts Redlock's locks too", function()
    local servers = {}
    for i = 1, 3 do servers[i] = helpers.start_redis() end
    local log, on_event = recorder()
    local c = assert(redislock.connect { redlock = { servers[1].url, servers[2].url, servers[3].url },
      on_event = on_event })
    local name = fresh()
    local l = assert(c:acquire(name, { ttl = 2 }))
    assert.equal("busy", select(3, c:acquire(name)))
    assert.is_true(l:extend())
    assert.is_true(l:release())
    local s = c:stats()
    assert.equal(1, s.acquires)
    assert.equal(1, s.busy)
    assert.equal(1, s.extends)
    assert.equal(1, s.releases)
    assert.equal(1, s.hold_time.count)
    assert.same({ "acquired", "busy", "released" }, names_of(log))
    assert.is_nil(log[1].fields.fence)     -- Redlock has no fence
    c:close()
    for _, srv3 in ipairs(servers) do srv3:stop() end
  end)
end)

describe("metrics over a cluster", function()
  local topology = require "spec.support.topology"
  local cl

  setup(function()
    cl = topology.start_cluster { masters = 3, replicas = 0 }
  end)

  teardown(function()
    if cl then cl:stop() end
  end)

  it("counts a slot map change and reports topology_changed", function()
    local log, on_event = recorder()
    local c = assert(redislock.connect { cluster = { cl.seeds[1] }, on_event = on_event })
    local l = assert(c:acquire("topo-metrics", { ttl = 5 }))
    local slot = core.slot(l._keys.lock)
    local from = cl:node_for_slot(slot)
    local to = cl:other_master(from)
    local before = c:stats().topology_changes
    cl:migrate_slot(slot, from, to)
    -- the next command there meets MOVED and reloads the map
    assert.is_true(l:extend())
    assert.is_true(c:stats().topology_changes > before)
    c:poll()
    local t = find(log, "topology_changed")
    assert.equal("cluster", t.mode)
    assert.equal(3, t.nodes)
    assert.is_true(t.changes >= 1)
    assert.is_true(l:release())
    c:close()
  end)
end)

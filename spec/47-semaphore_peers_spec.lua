-- Semaphores as Redisson's RSemaphore and PermitExpirableSemaphore users
-- know them (issue 32, point 6): open one by its stored limit, store a
-- limit only if none is (trySetPermits), raising the limit lets waiters in
-- at once, a permit released by its id from any client, n permits at once.
local helpers = require "spec.helpers"
local core = require "redislock.core"
local errors = require "redislock.errors"

local monotime = core.monotime

-- A process that opens the semaphore `name` with `permits`, waits up to
-- 10 s for a permit, prints when it got it (core.monotime) and keeps it.
local function waiter(url, name, permits)
  return helpers.spawn(helpers.lua_cmd(([[
    local core = require "redislock.core"
    local c = assert(require("redislock").connect { url = %q })
    local sem = assert(c:semaphore(%q, %d))
    io.stdout:write("waiting\n") io.stdout:flush()
    local p = assert(sem:acquire { wait = 10, ttl = 20 })
    io.stdout:write(string.format("got %%.6f\n", core.monotime())) io.stdout:flush()
    core.sleep(0.5)
    p:release()
  ]]):format(url, name, permits)))
end

describe("semaphores, as the peers' users know them", function()
  local srv, raw, c, other
  local fresh = helpers.names("semp")

  local fx = helpers.redis_fixture { raw = true, clients = 2 }
  setup(function() srv, raw, c, other = fx.srv, fx.raw, fx.clients[1], fx.clients[2] end)

  it("client:semaphore(name) opens one with its stored limit; none stored is an error", function()
    local name = fresh()
    assert(c:semaphore(name, 2))
    local sem = assert(other:semaphore(name))
    assert.equal(2, sem.permits)
    local a, b = assert(sem:acquire()), assert(sem:acquire())
    assert.equal("busy", select(3, sem:acquire()))
    assert.is_true(a:release() and b:release())
    local v, err, kind = other:semaphore(fresh())
    assert.is_nil(v)
    assert.equal("absent", kind)
    assert.equal("absent", errors.kind_of(err))
    assert.matches("no stored limit", err, 1, true)
  end)

  it("if_absent stores the limit only when none is stored (trySetPermits)", function()
    local name = fresh()
    local first = assert(c:semaphore(name, 2, { if_absent = true }))
    assert.equal(2, first.permits)
    local second = assert(other:semaphore(name, 5, { if_absent = true }))
    assert.equal(2, second.permits)              -- the limit in force, kept
    assert.equal(2, second:inspect().limit)
    local ps = { assert(second:acquire()), assert(second:acquire()) }
    assert.equal("busy", select(3, second:acquire()))
    -- without if_absent the latest call stores its own, as before
    assert.equal(5, assert(other:semaphore(name, 5)).permits)
    assert(second:acquire()):release()
    for _, p in ipairs(ps) do assert.is_true(p:release()) end
    assert.has_error(function() c:semaphore(name, 2, { if_absent = 1 }) end)
    assert.has_error(function() c:semaphore(name, 2, { bogus = true }) end)
    assert.has_error(function() c:semaphore(name, nil, { if_absent = true }) end)
  end)

  it("raising the limit lets a waiter in at once, not at a lease end or its deadline", function()
    local name = fresh()
    local sem = assert(c:semaphore(name, 1))
    local held = assert(sem:acquire { ttl = 10 })
    local p = waiter(srv.url, name, 1)
    assert(helpers.wait_until(function() return p:stdout():find("waiting") end, 10))
    assert(helpers.wait_until(function() return sem:inspect().waiters == 1 end, 10), "the waiter never waited")
    local t_raise = monotime()
    assert(other:semaphore(name, 2))
    assert(helpers.wait_until(function() return p:stdout():find("got") end, 5), "never got in")
    local got = tonumber(p:stdout():match("got ([%d.]+)"))
    assert.is_true(got - t_raise < 0.3, string.format("got in %.3f s after the raise", got - t_raise))
    assert.equal(0, p:wait(10))
    assert.is_true(held:release())
  end)

  it("sem:release_permit(id) releases a permit by its token, from any client", function()
    local name = fresh()
    local sem = assert(c:semaphore(name, 1))
    local permit = assert(sem:acquire { ttl = 0.5 })
    local ops = assert(other:semaphore(name))
    assert.is_true(ops:release_permit(permit.token))
    assert.equal(0, ops:inspect().in_use)
    -- the holder learns it at its next renewal; someone else may take it now
    local next_one = assert(ops:acquire())
    assert(helpers.wait_until(function() return not permit:held() end, 3))
    assert.equal("not held", permit.lost_reason)
    assert.same({ nil, "not held: " .. name, "not held" }, { ops:release_permit(permit.token) })
    assert.is_true(next_one:release())
    assert.has_error(function() ops:release_permit(42) end)
    assert.has_error(function() ops:release_permit("") end)
  end)

  it("sem:acquire{permits = n} takes n permits at once, all or none", function()
    local name = fresh()
    local sem = assert(c:semaphore(name, 3))
    local two = assert(sem:acquire { permits = 2, ttl = 0.3 })
    assert.equal(2, two.in_use)
    assert.equal(2, two.permits)
    assert.equal(2, sem:inspect().in_use)
    -- two more do not fit: none is taken
    assert.equal("busy", select(3, other:semaphore(name):acquire { permits = 2 }))
    assert.equal("timeout", select(3, other:semaphore(name):acquire { permits = 2, wait = 0.1 }))
    assert.equal(2, sem:inspect().in_use)
    local one = assert(sem:acquire())
    assert.equal(3, one.in_use)
    assert.equal("busy", select(3, sem:acquire()))
    -- the watchdog renews both of the two
    helpers.sleep(1)
    assert.is_true(two:held())
    assert.equal(3, sem:inspect().in_use)
    assert.is_true(two:release())
    assert.equal(1, sem:inspect().in_use)
    local again = assert(sem:acquire { permits = 2 })
    -- released by its id, the two go together
    assert.is_true(assert(other:semaphore(name)):release_permit(again.token))
    assert.equal(1, sem:inspect().in_use)
    assert.is_true(one:release())
    -- more than the limit never fits
    assert.equal("busy", select(3, sem:acquire { permits = 4 }))
    for _, bad in ipairs({ 0, -1, 1.5, "2", math.huge }) do
      assert.has_error(function() sem:acquire { permits = bad } end)
    end
  end)

  it("a waiter for n permits gets them when enough are released", function()
    local name = fresh()
    local sem = assert(c:semaphore(name, 2))
    local a = assert(sem:acquire { ttl = 10 })
    local t0 = monotime()
    -- (released by the other client while this one waits: a timer would
    -- need a second thread, so the release comes from the lease's end)
    local b = assert(other:semaphore(name):acquire { ttl = 0.3, watchdog = false })
    assert.is_true(a:release())
    local both = assert(sem:acquire { permits = 2, wait = 3 })
    assert.is_true(monotime() - t0 >= 0.25)
    assert.is_false(b:held())
    assert.equal(2, both.in_use)
    assert.is_true(both:release())
    assert.equal(0, raw:command("ZCARD", "{" .. name .. "}:sem"))
  end)

  it("never holds more than the limit: processes taking 1 to 3 permits at once", function()
    local name = fresh()
    assert(c:semaphore(name, 4))
    local procs = {}
    for i = 1, 4 do
      procs[i] = helpers.spawn(helpers.lua_cmd(([[
        local core = require "redislock.core"
        local c = assert(require("redislock").connect { url = %q })
        local sem = assert(c:semaphore(%q))
        math.randomseed(%d)
        for _ = 1, 25 do
          local n = math.random(1, 3)
          local p = assert(sem:acquire { permits = n, wait = 10, ttl = 5 })
          local t0 = core.monotime()
          core.sleep(math.random() * 0.01)
          local t1 = core.monotime()
          assert(p:release())
          io.stdout:write(string.format("hold %%d %%.6f %%.6f\n", n, t0, t1))
        end
      ]]):format(srv.url, name, i)))
    end
    local events = {}
    for _, p in ipairs(procs) do
      assert.equal(0, p:wait(60), p:stderr())
      for n, t0, t1 in p:stdout():gmatch("hold (%d) ([%d.]+) ([%d.]+)") do
        events[#events + 1] = { tonumber(t0), tonumber(n) }
        events[#events + 1] = { tonumber(t1), -tonumber(n) }
      end
    end
    assert.equal(200, #events)
    -- (at one instant, releases first: an interval is [grant, release])
    table.sort(events, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
    local held, most = 0, 0
    for _, e in ipairs(events) do
      held = held + e[2]
      if held > most then most = held end
    end
    assert.is_true(most <= 4, "held at once: " .. most)
    assert.is_true(most >= 3, "never contended: " .. most)
  end)
end)

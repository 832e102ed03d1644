-- Counting semaphores: the permit bound, a lease per permit, wake-on-release,
-- a limit that can change; against real redis-server processes.
local helpers = require "spec.helpers"
local shares = require "spec.support.shares"
local core = require "redislock.core"

-- A process that waits (up to 10 s) for a permit of `name` (limit
-- `permits`), prints when it got it, and keeps it `hold` seconds.
local function waiting_holder(srv_url, name, permits, hold)
  return helpers.spawn(helpers.lua_cmd(([[
    local core = require "redislock.core"
    local c = assert(require("redislock").connect { url = %q })
    local sem = assert(c:semaphore(%q, %d))
    io.stdout:write("waiting\n") io.stdout:flush()
    local p = assert(sem:acquire { wait = 10, ttl = 20 })
    io.stdout:write(string.format("got %%.6f\n", core.monotime())) io.stdout:flush()
    core.sleep(%g)
    p:release()
  ]]):format(srv_url, name, permits, hold)))
end

describe("semaphores", function()
  local srv, raw, c, other
  local fresh = helpers.names("sem")

  local fx = helpers.redis_fixture { raw = true, clients = 2 }
  setup(function() srv, raw, c, other = fx.srv, fx.raw, fx.clients[1], fx.clients[2] end)

  it("grant at most `permits` at once", function()
    local sem = assert(c:semaphore(fresh(), 3))
    local ps = {}
    for i = 1, 3 do
      ps[i] = assert(sem:acquire())
      assert.equal(i, ps[i].in_use)
      assert.is_nil(ps[i].fence)
    end
    assert.equal("busy", select(3, sem:acquire()))
    assert.equal("timeout", select(3, assert(other:semaphore(sem.name, 3)):acquire { wait = 0.2 }))
    assert.same({ limit = 3, in_use = 3 }, helpers.pick(sem:inspect(), "limit", "in_use"))
    assert.is_true(ps[2]:release())
    assert.is_false(ps[2]:held())
    assert.equal("not held", select(3, ps[2]:release()))
    local again = assert(sem:acquire())
    assert.same({ limit = 3, in_use = 3 }, helpers.pick(sem:inspect(), "limit", "in_use"))
    for _, p in ipairs { ps[1], ps[3], again } do assert.is_true(p:release()) end
    assert.same({ limit = 3, in_use = 0 }, helpers.pick(sem:inspect(), "limit", "in_use"))
  end)

  it("keep all its keys in one slot", function()
    local name = fresh()
    local sem = assert(c:semaphore(name, 1))
    local p = assert(sem:acquire())
    assert.equal("timeout", select(3, sem:acquire { wait = 0.1 }))
    local keys = raw:command("KEYS", "*" .. name .. "*")
    assert.is_true(#keys >= 3)
    for _, k in ipairs(keys) do assert.equal(core.slot("{" .. name .. "}"), core.slot(k), k) end
    p:release()
  end)

  it("follow the latest limit: raising lets more in, lowering revokes none", function()
    local name = fresh()
    local sem = assert(c:semaphore(name, 2))
    local a, b = assert(sem:acquire()), assert(sem:acquire())
    assert.equal("busy", select(3, sem:acquire()))
    local wider = assert(other:semaphore(name, 3))     -- stored: in force for every client
    local d = assert(sem:acquire())
    assert.equal(3, d.in_use)
    assert.same({ limit = 3, in_use = 3 }, helpers.pick(wider:inspect(), "limit", "in_use"))
    local narrow = assert(other:semaphore(name, 1))
    assert.is_true(a:held() and b:held() and d:held())  -- none revoked
    assert.equal("busy", select(3, narrow:acquire()))
    assert.is_true(a:release())
    assert.is_true(b:release())
    assert.equal("busy", select(3, sem:acquire()))      -- 1 in use, limit 1
    assert.is_true(d:release())
    assert(sem:acquire()):release()
  end)

  it("give a crashed holder's permit back at its lease end", function()
    local name = fresh()
    local p = shares.holder(srv.url, ("s = assert(c:semaphore(%q, 1)) p = assert(s:acquire { ttl = 1 })")
      :format(name))
    local sem = assert(c:semaphore(name, 1))
    assert.equal("busy", select(3, sem:acquire()))
    p:kill("KILL")
    p:wait(5)
    local t0 = helpers.monotime()
    local mine = assert(sem:acquire { wait = 5 })
    assert(helpers.monotime() - t0 < 1.5)
    mine:release()
    p:stop()
  end)

  it("wake a waiter per released permit, never losing one", function()
    local name = fresh()
    local sem = assert(c:semaphore(name, 2))
    local a = assert(sem:acquire { ttl = 20 })
    local b = assert(sem:acquire { ttl = 20 })
    local procs = { waiting_holder(srv.url, name, 2, 3), waiting_holder(srv.url, name, 2, 3) }
    for _, p in ipairs(procs) do
      assert(helpers.wait_until(function() return p:stdout():find("waiting") end, 10))
    end
    assert(helpers.wait_until(function() return srv:blocked_clients() >= 2 end, 10),
      "the waiters did not both block")
    -- two releases back to back: two wakeups, both waiters get in at once
    local t_release = helpers.monotime()
    assert.is_true(a:release())
    assert.is_true(b:release())
    for i, p in ipairs(procs) do
      assert(helpers.wait_until(function() return p:stdout():find("got") end, 5), "waiter " .. i)
      local got = tonumber(p:stdout():match("got (%S+)"))
      assert(got - t_release < 0.5, "waiter " .. i .. " woke " .. (got - t_release) .. " s late")
    end
    for _, p in ipairs(procs) do
      assert.equal(0, p:wait(10), p:stderr())
      p:stop()
    end
  end)

  it("let only the holder release or extend a permit", function()
    local name = fresh()
    local sem = assert(c:semaphore(name, 1))
    local p = assert(sem:acquire { ttl = 5 })
    local key = "{" .. name .. "}:sem"
    local s = core.scripts
    assert.equal(0, raw:command("EVAL", s.release_share.source, 5, key, key .. ":waiting", key .. ":signal",
      key .. ":waiting", key .. ":signal", core.token(), "member", "one", "none"))
    assert.equal(0, raw:command("EVAL", s.zset_renew.source, 1, key, core.token(), 60000))
    assert.equal(1, sem:inspect().in_use)
    assert.is_true(p:extend(10))
    assert.is_true(p:release())
  end)

  it("keep long holds with the watchdog and report their loss", function()
    local name = fresh()
    local sem = assert(c:semaphore(name, 2))
    local lost
    local p = assert(sem:acquire { ttl = 0.3, on_lost = function(_, why) lost = why end })
    helpers.sleep(1.2)
    assert.is_true(p:held())
    assert.equal(1, sem:inspect().in_use)
    raw:command("ZREM", "{" .. name .. "}:sem", p.token)
    assert(helpers.wait_until(function() c:poll() return lost end, 3))
    assert.equal("not held", lost)
    assert.is_false(p:held())
  end)

  it("hold the bound across processes (6 x 100, 3 permits)", function()
    local holds = shares.torture(srv.url, "semaphore", fresh(), 6, 100, "0-3", 3)
    assert.equal(600, #holds)
    local most = shares.max_concurrent(holds)
    assert(most <= 3, most .. " permits at once")
    assert.equal(3, most)
  end)

  it("reject bad arguments by name", function()
    for _, bad in ipairs { 0, -1, 1.5, "3", 2 ^ 31, 0 / 0 } do
      assert.matches("bad argument 'permits' to 'semaphore'", select(2, pcall(c.semaphore, c, "s", bad)))
    end
    -- (no permits: the stored limit, none here: spec 47)
    assert.equal("absent", select(3, c:semaphore(fresh())))
    assert.matches("bad argument 'name' to 'semaphore'", select(2, pcall(c.semaphore, c, "", 1)))
    local sem = assert(c:semaphore(fresh(), 1))
    assert.matches("bad argument 'ttl' to 'acquire'", select(2, pcall(sem.acquire, sem, { ttl = "1" })))
    assert.matches("unknown option 'reentrant'", select(2, pcall(sem.acquire, sem, { reentrant = true })))
  end)
end)

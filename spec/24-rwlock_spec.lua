-- Read-write locks: many readers or one writer, writers not starved,
-- leases of their own per reader, fences for writers; against real
-- redis-server processes.
local helpers = require "spec.helpers"
local shares = require "spec.support.shares"
local core = require "redislock.core"

-- A process that waits (up to 10 s) for a read share of `name` and prints
-- when it got it, on the shared monotonic clock.
local function waiting_reader(srv_url, name)
  return helpers.spawn(helpers.lua_cmd(([[
    local c = assert(require("redislock").connect { url = %q })
    io.stdout:write("waiting\n") io.stdout:flush()
    local r = assert(c:rwlock(%q):read { wait = 10 })
    io.stdout:write(string.format("got %%.6f\n", require("redislock.core").monotime()))
    r:release()
  ]]):format(srv_url, name)))
end

describe("read-write locks", function()
  local srv, raw, c, other
  local fresh = helpers.names("rw")

  local fx = helpers.redis_fixture { raw = true, clients = 2 }
  setup(function() srv, raw, c, other = fx.srv, fx.raw, fx.clients[1], fx.clients[2] end)

  it("admit many readers, or one writer", function()
    local rw = c:rwlock(fresh())
    local rw2 = other:rwlock(rw.name)
    local r1 = assert(rw:read())
    local r2 = assert(rw2:read())
    assert.is_nil(r1.fence)
    assert.equal(2, rw:inspect().readers)
    assert.equal("busy", select(3, rw2:write()))
    assert.is_true(r1:release())
    assert.equal("busy", select(3, rw2:write()))
    assert.is_true(r2:release())
    local w = assert(rw2:write())
    assert.is_number(w.fence)
    assert.equal("busy", select(3, rw:read()))
    assert.equal("busy", select(3, rw:write()))
    assert.is_true(w:release())
    local w2 = assert(rw:write())
    assert.is_true(w2.fence > w.fence)
    assert.is_true(w2:release())
    assert.same({ readers = 0, writer = false, writer_waiting = false },
      helpers.pick(rw:inspect(), "readers", "writer", "writer_waiting"))
  end)

  it("keep apart from the mutex of the same name, in one slot", function()
    local name = fresh()
    local w = assert(c:rwlock(name):write())
    local m = assert(c:acquire(name))        -- a different lock
    local slot = core.slot("{" .. name .. "}")
    for _, k in ipairs(raw:command("KEYS", "*" .. name .. "*")) do
      assert.equal(slot, core.slot(k), k)
    end
    w:release()
    m:release()
  end)

  it("let a waiting writer in ahead of a stream of readers", function()
    local name = fresh()
    -- four processes keep overlapping read shares for 6 s: there is never
    -- a moment without a reader unless new readers wait
    local start_at = string.format("%.6f", core.monotime() + 0.3)
    local procs = {}
    for i = 1, 4 do
      procs[i] = helpers.spawn(helpers.lua_cmd("tools/share_worker.lua", srv.url, "reads", name, 40,
        start_at, "100-200"))
    end
    assert(helpers.wait_until(function() return c:rwlock(name):inspect().readers > 0 end, 10),
      "no reader got in")
    local t0 = helpers.monotime()
    local w, err = c:rwlock(name):write { wait = 5 }
    local waited = helpers.monotime() - t0
    assert(w, "writer starved: " .. tostring(err))
    assert(waited < 1, "the writer waited " .. waited .. " s")
    assert.equal(0, c:rwlock(name):inspect().readers)
    assert.is_true(w:release())
    for i, p in ipairs(procs) do
      assert.equal(0, p:wait(60), "reader " .. i .. ": " .. p:stderr())
      p:stop()
    end
  end)

  it("take a giving-up writer's marker back at once", function()
    local rw = c:rwlock(fresh())
    local r = assert(rw:read { ttl = 5 })
    assert.equal("timeout", select(3, other:rwlock(rw.name):write { wait = 0.2 }))
    assert.is_false(rw:inspect().writer_waiting)
    assert(rw:read()):release()
    r:release()
  end)

  it("wake every waiting reader when the writer releases", function()
    local name = fresh()
    local w = assert(c:rwlock(name):write { ttl = 20 })
    local procs = {}
    for i = 1, 3 do procs[i] = waiting_reader(srv.url, name) end
    for _, p in ipairs(procs) do
      assert(helpers.wait_until(function() return p:stdout():find("waiting") end, 10))
    end
    assert(helpers.wait_until(function() return srv:blocked_clients() >= 3 end, 10),
      "the readers did not all block on the signal list")
    local t_release = helpers.monotime()
    assert.is_true(w:release())
    for i, p in ipairs(procs) do
      assert.equal(0, p:wait(10), "reader " .. i .. ": " .. p:stderr())
      local got = tonumber(p:stdout():match("got (%S+)"))
      assert(got - t_release < 0.5, "reader " .. i .. " woke " .. (got - t_release) .. " s late")
      p:stop()
    end
  end)

  it("free a crashed reader's share, and a crashed writer's lock, at their lease end", function()
    local name = fresh()
    local p = shares.holder(srv.url, ("r = assert(c:rwlock(%q):read { ttl = 1 })"):format(name))
    local keep = assert(c:rwlock(name):read { ttl = 30 })
    p:kill("KILL")
    p:wait(5)
    assert.is_true(keep:release())
    local t0 = helpers.monotime()
    local w = assert(c:rwlock(name):write { wait = 5 })
    assert(helpers.monotime() - t0 < 1.5)
    assert.is_true(w:release())
    p:stop()

    p = shares.holder(srv.url, ("w = assert(c:rwlock(%q):write { ttl = 1 })"):format(name))
    p:kill("KILL")
    p:wait(5)
    t0 = helpers.monotime()
    local r = assert(c:rwlock(name):read { wait = 5 })
    assert(helpers.monotime() - t0 < 1.5)
    assert.is_true(r:release())
    p:stop()
  end)

  it("let only the owner release or extend a share", function()
    local name = fresh()
    local rw = c:rwlock(name)
    local r = assert(rw:read { ttl = 5 })
    local keys = "{" .. name .. "}:rw"
    local s = core.scripts
    -- another token: no release, no renewal
    assert.equal(0, raw:command("EVAL", s.release_share.source, 5, keys .. ":readers", "a", "b", "c", "d",
      core.token(), "member", "none", "none"))
    assert.equal(0, raw:command("EVAL", s.zset_renew.source, 1, keys .. ":readers", core.token(), 60000))
    assert.equal(1, rw:inspect().readers)
    assert.is_true(r:release())
    local w = assert(rw:write { ttl = 5 })
    assert.equal(0, raw:command("EVAL", s.release_share.source, 5, keys, "a", "b", "c", "d",
      core.token(), "key", "none", "none"))
    assert.equal(0, raw:command("EVAL", s.extend.source, 1, keys, core.token(), 60000))
    assert.is_true(rw:inspect().writer)
    assert.is_true(w:extend(10))
    assert.is_true(w:release())
    assert.equal("not held", select(3, w:release()))
    assert.equal("not held", select(3, r:release()))
  end)

  it("keep long holds with the watchdog and report their loss", function()
    local name = fresh()
    local lost = {}
    local rw = c:rwlock(name)
    local r = assert(rw:read { ttl = 0.3, on_lost = function(_, why) lost.r = why end })
    local r2 = assert(rw:read { ttl = 0.3 })
    helpers.sleep(1.2)
    assert.is_true(r:held())
    assert.equal(2, rw:inspect().readers)
    raw:command("ZREM", "{" .. name .. "}:rw:readers", r.token)
    assert(helpers.wait_until(function() c:poll() return lost.r end, 3))
    assert.equal("not held", lost.r)
    assert.is_true(r2:held())
    assert.is_true(r2:release())
    local w = assert(rw:write { ttl = 0.3, on_lost = function(_, why) lost.w = why end })
    helpers.sleep(1.2)
    assert.is_true(w:held())
    raw:command("DEL", "{" .. name .. "}:rw")
    assert(helpers.wait_until(function() c:poll() return lost.w end, 3))
    assert.equal("not held", lost.w)
  end)

  it("hold the rule across processes (6 x 100, readers and writers, a non-atomic counter)", function()
    local name = fresh()
    raw:command("DEL", "count:rw")
    local holds = shares.torture(srv.url, "rw", name, 6, 100, "0-3")
    assert.equal(600, #holds)
    local writes = 0
    for _, h in ipairs(holds) do if h[3] == "w" then writes = writes + 1 end end
    assert.is_true(writes > 0)
    assert.equal(tostring(writes), raw:command("GET", "count:rw"))
    assert.is_nil(shares.exclusive_overlap(holds))
    assert.is_true(shares.max_concurrent(holds, { r = true }) > 1, "readers never shared")
    -- writers' fences grow with their grants
    local ws = {}
    for _, h in ipairs(holds) do if h[3] == "w" then ws[#ws + 1] = h end end
    table.sort(ws, function(a, b) return a[1] < b[1] end)
    for i = 2, #ws do assert.is_true(ws[i][4] > ws[i - 1][4]) end
  end)

  it("reject bad arguments by name", function()
    assert.matches("bad argument 'name' to 'rwlock'", select(2, pcall(c.rwlock, c, "")))
    assert.matches("bad argument 'name' to 'rwlock'", select(2, pcall(c.rwlock, c, 42)))
    local rw = c:rwlock(fresh())
    assert.matches("bad argument 'ttl' to 'read'", select(2, pcall(rw.read, rw, { ttl = 0 })))
    assert.matches("bad argument 'wait' to 'write'", select(2, pcall(rw.write, rw, { wait = -1 })))
    assert.matches("unknown option 'fair'", select(2, pcall(rw.write, rw, { fair = true })))
    assert.matches("bad argument 'on_lost' to 'read'", select(2, pcall(rw.read, rw, { on_lost = 1 })))
  end)
end)

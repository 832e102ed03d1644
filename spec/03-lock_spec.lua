-- The lock primitives as a user sees them, against a real redis-server.
local helpers = require "spec.helpers"
local redislock = require "redislock"
local keys = require "redislock.keys"

describe("locks", function()
  local srv, a, b, admin

  local fx = helpers.redis_fixture { raw = true, clients = 2 }
  setup(function() srv, admin, a, b = fx.srv, fx.raw, fx.clients[1], fx.clients[2] end)

  local fresh = helpers.names("lock")

  it("two clients exclude each other", function()
    local name = fresh()
    local l1 = assert(a:acquire(name, { ttl = 5 }))
    local l2, err, kind = b:acquire(name, { ttl = 5 })
    assert.is_nil(l2)
    assert.equal("busy", kind)
    assert.matches("^busy: " .. name:gsub("%p", "%%%0") .. " held by [^ ]+:%d+ for %d+%.%d s$", err)
    assert.is_true(l1:release())
    local l3 = assert(b:acquire(name, { ttl = 5 }))
    assert.is_true(l3:held())
    assert.is_true(l3:release())
  end)

  it("stores the owner token in the key, with the ttl as its lease", function()
    local name = fresh()
    local l = assert(a:acquire(name, { ttl = 7 }))
    assert.equal(l.token, admin:command("GET", "{" .. name .. "}"))
    local pttl = admin:command("PTTL", "{" .. name .. "}")
    assert.is_true(pttl > 6000 and pttl <= 7000, "pttl " .. pttl)
    assert.matches("^%x+$", l.token)
    assert.is_true(#l.token >= 32)
    l:release()
  end)

  it("a non-owner cannot release or extend, and the key stays", function()
    local name = fresh()
    local l = assert(a:acquire(name, { ttl = 5 }))
    -- A forged handle: same name, another token.
    local forged = setmetatable({}, { __index = l })
    forged.token = "0123456789abcdef0123456789abcdef"
    forged._state = "held"
    local ok, err = forged:release()
    assert.is_nil(ok)
    assert.matches("^not held: ", err)
    ok, err = forged:extend(100)
    assert.is_nil(ok)
    assert.matches("^not held: ", err)
    assert.equal(l.token, admin:command("GET", "{" .. name .. "}"))
    assert.is_true(admin:command("PTTL", "{" .. name .. "}") <= 5000)
    assert.is_true(l:release())
  end)

  it("expiry lets another client in, and the late release is a no-op", function()
    local name = fresh()
    local l1 = assert(a:acquire(name, { ttl = 0.2, watchdog = false }))
    helpers.sleep(0.3)
    assert.is_false(l1:held())
    local l2 = assert(b:acquire(name, { ttl = 5 }))
    local ok, err = l1:release()
    assert.is_nil(ok)
    assert.matches("^not held: ", err)
    ok, err = l1:extend(5)
    assert.is_nil(ok)
    assert.matches("^not held: ", err)
    assert.equal(l2.token, admin:command("GET", "{" .. name .. "}"))
    assert.is_true(l2:release())
  end)

  it("extend after expiry never resurrects the key", function()
    local name = fresh()
    local l = assert(a:acquire(name, { ttl = 0.1, watchdog = false }))
    helpers.sleep(0.2)
    local ok, err = l:extend(10)
    assert.is_nil(ok)
    assert.matches("^not held: ", err)
    assert.equal(0, admin:command("EXISTS", "{" .. name .. "}"))
  end)

  it("extend keeps the lock past its first ttl", function()
    local name = fresh()
    local l = assert(a:acquire(name, { ttl = 0.3, watchdog = false }))
    for _ = 1, 4 do
      helpers.sleep(0.15)
      assert.is_true(l:extend())
    end
    -- 0.6 s after a 0.3 s lease: still ours.
    assert.is_true(l:held())
    assert.equal("busy", select(3, b:acquire(name)))
    assert.is_true(l:extend(2))
    assert.is_true(admin:command("PTTL", "{" .. name .. "}") > 1500)
    assert.is_true(l:release())
  end)

  it("the fence grows with every grant of a name, across clients", function()
    local name = fresh()
    local last = 0
    for i = 1, 6 do
      local c = (i % 2 == 0) and a or b
      local l = assert(c:acquire(name, { ttl = 5 }))
      assert.is_true(math.type == nil or math.type(l.fence) == "integer")
      assert.is_true(l.fence > last, "fence " .. l.fence .. " after " .. last)
      last = l.fence
      l:release()
    end
    -- A counter ahead of the clock grows by exactly one per grant.
    local ahead = last + 1e9
    admin:command("SET", "{" .. name .. "}:fence", string.format("%.0f", ahead))
    local l = assert(a:acquire(name, { ttl = 5 }))
    assert.equal(ahead + 1, l.fence)
    l:release()
  end)

  -- Fences are at least the server clock in microseconds: 16 digits. Lua
  -- 5.1 and LuaJIT turn such a number into "1.7953298305222e+15" (14
  -- digits) by default, which would make neighbouring fences equal.
  it("fenced writes compare every digit of a 16-digit fence, on every Lua", function()
    local name = fresh()
    local l0 = assert(a:acquire(name, { ttl = 5 }))
    l0:release()
    -- a counter ahead of the clock: the next two fences are neighbours
    admin:command("SET", "{" .. name .. "}:fence", string.format("%.0f", l0.fence + 1e9))
    local l1 = assert(a:acquire(name, { ttl = 5 }))
    l1:release()
    local l2 = assert(b:acquire(name, { ttl = 5 }))
    l2:release()
    assert.is_true(l1.fence > 1e15, "fence " .. string.format("%.0f", l1.fence))
    assert.equal(l1.fence + 1, l2.fence)
    local res = "res:" .. name
    assert.equal(1, b:fenced_set(res, "new", l2.fence))
    assert.same({ nil, "stale", "stale" }, { a:fenced_set(res, "old", l1.fence) })
    assert.same({ nil, "stale", "stale" }, { a:fenced_get(res, l1.fence) })
    assert.equal("new", a:fenced_get(res, l2.fence))
    assert.equal(string.format("%.0f", l2.fence), admin:command("HGET", "{" .. res .. "}:resource", "fence"))
    -- the same goes for any number a command is given
    assert(admin:command("SET", "n:" .. name, l2.fence))
    assert.equal(string.format("%.0f", l2.fence), admin:command("GET", "n:" .. name))
    -- and the others with the fewest digits that read back the same
    for _, x in ipairs({ 0.1, 1.1, -2.5, 1 / 3, 1e-7 }) do
      assert(admin:command("SET", "f:" .. name, x))
      local got = admin:command("GET", "f:" .. name)
      assert.equal(x, tonumber(got))
    end
    assert(admin:command("SET", "f:" .. name, 0.1))
    assert.equal("0.1", admin:command("GET", "f:" .. name))
  end)

  it("a fence counter that Redis lost starts above every fence handed out", function()
    local name = fresh()
    local l = assert(a:acquire(name, { ttl = 5 }))
    l:release()
    -- what a restart without persistence does to the counter
    admin:command("DEL", "{" .. name .. "}:fence")
    local l2 = assert(b:acquire(name, { ttl = 5 }))
    assert.is_true(l2.fence > l.fence, l2.fence .. " after " .. l.fence)
    -- and the fence still fits a double exactly (Lua 5.1, JSON)
    assert.is_true(l2.fence < 2 ^ 53)
    l2:release()
  end)

  it("waits until another process releases", function()
    local name = fresh()
    local holder = helpers.spawn(helpers.lua_cmd(string.format([[
      local redislock = require "redislock"
      local c = assert(redislock.connect { url = %q })
      local l = assert(c:acquire(%q, { ttl = 10 }))
      print("held") io.stdout:flush()
      require("redislock.core").sleep(0.5)
      assert(l:release())
    ]], srv.url, name)))
    assert.truthy(helpers.wait_until(function()
      return (holder:stdout() or ""):find("held")
    end, 5))
    local t0 = helpers.monotime()
    local busy, _, kind = a:acquire(name, { ttl = 5 })
    assert.is_nil(busy)
    assert.equal("busy", kind)
    local l = assert(a:acquire(name, { ttl = 5, wait = 5 }))
    local waited = helpers.monotime() - t0
    assert.is_true(waited < 4, "waited " .. waited)
    assert.equal(0, holder:wait(5))
    l:release()
  end)

  it("times out when the holder keeps it, honouring the deadline", function()
    local name = fresh()
    local l = assert(a:acquire(name, { ttl = 10 }))
    local t0 = helpers.monotime()
    local got, err = b:acquire(name, { wait = 0.4 })
    local waited = helpers.monotime() - t0
    assert.is_nil(got)
    assert.matches("^timeout: ", err)
    assert.is_true(waited >= 0.4 and waited < 0.7, "waited " .. waited)
    l:release()
  end)

  it("a waiter gets a lock whose holder died at the lease end", function()
    local name = fresh()
    -- a holder that stopped renewing (as if it died) and never released
    assert(a:acquire(name, { ttl = 0.3, watchdog = false }))
    local t0 = helpers.monotime()
    local l = assert(b:acquire(name, { ttl = 5, wait = 3 }))
    local waited = helpers.monotime() - t0
    assert.is_true(waited < 0.6, "waited " .. waited)
    l:release()
  end)

  it("with_lock releases after fn returns, passing its results", function()
    local name = fresh()
    local seen
    local ok, x, y, z = a:with_lock(name, { ttl = 5 }, function(lock, p, q)
      seen = lock
      assert.is_true(lock:held())
      assert.equal("busy", select(3, b:acquire(name)))
      return p + q, nil, "z"
    end, 2, 3)
    assert.is_true(ok)
    assert.equal(5, x)
    assert.is_nil(y)
    assert.equal("z", z)
    assert.is_false(seen:held())
    assert.equal(0, admin:command("EXISTS", "{" .. name .. "}"))
  end)

  it("with_lock releases after fn raises, and re-raises the same error", function()
    local name = fresh()
    local boom = { code = 42 }
    local ok, e = pcall(a.with_lock, a, name, { ttl = 5 }, function() error(boom) end)
    assert.is_false(ok)
    assert.equal(boom, e)
    ok, e = pcall(a.with_lock, a, name, nil, function() error("plain", 0) end)
    assert.is_false(ok)
    assert.equal("plain", e)
    assert.equal(0, admin:command("EXISTS", "{" .. name .. "}"))
  end)

  it("with_lock re-raises fn's error even when fn closed the client", function()
    local c = assert(redislock.connect { url = srv.url })
    local mine = {}
    local ok, e = pcall(c.with_lock, c, fresh(), nil, function() c:close() error(mine) end)
    assert.is_false(ok)
    assert.equal(mine, e)
  end)

  it("with_lock returns nil, err when the lock is busy, without calling fn", function()
    local name = fresh()
    local l = assert(b:acquire(name, { ttl = 5 }))
    local called = false
    local ok, _, kind = a:with_lock(name, nil, function() called = true end)
    assert.is_nil(ok)
    assert.equal("busy", kind)
    assert.is_false(called)
    l:release()
  end)

  if _VERSION == "Lua 5.4" then
    it("a <close> variable releases at the end of its scope", function()
      local name = fresh()
      local chunk = assert(load([[
        local a, name = ...
        local l <close> = assert(a:acquire(name, { ttl = 5 }))
        return l
      ]]))
      local l = chunk(a, name)
      assert.is_false(l:held())
      assert.equal(0, admin:command("EXISTS", "{" .. name .. "}"))
      -- and on an error path too
      local ok = pcall(assert(load([[
        local a, name = ...
        local l <close> = assert(a:acquire(name, { ttl = 5 }))
        error("inside")
      ]])), a, name)
      assert.is_false(ok)
      assert.equal(0, admin:command("EXISTS", "{" .. name .. "}"))
    end)
  end

  it("survives SCRIPT FLUSH between acquire and release/extend (NOSCRIPT)", function()
    local name = fresh()
    local l = assert(a:acquire(name, { ttl = 5 }))
    assert.equal("OK", admin:command("SCRIPT", "FLUSH"))
    assert.is_true(l:extend(6))
    assert.equal("OK", admin:command("SCRIPT", "FLUSH"))
    assert.is_true(l:release())
    assert.equal("OK", admin:command("SCRIPT", "FLUSH"))
    local l2 = assert(a:acquire(name, { ttl = 5 }))
    assert.is_true(l2.fence > l.fence)
    -- ran exactly once: one grant, one fence step
    assert.equal(l2.fence, tonumber(admin:command("GET", "{" .. name .. "}:fence")))
    l2:release()
  end)

  it("stores binary, spaced, formatted, tagged and huge names byte-exact", function()
    local names = {
      "nul\0in\0the middle", "crlf\r\nSET x y\r\n", "with spaces in it", "%s%s%n%d",
      "{tag}inside", "x') redis.call('flushall')--", string.rep("\255\0ab", 262144),
    }
    admin:command("SET", "canary", "alive")
    for _, name in ipairs(names) do
      -- braces inside a name are escaped, so that the whole name is the
      -- hash tag (one Cluster slot for all of its keys)
      local key = "{" .. keys.tag(name) .. "}"
      local l = assert(a:acquire(name, { ttl = 5 }))
      assert.equal(l.token, admin:command("GET", key))
      assert.equal("busy", select(3, b:acquire(name)))
      assert.is_true(l:release())
      assert.equal(0, admin:command("EXISTS", key))
    end
    assert.equal("alive", admin:command("GET", "canary"))
  end)

  it("a prefix namespaces the keys", function()
    local p = assert(redislock.connect { url = srv.url, prefix = "app:" })
    local name = fresh()
    local l = assert(p:acquire(name, { ttl = 5 }))
    assert.equal(l.token, admin:command("GET", "app:{" .. name .. "}"))
    -- the same name without the prefix is another lock
    local other = assert(a:acquire(name, { ttl = 5 }))
    other:release()
    l:release()
    p:close()
  end)

  it("a prefix with braces is stored as given on one Redis", function()
    -- (under Cluster one kind is refused: 18-cluster_spec.lua)
    for _, prefix in ipairs { "a{}:", "{app}:", "a{", "}{", "{}" } do
      local p = assert(redislock.connect { url = srv.url, prefix = prefix })
      local name = fresh()
      local l = assert(p:acquire(name, { ttl = 5 }))
      assert.equal(l.token, admin:command("GET", prefix .. "{" .. name .. "}"), prefix)
      assert.is_true(l:extend(5))
      assert.is_true(l:release())
      assert.equal(0, admin:command("EXISTS", prefix .. "{" .. name .. "}"))
      p:close()
    end
  end)

  it("never shows the token in tostring", function()
    local l = assert(a:acquire(fresh(), { ttl = 5 }))
    assert.is_nil(tostring(l):find(l.token, 1, true))
    l:release()
    assert.matches("released", tostring(l))
  end)
end)

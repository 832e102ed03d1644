-- Taking a name this client already holds (issue 32, point 3). A lock
-- that is not reentrant, taken again by the client that holds it, would
-- wait for itself: with wait = 0.5 it times out after 0.5 s, with
-- math.huge it never returns. It is answered at once instead: nil, "busy:
-- NAME already held by this client", "busy"; the lock held is untouched.
local helpers = require "spec.helpers"
local core = require "redislock.core"

local monotime = core.monotime

describe("acquiring a name this client already holds", function()
  local raw, c, other
  local fresh = helpers.names("self")

  local fx = helpers.redis_fixture { raw = true, clients = 2 }
  setup(function() raw, c, other = fx.raw, fx.clients[1], fx.clients[2] end)

  -- The call answers busy, naming the lock, within `within` seconds.
  local function refused_at_once(name, call, within)
    local t0 = monotime()
    local v, err, kind = call()
    local took = monotime() - t0
    assert.is_nil(v)
    assert.equal("busy", kind)
    assert.equal("busy: " .. name .. " already held by this client", err)
    assert.is_true(took < (within or 0.05), string.format("took %.3f s", took))
  end

  it("answers at once, without waiting out `wait`", function()
    local name = fresh()
    local held = assert(c:acquire(name, { ttl = 5 }))
    refused_at_once(name, function() return c:acquire(name, { wait = 0.5 }) end)
    refused_at_once(name, function() return c:acquire(name) end)
    assert.is_true(held:held())
    assert.equal(held.token, raw:command("GET", "{" .. name .. "}"))
    assert.is_true(held:release())
    -- free again: taken as usual
    assert(c:acquire(name)):release()
  end)

  it("never deadlocks with wait = math.huge, fair or not, with or without notify", function()
    local name = fresh()
    local held = assert(c:acquire(name, { ttl = 5 }))
    refused_at_once(name, function() return c:acquire(name, { wait = math.huge }) end)
    refused_at_once(name, function() return c:acquire(name, { wait = math.huge, fair = true }) end)
    refused_at_once(name, function() return c:acquire(name, { wait = math.huge, notify = false }) end)
    refused_at_once(name, function() return c:with_lock(name, { wait = math.huge }, function() end) end)
    assert.is_true(held:release())
  end)

  it("a nested with_lock of the same name is refused, and the outer one goes on", function()
    local name = fresh()
    local inner
    assert.same({ true, "outer" }, { c:with_lock(name, { wait = 1 }, function()
      inner = { c:with_lock(name, { wait = 1 }, function() return "inner" end) }
      return "outer"
    end) })
    assert.same({ nil, "busy: " .. name .. " already held by this client", "busy" },
      { inner[1], inner[2], inner[3] })
  end)

  it("covers reentrant holds: a plain acquire of a name held reentrantly, and the reverse", function()
    local name = fresh()
    local r = assert(c:acquire(name, { reentrant = true }))
    refused_at_once(name, function() return c:acquire(name, { wait = math.huge }) end)
    -- the same owner enters again, as reentrant locks do
    local r2 = assert(c:acquire(name, { reentrant = true, wait = math.huge }))
    assert.is_true(r2:release())
    -- another owner in this same client would wait for itself too
    refused_at_once(name, function()
      return c:acquire(name, { reentrant = true, owner = core.token(), wait = math.huge })
    end)
    assert.is_true(r:release())
    local p = assert(c:acquire(name))
    refused_at_once(name, function() return c:acquire(name, { reentrant = true, wait = math.huge }) end)
    assert.is_true(p:release())
  end)

  it("waits as before for a lock this client held but lost, and for another client's", function()
    local name = fresh()
    local held = assert(c:acquire(name, { ttl = 0.2, watchdog = false }))
    helpers.sleep(0.25)
    assert.is_false(held:held())
    local again = assert(c:acquire(name, { wait = 1 }))
    assert.is_true(again:release())
    -- another client's lock is waited for (a timeout, naming no self-hold)
    local theirs = assert(other:acquire(name, { ttl = 5 }))
    local v, _, kind = c:acquire(name, { wait = 0.2 })
    assert.is_nil(v)
    assert.equal("timeout", kind)
    assert.is_true(theirs:release())
  end)

  it("takes a free name even while an old hold of it is not yet seen lost", function()
    local name = fresh()
    local old = assert(c:acquire(name, { ttl = 5 }))
    raw:command("DEL", "{" .. name .. "}")      -- the watchdog has not looked yet
    local new = assert(c:acquire(name, { wait = 0.5 }))
    assert.equal(new.token, raw:command("GET", "{" .. name .. "}"))
    assert.is_true(new:release())
    assert.equal("not held", select(3, old:release()))
  end)

  it("counts the refusal as busy in stats", function()
    local name = fresh()
    local held = assert(c:acquire(name))
    local busy0 = c:stats().busy
    assert.is_nil((c:acquire(name, { wait = 1 })))
    assert.equal(busy0 + 1, c:stats().busy)
    assert.is_true(held:release())
  end)
end)

describe("acquiring a name this Redlock client already holds", function()
  local servers, c = {}, nil
  setup(function()
    local urls = {}
    for i = 1, 3 do
      servers[i] = helpers.start_redis()
      urls[i] = servers[i].url
    end
    c = assert(require("redislock").connect { redlock = urls })
  end)
  teardown(function()
    if c then c:close() end
    for _, s in ipairs(servers) do s:stop() end
  end)

  it("answers busy at once too", function()
    local held = assert(c:acquire("rl-self", { ttl = 5 }))
    local t0 = monotime()
    local v, err, kind = c:acquire("rl-self", { wait = 0.5 })
    assert.is_nil(v)
    assert.equal("busy", kind)
    assert.equal("busy: rl-self already held by this client", err)
    assert.is_true(monotime() - t0 < 0.1)
    assert.is_true(held:release())
  end)
end)

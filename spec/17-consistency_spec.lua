-- One rule for the whole API: argument errors name the argument and point
-- at the caller's line, a closed client raises for every method, loss
-- reasons are the documented ones, callables are accepted wherever a
-- function is, and the docs' examples run as written.
local helpers = require "spec.helpers"
local docs = require "spec.support.docs"
local redislock = require "redislock"

local THIS = "17%-consistency_spec%.lua:%d+:"
local REASONS = {
  ["not held"] = true, unreachable = true, expired = true, max_hold = true,
  forked = true, stopped = true,
}

describe("consistency", function()
  local srv, c

  local fx = helpers.redis_fixture { clients = 1 }
  setup(function() srv, c = fx.srv, fx.clients[1] end)

  local fresh = helpers.names("api")

  -- pcall(f, ...) must fail with a message that names `arg` and this file.
  -- (The calls below are not tail calls: a tail call leaves no frame of
  -- the caller for an error to point at.)
  local function raises_naming(argname, f, ...)
    local ok, err = pcall(f, ...)
    assert.is_false(ok, "did not raise")
    assert.matches("bad argument '" .. argname .. "'", err)
    assert.matches(THIS, err)
  end

  it("every argument error names its argument", function()
    raises_naming("value", function() local r = c:fenced_set("r", 0 / 0, 1) return r end)
    raises_naming("value", function() local r = c:fenced_set("r", math.huge, 1) return r end)
    raises_naming("fence", function() local r = c:fenced_set("r", "v", 0 / 0) return r end)
    raises_naming("resource", function() local r = c:fenced_get("", 1) return r end)
    raises_naming("path", function() local r = redislock.connect { path = "" } return r end)
    raises_naming("host", function() local r = redislock.connect { host = "" } return r end)
    raises_naming("token", function() local r = c:release_token("n", "") return r end)
    raises_naming("token", function() local r = c:release_token("n", 42) return r end)
    raises_naming("on_lost", function() local r = c:acquire("n", { on_lost = 42 }) return r end)
  end)

  it("a closed client raises for every method, at the caller's line", function()
    local d = assert(redislock.connect { url = srv.url })
    d:close()
    local calls = {
      poll = function() local r = d:poll() return r end,
      stats = function() local r = d:stats() return r end,
      fd = function() local r = d:fd() return r end,
      warnings = function() local r = d:warnings() return r end,
      acquire = function() local r = d:acquire("x") return r end,
      with_lock = function() local r = d:with_lock("x", nil, function() end) return r end,
      inspect = function() local r = d:inspect("x") return r end,
      fenced_set = function() local r = d:fenced_set("x", "v", 1) return r end,
      fenced_get = function() local r = d:fenced_get("x", 1) return r end,
      release_token = function() local r = d:release_token("x", "t") return r end,
      break_lock = function() local r = d:break_lock("x") return r end,
    }
    for name, f in pairs(calls) do
      local ok, err = pcall(f)
      assert.is_false(ok, name .. " did not raise")
      assert.matches("closed client", err, nil, nil, name)
      assert.matches(THIS, err, nil, nil, name)
    end
    assert.is_true(d:close())   -- closing again is quiet
  end)

  it("a lock whose release failed reports a documented reason", function()
    local own = helpers.start_redis()
    local d = assert(redislock.connect { url = own.url, timeout = 0.5 })
    local l = assert(d:acquire(fresh(), { ttl = 5 }))
    own:kill("KILL")
    assert(helpers.wait_until(function() return not own:alive() end, 5))
    local ok, err = l:release()
    assert.is_nil(ok)
    assert.matches("^connection", err)
    assert.is_false(l:held())
    assert.is_true(REASONS[l.lost_reason] ~= nil, "lost_reason " .. tostring(l.lost_reason))
    d:close()
    own:stop()
  end)

  it("a release that finds the lock gone reports 'not held' as the reason", function()
    local name = fresh()
    local l = assert(c:acquire(name, { ttl = 5, watchdog = false }))
    assert(srv:cli_raw("DEL", "{" .. name .. "}"))
    assert.same({ nil, "not held: " .. name, "not held" }, { l:release() })
    assert.equal("not held", l.lost_reason)
  end)

  it("on_lost accepts a callable table, and its errors keep their traceback", function()
    local name = fresh()
    local seen
    local handler = setmetatable({}, { __call = function(_, lock, why) seen = { lock, why } end })
    local l = assert(c:acquire(name, { ttl = 0.3, on_lost = handler }))
    srv:cli_raw("DEL", "{" .. name .. "}")
    assert(helpers.wait_until(function() c:poll() return seen end, 3, 0.01))
    assert.equal(l, seen[1])
    assert.equal("not held", seen[2])

    local boom = fresh()
    assert(c:acquire(boom, { ttl = 0.3, on_lost = function() error("callback blew up") end }))
    srv:cli_raw("DEL", "{" .. boom .. "}")
    assert(helpers.wait_until(function() c:poll() return c.callback_error end, 3, 0.01))
    assert.matches("callback blew up", c.callback_error)
    assert.matches("stack traceback", c.callback_error)
  end)

  it("docs/safety.md's fenced-write example runs as written, on a resource never written", function()
    local section = docs.section("safety.md", "Fenced writes")
    local code = assert(section:match("```lua\n(.-)```"))
    local env = setmetatable({ client = c }, { __index = _G })
    local chunk
    if setfenv then
      chunk = assert(loadstring(code))
      setfenv(chunk, env)
    else
      chunk = assert(load(code, "docs/safety.md fenced example", "t", env))
    end
    local name = "account:7"
    assert.equal(0, tonumber((srv:cli_raw("EXISTS", "{" .. name .. "}:resource"))))
    chunk()   -- first use: never written
    chunk()   -- and again, on what the first run wrote
    assert.equal("20", c:fenced_get(name, 2 ^ 52))
  end)

  it("with_lock accepts a callable table", function()
    local fn = setmetatable({}, { __call = function(_, lock, x) return lock.name, x end })
    local name = fresh()
    assert.same({ true, name, 7 }, { c:with_lock(name, { ttl = 5 }, fn, 7) })
  end)
end)

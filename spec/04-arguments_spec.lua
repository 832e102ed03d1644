-- A table-driven sweep of bad values through every argument of every public
-- function: each call raises an error naming the argument, or returns
-- nil, err; nothing crashes the host, and only the documented values work.
local helpers = require "spec.helpers"
local redislock = require "redislock"
local core = require "redislock.core"
local url = require "redislock.url"

local unpack = table.unpack or unpack -- luacheck: ignore 143
local function pack(...) return { n = select("#", ...), ... } end

-- Every kind of value a caller can pass by mistake.
local POOL = {
  { "nil", nil }, { "NaN", 0 / 0 }, { "inf", math.huge }, { "-inf", -math.huge },
  { "negative", -1 }, { "zero", 0 }, { "fraction", 0.5 }, { "one", 1 },
  { "huge", 1e308 }, { "2^63", 2 ^ 63 }, { "empty string", "" },
  { "numeric string", "1" }, { "string", "abc" }, { "NUL string", "a\0b" },
  { "table", {} }, { "function", function() end }, { "true", true }, { "false", false },
  { "coroutine", coroutine.create(print) }, { "userdata", io.stdout },
}

-- Runs f and classifies what happened.
local function outcome(f, ...)
  local res = pack(pcall(f, ...))
  if not res[1] then return "raised", res[2] end
  if res[2] == nil then return "failed", res[3] end
  return "ok", res[2]
end

local function set(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

describe("argument sweep", function()
  local srv, client
  local fresh = helpers.names("sweep")

  local fx = helpers.redis_fixture { clients = 1 }
  setup(function() srv, client = fx.srv, fx.clients[1] end)

  -- Each case: the function under test as call(value), which values must
  -- work, and whether the rest must raise (pure argument checks) or may also
  -- fail as a world error (values that are well-formed but lead nowhere).
  local CASES = {
    { "acquire", "name", function(v) return client:acquire(v, { ttl = 5 }) end,
      ok = { "numeric string", "string", "NUL string" } },
    { "acquire", "opts", function(v) return client:acquire(fresh(), v) end,
      ok = { "nil", "table" } },
    { "acquire", "ttl", function(v) return client:acquire(fresh(), { ttl = v }) end,
      ok = { "nil", "fraction", "one" } },
    { "acquire", "wait", function(v) return client:acquire(fresh(), { wait = v }) end,
      ok = { "nil", "zero", "fraction", "one", "inf" } },
    { "acquire", "watchdog", function(v) return client:acquire(fresh(), { watchdog = v }) end,
      ok = { "nil", "true", "false" } },
    { "acquire", "on_lost", function(v) return client:acquire(fresh(), { on_lost = v }) end,
      ok = { "nil", "function" } },
    { "acquire", "notify", function(v) return client:acquire(fresh(), { notify = v }) end,
      ok = { "nil", "true", "false" } },
    { "acquire", "fair", function(v) return client:acquire(fresh(), { fair = v }) end,
      ok = { "nil", "true", "false" } },
    { "acquire", "spin", function(v) return client:acquire(fresh(), { spin = v }) end,
      ok = { "nil", "zero", "fraction", "one" } },
    { "extend", "ttl", function(v)
        local l = assert(client:acquire(fresh(), { ttl = 5 }))
        return l:extend(v)
      end, ok = { "nil", "fraction", "one" } },
    { "with_lock", "name", function(v) return client:with_lock(v, nil, function() end) end,
      ok = { "numeric string", "string", "NUL string" } },
    { "with_lock", "opts", function(v) return client:with_lock(fresh(), v, function() end) end,
      ok = { "nil", "table" } },
    { "with_lock", "fn", function(v) return client:with_lock(fresh(), nil, v) end,
      ok = { "function" } },
    { "connect", "opts", function(v) return redislock.connect(v) end,
      ok = {}, world = { "table" } },
    { "connect", "url", function(v) return redislock.connect { url = v } end,
      ok = {}, world = { "nil" } },
    { "connect", "host", function(v) return redislock.connect { host = v, port = srv.port } end,
      ok = { "nil" }, world = { "empty string", "numeric string", "string", "NUL string" } },
    { "connect", "port", function(v) return redislock.connect { port = v } end,
      ok = {}, world = { "nil", "one" } },
    { "connect", "path", function(v) return redislock.connect { path = v } end,
      ok = {}, world = { "nil", "empty string", "numeric string", "string", "NUL string" } },
    { "connect", "db", function(v) return redislock.connect { port = srv.port, db = v } end,
      ok = { "nil", "zero", "one" } },
    { "connect", "password", function(v) return redislock.connect { port = srv.port, password = v } end,
      ok = { "nil" }, world = { "empty string", "numeric string", "string", "NUL string" } },
    { "connect", "username", function(v)
        return redislock.connect { port = srv.port, username = v, password = "x" }
      end, ok = {}, world = { "nil", "empty string", "numeric string", "string", "NUL string" } },
    { "connect", "timeout", function(v) return redislock.connect { port = srv.port, timeout = v } end,
      ok = { "nil", "zero", "fraction", "one" } },
    { "connect", "connect_timeout", function(v)
        return redislock.connect { port = srv.port, connect_timeout = v }
      end, ok = { "nil", "fraction", "one" } },
    { "connect", "transport", function(v) return redislock.connect { port = srv.port, transport = v } end,
      ok = { "nil" } },
    { "connect", "prefix", function(v) return redislock.connect { port = srv.port, prefix = v } end,
      ok = { "nil", "empty string", "numeric string", "string", "NUL string" } },
  }

  for _, case in ipairs(CASES) do
    local fname, argname, call = case[1], case[2], case[3]
    local ok_set, world_set = set(case.ok), set(case.world or {})
    it(fname .. ": " .. argname, function()
      for _, entry in ipairs(POOL) do
        local label, value = entry[1], entry[2]
        local kind, detail = outcome(call, value)
        local where = fname .. "(" .. argname .. " = " .. label .. "): "
        if ok_set[label] then
          assert(kind == "ok", where .. "expected success, got " .. kind .. " " .. tostring(detail))
        elseif world_set[label] then
          assert(kind ~= "ok", where .. "unexpectedly succeeded")
          assert.equal("string", type(detail), where)
        else
          assert(kind == "raised", where .. "expected an error, got " .. kind .. " " .. tostring(detail))
          assert.equal("string", type(detail), where)
          -- The message names the argument (or, for a non-table opts, the table).
          assert(detail:find(argname, 1, true) or detail:find("url", 1, true),
            where .. "message does not name the argument: " .. detail)
        end
        if kind == "ok" and type(detail) == "table" and detail.release then detail:release() end
        if kind == "ok" and type(detail) == "table" and detail.close then detail:close() end
      end
    end)
  end

  it("bad urls raise without echoing the password", function()
    local bad = {
      "", "redis:/x", "http://127.0.0.1", "redis://", "redis://:secretpw@",
      "redis://h:0", "redis://h:99999", "redis://h:port", "redis://h/db",
      "redis://h/-1", "redis://user@h", "redis://h?x=1", "unix://relative.sock",
      "unix:///tmp/s?db=x", "unix:///tmp/s?foo=1", "rediss://:secretpw@", "rediss://:secretpw@h:0",
      "rediss+unix:///tmp/s", "rediss://:secretpw@h?x=1",
    }
    for _, u in ipairs(bad) do
      local kind, msg = outcome(redislock.connect, { url = u })
      assert(kind == "raised", u .. " gave " .. kind)
      assert.is_nil(msg:find("secretpw", 1, true))
    end
    -- (TLS itself: spec/30-tls_spec.lua; a build without it says so)
    if not require("redislock.core").tls then
      assert.matches("build with TLS", select(2, outcome(redislock.connect, { url = "rediss://127.0.0.1:1" })))
    end
  end)

  it("parses the documented url forms", function()
    assert.same({ host = "h", port = 7000, db = 3 }, url.parse("redis://h:7000/3"))
    assert.same({ host = "::1", port = 6380 }, url.parse("redis://[::1]:6380"))
    assert.same({ host = "h", password = "p@ss:w" }, url.parse("redis://:p%40ss%3Aw@h"))
    assert.same({ host = "h", username = "u", password = "p" }, url.parse("redis://u:p@h/"))
    assert.same({ path = "/tmp/r.sock", db = 2 }, url.parse("unix:///tmp/r.sock?db=2"))
    -- a raw "@" in a password stays in the password, not in the host
    assert.same({ host = "h", username = "app", password = "s3cr@t", db = 1 },
      url.parse("redis://app:s3cr@t@h/1"))
    assert.same({ path = "/s", username = "u", password = "p@ss" }, url.parse("unix://u:p@ss@/s"))
    assert.same({ path = "/tmp/r.sock", username = "u", password = "p" },
      url.parse("unix://u:p@/tmp/r.sock"))
  end)

  it("with_lock names itself, not acquire, in option errors", function()
    for _, opts in ipairs({ { ttl = -1 }, { wait = "x" }, { spin = 2 }, { bogus = true } }) do
      local ok, err = pcall(function()
        local r = client:with_lock(fresh(), opts, function() end) -- not a tail call: keeps this line
        return r
      end)
      assert.is_false(ok)
      assert.matches("to 'with_lock'", err, 1, true)
      assert.matches("04%-arguments_spec", err) -- raised at the caller's line
    end
  end)

  it("options with defaults behind __index are read and combined as given", function()
    local defaults = { ttl = 7, fair = true, reentrant = true }
    local ok, err = pcall(client.acquire, client, fresh(), setmetatable({}, { __index = defaults }))
    assert.is_false(ok)
    assert.matches("a reentrant lock cannot be fair", err, 1, true)
    local lock = assert(client:acquire(fresh(), setmetatable({}, { __index = { ttl = 7 } })))
    assert.equal(7, lock.ttl)
    assert.is_true(lock:release())
    -- and checked like the table's own: nothing is taken with a bad one
    for _, bad in ipairs({ { ttl = 0.01 }, { wait = -1 }, { max_hold = -1e9 }, { replicas = "1" }, { spin = 2 } }) do
      local name = fresh()
      local k = next(bad)
      local ok2, err2 = pcall(client.acquire, client, name, setmetatable({}, { __index = bad }))
      assert.is_false(ok2, k)
      assert.matches("bad argument '" .. k .. "' to 'acquire'", err2, 1, true)
      assert.is_false(client:inspect(name).held, k)
    end
  end)

  it("a metamethod called by hand with a foreign value touches nothing", function()
    local rec = client._metrics.rec
    for _, ud in ipairs({ io.stdout, client._conn, rec }) do
      local mt = getmetatable(ud)
      if mt.__gc and ud ~= io.stdout then
        pcall(mt.__gc, io.stdout)
      end
    end
    assert.is_true(io.stdout:write("") == io.stdout)   -- the FILE is intact
    assert(client:acquire(fresh(), { ttl = 1 })):release()
  end)

  it("the C core checks its own arguments", function()
    local conn = assert(core.connect { port = srv.port })
    local calls = {
      function() return core.connect() end,
      function() return core.connect { port = "x" } end,
      function() return core.connect { port = 0 } end,
      function() return core.connect { port = 0 / 0 } end,
      function() return core.connect { timeout = -1 } end,
      function() return core.connect { host = {} } end,
      function() return core.sleep(-1) end,
      function() return core.sleep(0 / 0) end,
      function() return core.sleep("x") end,
      function() return conn:script("nope") end,
      function() return conn:script("release") end,
      function() return conn:script("release", {}, "w", "s", "q", "d", "l", "f", "t") end,
      function() return conn:script("release", "k", "w", "s", "q", "d", "l", "f", 0 / 0) end,
      function() return conn:script("release", "k", "w", "s", "q", "d", "l", "f", math.huge) end,
      function() return conn:command() end,
      function() return conn:command({}) end,
      function() return conn:command("GET", nil) end,
      function() return conn:command(unpack((function()
        local t = {} for i = 1, 100 do t[i] = "x" end return t end)())) end,
      function() return getmetatable(conn).__index.command(io.stdout) end,
    }
    for i, f in ipairs(calls) do
      local kind = outcome(f)
      assert(kind ~= "ok", "call " .. i .. " succeeded")
    end
    -- setters return nothing when they work, so they must raise here
    for _, v in ipairs({ -0.001, 1.5, 0 / 0, "x", {} }) do
      assert.equal("raised", (outcome(conn.set_spin, conn, v)), "set_spin(" .. tostring(v) .. ")")
      assert.equal("raised", (outcome(conn.set_timeout, conn, v == 1.5 and 1e9 or v)))
    end
    conn:set_spin(0.001)
    assert.equal("PONG", conn:command("PING"))
    conn:close()
    assert.equal("raised", (outcome(conn.command, conn, "PING")))
    assert.equal("raised", (outcome(conn.script, conn, "release", "k", "t")))
    assert.is_true(conn:close())
  end)

  it("a closed client raises a clear error and closes again quietly", function()
    local c = assert(redislock.connect { url = srv.url })
    assert.is_true(c:close())
    assert.is_true(c:close())
    local ok, err = pcall(c.acquire, c, "x")
    assert.is_false(ok)
    assert.matches("closed", err)
    assert.matches("closed", tostring(c))
  end)
end)

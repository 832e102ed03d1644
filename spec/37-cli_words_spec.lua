-- The command line's own words for its errors (issue 34): an option it was
-- given is named as the user typed it, never as the library's argument or
-- config field, and nothing of the library's Lua (positions, `strict =
-- true`) reaches the user. Real processes against a real Redis.
local helpers = require "spec.helpers"

local BIN = "bin/redislock"
local quote = helpers.quote

local function args_of(...)
  local parts = {}
  for _, a in ipairs({ ... }) do parts[#parts + 1] = quote(a) end
  return table.concat(parts, " ")
end

-- Runs the CLI to its end; its exit status and stderr.
local function run(...)
  local p = helpers.spawn(quote(helpers.lua_bin) .. " " .. BIN .. " " .. args_of(...))
  local code = p:wait(30)
  return code, p:stderr()
end

-- What no message of the command line may show: the library's argument
-- and field names, a Lua source position.
local function in_our_words(err)
  assert.is_nil(err:find("bad argument", 1, true), err)
  assert.is_nil(err:find("to 'connect'", 1, true), err)
  assert.is_nil(err:find("bad config field", 1, true), err)
  assert.is_nil(err:find("%.lua:%d+:"), err)
end

describe("the command line's own words", function()
  local srv

  setup(function() srv = helpers.start_redis() end)
  teardown(function() srv:stop() end)

  it("a --tls-* option with a redis:// URL: a usage error naming the option, and nothing is locked", function()
    local ca = helpers.tmpdir() .. "/ca.pem"
    local f = assert(io.open(ca, "w"))
    f:write("not a certificate\n")
    f:close()
    for _, args in ipairs({ { "--tls-ca", ca }, { "--tls-cert", ca }, { "--tls-key", ca },
                            { "--tls-server-name", "redis.example" }, { "--tls-insecure" } }) do
      local cmd = { "run", "--url", srv.url }
      for _, a in ipairs(args) do cmd[#cmd + 1] = a end
      for _, a in ipairs({ "tlsword", "--", "true" }) do cmd[#cmd + 1] = a end
      local code, err = run((table.unpack or unpack)(cmd)) -- luacheck: ignore 143
      assert.equal(2, code, err)
      assert.equal("redislock: " .. args[1] .. " needs a rediss:// URL: the one given is not TLS " ..
        "(see redislock help run)\n", err)
      in_our_words(err)
    end
    assert.equal("0", srv:cli_raw("EXISTS", "{tlsword}"))
  end)

  it("a CA file that cannot be read is named by its option, with no Lua position", function()
    local code, err = run("status", "--url", "rediss://127.0.0.1:1", "--tls-ca", "/nonexistent/ca.pem", "x")
    assert.equal(2, code, err)
    assert.matches("^redislock: %-%-tls%-ca: cannot read /nonexistent/ca%.pem", err)
    in_our_words(err)
  end)

  it("--strict refusing an evicting server says so in its own words, not the library's [strict = true]", function()
    local lru = helpers.start_redis { args = { "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru" } }
    local cmds = { { "run", "--strict", "strictword", "--", "true" }, { "status", "--strict", "strictword" } }
    for _, cmd in ipairs(cmds) do
      local args = { cmd[1], "--url", lru.url }
      for i = 2, #cmd do args[#args + 1] = cmd[i] end
      local code, err = run((table.unpack or unpack)(args)) -- luacheck: ignore 143
      assert.equal(69, code, err)
      assert.matches("maxmemory%-policy is allkeys%-lru", err)
      assert.is_nil(err:find("[strict = true]", 1, true), err)
      assert.matches("; refused: %-%-strict\n$", err)
      in_our_words(err)
    end
    assert.equal("0", lru:cli_raw("EXISTS", "{strictword}"))
    lru:stop()
  end)

  it("a lost lock is named in quotes: a lock called lost reads as one", function()
    local p = helpers.spawn("REDISLOCK_URL=" .. quote(srv.url) .. " " .. quote(helpers.lua_bin) .. " " .. BIN ..
      " " .. args_of("run", "--ttl", "0.6", "--kill-after", "0.5", "lost", "--", "sleep", "30"))
    assert(helpers.wait_until(function() return srv:cli_raw("EXISTS", "{lost}") == "1" end, 5, 0.01))
    srv:cli_raw("DEL", "{lost}")
    assert.equal(75, p:wait(10))
    local err = p:stderr()
    assert.equal('redislock: the lock "lost" was lost (not held); stopping the job\n', err)
    assert.is_nil(err:find("lock lost lost", 1, true))
  end)
end)

-- Secrets stay secret: tokens are unguessable and never echoed; passwords
-- never appear in a message; names cannot inject script code.
local helpers = require "spec.helpers"
local redislock = require "redislock"
local core = require "redislock.core"

describe("security", function()
  local srv

  setup(function() srv = helpers.start_redis { password = "s3cret-pw" } end)
  teardown(function() srv:stop() end)

  local function url(pw) return "redis://:" .. pw .. "@127.0.0.1:" .. srv.port end

  it("draws 10^6 tokens of 128 bits, none equal", function()
    local seen, dup = {}, 0
    for _ = 1, 1000000 do
      local t = core.token()
      if seen[t] then dup = dup + 1 end
      seen[t] = true
    end
    assert.equal(0, dup)
    local t = core.token()
    assert.equal(32, #t)
    assert.matches("^%x+$", t)
  end)

  it("never shows a password, in errors or in tostring", function()
    local c, err = redislock.connect { url = url("wrong-pw") }
    assert.is_nil(c)
    assert.is_nil(err:find("wrong-pw", 1, true))
    c, err = redislock.connect { host = "127.0.0.1", port = 1, password = "other-pw" }
    assert.is_nil(c)
    assert.is_nil(err:find("other-pw", 1, true))
    local ok, msg = pcall(redislock.connect, { url = "redis://:leaky-pw@host:0" })
    assert.is_false(ok)
    assert.is_nil(msg:find("leaky-pw", 1, true))
    c = assert(redislock.connect { url = url("s3cret-pw") })
    assert.is_nil(tostring(c):find("s3cret", 1, true))
    assert.is_nil(tostring(c._conn):find("s3cret", 1, true))
    c:close()
    assert.is_nil(tostring(c):find("s3cret", 1, true))
  end)

  it("refuses a NUL byte in a config string instead of cutting it", function()
    local cases = {
      { port = srv.port, password = "s3cret-pw\0anything" },
      { url = ("redis://:s3cret-pw%%00junk@127.0.0.1:%d"):format(srv.port) },
      { host = "127.0.0.1\0evil", port = srv.port, password = "s3cret-pw" },
    }
    for i, cfg in ipairs(cases) do
      local ok, err = pcall(redislock.connect, cfg)
      assert(not ok, "case " .. i .. " connected")
      assert.matches("NUL", err)
      assert.is_nil(err:find("s3cret", 1, true))
    end
    local c = assert(core.connect { port = srv.port, password = "s3cret-pw" })
    assert.is_false(pcall(c.script, c, "release\0junk", "k", "w", "s", "q", "d", "l", "f", "t"))
    c:close()
  end)

  it("never shows a token in tostring or in an error", function()
    local c = assert(redislock.connect { url = url("s3cret-pw") })
    local l = assert(c:acquire("secret-token", { ttl = 5 }))
    assert.is_nil(tostring(l):find(l.token, 1, true))
    assert.is_nil(tostring(l._watch):find(l.token, 1, true))
    srv:cli("DEL", "{secret-token}")
    local ok, err = l:extend(5)
    assert.is_nil(ok)
    assert.is_nil(err:find(l.token, 1, true))
    ok, err = l:release()
    assert.is_nil(ok)
    assert.is_nil(err:find(l.token, 1, true))
    assert.is_nil(tostring(l):find(l.token, 1, true))
    c:close()
  end)

  it("stores a name made of script code verbatim, and runs none of it", function()
    local c = assert(redislock.connect { url = url("s3cret-pw") })
    srv:cli("SET", "canary", "alive")
    local evil = "x') redis.call('flushall')--"
    local l = assert(c:acquire(evil, { ttl = 5 }))
    assert.equal(l.token, (srv:cli_raw("GET", "{" .. evil .. "}")))
    assert.is_true(l:extend(5))
    assert.is_true(l:release())
    local w = assert(c:acquire(evil .. "\"]] end os.exit() --", { ttl = 5, fair = true, wait = 0.1 }))
    w:release()
    assert.equal("alive", (srv:cli_raw("GET", "canary")))
    c:close()
  end)
end)

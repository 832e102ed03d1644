-- Errors that say what is wrong (issue 33, points 3 and 7): a NUL byte in
-- a URL, a unix path or a password, and a TLS file that cannot be used,
-- raise at the caller's line as a bad argument to connect, and the CLI
-- says them in its own words with its documented exit status; a plain
-- connection to a TLS port says so.
local helpers = require "spec.helpers"
local redislock = require "redislock"
local core = require "redislock.core"

describe("a plain connection to a TLS port", function()
  if not core.tls then
    pending("this core was built without TLS")
    return
  end
  local pki, srv, fake
  setup(function()
    pki = require("spec.support.tls").make()
    srv = helpers.start_redis { tls = pki:server_tls() }
    fake = helpers.start_fake_redis()
  end)
  teardown(function()
    srv:stop()
    fake:stop()
  end)

  it("says it may be one: Redis resets it", function()
    for _, url in ipairs({ ("redis://127.0.0.1:%d"):format(srv.port), ("redis://localhost:%d"):format(srv.port) }) do
      local c, err, kind = redislock.connect { url = url, connect_timeout = 2 }
      assert.is_nil(c)
      assert.equal("connection", kind)
      assert.matches("^connection failed: .*%(a TLS port%? use rediss://%)", err)
    end
    -- and over TLS the same port works
    local c = assert(redislock.connect { url = srv.url, tls = { ca = pki.ca } })
    c:close()
  end)

  it("says it may be one: a TLS server answers with an alert", function()
    fake:command("answer", "PING", fake.hex("\x15\x03\x03\x00\x02\x02\x46"))
    local c, err, kind = redislock.connect { url = fake.url, connect_timeout = 2 }
    assert.is_nil(c)
    assert.equal("connection", kind)
    assert.matches("^connection failed: the server answered in TLS %(a TLS port%? use rediss://%)", err)
    fake:command("answer", "PING", "default")
  end)

  it("says nothing of TLS when the server answered, or when it is not TCP", function()
    fake:command("answer", "PING", fake.hex("-ERR max number of clients reached\r\n"))
    local _, err = redislock.connect { url = fake.url, connect_timeout = 2 }
    assert.is_nil(err:find("TLS", 1, true), err)
    fake:command("answer", "PING", "default")
    local _, err2 = redislock.connect { path = helpers.tmpdir() .. "/none.sock", connect_timeout = 2 }
    assert.is_nil(err2:find("TLS", 1, true), err2)
  end)
end)

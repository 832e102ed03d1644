-- Errors that say what is wrong (issue 33, points 3 and 7): a NUL byte in
-- a URL, a unix path or a password, and a TLS file that cannot be used,
-- raise at the caller's line as a bad argument to connect, and the CLI
-- says them in its own words with its documented exit status; a plain
-- connection to a TLS port says so.
local helpers = require "spec.helpers"
local redislock = require "redislock"
local core = require "redislock.core"

local quote = helpers.quote
local HERE = "41%-clear_errors_spec%.lua:%d+: "

-- What connect raised (it must raise), from this file's line.
local function raised(opts)
  local ok, err = pcall(function()
    local c = redislock.connect(opts)   -- (not a tail call: keeps this line)
    return c
  end)
  assert.is_false(ok)
  return err
end

describe("a NUL byte where connect keeps a C string", function()
  it("raises a bad argument at the caller's line, naming the url or the field, never the password", function()
    local cases = {
      { { url = "redis://%00:s3cret@127.0.0.1:1" }, "url", "the user name holds a NUL byte" },
      { { url = "redis://:s3c%00ret@127.0.0.1:1" }, "url", "the password holds a NUL byte" },
      { { url = "unix:///tmp/re\0dis.sock" }, "url", "the socket path holds a NUL byte" },
      { { url = "redis://127.0.0.1\0:1" }, "url", "host '127.0.0.1\\x00' is not a host name or address" },
      { { url = "redis+sentinel://127.0.0.1:1/ma%00ster" }, "url", "the master name holds a NUL byte" },
      { { path = "/tmp/re\0dis.sock" }, "path", "holds a NUL byte" },
      { { host = "127.0.0.1", password = "s3c\0ret" }, "password", "holds a NUL byte" },
      { { host = "127.0.0.1", username = "u\0", password = "s3cret" }, "username", "holds a NUL byte" },
      { { sentinels = { "127.0.0.1:1" }, master = "m\0" }, "master", "holds a NUL byte" },
      { { sentinels = { "127.0.0.1:1" }, master = "m", sentinel_password = "s3c\0ret" }, "sentinel_password",
        "holds a NUL byte" },
      { { redlock = { "redis://:s3c%00ret@127.0.0.1:1" } }, "redlock[1]", "the password holds a NUL byte" },
      { { redlock = { { host = "127.0.0.1", password = "s3c\0ret" } } }, "redlock[1].password", "holds a NUL byte" },
      { { url = "rediss://127.0.0.1:1", tls = { ca = "/tmp/ca\0.pem" } }, "tls.ca", "holds a NUL byte" },
    }
    if not core.tls then cases[#cases] = nil end
    for _, case in ipairs(cases) do
      local err = raised(case[1])
      assert.matches("^.*" .. HERE .. "redislock: bad argument '" .. case[2]:gsub("[%[%]%.]", "%%%0")
        .. "' to 'connect' %(" .. case[3] .. "%)$", err)
      assert.is_nil(err:find("s3c", 1, true), err)
    end
  end)
end)

describe("a TLS file that cannot be used", function()
  if not core.tls then
    pending("this core was built without TLS")
    return
  end
  local pki, dir
  setup(function()
    pki = require("spec.support.tls").make()
    dir = helpers.tmpdir()
  end)

  it("raises a bad argument 'tls' at the caller's line, naming the field and the file", function()
    local swapped = { cert = pki.client.key, key = pki.client.cert }
    local cases = {
      { { ca = dir .. "/none.pem" }, "tls", "tls%.ca: cannot read .*none%.pem %(No such file or directory%)" },
      { { ca = pki.client.key }, "tls", "tls%.ca: cannot load " },
      { swapped, "tls", "tls%.cert: cannot load " },
      { { cert = pki.client.cert, key = dir .. "/none.key" }, "tls", "tls%.key: cannot load .*none%.key" },
    }
    for _, case in ipairs(cases) do
      local err = raised { url = "rediss://127.0.0.1:1", tls = case[1] }
      assert.matches("^.*" .. HERE .. "redislock: bad argument '" .. case[2] .. "' to 'connect' %(" .. case[3], err)
      assert.is_nil(err:find("PRIVATE", 1, true), err)
    end
    -- a Redlock master's own table is named as that master's
    local err = raised { redlock = { { host = "127.0.0.1", port = 1, tls = { ca = dir .. "/none.pem" } } } }
    assert.matches("^.*" .. HERE .. "redislock: bad argument 'redlock%[1%]%.tls' to 'connect' %(tls%.ca: cannot read",
      err)
    err = raised { redlock = { "rediss://127.0.0.1:1", "rediss://127.0.0.1:2" }, tls = swapped }
    assert.matches("^.*" .. HERE .. "redislock: bad argument 'redlock%[1%]%.tls' to 'connect' %(tls%.cert: cannot load",
      err)
  end)

  it("the CLI says it in its own words, exit 2, no traceback", function()
    local function cli(env, ...)
      local args = {}
      for i, a in ipairs({ ... }) do args[i] = quote(a) end
      local p = helpers.spawn((env or "") .. " " .. quote(helpers.lua_bin) .. " bin/redislock "
        .. table.concat(args, " "))
      local code = p:wait(20)
      return code, p:stderr()
    end
    local url = "rediss://127.0.0.1:1"
    local none = dir .. "/none.pem"
    local cases = {
      { nil, { "--tls-ca", none },
        "^redislock: %-%-tls%-ca: cannot read .*none%.pem %(No such file or directory%)\n$" },
      { nil, { "--tls-cert", pki.client.key, "--tls-key", pki.client.cert },
        "^redislock: %-%-tls%-cert: cannot load " },
      { nil, { "--tls-cert", pki.client.cert }, "^redislock: %-%-tls%-key: a client certificate needs both "
        .. "%-%-tls%-cert and %-%-tls%-key\n$" },
      { "REDISLOCK_TLS_CA=" .. quote(none), {}, "^redislock: %$REDISLOCK_TLS_CA: cannot read .*none%.pem" },
    }
    for _, case in ipairs(cases) do
      for _, cmd in ipairs({ { "run" }, { "status" } }) do
        local argv = { cmd[1], "--url", url }
        for _, a in ipairs(case[2]) do argv[#argv + 1] = a end
        argv[#argv + 1] = "n"
        if cmd[1] == "run" then
          argv[#argv + 1] = "--"
          argv[#argv + 1] = "true"
        end
        local code, err = cli(case[1], table.unpack(argv))
        assert.equal(2, code, err)
        assert.matches(case[3], err)
        assert.is_nil(err:find("traceback", 1, true), err)
      end
    end
    -- a NUL byte in the URL, never the URL itself
    local code, err = cli(nil, "run", "--url", "redis://:s3c%00ret@127.0.0.1:1", "n", "--", "true")
    assert.equal(2, code)
    assert.equal("redislock: bad URL: the password holds a NUL byte\n", err)
  end)
end)

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

-- TLS (docs/tls.md): rediss:// and tls = {...} on every connection a client
-- opens, verified by default, against redis-server processes that speak TLS
-- only (--port 0 --tls-port), with two CAs of the spec's own
-- (spec/support/tls.lua, made by the openssl command in a temp dir).
-- Loopback only: certificates name localhost, 127.0.0.1 and ::1, and one
-- names other-name.test, which nothing here ever looks up.
local helpers = require "spec.helpers"
local topology = require "spec.support.topology"
local redislock = require "redislock"
local core = require "redislock.core"
local process = require "redislock.process"

local quote = helpers.quote
local PASSWORD = "tls-s3cret-pw"
-- Each sentinel pass makes TLS handshakes to every sentinel, in turn:
-- under valgrind's 20-50x a handshake alone can take most of a second.
local SENTINEL_CONNECT = os.getenv("REDISLOCK_VALGRIND") and 5 or 1

local function no_secret(msg, pki)
  assert.is_nil(msg:find(PASSWORD, 1, true), msg)
  -- key material: never a PEM block nor a line of the key file
  assert.is_nil(msg:find("BEGIN", 1, true), msg)
  local key = helpers.read_file(pki.client.key)
  for line in key:gmatch("[^\n]+") do
    if #line > 16 and not line:find("-----", 1, true) then assert.is_nil(msg:find(line, 1, true), msg) end
  end
end

if not core.tls then
  describe("tls", function()
    it("a build without TLS says so of rediss:// #notls", function()
      local ok, err = pcall(redislock.connect, { url = "rediss://127.0.0.1:1" })
      assert.is_false(ok)
      assert.matches("build with TLS", err)
    end)
  end)
  return
end

describe("tls", function()
  local pki, srv

  setup(function()
    pki = require("spec.support.tls").make()
    srv = helpers.start_redis { tls = pki:server_tls(), password = PASSWORD }
    if os.getenv("REDISLOCK_VALGRIND") then
      -- valgrind translates OpenSSL's handshake the first time it runs (a
      -- second or so): here, not in the middle of the 0.3 s leases below
      local c = assert(redislock.connect { url = ("rediss://:%s@127.0.0.1:%d"):format(PASSWORD, srv.port),
        tls = { ca = pki.ca } })
      assert(assert(c:acquire("tls-warm-up", { ttl = 5 })):release())
      c:close()
    end
  end)
  teardown(function()
    if srv then srv:stop() end
  end)

  local fresh = helpers.names("tls")

  local function url(s, host)
    return ("rediss://:%s@%s:%d"):format(PASSWORD, host or "127.0.0.1", s.port)
  end

  -- A server of its own with certificate `which`, for the refusals.
  local function server(which, opts)
    return helpers.start_redis { tls = pki:server_tls(which, opts), password = PASSWORD }
  end

  describe("a verified connection", function()
    it("connects, acquires, is renewed past three ttls and releases, on every connection", function()
      local c = assert(redislock.connect { url = url(srv), tls = { ca = pki.ca } })
      assert.same({}, c:warnings())
      local name = fresh()
      local l = assert(c:acquire(name, { ttl = 0.3 }))
      helpers.sleep(1.0)                              -- three ttls: the watchdog renews over TLS
      assert.is_true(l:held())
      assert.is_true(c:stats().renewals >= 3)
      assert.equal(l.token, (srv:cli_raw("GET", l._keys.lock)))
      -- a waiter on the wait connection (TLS too) gets it at the release
      local waiter = helpers.spawn(helpers.lua_cmd(string.format([[
        local c = assert(require("redislock").connect { url = %q, tls = { ca = %q } })
        local l = assert(c:acquire(%q, { ttl = 5, wait = 10 }))
        print("got", l.token)
        assert(l:release())
      ]], url(srv), pki.ca, name)))
      helpers.sleep(0.3)
      assert.is_true(l:release())
      assert.equal(0, waiter:wait(15), waiter:stderr())
      assert.matches("^got\t%x+", waiter:stdout())
      c:close()
    end)

    it("checks a name it resolved (SNI for names), and a server_name that says otherwise fails", function()
      local c = assert(redislock.connect { url = url(srv, "localhost"), tls = { ca = pki.ca } })
      assert(c:acquire(fresh(), { ttl = 1 })):release()
      c:close()
      -- host=/port= with a tls table
      c = assert(redislock.connect { host = "127.0.0.1", port = srv.port, password = PASSWORD,
        tls = { ca = pki.ca, server_name = "localhost" } })
      c:close()
      local none, err, kind = redislock.connect { url = url(srv),
        tls = { ca = pki.ca, server_name = "other-name.test" } }
      assert.is_nil(none)
      assert.equal("connection", kind)
      assert.matches("certificate is not for other%-name%.test", err)
    end)

    it("the fork child of a TLS client makes sessions of its own and leaves the parent's alone", function()
      local c = assert(redislock.connect { url = url(srv), tls = { ca = pki.ca } })
      local parent = assert(c:acquire(fresh(), { ttl = 0.4 }))
      local result = helpers.tmpdir() .. "/child.txt"
      local pid = assert(process.fork())
      if pid == 0 then
        local ok, msg = pcall(function()
          local mine = assert(c:acquire(fresh(), { ttl = 0.3 }))
          core.sleep(0.8)
          local held = mine:held()
          assert(mine:release())
          return "own " .. tostring(held) .. " parent " .. tostring(select(3, parent:release()))
        end)
        local f = io.open(result, "w")
        f:write(ok and msg or ("error " .. tostring(msg)))
        f:close()
        process._exit(ok and 0 or 1)
      end
      local _, how, code = process.waitpid(pid)
      local text = helpers.read_file(result)
      assert.equal("exited", how)
      if os.getenv("REDISLOCK_VALGRIND") and code == 99 then code = 0 end
      assert.equal(0, code, text)
      assert.equal("own true parent not held", text)
      -- the parent's connections still speak: had the child used its
      -- sessions, their sequence numbers would be off and the server would
      -- have dropped them
      helpers.sleep(0.5)
      assert.is_true(parent:held())
      assert.is_true(parent:release())
      assert(c:acquire(fresh(), { ttl = 1 })):release()
      c:close()
    end)
  end)

  describe("refuses, with a connection error that says why", function()
    local others = {}
    teardown(function()
      for _, s in pairs(others) do s:stop() end
    end)

    -- kind: "connection" unless given (false: any)
    local function refused(s, tls, pattern, kind)
      local none, err, k = redislock.connect { url = url(s), tls = tls, connect_timeout = 2 }
      assert.is_nil(none, "connected")
      if kind ~= false then assert.equal(kind or "connection", k, err) end
      assert.matches(pattern, err)
      no_secret(err, pki)
      return err
    end

    it("a certificate from another CA, or the system's store that knows neither", function()
      refused(srv, { ca = pki.other_ca }, "^connection failed: tls: the server's certificate is from an unknown CA")
      refused(srv, nil, "unknown CA")
      others.other = others.other or server("other_server")
      refused(others.other, { ca = pki.ca }, "unknown CA")
    end)

    it("a certificate for another name", function()
      others.wrong = others.wrong or server("wrong_name")
      refused(others.wrong, { ca = pki.ca }, "certificate is not for 127%.0%.0%.1 %(wrong name%)")
    end)

    it("an expired certificate", function()
      others.expired = others.expired or server("expired")
      refused(others.expired, { ca = pki.ca }, "the server's certificate has expired")
    end)

    it("a server that wants a client certificate, or another CA's; and accepts ours", function()
      local m = server(nil, { auth_clients = true })
      others.mtls = m
      refused(m, { ca = pki.ca }, "the server wants a client certificate %(tls%.cert, tls%.key%)")
      refused(m, { ca = pki.ca, cert = pki.other_client.cert, key = pki.other_client.key },
        "the server refused our client certificate")
      local c = assert(redislock.connect { url = url(m), tls = { ca = pki.ca, cert = pki.client.cert,
        key = pki.client.key } })
      local l = assert(c:acquire(fresh(), { ttl = 0.3 }))
      helpers.sleep(0.8)                       -- the watchdog shows its certificate too
      assert.is_true(l:held())
      assert.is_true(l:release())
      c:close()
    end)

    it("a handshake refused: a port that does not speak TLS, one that closes at once", function()
      local plain = helpers.start_redis {}
      others.plain = plain
      -- Redis reads a ClientHello as an inline command: it answers an
      -- error (a newline in it: refused) or waits for one (none: a
      -- timeout, kind timeout): either way, said
      refused(plain, { ca = pki.ca }, "not a TLS port%?", false)
      local closing = helpers.start_proxy(helpers.free_port())   -- nothing behind it
      others.closing = closing
      local none, err, kind = redislock.connect { url = "rediss://127.0.0.1:" .. closing.port, tls = { ca = pki.ca } }
      assert.is_nil(none)
      assert.equal("connection", kind)
      assert.matches("tls: handshake refused: [a-z]+ by the server", err)
    end)

    it("files that cannot be used, naming the field and never the key", function()
      local dir = helpers.tmpdir()
      local function raises(tls, pattern)
        local ok, err = pcall(redislock.connect, { url = url(srv), tls = tls })
        assert.is_false(ok)
        assert.matches(pattern, err)
        no_secret(err, pki)
      end
      raises({ ca = dir .. "/none.pem" }, "tls%.ca: cannot read .*none%.pem %(No such file")
      raises({ ca = pki.client.key }, "tls%.ca: cannot load")
      raises({ cert = pki.client.cert }, "tls%.key")
      raises({ cert = pki.client.cert, key = pki.other_client.key }, "is not the key of tls%.cert's certificate")
      -- an encrypted key fails to load: it never asks for a passphrase
      local enc = dir .. "/enc.key"
      local out, code = helpers.sh("openssl pkey -in " .. quote(pki.client.key) .. " -aes256 -passout pass:x -out "
        .. quote(enc) .. " 2>&1")
      assert.equal(0, code, out)
      raises({ cert = pki.client.cert, key = enc }, "tls%.key: cannot load")
      raises({ ca = pki.ca, bogus = 1 }, "unknown field 'bogus'")
      raises({ verify = "no" }, "verify")
      -- a redis:// url is plain: tls with it is refused, not ignored
      local ok, err = pcall(redislock.connect, { url = "redis://127.0.0.1:" .. srv.port, tls = { ca = pki.ca } })
      assert.is_false(ok)
      assert.matches("rediss:// for TLS", err)
    end)
  end)

  it("verify = false encrypts without verifying, and the client warns of it", function()
    local other = server("other_server")
    local c = assert(redislock.connect { url = url(other), tls = { verify = false } })
    local w = c:warnings()
    assert.equal(1, #w)
    assert.matches("^tls%.verify = false", w[1])
    local l = assert(c:acquire(fresh(), { ttl = 0.3 }))
    helpers.sleep(0.8)
    assert.is_true(l:held())
    assert.is_true(l:release())
    c:close()
    other:stop()
  end)

  describe("a link that trickles the handshake", function()
    it("ends at connect_timeout, however slowly the bytes come", function()
      local proxy = helpers.start_proxy(srv)
      proxy:command("trickle", "all", "down", 100)   -- a byte every 0.1 s: a certificate takes minutes
      local t0 = helpers.monotime()
      local none, err, kind = redislock.connect { url = url(proxy), connect_timeout = 0.6,
        tls = { ca = pki.ca, server_name = "localhost" } }
      local took = helpers.monotime() - t0
      assert.is_nil(none)
      -- (the kind is err's first word: docs/errors.md)
      assert.equal("connection", kind)
      assert.matches("^connection failed: tls handshake timed out %(127", err)
      assert.is_true(took >= 0.55 and took < 1.5, "took " .. took)
      proxy:stop()
    end)

    it("records that come a byte at a time after the handshake are put together", function()
      local proxy = helpers.start_proxy(srv)
      local c = assert(redislock.connect { url = url(proxy), timeout = 5,
        tls = { ca = pki.ca, server_name = "localhost" } })
      proxy:command("trickle", "all", "down", 1)     -- every record in pieces
      local l = assert(c:acquire(fresh(), { ttl = 10, watchdog = false }))
      assert.equal(l.token, (srv:cli_raw("GET", l._keys.lock)))
      assert.is_true(l:release())
      proxy:command("normal", "all", "down")
      c:close()
      proxy:stop()
    end)

    it("in the watchdog's own connection: the acquire says so within connect_timeout", function()
      local proxy = helpers.start_proxy(srv)
      local c = assert(redislock.connect { url = url(proxy), connect_timeout = 0.3, timeout = 1,
        tls = { ca = pki.ca, server_name = "localhost" } })
      -- connections from now on trickle; the main one (number 1) does not
      proxy:command("trickle", "all", "down", 100)
      proxy:command("normal", 1, "down")
      local name = fresh()
      local t0 = helpers.monotime()
      local none, err = c:acquire(name, { ttl = 2 })
      local took = helpers.monotime() - t0
      assert.is_nil(none)
      assert.matches("^watchdog failed: connection failed: tls handshake timed out", err)
      assert.is_true(took < 1.5, "took " .. took)
      assert.is_false(c:inspect(name).held)   -- not left behind
      -- the watchdog's loop went on: with the link back, it connects
      proxy:command("normal", "all", "down")
      local reason
      local l = assert(c:acquire(name, { ttl = 0.6, on_lost = function(_, why) reason = why end }))
      helpers.sleep(1.5)
      c:poll()
      assert.is_nil(reason)
      assert.is_true(l:held())
      assert.is_true(l:release())
      c:close()
      proxy:stop()
    end)
  end)

  describe("the command line", function()
    local BIN = "bin/redislock"
    local function run(env, ...)
      local parts = {}
      for _, a in ipairs({ ... }) do parts[#parts + 1] = quote(a) end
      local p = helpers.spawn((env or "") .. " " .. quote(helpers.lua_bin) .. " " .. BIN .. " "
        .. table.concat(parts, " "))
      local code = p:wait(30)
      local out, err = p:stdout(), p:stderr()
      p:stop()
      return code, out, err
    end

    it("--tls-* and REDISLOCK_TLS_*; an unverifiable server exits 69 and runs nothing", function()
      local u = url(srv)
      local code, out, err = run(nil, "run", "--url", u, "--tls-ca", pki.ca, fresh(), "--", "echo", "ran")
      assert.equal(0, code, err)
      assert.equal("ran\n", out)
      code, out, err = run("REDISLOCK_TLS_CA=" .. quote(pki.ca), "status", "--url", u, fresh())
      assert.equal(1, code, err)                -- not held
      assert.matches("held: no", out)
      code, out, err = run(nil, "run", "--url", u, fresh(), "--", "echo", "ran")
      assert.equal(69, code)
      assert.equal("", out)
      assert.matches("unknown CA", err)
      no_secret(err, pki)
      code, out, err = run(nil, "run", "--url", u, "--tls-ca", pki.ca, "--tls-server-name", "other-name.test",
        fresh(), "--", "echo", "ran")
      assert.equal(69, code)
      assert.equal("", out)
      assert.matches("not for other%-name%.test", err)
      code, out, err = run(nil, "run", "--verbose", "--url", u, "--tls-insecure", fresh(), "--", "echo", "ran")
      assert.equal(0, code, err)
      assert.equal("ran\n", out)
      assert.matches("warning: tls%.verify = false", err)
      -- mutual TLS from the environment
      local m = server(nil, { auth_clients = true })
      code, out, err = run("REDISLOCK_TLS_CA=" .. quote(pki.ca), "run", "--url", url(m), fresh(), "--", "echo", "ran")
      assert.equal(69, code)
      assert.equal("", out)
      assert.matches("wants a client certificate", err)
      code, out, err = run("REDISLOCK_TLS_CA=" .. quote(pki.ca) .. " REDISLOCK_TLS_CERT=" .. quote(pki.client.cert)
        .. " REDISLOCK_TLS_KEY=" .. quote(pki.client.key), "run", "--url", url(m), fresh(), "--", "echo", "ran")
      assert.equal(0, code, err)
      assert.equal("ran\n", out)
      m:stop()
      -- the environment's CA does not make a redis:// url TLS; a flag is refused
      local plain = helpers.start_redis {}
      code, out, err = run("REDISLOCK_TLS_CA=" .. quote(pki.ca), "status", "--url", plain.url, fresh())
      assert.equal(1, code, err)
      assert.matches("held: no", out)
      code, out, err = run(nil, "status", "--url", plain.url, "--tls-ca", pki.ca, fresh())
      assert.equal(2, code)
      assert.equal("", out)
      assert.matches("rediss://", err)
      plain:stop()
    end)
  end)

  describe("Redlock over three TLS masters", function()
    it("acquires, renews and releases on each; an entry may carry its own tls", function()
      local list = {}
      for i = 1, 3 do list[i] = server() end
      local c = assert(redislock.connect { redlock = { url(list[1]), url(list[2]), url(list[3]) },
        tls = { ca = pki.ca } })
      -- (each master gets ttl/20 for a renewal: 50 ms here)
      local reason
      local l = assert(c:acquire(fresh(), { ttl = 1, on_lost = function(_, why) reason = why end }))
      helpers.sleep(2.5)
      c:poll()
      assert.is_nil(reason)
      assert.is_true(l:held())
      local on = 0
      for _, s in ipairs(list) do
        if s:cli_raw("GET", "{" .. l.name .. "}") == l.token then on = on + 1 end
      end
      assert.equal(3, on)
      assert.is_true(l:release())
      c:close()
      -- tables with their own tls, and one with another CA's: a minority
      -- that cannot be verified costs that master only
      local other = server("other_server")
      c = assert(redislock.connect { redlock = {
        { port = list[1].port, password = PASSWORD, tls = { ca = pki.ca } },
        { port = list[2].port, password = PASSWORD, tls = { ca = pki.ca, server_name = "localhost" } },
        { port = other.port, password = PASSWORD, tls = { ca = pki.ca } } } })
      l = assert(c:acquire(fresh(), { ttl = 1 }))
      assert.is_true(l:release())
      c:close()
      other:stop()
      for _, s in ipairs(list) do s:stop() end
    end)
  end)

  describe("Cluster over TLS", function()
    it("routes by slot on every master, and follows a MOVED redirect", function()
      local cl = topology.start_cluster { masters = 3, replicas = 0,
        tls = pki:server_tls(nil, { cluster = true, replication = true }) }
      local ok, err = pcall(function()
        local c = assert(redislock.connect { url = "rediss+cluster://" .. cl.seeds[1], tls = { ca = pki.ca } })
        local held, on = {}, {}
        for i = 1, 60 do
          held[i] = assert(c:acquire(fresh(), { ttl = 0.5 }))
          on[cl:node_for_slot(core.slot(held[i]._keys.lock)).port] = true
        end
        local masters = 0
        for _ in pairs(on) do masters = masters + 1 end
        assert.equal(3, masters)
        helpers.sleep(0.8)                         -- renewed on each master over TLS
        for _, l in ipairs(held) do assert.is_true(l:held()) end
        for _, l in ipairs(held) do assert.is_true(l:release()) end
        -- a slot moves behind the client's back: the next acquire there is
        -- answered MOVED, and the client follows it
        local name = fresh()
        local slot = core.slot(require("redislock.keys").cache("")(name).lock)
        local from = cl:node_for_slot(slot)
        local to = cl:other_master(from)
        local changes = c:stats().topology_changes
        cl:migrate_slot(slot, from, to)
        local l = assert(c:acquire(name, { ttl = 0.5 }))
        assert.equal(l.token, (to:cli_raw("GET", l._keys.lock)))
        assert.is_true(c:stats().topology_changes > changes)
        helpers.sleep(0.7)
        assert.is_true(l:held())
        assert.is_true(l:release())
        c:close()
      end)
      cl:stop()
      assert(ok, err)
    end)
  end)

  describe("Sentinel over TLS", function()
    it("finds the master through TLS sentinels, and follows a failover", function()
      local tls = pki:server_tls(nil, { replication = true })
      local rep = topology.start_replicated { replicas = 1, tls = tls }
      local sen
      local ok, err = pcall(function()
        sen = topology.start_sentinels { master = rep.master, tls = tls }
        local seeds = {}
        for i, a in ipairs(sen:addrs()) do seeds[i] = a.host .. ":" .. a.port end
        local c = assert(redislock.connect { url = "rediss+sentinel://" .. table.concat(seeds, ",") .. "/mymaster",
          tls = { ca = pki.ca }, connect_timeout = SENTINEL_CONNECT, timeout = SENTINEL_CONNECT })
        local long = assert(c:acquire(fresh(), { ttl = 30 }))
        assert(rep:wait_sync(30))
        local _, old_port = sen:master_addr()
        local old = sen:server_at(nil, old_port, { rep.master, rep.replicas[1] })
        local new = old == rep.master and rep.replicas[1] or rep.master
        assert(sen:failover())
        assert(sen:wait_master_change(old, 20), "no failover")
        local got
        assert(helpers.wait_until(function()
          got = c:acquire(fresh(), { ttl = 1 })
          return got and new:cli_raw("GET", got._keys.lock) == got.token
        end, 20, 0.1), "no acquire on the new master")
        assert.is_true(got:release())
        -- the lock held across the failover is renewed on the new master
        helpers.sleep(0.5)
        assert.is_true(long:held())
        assert.equal(long.token, (new:cli_raw("GET", long._keys.lock)))
        assert.is_true(long:release())
        assert.is_true(c:stats().topology_changes >= 1)
        c:close()
        -- sentinel_tls = false: plain TCP to sentinels that reach the data
        -- nodes over TLS themselves; refused by the TLS-only ones above
        local none, serr = redislock.connect { sentinels = seeds, master = "mymaster", tls = { ca = pki.ca },
          sentinel_tls = false, connect_timeout = 0.5 }
        assert.is_nil(none)
        assert.matches("sentinel", serr)
        local outbound = {}
        for k, v in pairs(tls) do outbound[k] = v end
        outbound.outbound_only = true
        -- (the sentinels above go first: their hellos on the master would
        -- reach the new one, which must see no other sentinel to be ready)
        sen:stop()
        local plain = topology.start_sentinels { master = new, tls = outbound, count = 1, quorum = 1, replicas = 0 }
        local ok2, err2 = pcall(function()
          local a = plain:addrs()[1]
          local p = assert(redislock.connect { sentinels = { a.host .. ":" .. a.port }, master = "mymaster",
            tls = { ca = pki.ca }, sentinel_tls = false, connect_timeout = SENTINEL_CONNECT })
          local l = assert(p:acquire(fresh(), { ttl = 0.3 }))
          assert.equal(l.token, (new:cli_raw("GET", l._keys.lock)))
          helpers.sleep(0.8)
          assert.is_true(l:held())
          assert.is_true(l:release())
          p:close()
        end)
        plain:stop()
        assert(ok2, err2)
      end)
      if sen then sen:stop() end
      rep:stop()
      assert(ok, err)
    end)
  end)
end)

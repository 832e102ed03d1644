-- Connecting: TCP, IPv6, unix sockets, AUTH (password and ACL user), SELECT,
-- timeouts, failures and the closed state. No message shows a password.
local helpers = require "spec.helpers"
local docs = require "spec.support.docs"
local redislock = require "redislock"
local core = require "redislock.core"
local urlmod = require "redislock.url"

local function free_name(client, name)
  local l = assert(client:acquire(name, { ttl = 5 }))
  assert.is_true(l:release())
end

describe("connect", function()
  it("by url, by fields, over IPv6 and over a unix socket", function()
    local tcp = helpers.start_redis()
    local unix = helpers.start_redis { unix = true }
    local v6 = helpers.start_redis { ipv6 = true }
    local clients = {
      assert(redislock.connect { url = tcp.url }),
      assert(redislock.connect { host = "127.0.0.1", port = tcp.port }),
      assert(redislock.connect { url = "redis://[::1]:" .. v6.port }),
      assert(redislock.connect { url = unix.url }),
      assert(redislock.connect { path = unix.path }),
    }
    for i, c in ipairs(clients) do
      free_name(c, "conn:" .. i)
      assert.matches("^redislock.client %(", tostring(c))
      c:close()
    end
    tcp:stop() unix:stop() v6:stop()
  end)

  it("selects the database from the url or the db field", function()
    local srv = helpers.start_redis()
    local c = assert(redislock.connect { url = srv.url .. "/5" })
    local l = assert(c:acquire("indb", { ttl = 5 }))
    assert.equal("1", srv:cli_raw("-n", "5", "EXISTS", "{indb}"))
    assert.equal("0", srv:cli_raw("-n", "0", "EXISTS", "{indb}"))
    l:release()
    c:close()
    c = assert(redislock.connect { port = srv.port, db = 3 })
    l = assert(c:acquire("indb", { ttl = 5 }))
    assert.equal("1", srv:cli_raw("-n", "3", "EXISTS", "{indb}"))
    l:release()
    c:close()
    srv:stop()
  end)

  it("transport 'cosocket' outside nginx is nil, err saying what it needs", function()
    local srv = helpers.start_redis()
    local c, err = redislock.connect { port = srv.port, transport = "cosocket" }
    assert.is_nil(c)
    assert.matches("needs nginx", err)
    c = assert(redislock.connect { port = srv.port, transport = "native" })
    c:close()
    srv:stop()
  end)

  it("connection refused is nil, 'connection ...'", function()
    local srv = helpers.start_redis()
    local port = srv.port
    srv:stop()
    local c, err = redislock.connect { port = port, connect_timeout = 0.5 }
    assert.is_nil(c)
    assert.matches("^connection ", err)
    c, err = redislock.connect { path = "/nonexistent/redis.sock" }
    assert.is_nil(c)
    assert.matches("^connection ", err)
  end)

  it("a wrong password fails closed, and no message shows it", function()
    local srv = helpers.start_redis { args = { "--requirepass", "right-secret" } }
    local c, err = redislock.connect { port = srv.port, password = "wrong-secret" }
    assert.is_nil(c)
    assert.matches("^redis ", err)
    assert.is_nil(err:find("secret", 1, true))
    c, err = redislock.connect { port = srv.port }
    -- no password: connecting works, but every command is refused
    if c then
      local l, e = c:acquire("x")
      assert.is_nil(l)
      assert.matches("^redis error: NOAUTH", e)
      c:close()
    else
      assert.matches("^redis ", err)
    end
    c = assert(redislock.connect { url = "redis://:right-secret@127.0.0.1:" .. srv.port })
    free_name(c, "authed")
    assert.is_nil(tostring(c):find("secret", 1, true))
    c:close()
    srv:stop()
  end)

  it("a least-privilege ACL user runs the whole API", function()
    local srv = helpers.start_redis()
    -- Exactly docs/operations.md's ACL line (its keys, EVALSHA/EVAL, and the
    -- commands the scripts, the waiters and connect call), read from it.
    local line = assert(docs.read("operations.md"):match("\n(ACL SETUSER locker [^\n]+)\n"))
    local words = {}
    for w in line:gmatch("%S+") do words[#words + 1] = w end
    assert.equal(">secret", words[5])
    words[5] = ">lockpw"
    local unpack_ = table.unpack or unpack -- luacheck: ignore 143
    assert.equal("OK", (srv:cli_raw(unpack_(words))))
    local url = "redis://locker:lockpw@127.0.0.1:" .. srv.port
    local c = assert(redislock.connect { url = url, prefix = "app:" })
    assert.same({}, c:warnings())   -- +info: it could read the policy
    local fence = assert(c:acquire("acl-fenced", { ttl = 1 }))
    assert.equal(false, c:fenced_get("acl-res", fence.fence))
    assert.equal(1, c:fenced_set("acl-res", "v", fence.fence))
    assert.is_true(fence:release())
    local c2 = assert(redislock.connect { url = url, prefix = "app:" })
    local l = assert(c:acquire("acl", { ttl = 1 }))
    assert.is_true(l:extend(2))
    assert.is_true(c:inspect("acl").held)
    assert.is_true(l:release())
    assert.is_true(c:with_lock("acl", nil, function() return true end))
    -- contended: waiting (BLPOP), fair waiting (TIME, queue), the watchdog
    for _, fair in ipairs({ false, true }) do
      local held = assert(c:acquire("acl", { ttl = 0.3 }))
      local t0 = helpers.monotime()
      local p = helpers.spawn(helpers.lua_cmd(string.format([[
        local c = assert(require("redislock").connect { url = %q, prefix = "app:" })
        local l = assert(c:acquire("acl", { ttl = 1, wait = 5, fair = %s }))
        require("redislock.core").sleep(0.2)
        assert(l:release())
      ]], url, tostring(fair))))
      -- the waiter blocks (BLPOP, as the ACL user) before the release
      assert(helpers.wait_until(function() return srv:blocked_clients() >= 1 end, 10), p:stderr())
      held:release()
      local got = assert(c2:acquire("acl", { ttl = 1, wait = 5, fair = fair }))
      assert.is_true(helpers.monotime() - t0 < 3)
      got:release()
      assert.equal(0, p:wait(5), p:stderr())
    end
    local watched = assert(c:acquire("acl", { ttl = 0.3 }))
    helpers.sleep(0.5)
    assert.is_true(watched:held())
    assert.equal(0, c:stats().failures)
    watched:release()
    assert.is_true(c:break_lock("acl") == nil)
    -- the other primitives: re-entry, adopt, read-write, semaphore (sets of
    -- leases, renewed by the watchdog), and their inspect
    local outer = assert(c:acquire("acl-re", { reentrant = true, ttl = 0.3 }))
    local inner = assert(c:acquire("acl-re", { reentrant = true, ttl = 0.3 }))
    assert.is_true(inner:release())
    local adopted = assert(c2:adopt("acl-re", c.owner, { ttl = 0.3 }))
    assert.is_true(outer:release())
    assert.equal("not held", select(3, adopted:release()))
    local rw = c:rwlock("acl-rw")
    local r = assert(rw:read { ttl = 0.3 })
    assert.equal("timeout", select(3, c2:rwlock("acl-rw"):write { wait = 0.1 }))
    assert.same({ readers = 1, writer = false, writer_waiting = false },
      helpers.pick(rw:inspect(), "readers", "writer", "writer_waiting"))
    local sem = assert(c:semaphore("acl-sem", 1))
    local p = assert(sem:acquire { ttl = 0.3 })
    assert.equal("timeout", select(3, assert(c2:semaphore("acl-sem", 1)):acquire { wait = 0.1 }))
    helpers.sleep(0.5)
    assert.is_true(r:held() and p:held())
    assert.same({ limit = 1, in_use = 1 }, helpers.pick(sem:inspect(), "limit", "in_use"))
    assert.is_true(r:release())
    assert(rw:write()):release()
    assert.is_true(p:release())
    assert.equal(0, c:stats().failures)
    c:close()
    c2:close()
    -- outside its key pattern, the server refuses
    local out = assert(redislock.connect { url = url })
    local none, err = out:acquire("acl")
    assert.is_nil(none)
    assert.matches("^redis error", err)
    out:close()
    -- a wrong ACL password fails closed
    local bad, e = redislock.connect { url = "redis://locker:nope@127.0.0.1:" .. srv.port }
    assert.is_nil(bad)
    assert.matches("^redis error: WRONGPASS", e)
    srv:stop()
  end)

  it("an ACL user without script|load runs scripts by EVAL alone, refused the load once a connection", function()
    local srv = helpers.start_redis()
    local line = assert(docs.read("operations.md"):match("\n(ACL SETUSER locker [^\n]+)\n"))
    assert.truthy(line:find(" +script|load", 1, true))
    local words = {}
    for w in line:gsub(" %+script|load", ""):gmatch("%S+") do words[#words + 1] = w end
    words[5] = ">lockpw"
    local unpack_ = table.unpack or unpack -- luacheck: ignore 143
    assert.equal("OK", (srv:cli_raw(unpack_(words))))
    assert.equal("OK", (srv:cli_raw("ACL", "LOG", "RESET")))
    local c = assert(redislock.connect { url = "redis://locker:lockpw@127.0.0.1:" .. srv.port, prefix = "app:" })
    local before = c:stats().noscript_reloads
    for _ = 1, 3 do
      assert.equal("OK", (srv:cli_raw("SCRIPT", "FLUSH")))
      local l = assert(c:acquire("noload", { ttl = 1, watchdog = false }))
      assert.is_true(l:extend())
      assert.is_true(l:release())
    end
    assert.is_true(c:stats().noscript_reloads >= before + 3)
    -- ACL LOG folds the same refusal into one entry with a count
    local log = srv:cli_raw("ACL", "LOG")
    assert.truthy(log:find("script|load", 1, true), log)
    local admin = assert(core.connect(urlmod.parse(srv.url)))
    local refused = 0
    for _, entry in ipairs(admin:command("ACL", "LOG")) do
      local f = {}
      for i = 1, #entry, 2 do f[entry[i]] = entry[i + 1] end
      if f.object == "script|load" then refused = refused + f.count end
    end
    assert.equal(1, refused)
    admin:close()
    c:close()
    srv:stop()
  end)

  it("reconnects on the next call after the server restarts", function()
    local srv = helpers.start_redis()
    local c = assert(redislock.connect { url = srv.url })
    free_name(c, "before")
    srv:kill("KILL")
    srv:restart()
    -- The first call may see the dead socket; the one after reconnects.
    local l = c:acquire("after", { ttl = 5 })
    if not l then l = assert(c:acquire("after", { ttl = 5 })) end
    assert.is_true(l:release())
    c:close()
    srv:stop()
  end)

  it("a connection the server closed while idle is made again before use: a release after a long hold works", function()
    -- (Redis' `timeout`, a proxy or CLIENT KILL closes it while the lock is
    -- held, or before the first call; a request sent on the dead socket
    -- would fail with no telling whether it ran: a failed release leaves
    -- the lock for its ttl)
    local srv = helpers.start_redis()
    assert(srv:cli_raw("CONFIG", "SET", "timeout", "1") == "OK")
    -- every client but the redis-cli asking is gone
    local function all_closed()
      for line in srv:cli_raw("CLIENT", "LIST"):gmatch("[^\n]+") do
        if not line:find("cmd=client|list", 1, true) then return false end
      end
      return true
    end
    local c = assert(redislock.connect { url = srv.url })
    assert(helpers.wait_until(all_closed, 10, 0.1), "the server did not close the idle connection")
    -- its first call, on a connection closed since the connect
    local l = assert(c:acquire("idle", { ttl = 30, watchdog = false }))
    assert(helpers.wait_until(all_closed, 10, 0.1), "the server did not close the idle connection")
    assert.is_true(l:release())
    assert.equal("0", srv:cli_raw("EXISTS", "{idle}"))
    c:close()
    srv:stop()
  end)

  it("a command timeout is a connection error, not a hang", function()
    local srv = helpers.start_redis()
    local c = assert(redislock.connect { url = srv.url, timeout = 0.2 })
    srv:kill("STOP")
    local t0 = helpers.monotime()
    local l, err = c:acquire("stopped", { ttl = 5 })
    local dt = helpers.monotime() - t0
    srv:kill("CONT")
    assert.is_nil(l)
    assert.matches("^connection ", err)
    assert.is_true(dt < 1.5, "took " .. dt)
    c:close()
    srv:stop()
  end)
end)

-- Proves the topology test support: proxy faults (trickle, delay, all
-- connections), the stub resolver in an isolated network, replication,
-- Sentinel and Cluster set-ups. Specs of Sentinel, Cluster, WAIT, Redlock
-- and total deadlines trust these helpers to make the faults they claim.

local helpers = require "spec.helpers"
local topo = require "spec.support.topology"
local socket = require "socket"

local now = helpers.monotime

-- A raw RESP client through `port`: send a command, read n bytes.
local function connect(port)
  local c = assert(socket.connect("127.0.0.1", port))
  c:settimeout(5)
  return c
end

-- { line, err } of one receive("*l"), without LuaSocket's partial result.
local function try_receive(c)
  local line, err = c:receive("*l")
  return { line, err }
end

local function elapsed(fn)
  local t0 = now()
  local a, b = fn()
  return now() - t0, a, b
end

describe("proxy faults", function()
  local srv, proxy
  before_each(function()
    srv = helpers.start_redis()
    proxy = helpers.start_proxy(srv.port)
  end)
  after_each(function()
    proxy:stop()
    srv:stop()
  end)

  it("trickle down passes one byte per MS, each within a short per-call timeout", function()
    local c = connect(proxy.port)
    finally(function() c:close() end)
    assert(c:send("PING\r\n"))
    assert.equal("+PONG\r\n", c:receive(7))
    proxy:command("trickle", 1, "down", 60)
    assert(c:send("PING\r\n"))
    c:settimeout(0.2) -- every byte beats this; the whole reply does not
    local got = {}
    local dt = elapsed(function()
      for i = 1, 7 do got[i] = assert(c:receive(1)) end
    end)
    assert.equal("+PONG\r\n", table.concat(got))
    assert.is_true(dt >= 0.3 and dt < 2, "7 bytes at 60 ms took " .. dt)
    assert.equal("trickle 60", proxy:command("mode", 1, "down"))
  end)

  it("stays responsive to control while trickling, and normal releases the rest at once", function()
    srv:cli("SET", "big", string.rep("x", 2000))
    local c = connect(proxy.port)
    finally(function() c:close() end)
    proxy:command("trickle", "all", "down", 20) -- 2,000+ bytes: about 40 s
    assert(c:send("GET big\r\n"))
    assert.equal("$2000", c:receive("*l"))
    for _ = 1, 5 do
      local dt, queued = elapsed(function() return proxy:command("queued", 1, "down") end)
      assert.is_true(dt < 0.3, "control answered in " .. dt) -- the trickle alone takes 40 s
      assert.is_true(tonumber(queued) > 1500)
      helpers.sleep(0.02)
    end
    proxy:command("normal", "all", "down")
    local dt, body = elapsed(function() return c:receive(2002) end)
    assert.equal(string.rep("x", 2000) .. "\r\n", body)
    assert.is_true(dt < 1, "the rest took " .. dt)
  end)

  it("trickle up slows what the client sends", function()
    local c = connect(proxy.port)
    finally(function() c:close() end)
    proxy:command("trickle", "all", "up", 50)
    local dt, reply = elapsed(function()
      assert(c:send("PING\r\n"))
      return c:receive("*l")
    end)
    assert.equal("+PONG", reply)
    assert.is_true(dt >= 0.25 and dt < 2, "6 bytes at 50 ms took " .. dt)
  end)

  it("delay delivers each chunk MS late, in order", function()
    local c = connect(proxy.port)
    finally(function() c:close() end)
    proxy:command("delay", "all", "down", 300)
    local t0 = now()
    for _, w in ipairs({ "a", "b", "c" }) do
      assert(c:send("ECHO " .. w .. "\r\n"))
      helpers.sleep(0.1)
    end
    local times = {}
    for i, w in ipairs({ "a", "b", "c" }) do
      assert.equal("$1", c:receive("*l"))
      assert.equal(w, c:receive("*l"))
      times[i] = now() - t0
    end
    assert.is_true(times[1] >= 0.3 and times[1] < 1, "first reply at " .. times[1])
    assert.is_true(times[3] - times[1] >= 0.15, "chunks were not spread: " .. times[3] - times[1])
  end)

  it("N = all covers connections opened later; normal all undoes it", function()
    proxy:command("trickle", "all", "down", 100)
    local slow = connect(proxy.port) -- opened after the command
    finally(function() slow:close() end)
    local dt = elapsed(function()
      assert(slow:send("PING\r\n"))
      return slow:receive("*l")
    end)
    assert.is_true(dt >= 0.5, "a later connection was not trickled: " .. dt)
    assert.equal("trickle 100", proxy:command("mode", "all", "down"))

    proxy:command("normal", "all", "down")
    local fast = connect(proxy.port)
    finally(function() fast:close() end)
    for _, c in ipairs({ slow, fast }) do
      dt = elapsed(function()
        assert(c:send("PING\r\n"))
        return c:receive("*l")
      end)
      assert.is_true(dt < 0.4, "still slow after normal: " .. dt) -- trickled: 0.6 s
    end
    assert.equal("2", proxy:command("count"))
    assert.equal("normal 0", proxy:command("mode", 2, "down"))
  end)

  it("keeps hold, buffered, flush, drop and count; answers errors", function()
    local c = connect(proxy.port)
    finally(function() c:close() end)
    assert(c:send("PING\r\n"))
    assert.equal("+PONG", c:receive("*l"))
    proxy:command("hold", 1, "up")
    assert(c:send("PING\r\n"))
    assert.truthy(helpers.wait_until(function() return proxy:command("buffered", 1, "up") == "6" end, 2, 0.01))
    c:settimeout(0.2)
    assert.same({ nil, "timeout" }, try_receive(c))
    assert.equal("6", proxy:command("flush", 1, "up"))
    c:settimeout(2)
    assert.equal("+PONG", c:receive("*l"))
    proxy:command("drop", 1)
    assert.same({ nil, "closed" }, try_receive(c))
    assert.equal("0", proxy:command("open"))
    assert.matches("^error no connection", proxy:control("hold 9 up"))
    assert.matches("^error bad direction", proxy:control("hold 1 sideways"))
    assert.matches("^error trickle needs MS", proxy:control("trickle all down"))
    assert.has_error(function() proxy:command("bogus", 1, "up") end)
  end)

  it("closes toward the client only after what was on its way is delivered", function()
    local c = connect(proxy.port)
    finally(function() c:close() end)
    proxy:command("delay", 1, "down", 300)
    assert(c:send("PING\r\nQUIT\r\n"))
    assert.equal("+PONG", c:receive("*l"))
    assert.equal("+OK", c:receive("*l"))
    assert.same({ nil, "closed" }, try_receive(c))
  end)

  it("fronts a unix socket server", function()
    local usrv = helpers.start_redis({ unix = true })
    local up = helpers.start_proxy(usrv)
    finally(function() up:stop(); usrv:stop() end)
    local c = connect(up.port)
    finally(function() c:close() end)
    up:command("trickle", "all", "down", 30)
    assert(c:send("PING\r\n"))
    local dt, reply = elapsed(function() return c:receive("*l") end)
    assert.equal("+PONG", reply)
    assert.is_true(dt >= 0.15, "not trickled: " .. dt)
    assert.equal("redis://127.0.0.1:" .. up.port, up.url)
  end)
end)

describe("isolated network with a stub resolver", function()
  local ok, why = helpers.netns_available()

  -- Run `code` (Lua, with spec.helpers as h) in spawn_isolated; its stdout.
  local function inside(code, timeout_s)
    local p = helpers.spawn_isolated(helpers.lua_cmd("local h = require 'spec.helpers'\n" .. code))
    finally(function() p:stop() end)
    assert.equal(0, p:wait(timeout_s or 10), p:stderr())
    return p:stdout()
  end

  it("answers a name from the stub only, with only lo up and our resolv.conf", function()
    if not ok then return pending(why) end
    local out = inside([[
      assert(h.isolated())
      local stub = h.start_dns_stub { mode = "answer" }
      local srv = h.start_redis()
      print("links", (h.sh("ip -o link | wc -l")):match("%d+"))
      print("resolv", (h.sh("cat /etc/resolv.conf")):match("^[^\n]*"))
      print("getent", (h.sh("getent ahostsv4 redis.invalid-test")):match("^%S+"))
      print("other", select(2, h.sh("getent hosts other.invalid-test")))
      print("redis", (h.sh("redis-cli -h redis.invalid-test -p " .. srv.port .. " PING")))
      for _, q in ipairs(stub:queries()) do print("query", q.name, q.type) end
    ]])
    assert.matches("links\t1\n", out)
    assert.matches("resolv\tnameserver 127.0.0.1\n", out)
    assert.matches("getent\t127.0.0.1\n", out)
    assert.matches("other\t2\n", out) -- NXDOMAIN: getent's "not found"
    assert.matches("redis\tPONG", out)
    assert.matches("query\tredis.invalid%-test\t1\n", out)
    assert.matches("query\tother.invalid%-test\t", out)
  end)

  it("silent: resolution blocks until the caller gives up", function()
    if not ok then return pending(why) end
    local out = inside([[
      local stub = h.start_dns_stub { mode = "silent" }
      local t0 = h.monotime()
      local _, code = h.sh("timeout 0.7 getent ahostsv4 redis.invalid-test")
      print("code", code, h.monotime() - t0)
      print("queries", #stub:queries())
    ]])
    local code, dt = out:match("code\t(%d+)\t(%S+)")
    assert.equal("124", code) -- killed by timeout: no answer came
    assert.is_true(tonumber(dt) >= 0.7 and tonumber(dt) < 3, "blocked " .. dt)
    assert.is_true(tonumber(out:match("queries\t(%d+)")) >= 1)
  end)

  it("slow: resolves after the delay", function()
    if not ok then return pending(why) end
    local out = inside([[
      h.start_dns_stub { mode = "slow", delay_ms = 400 }
      local t0 = h.monotime()
      local res = h.sh("getent ahostsv4 redis.invalid-test")
      print("took", h.monotime() - t0, res:match("^%S+"))
    ]])
    local dt, addr = out:match("took\t(%S+)\t(%S+)")
    assert.equal("127.0.0.1", addr)
    assert.is_true(tonumber(dt) >= 0.4 and tonumber(dt) < 3, "took " .. dt)
  end)

  it("stop() ends what the isolated command started", function()
    if not ok then return pending(why) end
    local p = helpers.spawn_isolated(helpers.lua_cmd([[
      local h = require "spec.helpers"
      local stub, srv = h.start_dns_stub {}, h.start_redis()
      io.write(stub.pid, " ", srv.pid, " ", srv.dir, "\n")
      io.stdout:flush()
      h.sleep(60)
    ]]))
    finally(function() p:stop() end)
    local line = helpers.wait_until(function() return p:stdout():match("^%d+ %d+ %S+\n") end, 10)
    assert.truthy(line, p:stderr())
    local stub_pid, redis_pid = line:match("^(%d+) (%d+)")
    assert.is_true(helpers.alive(stub_pid) and helpers.alive(redis_pid))
    local etc = p.etc_dir
    p:stop()
    assert.truthy(helpers.wait_until(function()
      return not helpers.alive(stub_pid) and not helpers.alive(redis_pid)
    end, 3), "isolated children outlived stop()")
    assert.is_nil(io.open(etc .. "/resolv.conf"))
  end)
end)

describe("replication", function()
  it("starts a synced master and replica", function()
    local rep = topo.start_replicated { replicas = 1 }
    finally(function() rep:stop() end)
    assert.equal("master", topo.role(rep.master))
    assert.equal("slave", topo.role(rep.replicas[1]))
    rep.master:cli("SET", "k", "v")
    assert.truthy(rep:wait_sync(5))
    assert.equal("v", (rep.replicas[1]:cli_raw("GET", "k")))
  end)

  it("stalls replication at the link proxy, then promotes a replica that lacks the latest write", function()
    local rep = topo.start_replicated { replicas = 1, link_proxy = true, password = "pw" }
    finally(function() rep:stop() end)
    local master, replica = rep.master, rep.replicas[1]
    master:cli("SET", "before", "1")
    assert.truthy(rep:wait_sync(5))
    assert.equal("1", (replica:cli_raw("GET", "before")))

    rep.links[1]:kill("STOP")
    master:cli("SET", "lock", "A")
    helpers.sleep(0.2)
    assert.equal("", (replica:cli_raw("GET", "lock")))
    assert.equal("OK", (replica:cli_raw("REPLICAOF", "NO", "ONE")))
    assert.equal("master", topo.role(replica))
    assert.equal("OK", (replica:cli_raw("SET", "lock", "B", "NX")))
    assert.equal("A", (master:cli_raw("GET", "lock")))   -- two holders
    assert.equal("B", (replica:cli_raw("GET", "lock")))
  end)
end)

describe("sentinel", function()
  it("SENTINEL FAILOVER promotes the replica within a few seconds", function()
    local rep = topo.start_replicated { replicas = 1 }
    local sen = topo.start_sentinels { master = rep.master, sentinel_password = [[s"p \\w]] }
    finally(function() sen:stop(); rep:stop() end)
    assert.equal(3, #sen.list)
    local host, port = sen:master_addr()
    assert.same({ "127.0.0.1", rep.master.port }, { host, port })
    assert.same({ true, "OK" }, { sen:failover() })
    local h, p, dt = sen:wait_master_change(rep.master, 10)
    assert.same({ "127.0.0.1", rep.replicas[1].port }, { h, p })
    assert.equal("master", topo.role(rep.replicas[1]))
    assert.is_true(dt < 5, "failover took " .. tostring(dt))
    print(("# SENTINEL FAILOVER: %.2f s"):format(dt))
  end)

  it("kill -9 of the master promotes the replica within a few seconds", function()
    local rep = topo.start_replicated { replicas = 1, password = "p\"w x" }
    local sen = topo.start_sentinels { master = rep.master, down_after_ms = 500 }
    finally(function() sen:stop(); rep:stop() end)
    local t0 = now()
    rep.master:kill("KILL")
    local h, p = sen:wait_master_change(rep.master, 15)
    local dt = now() - t0
    assert.same({ "127.0.0.1", rep.replicas[1].port }, { h, p })
    assert.equal("master", topo.role(rep.replicas[1]))
    assert.is_true(dt < 8, "failover took " .. dt)
    print(("# kill -9 failover: %.2f s"):format(dt))
  end)
end)

describe("cluster", function()
  local c
  setup(function() c = topo.start_cluster { masters = 3, replicas = 1 } end)
  teardown(function() c:stop() end)

  it("puts keys of three slots on three masters", function()
    local masters = c:masters()
    assert.equal(3, #masters)
    assert.equal(6, #c.nodes)
    for _, m in ipairs(masters) do
      assert.equal(1, #c:replicas(m))
      local key = c:key_on(m, "key")
      local node, slot = c:node_for_key(key)
      assert.equal(m, node)
      assert.equal(tostring(slot), (m:cli_raw("CLUSTER", "KEYSLOT", key)))
      assert.equal("OK", (m:cli_raw("SET", key, "v")))
      local other = masters[(m == masters[1]) and 2 or 1]
      assert.matches("^MOVED " .. slot .. " 127.0.0.1:" .. m.port, (other:cli_raw("GET", key)))
    end
    assert.equal(12182, topo.keyslot("foo"))
    assert.equal(topo.keyslot("bar"), topo.keyslot("{bar}baz"))
  end)

  it("a half-done migration answers -ASK for a missing key, -MOVED once done", function()
    local masters = c:masters()
    local from, to = masters[1], masters[2]
    local key = c:key_on(from, "mig")
    local slot = topo.keyslot(key)
    local missing = "{" .. key .. "}missing"
    assert.equal("OK", (from:cli_raw("SET", key, "v")))
    local m = c:migrate_slot(slot, from, to, { stop_after = "migrating" })
    assert.equal("migrating", m.state)
    assert.equal("v", (from:cli_raw("GET", key)))
    assert.equal("ASK " .. slot .. " 127.0.0.1:" .. to.port, (from:cli_raw("GET", missing)))
    assert.matches("^MOVED", (to:cli_raw("GET", missing))) -- no ASKING: to still redirects
    m:finish()
    assert.equal("done", m.state)
    assert.equal("MOVED " .. slot .. " 127.0.0.1:" .. to.port, (from:cli_raw("GET", key)))
    assert.equal("v", (to:cli_raw("GET", key)))
    assert.equal(to, c:node_for_slot(slot))
  end)

  it("CLUSTER FAILOVER swaps master and replica", function()
    local master = c:masters()[3]
    local replica = c:replicas(master)[1]
    local dt = c:failover(replica)
    assert.equal("master", topo.role(replica))
    assert.equal("slave", topo.role(master))
    assert.same({ master }, c:replicas(replica))
    print(("# CLUSTER FAILOVER: %.2f s"):format(dt))
  end)
end)

describe("topology cleanup", function()
  it("kill -9 of the test process stops every topology process", function()
    local child = helpers.spawn(helpers.lua_cmd([[
      local h = require "spec.helpers"
      local topo = require "spec.support.topology"
      local rep = topo.start_replicated { replicas = 1, link_proxy = true }
      local sen = topo.start_sentinels { master = rep.master, count = 1, quorum = 1 }
      local cl = topo.start_cluster { masters = 3, replicas = 0 }
      local stub = h.start_dns_stub {}
      local pids = { rep.master.pid, rep.replicas[1].pid, rep.links[1].pid, sen.list[1].pid, stub.pid }
      for _, n in ipairs(cl.nodes) do pids[#pids + 1] = n.pid end
      print(table.concat(pids, " "))
      io.stdout:flush()
      h.sleep(60)
    ]]))
    finally(function() child:stop() end)
    local line = helpers.wait_until(function() return child:stdout():match("^[%d ]+\n") end, 20)
    assert.truthy(line, child:stderr())
    local pids = {}
    for pid in line:gmatch("%d+") do pids[#pids + 1] = tonumber(pid) end
    assert.equal(8, #pids)
    for _, pid in ipairs(pids) do assert.is_true(helpers.alive(pid)) end
    child:kill("KILL")
    assert.truthy(helpers.wait_until(function()
      for _, pid in ipairs(pids) do
        if helpers.alive(pid) then return false end
      end
      return true
    end, 5), "a topology process outlived its killed owner")
  end)
end)

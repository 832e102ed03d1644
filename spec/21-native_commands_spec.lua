-- Native compare commands (DELIFEQ, DELEX, SET IFEQ, CAD, CAS): detection
-- per node at every (re)connect, and the scripts kept wherever a node lacks
-- them, against the real redis-server 7.0 of this machine, which has none.
-- What a server with them answers is checked on bytes by the C unit test
-- (test/c/native_cmd_test.c); the native paths themselves are not run here
-- (docs/native-commands.md).
local helpers = require "spec.helpers"
local topology = require "spec.support.topology"
local redislock = require "redislock"
local core = require "redislock.core"
local url = require "redislock.url"
local native = require "redislock.native"
local clientmod = require "redislock.client"

local NONE = { delifeq = false, delex = false, set_ifeq = false, cad = false, cas = false }
local ALL = 31   -- every NATIVE_* bit (native_cmd.h)

-- An admin connection that detects nothing itself, so its own connects
-- leave the counters alone.
local function admin_of(srv)
  local cfg = url.parse(srv.url)
  cfg.native_commands = false
  return assert(core.connect(cfg))
end

-- INFO commandstats as { name = { calls =, failed =, rejected = } }.
local function cmdstats(admin)
  local out = {}
  local text = assert(admin:command("INFO", "commandstats"))
  for name, rest in text:gmatch("cmdstat_([^:]+):([^\r\n]*)") do
    out[name] = {
      calls = tonumber(rest:match("calls=(%d+)")),
      failed = tonumber(rest:match("failed_calls=(%d+)")) or 0,
      rejected = tonumber(rest:match("rejected_calls=(%d+)")) or 0,
    }
  end
  return out
end

local function calls(st, name, field)
  return st[name] and st[name][field or "calls"] or 0
end

local function errors(admin, prefix)
  local text = assert(admin:command("INFO", "errorstats"))
  return tonumber(text:match("errorstat_" .. prefix .. ":count=(%d+)")) or 0
end

-- A client whose every connection claims `bits` on top of what the server
-- says (core.connect's native_assume): the fallback paths on a server
-- that in truth refuses the commands.
local function assuming_client(srv, bits)
  local cfg = url.parse(srv.url)
  cfg.native_assume = bits
  local ch = assert(native.open(cfg))
  return clientmod.new(ch, { prefix = "", fence_ttl = 3600, warnings = {} })
end

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

describe("native compare commands", function()
  local srv, admin
  local fresh = helpers.names("native")

  setup(function()
    srv = helpers.start_redis()
    admin = admin_of(srv)
  end)

  teardown(function()
    admin:close()
    srv:stop()
  end)

  it("connect asks by feature, finds none on Redis 7.0, and the probe writes nothing", function()
    assert.equal(0, admin:command("DBSIZE"))
    local before = cmdstats(admin)
    local c = assert(redislock.connect { url = srv.url })
    local info = c:server_info()
    assert.equal("noeviction", info.maxmemory_policy)
    assert.same(NONE, info.native)
    assert.equal(1, count(info.native_nodes))
    for _, bits in pairs(info.native_nodes) do assert.same(NONE, bits) end
    local after = cmdstats(admin)
    -- one COMMAND INFO, one SET probe answered "syntax error" (nothing set)
    assert.equal(1, calls(after, "command|info") - calls(before, "command|info"))
    assert.equal(1, calls(after, "set") - calls(before, "set"))
    assert.equal(1, calls(after, "set", "failed") - calls(before, "set", "failed"))
    assert.equal(0, admin:command("DBSIZE"))
    assert.equal(0, admin:command("EXISTS", "redislock:probe"))
    c:close()
  end)

  it("extend, release and the watchdog's renewals run the scripts", function()
    local c = assert(redislock.connect { url = srv.url })
    local name = fresh()
    local watched = assert(c:acquire(name, { ttl = 0.3 }))
    local plain = assert(c:acquire(fresh(), { ttl = 5, watchdog = false }))
    local before, renewals = cmdstats(admin), c:stats().renewals
    for _ = 1, 5 do assert.is_true(plain:extend(5)) end
    helpers.sleep(0.5)   -- the watchdog renews every ttl/3
    assert.is_true(watched:held())
    assert.is_true(plain:release())
    assert.is_true(watched:release())
    local after = cmdstats(admin)
    local renewed = c:stats().renewals - renewals
    assert.is_true(renewed >= 2, "renewals " .. renewed)
    -- 5 extends + the renewals + 2 releases, all EVALSHA; no SET at all
    -- (extend is GET + PEXPIRE), and none of the native commands. (stats
    -- count a renewal when it is sent, on the watchdog's own connection:
    -- the last one may reach Redis after the release and `after`, or find
    -- the key gone; one lock has one renewal in flight at most.)
    local evalsha = calls(after, "evalsha") - calls(before, "evalsha")
    assert.is_true(evalsha >= 5 + renewed - 1 + 2, "evalsha " .. evalsha .. ", renewals " .. renewed)
    assert.equal(calls(before, "set"), calls(after, "set"))
    local pexpire = calls(after, "pexpire") - calls(before, "pexpire")
    assert.is_true(pexpire >= 5 + renewed - 1, "pexpire " .. pexpire .. ", renewals " .. renewed)
    for _, cmd in ipairs({ "delifeq", "delex", "cad", "cas" }) do assert.is_nil(after[cmd]) end
    c:close()
  end)

  it("detects again after every reconnect, the watchdog's connection included", function()
    local c = assert(redislock.connect { url = srv.url })
    local l = assert(c:acquire(fresh(), { ttl = 0.3 }))
    local before = cmdstats(admin)
    -- every client connection but the admin's: the main one and the watchdog's
    assert.is_true(admin:command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes") >= 2)
    assert.is_true(helpers.wait_until(function()
      return calls(cmdstats(admin), "command|info") > calls(before, "command|info")
    end, 2), "the watchdog reconnected and asked again")
    assert.is_true(l:held())
    local mid = cmdstats(admin)
    -- the main connection learns of the kill at its next command (never
    -- retried behind our back), and reconnects at the one after
    local ok, err = l:extend(0.3)
    if not ok then
      assert.matches("^connection", err)
      assert.is_true(l:extend(0.3))
    end
    local after = cmdstats(admin)
    assert.equal(1, calls(after, "command|info") - calls(mid, "command|info"))
    assert.equal(1, calls(after, "set", "failed") - calls(mid, "set", "failed"))
    assert.same(NONE, c:server_info().native)
    assert.is_true(l:release())
    assert.equal(0, admin:command("EXISTS", "redislock:probe"))
    c:close()
  end)

  it("native_commands = false asks nothing and uses nothing", function()
    local before = cmdstats(admin)
    local c = assert(redislock.connect { url = srv.url, native_commands = false })
    local l = assert(c:acquire(fresh(), { ttl = 0.3 }))
    helpers.sleep(0.2)
    assert.is_true(l:extend(0.3))
    assert.is_true(l:release())
    local after = cmdstats(admin)
    assert.equal(calls(before, "command|info"), calls(after, "command|info"))
    assert.same(NONE, c:server_info().native)
    c:close()
    assert.has_error(function() redislock.connect { url = srv.url, native_commands = "yes" } end)
  end)

  it("an ACL user without +command (nor the probe key) connects and locks; nothing is native", function()
    local acl = helpers.start_redis {
      password = "adminpw",
      acl = { "user locker on >lockpw ~app:* resetchannels -@all +evalsha +eval +get +set +del"
        .. " +pexpire +pttl +incr +exists +rpush +ltrim +blpop +lindex +lpop +lrem +zadd +zrem"
        .. " +zscore +hset +hget +hdel +hincrby +time +ping +info" },
    }
    local u = "redis://locker:lockpw@127.0.0.1:" .. acl.port
    local c = assert(redislock.connect { url = u, prefix = "app:" })
    assert.same(NONE, c:server_info().native)
    local l = assert(c:acquire("acl", { ttl = 0.3 }))
    helpers.sleep(0.5)
    assert.is_true(l:held())
    assert.is_true(l:extend(1))
    assert.is_true(l:release())
    assert.equal(0, c:stats().failures)
    -- both detection requests were refused, and said so in Redis' ACL log
    local log = acl:cli_raw("ACL", "LOG")
    assert.is_truthy(log:find("command|info", 1, true), log)
    assert.is_truthy(log:find("redislock:probe", 1, true), log)
    c:close()
    acl:stop()
  end)

  describe("a node that claims the commands but refuses them", function()
    it("lock:extend falls back to the script once per command, with the script's answer", function()
      local c = assuming_client(srv, ALL)
      assert.same({ delifeq = true, delex = true, set_ifeq = true, cad = true, cas = true },
        c:server_info().native)
      local l = assert(c:acquire(fresh(), { ttl = 5, watchdog = false }))
      local before, errs = cmdstats(admin), errors(admin, "ERR")
      assert.is_true(l:extend(5))    -- SET ... IFEQ: "syntax error", then the script
      assert.is_true(l:extend(5))    -- CAS: "unknown command", then the script
      assert.is_true(l:extend(5))    -- the script alone
      local after = cmdstats(admin)
      assert.equal(3, calls(after, "evalsha") - calls(before, "evalsha"))
      assert.equal(1, calls(after, "set", "failed") - calls(before, "set", "failed"))
      assert.equal(2, errors(admin, "ERR") - errs)
      local pttl = admin:command("PTTL", l._keys.lock)
      assert.is_true(pttl > 4000 and pttl <= 5000, "pttl " .. pttl)
      -- refused once, never tried again on this connection; the others stay
      assert.same({ delifeq = true, delex = true, set_ifeq = false, cad = true, cas = false },
        c:server_info().native)
      assert.is_true(l:release())
      c:close()
    end)

    it("an extend that finds the key gone answers not held, and never creates it", function()
      local c = assuming_client(srv, ALL)
      local l = assert(c:acquire(fresh(), { ttl = 5, watchdog = false }))
      admin:command("DEL", l._keys.lock)
      local ok, err = l:extend(5)
      assert.is_nil(ok)
      assert.matches("^not held: ", err)
      assert.equal(0, admin:command("EXISTS", l._keys.lock))
      c:close()
    end)

    it("the watchdog's renewals fall back too, and the lease is kept", function()
      local c = assuming_client(srv, ALL)
      local l = assert(c:acquire(fresh(), { ttl = 0.3 }))
      local errs = errors(admin, "ERR")
      helpers.sleep(1.2)   -- 4 times the ttl: a dozen renewals
      assert.is_true(l:held())
      assert.equal(0, c:stats().failures)
      assert.is_true(c:stats().renewals >= 6)
      -- its link refused SET IFEQ and CAS once each, then sent scripts
      assert.equal(2, errors(admin, "ERR") - errs)
      assert.is_true(l:release())
      c:close()
    end)

    it("Redlock's release and extend fall back per master", function()
      local masters = { srv, helpers.start_redis(), helpers.start_redis() }
      local nodes, admins = {}, {}
      for i, m in ipairs(masters) do
        nodes[i] = { host = "127.0.0.1", port = m.port }
        admins[i] = i == 1 and admin or admin_of(m)
      end
      local rl = assert(core.connect { mode = "redlock", nodes = nodes, native_assume = ALL })
      local function each(name, ...)
        local out = {}
        for i, r in ipairs(rl:fanout(1, 0, name, ...)) do out[i] = assert(r.ok, r.err) end
        return out
      end
      each("redlock_ping")   -- connects: the handshakes are read before the answers
      local key = "{" .. fresh() .. "}"
      for _, a in ipairs(admins) do a:command("SET", key, "tok") end
      assert.same({ 1, 1, 1 }, each("redlock_release", key, "tok"))   -- DELIFEQ refused
      for _, a in ipairs(admins) do assert.equal(0, a:command("EXISTS", key)) end
      assert.same({ 0, 0, 0 }, each("redlock_release", key, "tok"))   -- DELEX refused
      for _, a in ipairs(admins) do a:command("SET", key, "tok") end
      assert.same({ 1, 1, 1 }, each("extend", key, "tok", 4000))      -- SET IFEQ refused
      for _, a in ipairs(admins) do
        local pttl = a:command("PTTL", key)
        assert.is_true(pttl > 3000 and pttl <= 4000, "pttl " .. pttl)
      end
      assert.same({ 0, 0, 0 }, each("extend", key .. "x", "tok", 4000)) -- CAS refused
      for _, a in ipairs(admins) do assert.equal(0, a:command("EXISTS", key .. "x")) end
      local info = rl:server_info()
      assert.equal(3, count(info.native_nodes))
      for _, bits in pairs(info.native_nodes) do
        assert.same({ delifeq = false, delex = false, set_ifeq = false, cad = true, cas = false }, bits)
      end
      rl:close()
      for i = 2, 3 do
        admins[i]:close()
        masters[i]:stop()
      end
    end)
  end)
end)

describe("native compare commands in a Cluster", function()
  local cl

  setup(function()
    cl = topology.start_cluster { masters = 3, replicas = 0 }
  end)

  teardown(function()
    cl:stop()
  end)

  it("each master is asked with a probe key of its own slots, and locks work across them", function()
    local admins, before = {}, {}
    for i, m in ipairs(cl:masters()) do
      admins[i] = admin_of(m)
      before[i] = cmdstats(admins[i])
    end
    local c = assert(redislock.connect { cluster = { cl.seeds[1] } })
    local held = {}
    for i = 1, 60 do held[i] = assert(c:acquire("cl-native-" .. i, { ttl = 0.3 })) end
    helpers.sleep(0.4)
    for i = 1, 60 do
      assert.is_true(held[i]:held())
      assert.is_true(held[i]:extend(0.3))
      assert.is_true(held[i]:release())
    end
    assert.equal(0, c:stats().failures)
    -- masters without replicas: nothing a failover could promote, nothing
    -- waited for (issue 29, csrc/watchdog/wd_ack.c)
    assert.equal(0, c:stats().renewal_waits)
    local info = c:server_info()
    assert.equal(3, count(info.native_nodes))
    for _, bits in pairs(info.native_nodes) do assert.same(NONE, bits) end
    for i, a in ipairs(admins) do
      local after = cmdstats(a)
      -- the probe reached SET's own syntax check on every master (a key of
      -- another node's slot would have been refused with MOVED first)
      local probes = calls(after, "set", "failed") - calls(before[i], "set", "failed")
      assert.is_true(probes >= 2, "master " .. i .. ": " .. probes .. " probes (main, watchdog)")
      assert.equal(calls(before[i], "set", "rejected"), calls(after, "set", "rejected"))
      assert.equal(0, errors(a, "MOVED"))
      assert.same({}, a:command("KEYS", "redislock:probe*"))
      a:close()
    end
    c:close()
  end)
end)

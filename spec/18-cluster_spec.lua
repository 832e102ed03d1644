-- Redis Cluster: keys routed by slot, all keys of a name in one slot, the
-- watchdog renewing on each node, and a hold that survives a slot
-- migration (with ASK) and a replica failover, against a real cluster of
-- 3 masters and 3 replicas on loopback.
local helpers = require "spec.helpers"
local topology = require "spec.support.topology"
local redislock = require "redislock"
local core = require "redislock.core"
local keys = require "redislock.keys"

describe("cluster", function()
  local cl, c

  setup(function()
    cl = topology.start_cluster { masters = 3, replicas = 1 }
    c = assert(redislock.connect { cluster = { cl.seeds[1] } })
  end)

  teardown(function()
    if c then c:close() end
    cl:stop()
  end)

  local fresh = helpers.names("cl")

  describe("slots", function()
    it("CRC16-XMODEM and the hash tag rule are Redis' own", function()
      assert.equal(0x31C3, core.crc16("123456789"))
      local samples = { "123456789", "foo", "{user1}.following", "{user1}.followers", "}{x}", "x",
        "foo{}{bar}", "foo{{bar}}", "foo{bar}{zap}", "{}", "{", "}", "", "a{b", "\0{\0}\255" }
      local node = assert(core.connect { host = "127.0.0.1", port = cl.nodes[1].port })
      for _, k in ipairs(samples) do
        assert.equal(node:command("CLUSTER", "KEYSLOT", k), core.slot(k), k)
      end
      node:close()
      assert.equal(core.slot("x"), core.slot("}{x}"))
      assert.equal(core.slot("foo{}{bar}"), core.crc16("foo{}{bar}") % 16384)
    end)

    it("all keys of a name share one slot, for every possible name", function()
      local names = { "}", "{", "}{", "{}", "}{x}", "a}b{c", "{{", "\1", "\1(", "a\1)b", "plain" }
      for _ = 1, 200 do
        local n = {}
        for j = 1, math.random(1, 6) do n[j] = string.char(({ 123, 125, 1, 40, 41, 97 })[math.random(6)]) end
        names[#names + 1] = table.concat(n)
      end
      for _, name in ipairs(names) do
        local k = keys.cache("")(name)
        local slot = core.slot(k.lock)
        for _, key in pairs(k) do assert.equal(slot, core.slot(key), name) end
        assert.equal(slot, core.slot(k.signal .. ":" .. "sometoken"), name)
      end
    end)
  end)

  it("1,000 names over all three masters are acquired, renewed and released", function()
    local held, per_master = {}, {}
    for i = 1, 1000 do
      local name = fresh()
      held[i] = assert(c:acquire(name, { ttl = 1 }))
      local owner = cl:node_for_slot(core.slot(held[i]._keys.lock))
      per_master[owner.port] = (per_master[owner.port] or 0) + 1
    end
    local masters = 0
    for _, n in pairs(per_master) do
      masters = masters + 1
      assert.is_true(n > 200, "a master holds only " .. n)
    end
    assert.equal(3, masters)
    helpers.sleep(1.5)   -- past the ttl: only renewals keep them
    for _, l in ipairs(held) do assert.is_true(l:held(), l.name) end
    local stats = c:stats()
    assert.is_true(stats.renewals >= 1000, "renewals " .. stats.renewals)
    assert.equal(0, stats.failures)
    -- every master has a replica a failover could promote: each pipeline of
    -- renewals waited for it (issue 29, csrc/watchdog/wd_ack.c)
    assert.is_true(stats.renewal_waits >= 3, "WAITs " .. stats.renewal_waits)
    assert.equal(0, stats.renewals_unacked)
    for _, l in ipairs(held) do assert.is_true(l:release()) end
    for _, node in ipairs(cl.nodes) do
      assert.equal("", (node:cli_raw("KEYS", "{cl:*}")))   -- fence counters apart
    end
  end)

  it("a NOSCRIPT on one node fails no renewal on the others", function()
    local held = {}
    for i = 1, 30 do held[i] = assert(c:acquire(fresh(), { ttl = 0.6 })) end
    cl.nodes[1]:cli_raw("SCRIPT", "FLUSH")
    cl.nodes[2]:cli_raw("SCRIPT", "FLUSH")
    helpers.sleep(0.8)
    for _, l in ipairs(held) do assert.is_true(l:held(), l.name) end
    assert.equal(0, c:stats().failures)
    for _, l in ipairs(held) do assert.is_true(l:release()) end
  end)

  it("a hold survives the migration of its slot, through ASK and MOVED", function()
    local name = fresh()
    local lock = assert(c:acquire(name, { ttl = 0.6 }))
    local slot = core.slot(lock._keys.lock)
    local from = cl:node_for_slot(slot)
    local to = cl:other_master(from)
    -- half-way: IMPORTING/MIGRATING set and the keys moved, the slot not yet
    -- handed over: the old node answers -ASK for them
    local migration = cl:migrate_slot(slot, from, to, { stop_after = "keys" })
    assert.matches("^ASK", (from:cli_raw("GET", lock._keys.lock)))
    helpers.sleep(0.7)          -- renewals through ASKING
    assert.is_true(lock:held())
    -- Another name of the same slot, asked for while it moves: Redis
    -- answers a multi-key script there with TRYAGAIN (its keys are missing
    -- on both nodes), so the acquire waits, and gets it once the slot has
    -- moved.
    local other_name = fresh()
    while core.slot(keys.cache("")(other_name).lock) ~= slot do other_name = fresh() end
    local early, early_err = c:acquire(other_name, { ttl = 5 })
    assert.is_nil(early)
    assert.matches("^redis error: TRYAGAIN", early_err)
    local waiter = helpers.spawn(helpers.lua_cmd(string.format([[
      local c = assert(require("redislock").connect { cluster = { %q } })
      local l = assert(c:acquire(%q, { ttl = 5, wait = 10 }))
      print("got", l.token)
      assert(l:release())
    ]], cl.seeds[1], other_name)))
    helpers.sleep(0.3)
    migration:finish()
    helpers.sleep(0.7)          -- renewals after MOVED, on the new owner
    assert.is_true(lock:held())
    assert.equal(lock.token, (to:cli_raw("GET", lock._keys.lock)))
    assert.is_true(lock:release())
    assert.equal(0, waiter:wait(10), waiter:stderr())
    assert.matches("^got\t%x+", waiter:stdout())
    assert.is_true(c:stats().topology_changes >= 1)
  end)

  it("an acquire on a half-migrated slot returns within its wait, with Redis' TRYAGAIN", function()
    -- A name whose fence counter is on the old node while its lock key is
    -- nowhere: the multi-key acquire script gets TRYAGAIN (from the old
    -- node, or from the new one after ASK) for as long as the slot moves.
    local name = fresh()
    local pre = assert(c:acquire(name, { ttl = 5 }))
    assert.is_true(pre:release())   -- (its fence counter stays)
    local slot = core.slot(pre._keys.lock)
    local from = cl:node_for_slot(slot)
    local to = cl:other_master(from)
    local migration = cl:migrate_slot(slot, from, to, { stop_after = "migrating" })
    local ok, err = pcall(function()
      for _, wait in ipairs { 0, 0.2, 1 } do
        local t0 = helpers.monotime()
        local l, aerr = c:acquire(name, { ttl = 5, wait = wait })
        local took = helpers.monotime() - t0
        assert.is_nil(l)
        assert.matches("^redis error: TRYAGAIN", aerr)
        assert(took < wait + 0.5, ("wait = %s took %.2f s"):format(wait, took))
        -- (it kept trying until its wait was over)
        assert(took >= wait - 0.05, ("wait = %s gave up after %.2f s"):format(wait, took))
      end
    end)
    migration:finish()
    assert(ok, err)
    local l = assert(c:acquire(name, { ttl = 5, wait = 1 }))
    assert.is_true(l:release())
  end)

  it("a hold survives CLUSTER FAILOVER of its master, renewed on the new one", function()
    local name = fresh()
    local reason
    local lock = assert(c:acquire(name, { ttl = 1, on_lost = function(_, why) reason = why end }))
    local master = cl:node_for_slot(core.slot(lock._keys.lock))
    local replica = assert(cl:replicas(master)[1])
    -- the replica has the key (READONLY: let it answer a read of its slot)
    local rc = assert(core.connect { host = "127.0.0.1", port = replica.port })
    assert.equal("OK", rc:command("READONLY"))
    assert(helpers.wait_until(function() return rc:command("GET", lock._keys.lock) == lock.token end, 5, 0.02))
    rc:close()
    assert(cl:failover(replica), "the replica never took over")
    helpers.sleep(1.5)          -- past the ttl: only renewals on the new master keep it
    c:poll()
    assert.is_true(lock:held(), "lost: " .. tostring(reason))
    assert.equal(replica, cl:node_for_slot(core.slot(lock._keys.lock)))
    assert.equal(lock.token, (replica:cli_raw("GET", lock._keys.lock)))
    assert.is_true(lock:release())
    -- and new locks of that slot go to the new master
    local again = assert(c:acquire(name, { ttl = 1 }))
    assert.is_true(again:release())
    assert.is_true(c:stats().topology_changes >= 1)
  end)

  it("a prefix with braces: refused where it would split a name over slots, else kept as given", function()
    -- "a{}:" makes every key's tag empty: Redis would hash whole keys and
    -- refuse every script with CROSSSLOT
    for _, prefix in ipairs { "a{}:", "{}", "x}{}y", "{}{app}" } do
      local ok, err = pcall(redislock.connect, { cluster = { cl.seeds[1] }, prefix = prefix })
      assert.is_false(ok, prefix)
      assert.matches("bad argument 'prefix' to 'connect'.*CROSSSLOT", err)
    end
    local ok, err = pcall(redislock.connect, { url = "redis+cluster://" .. cl.seeds[1], prefix = "a{}:" })
    assert.is_false(ok)
    assert.matches("bad argument 'prefix'", err)
    -- the others work, their keys exactly the prefix, then "{name}"
    for _, prefix in ipairs { "a{", "}{", "a}b:", "{app}:", "a{b}c{" } do
      local p = assert(redislock.connect { cluster = { cl.seeds[1] }, prefix = prefix })
      local slots = {}
      for _ = 1, 20 do
        local name = fresh()
        local l = assert(p:acquire(name, { ttl = 5 }))
        local key = prefix .. "{" .. name .. "}"
        assert.equal(key, l._keys.lock)
        assert.equal(l.token, (cl:node_for_key(key):cli_raw("GET", key)), prefix)
        for _, k in pairs(l._keys) do assert.equal(core.slot(key), core.slot(k), prefix) end
        assert.is_true(l:extend(5))
        assert.is_true(l:release())
        slots[core.slot(key)] = true
      end
      local n = 0
      for _ in pairs(slots) do n = n + 1 end
      -- a whole tag in the prefix puts every name in its slot (Redis' rule)
      if prefix:find("{%w+}") then assert.equal(1, n, prefix) else assert.is_true(n > 1, prefix) end
      p:close()
    end
  end)

  it("an unreachable cluster and a bad seed list are clear errors", function()
    local none, err = redislock.connect { cluster = { "127.0.0.1:" .. helpers.free_port() }, connect_timeout = 0.5 }
    assert.is_nil(none)
    assert.matches("^connection failed: cluster unreachable", err)
    local ok, perr = pcall(redislock.connect, { cluster = { "nope" } })
    assert.is_false(ok)
    assert.matches("bad argument 'cluster'", perr)
  end)
end)

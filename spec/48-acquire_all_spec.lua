-- Several names at once (issue 32, point 7; node-redlock's multi-resource
-- locks): client:acquire_all(names, opts) takes every name or none, in one
-- script, with one token and lease, a fence per name, released together.
local helpers = require "spec.helpers"
local redislock = require "redislock"
local core = require "redislock.core"

describe("acquire_all", function()
  local raw, c, other
  local fresh = helpers.names("all")

  local fx = helpers.redis_fixture { raw = true, clients = 2 }
  setup(function() raw, c, other = fx.raw, fx.clients[1], fx.clients[2] end)

  local function key(name) return "{" .. name .. "}" end

  it("takes every name, with one token, a fence per name, released together", function()
    local a, b, d = fresh(), fresh(), fresh()
    local set = assert(c:acquire_all({ a, b, d }, { ttl = 5 }))
    assert.is_true(set:held())
    assert.same({ a, b, d }, set.names)
    for _, n in ipairs({ a, b, d }) do
      assert.equal(set.token, raw:command("GET", key(n)))
      assert.is_number(set.fences[n])
      -- each name is kept from everyone else, as a plain lock is
      assert.equal("busy", select(3, other:acquire(n)))
    end
    local pttl = raw:command("PTTL", key(a))
    assert.is_true(pttl > 4000 and pttl <= 5000)
    assert.is_true(set:release())
    assert.is_false(set:held())
    for _, n in ipairs({ a, b, d }) do assert.equal(0, raw:command("EXISTS", key(n))) end
    assert.equal("not held", select(3, set:release()))
  end)

  it("takes none when one is held, and says which", function()
    local a, b, d = fresh(), fresh(), fresh()
    local l = assert(other:acquire(b, { ttl = 5, holder = "night" }))
    local set, err, kind = c:acquire_all({ a, b, d })
    assert.is_nil(set)
    assert.equal("busy", kind)
    assert.matches("^busy: ", err)
    assert.matches(b, err, 1, true)
    assert.matches("held by night", err, 1, true)
    -- nothing was written for the free ones
    assert.equal(0, raw:command("EXISTS", key(a), key(d)))
    assert.equal("timeout", select(3, c:acquire_all({ a, b, d }, { wait = 0.2 })))
    assert.equal(0, raw:command("EXISTS", key(a), key(d)))
    assert.is_true(l:release())
    assert(c:acquire_all({ a, b, d })):release()
  end)

  it("waits for the last one to be freed, never holding part of the set meanwhile", function()
    local a, b = fresh(), fresh()
    local held = assert(other:acquire(b, { ttl = 0.4, watchdog = false }))
    local t0 = helpers.monotime()
    local set = assert(c:acquire_all({ a, b }, { wait = 3, ttl = 5 }))
    assert.is_true(helpers.monotime() - t0 >= 0.3)
    assert.is_false(held:held())
    assert.is_true(set:release())
  end)

  it("is one lease: the watchdog keeps every name, extend and loss cover all", function()
    local a, b = fresh(), fresh()
    local lost
    local watched = c:stats().watched
    local set = assert(c:acquire_all({ a, b }, { ttl = 0.3, on_lost = function(_, why) lost = why end }))
    -- one registration for the set, renewed by one script for every name
    assert.equal(watched + 1, c:stats().watched)
    raw:command("CONFIG", "RESETSTAT")
    helpers.sleep(1)                        -- three ttls: only renewals keep them
    assert.is_true(set:held())
    assert.matches("cmdstat_evalsha:calls=", raw:command("INFO", "commandstats"))
    assert.equal(1, raw:command("EXISTS", key(a)))
    assert.equal(1, raw:command("EXISTS", key(b)))
    assert.is_true(set:extend(10))
    -- (a renewal at the old 0.3 s already on the wire may land after the
    -- extend: the watchdog, which counts that shorter lease, renews at 10 s
    -- before it ends)
    assert(helpers.wait_until(function() return raw:command("PTTL", key(b)) > 9000 end, 2, 0.02),
      "the set's lease is not 10 s: " .. raw:command("PTTL", key(b)) .. " ms")
    assert.is_true(set:held())
    -- one name gone: the whole set is lost, and on_lost says so once
    raw:command("DEL", key(b))
    assert(helpers.wait_until(function() return not set:held() end, 5))
    c:poll()
    assert.equal("not held", lost)
    assert.equal("not held", select(3, set:extend()))
    -- released: what is left of it goes, and the answer says it was lost
    assert.equal("not held", select(3, set:release()))
    assert.equal(0, raw:command("EXISTS", key(a)))
  end)

  it("extend is all or none", function()
    local a, b = fresh(), fresh()
    local set = assert(c:acquire_all({ a, b }, { ttl = 5, watchdog = false }))
    raw:command("SET", key(b), "someone-else", "PX", 60000)
    assert.equal("not held", select(3, set:extend(20)))
    assert.is_true(raw:command("PTTL", key(a)) <= 5000)   -- not extended either
    assert.equal("someone-else", raw:command("GET", key(b)))
    assert.equal("not held", select(3, set:release()))
    assert.equal(0, raw:command("EXISTS", key(a)))
    assert.equal("someone-else", raw:command("GET", key(b)))
  end)

  it("refuses at once a set with a name this client holds", function()
    local a, b = fresh(), fresh()
    local mine = assert(c:acquire(b, { ttl = 5 }))
    local t0 = helpers.monotime()
    local set, err, kind = c:acquire_all({ a, b }, { wait = 2 })
    assert.is_nil(set)
    assert.equal("busy", kind)
    assert.equal("busy: " .. b .. " already held by this client", err)
    assert.is_true(helpers.monotime() - t0 < 0.2)
    assert.is_true(mine:release())
    local s = assert(c:acquire_all({ a, b }))
    -- and a plain acquire of a name of a set this client holds
    assert.equal("busy: " .. a .. " already held by this client", select(2, c:acquire(a, { wait = 2 })))
    assert.is_true(s:release())
  end)

  it("never lets two holders overlap: processes taking overlapping sets", function()
    local names = { fresh(), fresh(), fresh() }
    local procs = {}
    for i = 1, 4 do
      procs[i] = helpers.spawn(helpers.lua_cmd(([[
        local core = require "redislock.core"
        local c = assert(require("redislock").connect { url = %q })
        local names = { %q, %q, %q }
        math.randomseed(%d)
        for _ = 1, 20 do
          local i = math.random(1, 3)
          local pick = { names[i], names[i %% 3 + 1] }
          local set = assert(c:acquire_all(pick, { wait = 10, ttl = 5 }))
          local t0 = core.monotime()
          core.sleep(math.random() * 0.005)
          local t1 = core.monotime()
          assert(set:release())
          io.stdout:write(string.format("hold %%s %%s %%.6f %%.6f\n", pick[1], pick[2], t0, t1))
        end
      ]]):format(fx.srv.url, names[1], names[2], names[3], i)))
    end
    local holds = {}
    for _, p in ipairs(procs) do
      assert.equal(0, p:wait(60), p:stderr())
      for n1, n2, t0, t1 in p:stdout():gmatch("hold (%S+) (%S+) ([%d.]+) ([%d.]+)") do
        holds[#holds + 1] = { [n1] = true, [n2] = true, t0 = tonumber(t0), t1 = tonumber(t1) }
      end
    end
    assert.equal(80, #holds)
    for i = 1, #holds do
      for j = i + 1, #holds do
        local x, y = holds[i], holds[j]
        local share = false
        for _, n in ipairs(names) do share = share or (x[n] and y[n]) end
        if share then
          assert.is_true(x.t1 <= y.t0 or y.t1 <= x.t0, "two holders of one name at once")
        end
      end
    end
  end)

  it("checks its arguments", function()
    for _, bad in ipairs({ "a", {}, { "" }, { "a", 1 }, { "a", "a" } }) do
      assert.has_error(function() c:acquire_all(bad) end)
    end
    local many = {}
    for i = 1, 17 do many[i] = "n" .. i end
    assert.has_error(function() c:acquire_all(many) end)
    assert.has_error(function() c:acquire_all({ "a" }, { fair = true }) end)
    assert.matches("bad argument 'names' to 'acquire_all'", select(2, pcall(c.acquire_all, c, { "x", "x" })))
  end)
end)

describe("acquire_all under Cluster", function()
  local cl, c
  setup(function()
    cl = require("spec.support.topology").start_cluster { masters = 3, replicas = 0 }
    c = assert(redislock.connect { cluster = { cl.seeds[1] } })
  end)
  teardown(function()
    if c then c:close() end
    if cl then cl:stop() end
  end)

  it("takes names that share a slot, and refuses names that do not, as an argument error", function()
    -- names that hash alike: found by the slot of their keys
    local names, slot = {}, nil
    for i = 1, 100000 do
      local n = "acct:" .. i
      local s = core.slot("{" .. n .. "}")
      if not slot then slot = s end
      if s == slot then names[#names + 1] = n end
      if #names == 2 then break end
    end
    assert.equal(2, #names)
    local set = assert(c:acquire_all(names, { ttl = 0.5 }))
    helpers.sleep(1.2)                      -- renewed on the node of their slot
    assert.is_true(set:held())
    assert.is_true(set:release())
    local ok, err = pcall(c.acquire_all, c, { "acct:1", "acct:2" })
    assert.is_false(ok)
    assert.matches("bad argument 'names' to 'acquire_all' %(under Cluster the names must share a slot", err)
  end)
end)

describe("acquire_all on Redlock", function()
  local servers, c, d = {}, nil, nil
  setup(function()
    local urls = {}
    for i = 1, 3 do
      servers[i] = helpers.start_redis()
      urls[i] = servers[i].url
    end
    c = assert(redislock.connect { redlock = urls })
    d = assert(redislock.connect { redlock = urls })
  end)
  teardown(function()
    if c then c:close() end
    if d then d:close() end
    for _, s in ipairs(servers) do s:stop() end
  end)

  it("takes every name on a majority of the masters, or none anywhere", function()
    local set = assert(c:acquire_all({ "rl-a", "rl-b" }, { ttl = 5 }))
    assert.is_true(set:held())
    for _, s in ipairs(servers) do
      assert.equal(set.token, s:cli_raw("GET", "{rl-a}"))
      assert.equal(set.token, s:cli_raw("GET", "{rl-b}"))
    end
    assert.is_nil(set.fences["rl-a"])    -- (no fences across masters)
    assert.equal("busy", select(3, d:acquire("rl-b")))
    assert.equal("busy", select(3, d:acquire_all({ "rl-b", "rl-c" })))
    for _, s in ipairs(servers) do assert.equal("", s:cli_raw("GET", "{rl-c}")) end
    assert.is_true(set:extend(10))
    assert.is_true(set:release())
    for _, s in ipairs(servers) do assert.equal("0", s:cli_raw("EXISTS", "{rl-a}", "{rl-b}")) end
  end)

  it("counts a master only when it granted the whole set", function()
    -- one name held on two masters of three by someone else: no majority
    -- grants the set, and nothing of it is left on the third
    servers[1]:cli_raw("SET", "{rl-x}", "other", "PX", "5000")
    servers[2]:cli_raw("SET", "{rl-x}", "other", "PX", "5000")
    assert.equal("busy", select(3, c:acquire_all({ "rl-w", "rl-x" })))
    for _, s in ipairs(servers) do assert.equal("0", s:cli_raw("EXISTS", "{rl-w}")) end
    -- on one master only: a majority grants it, and the watchdog keeps it
    servers[2]:cli_raw("DEL", "{rl-x}")
    local set = assert(c:acquire_all({ "rl-w", "rl-x" }, { ttl = 0.5 }))
    helpers.sleep(1.2)
    assert.is_true(set:held())
    assert.is_true(set:release())
    servers[1]:cli_raw("DEL", "{rl-x}")
  end)
end)

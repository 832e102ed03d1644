-- Every primitive (reentrant lock, read-write lock, semaphore) over a real
-- Redis Cluster (3 masters, 3 replicas: each primitive's keys in one slot,
-- its renewals on the node that serves it) and through Sentinel (a kill -9
-- of the master: shares that reached the replica stay held and are renewed
-- on the new master, the permit bound holds there).
local helpers = require "spec.helpers"
local topology = require "spec.support.topology"
local redislock = require "redislock"
local core = require "redislock.core"

-- Takes one of each primitive on `c` with a short ttl (so only the
-- watchdog keeps them) and returns them.
local function take_all(c, name)
  local held = {}
  held.outer = assert(c:acquire(name .. ":re", { reentrant = true, ttl = 0.5 }))
  held.inner = assert(c:acquire(name .. ":re", { reentrant = true, ttl = 0.5 }))
  local rw = c:rwlock(name .. ":rw")
  held.r1 = assert(rw:read { ttl = 0.5 })
  held.r2 = assert(rw:read { ttl = 0.5 })
  held.w = assert(c:rwlock(name .. ":rw2"):write { ttl = 0.5 })
  local sem = assert(c:semaphore(name .. ":sem", 2))
  held.p1 = assert(sem:acquire { ttl = 0.5 })
  held.p2 = assert(sem:acquire { ttl = 0.5 })
  return held
end

-- Checks that others are kept out as each primitive's rule says.
local function others_kept_out(d, name)
  assert.equal("busy", select(3, d:acquire(name .. ":re", { reentrant = true })))
  assert.equal("busy", select(3, d:rwlock(name .. ":rw"):write()))
  assert(d:rwlock(name .. ":rw"):read()):release()          -- readers share
  assert.equal("busy", select(3, d:rwlock(name .. ":rw2"):read()))
  assert.equal("busy", select(3, assert(d:semaphore(name .. ":sem", 2)):acquire()))
end

local function release_all(held)
  for _, k in ipairs { "inner", "outer", "r1", "r2", "w", "p1", "p2" } do
    local ok, err = held[k]:release()
    assert(ok, k .. ": " .. tostring(err))
  end
end

describe("primitives over a cluster", function()
  local cl, c, d

  setup(function()
    cl = topology.start_cluster { masters = 3, replicas = 1 }
    c = assert(redislock.connect { cluster = { cl.seeds[1] } })
    d = assert(redislock.connect { url = "redis+cluster://" .. cl.seeds[2] })
  end)
  teardown(function()
    if c then c:close() end
    if d then d:close() end
    cl:stop()
  end)

  it("keep each primitive's keys in one slot, renewed on the node that serves it", function()
    local holds = {}
    -- names spread over the three masters
    for i = 1, 6 do holds[i] = take_all(c, "prim" .. i) end
    helpers.sleep(1.6)                       -- three ttls: renewals keep them all
    for i = 1, 6 do
      for k, l in pairs(holds[i]) do assert(l:held(), k .. " of prim" .. i) end
      others_kept_out(d, "prim" .. i)
    end
    -- every key of a primitive lives on the one node of its slot
    for i = 1, 6 do
      for _, suffix in ipairs { ":re", ":rw", ":rw2", ":sem" } do
        local slot = core.slot("{prim" .. i .. suffix .. "}")
        local node = cl:node_for_slot(slot)
        local ks = node:cli_raw("KEYS", "*prim" .. i .. suffix .. "}*")
        assert.is_true(#ks > 0, "prim" .. i .. suffix .. " has no keys on its node")
        for k in ks:gmatch("[^\n]+") do assert.equal(slot, core.slot(k), k) end
      end
    end
    for i = 1, 6 do release_all(holds[i]) end
    assert.equal(0, c:stats().lost["not held"] or 0)
  end)

  it("move with a slot: a hold keeps being renewed after MOVED", function()
    local name = "moving"
    local sem = assert(c:semaphore(name, 1))
    local p = assert(sem:acquire { ttl = 0.5 })
    local slot = core.slot("{" .. name .. "}:sem")
    local from = cl:node_for_slot(slot)
    local to = cl:other_master(from)
    assert(cl:migrate_slot(slot, from, to))
    helpers.sleep(1.6)
    assert.is_true(p:held())
    assert.equal("busy", select(3, assert(d:semaphore(name, 1)):acquire()))
    assert.is_true(p:release())
  end)
end)

describe("primitives through sentinel", function()
  local rep, sen

  setup(function()
    rep = topology.start_replicated { replicas = 1 }
    sen = topology.start_sentinels { master = rep.master }
  end)
  teardown(function()
    sen:stop()
    rep:stop()
  end)

  local function connect()
    local seeds = {}
    for i, a in ipairs(sen:addrs()) do seeds[i] = a.host .. ":" .. a.port end
    return assert(redislock.connect { sentinels = seeds, master = "mymaster", connect_timeout = 1,
      timeout = 1 })
  end

  it("keep replicated shares across a kill -9 of the master, renewed on the new one", function()
    local c, d = connect(), connect()
    local held = take_all(c, "fo")
    for _, l in pairs(held) do assert.is_true(l:extend(8)) end  -- outlast the failover
    assert(rep:wait_sync())
    local old = rep.master
    old:kill("KILL")
    assert(sen:wait_master_change(old, 20), "no failover")
    -- new grants reach the new master (a client's first call after the
    -- failover may fail: its connection was to the dead master); the held
    -- ones keep others out there
    for _, x in ipairs { c, d } do
      assert(helpers.wait_until(function()
        local l = x:acquire("fo:probe", { ttl = 1 })
        if l then l:release() end
        return l
      end, 20, 0.1))
    end
    others_kept_out(d, "fo")
    for k, l in pairs(held) do assert(l:held(), k) end
    release_all(held)
    assert(d:semaphore("fo:sem", 2)):acquire():release()
    c:close()
    d:close()
  end)
end)

-- Holds that must read as lost, and sets that must not count what a
-- failover could lose: two-holder paths found by reviewing issue 32's
-- reentrant rwlocks, semaphores and acquire_all.
local helpers = require "spec.helpers"

describe("a reentrant rwlock", function()
  local c, other
  local fresh = helpers.names("rvpeers")

  local fx = helpers.redis_fixture { raw = true, clients = 2 }
  setup(function() c, other = fx.clients[1], fx.clients[2] end)

  -- A hold of a grant that was broken, then given to someone else and
  -- freed, then granted again to the same owner: the old hold's watchdog
  -- renews the newer grant and it never learns it lost the lock, while
  -- the rival held it in between (two holders).
  it("a broken write hold is not kept alive by the owner's newer grant", function()
    local name = fresh()
    local rw = c:rwlock(name, { reentrant = true })
    local old = assert(rw:write { ttl = 1 })
    assert.is_true(other:rwlock(name):break_lock())
    local rival = assert(other:rwlock(name):write { ttl = 1 })
    assert.is_true(rival.fence > old.fence)
    assert.is_true(rival:release())
    local new = assert(rw:write { ttl = 1 })
    assert.is_true(new.fence > rival.fence)
    helpers.sleep(2.5)
    assert.is_true(new:held())
    assert.is_false(old:held(), "the broken hold still reads as held after a rival held the lock")
    new:release()
  end)

  it("a broken read hold is not kept alive by the owner's newer grant", function()
    local name = fresh()
    local rw = c:rwlock(name, { reentrant = true })
    local old = assert(rw:read { ttl = 1 })
    assert.is_true(other:rwlock(name):break_lock())
    local rival = assert(other:rwlock(name):write { ttl = 1 })
    assert.is_true(rival:release())
    local new = assert(rw:read { ttl = 1 })
    helpers.sleep(2.5)
    assert.is_true(new:held())
    assert.is_false(old:held(), "the broken read hold still reads as held after a writer held the lock")
    new:release()
  end)
end)

describe("a reentrant lock", function()
  local c, other
  local fresh = helpers.names("rvreent")
  local fx = helpers.redis_fixture { raw = true, clients = 2 }
  setup(function() c, other = fx.clients[1], fx.clients[2] end)

  -- The same case for acquire{reentrant = true}: its group's watchdog
  -- compares only the owner token, which the newer grant holds again.
  it("a broken hold is not kept alive by the owner's newer grant", function()
    local name = fresh()
    local old = assert(c:acquire(name, { reentrant = true, ttl = 1 }))
    assert.is_true(other:break_lock(name))
    local rival = assert(other:acquire(name, { ttl = 1 }))
    assert.is_true(rival.fence > old.fence)
    assert.is_true(rival:release())
    local new = assert(c:acquire(name, { reentrant = true, ttl = 1 }))
    assert.is_true(new.fence > rival.fence)
    helpers.sleep(2.5)
    assert.is_true(new:held())
    assert.is_false(old:held(), "the broken hold still reads as held after a rival held the lock")
    assert.is_nil((old:release()))
    assert.is_true(new:held())   -- (the old hold's release leaves the new grant alone)
    assert.is_true(new:release())
  end)
end)

-- set:extend must count a new lease only once a replica a failover could
-- promote has it, as lock:extend does (spec 36): otherwise the set reads
-- as held past the lease the promoted replica has, and a rival there takes
-- a name while held() is true.
describe("acquire_all under Sentinel", function()
  local topology = require "spec.support.topology"
  local failover = require "spec.support.failover"
  local redislock = require "redislock"

  it("set:extend with the replica's link stalled: no rival grant while held", function()
    local rep = topology.start_replicated { replicas = 1, link_proxy = true }
    local sen
    local ok, e = pcall(function()
      sen = topology.start_sentinels { master = rep.master, down_after_ms = 1000, failover_timeout_ms = 4000,
        servers = { rep.master, rep.replicas[1] } }
    end)
    if not ok then rep:stop() error(e, 0) end
    local new = rep.replicas[1]
    local c, rival
    finally(function()
      if c then c:close() end
      if rival then rival:close() end
      sen:stop()
      rep:stop()
    end)
    c = assert(redislock.connect { url = "redis+sentinel://" .. table.concat(failover.seeds(sen), ",") .. "/mymaster",
      connect_timeout = 1, timeout = 1 })
    local set = assert(c:acquire_all({ "sa", "sb" }, { ttl = 1, watchdog = false }))
    local plain = assert(c:acquire("sp", { ttl = 1, watchdog = false }))
    helpers.sleep(0.2)   -- (the grants reach the replica)
    rep.links[1]:command("hold", "all", "both")
    local pok, _, pkind = plain:extend(30)
    assert.is_nil(pok)
    assert.equal("replicas", pkind)   -- lock:extend: the lease counts as before
    local sok, serr, skind = set:extend(30)
    local t_ext = helpers.monotime()
    assert(new:cli("REPLICAOF", "NO", "ONE"))
    rival = assert(redislock.connect { url = "redis://" .. new.host .. ":" .. new.port, connect_timeout = 1,
      timeout = 1 })
    local bad = 0
    while helpers.monotime() - t_ext < 2 do
      local l = rival:acquire("sa", { wait = 0, ttl = 5, watchdog = false })
      if l then
        if set:held() then bad = bad + 1 end
        break
      end
      helpers.sleep(0.01)
    end
    assert.equal(0, bad, ("the rival took 'sa' on the promoted replica while set:held() was true (set:extend " ..
      "answered %s, %s, %s)"):format(tostring(sok), tostring(serr), tostring(skind)))
  end)
end)

describe("held() and lease_end() read right", function()
  local c
  local fresh = helpers.names("rvpeers2")
  local fx = helpers.redis_fixture { raw = true, clients = 1 }
  setup(function() c = fx.clients[1] end)

  -- zset_renew now reads a token ending "*<n>" as n permits: a reentrant
  -- rwlock owner (opts.owner, any string) that ends so is renewed as
  -- members that do not exist, and its read share is reported lost.
  it("a reentrant reader whose owner ends in *2 stays held while renewed", function()
    local rw = c:rwlock(fresh(), { reentrant = true, owner = "job*2" })
    local r = assert(rw:read { ttl = 0.3 })
    helpers.sleep(1)
    assert.is_true(r:held(), "lost: " .. tostring(r.lost_reason))
    assert.is_true(r:release())
  end)

  -- a watched set's lease_end stays where the acquire left it, though the
  -- watchdog renews it (lock:lease_end follows the renewals)
  it("a watched set's lease_end follows its renewals", function()
    local set = assert(c:acquire_all({ fresh(), fresh() }, { ttl = 0.3 }))
    helpers.sleep(1)
    assert.is_true(set:held())
    assert.is_true(set:lease_end() > helpers.monotime(),
      ("lease_end %.3f s in the past while held"):format(helpers.monotime() - set:lease_end()))
    assert.is_true(set:release())
  end)
end)

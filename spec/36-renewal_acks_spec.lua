-- Issue 29, rule 1: a renewal earns credit only once every replica a
-- failover could promote acknowledged it (csrc/watchdog/wd_ack.c). In
-- most of these the sentinels go on naming the old master, so only that
-- rule can tell the holder that what it renews no longer reaches the node
-- that will be (or already is) master.
--
-- Real processes on loopback: a master with one or two replicas (each
-- through a proxy of its own where the spec stalls replication), three
-- sentinels. The holder is spec/support/hung_holder.lua (held() logged
-- every 10 ms) or a client of this process; rivals connect straight to a
-- replica's address. The checker (spec/support/failover.lua) counts the
-- rival grants made while the holder's held() was true: 0 every time.
local helpers = require "spec.helpers"
local topology = require "spec.support.topology"
local failover = require "spec.support.failover"
local redislock = require "redislock"

local function sentinel_url(sen)
  return "redis+sentinel://" .. table.concat(failover.seeds(sen), ",") .. "/mymaster"
end

-- A master with `n` replicas, each replicating through a proxy of its own
-- (rep.links[i]), and three sentinels (down-after 1 s) watching it. Their
-- failover-timeout (default 4 s) is also how long they leave a replica
-- that names another master than theirs (the proxy's address) before they
-- point it at the master itself ("+fix-slave-config"), and with that
-- around the proxy: a spec that stalls a link after that long gives more.
local function replicated(n, failover_timeout_ms)
  local rep = topology.start_replicated { replicas = n, link_proxy = true }
  local servers = { rep.master }
  for _, r in ipairs(rep.replicas) do servers[#servers + 1] = r end
  local ok, sen = pcall(topology.start_sentinels, { master = rep.master, down_after_ms = 1000,
                                                    failover_timeout_ms = failover_timeout_ms or 4000,
                                                    servers = servers })
  if not ok then
    rep:stop()
    error(sen, 0)
  end
  return rep, sen
end

-- The holder process's log and a rival's, checked: prints the line and
-- asserts no grant while held. Returns the grants and the loss reason.
local function check(label, t_acq, t_fault, holder, rival)
  rival:kill("TERM")
  rival:wait(5)
  holder:kill("TERM")
  holder:wait(5)
  local log = holder:stdout()
  local grants = failover.rival_grants(rival:stdout())
  local bad, _, last_true = failover.grants_while_held(t_acq, failover.held_samples(log), grants)
  local t_lost, reason = log:match("\nlost (%S+) ([^\n]+)")
  print(("\n# %s: rival grants while held %d of %d (first +%s); held() true until +%s; lost %s"):format(
    label, bad, #grants, grants[1] and failover.seconds(grants[1][2] - t_fault) or "never",
    failover.seconds(last_true and last_true - t_fault), t_lost and ("+" .. failover.seconds(t_lost - t_fault)
      .. " as '" .. reason .. "'") or "never"))
  assert.equal(0, bad, "rival grants while the holder's held() was true")
  return grants, reason
end

describe("a renewal no replica acknowledged earns no credit (issue 29)", function()
  -- Replication of replica 1 stalls (the link stays open: the master still
  -- counts it as connected) and that replica takes over by hand with the
  -- lease it had; the sentinels go on naming the old master, which goes on
  -- answering the holder's renewals. With two replicas, the second one
  -- goes on following the old master and acknowledging its writes.
  local function stalled_then_promoted(n)
    local rep, sen = replicated(n)
    local new = rep.replicas[1]
    local holder, rival
    finally(function()
      if rival then rival:stop() end
      if holder then holder:stop() end
      sen:stop()
      rep:stop()
    end)
    local t_acq
    holder, t_acq = failover.spawn_holder("spec/support/hung_holder.lua", sentinel_url(sen), "stall", 1, 0)
    helpers.sleep(0.7)   -- (two renewals, acknowledged)
    rep.links[1]:command("hold", "all", "both")
    local t_stall = helpers.monotime()
    helpers.sleep(0.2)
    assert(new:cli("REPLICAOF", "NO", "ONE"))
    rival = failover.spawn_rival("redis://" .. new.host .. ":" .. new.port, "stall", 1, "keep", 0.01)
    helpers.wait_until(function() return failover.rival_grants(rival:stdout())[1] ~= nil end, 5, 0.05)
    helpers.sleep(0.5)
    local grants, reason = check(("%d replica(s), replica 1 stalled then promoted"):format(n), t_acq, t_stall,
      holder, rival)
    assert.is_true(#grants > 0, "the rival was never granted the name on the promoted replica")
    assert.equal("unreachable", reason)
  end

  it("one replica, its link stalled, then promoted by hand: no rival grant while held", function()
    stalled_then_promoted(1)
  end)

  it("two replicas, one stalled then promoted by hand, the other still following: no rival grant while held",
    function()
      stalled_then_promoted(2)
    end)

  -- The review's: with several locks in one pipeline the ring's slots are
  -- reused, and a renewal once took the slot of an old WAIT (its own "1"
  -- was read as the WAIT's answer, crediting the renewals before it).
  it("20 locks, the replica's link stalled then promoted by hand: no rival grant while held", function()
    local N = 20
    local rep, sen = replicated(1)
    local new = rep.replicas[1]
    local c, rival
    finally(function()
      if c then c:close() end
      if rival then rival:close() end
      sen:stop()
      rep:stop()
    end)
    c = assert(redislock.connect { url = sentinel_url(sen), connect_timeout = 1, timeout = 1 })
    local locks = {}
    for i = 1, N do locks[i] = assert(c:acquire("many" .. i, { ttl = 1 })) end
    helpers.sleep(2)   -- (rounds enough for the ring's slots to be reused)
    for i = 1, N do assert.is_true(locks[i]:held(), "lost before the fault: " .. i) end
    rep.links[1]:command("hold", "all", "both")
    local t_stall = helpers.monotime()
    helpers.sleep(0.2)
    assert(new:cli("REPLICAOF", "NO", "ONE"))
    rival = assert(redislock.connect { url = "redis://" .. new.host .. ":" .. new.port, connect_timeout = 1,
                                       timeout = 1 })
    local bad, grants = 0, 0
    while helpers.monotime() - t_stall < 3 do
      for i = 1, N do
        local l = rival:acquire("many" .. i, { wait = 0, ttl = 5, watchdog = false })
        if l then
          grants = grants + 1
          -- (sampled after the grant returned: true means both held it)
          if locks[i]:held() then bad = bad + 1 end
          l:release()
        end
      end
      helpers.sleep(0.02)
    end
    print(("\n# %d locks, the replica stalled then promoted: rival grants while held %d of %d"):format(N, bad,
      grants))
    assert.is_true(grants >= N, "the rival was not granted every name")
    assert.equal(0, bad, "rival grants while the holder's held() was true")
  end)

  -- SENTINEL FAILOVER to sentinel 1, which is SIGSTOPped as soon as a
  -- replica reports itself master, before it reconfigures anything else:
  -- the holder saw +try-failover (a doubt); the other two sentinels know
  -- nothing of it and confirm the old master again; with two replicas the
  -- one not promoted still follows the old master.
  local function leader_hung(n)
    local rep, sen = replicated(n)
    local holder
    local rivals = {}
    finally(function()
      for _, r in ipairs(rivals) do r:stop() end
      if holder then holder:stop() end
      for _, s in ipairs(sen.list) do s:kill("CONT") end
      sen:stop()
      rep:stop()
    end)
    local name = "leader" .. n
    local t_acq
    holder, t_acq = failover.spawn_holder("spec/support/hung_holder.lua", sentinel_url(sen), name, 3, 0)
    for i, r in ipairs(rep.replicas) do
      rivals[i] = failover.spawn_rival("redis://" .. r.host .. ":" .. r.port, name, 2, "keep", 0.01)
    end
    helpers.sleep(0.5)
    assert(sen:failover(sen.list[1]))
    local promoted
    assert(helpers.wait_until(function()
      for i, r in ipairs(rep.replicas) do
        if topology.role(r) == "master" then
          promoted = i
          return true
        end
      end
    end, 10, 0.002), "no replica promoted")
    sen.list[1]:kill("STOP")
    local t_stop = helpers.monotime()
    helpers.sleep(6)
    for i, r in ipairs(rivals) do
      if i ~= promoted then
        r:kill("TERM")
        r:wait(5)
      end
    end
    check(("%d replica(s), the leader hung after promoting replica %d"):format(n, promoted), t_acq, t_stop,
      holder, rivals[promoted])
  end

  it("the failover's leader hung right after the promotion, one replica: no rival grant while held", function()
    leader_hung(1)
  end)

  it("the failover's leader hung right after the promotion, two replicas: no rival grant while held", function()
    leader_hung(2)
  end)

  -- The second review's: a replica hidden from SENTINEL REPLICAS
  -- (replica-announced no) can still be promoted. R1 is announced with
  -- replica-priority 0 (never promoted); R2 is not announced; the leader
  -- promotes R2 and hangs; R1 still follows the old master.
  it("an unannounced replica promoted by a leader that then hangs: no rival grant while held", function()
    local rep = topology.start_replicated { replicas = 2 }
    local r1, r2 = rep.replicas[1], rep.replicas[2]
    local sen, holder, rival
    finally(function()
      if rival then rival:stop() end
      if holder then holder:stop() end
      if sen then
        for _, s in ipairs(sen.list) do s:kill("CONT") end
        sen:stop()
      end
      rep:stop()
    end)
    sen = topology.start_sentinels { master = rep.master, down_after_ms = 1000, failover_timeout_ms = 4000,
                                     servers = { rep.master, r1, r2 } }
    assert(r1:cli("CONFIG", "SET", "replica-priority", "0"))
    assert(r2:cli("CONFIG", "SET", "replica-announced", "no"))
    assert(helpers.wait_until(function()
      for _, s in ipairs(sen.list) do
        local m = s:call("SENTINEL", "MASTER", "mymaster")
        local t = {}
        for i = 1, #m, 2 do t[m[i]] = m[i + 1] end
        if t["num-slaves"] ~= "2" or #s:call("SENTINEL", "REPLICAS", "mymaster") ~= 1 then return false end
      end
      return true
    end, 20, 0.2), "the sentinels do not see 2 replicas with 1 listed")
    local t_acq
    holder, t_acq = failover.spawn_holder("spec/support/hung_holder.lua", sentinel_url(sen), "unannounced", 3, 0)
    rival = failover.spawn_rival("redis://" .. r2.host .. ":" .. r2.port, "unannounced", 2, "keep", 0.01)
    helpers.sleep(0.5)
    assert(sen:failover(sen.list[1]))
    assert(helpers.wait_until(function() return topology.role(r2) == "master" end, 10, 0.002), "R2 not promoted")
    sen.list[1]:kill("STOP")
    local t_stop = helpers.monotime()
    helpers.sleep(6)
    check("an unannounced replica promoted, the leader hung", t_acq, t_stop, holder, rival)
  end)
end)

describe("what the acknowledgements cost (issue 29)", function()
  it("one WAIT per round; a replica down costs credit until the sentinels mark it down", function()
    local rep, sen = replicated(2, 60000)
    local c
    finally(function()
      if c then c:close() end
      sen:stop()
      rep:stop()
    end)
    c = assert(redislock.connect { url = sentinel_url(sen), connect_timeout = 1, timeout = 1 })
    local lock = assert(c:acquire("two", { ttl = 5 }))
    local short = assert(c:acquire("short", { ttl = 0.5 }))
    helpers.sleep(0.6)
    local s = c:stats()
    assert.is_true(s.renewal_waits > 0, "no WAIT behind the renewals")
    assert.is_true(s.renewal_waits <= s.round_trips + 2, "more than one WAIT a round")
    assert.equal(0, s.renewals_unacked)
    assert.is_true(lock:extend())
    -- replica 2 killed: nothing is acknowledged by both until the
    -- sentinels mark it down (down-after 1 s), then the other one is
    -- enough; the short lease runs out meanwhile, the long one does not
    rep.replicas[2]:kill("KILL")
    assert(helpers.wait_until(function() return not short:held() end, 3, 0.01), "the short lease outlived it")
    assert.equal("unreachable", short.lost_reason)
    helpers.sleep(5)   -- (past the long lease: only renewals credited since keep it)
    assert.is_true(lock:held(), "lost after the sentinels marked the replica down: " .. tostring(lock.lost_reason))
    assert.is_true(lock:extend())
    -- the other replica stalled (up, its link held): it could be
    -- promoted, it has nothing: no credit, the lease runs out
    rep.links[1]:command("hold", "all", "both")
    local ok, err, kind = lock:extend()
    assert.is_nil(ok)
    assert.equal("replicas", kind)
    assert.matches("^replicas: 0 of 1 acknowledged: the lease counts as before", err)
    assert(helpers.wait_until(function() return not lock:held() end, 6, 0.01), "still held")
    assert.equal("unreachable", lock.lost_reason)
    assert.is_true(c:stats().renewals_unacked > 0)
  end)

  -- The second review's: replication straight to the master (no proxy),
  -- where a dead replica's last report says it still follows the master.
  local function replica_killed(n)
    local rep = topology.start_replicated { replicas = n }
    local servers = { rep.master }
    for _, r in ipairs(rep.replicas) do servers[#servers + 1] = r end
    local sen, c
    finally(function()
      if c then c:close() end
      if sen then sen:stop() end
      rep:stop()
    end)
    sen = topology.start_sentinels { master = rep.master, down_after_ms = 1000, failover_timeout_ms = 60000,
                                     servers = servers }
    c = assert(redislock.connect { url = sentinel_url(sen), connect_timeout = 1, timeout = 1 })
    local lock = assert(c:acquire("killed" .. n, { ttl = 5 }))
    helpers.sleep(0.6)
    assert.is_true(lock:extend())
    rep.replicas[n]:kill("KILL")
    helpers.sleep(3)   -- (down-after 1 s, then a pass)
    assert.is_true(lock:extend())
    helpers.sleep(4)   -- (past the lease: only renewals credited since keep it)
    assert.is_true(lock:held(), "lost: " .. tostring(lock.lost_reason))
    assert.is_true(lock:release())
  end

  it("two replicas, one killed: renewals credited again once the sentinels mark it down", function()
    replica_killed(2)
  end)

  it("the only replica killed: renewals credited again once the sentinels mark it down", function()
    replica_killed(1)
  end)

  it("a master with no replica: nothing waited for", function()
    local master = helpers.start_redis()
    local sen, c
    finally(function()
      if c then c:close() end
      if sen then sen:stop() end
      master:stop()
    end)
    sen = topology.start_sentinels { master = master, replicas = 0 }
    c = assert(redislock.connect { url = sentinel_url(sen), connect_timeout = 1, timeout = 1 })
    local lock = assert(c:acquire("alone", { ttl = 0.3 }))
    helpers.sleep(0.5)
    assert.is_true(lock:held())
    assert.is_true(lock:extend())
    assert.equal(0, c:stats().renewal_waits)
    assert.is_true(lock:release())
  end)

  -- The review's: a renewal in flight when a replica attaches (the
  -- master's replicas go from 0 to 1) had no WAIT behind it, and its answer
  -- was held for one that never came: the lock was never renewed again.
  -- The sentinels reach the master through a proxy that delays every
  -- answer 400 ms, so that renewals are in flight most of the time.
  it("a replica attaching while a renewal is in flight: renewals go on", function()
    local m = helpers.start_redis { args = { "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0" } }
    local p, sen, c, r
    finally(function()
      if c then c:close() end
      if sen then sen:stop() end
      if r then r:stop() end
      if p then p:stop() end
      m:stop()
    end)
    p = helpers.start_proxy(m)
    sen = topology.start_sentinels { master = { host = "127.0.0.1", port = p.port }, replicas = 0,
                                     down_after_ms = 5000 }
    p:command("delay", "all", "down", 400)
    c = assert(redislock.connect { url = sentinel_url(sen), connect_timeout = 1, timeout = 1 })
    local lock = assert(c:acquire("attach", { ttl = 3 }))
    helpers.sleep(2.5)
    assert.is_true(lock:held())
    assert.equal(0, c:stats().renewal_waits)
    r = helpers.start_redis { replicaof = m }
    local t0 = helpers.monotime()
    while helpers.monotime() - t0 < 5 do
      assert.is_true(lock:held(), "lost with master and replica healthy: " .. tostring(lock.lost_reason))
      helpers.sleep(0.05)
    end
    assert.is_true(c:stats().renewal_waits > 0, "the replica never counted")
    assert.is_true(lock:release())
  end)
end)

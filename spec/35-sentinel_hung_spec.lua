-- Issue 29: a renewal answered by a master the sentinels have replaced must
-- never keep a lock held (SAFETY.md, "A rival that never sees the doubt").
--
-- Real processes on loopback, a fresh set per scenario: 1 master, 1 replica
-- (diskless sync, no delay), 3 sentinels (quorum 2, down-after 1000 ms,
-- failover-timeout 4000 ms). The holder (spec/support/hung_holder.lua)
-- connects through the sentinels with connect_timeout = 1 and timeout = 1,
-- takes the name with the watchdog (ttl 3 s) and logs held() every 10 ms. A
-- rival (spec/support/failover_rival.lua) connected straight to the
-- replica's address (as a client that already follows the new master, or
-- another application, would be) tries acquire(wait = 0) every 10 ms. One
-- sentinel is SIGSTOPped (hung, not dead), then SENTINEL FAILOVER goes to a
-- healthy one. The old master answers as a master until Sentinel demotes
-- it, about 10 s later; the scenario watches until then and 2 s more.
--
-- The checker (spec/support/failover.lua) counts the rival's grants made
-- while the holder's held() was true: it must be 0 in every row. Each row
-- prints a "# ..." line: those grants, how the holder lost the lock if it
-- did, and how long after a sentinel named the new master the holder's
-- first renewal reached it (seen from outside, from the key's PTTL).
-- HUNG_LOGS=DIR keeps the processes' logs there.
local helpers = require "spec.helpers"
local topology = require "spec.support.topology"
local failover = require "spec.support.failover"
local redislock = require "redislock"

local TTL = 3
local AFTER_DEMOTION, OBSERVE_MAX = 2, 20

describe("Sentinel failover with one sentinel hung (issue 29)", function()
  -- hung: the index of the SIGSTOPped sentinel (nil: none); replicas: the
  -- holder's acquire option.
  local function scenario(hung, replicas, label)
    local rep = topology.start_replicated { replicas = 1 }
    local old, new = rep.master, rep.replicas[1]
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
    sen = topology.start_sentinels { master = old, down_after_ms = 1000, failover_timeout_ms = 4000,
                                     servers = { old, new } }
    local url = "redis+sentinel://" .. table.concat(failover.seeds(sen), ",") .. "/mymaster"
    local name = "hung:" .. tostring(hung) .. ":" .. replicas
    local t_acq, key, token
    holder, t_acq, key, token = failover.spawn_holder("spec/support/hung_holder.lua", url, name, TTL, replicas)
    rival = failover.spawn_rival("redis://" .. new.host .. ":" .. new.port, name, 2, "keep", 0.01)

    -- the healthy sentinels: the watch asks only them (a hung one never answers)
    local healthy = {}
    for i, s in ipairs(sen.list) do
      if i ~= hung then healthy[#healthy + 1] = s end
    end
    local view = { list = healthy, master_addr = function(_, s) return sen:master_addr(s) end }
    local w = failover.watch { sen = view, old = old, new = new, key = key, token = token, ttl = TTL }
    helpers.sleep(0.3)
    if hung then sen.list[hung]:kill("STOP") end
    w.t_fault = helpers.monotime()
    local done, out = sen:failover(healthy[1])
    assert(done, "SENTINEL FAILOVER: " .. tostring(out))
    local ok, err = pcall(function()
      while true do
        w:tick()
        local now = helpers.monotime()
        if not w.t_named then
          assert(now - w.t_fault < 20, "no failover: the sentinels still name the old master")
        elseif now >= (w.t_demoted or math.huge) + AFTER_DEMOTION or now >= w.t_named + OBSERVE_MAX then
          break
        end
        helpers.sleep(0.05)
      end
    end)
    w:close()
    if hung then sen.list[hung]:kill("CONT") end
    if not ok then error(err, 0) end
    rival:kill("TERM")
    rival:wait(5)
    holder:kill("TERM")
    holder:wait(5)
    local log = holder:stdout()
    local keep_logs = os.getenv("HUNG_LOGS")
    if keep_logs then
      local f = assert(io.open(("%s/%s.log"):format(keep_logs, name:gsub("[^%w]", "_")), "w"))
      f:write(("# t_fault %.6f t_named %s\n"):format(w.t_fault, tostring(w.t_named)), log, holder:stderr(),
        "\n# rival\n", rival:stdout(), rival:stderr())
      f:close()
    end
    local grants = failover.rival_grants(rival:stdout())
    local bad, list, last_true, revived = failover.grants_while_held(t_acq, failover.held_samples(log), grants)
    local t_lost, reason = log:match("\nlost (%S+) ([^\n]+)")
    local function at(t) return t and ("+" .. failover.seconds(tonumber(t) - w.t_fault)) or "never" end
    print(("\n# %s: rival grants while held %d of %d (first %s); held() true until %s; lost %s%s;"
      .. " first renewal on the new master %s after the naming; named %s, demoted %s"):format(
      label, bad, #grants, at(list[1] and list[1][2]), at(last_true), at(t_lost),
      reason and (" as '" .. reason .. "'") or "", failover.seconds(w.t_renew and w.t_renew - w.t_named),
      at(w.t_named), at(w.t_demoted)))
    assert.equal(0, revived, "held() said true again after false")
    assert.equal(0, bad, "rival grants while the holder's held() was true")
  end

  it("no sentinel hung (control): no rival grant while held", function()
    scenario(nil, 0, "no sentinel hung")
  end)

  for k = 1, 3 do
    it(("sentinel %d hung: no rival grant while held"):format(k), function()
      scenario(k, 0, ("sentinel %d hung"):format(k))
    end)
  end

  it("replicas = 1 (WAIT), sentinel 2 hung: no rival grant while held", function()
    scenario(2, 1, "replicas = 1, sentinel 2 hung")
  end)
end)

-- Rule 1 of issue 29, by itself: a renewal earns credit only once a
-- replica acknowledged it (csrc/watchdog/wd_ack.c). The sentinels keep
-- naming the master here, so only that rule can tell the holder that what
-- it renews no longer reaches the replica a failover would promote.
describe("a renewal no replica acknowledged earns no credit (issue 29)", function()
  local function sentinel_url(sen)
    return "redis+sentinel://" .. table.concat(failover.seeds(sen), ",") .. "/mymaster"
  end

  it("the replica's link stalled, then the replica promoted by hand: no rival grant while held", function()
    local rep = topology.start_replicated { replicas = 1, link_proxy = true }
    local old, new = rep.master, rep.replicas[1]
    local sen, holder, rival
    finally(function()
      if rival then rival:stop() end
      if holder then holder:stop() end
      if sen then sen:stop() end
      rep:stop()
    end)
    sen = topology.start_sentinels { master = old, servers = { old, new } }
    local t_acq
    holder, t_acq = failover.spawn_holder("spec/support/hung_holder.lua", sentinel_url(sen), "stall", 1, 0)
    helpers.sleep(0.7)   -- (two renewals, acknowledged)
    -- Replication stalls (the link stays open: the master still counts
    -- the replica as connected), and the replica takes over by hand with
    -- the lease it had: the sentinels go on naming the old master, which
    -- goes on answering the holder's renewals.
    rep.links[1]:command("hold", "all", "both")
    local t_stall = helpers.monotime()
    helpers.sleep(0.2)
    assert(new:cli("REPLICAOF", "NO", "ONE"))
    rival = failover.spawn_rival("redis://" .. new.host .. ":" .. new.port, "stall", 1, "keep", 0.01)
    helpers.wait_until(function() return failover.rival_grants(rival:stdout())[1] ~= nil end, 5, 0.05)
    helpers.sleep(0.5)
    rival:kill("TERM")
    rival:wait(5)
    holder:kill("TERM")
    holder:wait(5)
    local log = holder:stdout()
    local grants = failover.rival_grants(rival:stdout())
    local bad, _, last_true = failover.grants_while_held(t_acq, failover.held_samples(log), grants)
    local t_lost, reason = log:match("\nlost (%S+) ([^\n]+)")
    print(("\n# link stalled: rival grants while held %d of %d (first +%s); held() true until +%s; lost %s"):format(
      bad, #grants, grants[1] and failover.seconds(grants[1][2] - t_stall) or "never",
      failover.seconds(last_true and last_true - t_stall), t_lost and ("+" .. failover.seconds(t_lost - t_stall)
        .. " as '" .. reason .. "'") or "never"))
    assert.is_true(#grants > 0, "the rival was never granted the name on the promoted replica")
    assert.equal(0, bad, "rival grants while the holder's held() was true")
    assert.equal("unreachable", reason)
  end)

  it("costs one WAIT per round; with two replicas, one stalled costs nothing; with one, its locks", function()
    local rep = topology.start_replicated { replicas = 2, link_proxy = true }
    local sen, c
    finally(function()
      if c then c:close() end
      if sen then sen:stop() end
      rep:stop()
    end)
    sen = topology.start_sentinels { master = rep.master, servers = { rep.master, rep.replicas[1], rep.replicas[2] } }
    c = assert(redislock.connect { url = sentinel_url(sen), connect_timeout = 1, timeout = 1 })
    local lock = assert(c:acquire("two", { ttl = 0.5 }))
    helpers.sleep(0.5)
    local s = c:stats()
    assert.is_true(s.renewal_waits > 0, "no WAIT behind the renewals")
    assert.is_true(s.renewal_waits <= s.round_trips + 2, "more than one WAIT a round")
    assert.equal(0, s.renewals_unacked)
    -- one replica of two stalled: the other acknowledges
    rep.links[1]:command("hold", "all", "both")
    helpers.sleep(1.5)
    assert.is_true(lock:held(), "lost with one replica of two stalled: " .. tostring(lock.lost_reason))
    assert.is_true(lock:extend())
    -- both stalled: nothing is acknowledged, the lease runs out
    rep.links[2]:command("hold", "all", "both")
    local ok, err, kind = lock:extend()
    assert.is_nil(ok)
    assert.equal("replicas", kind)
    assert.matches("^replicas: 0 of 1 acknowledged: the lease counts as before", err)
    assert(helpers.wait_until(function() return not lock:held() end, 2, 0.01), "still held")
    assert.equal("unreachable", lock.lost_reason)
    assert.is_true(c:stats().renewals_unacked > 0)
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
end)

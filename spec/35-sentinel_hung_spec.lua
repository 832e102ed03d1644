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

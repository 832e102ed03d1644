-- Issue 22: a replicated lock through a Sentinel failover (SAFETY.md,
-- "Sentinel failover with a replicated lock"). Real processes on loopback,
-- a fresh set per scenario: 1 master, 1 replica (diskless sync, no delay),
-- 3 sentinels with down-after-milliseconds 1000.
--
-- A holder process (spec/support/failover_holder.lua) takes the name with
-- the watchdog, ttl 8 s, replicas = 1 (WAIT 1 acknowledged it), and logs
-- held() every 50 ms; two rival processes (spec/support/failover_rival.lua)
-- try the name every 50 ms through the sentinels, one with a client kept
-- for the whole run, one with a new client per try, and log every grant.
-- The checker (spec/support/failover.lua) counts the rival grants made
-- while the holder's held() was true: it must be 0. Then the lock must
-- still be the holder's on the new master, and a grant the holder asks for
-- after the switch must land on the new master. Scenarios:
--   1. SENTINEL FAILOVER alone: the old master answers as a master for
--      about 10 s more, until Sentinel demotes it;
--   2. SENTINEL FAILOVER, then the old master SIGSTOPped 2 s and resumed;
--   3. the master SIGSTOPped 4 s: Sentinel fails over by itself, and the
--      old master comes back as a second master until it is demoted.
-- Each prints "# ..." lines: rival grants while held, all rival grants,
-- and how long after a sentinel named the new master the holder's first
-- renewal or grant reached it (seen from outside, from the key's PTTL).
-- FAILOVER_LOGS=DIR keeps the processes' logs there.
local helpers = require "spec.helpers"
local topology = require "spec.support.topology"
local failover = require "spec.support.failover"

local TTL = 8            -- the holder's lease
local RIVAL_TTL = 2      -- a rival's grant is released at once anyway

describe("Sentinel failover with a replicated lock (issue 22)", function()
  -- One scenario; kind: "failover", "failover_pause", "master_pause".
  local function scenario(kind, label)
    local rep = topology.start_replicated { replicas = 1 }
    local sen, holder
    local rivals = {}
    local old, new = rep.master, rep.replicas[1]
    finally(function()
      for _, r in ipairs(rivals) do r:stop() end
      if holder then holder:stop() end
      old:kill("CONT")
      new:kill("CONT")
      if sen then sen:stop() end
      rep:stop()
    end)
    sen = topology.start_sentinels { master = old, down_after_ms = 1000, servers = { old, new } }
    local seeds = failover.seeds(sen)
    local name = "fo:" .. kind
    local control = helpers.tmpdir() .. "/control"
    local function command(line)
      local f = assert(io.open(control, "a"))
      f:write(line, "\n")
      f:close()
    end

    local t_acq, key, token
    holder, t_acq, key, token = failover.spawn_holder("spec/support/failover_holder.lua", table.concat(seeds, ","),
      name, TTL, control)
    -- replicated: WAIT 1 acknowledged it, the replica has it
    assert.equal(token, (new:cli_raw("GET", key)))
    for i, mode in ipairs { "keep", "fresh" } do
      rivals[i] = failover.spawn_rival(seeds, name, RIVAL_TTL, mode)
    end
    -- the rivals find the name busy; the fault comes 2 s after the grant,
    -- before the watchdog's first renewal (at a third of the ttl), so the
    -- lease the replica has ends 6 s after the fault in every scenario
    helpers.sleep(math.max(0.5, t_acq + 2 - helpers.monotime()))
    assert.same({}, failover.rival_grants(rivals[1]:stdout() .. rivals[2]:stdout()))

    local w = failover.run_fault { kind = kind, sen = sen, old = old, new = new, name = name, key = key,
      token = token, ttl = TTL,
      -- the holder process takes the second name and logs the outcome
      grant = function(second, asked)
        if not asked then command("grant " .. second) end
        local out = holder:stdout()
        local t, k, v = out:match("\ngrant (%S+) (%S+) (%x+)")
        if t then return { t = tonumber(t), key = k, token = v } end
        local why = out:match("\ngrantfail %S+ ([^\n]*)")
        if why then return { fail = why } end
      end }

    -- what the new master has now; the rivals stopped before the holder
    -- lets go (their later grants would be legitimate)
    local kept_value = new:cli_raw("GET", key)
    for _, r in ipairs(rivals) do r:kill("TERM") end
    for _, r in ipairs(rivals) do r:wait(5) end
    command("stop")
    holder:wait(10)
    local log = holder:stdout()
    local keep_logs = os.getenv("FAILOVER_LOGS")
    if keep_logs then
      local function save(file, text)
        local f = assert(io.open(keep_logs .. "/" .. kind .. "." .. file, "w"))
        f:write(("# t_fault %.6f t_named %s\n"):format(w.t_fault, tostring(w.t_named)), text)
        f:close()
      end
      save("holder", log .. holder:stderr())
      for _, r in ipairs(rivals) do save(r.mode, r:stdout() .. r:stderr()) end
    end
    local r = failover.summary { label = label, w = w, t_acquired = t_acq, samples = failover.held_samples(log),
      rivals = rivals, token = token, kept_value = kept_value }
    print("\n" .. r.line)

    assert.equal(0, r.revived, "held() said true again after false")
    assert.equal(0, r.bad, "rival grants while the holder's held() was true")
    if r.keepable then
      assert.equal(token, kept_value, "the lock is not the holder's on the new master")
      assert.is_true(r.held_at_end, "the holder lost the lock")
      assert.equal("released OK", log:match("released [^\n]*"))
    end
    assert(not w.grant.fail, "the holder's grant after the switch failed: " .. tostring(w.grant.fail))
    assert.is_true(w.grant.on_new, "the holder's grant after the switch is not on the new master")
  end

  it("SENTINEL FAILOVER alone: no rival grant while held, the lock kept on the new master", function()
    scenario("failover", "SENTINEL FAILOVER")
  end)

  it("SENTINEL FAILOVER, then the old master SIGSTOPped 2 s: no rival grant while held", function()
    scenario("failover_pause", "SENTINEL FAILOVER, the old master then stopped 2 s")
  end)

  it("the master SIGSTOPped 4 s, Sentinel failing over by itself: no rival grant while held", function()
    scenario("master_pause", "the master stopped 4 s")
  end)
end)

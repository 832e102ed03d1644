-- The short torture run: 8 processes, every fault kind, the checker's
-- verdict. `make torture DURATION=300` is the long run.
local helpers = require "spec.helpers"

describe("torture (short)", function()
  it("8 workers under every fault: no overlap, no lost or stale fenced write, the control fails", function()
    local seed = os.getenv("REDISLOCK_TORTURE_SEED") or tostring(os.time())
    -- a fault every 1.2 s: every one of the 9 kinds fits in 30 s, pauses included
    local p = helpers.spawn(helpers.lua_cmd("test/torture/run.lua", "--duration", 30, "--procs", 8,
      "--interval", 1.2, "--seed", seed))
    local code = p:wait(120)
    local out = p:stdout()
    print("\n" .. out:gsub("\n", "\n# "))
    assert.equal(0, code, out .. p:stderr())
    assert.matches("overlaps %(a single healthy Redis: must be 0%)%s+0\n", out)
    assert.matches("fenced: lost updates %(must be 0%)%s+0\n", out)
    assert.matches("fenced: stale writes accepted %(must be 0%)%s+0\n", out)
    local control = tonumber(out:match("control: lost updates %(must be > 0%)%s+(%d+)"))
    assert.is_true(control > 0, "the negative control lost nothing: the checker cannot fail")
    for kind in out:gmatch("fault: (%S+)%s+0\n") do error("fault never injected: " .. kind) end
    assert.matches("torture: PASS", out)
  end)

  it("with PostgreSQL as the resource store: no lost or stale fenced sale, the control fails", function()
    local seed = os.getenv("REDISLOCK_TORTURE_SEED") or tostring(os.time())
    -- the first case's run, the resource store aside
    local p = helpers.spawn(helpers.lua_cmd("test/torture/run.lua", "--duration", 30, "--procs", 8,
      "--interval", 1.2, "--seed", seed, "--resource", "postgres"))
    local code = p:wait(120)
    local out = p:stdout()
    print("\n" .. out:gsub("\n", "\n# "))
    assert.equal(0, code, out .. p:stderr())
    assert.matches("resource store%s+PostgreSQL", out)
    for kind in out:gmatch("fault: (%S+)%s+0\n") do error("fault never injected: " .. kind) end
    assert.matches("overlaps %(a single healthy Redis: must be 0%)%s+0\n", out)
    assert.matches("fenced: lost updates %(must be 0%)%s+0\n", out)
    assert.matches("fenced: stale writes accepted %(must be 0%)%s+0\n", out)
    local control = tonumber(out:match("control: lost updates %(must be > 0%)%s+(%d+)"))
    assert.is_true(control > 0, "the negative control lost nothing: the checker cannot fail")
    assert.matches("torture: PASS", out)
  end)

  it("over Sentinel, with failovers: no overlap outside a failover, no lost or stale fenced write", function()
    local seed = os.getenv("REDISLOCK_TORTURE_SEED") or tostring(os.time())
    -- failovers wait for Sentinel to demote the old master (about 10 s),
    -- and issue 22's two (failover_pause, auto_failover) for a replica
    -- Sentinel can promote: 80 s fit every kind once (60 s did, barely)
    local p = helpers.spawn(helpers.lua_cmd("test/torture/run.lua", "--duration", 80, "--procs", 6,
      "--interval", 1.5, "--seed", seed, "--sentinel", 1))
    local code = p:wait(180)
    local out = p:stdout()
    print("\n" .. out:gsub("\n", "\n# "))
    assert.equal(0, code, out .. p:stderr())
    assert.matches("overlaps %(a single healthy Redis: must be 0%)%s+0\n", out)
    assert.matches("fenced: lost updates %(must be 0%)%s+0\n", out)
    assert.matches("fenced: stale writes accepted %(must be 0%)%s+0\n", out)
    assert.matches("fault: failover%s+[1-9]", out)
    assert.matches("torture: PASS", out)
  end)

  it("Redlock over 3 masters, one master failing at a time: no overlap at all", function()
    local seed = os.getenv("REDISLOCK_TORTURE_SEED") or tostring(os.time())
    local p = helpers.spawn(helpers.lua_cmd("test/torture/run.lua", "--duration", 30, "--procs", 6,
      "--interval", 1.2, "--seed", seed, "--redlock", 3))
    local code = p:wait(120)
    local out = p:stdout()
    print("\n" .. out:gsub("\n", "\n# "))
    assert.equal(0, code, out .. p:stderr())
    assert.matches("overlaps %(a single healthy Redis: must be 0%)%s+0\n", out)
    assert.matches("fault: master_restart%s+[1-9]", out)
    assert.matches("torture: PASS", out)
  end)
end)

-- What a call says during a plain failover (issue 33, point 6): Sentinel's
-- "failover in progress" and "no master confirmed yet", never "no sentinel
-- reachable" while every sentinel is up; Cluster's "no master confirmed
-- yet" during CLUSTER FAILOVER, never "the cluster is resharding". Always
-- of kind connection, and within the call's deadline. (The words for each
-- kind of redirect, deterministically: test/c/exec_tries_test.c.)
local helpers = require "spec.helpers"
local topology = require "spec.support.topology"
local redislock = require "redislock"

-- A tick of slack over a deadline, on a loaded machine.
local TICK = 0.3

local function check_failure(err, kind, took, deadline, what)
  assert.equal("connection", kind, what .. ": " .. tostring(err))
  assert(took < deadline + TICK, what .. ": took " .. took .. " s")
  assert.is_nil(err:find("no sentinel reachable", 1, true), err)
  assert.is_nil(err:find("resharding", 1, true), err)
  assert.is_nil(err:find("too many redirects", 1, true), err)
end

describe("Sentinel, during a failover", function()
  local fx = topology.sentinel_fixture { replicas = 1 }

  local function connect()
    return redislock.connect { sentinels = fx.seeds, master = "mymaster", connect_timeout = 1, timeout = 1 }
  end

  -- SENTINEL FAILOVER, once Sentinel takes one (after the last, it waits
  -- for the demoted master to be a good replica)
  local function start_failover()
    return helpers.wait_until(function() return (fx.sen:failover()) end, 30, 0.2)
  end

  -- Calls and connects for `seconds`: the failures seen, by message.
  local function during(c, seconds)
    local seen, n = {}, 0
    local t0 = helpers.monotime()
    while helpers.monotime() - t0 < seconds do
      local t1 = helpers.monotime()
      local l, err, kind = c:acquire("f" .. n, { ttl = 1, wait = 0 })
      n = n + 1
      if l then
        l:release()
      else
        check_failure(err, kind, helpers.monotime() - t1, 2, "acquire")
        seen[#seen + 1] = err
      end
      t1 = helpers.monotime()
      local c2, err2, kind2 = connect()
      if c2 then
        c2:close()
      else
        check_failure(err2, kind2, helpers.monotime() - t1, 1, "connect")
        seen[#seen + 1] = err2
      end
      helpers.sleep(0.02)
    end
    return seen
  end

  it("a failover that stays in progress says so, and no master confirmed yet", function()
    assert(helpers.wait_until(function() return fx.sen:ready(1) end, 30, 0.1))
    local c = assert(connect())
    assert(fx.rep:wait_sync(30))
    local _, port = fx.sen:master_addr()
    local replica = port == fx.rep.master.port and fx.rep.replicas[1] or fx.rep.master
    -- the replica chosen cannot answer: the failover stays in progress
    -- until Sentinel's failover-timeout (3 s), then is given up
    assert(start_failover())
    replica:kill("STOP")
    local ok, seen = pcall(during, c, 2.5)
    replica:kill("CONT")
    assert(ok, seen)
    assert(#seen > 0, "no call failed while the failover was in progress")
    for _, err in ipairs(seen) do
      assert(err:find("failover in progress", 1, true) or err:find("no master confirmed yet", 1, true), err)
    end
    c:close()
  end)

  it("a plain SENTINEL FAILOVER: whatever fails is of kind connection, and never blames the sentinels", function()
    assert(helpers.wait_until(function() return fx.sen:ready(1) end, 30, 0.1))
    local c = assert(connect())
    assert(fx.rep:wait_sync(30))
    local _, old = fx.sen:master_addr()
    assert(start_failover())
    -- (check_failure looks at each: besides the failover's own words, a
    -- request the old master took and never answered as it was demoted
    -- says just that, it timed out; a grant that came after its 1 s lease
    -- says "connection too slow")
    during(c, 3)
    assert(fx.sen:wait_master_change("127.0.0.1:" .. old, 20))
    c:close()
  end)
end)

describe("Cluster, during CLUSTER FAILOVER", function()
  local cl
  setup(function() cl = topology.start_cluster { masters = 3, replicas = 1 } end)
  teardown(function() cl:stop() end)

  it("calls go on, or say no master is confirmed yet: never that the cluster is resharding", function()
    local c = assert(redislock.connect { cluster = cl.seeds, connect_timeout = 1, timeout = 1 })
    local calls, failed = 0, 0
    for round = 1, 3 do
      local master = cl:masters()[round]
      local replica = cl:replicas(master)[1]
      local names = {}
      for i = 1, 50 do names[i] = cl:key_on(master, "f" .. round .. "_" .. i) end
      assert.equal("OK", replica:cli_raw("CLUSTER", "FAILOVER"))
      local t0 = helpers.monotime()
      while helpers.monotime() - t0 < 2 do
        for _, name in ipairs(names) do
          local t1 = helpers.monotime()
          local l, err, kind = c:acquire(name, { ttl = 1, wait = 0 })
          calls = calls + 1
          if l then
            l:release()
          elseif kind ~= "busy" then   -- (a release that went to the old master, just demoted)
            failed = failed + 1
            check_failure(err, kind, helpers.monotime() - t1, 1, "acquire")
            assert(err:find("no master confirmed yet", 1, true) or err:find("connection lost", 1, true), err)
            if failed <= 3 then print("# " .. err) end
          end
        end
      end
      assert(cl:wait_ok(15))
    end
    print(("\n# CLUSTER FAILOVER x3: %d calls, %d failed"):format(calls, failed))
    c:close()
  end)
end)

-- One process, many clients: one renewal thread for all of them
-- (csrc/watchdog/wd_thread.c); clients configured the same share one
-- topology (one thread following the sentinels, one subscription per
-- sentinel: csrc/topo/topo_share.c), each keeps its own locks through a
-- failover, and closing one leaves the others following; and fork while
-- those threads work leaves every child free to finish (the topologies'
-- mutexes are taken around fork, as the watchdogs' are).
-- Real processes on loopback: 1 master, 1 replica, 3 sentinels.
local helpers = require "spec.helpers"
local topology = require "spec.support.topology"
local redislock = require "redislock"
local process = require "redislock.process"
local core = require "redislock.core"

local function threads_named(name) return helpers.threads_named(core.getpid(), name) end
local function conns_to(port) return helpers.conns_to(core.getpid(), port) end

describe("clients of one process", function()
  local fx = topology.sentinel_fixture { replicas = 1 }

  local fresh = helpers.names("share")

  local function connect(extra)
    local opts = { sentinels = fx.seeds, master = "mymaster", connect_timeout = 1, timeout = 1 }
    for k, v in pairs(extra or {}) do opts[k] = v end
    return assert(redislock.connect(opts))
  end

  it("configured the same share one topology thread, and each keeps its locks through a failover", function()
    local before = threads_named("redislock-topo")
    local clients, locks = {}, {}
    for i = 1, 20 do
      clients[i] = connect()
      locks[i] = assert(clients[i]:acquire(fresh(), { ttl = 5 }))
    end
    assert.equal(before + 1, threads_named("redislock-topo"))
    -- and one renewal thread for every client of the process
    assert.equal(1, threads_named("redislock-wd"))
    -- one subscription and one pass connection per sentinel for all 20
    for _, a in ipairs(fx.sen:addrs()) do
      assert.is_true(conns_to(a.port) <= 2, "connections to sentinel " .. a.port .. ": " .. conns_to(a.port))
    end
    -- another configuration: a topology of its own
    local other = connect { timeout = 2 }
    assert(other:acquire(fresh(), { ttl = 1 })):release()
    assert.equal(before + 2, threads_named("redislock-topo"))
    other:close()
    assert.equal(before + 1, threads_named("redislock-topo"))
    -- closing some leaves the others following
    for i = 11, 20 do
      assert.is_true(locks[i]:release())
      clients[i]:close()
    end
    local old = fx.sen:master_addr()
    fx.sen:failover()
    fx.sen:wait_master_change(old, 20)
    helpers.sleep(6)   -- past a ttl: renewed on the new master, or lost
    local master = fx.sen:server_at(nil, select(2, fx.sen:master_addr()), { fx.rep.master, fx.rep.replicas[1] })
    for i = 1, 10 do
      assert.is_true(locks[i]:held(), "lock " .. i)
      assert.equal(locks[i].token, (master:cli_raw("GET", locks[i]._keys.lock)))
      assert.is_true(locks[i]:release())
      clients[i]:close()
    end
    assert.equal(before, threads_named("redislock-topo"))
    -- (the last client gone, the renewal thread is joined: none left of ours)
    assert.equal(0, threads_named("redislock-wd"))
  end)

  it("forked a thousand times while failovers run, every child finishes", function()
    local c = connect { connect_timeout = 0.5, timeout = 0.5 }
    local held = assert(c:acquire(fresh(), { ttl = 5 }))
    local forks, hung, crashed, batch = 0, 0, 0, 8
    local failovers = 0
    local t0 = helpers.monotime()
    while forks < 1000 do
      if forks % 400 == 0 then
        -- a failover under way for the next few hundred forks: the
        -- topology's thread is busy (events, passes every 100 ms)
        pcall(function() fx.sen:failover() end)
        failovers = failovers + 1
      end
      local pids = {}
      for i = 1, batch do
        local pid = assert(process.fork())
        if pid == 0 then
          -- the child: the shared topology, its mutexes, a request of its
          -- own (which starts threads of its own), then out without
          -- running the parent's finalizers
          pcall(function()
            local l = c:acquire(fresh(), { ttl = 1, wait = 0 })
            if l then l:release() end
          end)
          process._exit(0)
        end
        pids[i] = pid
      end
      for _, pid in ipairs(pids) do
        local deadline = helpers.monotime() + 10
        local done
        repeat
          local got, how = process.waitpid(pid, true)
          done = got ~= 0   -- (0: still running)
          -- (a child that died of a signal crashed: it exits 0 otherwise)
          if done and how ~= "exited" then crashed = crashed + 1 end
          if not done then helpers.sleep(0.005) end
        until done or helpers.monotime() > deadline
        if not done then
          hung = hung + 1
          process.kill(pid, "KILL")
          process.waitpid(pid)
        end
      end
      forks = forks + batch
    end
    print(string.format("\n# %d forks in %.1f s across %d failovers: %d children hung, %d crashed", forks,
      helpers.monotime() - t0, failovers, hung, crashed))
    assert.equal(0, hung)
    assert.equal(0, crashed)
    -- the parent's own threads still work: its lock held or reported (two
    -- failovers this close may drop a lease: docs/topology.md's limits),
    -- and a new lock taken and released once the sentinels agree
    local ok = held:held()
    assert.is_true(ok or held.lost_reason == "not held" or held.lost_reason == "unreachable",
      tostring(held.lost_reason))
    if ok then held:release() end
    local l = assert(c:acquire(fresh(), { ttl = 5, wait = 20 }))
    assert.is_true(l:held())
    assert.is_true(l:release())
    c:close()
  end)
end)

describe("waits of one client, renewals of another that shares its topology", function()
  local fx = topology.sentinel_fixture { replicas = 1 }
  local fresh = helpers.names("swait")

  local function connect(extra)
    local opts = { sentinels = fx.seeds, master = "mymaster", connect_timeout = 1, timeout = 1 }
    for k, v in pairs(extra or {}) do opts[k] = v end
    return assert(redislock.connect(opts))
  end

  -- A bystander's short lock (ttl 0.3 s) renewed for `seconds` while four
  -- waiters (configured as waiter_extra says) wait 30 ms for a held name
  -- again and again: the renewals that failed meanwhile, and the waits.
  local function run(waiter_extra, seconds)
    local a, b = connect(), connect()
    local waiters = {}
    for i = 1, 4 do waiters[i] = connect(waiter_extra) end
    local la = assert(a:acquire(fresh(), { ttl = 0.3 }))
    local k = fresh()
    local lk = assert(b:acquire(k, { ttl = 30 }))
    local f0 = a:stats().failures
    local t_end = helpers.monotime() + seconds
    local waits, other = 0, nil
    while helpers.monotime() < t_end do
      for _, c in ipairs(waiters) do
        local l, err, kind = c:acquire(k, { wait = 0.03 })
        assert.is_nil(l)
        waits = waits + 1
        if kind ~= "timeout" then other = other or err end
      end
    end
    local res = { failures = a:stats().failures - f0, held = la:held(), reason = la.lost_reason, waits = waits,
      other = other }
    if res.held then la:release() end
    lk:release()
    for _, c in ipairs(waiters) do c:close() end
    a:close()
    b:close()
    return res
  end

  -- (a wait that ends at its caller's deadline is no sign of a failing
  -- master: nothing of it may reach the other clients' renewals, which a
  -- doubt cast on the shared topology would void and hold back)
  it("a timed-out wait casts no doubt: the other clients' renewals go on", function()
    local sep = run({ timeout = 1.5 }, 4)   -- (another timeout: a topology of their own)
    local shared = run(nil, 4)
    print(string.format("\n# separate topology: %d waits, bystander renewal failures %d; shared: %d waits (%s),"
      .. " failures %d", sep.waits, sep.failures, shared.waits, tostring(shared.other), shared.failures))
    assert.equal(0, sep.failures)
    assert.equal(0, shared.failures)
    assert.is_true(shared.held, tostring(shared.reason))
  end)

  it("the same with one sentinel hung (SIGSTOP): every pass then waits for it", function()
    fx.sen.list[1]:kill("STOP")
    local ok, res = pcall(run, nil, 6)
    fx.sen.list[1]:kill("CONT")
    assert(ok, res)
    print(string.format("\n# one sentinel hung, shared topology: %d waits, bystander renewal failures %d,"
      .. " held %s (%s)", res.waits, res.failures, tostring(res.held), tostring(res.reason)))
    assert.equal(0, res.failures)
  end)
end)

-- A topology shared with a client that came before (csrc/topo/topo_share.c)
-- may still name a master the sentinels have left, until its thread's next
-- pass (once a second) or their next event: a new client's first connect
-- then asks the sentinels again instead of failing on that master.
describe("a client's first connect on a topology another client loaded", function()
  local fx = topology.sentinel_fixture { replicas = 1 }
  local fresh = helpers.names("share-first")

  it("asks the sentinels again when that topology's master does not answer", function()
    local opts = { sentinels = fx.seeds, master = "mymaster", connect_timeout = 1, timeout = 1 }
    local c1 = assert(redislock.connect(opts))
    local old, new = fx.rep.master, fx.rep.replicas[1]
    -- the master moves with no event the thread follows (no
    -- +switch-master): the replica made a master by hand, each sentinel
    -- told to watch it instead, the old master gone
    assert.equal("OK", new:cli_raw("REPLICAOF", "NO", "ONE"))
    for _, s in ipairs(fx.sen.list) do
      assert.equal("OK", s:cli_raw("SENTINEL", "REMOVE", "mymaster"))
      assert.equal("OK", s:cli_raw("SENTINEL", "MONITOR", "mymaster", "127.0.0.1", tostring(new.port), "2"))
    end
    old:kill("KILL")
    local c2, err = redislock.connect(opts)
    assert(c2, err)
    local l = assert(c2:acquire(fresh(), { ttl = 5 }))
    assert.equal(l.token, new:cli_raw("GET", l._keys.lock))
    assert.is_true(l:release())
    c2:close()
    c1:close()
  end)
end)

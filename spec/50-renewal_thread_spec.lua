-- One renewal thread per process, for every client's watchdog: a hung
-- server or a topology lookup of one client never delays another's
-- renewals; clients closed and collected while it renews; a fork child's
-- own thread.
local helpers = require "spec.helpers"
local redislock = require "redislock"
local core = require "redislock.core"
local process = require "redislock.process"

describe("one renewal thread", function()
  local fx = helpers.redis_fixture { raw = true, clients = 1 }
  local fresh = helpers.names("rwd")

  it("a hung server of one client never delays another client's renewals", function()
    local srv2 = helpers.start_redis()
    local proxy = helpers.start_proxy(srv2)
    local a = assert(redislock.connect { url = proxy.url, timeout = 5, connect_timeout = 5 })
    local b = assert(redislock.connect { url = fx.srv.url })
    local alocks = {}
    for i = 1, 200 do alocks[i] = assert(a:acquire(fresh(), { ttl = 6 })) end
    local bl = assert(b:acquire(fresh(), { ttl = 0.3 }))
    proxy:kill("STOP")
    local t0 = helpers.monotime()
    local min_pttl = math.huge
    while helpers.monotime() - t0 < 4 do
      assert.is_true(bl:held(), string.format("b lost after %.2f s", helpers.monotime() - t0))
      local pttl = fx.raw:command("PTTL", bl._keys.lock)
      if pttl < min_pttl then min_pttl = pttl end
      helpers.sleep(0.02)
    end
    print(string.format("\n# b's key: least pttl %d ms over 4 s, a hung", min_pttl))
    assert.is_true(min_pttl > 50)
    proxy:kill("CONT")
    assert.is_true(bl:release())
    for _, l in ipairs(alocks) do l:release() end   -- (kept referenced until here: never collected)
    a:close()
    b:close()
    proxy:kill("KILL")
  end)

  it("clients opened, closed and collected while the thread renews many short leases", function()
    -- (under valgrind every thread runs tens of times slower: leases to match)
    local scale = os.getenv("REDISLOCK_VALGRIND") and 20 or 1
    local clients, locks = {}, {}
    local worst, closes = 0, 0
    local t0 = helpers.monotime()
    local i = 0
    while helpers.monotime() - t0 < 4 do
      i = i + 1
      local k = i % 12 + 1
      if clients[k] then
        local c = clients[k]
        if i % 3 == 0 then
          local t = helpers.monotime()
          c:close()
          local d = helpers.monotime() - t
          if d > worst then worst = d end
          closes = closes + 1
        end
        clients[k], locks[k] = nil, nil    -- (the others: left to the collector)
        if i % 5 == 0 then collectgarbage() end
      else
        local c = assert(redislock.connect { url = fx.srv.url })
        clients[k] = c
        locks[k] = {}
        for j = 1, 10 do locks[k][j] = assert(c:acquire(fresh(), { ttl = (0.05 + j * 0.003) * scale })) end
      end
    end
    -- every lock of a client still open is held: renewed all along
    for k, c in pairs(clients) do
      for j, l in ipairs(locks[k]) do assert.is_true(l:held(), k .. "/" .. j) end
      c:close()
    end
    collectgarbage()
    collectgarbage()
    print(string.format("\n# %d rounds, %d closes, slowest close %.1f ms", i, closes, worst * 1000))
    assert.is_true(worst < 0.25 * scale, string.format("a close took %.3f s", worst))
    assert(helpers.wait_until(function() return helpers.threads_named(core.getpid(), "redislock-wd") == 0 end, 2))
  end)

  it("a forked child's first watched lock, on a client the parent renewed with, starts a thread of its own", function()
    local c1 = assert(redislock.connect { url = fx.srv.url })
    local c2 = assert(redislock.connect { url = fx.srv.url })
    local l1 = assert(c1:acquire(fresh(), { ttl = 0.3 }))
    local l2 = assert(c2:acquire(fresh(), { ttl = 0.3 }))
    local result = helpers.tmpdir() .. "/child.txt"
    local pid = assert(process.fork())
    if pid == 0 then
      local ok, msg = pcall(function()
        local lines = {}
        lines[#lines + 1] = "threads0 " .. helpers.threads_named(core.getpid(), "redislock-wd")
        local mine = assert(c2:acquire(fresh(), { ttl = 0.3 }))
        lines[#lines + 1] = "threads1 " .. helpers.threads_named(core.getpid(), "redislock-wd")
        core.sleep(1.2)
        lines[#lines + 1] = "own " .. tostring(mine:held())
        lines[#lines + 1] = "parents " .. tostring(l1:held()) .. " " .. tostring(l2:held())
        assert(mine:release())
        c2:close()
        lines[#lines + 1] = "threads2 " .. helpers.threads_named(core.getpid(), "redislock-wd")
        return table.concat(lines, "\n")
      end)
      local f = io.open(result, "w")
      f:write(ok and msg or ("error " .. tostring(msg)))
      f:close()
      process._exit(ok and 0 or 1)
    end
    local _, how, code = process.waitpid(pid)
    local text = helpers.read_file(result) or ""
    assert.equal("exited", how)
    if os.getenv("REDISLOCK_VALGRIND") and code == 99 then code = 0 end
    assert.equal(0, code, text)
    assert.matches("threads0 0", text)
    assert.matches("threads1 1", text)
    assert.matches("own true", text)
    assert.matches("parents false false", text)
    assert.matches("threads2 0", text)
    assert.is_true(l1:held())
    assert.is_true(l2:held())
    assert.is_true(l1:release())
    assert.is_true(l2:release())
    c1:close()
    c2:close()
  end)

  it("one client's topology refresh on the renewal thread never starves another client's renewals", function()
    -- (the case needs an address-space limit with room for one thread:
    -- ASan's shadow memory and valgrind cannot start under it)
    if os.getenv("ASAN_OPTIONS") or os.getenv("REDISLOCK_VALGRIND") then
      pending("an address-space limit: not under ASan or valgrind")
      return
    end
    local topology = require "spec.support.topology"
    local rep = topology.start_replicated { replicas = 0 }
    local sen = topology.start_sentinels { master = rep.master, replicas = 0 }
    local seeds = {}
    for i, a in ipairs(sen:addrs()) do seeds[i] = a.host .. ":" .. a.port end
    -- room for one thread only (the renewal thread): the Sentinel client's
    -- follower thread cannot start, so its refreshes run where it asks
    local p = helpers.spawn("ulimit -s 3000000; ulimit -v 4500000; exec "
      .. helpers.lua_cmd("spec/support/hol_holder.lua", table.concat(seeds, ","), fx.srv.url, 6))
    assert(helpers.wait_until(function() return p:stdout():find("ready") end, 10, 0.02), p:stdout() .. p:stderr())
    -- the case itself: the renewal thread runs, the follower could not start
    local threads = p:stdout():match("threads[^\n]*")
    print("\n# " .. threads)
    assert.equal("threads wd=1 topo=0", threads)
    -- A's master goes away with its sentinels hung: A's next renewal cannot
    -- connect, and its topology is looked up again (against the hung sentinels)
    for _, s in ipairs(sen.list) do helpers.kill(s.pid, "STOP") end
    helpers.kill(rep.master.pid, "KILL")
    p:wait(20)
    for _, s in ipairs(sen.list) do helpers.kill(s.pid, "CONT") end
    local out = p:stdout()
    print("# " .. out:gsub("\n", "\n# "))
    sen:stop()
    rep:stop()
    assert.is_nil(out:match("b lost[^\n]*"), out)
  end)
end)

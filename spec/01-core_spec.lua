-- The C core on its own: tokens, the clock, and the embedded scripts, which
-- must be the very bytes of lua/redislock/scripts/*.lua.
local helpers = require "spec.helpers"
local core = require "redislock.core"
local process = require "redislock.process"

local function read(path)
  return assert(helpers.read_file(path), path)
end

describe("redislock.core", function()
  it("draws 128-bit hex tokens, never the same twice", function()
    local seen, count = {}, 200000
    for _ = 1, count do
      local t = core.token()
      assert(#t == 32 and not t:find("[^0-9a-f]"), t)
      assert(not seen[t], "duplicate token")
      seen[t] = true
    end
    -- every hex digit appears at every position: not a counter or a clock
    local first = {}
    for t in pairs(seen) do first[t:sub(1, 1)] = true end
    local digits = 0
    for _ in pairs(first) do digits = digits + 1 end
    assert.equal(16, digits)
  end)

  it("gives a fork child tokens of its own (none of the parent's buffered ones) and its own pid", function()
    core.token()                       -- the parent's buffer now holds unused bytes
    local parent_pid = core.getpid()
    local out = helpers.tmpdir() .. "/child-tokens.txt"
    local pid = assert(process.fork())
    if pid == 0 then
      local f = io.open(out, "w")
      f:write(core.getpid(), "\n")
      for _ = 1, 64 do f:write(core.token(), "\n") end
      f:close()
      process._exit(0)
    end
    local parent = {}
    for i = 1, 64 do parent[i] = core.token() end
    process.waitpid(pid)
    local text = read(out)
    local child_pid = tonumber(text:match("^(%d+)"))
    assert.equal(pid, child_pid)
    assert.is_not.equal(parent_pid, child_pid)
    assert.equal(parent_pid, core.getpid())
    local mine = {}
    for _, t in ipairs(parent) do mine[t] = true end
    local n = 0
    for t in text:gmatch("\n(%x+)") do
      n = n + 1
      assert(not mine[t], "the child drew one of the parent's tokens")
    end
    assert.equal(64, n)
  end)

  it("counts on a lease minus 1% (rounded up to a ms) + 2 ms, for Lua and the watchdog alike", function()
    local function near(want, got) assert.is_true(math.abs(want - got) < 1e-9, want .. " vs " .. got) end
    near(0.102, core.drift(10))     -- 100 + 2 ms
    near(0.004, core.drift(0.15))   -- 1.5 ms rounds up to 2, + 2
    near(0.003, core.drift(0.001))  -- the shortest ttl: 1 + 2
    near(0.002, core.drift(0))
    assert.has_error(function() core.drift(-1) end)
    assert.has_error(function() core.drift(0 / 0) end)
  end)

  it("writes command arguments the one way both transports send them", function()
    assert.equal("1795331106657357", core.number_arg(1795331106657357))
    assert.equal("1500", core.number_arg(1500.0))
    assert.equal("0.1", core.number_arg(0.1))
    assert.equal(1 / 3, tonumber(core.number_arg(1 / 3)))
    assert.has_error(function() core.number_arg(0 / 0) end)
    assert.has_error(function() core.number_arg("x") end)
  end)

  it("offers, to the specs' build, the recovery rules every request follows (csrc/exec/recovery.c)", function()
    local function todo_of(t)
      local words = {}
      for k, v in pairs(t) do
        assert.is_true(v)
        words[#words + 1] = k
      end
      table.sort(words)
      return table.concat(words, " ")
    end
    local cls, todo, target = core.recovery("cluster", "MOVED 3999 127.0.0.1:7001")
    assert.equal("moved", cls)
    assert.equal("resolve retry", todo_of(todo))
    assert.equal("127.0.0.1:7001", target)
    cls, todo, target = core.recovery("cluster", "ASK 3999 [::1]:7002")
    assert.equal("ask", cls)
    assert.equal("asking retry", todo_of(todo))
    assert.equal("[::1]:7002", target)
    assert.equal("moved", core.recovery("single", "MOVED 3999 127.0.0.1:7001"))
    assert.equal("", todo_of(select(2, core.recovery("single", "MOVED 3999 127.0.0.1:7001"))))
    local cases = {
      { "cluster", "TRYAGAIN Multiple keys request during rehashing of slot", "tryagain", "pause retry" },
      { "cluster", "CLUSTERDOWN The cluster is down", "clusterdown", "" },
      { "sentinel", "READONLY You can't write against a read only replica.", "readonly", "drop resolve retry" },
      { "sentinel", "MASTERDOWN Link with MASTER is down", "masterdown", "drop resolve retry" },
      { "single", "LOADING Redis is loading the dataset in memory", "loading", "pause retry" },
      { "cluster", "LOADING Redis is loading the dataset in memory", "loading", "pause resolve retry" },
      { "redlock", "LOADING Redis is loading the dataset in memory", "loading", "" },
      { "redlock", "NOSCRIPT No matching script. Please use EVAL.", "noscript", "eval retry" },
      { "cluster", "ERR unknown command", "none", "" },
      { "cluster", "TRYAGAINX", "none", "" },
      { "cluster", "", "none", "" },
    }
    for _, c in ipairs(cases) do
      local got, t, tgt = core.recovery(c[1], c[2])
      assert.equal(c[3], got, c[2])
      assert.equal(c[4], todo_of(t), c[2])
      assert.is_nil(tgt)
    end
    assert.equal("unsent", core.recovery_failure("sentinel", "refused", false))
    assert.equal("resolve retry", todo_of(select(2, core.recovery_failure("cluster", "refused", true))))
    assert.equal("timeout", core.recovery_failure("cluster", "timeout", true))
    assert.equal("resolve", todo_of(select(2, core.recovery_failure("cluster", "timeout", true))))
    assert.equal("reset", core.recovery_failure("single", "reset", true))
    assert.equal("", todo_of(select(2, core.recovery_failure("single", "reset", true))))
    assert.equal("retry", todo_of(select(2, core.recovery_failure("redlock", "reset", true))))
    assert.equal(0.005, core.recovery_pause(1))
    assert.equal(0.1, core.recovery_pause(50))
    assert.has_error(function() core.recovery("nope", "MOVED 1 h:1") end)
    assert.has_error(function() core.recovery("cluster") end)
    assert.has_error(function() core.recovery_failure("cluster", "lost", true) end)
    assert.has_error(function() core.recovery_failure("cluster", "reset") end)
    assert.has_error(function() core.recovery_pause(0) end)
  end)

  it("has a monotonic clock in seconds", function()
    local t0 = core.monotime()
    core.sleep(0.05)
    local dt = core.monotime() - t0
    assert.is_true(dt >= 0.05 and dt < 1, "dt " .. dt)
  end)

  -- A script file as Redis gets it: each "--@splice NAME" line replaced by
  -- scripts/lib/NAME.lua (the rules written once: tools/gen_scripts.lua).
  local function spliced(name)
    local text = read("lua/redislock/scripts/" .. name .. ".lua")
    return (text:gsub("%-%-@splice ([%w_]+)\n", function(lib)
      return read("lua/redislock/scripts/lib/" .. lib .. ".lua")
    end))
  end

  it("embeds each script file byte-exact, the shared rules spliced in, with its key count", function()
    local names = {}
    local p = assert(io.popen("ls lua/redislock/scripts/"))
    for file in p:lines() do names[#names + 1] = file:match("^(.+)%.lua$") end
    p:close()
    assert.is_true(#names >= 3)
    local uses = {}
    for _, name in ipairs(names) do
      local s = core.scripts[name]
      assert.is_table(s, name)
      assert.equal((spliced(name)), s.source)
      assert.is_nil(s.source:find("\n%-%-@splice"), name)
      -- each shared rule a script calls is defined in it, once
      for _, fn in ipairs { "next_fence", "record_holder", "holder_of", "shares_of", "permit_members",
        "wake_waiters", "add_waiter", "drop_lapsed", "reenter", "new_grant", "leave_grant",
        "try_write", "set_leases", "share_holders", "reader_refused" } do
        local _, defs = s.source:gsub("\nlocal function " .. fn .. "%(", "")
        local _, calls = s.source:gsub("[^%w_]" .. fn .. "%(", "")
        if calls > defs then
          assert.equal(1, defs, name .. " calls " .. fn)
          uses[fn] = (uses[fn] or 0) + 1
        end
      end
      assert.matches("^%x+$", s.sha)
      assert.equal(40, #s.sha)
    end
    -- the fence rule of every script that grants, the holder record of
    -- every one that names a holder,
    -- the shares of both shared locks; a semaphore's permits of n; the
    -- wakeups of the shared locks' releases and breaks; the waiters the shared primitives register, and the shares
    -- whose lease ran out that a read or a permit's acquire drops; a
    -- reentrant grant entered again and made anew, by both reentrant
    -- acquires (a lock's, an rwlock writer's), and left, by both reentrant
    -- releases (a lock's, an rwlock's); a writer's attempt, by both
    -- rwlock writers; a share's lease, by both reads, a permit's acquire
    -- and both renewals of a share; a share's holder entries, by both reads and a
    -- permit's acquire; a reader kept out, by both reads
    assert.same({ next_fence = 8, record_holder = 9, holder_of = 7, shares_of = 2, permit_members = 3,
      wake_waiters = 5, add_waiter = 5, drop_lapsed = 3, reenter = 2, new_grant = 2, leave_grant = 2,
      try_write = 2, set_leases = 5, share_holders = 3, reader_refused = 2 }, uses)
    assert.equal(5, core.scripts.acquire.keys)
    -- (as many as the call gives: its first argument says how many)
    assert.equal(-1, core.scripts.acquire_all.keys)
    assert.equal(8, core.scripts.release.keys)
    assert.equal(1, core.scripts.extend.keys)
  end)

  describe("against redis-server", function()
    local srv, conn
    local fx = helpers.redis_fixture { raw = true }
    setup(function() srv, conn = fx.srv, fx.raw end)

    it("is the server SERVER= names (make test-valkey: Valkey, else Redis)", function()
      local info = conn:command("INFO", "server")
      local valkey = info:match("valkey_version:([%d.]+)")
      if helpers.server == "valkey" then
        assert.truthy(valkey, info)
        assert.equal("8", valkey:match("^%d+"))
      else
        assert.falsy(valkey, info)
      end
    end)

    it("SCRIPT LOAD of each file returns the embedded SHA", function()
      for name, s in pairs(core.scripts) do
        assert.equal(s.sha, conn:command("SCRIPT", "LOAD", (spliced(name))), name)
      end
    end)

    it("sends the SHA Lua sees, as EVALSHA, falling back to SCRIPT LOAD + EVAL once", function()
      local log = helpers.tmpdir() .. "/monitor.log"
      local mon = helpers.spawn("exec " .. helpers.bin.cli .. " -p " .. srv.port .. " MONITOR > " .. log)
      helpers.wait_until(function()
        local f = io.open(log) local s = f and f:read("*a") if f then f:close() end
        return s and s:find("OK")
      end, 5)
      assert.equal("OK", conn:command("SCRIPT", "FLUSH"))
      assert.equal(0, conn:script("release", "k", "w", "s", "q", "d", "l", "f", "h", "t"))  -- NOSCRIPT: LOAD + EVAL
      assert.equal(0, conn:script("release", "k", "w", "s", "q", "d", "l", "f", "h", "t"))   -- cached again: EVALSHA
      assert.same({ 1 }, conn:command("SCRIPT", "EXISTS", core.scripts.release.sha))
      -- (the monitor logs in order: once SCRIPT EXISTS, sent last, is
      -- there, every command before it is too)
      assert.truthy(helpers.wait_until(function()
        return read(log):find('"SCRIPT" "EXISTS"', 1, true)
      end, 5))
      mon:kill("TERM")
      mon:wait(5)
      local text = read(log)
      local _, evalsha = text:gsub('"EVALSHA" "' .. core.scripts.release.sha .. '"', "")
      local _, eval = text:gsub('"EVAL" "%-%- release', "")
      local _, load = text:gsub('"SCRIPT" "LOAD" "%-%- release', "")
      assert.equal(2, evalsha)
      assert.equal(1, eval)
      -- the load (which Redis 8 never evicts, unlike what EVAL caches) just
      -- before the EVAL, on the same connection: nothing between them
      assert.equal(1, load)
      local at_load = text:find('"SCRIPT" "LOAD" "-- release', 1, true)
      local at_eval = text:find('"EVAL" "-- release', 1, true)
      assert.is_true(at_load < at_eval)
      local _, lines_between = text:sub(at_load, at_eval):gsub("\n", "")
      assert.equal(1, lines_between)   -- adjacent lines of the monitor
    end)

    it("returns Redis replies as Lua values", function()
      assert.equal("PONG", conn:command("PING"))
      assert.equal(false, conn:command("GET", "missing"))
      assert.equal(3, conn:command("RPUSH", "list", "a", "b\0c", 3))
      assert.same({ "a", "b\0c", "3" }, conn:command("LRANGE", "list", 0, -1))
      local v, err = conn:command("INCR", "list")
      assert.is_nil(v)
      assert.matches("^redis error: WRONGTYPE", err)
    end)
  end)
end)

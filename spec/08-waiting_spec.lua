-- Waiting for a busy lock: woken by the release itself, never past the
-- holder's lease, no lost wakeups, and the wait deadline kept.
local helpers = require "spec.helpers"
local redislock = require "redislock"
local core = require "redislock.core"


describe("waiting", function()
  local srv, client

  local fx = helpers.redis_fixture { clients = 1 }
  setup(function() srv, client = fx.srv, fx.clients[1] end)

  -- A holder process that releases at a time it reports: after hold_s, or
  -- once the file `go` exists (hold_s then only bounds the wait), for a
  -- test whose release must come after something it waits for.
  local function holder(name, hold_s, go)
    local p = helpers.spawn(helpers.lua_cmd(string.format([[
      local redislock = require "redislock"
      local core = require "redislock.core"
      local c = assert(redislock.connect { url = %q })
      local l = assert(c:acquire(%q, { ttl = 10 }))
      print("held") io.stdout:flush()
      local hold, go = %f, %q
      if go == "" then
        core.sleep(hold)
      else
        local deadline = core.monotime() + hold
        while core.monotime() < deadline do
          local f = io.open(go)
          if f then f:close() break end
          core.sleep(0.01)
        end
      end
      local t = core.monotime()
      assert(l:release())
      print(string.format("released %%.9f", t)) io.stdout:flush()
    ]], srv.url, name, hold_s, go or "")))
    assert(helpers.wait_until(function() return p:stdout():find("held") end, 5))
    return p
  end

  -- A file for holder()'s `go`, and the function that makes it.
  local function go_file()
    local path = helpers.tmpdir() .. "/go"
    return path, function() assert(io.open(path, "w")):close() end
  end

  for _, notify in ipairs({ true, false }) do
    it("a waiter gets the lock soon after the release (notify = " .. tostring(notify) .. ")", function()
      local name = "wake:" .. tostring(notify)
      local p = holder(name, 0.4)
      local l = assert(client:acquire(name, { ttl = 5, wait = 5, notify = notify }))
      local got = core.monotime()
      assert.equal(0, p:wait(5))
      local released = tonumber(p:stdout():match("released (%S+)"))
      local delay = got - released
      -- With notification it is one round trip; the polling fallback may
      -- sleep up to its 100 ms cap. Loose bounds: CI machines are noisy.
      if notify then
        assert.is_true(delay < 0.05, string.format("woken %.1f ms after the release", delay * 1000))
      else
        assert.is_true(delay < 0.3, string.format("took %.1f ms", delay * 1000))
      end
      l:release()
    end)
  end

  it("a waiter whose holder died gets the lock at the lease end", function()
    local name = "dead-holder"
    local p = helpers.spawn(helpers.lua_cmd(string.format([[
      local redislock = require "redislock"
      local c = assert(redislock.connect { url = %q })
      assert(c:acquire(%q, { ttl = 0.6 }))
      print("held") io.stdout:flush()
      require("redislock.core").sleep(60)
    ]], srv.url, name)))
    assert(helpers.wait_until(function() return p:stdout():find("held") end, 5))
    helpers.sleep(0.3) -- a renewal or two
    p:kill("KILL")
    local killed = core.monotime()
    local l = assert(client:acquire(name, { ttl = 5, wait = 5 }))
    local waited = core.monotime() - killed
    -- the last renewal was at most ttl/3 before the kill: free within a ttl
    assert.is_true(waited < 0.6 + 0.2, "waited " .. waited)
    l:release()
    p:wait(5)
  end)

  it("loses no wakeup over 1,000 handoffs between two processes", function()
    local name = "handoffs"
    local start_at = string.format("%.6f", core.monotime() + 0.5)
    local procs = {}
    for i = 1, 2 do
      -- ttl 30: a lost wakeup would stall a waiter for up to 30 s
      procs[i] = helpers.spawn(helpers.lua_cmd("tools/counter_worker.lua", srv.url, name, 500,
        "handoff-counter", start_at, 0, 1, 1, 30))
    end
    local holds = {}
    for i, p in ipairs(procs) do
      assert.equal(0, p:wait(120), p:stderr())
      for _, h in ipairs(helpers.holds_of(p:stdout())) do
        h[4] = i
        holds[#holds + 1] = h
      end
    end
    assert.equal(1000, #holds)
    table.sort(holds, function(x, y) return x[3] < y[3] end)
    local handoffs, worst = 0, 0
    for i = 2, #holds do
      assert(holds[i][1] >= holds[i - 1][2], "overlap at fence " .. holds[i][3])
      if holds[i][4] ~= holds[i - 1][4] then
        handoffs = handoffs + 1
        worst = math.max(worst, holds[i][1] - holds[i - 1][2])
      end
    end
    -- Most holds alternate; on a loaded machine a releaser sometimes takes
    -- the lock back before the woken waiter runs (that is no lost wakeup:
    -- the waiter is woken again by the next release). A lost wakeup shows
    -- as a stall of up to the 30 s ttl, which `worst` catches.
    assert.is_true(handoffs >= 500, "only " .. handoffs .. " handoffs")
    assert.is_true(worst < 1, string.format("a handoff took %.3f s", worst))
    assert.equal("1000", srv:cli_raw("GET", "handoff-counter"))
  end)

  -- Is a client blocked in BLPOP on srv (a waiter waiting)?
  local function blocked()
    return (srv:cli("CLIENT", "LIST")):find(" flags=b ", 1, true) ~= nil
  end

  -- A holder that takes `name` `rounds` times; each time it waits until a
  -- client is blocked in BLPOP, releases, and at once tries to take the lock
  -- back, printing "retake N <fence or busy>".
  -- For the child processes below: until_blocked(conn) waits until some
  -- client is blocked in a BLPOP on the server of `conn` (a redislock
  -- channel), and returns that client's id.
  local UNTIL_BLOCKED = [[
    local function until_blocked(conn)
      local core = require "redislock.core"
      local t = core.monotime()
      while true do
        local id = conn:command("CLIENT", "LIST"):match("id=(%d+)[^\n]* flags=b ")
        if id then return id end
        assert(core.monotime() - t < 10, "no waiter blocked")
        core.sleep(0.001)
      end
    end
  ]]

  -- A wait connection is made by a client's first wait, which is an
  -- ordinary one: make it with a wait on a name held by someone else (a
  -- name the client holds itself is refused at once, spec 45).
  local function warm_up(c)
    srv:cli_raw("SET", "{warm-up}", "someone", "PX", "5000")
    assert.equal("timeout", select(3, c:acquire("warm-up", { ttl = 5, wait = 0.05 })))
    srv:cli_raw("DEL", "{warm-up}")
    assert(helpers.wait_until(function() return not blocked() end, 5))
  end

  local function retaker(name, rounds)
    return helpers.spawn(helpers.lua_cmd(UNTIL_BLOCKED .. string.format([[
      local redislock = require "redislock"
      local c = assert(redislock.connect { url = %q })
      local probe = assert(redislock.connect { url = %q })._conn
      for i = 1, %d do
        local l = assert(c:acquire(%q, { ttl = 10, wait = 10 }))
        print("held " .. i) io.stdout:flush()
        until_blocked(probe)
        assert(l:release())
        local again, _, kind = c:acquire(%q, { ttl = 10 })
        print("retake " .. i .. " " .. (again and again.fence or kind)) io.stdout:flush()
        if again then again:release() end
      end
    ]], srv.url, srv.url, rounds, name, name)))
  end

  it("a woken waiter's next attempt runs before the releaser can take the lock back", function()
    -- The attempt goes in the same write as the BLPOP and Redis runs it as
    -- soon as the release's wakeup reaches it, before the releaser has even
    -- read its reply: the releaser's retake at once is refused every time.
    -- (It used to win about half of such races: one round trip ahead.)
    local name = "retake"
    warm_up(client)
    local p = retaker(name, 8)
    for i = 1, 8 do
      assert(helpers.wait_until(function() return p:stdout():find("held " .. i, 1, true) end, 10))
      local l, err = client:acquire(name, { ttl = 5, wait = 10 })
      assert(l, err)
      assert(helpers.wait_until(function() return p:stdout():find("retake " .. i .. " ", 1, true) end, 5))
      assert.equal("busy", p:stdout():match("retake " .. i .. " (%S+)"), p:stdout())
      assert(l:release())
    end
    assert.equal(0, p:wait(10))
  end)

  it("a queued attempt refused by NOSCRIPT (a flushed cache) is sent again", function()
    -- Round 1 runs the acquire script on the wait connection (as EVAL);
    -- in round 2 it is queued as EVALSHA, and the holder flushes the
    -- script cache before it releases.
    local name = "retake-flush"
    warm_up(client)
    local p = helpers.spawn(helpers.lua_cmd(UNTIL_BLOCKED .. string.format([[
      local redislock = require "redislock"
      local c = assert(redislock.connect { url = %q })
      for i = 1, 2 do
        local l = assert(c:acquire(%q, { ttl = 10, wait = 10 }))
        print("held " .. i) io.stdout:flush()
        until_blocked(c._conn)
        if i == 2 then assert(c._conn:command("SCRIPT", "FLUSH")) end
        assert(l:release())
      end
    ]], srv.url, name)))
    for i = 1, 2 do
      assert(helpers.wait_until(function() return p:stdout():find("held " .. i, 1, true) end, 10))
      local l, err = client:acquire(name, { ttl = 5, wait = 10 })
      assert(l, err)
      assert.equal(l.token, srv:cli_raw("GET", "{" .. name .. "}"))
      assert(l:release())
    end
    assert.equal(0, p:wait(10))
    assert.equal(1, client._conn:wait_connection():stats().noscript_reloads)
  end)

  it("a wait connection killed mid-wait: the waiter still gets the lock, and leaves no stray grant", function()
    local name = "retake-kill"
    local other = assert(redislock.connect { url = srv.url })
    warm_up(other)
    local p = holder(name, 0.6)
    local killer = helpers.spawn(helpers.lua_cmd(UNTIL_BLOCKED .. string.format([[
      local probe = assert(require("redislock").connect { url = %q })._conn
      assert(probe:command("CLIENT", "KILL", "ID", until_blocked(probe)))
    ]], srv.url)))
    local l, err = other:acquire(name, { ttl = 5, wait = 10 })
    assert(l, err)
    assert.equal(0, killer:wait(10))
    assert.equal(0, p:wait(5))
    assert.equal(l.token, srv:cli_raw("GET", "{" .. name .. "}"))
    assert(l:release())
    assert.equal("0", srv:cli_raw("EXISTS", "{" .. name .. "}"))
    other:close()
  end)

  it("a wait Redis refuses at once (the signal key of another type) backs off, no hot loop", function()
    local name = "refused-wait"
    warm_up(client)
    local p = holder(name, 2.5)
    assert(srv:cli_raw("SET", "{" .. name .. "}:signal", "not a list") == "OK")
    local before = tonumber(srv:cli_raw("INFO", "stats"):match("total_commands_processed:(%d+)"))
    local l, err = client:acquire(name, { ttl = 2, wait = 1.5 })   -- (waits of ttl/4 = 0.5 s)
    local after = tonumber(srv:cli_raw("INFO", "stats"):match("total_commands_processed:(%d+)"))
    assert.is_nil(l)
    assert.matches("^timeout: ", err)
    -- backoff from 2 ms doubling to 100 ms: a few dozen tries in 1.5 s, a
    -- handful of commands each (a hot loop made thousands)
    assert.is_true(after - before < 600, (after - before) .. " commands in 1.5 s")
    srv:cli_raw("DEL", "{" .. name .. "}:signal")   -- (before the holder's release needs it)
    assert.equal(0, p:wait(5))
  end)

  it("waits with wait = math.huge until the release", function()
    local name = "forever"
    local p = holder(name, 0.3)
    local l = assert(client:acquire(name, { ttl = 5, wait = math.huge }))
    assert.equal(0, p:wait(5))
    l:release()
    p = holder(name, 0.3)
    l = assert(client:acquire(name, { ttl = 5, wait = math.huge, fair = true }))
    assert.equal(0, p:wait(5))
    l:release()
  end)

  it("does not spin on a key with no lease (not one of ours)", function()
    srv:cli_raw("SET", "{foreign}", "x")
    local before = srv:cli_raw("INFO", "commandstats"):match("cmdstat_evalsha:calls=(%d+)") or 0
    for _, notify in ipairs({ true, false }) do
      local got, err = client:acquire("foreign", { wait = 0.3, notify = notify })
      assert.is_nil(got)
      assert.matches("^timeout: ", err)
    end
    local after = srv:cli_raw("INFO", "commandstats"):match("cmdstat_evalsha:calls=(%d+)")
    assert.is_true(tonumber(after) - tonumber(before) < 60, "attempts: " .. (after - before))
    srv:cli_raw("DEL", "{foreign}")
  end)

  it("keeps the wait deadline within a small margin", function()
    local name = "deadline"
    local l = assert(client:acquire(name, { ttl = 10 }))
    local other = assert(redislock.connect { url = srv.url })
    for _, wait in ipairs({ 0.05, 0.3, 1 }) do
      local t0 = core.monotime()
      local got, err = other:acquire(name, { ttl = 1, wait = wait })
      local took = core.monotime() - t0
      assert.is_nil(got)
      assert.matches("^timeout: ", err)
      assert.is_true(took >= wait and took < wait + 0.1, string.format("wait %g took %.3f", wait, took))
    end
    other:close()
    l:release()
  end)

  -- A waiter process: takes `name` fairly, prints when it got it.
  local function fair_waiter(name, wait)
    return helpers.spawn(helpers.lua_cmd(string.format([[
      local redislock = require "redislock"
      local core = require "redislock.core"
      local c = assert(redislock.connect { url = %q })
      local l, err = c:acquire(%q, { ttl = 5, wait = %f, fair = true })
      if not l then print("failed " .. err) os.exit(0) end
      print(string.format("got %%.9f", core.monotime())) io.stdout:flush()
      core.sleep(0.05)
      assert(l:release())
    ]], srv.url, name, wait)))
  end

  it("fair = true grants waiters in arrival order", function()
    local name = "fair"
    -- released once all four are queued (a fixed 1.2 s hold ran out before
    -- the fourth had started, under ASan with other spec files running)
    local go, release = go_file()
    local p = holder(name, 30, go)
    local waiters = {}
    for i = 1, 4 do
      waiters[i] = fair_waiter(name, 40)
      -- each is queued before the next starts
      assert(helpers.wait_until(function()
        return tonumber((srv:cli_raw("LLEN", "{fair}:queue"))) == i
      end, 5, 0.01), "waiter " .. i .. " did not queue")
    end
    release()
    assert.equal(0, p:wait(10))
    local times = {}
    for i, w in ipairs(waiters) do
      assert.equal(0, w:wait(10), w:stderr())
      times[i] = tonumber(w:stdout():match("got (%S+)"))
      assert.is_number(times[i], w:stdout())
    end
    for i = 2, #times do
      assert.is_true(times[i] > times[i - 1], "waiter " .. i .. " overtook waiter " .. (i - 1))
    end
    assert.equal("0", srv:cli_raw("EXISTS", "{fair}:queue"))
  end)

  it("a fair waiter that gives up or dies does not block the line", function()
    local name = "fair2"
    -- (the quitter must still be in line when the third waiter joins: under
    -- a sanitizer on a slow day, starting a waiter took longer than 0.3 s;
    -- and the release comes once the quitter gave up and the doomed one died)
    local go, release = go_file()
    local p = holder(name, 30, go)
    local quitter = fair_waiter(name, 1.5)    -- gives up before the release
    assert(helpers.wait_until(function() return srv:cli_raw("LLEN", "{fair2}:queue") == "1" end, 5, 0.01))
    local doomed = fair_waiter(name, 30)       -- will be killed while queued
    assert(helpers.wait_until(function() return srv:cli_raw("LLEN", "{fair2}:queue") == "2" end, 5, 0.01))
    local patient = fair_waiter(name, 30)
    assert(helpers.wait_until(function() return srv:cli_raw("LLEN", "{fair2}:queue") == "3" end, 5, 0.01))
    assert.equal(0, quitter:wait(5))
    assert.matches("failed timeout", quitter:stdout())
    doomed:kill("KILL")
    release()
    assert.equal(0, p:wait(10))
    local released = tonumber(p:stdout():match("released (%S+)"))
    assert.equal(0, patient:wait(15), patient:stderr())
    local got = tonumber(patient:stdout():match("got (%S+)"))
    -- the dead waiter holds the line at most until its place expires
    -- (it may even be handed the lock: then the 3 s grant lease runs out,
    -- and the next heartbeat, within 1 s, takes it)
    assert.is_true(got - released < 3 + 1 + 0.5, string.format("took %.2f s", got - released))
    doomed:wait(5)
  end)

  -- A fair waiter paused (SIGSTOP) in its BLPOP is handed the lock, stays
  -- paused past the hand-over lease, and someone else takes the name. When
  -- it resumes, the grant in its socket is stale: it must not count it as a
  -- lock while the other holder has it.
  it("a fair waiter that wakes to a stale hand-over does not take it", function()
    local name = "fair-stale"
    local key = "{" .. name .. "}"
    local h = assert(client:acquire(name, { ttl = 10 }))
    local w = fair_waiter(name, 20)
    -- w is queued and blocked in its BLPOP
    assert(helpers.wait_until(function()
      return srv:cli_raw("LLEN", key .. ":queue") == "1" and srv:cli_raw("CLIENT", "LIST"):find("cmd=blpop")
    end, 5, 0.005))
    w:kill("STOP")
    assert.is_true(h:release())                 -- handed to the paused w
    local handed = srv:cli_raw("GET", key)
    assert.is_truthy(handed ~= "" and handed ~= h.token, "not handed over: " .. tostring(handed))
    -- the 3 s hand-over lease runs out; another client takes the name
    local other = assert(redislock.connect { url = srv.url })
    local c = assert(other:acquire(name, { ttl = 10, wait = 5 }))
    assert.are_not.equal(handed, srv:cli_raw("GET", key))
    w:kill("CONT")
    helpers.sleep(0.5)                          -- w reads its stale grant now
    assert.equal("", w:stdout())                -- and does not claim the lock
    local t_release = core.monotime()
    assert.is_true(c:release())
    other:close()
    assert.equal(0, w:wait(10), w:stderr())
    local got = tonumber(w:stdout():match("got (%S+)"))
    assert.is_truthy(got, w:stdout())
    assert.is_true(got >= t_release, "w held the lock while another client did")
  end)

  it("blocks on its own connection: the main one stays usable meanwhile", function()
    local name = "own-conn"
    local p = holder(name, 0.5)
    -- a coroutine cannot interleave a blocking call, so check the layout:
    -- after a wait, the client's channel has a separate wait connection
    local l = assert(client:acquire(name, { ttl = 5, wait = 5 }))
    local wait_conn = client._conn:wait_connection()
    assert.is_truthy(wait_conn)
    assert.are_not.equal(wait_conn, client._conn)
    l:release()
    assert.equal(0, p:wait(5))
  end)

  describe("spin", function()
    -- CPU seconds (user + system) this process spends in f
    local function cpu_of(f)
      local c0 = os.clock()
      local a, b = f()
      return os.clock() - c0, a, b
    end

    -- This thread's involuntary context switches so far (the main thread's:
    -- /proc/self/status counts the thread group leader's).
    local function switches()
      local status = helpers.read_file("/proc/self/status") or ""
      return tonumber(status:match("\nnonvoluntary_ctxt_switches:%s*(%d+)")) or 0
    end

    it("polls for the reply while it spins, then sleeps: bounded CPU, same reply", function()
      local conn = assert(core.connect { port = srv.port, timeout = 2 })
      -- Redis answers this BLPOP with nil after 0.3 s (give or take its hz)
      local idle = cpu_of(function() return conn:command("BLPOP", "spin:none", "0.3") end)
      conn:set_spin(0.15)
      local s0 = switches()
      local spun, r = cpu_of(function() return conn:command("BLPOP", "spin:none", "0.3") end)
      local yielded = switches() - s0
      assert.is_false(r)
      conn:set_spin(0.05)
      local short = cpu_of(function() return conn:command("BLPOP", "spin:none", "0.3") end)
      conn:close()
      -- Loose: a spin is CPU time, a sleep is not. A spin yields between
      -- polls, so on a busy machine (other spec files run alongside) it may
      -- give nearly all its time away: then each poll it made shows as a
      -- switch it did not ask for (sched_yield to a runnable task), where
      -- a sleeping wait has next to none.
      assert.is_true(idle < 0.02, "no spin used " .. idle)
      assert.is_true(spun > 0.04 or yielded >= 5,
        ("a 150 ms spin used only %.4f s and yielded %d times"):format(spun, yielded))
      assert.is_true(short < 0.12, "a 50 ms spin used " .. short)
    end)

    it("counts the spin in the command timeout, and restores the timeout after", function()
      local dbg = helpers.start_redis { debug = true }
      local conn = assert(core.connect { port = dbg.port, timeout = 1 })
      conn:set_spin(0.3)
      local t0 = core.monotime()
      local r, err = conn:command("BLPOP", "spin:never", "0")
      local took = core.monotime() - t0
      assert.is_nil(r)
      assert.matches("timed out", err)
      assert.is_true(took >= 0.95 and took < 1.2, string.format("timeout 1 s, spin 0.3 s: took %.3f", took))
      -- the spin runs out before the reply (0.5 s): the read gets what is left
      assert.equal("OK", conn:command("DEBUG", "SLEEP", "0.5"))
      -- and then the whole timeout again: 0.85 s would not fit in 1 - 0.3
      conn:set_spin(0)
      assert.equal("OK", conn:command("DEBUG", "SLEEP", "0.85"))
      conn:close()
      dbg:stop()
    end)

    for _, fair in ipairs({ false, true }) do
      it("a spinning waiter gets the lock at the release and keeps its deadline (fair = "
          .. tostring(fair) .. ")", function()
        local name = "spin:" .. tostring(fair)
        local p = holder(name, 0.3)
        local spent, l = cpu_of(function()
          return client:acquire(name, { ttl = 5, wait = 5, fair = fair, spin = 0.05 })
        end)
        local got = core.monotime()
        assert.truthy(l)
        assert.equal(0, p:wait(5))
        local released = tonumber(p:stdout():match("released (%S+)"))
        assert.is_true(got - released < 0.05, string.format("%.1f ms after the release", (got - released) * 1000))
        -- a 0.3 s wait with a 50 ms spin: most of it asleep
        assert.is_true(spent < 0.2, "CPU " .. spent)
        -- a spin longer than the wait ends with the wait
        local t0 = core.monotime()
        local other = assert(redislock.connect { url = srv.url })
        local none, err = other:acquire(name, { ttl = 5, wait = 0.1, fair = fair, spin = 1 })
        local took = core.monotime() - t0
        assert.is_nil(none)
        assert.matches("^timeout: ", err)
        assert.is_true(took < 0.25, string.format("wait 0.1 s, spin 1 s: took %.3f", took))
        other:close()
        l:release()
      end)
    end
  end)
end)

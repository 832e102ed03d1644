-- The contract at the edges (issue 25, part 1): messages that name what is
-- wrong, Prometheus text that stays valid for any bytes, callbacks that
-- yield, signals during a wait, a guard killed by SIGKILL.
local helpers = require "spec.helpers"
local redislock = require "redislock"
local quote = helpers.quote

local BIN = "bin/redislock"

local function args_of(...)
  local parts = {}
  for _, a in ipairs({ ... }) do parts[#parts + 1] = quote(a) end
  return table.concat(parts, " ")
end

describe("messages that say what is wrong", function()
  local srv
  setup(function() srv = helpers.start_redis() end)
  teardown(function() srv:stop() end)

  local function cli(...)
    local p = helpers.spawn("REDISLOCK_URL=" .. quote(srv.url) .. " " .. quote(helpers.lua_bin) .. " " .. BIN
      .. " " .. args_of(...))
    local code = p:wait(20)
    return code, p:stdout(), p:stderr()
  end

  it("one minimum ttl, in the command line's words and the library's", function()
    local code0, _, err0 = cli("run", "--ttl", "0", "m", "--", "true")
    local code1, _, err1 = cli("run", "--ttl", "0.01", "m", "--", "true")
    assert.equal(2, code0)
    assert.equal(2, code1)
    assert.matches("^redislock: %-%-ttl must be between 0.05 and 2147483648 seconds", err0)
    assert.equal(err0, err1)
    local c = assert(redislock.connect { url = srv.url })
    local ok, err = pcall(c.acquire, c, "m", { ttl = 0.01 })
    assert.is_false(ok)
    assert.matches("'ttl' to 'acquire' %(must be between 0.05 and 2147483648%)", err)
    c:close()
    -- the shortest ttl it names works
    code0 = cli("run", "--ttl", "0.05", "m", "--", "true")
    assert.equal(0, code0)
  end)

  it("a bad url names the part that is wrong", function()
    local function raised(u)
      local ok, err = pcall(redislock.connect, { url = u })
      assert.is_false(ok, u)
      return err
    end
    assert.matches("port must be a number 1%-65535, got 'abc'", raised("redis://127.0.0.1:abc"))
    assert.matches("port must be a number 1%-65535, got '99999'", raised("redis://127.0.0.1:99999"))
    -- a colon with no port is refused, not read as 6379
    assert.matches("port expected after ':'", raised("redis://127.0.0.1:"))
    assert.matches("port expected after ':'", raised("redis://:pw@[::1]:/0"))
    assert.matches("host expected", raised("redis://:6379"))
    assert.matches("in the host list", raised("redis+cluster://127.0.0.1:7000,127.0.0.1:x"))
    -- the password is never shown, whatever part is wrong
    assert.is_nil(raised("redis://:secretpw@127.0.0.1:abc"):find("secretpw", 1, true))
    -- one parser for URLs, host lists and the C core's seeds (core.hostport)
    local core = require "redislock.core"
    assert.same({ "::1", 7000 }, { core.hostport("[::1]:7000") })
    assert.same({ "redis-1.internal" }, { core.hostport("redis-1.internal") })
    assert.same({ nil, "an IPv6 address expected inside [ ], got '[::1'" }, { core.hostport("[::1") })
    local ok, err = pcall(redislock.connect, { cluster = { "127.0.0.1:7000", "127.0.0.1:x" } })
    assert.is_false(ok)
    assert.matches("\"host:port\" expected at %[2%], got 127.0.0.1:x %(port must be a number 1%-65535, got 'x'%)", err)
  end)

  it("refuses a host that is no name or address before any lookup", function()
    local bad = { "a b", "a\tb", "a\0b", "a/b", "host\n", "h" .. string.char(0xe9) }
    for _, h in ipairs(bad) do
      local t0 = helpers.monotime()
      local ok, err = pcall(redislock.connect, { host = h, port = srv.port, connect_timeout = 5 })
      assert.is_false(ok, h)
      assert.matches("bad argument 'host' to 'connect' %(not a host name or address", err)
      assert.is_true(helpers.monotime() - t0 < 0.5)
      if not h:find("/", 1, true) then   -- (in a url, '/' starts the database)
        ok, err = pcall(redislock.connect, { url = "redis://" .. h .. ":" .. srv.port })
        assert.is_false(ok, h)
        assert.matches("is not a host name or address", err)
      end
    end
    for _, list in ipairs({ { "a b:26379" }, { "127.0.0.1:1", "x y:2" } }) do
      assert.is_false((pcall(redislock.connect, { sentinels = list, master = "m" })))
      assert.is_false((pcall(redislock.connect, { cluster = list })))
    end
    assert.is_false((pcall(redislock.connect, { redlock = { { host = "a b", port = 1 }, srv.url, srv.url } })))
    -- names, IPv4 and IPv6 addresses are fine
    for _, h in ipairs({ "localhost", "127.0.0.1", "::1", "redis-1.example_internal" }) do
      assert.is_true(require("redislock.url").valid_host(h), h)
    end
    local code, _, err = cli("run", "--url", "redis://a b:6379", "m", "--", "true")
    assert.equal(2, code)
    assert.matches("^redislock: [^\n]*host 'a b' is not a host name or address", err)
  end)
end)

describe("Prometheus text for any bytes", function()
  local prometheus = require "spec.support.prometheus"
  local c
  local fx = helpers.redis_fixture { clients = 1 }
  setup(function() c = fx.clients[1] end)

  it("a label value that is not UTF-8 still gives valid lines", function()
    local bad = "caf" .. string.char(0xe9) .. " " .. string.char(0xff, 0xc0, 0xaf, 0xed, 0xa0, 0x80)
    local text = c:metrics({ labels = { app = bad } })
    local p = prometheus.parse(text)
    local replacement = string.char(0xef, 0xbf, 0xbd)
    for _, smp in ipairs(p.samples) do
      assert.equal("caf" .. replacement .. " " .. replacement:rep(6), smp.labels.app)
    end
    if utf8 then
      for line in text:gmatch("[^\n]+") do assert.truthy(utf8.len(line), line) end
    end
    -- valid UTF-8 is kept as it is
    local ok = "caf" .. string.char(0xc3, 0xa9)
    p = prometheus.parse(c:metrics({ labels = { app = ok } }))
    assert.equal(ok, p.samples[1].labels.app)
  end)

  it("a label value is bounded: a 10 MB label costs what a short one does", function()
    local short = #c:metrics({ labels = { app = "x" } })
    local huge = string.rep("y", 10 * 1024 * 1024)
    local t0 = helpers.monotime()
    local text = c:metrics({ labels = { app = huge } })
    assert.is_true(helpers.monotime() - t0 < 1)
    local p = prometheus.parse(text)
    local v = p.samples[1].labels.app
    assert.equal(require("redislock.metrics").MAX_LABEL_BYTES, #v)
    assert.matches("^y+%.%.%.$", v)
    assert.is_true(#text < short + #p.samples * 300, #text .. " bytes")
    -- a cut never splits a character
    local e = string.char(0xc3, 0xa9)
    p = prometheus.parse(c:metrics({ labels = { app = e:rep(1000) } }))
    v = p.samples[1].labels.app
    assert.matches("%.%.%.$", v)
    assert.equal(0, (#v - 3) % 2)
    if utf8 then assert.truthy(utf8.len(v)) end
  end)
end)

describe("callbacks that yield", function()
  local srv
  setup(function() srv = helpers.start_redis() end)
  teardown(function() srv:stop() end)

  -- Three locks lost in one batch; the first callback yields in a
  -- coroutine that is never resumed.
  local function three_lost(c, opts)
    local locks = {}
    for i = 1, 3 do
      locks[i] = assert(c:acquire("yield:" .. i, { ttl = 0.5, on_lost = opts.on_lost }))
    end
    for i = 1, 3 do srv:cli_raw("DEL", locks[i]._keys.lock) end
    -- every report is waiting in C before anything takes them: one batch
    helpers.sleep(1.2)
    return locks
  end

  -- (Lua 5.1 cannot yield across the protected call a callback runs in:
  -- the yield is an error there, caught like any other)
  local can_yield = _VERSION ~= "Lua 5.1" or rawget(_G, "jit") ~= nil

  it("on_lost: every report is delivered, and every lock is lost at once", function()
    if not can_yield then return pending("no yield across pcall on Lua 5.1") end
    local c = assert(redislock.connect { url = srv.url })
    local called = {}
    local locks = three_lost(c, { on_lost = function(lock)
      called[#called + 1] = lock.name
      coroutine.yield()
    end })
    local stuck = coroutine.create(function() c:poll() end)
    assert(coroutine.resume(stuck))
    assert.equal("suspended", coroutine.status(stuck))   -- never resumed
    assert.equal(1, #called)
    for i = 1, 3 do assert.is_false(locks[i]:held()) end
    -- the next calls deliver the others, one per yield
    for _ = 1, 3 do assert(coroutine.resume(coroutine.create(function() c:poll() end))) end
    table.sort(called)
    assert.same({ "yield:1", "yield:2", "yield:3" }, called)
    c:close()
  end)

  it("on_event: a callback that yields loses no event", function()
    if not can_yield then return pending("no yield across pcall on Lua 5.1") end
    local seen = {}
    local c = assert(redislock.connect { url = srv.url, on_event = function(event, f)
      if event == "lost" then
        seen[#seen + 1] = f.name
        coroutine.yield()
      end
    end })
    local locks = three_lost(c, {})
    assert(coroutine.resume(coroutine.create(function() c:poll() end)))
    assert.equal(1, #seen)
    for _ = 1, 3 do assert(coroutine.resume(coroutine.create(function() c:poll() end))) end
    table.sort(seen)
    -- (before held(), which would find each loss again by itself)
    assert.same({ "yield:1", "yield:2", "yield:3" }, seen)
    for i = 1, 3 do assert.is_false(locks[i]:held()) end
    c:close()
  end)
end)

describe("a signal during a wait", function()
  local srv, admin
  local fx = helpers.redis_fixture { clients = 1 }
  setup(function() srv, admin = fx.srv, fx.clients[1] end)

  -- What Redis holds for `name` besides the holder's lock key: a waiter
  -- that stopped must have left no grant, no place in a line.
  local function residue(name)
    local out = {}
    for _, k in ipairs({ ":queue", ":queue:deadlines", ":queue:leases" }) do
      if srv:cli_raw("EXISTS", "{" .. name .. "}" .. k) == "1" then out[#out + 1] = k end
    end
    return table.concat(out, " ")
  end

  -- Started with SIGINT at its default disposition (the spec's own
  -- background processes start with it ignored), so the interpreter's own
  -- handler is in place, as at a terminal.
  local DEFAULT_INT = "env --default-signal=INT,TERM "

  -- Takes `name` for a while, in this process.
  local function hold(name)
    return assert(admin:acquire(name, { ttl = 30 }))
  end

  -- Waits until `p` blocks in the wait (its BLPOP, or its backoff sleeps).
  local function blocked(p, settle)
    helpers.sleep(settle or 0.6)
    assert.is_true(p:alive(), p:stderr())
  end

  it("redislock run: Ctrl-C ends the wait at once, exit 130, no traceback, nothing left", function()
    local name = "sig:cli"
    local held = hold(name)
    for _, extra in ipairs({ {}, { "--ttl", "0.5" } }) do   -- (a short ttl: the plain wait)
      local args = { "run", "-w", "30" }
      for _, a in ipairs(extra) do args[#args + 1] = a end
      args[#args + 1] = name
      args[#args + 1] = "--"
      args[#args + 1] = "true"
      local p = helpers.spawn("REDISLOCK_URL=" .. quote(srv.url) .. " " .. DEFAULT_INT .. BIN .. " "
        .. args_of((table.unpack or unpack)(args))) -- luacheck: ignore 143
      blocked(p)
      local t0 = helpers.monotime()
      helpers.kill(p.pid, "INT")
      assert.equal(130, p:wait(5))
      assert.is_true(helpers.monotime() - t0 < 1, string.format("took %.2f s", helpers.monotime() - t0))
      assert.equal("", p:stderr())
      assert.equal(held.token, srv:cli_raw("GET", "{" .. name .. "}"))
    end
    -- SIGTERM the same way: 143
    local p = helpers.spawn("REDISLOCK_URL=" .. quote(srv.url) .. " " .. DEFAULT_INT .. BIN .. " "
      .. args_of("run", "--wait", "30", name, "--", "true"))
    blocked(p)
    helpers.kill(p.pid, "TERM")
    assert.equal(143, p:wait(5))
    assert.equal("", p:stderr())
    held:release()
    assert.equal("0", srv:cli_raw("EXISTS", "{" .. name .. "}"))
  end)

  it("acquire{wait = 20} under lua5.4: SIGINT raises interrupted! at once, on every kind of wait", function()
    local modes = {
      notify = "{ wait = 20, ttl = 5 }",
      plain = "{ wait = 20, ttl = 0.5 }",
      poll = "{ wait = 20, notify = false }",
      fair = "{ wait = 20, fair = true }",
    }
    for mode, opts in pairs(modes) do
      local name = "sig:lua:" .. mode
      local held = hold(name)
      local p = helpers.spawn(DEFAULT_INT .. helpers.lua_cmd(([[
        local redislock = require "redislock"
        local c = assert(redislock.connect { url = %q })
        local l, err = c:acquire(%q, %s)
        print("returned", l, err)
      ]]):format(srv.url, name, opts)))
      blocked(p)
      local t0 = helpers.monotime()
      helpers.kill(p.pid, "INT")
      assert.equal(1, p:wait(5), mode)
      assert.is_true(helpers.monotime() - t0 < 1, mode .. string.format(": took %.2f s", helpers.monotime() - t0))
      assert.matches("interrupted!", p:stderr(), 1, true)
      assert.equal("", p:stdout(), mode)
      assert.equal(held.token, srv:cli_raw("GET", "{" .. name .. "}"), mode)
      assert.equal("", residue(name), mode)
      held:release()
    end
  end)

  it("a lock granted as the signal came is given back", function()
    -- The holder releases just as the waiter is interrupted, many times:
    -- whatever the waiter was granted in between never stays behind,
    -- unless the call had handed it over as held. (lua.c's hook raises at
    -- the next instruction, wherever that is: one in the caller's frames,
    -- after acquire handed the lock, is the caller's to release. So the
    -- child says whether its client held a lock when the signal ended it.)
    local name = "sig:race"
    for i = 1, 6 do
      local held = hold(name)
      local p = helpers.spawn(DEFAULT_INT .. helpers.lua_cmd(([[
        local redislock = require "redislock"
        local c = assert(redislock.connect { url = %q })
        local ok, l = pcall(c.acquire, c, %q, { wait = 20, ttl = 30, watchdog = false })
        if ok and l then io.stdout:write("took\n") io.stdout:flush() require("redislock.core").sleep(30) end
        io.stdout:write(next(c._locks) and "handed\n" or "none\n")
        os.exit(1)
      ]]):format(srv.url, name)))
      blocked(p, 0.4)
      helpers.sleep(i * 0.002)
      held:release()
      helpers.kill(p.pid, "INT")
      assert.equal(1, p:wait(5))
      -- (a waiter that took it before the signal holds it: its own to release)
      if p:stdout() == "none\n" then
        assert.equal("0", srv:cli_raw("EXISTS", "{" .. name .. "}"), "left behind on round " .. i)
      end
      srv:cli_raw("DEL", "{" .. name .. "}")
    end
  end)
end)

describe("a guard killed by SIGKILL", function()
  local srv
  setup(function() srv = helpers.start_redis() end)
  teardown(function() srv:stop() end)

  local function cli(...)
    return "REDISLOCK_URL=" .. quote(srv.url) .. " " .. quote(helpers.lua_bin) .. " " .. BIN .. " " .. args_of(...)
  end

  -- (a whole line: the file exists, empty, a moment before echo writes it)
  local function pid_in(path)
    local pid = helpers.wait_until(function() return (helpers.read_file(path) or ""):match("^(%d+)\n") end, 5, 0.01)
    assert(pid, path)
    return tonumber(pid)
  end

  -- The job's group leader: the guard's child named redislock-job (read
  -- from /proc here: no pgrep, which hangs under make sanitize's preload).
  local function leader_of(guard)
    return helpers.wait_until(function()
      local children = helpers.read_file("/proc/" .. guard .. "/task/" .. guard .. "/children") or ""
      for pid in children:gmatch("%d+") do
        if (helpers.read_file("/proc/" .. pid .. "/comm") or "") == "redislock-job\n" then return tonumber(pid) end
      end
    end, 5, 0.01)
  end

  local function gone(pid, seconds)
    return helpers.wait_until(function() return not helpers.alive(pid) end, seconds or 3, 0.02)
  end

  it("takes every process of the job with it: the death signal to its group, then SIGKILL", function()
    local dir = helpers.tmpdir()
    local p = helpers.spawn(cli("run", "--ttl", "2", "--kill-after", "1", "job:kill9", "--", "bash", "-c",
      "sleep 30 & echo $! > " .. dir .. "/bg; sleep 31 & echo $! > " .. dir .. "/fg; " ..
      -- (its pid written once it ignores TERM: the leader may act at once)
      "(trap '' TERM; echo $BASHPID > " .. dir .. "/deaf.tmp; mv " .. dir .. "/deaf.tmp " .. dir ..
      "/deaf; exec sleep 32) & wait"))
    local bg, fg, deaf = pid_in(dir .. "/bg"), pid_in(dir .. "/fg"), pid_in(dir .. "/deaf")
    local leader = assert(leader_of(p.pid), "no redislock-job process")
    helpers.kill(p.pid, "KILL")   -- the guard alone
    local t0 = helpers.monotime()
    assert(gone(bg), "a background process of the job outlived its guard")
    assert(gone(fg), "a process of the job outlived its guard")
    -- one that ignores the death signal gets SIGKILL after --kill-after
    assert(gone(deaf, 4), "a process that ignores SIGTERM outlived --kill-after")
    assert.is_true(helpers.monotime() - t0 >= 0.9, "SIGKILL came before --kill-after")
    assert(gone(leader), "the leader stayed")
  end)

  it("a job that ends as usual leaves no leader behind, and one at a terminal's prompt gets none", function()
    local dir = helpers.tmpdir()
    local p = helpers.spawn(cli("run", "job:plain", "--", "sh", "-c", "echo $$ > " .. dir .. "/pid; sleep 0.5"))
    local job = pid_in(dir .. "/pid")
    local leader = assert(leader_of(p.pid))
    -- COMMAND is in the leader's group
    local stat = helpers.read_file("/proc/" .. job .. "/stat")
    assert.equal(leader, tonumber(stat:match("%) %a %d+ (%d+)")))
    assert.equal(0, p:wait(10))
    assert(gone(leader, 1))
    -- at a terminal's prompt (script(1) gives it one) the job stays in the
    -- terminal's foreground group: no leader
    local out = helpers.tmpdir() .. "/groups"
    local job2 = "REDISLOCK_URL=" .. quote(srv.url) .. " " .. BIN .. " run job:tty -- sh -c " ..
      quote("cut -d' ' -f5 /proc/$$/stat > " .. out .. "; cut -d' ' -f5 /proc/$PPID/stat >> " .. out)
    local t = helpers.spawn("script -qefc " .. quote(job2) .. " /dev/null </dev/null")
    assert.equal(0, t:wait(15))
    local a, b = helpers.read_file(out):match("(%d+)%s+(%d+)")
    assert.equal(a, b)
  end)
end)

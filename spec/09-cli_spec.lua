-- `redislock run` and friends, as real processes against a real Redis.
local helpers = require "spec.helpers"

local BIN = "bin/redislock"
local unpack = table.unpack or unpack -- luacheck: ignore 143
local quote = helpers.quote

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

describe("redislock command", function()
  local srv, fresh

  setup(function()
    srv = helpers.start_redis()
    fresh = helpers.names("cli")
  end)
  teardown(function() srv:stop() end)

  local function args_of(...)
    local parts = {}
    for _, a in ipairs({ ... }) do parts[#parts + 1] = quote(a) end
    return table.concat(parts, " ")
  end

  -- Command line for the CLI with REDISLOCK_URL set, the Lua part run by
  -- the spec's interpreter.
  local function cli(...)
    return "REDISLOCK_URL=" .. quote(srv.url) .. " " .. quote(helpers.lua_bin) .. " " .. BIN .. " " .. args_of(...)
  end

  -- The same, started as a command: bin/redislock's shell launcher first.
  local function sh_cli(...)
    return "REDISLOCK_URL=" .. quote(srv.url) .. " " .. BIN .. " " .. args_of(...)
  end

  local function run_sync(...)
    local p = helpers.spawn(cli(...))
    local code = p:wait(30)
    return code, p:stdout(), p:stderr()
  end

  local function key_exists(name)
    return srv:cli_raw("EXISTS", "{" .. name .. "}") == "1"
  end

  local function wait_key(name)
    assert(helpers.wait_until(function() return key_exists(name) end, 5, 0.01),
      "the lock " .. name .. " was never taken")
  end

  local function pid_in(path)
    return tonumber(helpers.wait_until(function() return helpers.read_file(path) end, 5, 0.01):match("%d+"))
  end

  it("runs COMMAND with the lock's name, token, fence and fd in its environment", function()
    local code, out = run_sync("run", "--fence-env", "MY_FENCE", "env1", "--",
      "sh", "-c", 'echo "$REDISLOCK_NAME $REDISLOCK_FENCE $MY_FENCE ${#REDISLOCK_TOKEN} $REDISLOCK_FD"')
    assert.equal(0, code)
    local fence, again, len, fd = out:match("^env1 (%d+) (%d+) (%d+) (%d+)\n$")
    assert.equal(fence, again)
    assert.equal("32", len)
    assert.truthy(tonumber(fd) > 2)
    assert.is_false(key_exists("env1"))
    -- started with stdin closed: the lock's fd never becomes COMMAND's stdin
    local p = helpers.spawn(cli("run", "env1", "--", "sh", "-c",
      'echo "$REDISLOCK_FD"; [ -e /proc/$$/fd/0 ] && echo stdin-open; exit 0') .. " <&-")
    assert.equal(0, p:wait(10))
    assert.matches("^%d+\n$", p:stdout())
    assert.truthy(tonumber(p:stdout()) > 2)
    -- the job pipe is never made on 0, 1 or 2, whatever is closed
    local fds = helpers.tmpdir() .. "/fds"
    p = helpers.spawn(helpers.lua_cmd(([[
      local r, w = require("redislock.process").pipe()
      local f = io.open(%q, "w")
      f:write(r, " ", w)
      f:close()
    ]]):format(fds)) .. " <&- >&- 2>&-")
    assert.equal(0, p:wait(10))
    local r, w = helpers.read_file(fds):match("^(%d+) (%d+)$")
    assert.is_true(tonumber(r) > 2 and tonumber(w) > 2, helpers.read_file(fds))
  end)

  it("exactly one of two concurrent runs takes the lock; the other is silent unless --verbose", function()
    local marker = helpers.tmpdir() .. "/ran"
    local cmd = cli("run", "--wait", "0", "once", "--", "sh", "-c", "echo x >> " .. marker .. "; sleep 1")
    local a = helpers.spawn(cmd)
    local b = helpers.spawn(cmd)
    local ca, cb = a:wait(10), b:wait(10)
    local codes = { ca, cb }
    table.sort(codes)
    assert.same({ 0, 1 }, codes)
    assert.equal("x\n", helpers.read_file(marker))
    local loser = ca == 1 and a or b
    assert.equal("", loser:stderr())   -- like flock -n: cron would mail anything
    assert.equal("", loser:stdout())
    -- --verbose says why
    local holder = helpers.spawn(cli("run", "verbose", "--", "sleep", "5"))
    wait_key("verbose")
    local code, _, err = run_sync("run", "--verbose", "verbose", "--", "true")
    assert.equal(1, code)
    assert.matches("^redislock: verbose is held by [^\n]+:%d+ sleep 5 for %d+%.%d s %(busy%)\n$", err)
    holder:stop()
  end)

  it("with --wait the second run goes after the first", function()
    local log = helpers.tmpdir() .. "/order"
    local first = helpers.spawn(cli("run", "queue", "--", "sh", "-c",
      "echo first-start >> " .. log .. "; sleep 0.5; echo first-end >> " .. log))
    wait_key("queue")
    local second = helpers.spawn(cli("run", "--wait", "5", "queue", "--", "sh", "-c",
      "echo second >> " .. log))
    assert.equal(0, first:wait(10))
    assert.equal(0, second:wait(10))
    assert.equal("first-start\nfirst-end\nsecond\n", helpers.read_file(log))
  end)

  it("gives COMMAND no file descriptor of its own connections, only the job's REDISLOCK_FD", function()
    local list = 'for f in /proc/$$/fd/*; do echo "${f##*/}"; done; echo "fd=$REDISLOCK_FD"'
    local function fds_of(text)
      local fds = {}
      for line in text:gmatch("[^\n]+") do
        if line:match("^%d+$") then fds[#fds + 1] = tonumber(line) end
      end
      table.sort(fds)
      return fds, tonumber(text:match("fd=(%d*)"))
    end
    -- what a shell started the same way has anyway (the test harness' own)
    local plain = helpers.spawn("sh -c " .. quote(list))
    assert.equal(0, plain:wait(10))
    local want = fds_of(plain:stdout())
    local code, out = run_sync("run", "fds", "--", "sh", "-c", list)
    assert.equal(0, code)
    local got, lockfd = fds_of(out)
    assert.truthy(lockfd)
    local with_lockfd = { lockfd }
    for _, fd in ipairs(want) do with_lockfd[#with_lockfd + 1] = fd end
    table.sort(with_lockfd)
    assert.same(with_lockfd, got)
    -- -o: the lock is not passed on at all
    code, out = run_sync("run", "-o", "fds", "--", "sh", "-c", list)
    assert.equal(0, code)
    got, lockfd = fds_of(out)
    assert.is_nil(lockfd)
    assert.same(want, got)
  end)

  it("passes the exit status and signal deaths through, and releases after", function()
    assert.equal(7, (run_sync("run", "st", "--", "sh", "-c", "exit 7")))
    assert.is_false(key_exists("st"))
    assert.equal(128 + 9, (run_sync("run", "st", "--", "sh", "-c", "kill -9 $$")))
    assert.is_false(key_exists("st"))
  end)

  it("exits 127 for a COMMAND that does not exist and 126 for one that cannot be executed", function()
    local code, _, err = run_sync("run", "st", "--", "no-such-command-here")
    assert.equal(127, code)
    assert.matches("cannot run no%-such%-command%-here: No such file", err)
    assert.is_false(key_exists("st"))
    local dir = helpers.tmpdir()
    local f = assert(io.open(dir .. "/not-executable", "w"))
    f:write("#!/bin/sh\necho should not run\n")
    f:close()
    for _, path in ipairs({ dir .. "/not-executable", dir }) do
      code, _, err = run_sync("run", "st", "--", path)
      assert.equal(126, code, path)
      assert.matches("cannot run", err)
      assert.is_false(key_exists("st"))
    end
  end)

  it("passes on TERM and USR1 that another process sends to the guard", function()
    local p = helpers.spawn(cli("run", "fwd", "--", "sh", "-c",
      'trap "echo got-usr1" USR1; trap "echo got-term; exit 42" TERM; echo ready; while :; do sleep 0.05; done'))
    assert(helpers.wait_until(function() return p:stdout():find("ready") end, 5, 0.01))
    helpers.kill(p.pid, "USR1") -- the guard only, not its process group
    assert(helpers.wait_until(function() return p:stdout():find("got%-usr1") end, 5, 0.01))
    helpers.kill(p.pid, "TERM")
    assert.equal(42, p:wait(10))
    assert.matches("got%-term", p:stdout())
    assert.is_false(key_exists("fwd"))
  end)

  it("does not send back a signal the job sent to its own process group", function()
    -- `kill -HUP 0` reaches the job and the guard (one group): once is enough
    -- (the job's sh starts with SIGHUP at its default: one started with it
    -- ignored, as under nohup, cannot trap it)
    local code, out = run_sync("run", "own", "--", "env", "--default-signal=HUP", "sh", "-c",
      'n=0; trap "n=\\$((n+1))" HUP; kill -HUP 0; sleep 0.5; echo "hups=$n"')
    assert.equal(0, code)
    assert.equal("hups=1\n", out)
  end)

  it("keeps the lock while COMMAND runs 10x the ttl", function()
    local p = helpers.spawn(cli("run", "--ttl", "0.3", "long", "--", "sleep", "3"))
    wait_key("long")
    local t0 = helpers.monotime()
    while helpers.monotime() - t0 < 2.7 do
      local code = run_sync("run", "--quiet", "long", "--", "true")
      assert.equal(1, code)
    end
    assert.equal(0, p:wait(10))
    assert.is_false(key_exists("long"))
  end)

  describe("holds the lock for the whole job, like flock", function()
    it("until the processes COMMAND left in the background have exited", function()
      local name = fresh()
      local t0 = helpers.monotime()
      local p = helpers.spawn(cli("run", name, "--", "sh", "-c", "sleep 1.5 & echo started; exit 3"))
      assert(helpers.wait_until(function() return p:stdout():find("started") end, 5, 0.01))
      helpers.sleep(0.5)  -- COMMAND is long gone; its background sleep is not
      assert.is_true(key_exists(name))
      assert.is_true(p:alive())
      assert.equal(3, p:wait(10))   -- COMMAND's own status
      assert.is_true(helpers.monotime() - t0 >= 1.4)
      assert.is_false(key_exists(name))
    end)

    it("-o releases when COMMAND exits and leaves its background processes alone", function()
      local name = fresh()
      local bg = helpers.tmpdir() .. "/bg"
      local t0 = helpers.monotime()
      local p = helpers.spawn(cli("run", "-o", name, "--", "sh", "-c", "sleep 3 & echo $! > " .. bg .. "; exit 0"))
      assert.equal(0, p:wait(10))
      assert.is_true(helpers.monotime() - t0 < 1.5)
      assert.is_false(key_exists(name))
      local pid = pid_in(bg)
      assert.is_true(helpers.alive(pid))
      helpers.kill(pid, "KILL")
    end)

    it("a daemon started with REDISLOCK_FD closed does not hold the lock (docs/cli.md's bash form)", function()
      local name = fresh()
      local bg = helpers.tmpdir() .. "/daemon"
      local t0 = helpers.monotime()
      local p = helpers.spawn(cli("run", name, "--", "bash", "-c",
        "sleep 3 {REDISLOCK_FD}>&- & echo $! > " .. bg .. "; exit 0"))
      assert.equal(0, p:wait(10))
      assert.is_true(helpers.monotime() - t0 < 1.5)
      assert.is_false(key_exists(name))
      local pid = pid_in(bg)
      assert.is_true(helpers.alive(pid))
      helpers.kill(pid, "KILL")
    end)

    it("a lost lock stops every process of the job: children, grandchildren and orphans", function()
      local name = fresh()
      local dir = helpers.tmpdir()
      local p = helpers.spawn(cli("run", "--ttl", "0.6", "--kill-after", "0.5", name, "--", "sh", "-c",
        "sleep 30 & echo $! > " .. dir .. "/bg; (sleep 30 & echo $! > " .. dir .. "/grand; wait) & " ..
        "sh -c 'echo $$ > " .. dir .. "/fg; exec sleep 30'"))
      local pids = { pid_in(dir .. "/bg"), pid_in(dir .. "/grand"), pid_in(dir .. "/fg") }
      srv:cli_raw("DEL", "{" .. name .. "}")
      assert.equal(75, p:wait(10))
      assert.matches("lost %(not held%)", p:stderr())
      for _, pid in ipairs(pids) do
        assert(helpers.wait_until(function() return not helpers.alive(pid) end, 3, 0.02), "pid " .. pid .. " survived")
      end
      -- COMMAND gone already, only an orphan of it holds the lock
      name = fresh()
      p = helpers.spawn(cli("run", "--ttl", "0.6", name, "--", "sh", "-c",
        "sleep 30 & echo $! > " .. dir .. "/orphan; exit 0"))
      local orphan = pid_in(dir .. "/orphan")
      helpers.sleep(0.3)
      assert.is_true(key_exists(name))
      srv:cli_raw("DEL", "{" .. name .. "}")
      assert.equal(75, p:wait(10))
      assert(helpers.wait_until(function() return not helpers.alive(orphan) end, 3, 0.02), "the orphan survived")
    end)
  end)

  describe("when the guard itself dies", function()
    it("COMMAND gets SIGTERM (the default --death-signal), even after a SIGKILL", function()
      local name = fresh()
      local dir = helpers.tmpdir()
      local p = helpers.spawn(cli("run", "--ttl", "1", name, "--", "sh", "-c",
        "echo $$ > " .. dir .. "/pid; trap 'echo term > " .. dir .. "/got; exit 0' TERM; " ..
        "while :; do sleep 0.05; done"))
      local job = pid_in(dir .. "/pid")
      helpers.kill(p.pid, "KILL")
      assert(helpers.wait_until(function() return exists(dir .. "/got") end, 3, 0.02),
        "the job never learned that its guard died")
      assert(helpers.wait_until(function() return not helpers.alive(job) end, 3, 0.02))
    end)

    it("--death-signal KILL, for a COMMAND that ignores TERM", function()
      local name = fresh()
      local dir = helpers.tmpdir()
      local p = helpers.spawn(cli("run", "--death-signal", "KILL", name, "--", "sh", "-c",
        "trap '' TERM; echo $$ > " .. dir .. "/pid; while :; do sleep 0.05; done"))
      local job = pid_in(dir .. "/pid")
      helpers.kill(p.pid, "KILL")
      assert(helpers.wait_until(function() return not helpers.alive(job) end, 3, 0.02), "the job outlived its guard")
      assert.equal(2, (run_sync("run", "--death-signal", "NOPE", name, "--", "true")))
    end)
  end)

  describe("signals as a shell user expects", function()
    it("nohup: a hangup of the whole group leaves COMMAND running", function()
      local name = fresh()
      local p = helpers.spawn("REDISLOCK_URL=" .. quote(srv.url) .. " nohup " .. BIN .. " run " .. name ..
        " -- sh -c 'sleep 1; echo done'")
      wait_key(name)
      p:kill("HUP")   -- the process group, as a terminal's hangup
      assert.equal(0, p:wait(10))
      assert.matches("done", p:stdout())
      assert.is_false(key_exists(name))
    end)

    it("sh's `cmd &` keeps SIGINT ignored in COMMAND", function()
      local name = fresh()
      -- (the spec's own processes start with SIGINT ignored: reset it first)
      local p = helpers.spawn("env --default-signal=INT,QUIT sh -c " ..
        quote(sh_cli("run", name, "--", "sh", "-c", "sleep 1; echo done") .. " & wait"))
      wait_key(name)
      p:kill("INT")   -- the group: the waiting sh dies, the background job must not
      assert.equal(130, p:wait(10))
      assert(helpers.wait_until(function() return p:stdout():find("done") end, 5, 0.02),
        "the background job died of SIGINT")
      assert(helpers.wait_until(function() return not key_exists(name) end, 5, 0.02))
    end)

    it("Ctrl-C on a terminal reaches COMMAND once, not twice", function()
      local name = fresh()
      local dir = helpers.tmpdir()
      -- COMMAND counts the SIGINTs it receives, each as soon as it comes
      local counter = ([[
        local process = require "redislock.process"
        local dir = %q
        local fd = assert(process.signalfd({ "INT" }))
        io.open(dir .. "/ready", "w"):close()
        local n = 0
        while not io.open(dir .. "/stop") do
          if process.signal_wait(fd, 0.02) == "INT" then n = n + 1 end
        end
        print("ints " .. n)
      ]]):format(dir)
      local job = "env --default-signal=INT,QUIT " .. sh_cli("run", name, "--") .. " " .. helpers.lua_cmd(counter)
      -- script(1) runs it on a terminal of its own; ^C written to the
      -- terminal makes its line discipline signal the foreground group
      local feed = ("until [ -e %s/ready ]; do sleep 0.02; done; sleep 0.3; printf '\\003'; " ..
        "sleep 1; touch %s/stop; sleep 3"):format(quote(dir), quote(dir))
      local p = helpers.spawn("{ " .. feed .. "; } | script -qefc " .. quote(job) .. " /dev/null")
      assert.equal(0, p:wait(15))
      assert.matches("ints 1\r?\n", p:stdout())
      assert.is_false(key_exists(name))
    end)
  end)

  it("stops COMMAND and says 'lost' when the key is deleted mid-run", function()
    local p = helpers.spawn(cli("run", "--ttl", "0.6", "victim", "--", "sh", "-c",
      'trap "echo got-term; exit 0" TERM; while :; do sleep 0.05; done'))
    wait_key("victim")
    srv:cli_raw("DEL", "{victim}")
    assert.equal(75, p:wait(10))
    assert.matches("got%-term", p:stdout())
    assert.matches("lost %(not held%)", p:stderr())
  end)

  it("--on-lost ignore lets the job finish and exits with its own status", function()
    local name = fresh()
    local p = helpers.spawn(cli("run", "--ttl", "0.6", "--on-lost", "ignore", name, "--", "sh", "-c",
      "sleep 1; exit 4"))
    wait_key(name)
    srv:cli_raw("DEL", "{" .. name .. "}")
    assert.equal(4, p:wait(10))
    assert.matches("lost %(not held%); the job keeps running", p:stderr())
    local _, help = run_sync("run", "--help")
    assert.is_nil(help:find("unless --on-lost ignore", 1, true))
    assert.matches("with %-%-on%-lost ignore the status is COMMAND's own", help)
  end)

  it("SIGKILLs a COMMAND that ignores SIGTERM after --kill-after", function()
    local p = helpers.spawn(cli("run", "--ttl", "0.6", "--kill-after", "0.3", "stubborn", "--",
      "sh", "-c", 'trap "" TERM; while :; do sleep 0.05; done'))
    wait_key("stubborn")
    srv:cli_raw("DEL", "{stubborn}")
    assert.equal(75, p:wait(10))
  end)

  it("status, release --token and break --force", function()
    local code, out = run_sync("status", "nobody")
    assert.equal(1, code)
    assert.matches("held: no", out)
    local p = helpers.spawn(cli("run", "ops", "--", "sleep", "5"))
    wait_key("ops")
    code, out = run_sync("status", "ops")
    assert.equal(0, code)
    assert.matches("held: yes", out)
    assert.matches("fence: %d+", out)
    assert.is_nil(out:find("token"))
    code, out = run_sync("status", "--show-token", "ops")
    assert.equal(0, code)
    local token = out:match("token: (%x+)")
    assert.equal(32, #token)
    assert.equal(1, (run_sync("release", "--token", string.rep("0", 32), "ops")))
    assert.is_true(key_exists("ops"))
    assert.equal(2, (run_sync("break", "ops")))
    assert.is_true(key_exists("ops"))
    assert.equal(0, (run_sync("release", "--token", token, "ops")))
    assert.is_false(key_exists("ops"))
    p:stop()
    local q = helpers.spawn(cli("run", "ops2", "--", "sleep", "5"))
    wait_key("ops2")
    assert.equal(0, (run_sync("break", "--force", "ops2")))
    assert.is_false(key_exists("ops2"))
    q:stop()
  end)

  it("break --force -h prints help and never deletes a lock named -h", function()
    srv:cli_raw("SET", "{-h}", "someone")
    local code, out = run_sync("break", "--force", "-h")
    assert.equal(0, code)
    assert.matches("usage: redislock break", out)
    assert.is_true(key_exists("-h"))
    for _, args in ipairs({ { "break", "--force", "--", "-h" }, { "break", "--force", "x", "-h" },
                            { "release", "--token", "t", "--", "-h" } }) do
      code = run_sync(unpack(args))
      assert.equal(2, code, table.concat(args, " "))
    end
    assert.is_true(key_exists("-h"))
    srv:cli_raw("DEL", "{-h}")
  end)

  it("takes flock's short options", function()
    local name = fresh()
    -- -w before NAME is --wait, not a lock named -w
    local code, out = run_sync("run", "-w", "5", name, "--", "echo", "ran")
    assert.equal(0, code)
    assert.equal("ran\n", out)
    local holder = helpers.spawn(cli("run", name, "--", "sleep", "5"))
    wait_key(name)
    assert.equal(42, (run_sync("run", "-n", "-E", "42", name, "--", "true")))
    assert.equal(43, (run_sync("run", "-nE43", name, "--", "true")))
    assert.equal(44, (run_sync("run", "--nonblock", "--conflict-exit-code=44", name, "--", "true")))
    local t0 = helpers.monotime()
    assert.equal(1, (run_sync("run", "-w0.3", name, "--", "true")))
    assert.equal(1, (run_sync("run", "--timeout", "0.3", name, "--", "true")))
    assert.is_true(helpers.monotime() - t0 >= 0.6)
    holder:stop()
    for _, args in ipairs({ { "-V" }, { "run", "-V" } }) do
      code, out = run_sync(unpack(args))
      assert.equal(0, code)
      assert.matches("^redislock %d", out)
    end
    for _, args in ipairs({ { "help", "run" }, { "run", "-h" }, { "run", "--help" }, { "run", "-w", "1", "-h" } }) do
      code, out = run_sync(unpack(args))
      assert.equal(0, code, table.concat(args, " "))
      assert.matches("^usage: redislock run", out)
    end
    assert.equal(2, (run_sync("-o", "x")))   -- options of run belong after `run`
    assert.equal(0, (run_sync("run", "-o", name, "--", "true")))
  end)

  it("a usage error exits 2 and takes no lock", function()
    -- no key appears (keys of earlier tests may expire meanwhile: a count
    -- of keys went from 30 to 28 under ASan with other spec files running)
    local function keys()
      local set = {}
      for k in srv:cli_raw("KEYS", "*"):gmatch("[^\n]+") do set[k] = true end
      return set
    end
    local before = keys()
    local bad = {
      { "run", "job", "-w", "5", "--", "true" },      -- an option after NAME
      { "run", "job", "--wait", "5", "true" },
      { "run", "-x", "job", "--", "true" },           -- no such option
      { "run", "--", "-w", "--", "true" },            -- a NAME that looks like an option
      { "run", "-", "--", "true" },
      { "run", "-n", "-w", "5", "job", "--", "true" },
      { "run", "-w", "job", "--", "true" },           -- -w takes a number
      { "status", "job", "--show-token" },
      { "status", "a", "b" },
      { "help", "frobnicate" },
    }
    for _, args in ipairs(bad) do
      local c, _, err = run_sync(unpack(args))
      assert.equal(2, c, table.concat(args, " "))
      assert.matches("^redislock: [^\n]+\n$", err)
    end
    for k in pairs(keys()) do assert(before[k], "a usage error left the key " .. k) end
    assert.is_false(key_exists("-w"))
    assert.equal("0", srv:cli_raw("EXISTS", "{-w}:fence"))
  end)

  it("explains itself and fails clearly on bad input", function()
    local code, out = run_sync("--help")
    assert.equal(0, code)
    assert.matches("usage: redislock", out)
    for _, sub in ipairs({ "run", "status", "release", "break" }) do
      code, out = run_sync(sub, "--help")
      assert.equal(0, code)
      assert.matches("exit status", out)
    end
    code, out = run_sync("--version")
    assert.equal(0, code)
    assert.matches("^redislock %d", out)
    local bad = {
      { "run", "--ttl", "abc", "n", "--", "true" },
      { "run", "--wait", "-1", "n", "--", "true" },
      { "run", "--ttl", "nan", "n", "--", "true" },
      { "run", "n" },
      { "run", "--on-lost", "explode", "n", "--", "true" },
      { "run", "--url", "http://x", "n", "--", "true" },
      { "run", "--ttl", "1e10", "n", "--", "true" },
      { "run", "--wait", "1e12", "n", "--", "true" },
      { "frobnicate" },
      { "status" },
    }
    for _, args in ipairs(bad) do
      local c, _, err = run_sync(unpack(args))
      assert.equal(2, c, table.concat(args, " "))
      assert.matches("^redislock: [^\n]+\n$", err)
    end
    -- unreachable Redis: one line, exit 69, the password never shown
    local p = helpers.spawn(quote(helpers.lua_bin) .. " " .. BIN ..
      " run --url redis://:hunter2@127.0.0.1:1 n -- true")
    assert.equal(69, p:wait(10))
    assert.matches("^redislock: connection", p:stderr())
    assert.is_nil(p:stderr():find("hunter2", 1, true))
  end)

  describe("keeps the URL's password off the command line and out of the job", function()
    local locked

    setup(function() locked = helpers.start_redis { password = "s3cret-pw" } end)
    teardown(function() locked:stop() end)

    local url
    local show = 'echo "url=${REDISLOCK_URL-unset} file=${REDISLOCK_URL_FILE-unset}"'

    local function in_file()
      local path = helpers.tmpdir() .. "/url"
      local f = assert(io.open(path, "w"))
      f:write(url, "\n")
      f:close()
      return path
    end

    before_each(function() url = "redis://:s3cret-pw@127.0.0.1:" .. locked.port end)

    it("--url-file FILE and $REDISLOCK_URL_FILE", function()
      local path = in_file()
      local p = helpers.spawn(quote(helpers.lua_bin) .. " " .. BIN .. " run --url-file " .. quote(path) ..
        " uf -- sh -c " .. quote(show))
      assert.equal(0, p:wait(10), p:stderr())
      assert.equal("url=unset file=unset\n", p:stdout())
      p = helpers.spawn("REDISLOCK_URL_FILE=" .. quote(path) .. " " .. quote(helpers.lua_bin) .. " " .. BIN ..
        " run uf -- sh -c " .. quote(show))
      assert.equal(0, p:wait(10), p:stderr())
      assert.equal("url=unset file=unset\n", p:stdout())
      -- the lock went to the password-protected server
      assert.equal("1", (locked:cli_raw("EXISTS", "{uf}:fence")))
      -- --keep-env passes them on
      p = helpers.spawn("REDISLOCK_URL_FILE=" .. quote(path) .. " " .. quote(helpers.lua_bin) .. " " .. BIN ..
        " run --keep-env uf -- sh -c " .. quote(show))
      assert.equal(0, p:wait(10), p:stderr())
      assert.equal("url=unset file=" .. path .. "\n", p:stdout())
    end)

    it("removes $REDISLOCK_URL from COMMAND's environment unless --keep-env", function()
      local p = helpers.spawn("REDISLOCK_URL=" .. quote(url) .. " " .. quote(helpers.lua_bin) .. " " .. BIN ..
        " run ue -- sh -c " .. quote(show))
      assert.equal(0, p:wait(10), p:stderr())
      assert.equal("url=unset file=unset\n", p:stdout())
      p = helpers.spawn("REDISLOCK_URL=" .. quote(url) .. " " .. quote(helpers.lua_bin) .. " " .. BIN ..
        " run --keep-env ue -- sh -c " .. quote(show))
      assert.equal(0, p:wait(10), p:stderr())
      assert.equal("url=" .. url .. " file=unset\n", p:stdout())
    end)

    it("a missing or empty URL file is a usage error that shows no URL", function()
      local empty = helpers.tmpdir() .. "/empty"
      assert(io.open(empty, "w")):close()
      for _, file in ipairs({ "/nonexistent/url", empty }) do
        local p = helpers.spawn(quote(helpers.lua_bin) .. " " .. BIN .. " run --url-file " .. quote(file) ..
          " uf -- true")
        assert.equal(2, p:wait(10))
        assert.matches("^redislock: [^\n]*" .. file:gsub("%p", "%%%0") .. "[^\n]*\n$", p:stderr())
      end
      local p = helpers.spawn(quote(helpers.lua_bin) .. " " .. BIN .. " run --url x --url-file " ..
        quote(in_file()) .. " uf -- true")
      assert.equal(2, p:wait(10))
      assert.is_nil(p:stderr():find("s3cret", 1, true))
    end)
  end)

  it("--strict is passed to the library only when given", function()
    local redislock = require "redislock"
    local lru = helpers.start_redis { args = { "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru" } }
    local function run_on(server, ...)
      local p = helpers.spawn("REDISLOCK_URL=" .. quote(server.url) .. " " .. quote(helpers.lua_bin) .. " " .. BIN ..
        " " .. args_of(...))
      return p:wait(10), p:stderr()
    end
    -- without --strict: no change, whatever the policy
    assert.equal(0, (run_on(lru, "run", "nostrict", "--", "true")))
    local ok, c = pcall(redislock.connect, { url = srv.url, strict = true })
    if ok and c then c:close() end
    local code, err = run_on(lru, "run", "--strict", "strict", "--", "true")
    if ok then
      -- the library knows `strict`: it refuses an evicting server, naming the setting
      assert.are_not.equal(0, code)
      assert.matches("maxmemory%-policy", err)
      assert.equal(0, (run_on(srv, "run", "--strict", "strict", "--", "true")))
    else
      -- a library without it refuses the option (the library, not our
      -- option parser, which knows --strict): a usage error naming it
      assert.equal(2, code)
      assert.matches("'strict'", err)
      assert.is_nil(err:find("unknown option --strict", 1, true))
    end
    lru:stop()
  end)

  it("status prints each warning the client has about the server", function()
    -- In process, with a client that has warnings (as the library gives
    -- for an evicting maxmemory-policy), so this holds whatever the
    -- library in this tree reports.
    local redislock = require "redislock"
    local cli_mod = require "redislock.cli"
    local real_connect, real_stdout = redislock.connect, io.stdout
    local out = {}
    redislock.connect = function(opts)
      local client, err = real_connect(opts)
      if client then
        return setmetatable({
          warnings = function() return { "first warning", "maxmemory-policy is allkeys-lru" } end,
        }, { __index = function(_, k)
          local v = client[k]
          if type(v) == "function" then return function(_, ...) return v(client, ...) end end
          return v
        end })
      end
      return client, err
    end
    rawset(io, "stdout", { write = function(_, ...) for _, s in ipairs({ ... }) do out[#out + 1] = s end end })
    local ok, code = pcall(cli_mod.main, { "status", "--url", srv.url, "nobody" })
    rawset(io, "stdout", real_stdout)
    redislock.connect = real_connect
    assert(ok, code)
    assert.equal(1, code)
    local text = table.concat(out)
    assert.matches("held: no\n", text)
    assert.matches("\nwarning: first warning\nwarning: maxmemory%-policy is allkeys%-lru\n", text)
  end)
end)

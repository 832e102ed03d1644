-- `redislock run` and friends, as real processes against a real Redis.
local helpers = require "spec.helpers"

local BIN = "bin/redislock"
local unpack = table.unpack or unpack -- luacheck: ignore 143

describe("redislock command", function()
  local srv

  setup(function() srv = helpers.start_redis() end)
  teardown(function() srv:stop() end)

  -- Command line for the CLI with --url set, run by the spec's interpreter.
  local function cli(...)
    local parts = { helpers.quote(helpers.lua_bin), BIN }
    for _, a in ipairs({ ... }) do parts[#parts + 1] = helpers.quote(a) end
    return "REDISLOCK_URL=" .. helpers.quote(srv.url) .. " " .. table.concat(parts, " ")
  end

  local function run_sync(...)
    local p = helpers.spawn(cli(...))
    local code = p:wait(30)
    return code, p:stdout(), p:stderr()
  end

  local function key_exists(name)
    return srv:cli_raw("EXISTS", "{" .. name .. "}") == "1"
  end

  it("runs COMMAND with the lock's name, token and fence in its environment", function()
    local code, out = run_sync("run", "--fence-env", "MY_FENCE", "env1", "--",
      "sh", "-c", 'echo "$REDISLOCK_NAME $REDISLOCK_FENCE $MY_FENCE ${#REDISLOCK_TOKEN}"')
    assert.equal(0, code)
    local fence, again, len = out:match("^env1 (%d+) (%d+) (%d+)\n$")
    assert.equal(fence, again)
    assert.equal("32", len)
    assert.is_false(key_exists("env1"))
  end)

  it("exactly one of two concurrent runs takes the lock with --wait 0", function()
    local marker = helpers.tmpdir() .. "/ran"
    local cmd = { "run", "--wait", "0", "once", "--", "sh", "-c", "echo x >> " .. marker .. "; sleep 1" }
    local a = helpers.spawn(cli(unpack(cmd)))
    local b = helpers.spawn(cli(unpack(cmd)))
    local ca, cb = a:wait(10), b:wait(10)
    local codes = { ca, cb }
    table.sort(codes)
    assert.same({ 0, 1 }, codes)
    local f = assert(io.open(marker))
    local ran = f:read("*a")
    f:close()
    assert.equal("x\n", ran)
    local loser = ca == 1 and a or b
    assert.matches("held elsewhere", loser:stderr())
  end)

  it("with --wait the second run goes after the first", function()
    local log = helpers.tmpdir() .. "/order"
    local first = helpers.spawn(cli("run", "queue", "--", "sh", "-c",
      "echo first-start >> " .. log .. "; sleep 0.5; echo first-end >> " .. log))
    assert(helpers.wait_until(function() return key_exists("queue") end, 5, 0.01))
    local second = helpers.spawn(cli("run", "--wait", "5", "queue", "--", "sh", "-c",
      "echo second >> " .. log))
    assert.equal(0, first:wait(10))
    assert.equal(0, second:wait(10))
    local f = assert(io.open(log))
    assert.equal("first-start\nfirst-end\nsecond\n", f:read("*a"))
    f:close()
  end)

  it("gives COMMAND no file descriptor of its own connections", function()
    local list = 'for f in /proc/$$/fd/*; do echo "${f##*/}"; done'
    local function fds_of(text)
      local fds = {}
      for fd in text:gmatch("%d+") do fds[#fds + 1] = tonumber(fd) end
      table.sort(fds)
      return fds
    end
    -- what a shell started the same way has anyway (the test harness' own)
    local plain = helpers.spawn("sh -c " .. helpers.quote(list))
    assert.equal(0, plain:wait(10))
    local code, out = run_sync("run", "fds", "--", "sh", "-c", list)
    assert.equal(0, code)
    assert.same(fds_of(plain:stdout()), fds_of(out))
  end)

  it("passes the exit status and signal deaths through, and releases after", function()
    assert.equal(7, (run_sync("run", "st", "--", "sh", "-c", "exit 7")))
    assert.is_false(key_exists("st"))
    assert.equal(128 + 9, (run_sync("run", "st", "--", "sh", "-c", "kill -9 $$")))
    assert.is_false(key_exists("st"))
    assert.equal(127, (run_sync("run", "st", "--", "no-such-command-here")))
    assert.is_false(key_exists("st"))
  end)

  it("forwards SIGTERM to COMMAND", function()
    local p = helpers.spawn(cli("run", "fwd", "--", "sh", "-c",
      'trap "echo got-term; exit 42" TERM; echo ready; while :; do sleep 0.05; done'))
    assert(helpers.wait_until(function() return p:stdout():find("ready") end, 5, 0.01))
    helpers.kill(p.pid, "TERM") -- the guard only, not its process group
    assert.equal(42, p:wait(10))
    assert.matches("got%-term", p:stdout())
    assert.is_false(key_exists("fwd"))
  end)

  it("keeps the lock while COMMAND runs 10x the ttl", function()
    local p = helpers.spawn(cli("run", "--ttl", "0.3", "long", "--", "sleep", "3"))
    assert(helpers.wait_until(function() return key_exists("long") end, 5, 0.01))
    local t0 = helpers.monotime()
    while helpers.monotime() - t0 < 2.7 do
      local code = run_sync("run", "--quiet", "long", "--", "true")
      assert.equal(1, code)
    end
    assert.equal(0, p:wait(10))
    assert.is_false(key_exists("long"))
  end)

  it("stops COMMAND and says 'lost' when the key is deleted mid-run", function()
    local p = helpers.spawn(cli("run", "--ttl", "0.6", "victim", "--", "sh", "-c",
      'trap "echo got-term; exit 0" TERM; while :; do sleep 0.05; done'))
    assert(helpers.wait_until(function() return key_exists("victim") end, 5, 0.01))
    srv:cli_raw("DEL", "{victim}")
    assert.equal(75, p:wait(10))
    assert.matches("got%-term", p:stdout())
    assert.matches("lost %(not held%)", p:stderr())
  end)

  it("SIGKILLs a COMMAND that ignores SIGTERM after --kill-after", function()
    local p = helpers.spawn(cli("run", "--ttl", "0.6", "--kill-after", "0.3", "stubborn", "--",
      "sh", "-c", 'trap "" TERM; while :; do sleep 0.05; done'))
    assert(helpers.wait_until(function() return key_exists("stubborn") end, 5, 0.01))
    srv:cli_raw("DEL", "{stubborn}")
    assert.equal(75, p:wait(10))
  end)

  it("status, release --token and break --force", function()
    local code, out = run_sync("status", "nobody")
    assert.equal(1, code)
    assert.matches("held: no", out)
    local p = helpers.spawn(cli("run", "ops", "--", "sleep", "5"))
    assert(helpers.wait_until(function() return key_exists("ops") end, 5, 0.01))
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
    assert(helpers.wait_until(function() return key_exists("ops2") end, 5, 0.01))
    assert.equal(0, (run_sync("break", "--force", "ops2")))
    assert.is_false(key_exists("ops2"))
    q:stop()
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
    local p = helpers.spawn(helpers.quote(helpers.lua_bin) .. " " .. BIN ..
      " run --url redis://:hunter2@127.0.0.1:1 n -- true")
    assert.equal(69, p:wait(10))
    assert.matches("^redislock: connection", p:stderr())
    assert.is_nil(p:stderr():find("hunter2", 1, true))
  end)
end)

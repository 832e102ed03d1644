-- Proves spec/helpers.lua: every other spec trusts it to start, stop and
-- clean up real redis-server (and PostgreSQL) processes.

local helpers = require "spec.helpers"
local socket = require "socket"

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

-- The shell's view, independent of helpers.alive's /proc parsing.
local function kill0(pid)
  local out, code = helpers.sh("kill -0 " .. pid .. " 2>/dev/null")
  return code == 0, out
end

local function proc_state(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s:match(".*%) (%a)")
end

describe("helpers basics", function()
  it("pid() is this interpreter's pid", function()
    -- io.popen's sh is a direct child of this process.
    local out = helpers.sh("echo $PPID")
    assert.equal(tonumber(out), helpers.pid())
  end)

  it("wait_until returns the truthy value, or nil on timeout", function()
    local n = 0
    assert.equal("done", helpers.wait_until(function()
      n = n + 1
      return n == 3 and "done"
    end, 1, 0.01))
    local t0 = helpers.monotime()
    assert.is_nil(helpers.wait_until(function() return false end, 0.2, 0.02))
    local dt = helpers.monotime() - t0
    assert.is_true(dt >= 0.2 and dt < 1, "waited " .. dt)
  end)

  it("tmpdir gives a fresh directory", function()
    local a, b = helpers.tmpdir(), helpers.tmpdir()
    assert.are_not.equal(a, b)
    assert.equal(0, select(2, helpers.sh("test -d " .. helpers.quote(a))))
  end)

  it("quote survives quotes and spaces", function()
    local s = [[it's a "test" $HOME `x` \n]]
    assert.equal(s .. "\n", (helpers.sh("printf '%s\\n' " .. helpers.quote(s))))
  end)
end)

describe("start_redis", function()
  it("starts a TCP server, answers cli, and stop() kills it", function()
    local srv = helpers.start_redis()
    assert.equal("127.0.0.1", srv.host)
    assert.is_number(srv.port)
    assert.is_true(srv.port > 0)
    assert.is_nil(srv.path)
    assert.equal("redis://127.0.0.1:" .. srv.port, srv.url)
    assert.is_true(srv:alive())
    assert.is_true(kill0(srv.pid))
    local out, ok = srv:cli("PING")
    assert.equal("PONG", out)
    assert.is_true(ok)
    -- No persistence, own dir.
    assert.equal("save", (srv:cli_raw("CONFIG", "GET", "save")))
    assert.equal("dir\n" .. srv.dir, (srv:cli_raw("CONFIG", "GET", "dir")))

    local pid, dir, gpid = srv.pid, srv.dir, srv.guard_pid
    srv:stop()
    assert.is_false(srv:alive())
    assert.is_false(kill0(pid))
    assert.is_false(helpers.alive(gpid), "guardian lingers")
    assert.is_false(exists(dir))
    srv:stop() -- idempotent
  end)

  it("cli passes arguments with spaces and quotes verbatim", function()
    local srv = helpers.start_redis()
    finally(function() srv:stop() end)
    local v = [[it's "quoted" with  spaces; $HOME]]
    assert.equal("OK", (srv:cli("SET", "my key", v)))
    assert.equal(v, (srv:cli_raw("GET", "my key")))
    assert.equal("(integer) 1", (srv:cli("EXISTS", "my key")))
    assert.equal("(nil)", (srv:cli("GET", "missing")))
    assert.equal("", (srv:cli_raw("GET", "missing")))
    local err = srv:cli("NOSUCHCOMMAND")
    assert.matches("^%(error%) ERR unknown command", err)
  end)

  it("starts two servers on different ports", function()
    local a, b = helpers.start_redis(), helpers.start_redis()
    finally(function() a:stop(); b:stop() end)
    assert.are_not.equal(a.port, b.port)
    a:cli("SET", "k", "a")
    assert.equal("", (b:cli_raw("GET", "k")))
  end)

  it("starts a unix-socket-only server", function()
    local srv = helpers.start_redis({ unix = true })
    finally(function() srv:stop() end)
    assert.equal(0, srv.port)
    assert.is_nil(srv.host)
    assert.equal(srv.dir .. "/redis.sock", srv.path)
    assert.equal("unix://" .. srv.path, srv.url)
    assert.equal(0, select(2, helpers.sh("test -S " .. helpers.quote(srv.path))))
    assert.equal("PONG", (srv:cli("PING")))
    assert.equal("port\n0", (srv:cli_raw("CONFIG", "GET", "port")))
  end)

  it("starts a password-protected server, with extra args", function()
    local srv = helpers.start_redis({ password = "s3cr et'", args = { "--maxmemory", "1mb" } })
    finally(function() srv:stop() end)
    assert.equal("s3cr et'", srv.password)
    assert.equal("PONG", (srv:cli("PING")))
    assert.equal("maxmemory\n1048576", (srv:cli_raw("CONFIG", "GET", "maxmemory")))
    local out = helpers.sh("redis-cli -p " .. srv.port .. " PING 2>&1")
    assert.matches("NOAUTH", out)
  end)

  it("applies ACL lines", function()
    local srv = helpers.start_redis({
      acl = { "user default on nopass ~* &* +@all",
              "user alice on >pw ~app:* +get +set" },
    })
    finally(function() srv:stop() end)
    local as_alice = { "--user", "alice", "--pass", "pw" }
    local unpack = table.unpack or unpack
    local function alice(...)
      local args = { unpack(as_alice) }
      for i = 1, select("#", ...) do args[#args + 1] = select(i, ...) end
      return (srv:cli(unpack(args)))
    end
    assert.equal("OK", alice("SET", "app:1", "v"))
    assert.equal('"v"', alice("GET", "app:1"))
    assert.matches("NOPERM", alice("SET", "other:1", "v"))
    assert.matches("NOPERM", alice("DEL", "app:1"))
  end)

  it("puts the password on the default user when ACL lines are given", function()
    local srv = helpers.start_redis({ password = "pw0", acl = { "user bob on >pw1 ~* +ping" } })
    finally(function() srv:stop() end)
    assert.equal("PONG", (srv:cli("PING")))
    assert.matches("NOAUTH", (helpers.sh("redis-cli -p " .. srv.port .. " PING 2>&1")))
    assert.equal("PONG", (srv:cli("--user", "bob", "--pass", "pw1", "PING")))
  end)

  it("enables DEBUG only with debug = true", function()
    local plain, dbg = helpers.start_redis(), helpers.start_redis({ debug = true })
    finally(function() plain:stop(); dbg:stop() end)
    assert.equal("OK", (dbg:cli("DEBUG", "SLEEP", "0")))
    assert.matches("DEBUG command not allowed", (plain:cli("DEBUG", "SLEEP", "0")))
  end)

  it("binds ::1 with ipv6 = true", function()
    local probe = socket.bind("::1", 0)
    if not probe then return pending("no ::1 on this machine") end
    probe:close()
    local srv = helpers.start_redis({ ipv6 = true })
    finally(function() srv:stop() end)
    assert.equal("::1", srv.host)
    assert.equal("redis://[::1]:" .. srv.port, srv.url)
    assert.equal("PONG", (srv:cli("PING")))
  end)

  it("fails clearly, with the redis log, when redis cannot start", function()
    local ok, err = pcall(helpers.start_redis, { args = { "--no-such-directive", "1" } })
    assert.is_false(ok)
    assert.matches("redis%-server failed to start", err)
    assert.matches("Bad directive", err)
  end)

  it("restarts on the same port after kill -9, without the old data", function()
    local srv = helpers.start_redis()
    finally(function() srv:stop() end)
    srv:cli("SET", "k", "v")
    local old_pid, port = srv.pid, srv.port
    assert.is_true(srv:kill("KILL"))
    assert.truthy(helpers.wait_until(function() return not srv:alive() end, 2))
    assert.is_false(select(2, srv:cli("PING"))) -- connection refused: non-zero exit
    srv:restart()
    assert.are_not.equal(old_pid, srv.pid)
    assert.equal(port, srv.port)
    assert.equal("PONG", (srv:cli("PING")))
    assert.equal("(nil)", (srv:cli("GET", "k")))
  end)

  it("restarts a unix-socket server", function()
    local srv = helpers.start_redis({ unix = true })
    finally(function() srv:stop() end)
    srv:kill("KILL")
    srv:restart()
    assert.equal("PONG", (srv:cli("PING")))
  end)

  it("kill() delivers STOP and CONT; stop() copes with a stopped server", function()
    local srv = helpers.start_redis()
    local pid = srv.pid
    srv:kill("STOP")
    assert.truthy(helpers.wait_until(function() return proc_state(pid) == "T" end, 2))
    srv:kill("SIGCONT")
    assert.truthy(helpers.wait_until(function() return proc_state(pid) ~= "T" end, 2))
    srv:kill("STOP")
    srv:stop()
    assert.is_false(kill0(pid))
  end)
end)

describe("spawn", function()
  it("passes exit codes and captures stdout/stderr", function()
    local p = helpers.spawn("echo out; echo err >&2; exit 3")
    finally(function() p:stop() end)
    assert.equal(3, p:wait(5))
    assert.equal("out\n", p:stdout())
    assert.equal("err\n", p:stderr())
    assert.is_false(p:alive())
    assert.equal(0, helpers.spawn("true"):wait(5))
  end)

  it("gives the command's own pid and delivers STOP/CONT/TERM to it", function()
    local p = helpers.spawn("sleep 30")
    finally(function() p:stop() end)
    -- bash execs the command in its own place, but maybe not yet (slower
    -- under the sanitizer's LD_PRELOAD): the pid turns into sleep's
    assert.truthy(helpers.wait_until(function()
      local f = io.open("/proc/" .. p.pid .. "/comm")
      local comm = f and f:read("*l")
      if f then f:close() end
      return comm == "sleep"
    end, 5, 0.01))
    assert.is_nil(p:wait(0.1))
    p:kill("STOP")
    assert.truthy(helpers.wait_until(function() return proc_state(p.pid) == "T" end, 2))
    p:kill("CONT")
    assert.truthy(helpers.wait_until(function() return proc_state(p.pid) == "S" end, 2))
    p:kill("TERM")
    assert.equal(128 + 15, p:wait(5))
    assert.is_false(p:alive())
  end)

  it("signals reach compound commands", function()
    local p = helpers.spawn("sleep 30; echo not reached")
    finally(function() p:stop() end)
    helpers.sleep(0.1)
    p:kill("KILL")
    assert.equal(128 + 9, p:wait(5))
    assert.equal("", p:stdout())
  end)

  it("stop() kills a running command", function()
    local p = helpers.spawn("sleep 30")
    local pid = p.pid
    p:stop()
    assert.is_false(kill0(pid))
  end)

  it("lua_cmd runs code and files with the repo's paths", function()
    local root = (helpers.sh("pwd")):gsub("%s+$", "")
    local p = helpers.spawn(helpers.lua_cmd([[
      print(_VERSION)
      print(package.path:match("^[^;]*"))
      print(package.cpath:match("^[^;]*"))
      print(require("spec.helpers").pid())
    ]]))
    finally(function() p:stop() end)
    assert.equal(0, p:wait(10), p:stderr())
    local cpath = (os.getenv("REDISLOCK_CPATH") or "./?.so"):gsub("^%./", root .. "/")
    assert.equal(table.concat({ _VERSION, root .. "/lua/?.lua", cpath, p.pid }, "\n")
      .. "\n", p:stdout()) -- a simple command, so p.pid is lua itself

    local file = helpers.tmpdir() .. "/script.lua"
    local f = assert(io.open(file, "w"))
    f:write("print(select('#', ...), ...)\nos.exit(7)\n")
    f:close()
    local q = helpers.spawn(helpers.lua_cmd(file, "a b", "c'd"))
    finally(function() q:stop() end)
    assert.equal(7, q:wait(10), q:stderr())
    assert.equal("2\ta b\tc'd\n", q:stdout())
  end)
end)

describe("guardian", function()
  it("kills redis when the Lua process that started it is killed -9", function()
    local child = helpers.spawn(helpers.lua_cmd([[
      local h = require "spec.helpers"
      local s = h.start_redis()
      io.write(s.pid, " ", s.guard_pid, " ", s.dir, "\n")
      io.stdout:flush()
      h.sleep(60)
    ]]))
    finally(function() child:stop() end)
    local line = helpers.wait_until(function() return child:stdout():match("^%d+ %d+ %S+\n") end, 10)
    assert.truthy(line, "child printed nothing; stderr: " .. child:stderr())
    local pid, gpid, dir = line:match("^(%d+) (%d+) (%S+)")
    pid, gpid = tonumber(pid), tonumber(gpid)
    assert.is_true(helpers.alive(pid))

    assert.is_true(child:kill("KILL"))
    assert.equal(128 + 9, child:wait(5))
    assert.truthy(helpers.wait_until(function() return not kill0(pid) end, 3),
      "redis " .. pid .. " outlived its Lua parent")
    assert.truthy(helpers.wait_until(function() return not helpers.alive(gpid) end, 3),
      "guardian outlived its redis")
    assert.truthy(helpers.wait_until(function() return not exists(dir) end, 3),
      "guardian left " .. dir)
  end)

  it("stop_all stops everything still running", function()
    local srv = helpers.start_redis()
    local p = helpers.spawn("sleep 30")
    local dir = helpers.tmpdir()
    helpers.stop_all()
    assert.is_false(kill0(srv.pid))
    assert.is_false(kill0(p.pid))
    assert.is_false(exists(srv.dir))
    assert.is_false(exists(dir))
  end)
end)

describe("start_postgres", function()
  it("listens on its unix socket only, and stop() ends it by pid", function()
    local pg = helpers.start_postgres()
    finally(function() pg:stop() end)
    assert.equal("", (pg:psql("SHOW listen_addresses")))
    assert.equal(pg.dir, (pg:psql("SHOW unix_socket_directories")))
    local tcp = helpers.sh("ss -Hltnp 2>/dev/null | grep -F " .. helpers.quote("pid=" .. pg.pid .. ","))
    assert.equal("", tcp)
    assert.equal("postgres", (helpers.sh("stat -c %U " .. helpers.quote(pg.data)):gsub("%s+$", "")))
    pg:stop()
    assert.is_false(helpers.alive(pg.pid))
    assert.is_nil(io.open(pg.dir))
  end)

  it("is stopped when the spec that started it raises, and when its process is killed -9", function()
    local code = [[
      local h = require "spec.helpers"
      local pg = h.start_postgres()
      -- its own processes (checkpointer, walwriter, ...) are sessions of their own
      local children = {}
      for p in (h.sh("ls /proc")):gmatch("%%d+") do
        local ppid = (h.read_file("/proc/" .. p .. "/stat") or ""):match(".*%%) %%a (%%d+)")
        if tonumber(ppid) == pg.pid then children[#children + 1] = p end
      end
      children = table.concat(children, ",")
      io.write(pg.pid, " ", pg.dir, " ", children, "\n") io.stdout:flush()
      h.sleep(%d)
      error("the spec fails")
    ]]
    for _, case in ipairs({ { 0, 1 }, { 60, 128 + 9 } }) do
      local child = helpers.spawn(helpers.lua_cmd(code:format(case[1])))
      finally(function() child:stop() end)
      local line = helpers.wait_until(function() return child:stdout():match("^%d+ %S+ %S+\n") end, 30)
      assert.truthy(line, "child printed nothing; stderr: " .. child:stderr())
      local pid, dir, children = line:match("^(%d+) (%S+) (%S+)")
      assert.matches("%d+,%d+", children)
      if case[1] > 0 then assert.is_true(child:kill("KILL")) end
      assert.equal(case[2], child:wait(15), child:stderr())
      assert.truthy(helpers.wait_until(function() return not helpers.alive(tonumber(pid)) end, 5),
        "postgres " .. pid .. " outlived its Lua parent")
      for cpid in children:gmatch("%d+") do
        assert.truthy(helpers.wait_until(function() return not helpers.alive(tonumber(cpid)) end, 5),
          "postgres process " .. cpid .. " outlived its postmaster")
      end
      assert.truthy(helpers.wait_until(function() return not io.open(dir) end, 5), dir .. " left")
    end
  end)
end)

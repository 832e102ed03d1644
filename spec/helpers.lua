--[[
spec/helpers.lua -- test support for the redislock specs: real redis-server
processes, background child processes and timing utilities.

Usage (specs run from the repo root: `lua5.4 /usr/bin/busted`):

  local helpers = require "spec.helpers"

  describe("locks", function()
    local srv
    setup(function() srv = helpers.start_redis() end)
    teardown(function() srv:stop() end)

    it("talks to redis", function()
      assert.equal("PONG", (srv:cli("PING")))
    end)
  end)

Always stop what you start in teardown. Two safety nets exist on top of that:
  * helpers.stop_all() runs from a __gc sentinel when the Lua state is closed
    (busted leaves through os.exit(code, true), which closes the state), so a
    spec that errors before its teardown does not leak servers;
  * every redis-server / spawned command runs under a small `sh` guardian that
    SIGKILLs it (and removes its temp dir) as soon as this Lua process is gone,
    which covers kill -9 and crashes, where no Lua code runs at all.

Linux only: liveness is read from /proc/<pid>/stat, and a zombie counts as
dead (orphaned guardians may never be reaped when pid 1 is not an init).
Must stay loadable on Lua 5.1 (no goto, no table.pack, no integer division).
]]

local socket = require "socket"
local system = require "system"

local M = {}

local START_TIMEOUT = 5   -- seconds redis gets to answer PING
local GRACE = 2           -- seconds between SIGTERM and SIGKILL
local PORT_ATTEMPTS = 5   -- another process may grab the port we picked
local LOG_TAIL_LINES = 20

-- Everything started, so stop_all can clean up after failing specs.
local registry = { servers = {}, procs = {}, dirs = {} }

---------------------------------------------------------------------------
-- Shell and process primitives
---------------------------------------------------------------------------

--- Single-quote `s` for /bin/sh; safe for any content, including quotes.
function M.quote(s)
  return "'" .. (tostring(s):gsub("'", [['\'']])) .. "'"
end
local quote = M.quote

local function trim(s)
  return (s:gsub("^%s+", ""):gsub("%s+$", ""))
end

-- os.execute returns (true|nil, "exit", code) since 5.2 but a number on 5.1.
local function execute(cmd)
  local a, _, code = os.execute(cmd)
  if type(a) == "number" then return a == 0, a end
  return a == true, code
end

--- Run a shell command; returns its stdout and exit code.
-- The command echoes its own status because io.popen():close() reports
-- none on Lua 5.1.
function M.sh(cmd)
  local f = assert(io.popen(cmd .. '\necho "~$?"', "r"))
  local out = f:read("*a")
  f:close()
  local body, code = out:match("^(.*)~(%d+)%s*$")
  return body or out, tonumber(code)
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

--- The whole file, binary; nil when it cannot be opened.
M.read_file = read_file

--- The fields `...` of table t, as a table of their own (for assert.same
-- on part of a larger answer).
function M.pick(t, ...)
  local out = {}
  for i = 1, select("#", ...) do
    local k = select(i, ...)
    out[k] = t[k]
  end
  return out
end

--- A maker of names no other test in the file uses: fresh() -> "LABEL:1",
-- "LABEL:2", ...; fresh(other) takes another label for that one name.
function M.names(label)
  local n = 0
  return function(other)
    n = n + 1
    return (other or label) .. ":" .. n
  end
end

local function write_file(path, s)
  local f = assert(io.open(path, "wb"))
  assert(f:write(s))
  f:close()
end

local function tail(s, n)
  local lines = {}
  -- "[^\n]*" yields extra empty matches before 5.4; blank lines don't matter.
  for line in (s or ""):gmatch("[^\n]+") do lines[#lines + 1] = line end
  local from = math.max(1, #lines - n + 1)
  return table.concat(lines, "\n", from)
end

--- True if `pid` exists and is not a zombie.
-- kill -0 succeeds on zombies, which would make a dead-but-unreaped process
-- look alive; /proc tells them apart.
function M.alive(pid)
  local stat = pid and read_file("/proc/" .. tostring(pid) .. "/stat")
  if not stat then return false end
  -- comm (field 2) may contain spaces and parens: state follows the last ") ".
  local state = stat:match(".*%) (%a)")
  return state ~= nil and state ~= "Z"
end
local alive = M.alive

-- Accepts "TERM", "SIGTERM", "term", 15; refuses anything that could inject.
local function signame(sig)
  local name = tostring(sig or "TERM"):upper():gsub("^SIG", "")
  assert(name:match("^%w+$"), "bad signal: " .. tostring(sig))
  return name
end

--- Send `sig` to `target` (a pid, or "-<pgid>" for a process group).
function M.kill(target, sig)
  return (execute(("kill -s %s -- %s 2>/dev/null"):format(signame(sig), tostring(target))))
end
local send_signal = M.kill

local function read_own_pid()
  -- Opened by this very process, so "self" is the Lua interpreter.
  local stat = assert(read_file("/proc/self/stat"), "no /proc/self/stat")
  return tonumber(stat:match("^(%d+)"))
end
local OWN_PID = read_own_pid()

--- This Lua process's pid.
function M.pid() return OWN_PID end

---------------------------------------------------------------------------
-- Time
---------------------------------------------------------------------------

M.monotime = system.monotime
M.sleep = system.sleep

--- Poll `fn` until it returns a truthy value (returned) or `timeout_s`
-- (default 5) passes (returns nil). `interval_s` defaults to 0.05.
function M.wait_until(fn, timeout_s, interval_s)
  local deadline = M.monotime() + (timeout_s or 5)
  interval_s = interval_s or 0.05
  while true do
    local v = fn()
    if v then return v end
    if M.monotime() >= deadline then return nil end
    M.sleep(interval_s)
  end
end

local function gone(pid, timeout_s)
  return M.wait_until(function() return not alive(pid) end, timeout_s or GRACE)
end

---------------------------------------------------------------------------
-- Temp dirs
---------------------------------------------------------------------------

--- A fresh temp dir; removed by stop_all() (also at exit).
-- Short prefix: unix socket paths inside it must stay under 108 bytes.
function M.tmpdir()
  local out, code = M.sh('mktemp -d "${TMPDIR:-/tmp}/rl-spec.XXXXXX"')
  assert(code == 0, "mktemp -d failed: " .. out)
  local dir = trim(out)
  registry.dirs[dir] = true
  return dir
end

local function remove_dir(dir)
  if dir then
    execute("rm -rf " .. quote(dir))
    registry.dirs[dir] = nil
  end
end

---------------------------------------------------------------------------
-- Guardian: run a command so that it dies with this Lua process
---------------------------------------------------------------------------

-- Runs `setsid ARGV` in the background (own session: group signals reach
-- everything it forks, and signals aimed at busted's group don't hit it),
-- writes "<child pid> <guardian pid>" atomically, then waits for the child.
-- A watchdog subshell polls the owner (this Lua process); once the owner is
-- gone it SIGKILLs the child's process group. When the child ends, the
-- guardian kills the watchdog and either records the exit status or, if the
-- owner is gone, removes the work dir. So nothing outlives the child by more
-- than one poll. @...@ placeholders are filled in by guard().
local GUARDIAN = [=[
owner=@OWNER@ dir=@DIR@
alive() { read s 2>/dev/null <"/proc/$1/stat" || return 1; s=${s##*") "}; [ "${s%% *}" != Z ]; }
setsid @ARGV@ >@OUT@ 2>@ERR@ </dev/null &
c=$!
echo "$c $$" >"$dir/guard.tmp" && mv "$dir/guard.tmp" "$dir/guard.pid"
( while alive "$owner"; do sleep 0.2; done
  kill -s KILL -- "-$c" 2>/dev/null || kill -s KILL "$c" 2>/dev/null ) &
w=$!
wait "$c"; st=$?
kill "$w" 2>/dev/null
if alive "$owner"; then
  echo "$st" >"$dir/status.tmp" && mv "$dir/status.tmp" "$dir/status"
else
  rm -rf "$dir"
fi
]=]

-- Start `argv` (an already shell-quoted command line) under a guardian that
-- keeps its bookkeeping in `dir`. Returns child pid, guardian pid.
local function guard(argv, dir, out, err)
  os.remove(dir .. "/guard.pid")
  os.remove(dir .. "/status")
  local script = GUARDIAN:gsub("@(%u+)@", {
    OWNER = tostring(OWN_PID),
    DIR = quote(dir),
    ARGV = argv,
    OUT = quote(out),
    ERR = err and quote(err) or "&1",
  })
  -- setsid: a group signal aimed at the owner (or at the child) must not take
  -- the guardian down with it, or the child would be orphaned.
  assert(execute("setsid sh -c " .. quote(script) .. " >/dev/null 2>&1 </dev/null &"))
  local line = M.wait_until(function() return read_file(dir .. "/guard.pid") end, 5, 0.01)
  assert(line, "guardian did not start: " .. argv)
  local pid, gpid = line:match("^(%d+) (%d+)")
  return tonumber(pid), tonumber(gpid)
end

-- Ask politely, then insist. CONT lets a SIGSTOPped process act on TERM.
-- Returns once the process (and its guardian) are gone.
local function terminate(pid, guard_pid, target, sig)
  if alive(pid) then
    send_signal(target, sig or "TERM")
    send_signal(target, "CONT")
    if not gone(pid) then
      send_signal(target, "KILL")
      assert(gone(pid), "pid " .. pid .. " survived SIGKILL")
    end
  end
  if not gone(guard_pid) then send_signal(guard_pid, "KILL") end
end

---------------------------------------------------------------------------
-- Redis servers
---------------------------------------------------------------------------

local Server = {}
Server.__index = Server

local function free_port(host)
  local s = assert(socket.bind(host, 0))
  local _, port = s:getsockname()
  s:close()
  return tonumber(port)
end

--- A TCP port that nothing listens on now, on `host` (default 127.0.0.1).
function M.free_port(host) return free_port(host or "127.0.0.1") end

-- An aclfile overrides --requirepass (the default user silently becomes
-- nopass), so with acl lines the password goes on the default user instead,
-- unless the lines define the default user themselves.
local function write_aclfile(dir, lines, password)
  local all = {}
  local has_default = false
  for i, line in ipairs(lines) do
    all[i] = line
    has_default = has_default or line:match("^%s*user%s+default%s") ~= nil
  end
  if password and not has_default then
    table.insert(all, 1, "user default on >" .. password .. " ~* &* +@all")
  end
  local file = dir .. "/users.acl"
  write_file(file, table.concat(all, "\n") .. "\n")
  return file
end

-- "host port" of what opts.replicaof names: a server (or any table with
-- host and port), "host port", "host:port" or a bare port on 127.0.0.1.
local function replica_target(r)
  if type(r) == "table" then return r.host or "127.0.0.1", r.port end
  local host, port = tostring(r):match("^(%S+)[%s:](%d+)$")
  if host then return host, port end
  return "127.0.0.1", tostring(r)
end

local function redis_cmdline(srv)
  local opts = srv.opts
  local a = { srv.bin }
  if srv.config_file then a[#a + 1] = srv.config_file end
  local function add(...)
    for i = 1, select("#", ...) do a[#a + 1] = select(i, ...) end
  end
  add("--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", srv.dir)
  if srv.path then
    add("--port", "0", "--unixsocket", srv.path, "--unixsocketperm", "700")
  else
    add("--port", tostring(srv.port), "--bind", srv.host)
  end
  if opts.acl then
    add("--aclfile", write_aclfile(srv.dir, opts.acl, opts.password))
  elseif opts.password then
    add("--requirepass", opts.password)
  end
  if opts.debug then add("--enable-debug-command", "local") end
  if opts.replicaof then
    local host, port = replica_target(opts.replicaof)
    add("--replicaof", host, tostring(port))
  end
  local masterauth = opts.masterauth
  if masterauth == nil and (opts.replicaof or opts.cluster) then masterauth = opts.password end
  if masterauth then add("--masterauth", masterauth) end
  if opts.cluster then
    add("--cluster-enabled", "yes", "--cluster-config-file", srv.dir .. "/nodes.conf",
        "--cluster-port", tostring(srv.bus_port),
        "--cluster-node-timeout", tostring(opts.cluster_node_timeout or 2000))
  end
  for _, v in ipairs(opts.args or {}) do add(tostring(v)) end
  for i = 1, #a do a[i] = quote(a[i]) end
  return table.concat(a, " ")
end

local function cli_cmdline(srv, mode, ...)
  local a = { "redis-cli" }
  if srv.path then
    a[#a + 1] = "-s " .. quote(srv.path)
  else
    a[#a + 1] = "-h " .. quote(srv.host) .. " -p " .. srv.port
  end
  if srv.password then a[#a + 1] = "-a " .. quote(srv.password) end
  a[#a + 1] = "--no-auth-warning " .. mode
  for i = 1, select("#", ...) do
    a[#a + 1] = quote(tostring((select(i, ...))))
  end
  return table.concat(a, " ") .. " </dev/null"
end

-- Any reply (PONG, NOAUTH, ...) means the server is up; connection errors go
-- to stderr, so stdout stays empty until then.
local function answers(srv)
  local out = M.sh(cli_cmdline(srv, "--raw", "PING") .. " 2>/dev/null")
  return trim(out) ~= ""
end

local function wait_ready(srv)
  local deadline = M.monotime() + START_TIMEOUT
  repeat
    if answers(srv) then return true end
    if not alive(srv.pid) then return false, "exited" end
    M.sleep(0.05)
  until M.monotime() > deadline
  return false, "no PING reply within " .. START_TIMEOUT .. "s"
end

local function failure_message(srv, why)
  return ("%s failed to start (%s)\ncommand: %s\n--- %s (last %d lines):\n%s"):format(
    srv.bin, why, srv.cmdline, srv.log, LOG_TAIL_LINES, tail(read_file(srv.log), LOG_TAIL_LINES))
end

-- One attempt on the current port/socket. Returns true, or false, an error
-- message and whether the port was taken (worth retrying on another one).
local function launch(srv)
  terminate(srv.pid, srv.guard_pid, srv.pid, "KILL")  -- leftover of a previous attempt
  srv.cmdline = redis_cmdline(srv)
  srv.pid, srv.guard_pid = guard(srv.cmdline, srv.dir, srv.log)
  local ok, why = wait_ready(srv)
  if ok then return true end
  local msg = failure_message(srv, why)
  terminate(srv.pid, srv.guard_pid, srv.pid, "KILL")
  return false, msg, (read_file(srv.log) or ""):find("already in use", 1, true) ~= nil
end

--- Start a redis-server (no persistence, own temp --dir) and wait for PING.
-- opts (all optional):
--   unix = true      listen only on <dir>/redis.sock (port 0, host nil)
--   ipv6 = true      bind ::1 instead of 127.0.0.1
--   password = "pw"  requirepass (or the default user's password with acl);
--                    cli() then authenticates with it
--   acl = {lines}    written to <dir>/users.acl, passed as --aclfile
--   debug = true     --enable-debug-command local
--   cluster = true   --cluster-enabled yes, its own nodes.conf, a short
--                    node timeout (cluster_node_timeout ms, 1000)
--   sentinel = text  a redis-sentinel instead, with these config lines
--   args = {...}     extra redis-server arguments, appended last
--   bin = "redis-sentinel"  another executable taking redis-server's options
--   config = "text"  written to <dir>/<bin>.conf (writable: sentinel and
--                    CONFIG REWRITE rewrite it), passed as the config file
--   config_file = p  an existing config file instead
--   replicaof = srv  --replicaof srv.host srv.port (also "host port", or a
--                    port on 127.0.0.1); --masterauth is `password` unless
--   masterauth = pw  says otherwise
--   cluster = true   --cluster-enabled with <dir>/nodes.conf, a bus port of
--                    its own (field bus_port) and --cluster-node-timeout
--   cluster_node_timeout = ms   (default 2000)
-- Fields: host, port, path, url, pid, dir, log, password, guard_pid, bin,
-- config_file, bus_port (cluster).
function M.start_redis(opts)
  opts = opts or {}
  local dir = M.tmpdir()
  local bin = opts.bin or "redis-server"
  local srv = setmetatable({ opts = opts, dir = dir, log = dir .. "/redis.log", bin = bin,
                             password = opts.password, port = 0 }, Server)
  registry.servers[srv] = true
  if opts.config then
    srv.config_file = dir .. "/" .. bin:match("[^/]*$") .. ".conf"
    write_file(srv.config_file, opts.config)
  else
    srv.config_file = opts.config_file
  end
  if opts.unix then
    srv.path = dir .. "/redis.sock"
    assert(#srv.path < 108, "unix socket path too long (set a shorter TMPDIR): " .. srv.path)
    srv.url = "unix://" .. srv.path
  else
    srv.host = opts.ipv6 and "::1" or "127.0.0.1"
  end
  for attempt = 1, opts.unix and 1 or PORT_ATTEMPTS do
    if not opts.unix then srv.port = free_port(srv.host) end
    if opts.cluster then
      repeat srv.bus_port = free_port(srv.host or "127.0.0.1") until srv.bus_port ~= srv.port
    end
    local ok, msg, port_taken = launch(srv)
    if ok then break end
    if not port_taken or attempt == PORT_ATTEMPTS then
      srv:stop()
      error(msg, 2)
    end
  end
  if not opts.unix then
    local h = opts.ipv6 and "[::1]" or srv.host
    srv.url = ("redis://%s:%d"):format(h, srv.port)
  end
  return srv
end

--- redis-cli against this server in its default (tty-like) formatting:
-- `"str"`, `(integer) 1`, `(nil)`, `(error) ...`, `1) "a"`.
-- Returns trimmed stdout+stderr, and true if redis-cli exited 0 (it does even
-- for error replies; non-zero means e.g. connection refused).
function Server:cli(...)
  local out, code = M.sh(cli_cmdline(self, "--no-raw", ...) .. " 2>&1")
  return trim(out), code == 0
end

--- Like cli() but --raw: bare values, one per line, nil as "".
function Server:cli_raw(...)
  local out, code = M.sh(cli_cmdline(self, "--raw", ...) .. " 2>&1")
  return trim(out), code == 0
end

function Server:alive() return alive(self.pid) end

--- Signal the redis-server process ("STOP", "CONT", "KILL", 9, ...).
function Server:kill(sig) return send_signal(self.pid, sig) end

--- Start a fresh process on the same port/socket and dir (data is gone:
-- there is no persistence). A still-running process is SIGKILLed first.
function Server:restart()
  assert(not self.stopped, "restart() after stop()")
  local ok, msg = launch(self)
  if not ok then error(msg, 2) end
  return self
end

--- TERM, then KILL after 2 s; waits until gone; removes the dir. Idempotent.
function Server:stop()
  if self.stopped then return end
  self.stopped = true
  terminate(self.pid, self.guard_pid, self.pid, "TERM")
  remove_dir(self.dir)
  registry.servers[self] = nil
end

---------------------------------------------------------------------------
-- Background commands
---------------------------------------------------------------------------

local Proc = {}
Proc.__index = Proc

--- Run `cmd` (a shell string, via `bash -c`) in the background in its own
-- session. proc.pid is the command's own pid when cmd is a single simple
-- command (bash execs it), else the wrapping bash; kill() signals the whole
-- process group so signals reach the command either way.
--
-- TMPDIR is the proc's own dir: temp dirs the command makes (a child Lua
-- process using these helpers makes its servers' and procs' dirs there) go
-- when the proc's dir goes, even if that child never cleans up after
-- itself (os.exit without closing its state runs no __gc: torture/run.lua).
function M.spawn(cmd)
  local dir = M.tmpdir()
  local p = setmetatable({ cmd = cmd, dir = dir }, Proc)
  p.pid, p.guard_pid = guard("env TMPDIR=" .. quote(dir) .. " bash -c " .. quote(cmd), dir,
    dir .. "/stdout", dir .. "/stderr")
  registry.procs[p] = true
  return p
end

--- Exit code once the command ends (128+N if killed by signal N), or nil
-- after `timeout_s` (default 10).
function Proc:wait(timeout_s)
  return M.wait_until(function()
    local s = read_file(self.dir .. "/status")
    return s and tonumber(s:match("%d+"))
  end, timeout_s or 10, 0.02)
end

function Proc:kill(sig) return send_signal("-" .. self.pid, sig) end
function Proc:alive() return alive(self.pid) end
function Proc:stdout() return read_file(self.dir .. "/stdout") or "" end
function Proc:stderr() return read_file(self.dir .. "/stderr") or "" end

--- TERM (KILL after 2 s) the process group, then remove its files. Idempotent.
function Proc:stop()
  if self.stopped then return end
  self.stopped = true
  terminate(self.pid, self.guard_pid, "-" .. self.pid, "TERM")
  send_signal("-" .. self.pid, "KILL")  -- stragglers the leader left behind
  remove_dir(self.dir)
  remove_dir(self.etc_dir)
  registry.procs[self] = nil
end

---------------------------------------------------------------------------
-- Child Lua processes
---------------------------------------------------------------------------

-- The interpreter is the lowest negative index of `arg`
-- (`lua5.4 /usr/bin/busted` -> arg[-1]; `lua5.4 -e x f.lua` -> arg[-2]).
-- Without `arg` (e.g. `lua5.1 -e ...`), guess Debian's name for this version.
local function find_interpreter()
  local fallback = "lua" .. (_VERSION:match("%d+%.%d+") or "5.4")
  if type(arg) ~= "table" then return fallback end
  local i = 0
  while arg[i - 1] ~= nil do i = i - 1 end
  return i < 0 and arg[i] or fallback
end

M.lua_bin = find_interpreter()

-- Absolute, so a child that changes directory still finds the modules.
local ROOT = trim((M.sh("pwd")))

--- Parses tools/counter_worker.lua's "hold t_acquired t_released fence"
-- lines into { {t0, t1, fence}, ... }.
function M.holds_of(text)
  local holds = {}
  for t0, t1, fence in text:gmatch("hold (%S+) (%S+) (%d+)") do
    holds[#holds + 1] = { tonumber(t0), tonumber(t1), tonumber(fence) }
  end
  return holds
end

--- Shell command line running Lua code (or a file, if `code_or_file` names
-- an existing file; extra args are then passed to it) with the repo's
-- ./lua and ./?.so (redislock/core.so) first on package.path/cpath.
function M.lua_cmd(code_or_file, ...)
  -- REDISLOCK_CPATH (make sanitize) points children at the same core build.
  local cpath = os.getenv("REDISLOCK_CPATH") or "./?.so"
  cpath = cpath:gsub("^%./", ROOT .. "/") .. ";"
  local prelude = ("package.path = %q .. package.path; package.cpath = %q .. package.cpath"):format(
    ROOT .. "/lua/?.lua;" .. ROOT .. "/lua/?/init.lua;" .. ROOT .. "/?.lua;",
    cpath)
  local a = { quote(M.lua_bin), "-e", quote(prelude) }
  local f = not code_or_file:find("\n") and io.open(code_or_file, "r")
  if f then
    f:close()
    a[#a + 1] = quote(code_or_file)
    for i = 1, select("#", ...) do a[#a + 1] = quote(tostring((select(i, ...)))) end
  else
    a[#a + 1] = "-e " .. quote(code_or_file)
  end
  return table.concat(a, " ")
end

--- A loopback TCP proxy (spec/support/proxy.lua), for faults on some
-- connections: hold, trickle, delay, drop (see that file for the commands).
-- `target` is a port (on `host`, default 127.0.0.1), a unix socket path, or
-- a server from start_redis (its port or its unix socket). Returns the proxy
-- process with .port, .host, .url (connect clients here), .control_port,
-- :control(line) -> its one-line answer ("ok ..." / "error ..."), and
-- :command(...) -> the words joined into a line, raising unless the answer
-- is "ok"; returns what follows "ok" (e.g. proxy:command("trickle", "all",
-- "down", 250); proxy:command("count") -> "2").
function M.start_proxy(target, host)
  local args = { target, host }
  if type(target) == "table" then
    args = target.path and { target.path } or { target.port, target.host }
  end
  local p = M.spawn(M.lua_cmd("spec/support/proxy.lua", args[1], args[2] or "127.0.0.1"))
  assert(M.wait_until(function()
    p.port = tonumber(p:stdout():match("port (%d+)"))
    p.control_port = tonumber(p:stdout():match("control (%d+)"))
    return p.port and p.control_port
  end, 5, 0.01), "proxy did not start: " .. p:stderr())
  p.host = "127.0.0.1"
  p.url = "redis://127.0.0.1:" .. p.port
  function p.control(self, line)
    if not self.ctl then
      self.ctl = assert(require("socket").connect("127.0.0.1", self.control_port))
      self.ctl:settimeout(5)
    end
    assert(self.ctl:send(line .. "\n"))
    return assert(self.ctl:receive("*l"))
  end
  function p.command(self, ...)
    local words = {}
    for i = 1, select("#", ...) do words[i] = tostring((select(i, ...))) end
    local line = table.concat(words, " ")
    local answer = self:control(line)
    if not answer:match("^ok") then error("proxy: " .. line .. ": " .. answer, 2) end
    return answer:match("^ok ?(.*)$")
  end
  return p
end

---------------------------------------------------------------------------
-- Isolated network: a private loopback and resolver for name-resolution specs
---------------------------------------------------------------------------

local netns_ok, netns_why

--- true if spawn_isolated can work here (root, unshare, ip), else false and
-- the reason. Checked once per process.
function M.netns_available()
  if netns_ok == nil then
    local out, code = M.sh("unshare --net --mount --propagation private -- sh -c " ..
      quote("ip link set lo up && mount --bind /etc/resolv.conf /etc/resolv.conf && echo ok") .. " 2>&1")
    netns_ok = code == 0 and trim(out) == "ok"
    netns_why = not netns_ok and ("unshare --net --mount failed (%s): %s"):format(code, trim(out)) or nil
  end
  return netns_ok, netns_why
end

--- Run the shell command `cmd` (like spawn) inside a network namespace of its
-- own, where only lo exists (up: 127.0.0.1, 127.0.0.2 and ::1), and a mount namespace
-- where /etc/resolv.conf says "nameserver 127.0.0.1" and nsswitch.conf
-- "hosts: files dns". So a name the hosts file lacks goes to a stub resolver
-- on 127.0.0.1:53 inside (start_dns_stub), and no packet can leave the
-- machine. Whatever the command needs (redis-server, the stub) it starts
-- inside itself, e.g. as a Lua script (lua_cmd) using these helpers: they see
-- REDISLOCK_NETNS=1. Pid namespace and files are shared, so the guardians
-- still work and results can be read back from files or stdout.
-- opts: resolv = text replacing the whole resolv.conf; resolv_options = "timeout:1
-- attempts:1" (an "options" line); hosts = text for a private /etc/hosts.
-- Returns a Proc (see spawn). Raises if netns_available() is false.
function M.spawn_isolated(cmd, opts)
  opts = opts or {}
  local ok, why = M.netns_available()
  assert(ok, why)
  local etc = M.tmpdir()
  local resolv = opts.resolv or ("nameserver 127.0.0.1\n" ..
    (opts.resolv_options and ("options " .. opts.resolv_options .. "\n") or ""))
  write_file(etc .. "/resolv.conf", resolv)
  write_file(etc .. "/nsswitch.conf", "hosts: files dns\n")
  local mounts = { "ip link set lo up",
    -- glibc's AI_ADDRCONFIG counts IPv4 as configured only for an address
    -- other than 127.0.0.1: without one, AF_INET lookups with that flag
    -- (getent ahostsv4, many clients) fail at once without asking the stub
    "ip addr add 127.0.0.2/8 dev lo",
    "mount --bind " .. quote(etc .. "/resolv.conf") .. " /etc/resolv.conf",
    "mount --bind " .. quote(etc .. "/nsswitch.conf") .. " /etc/nsswitch.conf",
    -- nscd would resolve in the host's network namespace
    "{ [ ! -d /var/run/nscd ] || mount -t tmpfs none /var/run/nscd; }" }
  if opts.hosts then
    write_file(etc .. "/hosts", opts.hosts)
    mounts[#mounts + 1] = "mount --bind " .. quote(etc .. "/hosts") .. " /etc/hosts"
  end
  local inner = table.concat(mounts, " && ") .. " && REDISLOCK_NETNS=1 exec bash -c " .. quote(cmd)
  local p = M.spawn("exec unshare --net --mount --propagation private -- bash -c " .. quote(inner))
  p.etc_dir = etc
  return p
end

--- True inside spawn_isolated's namespaces.
function M.isolated() return os.getenv("REDISLOCK_NETNS") == "1" end

--- A stub DNS server over UDP on loopback (spec/support/dns_stub.lua).
-- opts: mode = "answer" (default) | "slow" | "silent"; name (default
-- "redis.invalid-test") is answered with `address` (default 127.0.0.1) for
-- A queries, with no records for others; other names get NXDOMAIN;
-- delay_ms (slow; default 2000); host (default 127.0.0.1); port (default 53
-- inside spawn_isolated, else a free port). Returns the Proc with .port,
-- .host and :queries() -> { {name=, type=}, ... } received so far.
function M.start_dns_stub(opts)
  opts = opts or {}
  local port = opts.port or (M.isolated() and 53 or 0)
  local p = M.spawn(M.lua_cmd("spec/support/dns_stub.lua", opts.mode or "answer",
    opts.name or "redis.invalid-test", opts.delay_ms or 2000, opts.host or "127.0.0.1", port,
    opts.address or "127.0.0.1"))
  assert(M.wait_until(function()
    p.port = tonumber(p:stdout():match("port (%d+)"))
    return p.port or not p:alive()
  end, 5, 0.01) and p.port, "dns stub did not start: " .. p:stderr())
  p.host = opts.host or "127.0.0.1"
  function p.queries(self)
    local list = {}
    for name, qtype in self:stdout():gmatch("query (%S+) (%S+)") do
      list[#list + 1] = { name = name, type = qtype }
    end
    return list
  end
  return p
end

---------------------------------------------------------------------------
-- Cleanup
---------------------------------------------------------------------------

--- Stop every server and process started here and remove all temp dirs.
function M.stop_all()
  for p in pairs(registry.procs) do pcall(p.stop, p) end
  for srv in pairs(registry.servers) do pcall(srv.stop, srv) end
  for dir in pairs(registry.dirs) do remove_dir(dir) end
end

-- Runs stop_all when the Lua state closes (or busted's insulate drops this
-- module). Lua 5.1 only finalizes userdata, hence newproxy there.
local function on_collect(fn)
  if newproxy then
    local u = newproxy(true)
    getmetatable(u).__gc = fn
    return u
  end
  return setmetatable({}, { __gc = fn })
end
M._sentinel = on_collect(function() pcall(M.stop_all) end)

return M

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
  * every redis-server / spawned command runs under a small `bash` guardian that
    SIGKILLs it (and removes its temp dir) as soon as this Lua process is gone,
    which covers kill -9 and crashes, where no Lua code runs at all.

Linux only: liveness is read from /proc/<pid>/stat, and a zombie counts as
dead (orphaned guardians may never be reaped when pid 1 is not an init).
Must stay loadable on Lua 5.1 (no goto, no table.pack, no integer division).
]]

local socket = require "socket"
local system = require "system"

local M = {}

--- How many threads of process `pid` are named `name` (/proc/PID/task/*/comm).
function M.threads_named(pid, name)
  local n = 0
  local p = io.popen("cat /proc/" .. pid .. "/task/*/comm 2>/dev/null")
  for line in p:lines() do
    if line == name then n = n + 1 end
  end
  p:close()
  return n
end

--- How many established TCP connections process `pid` holds to `port` (ss).
function M.conns_to(pid, port)
  local p = io.popen("ss -Htnp state established '( dport = :" .. port .. " )' 2>/dev/null")
  local n = 0
  for line in p:lines() do
    if line:find("pid=" .. pid .. ",", 1, true) then n = n + 1 end
  end
  p:close()
  return n
end

--- A command as the bytes Redis reads (RESP), its arguments as strings.
function M.resp(...)
  local parts = { "*" .. select("#", ...) .. "\r\n" }
  for i = 1, select("#", ...) do
    local a = tostring((select(i, ...)))
    parts[#parts + 1] = "$" .. #a .. "\r\n" .. a .. "\r\n"
  end
  return table.concat(parts)
end

-- The server the specs start: SERVER=redis (the default: redis-server,
-- redis-sentinel, redis-cli) or SERVER=valkey (valkey-server,
-- valkey-sentinel, valkey-cli; `make test-valkey`). Every server and every
-- command-line client the helpers start comes from M.bin; a spec that runs
-- a client of its own takes its name from there too.
local SERVERS = {
  redis = { server = "redis-server", sentinel = "redis-sentinel", cli = "redis-cli" },
  valkey = { server = "valkey-server", sentinel = "valkey-sentinel", cli = "valkey-cli" },
}
M.server = os.getenv("SERVER") or "redis"
if M.server == "" then M.server = "redis" end
M.bin = SERVERS[M.server] or error("SERVER must be redis or valkey, not " .. M.server, 0)

local START_TIMEOUT = 5   -- seconds redis gets to answer PING
local GRACE = 2           -- seconds between SIGTERM and SIGKILL
local PORT_ATTEMPTS = 5   -- another process may grab the port we picked
local LOG_TAIL_LINES = 20

-- Everything started, so stop_all can clean up after failing specs.
local registry = { servers = {}, procs = {}, dirs = {}, ports = {} }

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
-- than one poll. The poll waits in bash's read -t on a FIFO of its own,
-- which nothing writes: a timer without a `sleep` process five times a
-- second for every server and command alive (spec files run side by side,
-- and those forks added up). @...@ placeholders are filled in by guard().
local GUARDIAN = [=[
owner=@OWNER@ dir=@DIR@
alive() { read s 2>/dev/null <"/proc/$1/stat" || return 1; s=${s##*") "}; [ "${s%% *}" != Z ]; }
setsid @ARGV@ >@OUT@ 2>@ERR@ </dev/null &
c=$!
echo "$c $$" >"$dir/guard.tmp" && mv "$dir/guard.tmp" "$dir/guard.pid"
( if mkfifo "$dir/guard.tick" 2>/dev/null && exec 3<>"$dir/guard.tick"; then
    tick() { read -r -t 0.2 -u 3 _; }
  else
    tick() { sleep 0.2; }
  fi
  while alive "$owner"; do tick; done
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
  os.remove(dir .. "/guard.tick")
  local script = GUARDIAN:gsub("@(%u+)@", {
    OWNER = tostring(OWN_PID),
    DIR = quote(dir),
    ARGV = argv,
    OUT = quote(out),
    ERR = err and quote(err) or "&1",
  })
  -- setsid: a group signal aimed at the owner (or at the child) must not take
  -- the guardian down with it, or the child would be orphaned.
  assert(execute("setsid bash -c " .. quote(script) .. " >/dev/null 2>&1 </dev/null &"))
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

-- Ports are claimed, not just found free. Spec files run in parallel
-- (tools/run_specs.sh), each in its own process: a port found free by
-- binding port 0 and closing is free for every process at once, and the
-- kernel hands the same ephemeral ports to outgoing connections. So a port
-- comes from a range below the kernel's ephemeral range, and is claimed by
-- a file PORT_DIR/<port> holding "<pid> <start time>" of the claiming
-- process, written under one flock(1) lock. A claim lasts as long as the
-- process (a stopped server's port stays ours: a spec that connects to it
-- expects a refusal); the process removes its claims at exit (stop_all), and
-- the claims of a process that is gone (kill -9, os.exit) are taken over.
local PORT_DIR = os.getenv("REDISLOCK_PORT_DIR") or "/tmp/redislock-ports"

-- field 22 of /proc/<pid>/stat: with the pid, names a process even after
-- the pid is reused
local function start_time(pid)
  local stat = read_file("/proc/" .. pid .. "/stat")
  local rest = stat and stat:match(".*%) (.*)")
  local n, v = 2, nil
  for w in (rest or ""):gmatch("%S+") do
    n = n + 1
    if n == 22 then v = w break end
  end
  return v
end
local OWN_START = start_time("self")

-- The ports to claim from: below the ephemeral range (where the kernel
-- picks source ports of connections and ports for bind(0)), or above it.
local function port_range()
  local lo, hi = (read_file("/proc/sys/net/ipv4/ip_local_port_range") or ""):match("(%d+)%s+(%d+)")
  lo, hi = tonumber(lo) or 32768, tonumber(hi) or 60999
  if lo > 21000 then return 20000, lo - 1 end
  if hi < 63535 then return hi + 1, 65535 end
  return 20000, 30000
end
local PORT_FIRST, PORT_LAST = port_range()
local next_port   -- where this process looks next (first: a random place)

-- Claims one port: the first from `from` on whose claim file is missing or
-- names a process that is gone. Prints it; exits 1 when the range is full.
local CLAIM = [=[
dir=$1 first=$2 last=$3 p=$4 me="$5 $6"
gone() {
  set -- $1
  pid=$1 st=$2
  [ -n "$pid" ] || return 0
  s=$(cat "/proc/$pid/stat" 2>/dev/null) || return 0
  set -- ${s##*") "}
  [ "$1" = Z ] || [ "${20}" != "$st" ]
}
n=$((last - first + 1))
while [ "$n" -gt 0 ]; do
  c=$(cat "$dir/$p" 2>/dev/null)
  if [ -z "$c" ] || gone "$c"; then echo "$me" >"$dir/$p" && echo "$p" && exit 0; fi
  p=$((p + 1)); [ "$p" -le "$last" ] || p=$first
  n=$((n - 1))
done
exit 1
]=]

local function claim_port()
  -- spread over the range by pid and time (math.random is left alone: the
  -- specs seed it for their own use)
  next_port = next_port or PORT_FIRST + (OWN_PID * 7919 + os.time()) % (PORT_LAST - PORT_FIRST + 1)
  execute("mkdir -p " .. quote(PORT_DIR) .. " 2>/dev/null")
  -- a claim's second word is the claimant's start time, field 22 of its
  -- stat ("${20}" after the ") " that ends the command name)
  local out, code = M.sh(("flock -w 30 %s sh -c %s claim %s %d %d %d %d %s 2>&1"):format(
    quote(PORT_DIR .. "/.lock"), quote(CLAIM), quote(PORT_DIR), PORT_FIRST, PORT_LAST, next_port,
    OWN_PID, quote(OWN_START or "?")))
  local port = code == 0 and tonumber(out:match("^(%d+)"))
  assert(port, "no port to claim in " .. PORT_DIR .. ": " .. out)
  registry.ports[port] = true
  next_port = port < PORT_LAST and port + 1 or PORT_FIRST
  return port
end

local function release_ports()
  for port in pairs(registry.ports) do
    local c = read_file(PORT_DIR .. "/" .. port)
    if c and c:match("^(%d+)") == tostring(OWN_PID) then os.remove(PORT_DIR .. "/" .. port) end
    registry.ports[port] = nil
  end
end

-- A claimed port nothing listens on now (something outside the specs may
-- use a port of the range: that one stays claimed, and the next is tried).
local function free_port(host)
  for _ = 1, 100 do
    local port = claim_port()
    local s = socket.bind(host, port)
    if s then
      s:close()
      return port
    end
  end
  error("no free port on " .. host .. " after 100 claims", 2)
end

--- A TCP port that nothing listens on now, on `host` (default 127.0.0.1),
-- and that no other spec process will pick while this one runs.
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
  elseif opts.tls then
    local t = opts.tls
    if t.outbound_only then
      add("--port", tostring(srv.port), "--bind", srv.host)
    else
      add("--port", "0", "--tls-port", tostring(srv.port), "--bind", srv.host)
    end
    add("--tls-cert-file", t.cert, "--tls-key-file", t.key, "--tls-ca-cert-file", t.ca,
      "--tls-auth-clients", t.auth_clients and "yes" or "no")
    if t.replication then add("--tls-replication", "yes") end
    if t.cluster then add("--tls-cluster", "yes") end
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
  local a = { M.bin.cli }
  if srv.path then
    a[#a + 1] = "-s " .. quote(srv.path)
  else
    a[#a + 1] = "-h " .. quote(srv.host) .. " -p " .. srv.port
  end
  if srv.opts.tls and not srv.opts.tls.outbound_only then
    -- (a check of the server, not of its certificate: --insecure)
    local t = srv.opts.tls
    a[#a + 1] = "--tls --insecure"
    if t.client_cert then a[#a + 1] = "--cert " .. quote(t.client_cert) .. " --key " .. quote(t.client_key) end
  end
  if srv.password then a[#a + 1] = "-a " .. quote(srv.password) end
  a[#a + 1] = "--no-auth-warning " .. mode
  for i = 1, select("#", ...) do
    a[#a + 1] = quote(tostring((select(i, ...))))
  end
  return table.concat(a, " ") .. " </dev/null"
end

-- One RESP2 reply from `sock` as Lua values: status and bulk strings as
-- strings, integers as numbers, a nil bulk or array as false, arrays as
-- tables; an error reply as nil, its text, "reply".
local function read_reply(sock)
  local line, err = sock:receive("*l")
  if not line then return nil, "connection: " .. tostring(err), "connection" end
  local kind, rest = line:sub(1, 1), line:sub(2)
  if kind == "+" then return rest end
  if kind == "-" then return nil, rest, "reply" end
  if kind == ":" then return tonumber(rest) end
  local n = tonumber(rest)
  if kind == "$" then
    if n < 0 then return false end
    local data, e = sock:receive(n + 2)
    if not data then return nil, "connection: " .. tostring(e), "connection" end
    return data:sub(1, n)
  end
  if kind == "*" then
    if n < 0 then return false end
    local list = {}
    for i = 1, n do
      local v, e, k = read_reply(sock)
      if v == nil then
        if k == "connection" then return nil, e, k end
        v = { err = e }   -- an error inside an array (EXEC): kept, not raised
      end
      list[i] = v
    end
    return list
  end
  return nil, "connection: bad reply " .. line, "connection"
end

--- Run one command on this server over a connection of its own, opened
-- and closed here (with AUTH when it has a password), in this process: no
-- redis-cli process, so the helpers that poll a server many times a second
-- (start, topology readiness) do not load the machine that other spec files
-- share. Returns the reply as Lua values (see read_reply), or nil, the
-- message and "reply" (an error reply) or "connection". Times out after
-- `timeout_s` (5) per step.
function Server:call(...)
  local sock, err
  if self.opts and self.opts.tls and not self.opts.tls.outbound_only then
    -- A TLS-only server: through redis-cli --tls (this process has no TLS
    -- socket of its own), its --raw lines read back as the reply's shape:
    -- the arrays the helpers ask for (ROLE, SENTINEL ...) a line an
    -- element, any other reply (INFO, CLUSTER INFO/NODES) its text whole.
    local out, ok = self:cli_raw(...)
    if not ok or out:match("^Could not connect") or out:match("^Error:") then
      return nil, "connection: " .. out, "connection"
    end
    local cmd = tostring((...)):upper()
    if (cmd ~= "ROLE" and cmd ~= "SENTINEL") or not out:find("\n") then return out end
    local list = {}
    for line in (out .. "\n"):gmatch("(.-)\n") do list[#list + 1] = line end
    local sub = tostring((select(2, ...))):upper()
    if cmd == "SENTINEL" and (sub == "REPLICAS" or sub == "SLAVES" or sub == "SENTINELS") then
      -- an array of field lists, flattened: each begins with its "name"
      local groups = {}
      for i = 1, #list - 1, 2 do
        if list[i] == "name" then groups[#groups + 1] = {} end
        local g = groups[#groups]
        if g then g[#g + 1], g[#g + 2] = list[i], list[i + 1] end
      end
      return groups
    end
    return list
  end
  if self.path then
    local ok, unix = pcall(require, "socket.unix")
    if not ok then return nil, "connection: no socket.unix", "connection" end
    sock = unix()
    sock:settimeout(5)
    local done, e = sock:connect(self.path)
    if not done then sock:close() sock, err = nil, e end
  else
    sock, err = socket.connect(self.host, self.port)
  end
  if not sock then return nil, "connection: " .. tostring(err), "connection" end
  sock:settimeout(5)
  local request = M.resp
  local v, e, k
  local sent = sock:send((self.password and request("AUTH", self.password) or "") .. request(...))
  if not sent then
    v, e, k = nil, "connection: send failed", "connection"
  else
    if self.password then v, e, k = read_reply(sock) end
    if v ~= nil or k == "reply" or not self.password then v, e, k = read_reply(sock) end
  end
  sock:close()
  return v, e, k
end

-- Any reply (PONG, NOAUTH, ...) means the server is up.
local function answers(srv)
  local v, _, kind = srv:call("PING")
  return v ~= nil or kind == "reply"
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

--- A Redis for the describe block it is called in, and connections to it:
-- made in the block's setup, closed and stopped in its teardown however far
-- the setup got (a client that failed to connect leaves no server behind).
--   local fx = helpers.redis_fixture { raw = true, clients = 2 }
--   setup(function() srv, raw, c = fx.srv, fx.raw, fx.clients[1] end)
-- opts (all optional): redis (start_redis's options), raw = true (fx.raw: a
-- redislock.core connection, for commands the API does not send), clients
-- = n (fx.clients[1..n]: redislock.connect { url = srv.url }, plus the
-- fields of opts.connect).
function M.redis_fixture(opts)
  opts = opts or {}
  local busted = require "busted"   -- (its setup, teardown: not globals here)
  local fx = { clients = {} }
  busted.setup(function()
    fx.srv = M.start_redis(opts.redis)
    if opts.raw then
      fx.raw = assert(require("redislock.core").connect(require("redislock.url").parse(fx.srv.url)))
    end
    for i = 1, opts.clients or 0 do
      local o = { url = fx.srv.url }
      for k, v in pairs(opts.connect or {}) do o[k] = v end
      fx.clients[i] = assert(require("redislock").connect(o))
    end
  end)
  busted.teardown(function()
    for _, c in ipairs(fx.clients) do pcall(c.close, c) end
    if fx.raw then pcall(fx.raw.close, fx.raw) end
    if fx.srv then fx.srv:stop() end
  end)
  return fx
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
--   args = {...}     extra redis-server arguments, appended last
--   bin = helpers.bin.sentinel  another executable taking redis-server's
--                    options (default helpers.bin.server: SERVER= above)
--   config = "text"  written to <dir>/<bin>.conf (writable: sentinel and
--                    CONFIG REWRITE rewrite it), passed as the config file
--   config_file = p  an existing config file instead
--   replicaof = srv  --replicaof srv.host srv.port (also "host port", or a
--                    port on 127.0.0.1); --masterauth is `password` unless
--   masterauth = pw  says otherwise
--   cluster = true   --cluster-enabled with <dir>/nodes.conf, a bus port of
--                    its own (field bus_port) and --cluster-node-timeout
--   cluster_node_timeout = ms   (default 2000)
--   tls = {cert=, key=, ca=, auth_clients=, replication=, cluster=,
--          client_cert=, client_key=}   TLS only: --port 0 --tls-port <port>
--                    with those files (ca: --tls-ca-cert-file, the CA of
--                    client certificates; auth_clients: --tls-auth-clients
--                    yes; replication, cluster: --tls-replication yes,
--                    --tls-cluster yes); cli() connects with --tls, the
--                    client certificate if given; url is rediss://.
--                    outbound_only = true: it listens in plain TCP, and
--                    only its own links (replication = true) are TLS
-- Fields: host, port, path, url, pid, dir, log, password, guard_pid, bin,
-- config_file, bus_port (cluster).
function M.start_redis(opts)
  opts = opts or {}
  local dir = M.tmpdir()
  local bin = opts.bin or M.bin.server
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
    local tls = opts.tls and not opts.tls.outbound_only
    srv.url = ("%s://%s:%d"):format(tls and "rediss" or "redis", h, srv.port)
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

--- Clients blocked in a blocking command (BLPOP, ...) now, from INFO
-- clients: a spec waits for a waiter to block instead of sleeping a while.
function Server:blocked_clients()
  local info = self:call("INFO", "clients")
  return tonumber(type(info) == "string" and info:match("blocked_clients:(%d+)")) or 0
end

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
-- PostgreSQL clusters
---------------------------------------------------------------------------

-- Debian's postgresql-15 (make test installs it). initdb refuses to run as
-- root, so the cluster belongs to the `postgres` user that package creates.
M.PG_BIN = os.getenv("REDISLOCK_PG_BIN") or "/usr/lib/postgresql/15/bin"
local PG_START_TIMEOUT = 20   -- seconds for the first answer (a loaded machine)

local PgServer = {}
PgServer.__index = PgServer

-- PostgreSQL's own programs run without LD_PRELOAD: `make sanitize`
-- preloads ASan into every child, and initdb then hangs (postgres -V never
-- returns); they are not what is being tested.
local PG_ENV = "env -u LD_PRELOAD "

-- Run as the postgres user. setpriv execs (runuser forks and waits), so
-- under a guardian the pid we record is the postmaster's own.
local function as_postgres(dir, argv)
  return PG_ENV .. "-C " .. quote(dir) .. " setpriv --reuid=postgres --regid=postgres --init-groups -- " .. argv
end

--- Start a private PostgreSQL cluster and wait until it answers.
-- The cluster lives in a fresh dir owned by the postgres user, directly
-- under /tmp (REDISLOCK_PG_TMPDIR): not under $TMPDIR, whose parents
-- (another spec's dirs, mode 0700) that user could not enter. It listens
-- on no TCP address at all (listen_addresses = ''), only on a unix socket
-- in that dir, whose 0700 mode keeps other users out; local connections
-- are trusted. Durability is off (fsync, synchronous_commit): a test
-- cluster, thrown away at stop. Dynamic shared memory is kept in the
-- data dir, so even a cluster killed -9 leaves nothing in /dev/shm.
-- opts.settings = { name = value, ... }: more `-c name=value` options.
-- Fields: dir, data, socket_dir, port, pid, guard_pid, log, conninfo
-- ("host=... port=... dbname=postgres user=postgres", for libpq/LuaSQL).
-- Stopped by stop() (fast shutdown by the postmaster's pid, then KILL),
-- by stop_all() when the spec ends however it ends, and by its guardian
-- (SIGKILL) if this Lua process dies without running either.
function M.start_postgres(opts)
  opts = opts or {}
  local base = os.getenv("REDISLOCK_PG_TMPDIR") or "/tmp"
  local out, code = M.sh("mktemp -d " .. quote(base .. "/rl-pg.XXXXXX"))
  assert(code == 0, "mktemp -d failed: " .. out)
  local dir = trim(out)
  registry.dirs[dir] = true
  local pg = setmetatable({ dir = dir, data = dir .. "/data", socket_dir = dir, port = 5432,
                            log = dir .. "/postgres.log", opts = opts }, PgServer)
  registry.servers[pg] = true
  pg.conninfo = ("host=%s port=%d dbname=postgres user=postgres"):format(dir, pg.port)
  assert(#(dir .. "/.s.PGSQL.5432") < 108, "unix socket path too long: " .. dir)
  local ok = execute("chown postgres:postgres " .. quote(dir) .. " && chmod 0700 " .. quote(dir))
  if not ok then pg:stop(); error("cannot give " .. dir .. " to the postgres user (is postgresql-15 installed?)", 2) end
  -- (timeout: a hung initdb must fail the spec, not stall the run)
  out, code = M.sh("timeout 120 " .. as_postgres(dir, quote(M.PG_BIN .. "/initdb") .. " -D " .. quote(pg.data)
    .. " -U postgres -A trust -E UTF8 --locale=C --no-sync --no-instructions") .. " 2>&1")
  if code ~= 0 then pg:stop(); error("initdb failed:\n" .. out, 2) end
  local settings = { listen_addresses = "", unix_socket_directories = dir, port = pg.port,
    fsync = "off", synchronous_commit = "off", full_page_writes = "off",
    shared_buffers = "16MB", max_connections = 40, dynamic_shared_memory_type = "mmap" }
  for k, v in pairs(opts.settings or {}) do settings[k] = v end
  local names = {}
  for k in pairs(settings) do names[#names + 1] = k end
  table.sort(names)
  local argv = { quote(M.PG_BIN .. "/postgres"), "-D", quote(pg.data) }
  for _, k in ipairs(names) do argv[#argv + 1] = "-c " .. quote(k .. "=" .. tostring(settings[k])) end
  pg.cmdline = as_postgres(dir, table.concat(argv, " "))
  pg.pid, pg.guard_pid = guard(pg.cmdline, dir, pg.log)
  local deadline = M.monotime() + PG_START_TIMEOUT
  local ready
  repeat
    ready = select(2, M.sh(pg:tool("pg_isready") .. " -q")) == 0
    if ready or not alive(pg.pid) then break end
    M.sleep(0.05)
  until M.monotime() > deadline
  if not ready then
    local log = tail(read_file(pg.log), LOG_TAIL_LINES)
    pg:stop()
    error(("postgres failed to start (%s)\ncommand: %s\n--- log:\n%s"):format(
      alive(pg.pid) and "no answer within " .. PG_START_TIMEOUT .. " s" or "exited", pg.cmdline, log), 2)
  end
  return pg
end

--- Shell command line of a client program (psql, pg_isready, ...) aimed
-- at this cluster, as the postgres role (run as root: the socket's dir
-- lets root in).
function PgServer:tool(name)
  return PG_ENV .. ("%s -h %s -p %d -U postgres -d postgres"):format(quote(M.PG_BIN .. "/" .. name),
    quote(self.socket_dir), self.port)
end

--- Run SQL through psql (unaligned, tuples only, stop at the first error).
-- Returns its trimmed output (rows one a line, columns split by "|"), and
-- true if psql exited 0.
function PgServer:psql(sql)
  local out, code = M.sh(self:tool("psql") .. " -X -q -A -t -v ON_ERROR_STOP=1 -c " .. quote(sql) .. " 2>&1")
  return trim(out), code == 0
end

function PgServer:alive() return alive(self.pid) end

--- Fast shutdown (SIGINT to the postmaster: it ends the backends, it
-- does not wait for clients to leave), KILL after 2 s; waits until gone;
-- removes the dir. Idempotent.
function PgServer:stop()
  if self.stopped then return end
  self.stopped = true
  if self.pid then terminate(self.pid, self.guard_pid, self.pid, "INT") end
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
  return M.controlled(p, "proxy")
end

-- A helper process that prints "port N" and "control M" (proxy.lua,
-- fake_redis.lua): waits for both, and gives it .port, .host, .url,
-- :control(line) -> its answer line, and :command(...) -> what follows
-- "ok" (raises on anything else, naming `what`).
function M.controlled(p, what)
  assert(M.wait_until(function()
    p.port = tonumber(p:stdout():match("port (%d+)"))
    p.control_port = tonumber(p:stdout():match("control (%d+)"))
    return p.port and p.control_port
  end, 5, 0.01), what .. " did not start: " .. p:stderr())
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
    if not answer:match("^ok") then error(what .. ": " .. line .. ": " .. answer, 2) end
    return answer:match("^ok ?(.*)$")
  end
  return p
end

--- A loopback server that answers like Redis until told otherwise
-- (spec/support/fake_redis.lua, which lists what it answers), for the
-- specs of hostile replies only. Returns the process with .port, .host,
-- .url, and :command(...) as start_proxy's (e.g. fake:command("answer",
-- "acquire", hex)); fake.hex(bytes) gives the hex form of a reply.
function M.start_fake_redis()
  local p = M.controlled(M.spawn(M.lua_cmd("spec/support/fake_redis.lua")), "fake redis")
  function p.hex(bytes)
    return (bytes:gsub(".", function(ch) return string.format("%02x", ch:byte()) end))
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
  release_ports()
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

--[[
bench/callgrind.lua -- one uncontended cycle (acquire + release), taken
apart: client instructions (callgrind), system calls (strace) and the
server's work (its CPU time and INFO commandstats), for raw hiredis and for
redislock with and without the watchdog. Counts, not timings: they stay put
on a noisy machine where the timings of bench/cycle.lua move by 2x.

run from the repo root, after `make` (needs ./redislock/core.so):
  lua5.4 bench/callgrind.lua [N1 N2]        (make bench runs it too)

Each variant runs as its own process doing N1 (default 1000) and then N2
(default 5000) cycles on a name nobody else takes, and every figure is
(figure of the N2 run - figure of the N1 run) / (N2 - N1): start-up,
connecting, loading the module and the first cycle's one-time work (the
watchdog thread and its connection, a script's first EVAL) cancel out.

  raw-hiredis           bench/cycle_raw.c in "quiet" mode: per cycle a fresh
                        token, SET NX PX, EVALSHA compare-and-delete; no
                        clock, no output (bench/README.md)
  redislock             bench/callgrind_worker.lua: client:acquire(name,
                        {ttl = 10}) + lock:release(), watchdog on
  redislock-nowatchdog  the same with watchdog = false
  redislock-noholder    watchdog on, holder = false (no holder label recorded)
  redislock-nofence     watchdog on, fence = false (a plain SET NX PX)

Columns:
  instr/cycle   instructions executed by the client process, every thread
                (valgrind --tool=callgrind, Ir), then split by the object
                they ran in: the Lua interpreter (lua5.4: VM, GC, tables,
                strings; Debian strips it, so no function names), the C core
                (redislock/core.so), libhiredis, libc, and the rest
                (ld.so, vdso)
  syscalls      system calls per cycle (strace -f -c), every thread; the
                most frequent are listed after the table
  server us     CPU time of redis-server's main thread per cycle (schedstat),
                from native runs (no valgrind, no strace) with client and
                server on CPU 0
  server cmds   commands per cycle as INFO commandstats counts them: a
                script and every redis.call() inside it

Then, per variant, the functions with the most instructions per cycle
(self cost). Debian's lua5.4 is stripped, so for the redislock variants
these come from two more runs of the same worker on bench/lua_host.c, a
minimal lua(1) linked with Debian's static liblua5.4.a, which keeps its
symbols (same Lua release; its own instr/cycle is printed beside them so
the two can be compared); the table's figures come from /usr/bin/lua5.4.
For those variants it also lists the Lua functions that run the most
bytecode per cycle (a count hook on every VM instruction, natively, over
VM_CYCLES cycles: bench/callgrind_worker.lua "vm"), the Lua half of where
luaV_execute's instructions go.
Profiles are kept in bench/out/callgrind/ for callgrind_annotate. Needs
valgrind (tools/deps.sh valgrind); strace is optional (its column is then
"-"). Nothing here is a test: the exit status is non-zero only when a run
fails.
]]
package.path = "./lua/?.lua;./?.lua;" .. package.path
package.cpath = "./?.so;" .. package.cpath

local helpers = require "spec.helpers"
local lib = require "bench.lib"
local core = require "redislock.core"
local url_fields = require "redislock.url"

local N1 = tonumber(arg and arg[1]) or 1000
local N2 = tonumber(arg and arg[2]) or 5000
assert(N2 > N1, "N2 must be larger than N1")
local RAW_SRC, RAW_BIN = "bench/cycle_raw.c", "bench/out/cycle_raw"
local HOST_SRC, HOST_BIN = "bench/lua_host.c", "bench/out/lua_host"
local OUT = "bench/out/callgrind"
local TOP = 12
local VM_CYCLES = 300
local printf, quote = lib.printf, helpers.quote

local VARIANTS = {
  { name = "raw-hiredis", cmd = function(srv, key, n)
      return table.concat({ quote(RAW_BIN), srv.host, srv.port, quote(key), n, "quiet" }, " ")
    end },
  { name = "redislock", lua = true, cmd = function(srv, key, n)
      return helpers.lua_cmd("bench/callgrind_worker.lua", srv.url, key, n, 1)
    end },
  { name = "redislock-nowatchdog", lua = true, cmd = function(srv, key, n)
      return helpers.lua_cmd("bench/callgrind_worker.lua", srv.url, key, n, 0)
    end },
  { name = "redislock-noholder", lua = true, cmd = function(srv, key, n)
      return helpers.lua_cmd("bench/callgrind_worker.lua", srv.url, key, n, "noholder")
    end },
  { name = "redislock-nofence", lua = true, cmd = function(srv, key, n)
      return helpers.lua_cmd("bench/callgrind_worker.lua", srv.url, key, n, "nofence")
    end },
}

local failed = false

-- Runs cmd to completion; its stdout, or nil and why.
local function run(cmd, timeout)
  local p = helpers.spawn(cmd)
  local code = p:wait(timeout or 600)
  local out, err = p:stdout(), p:stderr()
  p:stop()
  if code ~= 0 or not out:find("done %d+") then
    failed = true
    return nil, ("exited %s: %s"):format(tostring(code), err:sub(-300))
  end
  return out
end

--- callgrind -----------------------------------------------------------------

local function short_object(ob)
  local base = ob:match("([^/]+)$") or ob
  if base == "core.so" then return "core.so" end
  if base:find("^libhiredis") then return "hiredis" end
  if base:find("^libc[%.%-]") or base:find("^libpthread") or base:find("^libm[%.%-]") then return "libc" end
  if base:find("^lua5") or base:find("^liblua") or base == "lua_host" then return "lua" end
  return "other"
end

-- Self cost (Ir) of every function of a callgrind profile, keyed
-- "object\tfunction". Reads the format directly (callgrind_annotate drops
-- the object of some inlined entries): names may be compressed to "(id)"
-- after their first use, and the cost line after a calls= line is the
-- callee's inclusive cost, not this function's.
local function profile(path)
  local f = assert(io.open(path, "r"))
  local names = { ob = {}, fn = {} }
  local kind_of = { ob = "ob", cob = "ob", fn = "fn", cfn = "fn", cfi = "fl", cfl = "fl", fl = "fl", fi = "fl",
                    fe = "fl" }
  local ob, fn, skip = "?", "?", false
  local cost, total = {}, 0
  for line in f:lines() do
    local key, rest = line:match("^(%a+)=(.*)$")
    if key then
      local kind = kind_of[key]
      if kind == "ob" or kind == "fn" then
        local id, name = rest:match("^(%(%d+%))%s*(.*)$")
        if id then
          if name ~= "" then names[kind][id] = name else name = names[kind][id] end
        else
          name = rest
        end
        if key == "ob" then ob = name elseif key == "fn" then fn = name end
      elseif key == "calls" then
        skip = true
      end
    elseif line:find("^totals:") or line:find("^summary:") then
      total = math.max(total, tonumber(line:match("(%d+)")) or 0)
    elseif line:find("^[%d%+%-%*]") then
      if skip then
        skip = false
      else
        local ir = tonumber(line:match("(%d+)%s*$"))
        if ir and line:find("%s") then
          local k = ob .. "\t" .. fn
          cost[k] = (cost[k] or 0) + ir
        end
      end
    end
  end
  f:close()
  return cost, total
end

-- Builds bench/lua_host.c; true when it can be used.
local function build_host()
  local out, code = helpers.sh("cc -O2 -Wall -Wextra $(pkg-config --cflags lua5.4) " .. HOST_SRC ..
    " $(pkg-config --variable=libdir lua5.4)/liblua5.4.a -lm -ldl -Wl,-E -o " .. HOST_BIN .. " 2>&1")
  if code ~= 0 then printf("bench/lua_host.c could not be built (%s): Lua's share stays unnamed\n", out:sub(1, 200)) end
  return code == 0
end

-- host: run a Lua variant on bench/lua_host.c instead of the stock lua5.4.
local function callgrind(v, srv, n, host)
  local file = ("%s/%s%s-%d.out"):format(OUT, v.name, host and "-named" or "", n)
  os.remove(file)
  local cmd = v.cmd(srv, "bench:callgrind:" .. v.name, n)
  if host then
    local bin = quote(helpers.lua_bin)
    assert(cmd:sub(1, #bin) == bin, "not a lua_cmd command line")
    cmd = quote(HOST_BIN) .. cmd:sub(#bin + 1)
  end
  local out, err = run("valgrind --tool=callgrind --callgrind-out-file=" .. quote(file) .. " " .. cmd)
  if not out then return nil, err end
  return profile(file)
end

--- strace ----------------------------------------------------------------------

local function strace_available()
  local _, code = helpers.sh("command -v strace >/dev/null 2>&1")
  return code == 0
end

-- Calls per system call over a run (strace -f -c: every thread).
local function strace(v, srv, n)
  local file = ("%s/%s-%d.strace"):format(OUT, v.name, n)
  local out, err = run("strace -f -c -o " .. quote(file) .. " " .. v.cmd(srv, "bench:strace:" .. v.name, n))
  if not out then return nil, err end
  local calls = {}
  local f = assert(io.open(file, "r"))
  for line in f:lines() do
    -- % time  seconds  usecs/call  calls  [errors]  syscall
    local nums, name = line:match("^%s*[%d%.]+%s+[%d%.]+%s+%d+%s+([%d%s]+)%s+([%w_]+)%s*$")
    if nums and name ~= "total" then calls[name] = tonumber(nums:match("^(%d+)")) end
  end
  f:close()
  return calls
end

--- Lua bytecode ------------------------------------------------------------------

-- VM instructions per cycle by Lua function, largest first, and their sum.
local function vm_profile(v, srv)
  local out, err = run(v.cmd(srv, "bench:vm:" .. v.name, VM_CYCLES) .. " vm", 300)
  if not out then return nil, err end
  local list, total = {}, 0
  for count, where, name in out:gmatch("vm (%S+) (%S+) ([^\n]+)") do
    count = tonumber(count)
    total = total + count
    list[#list + 1] = { where:gsub("^.*/lua/redislock/", "redislock/"), name, count }
  end
  return list, total
end

--- the server ------------------------------------------------------------------

local function server_run(v, srv, raw, n)
  local before = lib.snapshot(raw)
  local ns0 = lib.thread_cpu_ns(srv.pid)
  local out, err = run("taskset -c 0 " .. v.cmd(srv, "bench:server:" .. v.name, n), 120)
  if not out then return nil, err end
  lib.wait_clients_gone(raw)
  local ns = lib.thread_cpu_ns(srv.pid) - ns0
  local after = lib.snapshot(raw)
  local calls = lib.diff_calls(before, after)
  calls.info = nil
  return { ns = ns, calls = calls }
end

--- per cycle -----------------------------------------------------------------------

local function per_cycle(a, b)
  local d = {}
  for k, x in pairs(b) do d[k] = (x - (a[k] or 0)) / (N2 - N1) end
  for k, x in pairs(a) do if b[k] == nil then d[k] = -x / (N2 - N1) end end
  return d
end

local function measure(v, srv, raw, with_strace, host)
  local r = { name = v.name }
  local c1, t1 = callgrind(v, srv, N1)
  if not c1 then r.error = t1 return r end
  local c2, t2 = callgrind(v, srv, N2)
  if not c2 then r.error = t2 return r end
  r.instr = (t2 - t1) / (N2 - N1)
  r.fns = per_cycle(c1, c2)
  r.objects = {}
  for k, x in pairs(r.fns) do
    local o = short_object(k:match("^([^\t]*)"))
    r.objects[o] = (r.objects[o] or 0) + x
  end
  if host and v.lua then
    local h1, u1 = callgrind(v, srv, N1, true)
    if not h1 then r.error = u1 return r end
    local h2, u2 = callgrind(v, srv, N2, true)
    if not h2 then r.error = u2 return r end
    r.named_instr = (u2 - u1) / (N2 - N1)
    r.named_fns = per_cycle(h1, h2)
  end
  if v.lua then
    local list, total = vm_profile(v, srv)
    if not list then r.error = total return r end
    r.vm, r.vm_total = list, total
  end
  if with_strace then
    local s1, e1 = strace(v, srv, N1)
    if not s1 then r.error = e1 return r end
    local s2, e2 = strace(v, srv, N2)
    if not s2 then r.error = e2 return r end
    r.syscalls = per_cycle(s1, s2)
    r.nsys = 0
    for _, x in pairs(r.syscalls) do r.nsys = r.nsys + x end
  end
  local a, e1 = server_run(v, srv, raw, N1)
  if not a then r.error = e1 return r end
  local b, e2 = server_run(v, srv, raw, N2)
  if not b then r.error = e2 return r end
  r.server_us = (b.ns - a.ns) / 1000 / (N2 - N1)
  r.cmds = per_cycle(a.calls, b.calls)
  return r
end

local function k(x) return x and ("%.1fk"):format(x / 1000) or "-" end

-- "name n, name n" of a { name = per cycle } table, largest first.
local function listing(t, fmt, min)
  local l = {}
  for name, x in pairs(t) do if x >= (min or 0.005) then l[#l + 1] = { name, x } end end
  table.sort(l, function(a, b) return a[2] > b[2] end)
  local s = {}
  for _, p in ipairs(l) do s[#s + 1] = (fmt):format(p[1], p[2]) end
  return table.concat(s, ", ")
end

local function main()
  local f = io.open("redislock/core.so", "rb")
  if not f then error("redislock/core.so not found: run `make` first (from the repo root)", 0) end
  f:close()
  local _, code = helpers.sh("command -v valgrind >/dev/null 2>&1")
  if code ~= 0 then error("valgrind is not installed (tools/deps.sh valgrind)", 0) end
  lib.build_c(RAW_SRC, RAW_BIN)
  local host = build_host()
  helpers.sh("mkdir -p " .. OUT)
  local with_strace = strace_available()
  local srv = helpers.start_redis()
  local raw = assert(core.connect(url_fields.parse(srv.url)))
  local version = assert(raw:command("INFO", "server")):match("redis_version:([%w%.]+)")
  local _, pinned = helpers.sh("taskset -cp 0 " .. srv.pid .. " >/dev/null 2>&1")
  if pinned ~= 0 then error("taskset could not pin redis-server to CPU 0", 0) end
  printf("redis-server %s at %s; per cycle = (run of %d cycles - run of %d) / %d\n", version or "?", srv.url,
    N2, N1, N2 - N1)
  if not with_strace then printf("strace is not installed: no syscalls column (tools/deps.sh strace)\n") end
  printf("\n")
  local results = {}
  for _, v in ipairs(VARIANTS) do results[#results + 1] = measure(v, srv, raw, with_strace, host) end
  raw:close()
  srv:stop()

  local fmt = "%-21s %11s %7s %8s %8s %7s %7s %9s %10s %12s\n"
  printf(fmt, "variant", "instr/cycle", "lua", "core.so", "hiredis", "libc", "other", "syscalls", "server us",
    "server cmds")
  for _, r in ipairs(results) do
    if r.error then
      printf("%-21s FAILED: %s\n", r.name, r.error)
    else
      local o = r.objects
      local ncmds = 0
      for _, x in pairs(r.cmds) do ncmds = ncmds + x end
      printf(fmt, r.name, k(r.instr), k(o.lua), k(o["core.so"]), k(o.hiredis), k(o.libc), k(o.other),
        r.nsys and ("%.1f"):format(r.nsys) or "-", ("%.1f"):format(r.server_us), ("%.1f"):format(ncmds))
    end
  end
  for _, r in ipairs(results) do
    if not r.error then
      printf("\n%s, per cycle:\n", r.name)
      if r.syscalls then printf("  syscalls: %s\n", listing(r.syscalls, "%s %.1f", 0.05)) end
      printf("  server commands (incl. inside scripts): %s\n", listing(r.cmds, "%s %.2f", 0.005))
      if r.named_fns then
        printf("  top functions by instructions (self), on bench/lua_host.c (%.1fk instr/cycle there):\n",
          r.named_instr / 1000)
      else
        printf("  top functions by instructions (self):\n")
      end
      local fns, lua = {}, 0
      for key, x in pairs(r.named_fns or r.fns) do
        local ob, fn = key:match("^([^\t]*)\t(.*)$")
        if short_object(ob) == "lua" and fn:find("^0x") then
          lua = lua + x
        else
          fns[#fns + 1] = { ("%s (%s)"):format(fn, ob:match("([^/]+)$") or ob), x }
        end
      end
      if lua ~= 0 then
        fns[#fns + 1] = { "Lua interpreter, unnamed (stripped lua5.4: VM, GC, tables, strings)", lua }
      end
      table.sort(fns, function(a, b) return a[2] > b[2] end)
      for i = 1, math.min(TOP, #fns) do
        if fns[i][2] >= 1 then printf("  %8.0f  %s\n", fns[i][2], fns[i][1]) end
      end
      if r.vm then
        printf("  Lua functions by bytecode run (VM instructions per cycle, %.0f in all):\n", r.vm_total)
        for i = 1, math.min(TOP, #r.vm) do
          printf("  %8.0f  %s %s\n", r.vm[i][3], r.vm[i][2], r.vm[i][1])
        end
      end
    end
  end
  printf("\nprofiles: %s/ (callgrind_annotate %s/redislock-%d.out)\n", OUT, OUT, N2)
  if failed then os.exit(1) end
end

local ok, err = xpcall(main, debug.traceback)
helpers.stop_all()
if not ok then
  io.stderr:write(tostring(err), "\n")
  os.exit(1)
end

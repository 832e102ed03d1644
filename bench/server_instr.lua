--[=[
bench/server_instr.lua -- the work redis-server itself does per lock cycle
and per renewal, counted in instructions, for raw hiredis and redislock.
Issue 31 asks what extra server work redislock costs per cycle and per
renewal next to raw hiredis; the CPU times of bench/cycle.lua and
bench/renew.lua move 2x with this shared machine's load, instruction counts
do not.

run from the repo root, after `make` (needs ./redislock/core.so):
  lua5.4 bench/server_instr.lua [N1 N2 [LOCKS [TTL [PASSES]]]]
  (make bench runs it with the defaults: 1000 3000 2000 30 2)

Every variant gets a redis-server of its own (no heap or keyspace shared),
run under valgrind --tool=callgrind --instr-atstart=no --separate-recs=2
(a command run by a script calls call() again: that level is counted as
call'2, so that call's inclusive count holds each instruction once).
Counting is switched on only around the measured part: CONFIG RESETSTAT,
callgrind_control -i on, the part, callgrind_control -i off, INFO
commandstats, callgrind_control -d (a profile of that window alone). The
bench's own commands are thus outside the counted window; nothing else
runs in it but redis-server's timers (serverCron, the event loop).

Per cycle (acquire + release, uncontended, a name of its own): the worker
process runs N1 cycles in one window and N2 in another, after an uncounted
warm-up run (the scripts cached, the fence counter made); every figure is
(window of N2 - window of N1) / (the DELs between them: one per cycle),
so connecting, loading and closing cancel out.
  raw-hiredis          bench/cycle_raw.c "quiet": SET NX PX + an EVALSHA
                       compare-and-delete (bench/callgrind.lua's baseline)
  redislock            bench/callgrind_worker.lua: client:acquire(name,
                       {ttl = 10}) + lock:release(), watchdog on
  redislock-nofence    the same, fence = false (a plain SET NX PX)
  redislock-noholder   the same, holder = false (no holder record)

Per renewal (LOCKS held locks, ttl TTL s, renewed every TTL/3 s by
lua/redislock/scripts/extend.lua through EVALSHA):
  raw-pipelined        bench/renew_raw.c "pipelined": batches of 1,000
                       EVALSHAs, each batch's replies read before the next;
                       a window of 1 round of all LOCKS and one of 3 (after
                       a FLUSHALL each: the same set-up in both), per
                       renewal = the difference / the EVALSHAs between them
  raw-pipelined-holder the same, each key with the holder record a redislock
                       lock has by default (<key>:holder), which extend.lua
                       renews beside the lock
  watchdog             bench/hold_worker.lua "hold": one client holds LOCKS
                       locks and its watchdog renews them; one window of
                       PASSES renewal periods, opened half a period after a
                       pass (after the worker's own opening INFO) so that
                       it holds PASSES whole passes; per renewal = the
                       window / its EVALSHAs
  watchdog-noholder    the same with BENCH_HOLDER=0 (holder = false)
Under callgrind redis-server runs about 30x slower: TTL 30 s keeps every
lease safe. Every renewal must succeed: extend.lua runs GET, then (the
token matching) two PEXPIREs, so commandstats must show GET = EVALSHA and
PEXPIRE = 2 GET; the watchdog's window must hold PASSES x LOCKS renewals
(whole passes) and the worker report no failure. A check that fails is
printed and makes the exit status non-zero.

Columns, instructions per operation (inclusive counts from
callgrind_annotate --inclusive=yes, by redis-server's dynamic symbols):
  total      readQueryFromClient + writeToClient: a request's whole path
  read       readQueryFromClient - call: read(2)'s user side, parsing
             (processInputBuffer), processCommand's lookups and checks
  cmds       call - evalGenericCommand: call()'s dispatch, the plain
             commands, the EVALSHA entry (evalShaCommand's own lookup)
  script     evalGenericCommand - scriptCall: the script machinery, all
             that running Lua costs beyond the commands it runs; of it:
  lua_gc       lua_gc: the GC steps Redis asks for after a script (a step
               the VM takes by itself is under what allocated)
  lua_vm       lua_pcall - scriptCall: the script's body in the VM, and
               redis.call()'s conversions (Lua arguments to a command, its
               RESP reply back to Lua values)
  setup        the rest: finding the script by SHA, the KEYS and ARGV
               tables, the run's context, the result turned into a reply
  in-script  scriptCall: the commands run by redis.call(), with the checks
             each goes through
  write      writeToClient: replies written out
  cmds/op    commands per operation from INFO commandstats (each script
             and each redis.call() inside it)
  x raw      total over the raw baseline's (raw-hiredis; raw-pipelined)
  program    every instruction of the window per operation: also the
             event loop and serverCron, which follow the wall time (30x
             longer under callgrind), not the operations: not a cost per op
total = read + cmds + script + in-script + write, script = lua_gc + lua_vm
+ setup. Then each variant's extra over its raw baselines, column by
column (the watchdog over both raw renewals: with holder records, it is
like for like), and the commands behind each row.
Profiles stay in bench/out/server_instr/ (callgrind_annotate --inclusive=yes
FILE). Nothing here is a test: the exit status is non-zero only when a run
or a check fails.
]=]
package.path = "./lua/?.lua;./?.lua;" .. package.path
package.cpath = "./?.so;" .. package.cpath

local helpers = require "spec.helpers"
local lib = require "bench.lib"
local core = require "redislock.core"
local url_fields = require "redislock.url"

local N1 = tonumber(arg and arg[1]) or 1000
local N2 = tonumber(arg and arg[2]) or 3000
local LOCKS = tonumber(arg and arg[3]) or 2000
local TTL = tonumber(arg and arg[4]) or 30
local PASSES = tonumber(arg and arg[5]) or 2
assert(N2 > N1, "N2 must be larger than N1")
local BATCH = 1000
local RAW_ROUNDS = { 1, 3 }   -- the raw renewal windows: rounds of all LOCKS
local PERIOD = TTL / 3
local SCRIPT = "lua/redislock/scripts/extend.lua"
local CYCLE_SRC, CYCLE_BIN = "bench/cycle_raw.c", "bench/out/cycle_raw"
local RENEW_SRC, RENEW_BIN = "bench/renew_raw.c", "bench/out/renew_raw"
local OUT = "bench/out/server_instr"
local ROOT = (helpers.sh("pwd")):gsub("%s+$", "")
local WRAPPER = ROOT .. "/" .. OUT .. "/server.sh"
local BENCH_CMDS = { info = true, ["config|resetstat"] = true }
local printf, quote = lib.printf, helpers.quote

local failed = false

--- the server under callgrind -------------------------------------------------

-- The server's command line goes through a wrapper: valgrind's options
-- must come before the server's, and start_redis puts its own after `bin`.
-- Its profiles are OUT/server-<pid>.out.<dump>.
local function write_wrapper()
  local server = (helpers.sh("command -v " .. quote(helpers.bin.server))):gsub("%s+$", "")
  assert(server ~= "", helpers.bin.server .. " not found")
  local f = assert(io.open(WRAPPER, "w"))
  f:write("#!/bin/sh\n", "exec valgrind --tool=callgrind --instr-atstart=no --separate-recs=2 ",
    "--callgrind-out-file=", quote(ROOT .. "/" .. OUT .. "/server-%p.out"), " ", quote(server), ' "$@"\n')
  f:close()
  local _, code = helpers.sh("chmod +x " .. quote(WRAPPER))
  assert(code == 0, "chmod +x " .. WRAPPER .. " failed")
end

local function start_server()
  local srv = helpers.start_redis { bin = WRAPPER }
  srv.raw = assert(core.connect(url_fields.parse(srv.url)))
  srv.dumps = 0
  return srv
end

-- SHUTDOWN NOSAVE, then wait for valgrind to write its last profile and
-- exit; stop() then only tidies up (the process is gone).
local function stop_server(srv)
  pcall(srv.raw.command, srv.raw, "SHUTDOWN", "NOSAVE")
  pcall(srv.raw.close, srv.raw)
  local final = ("%s/server-%d.out"):format(OUT, srv.pid)
  helpers.wait_until(function() return not srv:alive() end, 60, 0.1)
  srv:stop()
  os.remove(final)   -- the counts after the last window: none (counting off)
end

local function control(srv, what)
  local out, code = helpers.sh(("callgrind_control %s %d 2>&1"):format(what, srv.pid))
  if code ~= 0 or not out:find("OK") then error(("callgrind_control %s: %s"):format(what, out), 0) end
end

local function count(s) return tonumber((s:gsub(",", ""))) end

-- Inclusive instructions by function name (callgrind_annotate: "1,234
-- (5.6%)  file:function [object]", largest first), and the window's total.
local function inclusive(file)
  local out, code = helpers.sh("callgrind_annotate --inclusive=yes --threshold=100 --auto=no " .. quote(file))
  if code ~= 0 then error("callgrind_annotate " .. file .. ": " .. out:sub(1, 300), 0) end
  local fns = { total = count(out:match("([%d,]+) %([^)]*%)%s+PROGRAM TOTALS") or "0") }
  for cost, where in out:gmatch("\n%s*([%d,]+) %([^)]*%)%s+([^\n]+)") do
    local name = where:match("^.*:(%S+) %[")
    if name and not fns[name] then fns[name] = count(cost) end
  end
  return fns
end

-- A window's split (bench header: columns).
local function split(file)
  local p = inclusive(file)
  local function at(name) return p[name] or 0 end
  local rq, call, ev, sc, wr = at("readQueryFromClient"), at("call"), at("evalGenericCommand"), at("scriptCall"),
    at("writeToClient")
  local gc, vm = at("lua_gc"), at("lua_pcall") - sc
  return { total = rq + wr, read = rq - call, cmds = call - ev, script = ev - sc, gc = gc, vm = vm,
           setup = ev - sc - gc - vm, inscript = sc, write = wr, program = p.total }
end

-- One counted window around run() (bench header): its profile, moved to
-- OUT/<label>.out, split; and the commands INFO commandstats counted.
local function counted(srv, label, run)
  assert(srv.raw:command("CONFIG", "RESETSTAT"))
  control(srv, "-i on")
  local ok, err = pcall(run)
  control(srv, "-i off")
  local stats = lib.snapshot(srv.raw)
  local calls, refused = stats.calls, 0
  for cmd in pairs(BENCH_CMDS) do calls[cmd] = nil end
  for cmd, n in pairs(stats.failed) do if not BENCH_CMDS[cmd] then refused = refused + n end end
  control(srv, "-d")
  srv.dumps = srv.dumps + 1
  local dump, file = ("%s/server-%d.out.%d"):format(OUT, srv.pid, srv.dumps), ("%s/%s.out"):format(OUT, label)
  assert(helpers.wait_until(function()
    local f = io.open(dump, "r")
    if f then f:close() end
    return f ~= nil
  end, 30, 0.1), "no profile " .. dump)
  assert(os.rename(dump, file))
  if not ok then error(err, 0) end
  return { file = file, calls = calls, refused = refused, split = split(file) }
end

--- the variants ------------------------------------------------------------------

-- Runs cmd to completion (timeout s); its stdout, or raises.
local function run(cmd, timeout)
  local p = helpers.spawn(cmd)
  local code = p:wait(timeout or 900)
  local out, err = p:stdout(), p:stderr()
  p:stop()
  if code ~= 0 then error(("exited %s: %s"):format(tostring(code), err:sub(-400)), 0) end
  return out
end

local function cycle_worker(mode)
  return function(srv, n)
    return helpers.lua_cmd("bench/callgrind_worker.lua", srv.url, "bench:srv", n, mode)
  end
end

local function renew_raw(...)
  local words = { ... }
  return function(srv, rounds)
    return table.concat({ quote(RENEW_BIN), srv.host, srv.port, quote(SCRIPT), LOCKS, TTL * 1000, rounds, BATCH,
      srv.pid, table.unpack(words) }, " ")
  end
end

local CYCLES = {
  { name = "raw-hiredis", cmd = function(srv, n)
      return table.concat({ quote(CYCLE_BIN), srv.host, srv.port, quote("bench:srv"), n, "quiet" }, " ")
    end },
  { name = "redislock", cmd = cycle_worker(1), vs = { "raw-hiredis" } },
  { name = "redislock-nofence", cmd = cycle_worker("nofence"), vs = { "raw-hiredis" } },
  { name = "redislock-noholder", cmd = cycle_worker("noholder"), vs = { "raw-hiredis" } },
}

local RENEWALS = {
  { name = "raw-pipelined", cmd = renew_raw("pipelined") },
  { name = "raw-pipelined-holder", cmd = renew_raw("pipelined", "holder"), vs = { "raw-pipelined" } },
  { name = "watchdog", holder = true, vs = { "raw-pipelined", "raw-pipelined-holder" } },
  { name = "watchdog-noholder", holder = false, vs = { "raw-pipelined" } },
}

local FIELDS = { "total", "read", "cmds", "script", "gc", "vm", "setup", "inscript", "write", "program" }

-- Per operation between two windows (b - a) / ops, or of one window (a nil).
local function per_op(a, b, ops)
  local r = { split = {}, cmds = {} }
  for _, k in ipairs(FIELDS) do r.split[k] = (b.split[k] - (a and a.split[k] or 0)) / ops end
  for cmd, n in pairs(b.calls) do r.cmds[cmd] = (n - (a and a.calls[cmd] or 0)) / ops end
  return r
end

-- What is wrong with a window (nil: nothing): commands refused or failed
-- (NOSCRIPT, ...) beyond `refused` (a worker's start-up probes, such as
-- SET IFEQ where the server has none: the same in every window, cancelled
-- out); for renewals (extend.lua: GET, then two
-- PEXPIREs when the token matches) one that did not renew.
local function window_wrong(w, renewals, refused)
  if w.refused ~= (refused or 0) then
    return ("%d commands refused or failed in %s, not %d"):format(w.refused, w.file, refused or 0)
  end
  local ev, get, px = w.calls.evalsha or 0, w.calls.get or 0, w.calls.pexpire or 0
  if renewals and (ev == 0 or get ~= ev or px ~= 2 * get) then
    return ("EVALSHA %d, GET %d, PEXPIRE %d: not every renewal renewed"):format(ev, get, px)
  end
end

-- A difference variant: an uncounted warm-up (prepare), then the windows
-- of `sizes`; per op over the calls of `op` between them.
local function difference(v, sizes, op, prepare)
  local srv = start_server()
  local r = { name = v.name, vs = v.vs, files = {} }
  local ok, err = pcall(function()
    local w = {}
    for i, n in ipairs(sizes) do
      if prepare then prepare(srv, i) end
      w[i] = counted(srv, ("%s-%d"):format(v.name, n), function() run(v.cmd(srv, n)) end)
      r.files[i] = w[i].file
      r.check = r.check or window_wrong(w[i], op == "evalsha", w[1].refused)
    end
    r.refused = w[1].refused
    r.ops = (w[2].calls[op] or 0) - (w[1].calls[op] or 0)
    if r.ops <= 0 then error(("no %s between the windows"):format(op), 0) end
    r.per = per_op(w[1], w[2], r.ops)
  end)
  stop_server(srv)
  if not ok then r.error = err end
  return r
end

local function measure_cycle(v)
  return difference(v, { N1, N2 }, "del", function(srv, i)
    if i == 1 then run(v.cmd(srv, 10)) end   -- warm-up: scripts cached, fence counter made
  end)
end

local function measure_raw_renewal(v)
  return difference(v, RAW_ROUNDS, "evalsha", function(srv)
    assert(srv.raw:command("FLUSHALL"))
    assert(srv.raw:command("SCRIPT", "LOAD", assert(helpers.read_file(SCRIPT))))
  end)
end

-- Polls (outside any window) until the worker's opening INFO, half a
-- renewal period after a pass: the first INFO of someone else's after the
-- first pass (every lock renewed once: GET = LOCKS), for the library's
-- connections run INFO too when they connect. The k-th of my own INFOs
-- counts k - 1 of mine (an INFO counts itself after it runs).
local function await_worker_edge(srv, p)
  assert(srv.raw:command("CONFIG", "RESETSTAT"))
  local polls, before = 0, nil
  local seen = helpers.wait_until(function()
    if not p:alive() then error("hold_worker.lua exited early: " .. p:stderr():sub(-400), 0) end
    polls = polls + 1
    local calls = lib.snapshot(srv.raw).calls
    local others = (calls.info or 0) - (polls - 1)
    if before then return others > before end
    if (calls.get or 0) >= LOCKS then before = others end
    return false
  end, 120 + 6 * PERIOD, 0.2)
  if not seen then error("hold_worker.lua never opened its window", 0) end
end

-- The worker's end: its "window" line, or raises. Its locks must all
-- still be held (it asserts so, and exits non-zero otherwise).
local function worker_result(p)
  local code = p:wait(120 + 4 * PERIOD)
  local out, err = p:stdout(), p:stderr()
  local f = lib.fields(out:match("window ([^\n]+)") or "")
  if code ~= 0 or not f.renewals then
    error(("hold_worker.lua exited %s: %s"):format(tostring(code), err:sub(-400)), 0)
  end
  return f
end

-- The watchdog: one window of PASSES periods, opened half a period after a
-- pass; the worker's own window (PASSES + 1 periods) closes after it.
local function measure_watchdog(v)
  local srv = start_server()
  local r = { name = v.name, vs = v.vs, files = {} }
  local p = helpers.spawn((v.holder and "" or "BENCH_HOLDER=0 ") ..
    helpers.lua_cmd("bench/hold_worker.lua", "hold", srv.url, LOCKS, TTL, PASSES + 1, srv.pid))
  local ok, err = pcall(function()
    await_worker_edge(srv, p)
    local w = counted(srv, v.name, function() helpers.sleep(PASSES * PERIOD) end)
    r.files[1] = w.file
    r.worker = worker_result(p)
    r.ops = w.calls.evalsha or 0
    if r.ops == 0 then error("no renewal in the window", 0) end
    r.per = per_op(nil, w, r.ops)
    local wrong = { window_wrong(w, true) }
    if r.ops ~= PASSES * LOCKS then
      wrong[#wrong + 1] = ("%d renewals in the window, not %d x %d (whole passes)"):format(r.ops, PASSES, LOCKS)
    end
    if r.worker.failures ~= 0 then wrong[#wrong + 1] = r.worker.failures .. " failed renewals (worker)" end
    if #wrong > 0 then r.check = table.concat(wrong, "; ") end
  end)
  p:stop()
  stop_server(srv)
  if not ok then r.error = err end
  return r
end

--- the report ----------------------------------------------------------------------

-- The split's columns: heading, field. total = read + cmds + script +
-- in-script + write; script = lua_gc + lua_vm + setup.
local COLUMNS = { { "total", "total" }, { "read", "read" }, { "cmds", "cmds" }, { "script", "script" },
  { "lua_gc", "gc" }, { "lua_vm", "vm" }, { "setup", "setup" }, { "in-script", "inscript" }, { "write", "write" } }

-- One line: a name, then the cells of the columns, then the rest.
local function line(name, cell, ...)
  local t = { ("%-21s"):format(name) }
  for _, c in ipairs(COLUMNS) do t[#t + 1] = ("%10s"):format(cell(c)) end
  for i = 1, select("#", ...) do t[#t + 1] = ("%10s"):format((select(i, ...))) end
  printf("%s\n", table.concat(t, ""))
end

local function heading(...) line("variant", function(c) return c[1] end, "cmds/op", ...) end

local function commands_per_op(r)
  local n = 0
  for _, x in pairs(r.per.cmds) do n = n + x end
  return n
end

local function row(r, by_name)
  if r.error then return printf("%-21s FAILED: %s\n", r.name, r.error) end
  local s, base = r.per.split, r.vs and by_name[r.vs[1]]
  line(r.name, function(c) return ("%.0f"):format(s[c[2]]) end, ("%.2f"):format(commands_per_op(r)),
    base and base.per and lib.ratio(s.total, base.per.split.total) or "1.00x", ("%.0f"):format(s.program))
end

local function extra_rows(results, by_name)
  printf("\nextra per operation over the raw baseline (variant - baseline)\n")
  heading("  over")
  for _, r in ipairs(results) do
    for _, name in ipairs(r.per and r.vs or {}) do
      local b = by_name[name]
      if b and b.per then
        local s, t = r.per.split, b.per.split
        line(r.name, function(c) return ("%+.0f"):format(s[c[2]] - t[c[2]]) end,
          ("%+.2f"):format(commands_per_op(r) - commands_per_op(b)), "  " .. name)
      end
    end
  end
end

local function details(results)
  printf("\nper operation, commands (INFO commandstats: scripts and what they run), checks, profiles:\n")
  for _, r in ipairs(results) do
    if r.per then
      local l = {}
      for cmd, x in pairs(r.per.cmds) do if x >= 0.005 then l[#l + 1] = { cmd, x } end end
      table.sort(l, function(a, b) return a[2] > b[2] or (a[2] == b[2] and a[1] < b[1]) end)
      for i, e in ipairs(l) do l[i] = ("%s %.2f"):format(e[1], e[2]) end
      printf("  %-21s %s  (%d ops)\n", r.name, table.concat(l, ", "), r.ops)
    end
    if r.check then
      failed = true
      printf("  %-21s CHECK FAILED: %s\n", r.name, r.check)
    elseif r.per and r.name:find("watchdog") then
      printf("  %-21s %d renewals = %d whole passes of %d, every one renewed (worker: %d renewals, %d failures " ..
        "over its %g s)\n", "", r.ops, PASSES, LOCKS, r.worker.renewals, r.worker.failures, r.worker.seconds)
    end
    if (r.refused or 0) > 0 then
      printf("  %-21s %d commands refused or failed per worker start (its connections' probes: SET IFEQ, " ..
        "which Redis 7.0 refuses), the same in both windows: cancelled out\n", "", r.refused)
    end
    if #r.files > 0 then printf("  %-21s %s\n", "", table.concat(r.files, " ")) end
  end
end

local HOW = [[

How to read it (bench/README.md, bench/server_instr.lua):
- Counts, not times: `total` agrees to about 1 % between runs; a column moves by up to a
  few hundred instructions (most likely with each server's own random hash seed, which
  its dictionaries' lookups and rehashing follow). Compare builds by these counts.
- total = read + cmds + script + in-script + write; script = lua_gc + lua_vm + setup.
- The extra table says which part grows: `script` is what running Lua costs per EVALSHA
  (it grows with the script's body and its KEYS and ARGV), `in-script` grows with each
  redis.call(), `read` with the bytes of the requests.
- raw-pipelined-holder over raw-pipelined is the holder record's renewal (a PEXPIRE
  that finds a key); watchdog over raw-pipelined-holder is what the watchdog's
  renewals cost the server beyond the same script on the same keys.
- `program` also holds serverCron and the idle loop, which follow the wall time (30x
  under callgrind), not the operations: not a cost per operation.
]]

local function main()
  local f = io.open("redislock/core.so", "rb")
  if not f then error("redislock/core.so not found: run `make` first (from the repo root)", 0) end
  f:close()
  local _, code = helpers.sh("command -v valgrind >/dev/null 2>&1 && command -v callgrind_control >/dev/null 2>&1")
  if code ~= 0 then error("valgrind is not installed (tools/deps.sh valgrind)", 0) end
  lib.build_c(CYCLE_SRC, CYCLE_BIN)
  lib.build_c(RENEW_SRC, RENEW_BIN)
  helpers.sh("mkdir -p " .. OUT)
  write_wrapper()
  local version = (helpers.sh(quote(helpers.bin.server) .. " --version")):match("v=([%w%.]+)") or "?"
  printf("%s %s under %s --tool=callgrind, one server per variant\n", helpers.bin.server, version,
    ((helpers.sh("valgrind --version")):gsub("%s+$", "")))
  printf("per cycle: (window of %d cycles - window of %d) / the DELs between them\n", N2, N1)
  printf("per renewal: %d locks, ttl %g s; raw: (window of %d rounds - window of %d) / the EVALSHAs between them; " ..
    "watchdog: a window of %d passes / its EVALSHAs\n\n", LOCKS, TTL, RAW_ROUNDS[2], RAW_ROUNDS[1], PASSES)
  local results, by_name = {}, {}
  printf("server instructions per operation\n")
  heading("x raw", "program")
  printf("-- per cycle (acquire + release, uncontended)\n")
  for _, v in ipairs(CYCLES) do
    local r = measure_cycle(v)
    results[#results + 1], by_name[r.name] = r, r
    row(r, by_name)
  end
  printf("-- per renewal (extend.lua by EVALSHA, %d locks)\n", LOCKS)
  for _, v in ipairs(RENEWALS) do
    local r = v.cmd and measure_raw_renewal(v) or measure_watchdog(v)
    results[#results + 1], by_name[r.name] = r, r
    row(r, by_name)
  end
  for _, r in ipairs(results) do if r.error then failed = true end end
  extra_rows(results, by_name)
  details(results)
  printf("%s", HOW)
end

local ok, err = xpcall(main, debug.traceback)
helpers.stop_all()
if not ok then
  io.stderr:write(tostring(err), "\n")
  os.exit(1)
end
if failed then os.exit(1) end

--[[
bench/watchdog_cpu.lua -- what the watchdog costs a process that holds
1, 100, 1,000 and 10,000 locks: CPU time, wakeups, round trips.

run from the repo root, after `make` (needs ./redislock/core.so):
  lua5.4 bench/watchdog_cpu.lua [SECONDS] [TTL]    (make bench: 30 s each;
                                                   BENCH_SHORT=1: 6 s each)

For each count N, one process (bench/hold_worker.lua "hold") connects,
acquires N locks (ttl TTL, default 3 s: each renewed every TTL/3 = 1 s),
lets the watchdog run two periods, then sleeps through a window of SECONDS
(rounded to whole renewal periods, so that every lock is renewed exactly
SECONDS / (TTL/3) times in it) while only the watchdog works. Over the
window it reads, for the whole process and for the watchdog thread alone:

  CPU %         process CPU time / window, in % of one core: exact
                (CLOCK_PROCESS_CPUTIME_ID, every thread); "ticks %" is the
                same from utime+stime of /proc/self/stat (10 ms ticks: 0
                below one tick)
  us/renewal    process CPU time per renewal
  ns/lock/s     process CPU time per held lock and second (CPU % / N)
  renewals/s    client:stats().renewals: N / (TTL/3) when every lock is
                renewed on time
  pipelines/s   client:stats().round_trips: the watchdog's round trips
                (one pipeline of up to 1,024 renewals each)
  reads/s       requests the server read off the watchdog's socket
                (bench/lib.lua's count, total_reads_processed; a pipeline
                of 1,000 renewals is ~100 KB and arrives in several reads)
  wakeups/s     the watchdog thread's context switches (voluntary +
                involuntary: each sleep in poll it was woken from)
  threads       threads in the process (main + watchdog)
  server %      redis-server's main thread's CPU time, % of one core

The cost should grow with the renewals due per second (N / (TTL/3)), in
pipelines, and not with one thread or one timer per lock: the thread count
stays 2 and the wakeups follow the pipelines, not N.

Placement: redis-server pinned to CPU 0, the holding process to CPU 1 (on
one CPU, both on CPU 0). Writes bench/out/watchdog-cpu.dat for `make
bench-plot`. Nothing here is a test: the exit status is non-zero only when a
run fails (a worker error, a lock lost, a renewal failing).
]]
package.path = "./lua/?.lua;./?.lua;" .. package.path
package.cpath = "./?.so;" .. package.cpath

local helpers = require "spec.helpers"
local lib = require "bench.lib"
local core = require "redislock.core"
local url_fields = require "redislock.url"

local SECONDS = tonumber(arg and arg[1]) or 6
local TTL = tonumber(arg and arg[2]) or 3
local COUNTS = { 1, 100, 1000, 10000 }
local DAT = "bench/out/watchdog-cpu.dat"
local printf = lib.printf

local failed = false

local fields = lib.fields

local function run(srv, n, periods, cpu)
  local p = helpers.spawn("taskset -c " .. cpu .. " " ..
    helpers.lua_cmd("bench/hold_worker.lua", "hold", srv.url, n, TTL, periods, srv.pid))
  local code = p:wait(120 + periods * TTL)
  local out, err = p:stdout(), p:stderr()
  p:stop()
  local w = fields(out:match("window ([^\n]+)") or "")
  if code ~= 0 or not w.renewals then
    failed = true
    return { n = n, error = ("exited %s: %s"):format(tostring(code), err:sub(1, 300)) }
  end
  -- every lock renewed in every period of the window (one pass may fall
  -- outside it when the locks renew in several passes per period)
  if w.failures > 0 or w.renewals < n * (periods - 1) then
    failed = true
    return { n = n, error = ("%d renewals for %d locks over %d periods, %d failures"):format(w.renewals, n,
      periods, w.failures) }
  end
  local s = w.seconds
  return {
    n = n,
    seconds = s,
    cpu = w.cpu_s / s * 100,
    ticks = w.ticks_s / s * 100,
    wd = w.wd_cpu_s / s * 100,
    per_renewal = w.cpu_s / w.renewals * 1e6,
    per_lock = w.cpu_s / s / n * 1e9,
    renewals = w.renewals / s,
    pipelines = w.pipelines / s,
    reads = w.server_rt / s,
    wakeups = w.wd_switches / s,
    threads = w.threads,
    server = w.srv_cpu_s / s * 100,
  }
end

local function main()
  local f = io.open("redislock/core.so", "rb")
  if not f then error("redislock/core.so not found: run `make` first (from the repo root)", 0) end
  f:close()
  local period = TTL / 3
  local periods = math.max(1, math.floor(SECONDS / period + 0.5))
  local srv = helpers.start_redis()
  local raw = assert(core.connect(url_fields.parse(srv.url)))
  local version = assert(raw:command("INFO", "server")):match("redis_version:([%w%.]+)")
  local _, pinned = helpers.sh("taskset -cp 0 " .. srv.pid .. " >/dev/null 2>&1")
  if pinned ~= 0 then error("taskset could not pin redis-server to CPU 0", 0) end
  local cpu = tonumber((helpers.sh("nproc"))) >= 2 and 1 or 0
  printf("redis-server %s at %s (CPU 0); holding process on CPU %d; ttl %g s (renewal every %g s); " ..
    "window %g s per count\n", version or "?", srv.url, cpu, TTL, period, periods * period)
  printf("load average before: %s (2 cores here: anything else running skews the numbers)\n\n", lib.loadavg())
  local results = {}
  for _, n in ipairs(COUNTS) do
    results[#results + 1] = run(srv, n, periods, cpu)
    assert(raw:command("FLUSHALL"))
  end
  raw:close()
  srv:stop()

  local fmt = "%-7s %7s %7s %8s %10s %10s %10s %11s %8s %9s %7s %8s\n"
  printf(fmt, "locks", "CPU %", "ticks %", "wd CPU %", "us/renewal", "ns/lock/s", "renewals/s", "pipelines/s",
    "reads/s", "wakeups/s", "threads", "server %")
  local dat = {}
  for _, r in ipairs(results) do
    if r.error then
      printf("%-7d FAILED: %s\n", r.n, r.error)
    else
      printf(fmt, r.n, ("%.3f"):format(r.cpu), ("%.2f"):format(r.ticks), ("%.3f"):format(r.wd),
        ("%.2f"):format(r.per_renewal), ("%.1f"):format(r.per_lock), ("%.0f"):format(r.renewals),
        ("%.1f"):format(r.pipelines), ("%.1f"):format(r.reads), ("%.1f"):format(r.wakeups), r.threads,
        ("%.3f"):format(r.server))
      dat[#dat + 1] = ("%d %.6f %.6f %.4f %.3f %.3f %.3f\n"):format(r.n, r.cpu, r.wd, r.per_renewal, r.per_lock,
        r.wakeups, r.server)
    end
  end
  printf("CPU %% and server %%: of one core; us/renewal and ns/lock/s: the process's CPU time; " ..
    "wd: the watchdog thread alone\n")
  printf("load average after: %s\n", lib.loadavg())
  helpers.sh("mkdir -p bench/out")
  local out = assert(io.open(DAT, "w"))
  out:write(("# bench/watchdog_cpu.lua: ttl %g s, window %g s; columns: locks, process CPU %% of a core, " ..
    "watchdog thread CPU %%, us CPU per renewal, ns CPU per lock per second, wakeups/s, redis-server CPU %%\n")
    :format(TTL, periods * period))
  out:write(table.concat(dat))
  out:close()
  printf("data: %s\n", DAT)
  if failed then os.exit(1) end
end

local ok, err = xpcall(main, debug.traceback)
helpers.stop_all()
if not ok then
  io.stderr:write(tostring(err), "\n")
  os.exit(1)
end

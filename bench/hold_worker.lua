-- hold_worker.lua: redislock's side of bench/renew.lua and
-- bench/watchdog_cpu.lua. One client holds N watched locks while the
-- watchdog renews them, and this process measures what that costs.
--
-- usage: lua hold_worker.lua MODE URL N TTL PERIODS SERVER_PID [SERVER_URL]
-- (BENCH_HOLDER=0 in the environment: the locks record no holder label, to
-- tell what renewing the record costs the server: issue 31 target 2)
--   MODE     "passes" (bench/renew.lua) or "hold" (bench/watchdog_cpu.lua)
--   N        locks to hold, named "renew:l1" .. "renew:lN" (keys "{renew:l1}"...)
--   TTL      their ttl in seconds: the watchdog renews each every TTL/3 s
--   PERIODS  length of the measured window, in renewal periods of TTL/3 s
--   SERVER_PID  redis-server's pid (its main thread's CPU time is read)
--   SERVER_URL  that server's own URL, for its INFO (default URL: give it
--               when URL goes through sentinels)
--
-- Both modes: acquire the N locks (watchdog on), let the watchdog run two
-- periods (every lock renewed at least once, the schedule settled), then
-- measure over a window of exactly PERIODS periods ("hold": starting half a
-- period after a pass, so that it holds PERIODS passes). At the window's
-- edges: the process's CPU time (os.clock: CLOCK_PROCESS_CPUTIME_ID, every
-- thread, in ns; and utime+stime from /proc/self/stat in 10 ms ticks), the
-- watchdog thread's own CPU time (/proc/self/task/TID/schedstat), its
-- context switches (each time it slept and was woken, or was preempted),
-- the number of threads, client:stats(), and the server's INFO stats (round
-- trips as bench/lib.lua counts them, on a connection of its own opened
-- before the window) and its main thread's CPU time.
--
-- "hold": the main thread sleeps through the window (one core.sleep), so
-- nothing but the watchdog runs in the process.
-- "passes": the main thread samples the watchdog thread's CPU time every
-- SAMPLE_S (one lseek + read of its schedstat, and of redis-server's;
-- client:stats() too when the thread ran since the last sample) to find the
-- renewal passes, and what each cost both processes: a pass is a
-- run of samples in which the thread ran, ended by more than GAP_S with
-- none. Each pass's wall time runs from the midpoint of the sample interval
-- where it began to that of the interval where the thread last ran, so
-- from the first renewal queued to the last answer applied (+-SAMPLE_S/2 at
-- each end). Only passes wholly inside the window count.
--
-- Prints "key=value ..." lines: one "window", and one "pass" per pass
-- (passes mode). Exits non-zero on any failure.
package.path = "./lua/?.lua;./?.lua;" .. package.path
package.cpath = "./?.so;" .. package.cpath

local redislock = require "redislock"
local core = require "redislock.core"
local lib = require "bench.lib"
local url_fields = require "redislock.url"

local mode, url, n, ttl, periods, server_pid = arg[1], arg[2], tonumber(arg[3]), tonumber(arg[4]),
  tonumber(arg[5]), arg[6]
local server_url = arg[7] or url
assert(mode == "passes" or mode == "hold", "MODE must be passes or hold")
assert(n and ttl and periods and server_pid, "usage: hold_worker.lua MODE URL N TTL PERIODS SERVER_PID")

local SAMPLE_S = 0.001
local GAP_S = 0.010
local period = ttl / 3
local pid = core.getpid()

-- The process's threads, read by listing /proc/PID/task (popen: before the
-- window only).
local function threads()
  local f = assert(io.popen("ls /proc/" .. pid .. "/task"))
  local t = {}
  for tid in f:read("a"):gmatch("%d+") do t[#t + 1] = tid end
  f:close()
  return t
end

-- voluntary + involuntary context switches of one thread
local function switches(tid)
  local f = io.open(("/proc/%d/task/%s/status"):format(pid, tid), "r")
  if not f then return 0 end
  local s = f:read("a")
  f:close()
  return tonumber(s:match("\nvoluntary_ctxt_switches:%s*(%d+)")) +
    tonumber(s:match("\nnonvoluntary_ctxt_switches:%s*(%d+)"))
end

local client = assert(redislock.connect { url = url })
local info_conn = assert(core.connect(url_fields.parse(server_url)))
local locks = {}
local opts = { ttl = ttl }
-- (not `cond and false or nil`: that is nil whatever cond is)
if os.getenv("BENCH_HOLDER") == "0" then opts.holder = false end
for i = 1, n do locks[i] = assert(client:acquire("renew:l" .. i, opts)) end
local acquired_at = core.monotime()

-- The watchdog is the thread named redislock-wd (a Sentinel client has a
-- follower thread too; a resolver thread, were there one, is gone once
-- connect returned).
local tids, wd_tid = threads(), nil
for _, tid in ipairs(tids) do
  local f = io.open("/proc/" .. pid .. "/task/" .. tid .. "/comm")
  local name = f and f:read("l")
  if f then f:close() end
  if name == "redislock-wd" then
    assert(not wd_tid, "more than one watchdog thread: " .. table.concat(tids, " "))
    wd_tid = tid
  end
end
assert(wd_tid, "no watchdog thread")

core.sleep(math.max(0, acquired_at + 2 * period - core.monotime()))

-- One edge of the window. The cheap, exact clocks are read nearest the
-- window and the INFO snapshot (a round trip and some parsing) outside it:
-- last at the opening edge, first at the closing one.
local function edge(closing)
  local e = {}
  local function clocks()
    e.t = core.monotime()
    e.clock = os.clock()
    e.wd_ns = lib.thread_cpu_ns(pid, wd_tid)
    e.srv_ns = lib.thread_cpu_ns(server_pid)
    e.ticks = lib.process_cpu_s(pid)
  end
  local function counters()
    local s = client:stats()
    e.renewals, e.round_trips, e.failures, e.watched = s.renewals, s.round_trips, s.failures, s.watched
    e.wd_sw = switches(wd_tid)
  end
  if closing then
    clocks()
    counters()
    e.info = lib.snapshot(info_conn)
  else
    e.info = lib.snapshot(info_conn)
    counters()
    clocks()
  end
  return e
end

-- The renewals of one period are due at one moment (one pass) when the
-- locks were taken within TTL/6 s of each other; each pass comes a little
-- later than TTL/3 after the one before (a renewal is rescheduled from when
-- it was sent, which is after it was due). A window of whole periods that
-- starts right after a pass could then miss its last one by that drift: in
-- "hold" mode the window starts half a period after a pass ends instead.
local function align()
  local deadline = core.monotime() + 2 * period
  local last = client:stats().renewals
  local changed_at
  while core.monotime() < deadline do
    core.sleep(0.005)
    local now, r = core.monotime(), client:stats().renewals
    if r ~= last then
      last, changed_at = r, now
    elseif changed_at and now - changed_at >= 0.02 then
      core.sleep(math.max(0, changed_at + period / 2 - core.monotime()))
      return
    end
  end
end

local passes = {}
if mode == "hold" then align() end
local a = edge()
local window_end = a.t + periods * period
if mode == "hold" then
  core.sleep(periods * period)
else
  local function opened(path)
    local f = assert(io.open(path, "r"))
    f:setvbuf("no")   -- so that every read after a seek reads /proc afresh
    return f
  end
  local wd_f = opened(("/proc/%d/task/%s/schedstat"):format(pid, wd_tid))
  local srv_f = opened(("/proc/%s/task/%s/schedstat"):format(server_pid, server_pid))
  local function cpu(f)
    f:seek("set", 0)
    return tonumber(f:read(64):match("^(%d+)"))
  end
  local prev = { t = core.monotime(), cpu = cpu(wd_f), srv = cpu(srv_f), ren = client:stats().renewals }
  local cur            -- the pass under way
  while true do
    core.sleep(SAMPLE_S)
    local s = { t = core.monotime(), cpu = cpu(wd_f), srv = cpu(srv_f), ren = prev.ren }
    if s.cpu > prev.cpu then
      s.ren = client:stats().renewals
      local mid = (prev.t + s.t) / 2
      if cur and mid - cur.t1 > GAP_S then
        passes[#passes + 1] = cur
        cur = nil
      end
      if not cur then cur = { t0 = mid, cpu0 = prev.cpu, ren0 = prev.ren, srv0 = prev.srv } end
      cur.t1, cur.cpu1, cur.ren1, cur.srv1 = mid, s.cpu, s.ren, s.srv
    elseif cur and s.t - cur.t1 > GAP_S then
      passes[#passes + 1] = cur
      cur = nil
    end
    prev = s
    if s.t >= window_end and not cur then break end
  end
  wd_f:close()
  srv_f:close()
  -- a pass cut by the window's start (it began before the first sample)
  if passes[1] and passes[1].t0 <= a.t + SAMPLE_S then table.remove(passes, 1) end
end
local b = edge(true)

local calls = lib.diff_calls(a.info, b.info)
local rt = lib.round_trips(a.info, b.info)
io.stdout:write(("window n=%d ttl=%g seconds=%.6f periods=%g cpu_s=%.6f ticks_s=%.2f wd_cpu_s=%.6f " ..
  "wd_switches=%d threads=%d renewals=%d pipelines=%d failures=%d watched=%d server_rt=%d evalsha=%d " ..
  "srv_cpu_s=%.6f\n"):format(n, ttl, b.t - a.t, periods, b.clock - a.clock, b.ticks - a.ticks,
  (b.wd_ns - a.wd_ns) / 1e9, b.wd_sw - a.wd_sw, #tids, b.renewals - a.renewals,
  b.round_trips - a.round_trips, b.failures - a.failures, b.watched, rt, calls.evalsha or 0,
  (b.srv_ns - a.srv_ns) / 1e9))
for _, p in ipairs(passes) do
  io.stdout:write(("pass seconds=%.6f cpu_s=%.6f renewals=%d srv_cpu_s=%.6f\n"):format(p.t1 - p.t0,
    (p.cpu1 - p.cpu0) / 1e9, p.ren1 - p.ren0, (p.srv1 - p.srv0) / 1e9))
end

for i = 1, n do
  assert(locks[i]:held(), "lock " .. i .. " was lost")
  assert(locks[i]:release())
end
client:close()
info_conn:close()

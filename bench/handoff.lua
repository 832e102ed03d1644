--[[
bench/handoff.lua -- lock handoff when processes contend on one name.

run from the repo root, after `make` (needs ./redislock/core.so):
  lua5.4 bench/handoff.lua [ITERATIONS]      (make bench)

Starts a throwaway redis-server (spec/helpers.lua), builds bench/spin_poll.c
into bench/out/, then for 2 and 4 processes runs six variants, one after the
other, against that server:

  redislock-notify  tools/counter_worker.lua, waiting by release notification
                    (acquire wait=120, notify=true: BLPOP on a wakeup list)
  redislock-poll    the same worker with notify=false (sleep with exponential
                    backoff and full jitter between attempts)
  redislock-fair    fair=true: waiters queue, the release hands the lock to
                    the first one (its BLPOP reply is the grant)
  redislock-notify-spin, redislock-fair-spin
                    the same two with spin = SPIN_MS: each wait polls its
                    socket that long before sleeping in the kernel
  spin-poll         bench/spin_poll.c on raw hiredis: SET NX PX in a loop
                    with no sleep at all, compare-and-delete EVAL to release

Every process takes the lock ITERATIONS times (default 300), does one GET and
one SET of a counter key inside it (the non-atomic increment the lock
protects: the same two commands in every variant), holds it HOLD_MS = 1 to 3
ms more (drawn uniformly per hold), releases, and contends again at once
(PAUSE_MS = 0). Each prints one
line per hold: `hold <t_acquired> <t_released> <fence|attempts>` on
CLOCK_MONOTONIC, t_released taken just before the release is sent.

What is reported, per variant and process count:

  acq       total holds (processes x ITERATIONS)
  acq/s     acq / wall time; wall = from the common start time START_AT to
            the last t_released
  handoffs  consecutive holds that belong to different processes. The holds
            of a run are ordered by fence (redislock) or by t_acquired
            (spin-poll); a hold followed by one of the same process (the
            releaser took it again) is a re-acquisition, not a handoff.
  p50/p99   handoff latency in ms over those handoffs: t_acquired of the next
            hold - t_released of the previous one. It includes the release
            round trip, the wakeup and the winning acquire round trip.
            Percentiles are nearest-rank; a "*" marks fewer than 30 handoffs.
  rt/acq    round trips per acquisition, counted by the SERVER, minus the 2
            round trips of the critical section (its GET and SET):
              ( d total_reads_processed            requests read off client sockets
              - d total_connections_received       one EOF read per connection closed
              - INFO commands of this script )     d cmdstat_info
              / acq - 2
            Connection setup and the lazy watchdog / wait connections are
            included (they are real round trips), amortised over acq.
  cmds/acq  what INFO commandstats alone says: the sum of calls= over every
            cmdstat_* minus INFO, per acquisition, minus the same 2. This is
            NOT round trips: Redis counts each redis.call() made inside a
            script (EVAL/EVALSHA) under its own command too, so a script that
            runs 3 commands counts 4. Shown for comparison; the target uses
            rt/acq. For spin-poll the script does GET+DEL on release, so it
            reads 2 more than rt/acq.

Why total_reads_processed: every request a client sends is one read event on
the server (a pipeline that arrives together is one read, which is one round
trip), BLPOP wakeups cause no read, and commands run by scripts cause none.
The spin-poll variant checks this against the clients' own count (SET NX
attempts + GET + SET + EVAL per hold) and prints both.

After the table, "where the time goes" (diagnostics, not part of the table):
each step of a handoff timed alone in this process with no contention (round
trips, acquire and release with and without the watchdog, a BLPOP wakeup
across processes), then the notify and fair-spin variants run once more for 2 and 4
processes through bench/traced_worker.lua, which time-stamps the inside of
acquire and release, so that every handoff to a woken waiter is cut into:
releaser's unwatch, release script -> waiter's BLPOP returning, the waiter's
retry round trip (none when the BLPOP came back with the lock: a fair grant,
or a notify waiter's attempt queued behind its BLPOP), its watchdog
registration. It also counts how many wakeups did not end in the lock.

Data: each variant's handoff latencies (the table's, not the traced runs')
go to bench/out/handoff-<variant>-x<procs>.dat, one "<ms> <fraction of
handoffs at or below it>" line per handoff, sorted (an empirical CDF), for
`make bench-plot`. Nothing printed depends on them.

Correctness: the final counter must equal acq in every variant, holds must
not overlap in time, and redislock fences must be unique; any failure (or a
worker exiting non-zero) makes this script exit 1. The performance target
("handoff p50 within 1.5x of spin-poll at <= 3 round trips per acquisition")
is printed as PASS or MISS and never fails the run: this is a benchmark.
]]
package.path = "./lua/?.lua;./?.lua;" .. package.path
package.cpath = "./?.so;" .. package.cpath

local helpers = require "spec.helpers"
local lib = require "bench.lib"
local core = require "redislock.core"
local url_fields = require "redislock.url"

local ITERATIONS = tonumber(arg and arg[1]) or 300
local PROCS = { 2, 4 }
local HOLD_MS = "1-3"           -- each hold drawn uniformly from 1-3 ms
local HOLD_MID_MS = 2
local PAUSE_MS = 0
local TTL = 10                 -- seconds; far longer than any hold
local CS_ROUND_TRIPS = 2       -- GET + SET of the counter inside the lock
local TARGET_P50_RATIO = 1.5
local TARGET_RT = 3
local SPIN_SRC = "bench/spin_poll.c"
local SPIN_BIN = "bench/out/spin_poll"

local SPIN_MS = 10             -- the -spin variants: acquire{spin = 0.010}

-- notify: counter_worker's NOTIFY argument; spin: its SPIN_MS; target: the
-- target line judges it (it waits by notification)
local VARIANTS = {
  { name = "redislock-notify", kind = "redislock", notify = "1", target = true },
  { name = "redislock-poll", kind = "redislock", notify = "0" },
  { name = "redislock-fair", kind = "redislock", notify = "fair", target = true },
  { name = "redislock-notify-spin", kind = "redislock", notify = "1", spin = SPIN_MS, target = true },
  { name = "redislock-fair-spin", kind = "redislock", notify = "fair", spin = SPIN_MS, target = true },
  { name = "spin-poll", kind = "spin" },
}

local quote = helpers.quote

local printf = lib.printf

local failures = {}
local function fail(msg)
  failures[#failures + 1] = msg
  io.stderr:write("FAILED: ", msg, "\n")
end

--- build ----------------------------------------------------------------------

local function build_spin_poll() lib.build_c(SPIN_SRC, SPIN_BIN) end

--- server statistics ------------------------------------------------------------

local info, snapshot, diff_calls = lib.info, lib.snapshot, lib.diff_calls
local wait_workers_gone = lib.wait_clients_gone

--- statistics -------------------------------------------------------------------

local percentile = lib.percentile

--- one run ----------------------------------------------------------------------

local function worker_cmd(v, srv, name, counter, start_at)
  local start = string.format("%.6f", start_at)
  if v.kind == "spin" then
    local a = { SPIN_BIN, srv.host, srv.port, name, ITERATIONS, HOLD_MS, PAUSE_MS, start, counter,
                TTL * 1000 }
    for i = 1, #a do a[i] = quote(a[i]) end
    return table.concat(a, " ")
  end
  return helpers.lua_cmd(v.traced and "bench/traced_worker.lua" or "tools/counter_worker.lua", srv.url, name,
    ITERATIONS, counter, start,
    HOLD_MS, PAUSE_MS, v.notify, TTL, v.spin or "default")
end

-- A traced worker's stderr: its "trace" and "rtrace" lines, in call order.
local function traces_of(err_text)
  local traces, rtraces = {}, {}
  for line in err_text:gmatch("[^\n]+") do
    local kind, rest = line:match("^(r?trace) (.*)$")
    if kind then
      local f = {}
      for x in rest:gmatch("%S+") do f[#f + 1] = tonumber(x) end
      if kind == "trace" then
        traces[#traces + 1] = { woke = f[1], try0 = f[2], w0 = f[3], w1 = f[4], try1 = f[5],
                                waits = f[6], tries = f[7] }
      else
        rtraces[#rtraces + 1] = { r0 = f[1], u0 = f[2], u1 = f[3], r1 = f[4] }
      end
    end
  end
  return traces, rtraces
end

-- Waits for the workers and reads their holds (each with its trace, if
-- traced). Returns the holds, whether every worker ended well, and the
-- client's round trips (spin-poll counts its own).
local function collect(v, nprocs, procs)
  local holds, ok = {}, true
  local client_rt = 0
  for i, p in ipairs(procs) do
    local code = p:wait(60)
    if code ~= 0 then
      ok = false
      fail(("%s x%d: worker %d exited %s: %s"):format(v.name, nprocs, i, tostring(code),
        p:stderr():sub(1, 500)))
    end
    local traces, rtraces = traces_of(p:stderr())
    local k = 0
    for a, b, x in p:stdout():gmatch("hold (%S+) (%S+) (%d+)") do
      k = k + 1
      holds[#holds + 1] = { t_acq = tonumber(a), t_rel = tonumber(b), x = tonumber(x), proc = i,
                            trace = traces[k], rtrace = rtraces[k] }
      if v.kind == "spin" then client_rt = client_rt + tonumber(x) + CS_ROUND_TRIPS + 1 end
    end
    p:stop()
  end
  return holds, ok, client_rt
end

-- The holds of a run in their order: by fence (redislock; a fence granted
-- twice is a failure), or by t_acquired for spin-poll.
local function order(v, nprocs, holds)
  if v.kind == "spin" then
    table.sort(holds, function(x, y) return x.t_acq < y.t_acq end)
    return
  end
  table.sort(holds, function(x, y) return x.x < y.x end)
  for i = 2, #holds do
    if holds[i].x == holds[i - 1].x then
      fail(("%s x%d: fence %d granted twice"):format(v.name, nprocs, holds[i].x))
      break
    end
  end
end

-- A handoff to a waiter that this very release woke up, cut into steps
-- (h: the hold, prev: the one before it), into parts.
local function add_steps(parts, h, prev, gap)
  local tr, rr = h.trace, prev.rtrace
  local function add(key, a, b) parts[key][#parts[key] + 1] = (b - a) * 1000 end
  add("unwatch", prev.t_rel, rr.u1)    -- releaser: poll + watchdog unregistration
  add("notify", rr.u1, tr.woke)        -- release script sent -> waiter's BLPOP returned
  if tr.try0 >= tr.woke then           -- woken, then retried (a plain wait)
    add("resume", tr.woke, tr.try0)    -- waiter's Lua up to its retry
    add("script", tr.try0, tr.w0)      -- the acquire script's round trip
  else                                 -- the BLPOP reply came with the lock: the
    add("granted", tr.woke, tr.w0)     -- grant (fair) or the queued attempt (notify)
  end
  add("watch", tr.w0, tr.w1)           -- watchdog registration
  add("rest", tr.w1, h.t_acq)          -- back to the worker
  parts.total[#parts.total + 1] = gap
end

-- The gaps between the ordered holds: handoffs (to another process) and
-- re-acquisitions (by the same), the overlaps, the last release, and the
-- steps of the handoffs the traces cut up.
local function handoffs_of(holds)
  local handoffs, reacq = {}, {}
  local parts = { unwatch = {}, notify = {}, resume = {}, script = {}, granted = {}, watch = {}, rest = {},
                  total = {},
                  release_rtt = {} }
  local overlaps, last_rel = 0, -math.huge
  for i, h in ipairs(holds) do
    if h.t_acq < last_rel then overlaps = overlaps + 1 end
    last_rel = math.max(last_rel, h.t_rel)
    local prev = holds[i - 1]
    if prev then
      local gap = (h.t_acq - prev.t_rel) * 1000
      if h.proc ~= prev.proc then handoffs[#handoffs + 1] = gap else reacq[#reacq + 1] = gap end
      local tr, rr = h.trace, prev.rtrace
      if h.proc ~= prev.proc and tr and rr and tr.waits > 0 and tr.woke >= prev.t_rel
          and tr.w0 >= tr.woke and tr.w1 > 0 and rr.u1 > 0 then
        add_steps(parts, h, prev, gap)
      end
      if prev.rtrace and prev.rtrace.u1 > 0 then
        parts.release_rtt[#parts.release_rtt + 1] = (prev.rtrace.r1 - prev.rtrace.u1) * 1000
      end
    end
  end
  return handoffs, reacq, parts, overlaps, last_rel
end

-- What the traces of a traced run add up to.
local function trace_summary(holds, parts)
  local calls, waits, lost, tries = 0, 0, 0, 0
  for _, h in ipairs(holds) do
    local tr = h.trace
    if tr then
      calls = calls + 1
      waits = waits + tr.waits
      tries = tries + tr.tries
      lost = lost + math.max(tr.waits - 1, 0)
    end
  end
  for _, t in pairs(parts) do table.sort(t) end
  return { parts = parts, calls = calls, waits = waits, lost = lost, tries = tries }
end

-- Round trips and commands per acquisition, as the server counts them,
-- into r.
local function server_counts(r, before, after)
  local calls = diff_calls(before, after)
  r.round_trips, r.conns = lib.round_trips(before, after)
  local acq = math.max(r.acq, 1)
  r.rt = r.round_trips / acq - CS_ROUND_TRIPS
  local total = 0
  calls.info = nil
  for _, n in pairs(calls) do total = total + n end
  r.cmds = total / acq - CS_ROUND_TRIPS
  r.calls = calls
end

local function run_variant(v, nprocs, srv, raw)
  local name = ("bench:handoff:%s:%d"):format(v.name, nprocs)
  local counter = name .. ":counter"
  assert(raw:command("DEL", counter))
  -- Room for every process to start (spawning, Lua start-up, connect).
  local start_at = core.monotime() + 0.3 + 0.1 * nprocs

  local before = snapshot(raw)
  local procs = {}
  for i = 1, nprocs do procs[i] = helpers.spawn(worker_cmd(v, srv, name, counter, start_at)) end
  local holds, ok, client_rt = collect(v, nprocs, procs)
  if not wait_workers_gone(raw) then fail(v.name .. ": worker connections still open after 5 s") end
  local after = snapshot(raw)
  local final = raw:command("GET", counter)
  final = final and tonumber(final) or 0

  local r = { variant = v.name, procs = nprocs, acq = #holds, counter = final, ok = ok,
              expected = nprocs * ITERATIONS }
  order(v, nprocs, holds)
  local handoffs, reacq, parts, overlaps, last_rel = handoffs_of(holds)
  if v.traced then r.trace = trace_summary(holds, parts) end
  if overlaps > 0 then fail(("%s x%d: %d holds overlap another"):format(v.name, nprocs, overlaps)) end
  if r.counter ~= r.acq or r.acq ~= r.expected then
    fail(("%s x%d: counter %d, acquisitions %d, expected %d"):format(v.name, nprocs, r.counter,
      r.acq, r.expected))
  end
  table.sort(handoffs)
  table.sort(reacq)
  r.samples = handoffs
  r.handoffs = #handoffs
  r.p50 = percentile(handoffs, 0.50)
  r.p99 = percentile(handoffs, 0.99)
  r.reacq = #reacq
  r.reacq_p50 = percentile(reacq, 0.50)
  r.wall = last_rel - start_at
  r.rate = r.acq / r.wall
  r.overlaps = overlaps
  server_counts(r, before, after)
  if v.kind == "spin" then r.client_rt = client_rt end
  return r
end

--- where the time goes ----------------------------------------------------------
-- The steps a handoff is made of, measured alone: one process, no contention,
-- PROBE_N times each, p50 in ms. A spin-poll handoff is its release round trip
-- plus, on average, part of a SET NX round trip already in flight; a notify
-- handoff is the release round trip, the BLPOP wakeup reaching the waiter, and
-- a whole acquire (EVALSHA + watchdog registration) after it.

local PROBE_N = 300

-- p50 in ms of PROBE_N runs of fn, each after an untimed setup().
local function time_p50(fn, setup)
  local t = {}
  for i = 1, PROBE_N do
    if setup then setup() end
    local t0 = core.monotime()
    fn()
    t[i] = (core.monotime() - t0) * 1000
  end
  table.sort(t)
  return percentile(t, 0.5)
end

-- Time from just before an RPUSH is sent until another process, blocked in
-- BLPOP on that list, has its reply: the notification step of a handoff.
local function probe_wakeup(srv, raw)
  local key = "bench:probe:wake"
  local code = ([[
local core = require "redislock.core"
local c = assert(core.connect(require("redislock.url").parse(%q)))
local out = {}
for i = 1, %d do
  assert(c:command("BLPOP", %q, "1"))
  out[i] = string.format("%%.9f", core.monotime())
end
io.stdout:write(table.concat(out, " "), "\n")
c:close()
]]):format(srv.url, PROBE_N, key)
  local p = helpers.spawn(helpers.lua_cmd(code))
  local sent = {}
  for i = 1, PROBE_N do
    local blocked = helpers.wait_until(function() return info(raw, "clients").blocked_clients == 1 end,
      5, 0.0005)
    if not blocked then break end
    sent[i] = core.monotime()
    assert(raw:command("RPUSH", key, "1"))
  end
  p:wait(10)
  local t, i = {}, 0
  for woke in p:stdout():gmatch("%S+") do
    i = i + 1
    if sent[i] then t[#t + 1] = (tonumber(woke) - sent[i]) * 1000 end
  end
  p:stop()
  table.sort(t)
  return percentile(t, 0.5)
end

local function probe(srv, raw)
  local redislock = require "redislock"
  local client = assert(redislock.connect { url = srv.url })
  local key, token = "bench:probe:raw", "0123456789abcdef0123456789abcdef"
  local release_src = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
  local steps = {}
  local function step(label, v) steps[#steps + 1] = { label, v } end

  step("PING round trip (Lua, raw connection), back to back", time_p50(function() raw:command("PING") end))
  step("PING round trip after 2 ms idle (as after a hold)", time_p50(function() raw:command("PING") end,
    function() core.sleep(HOLD_MID_MS / 1000) end))
  step("SET NX PX on a held key (one spin)", time_p50(function()
    raw:command("SET", key, token, "NX", "PX", "10000")
  end, function() raw:command("SET", key, "someone else") end))
  step("compare-and-delete EVAL (spin-poll release)", time_p50(function()
    raw:command("EVAL", release_src, "1", key, token)
  end, function() raw:command("SET", key, token) end))
  local lock
  for _, watchdog in ipairs({ false, true }) do
    local opts = { ttl = TTL, watchdog = watchdog }
    local what = watchdog and "watchdog on" or "watchdog = false"
    step(("client:acquire, %s%s"):format(what, watchdog and " (EVALSHA + watch)" or " (1 EVALSHA)"),
      time_p50(function() lock = assert(client:acquire("bench:probe:lock", opts)) end,
        function() if lock then lock:release() end end))
    lock:release()
    step(("lock:release, %s%s"):format(what, watchdog and " (unwatch + EVALSHA)" or " (1 EVALSHA)"),
      time_p50(function() assert(lock:release()) end,
        function() lock = assert(client:acquire("bench:probe:lock", opts)) end))
    lock = nil
  end
  step("BLPOP wakeup: RPUSH sent -> other process has the reply", probe_wakeup(srv, raw))
  client:close()
  return steps
end

--- report -----------------------------------------------------------------------

local ms = lib.ms

local FEW = 30   -- fewer handoffs than this: their percentiles are marked "*"

local loadavg = lib.loadavg

local function print_table(results)
  local head = { "variant", "procs", "acq", "acq/s", "handoffs", "p50 ms", "p99 ms", "rt/acq", "cmds/acq" }
  local fmt = "%-21s %5s %6s %8s %8s %8s %8s %7s %8s\n"
  printf(fmt, table.unpack(head))
  for _, r in ipairs(results) do
    local mark = r.handoffs < FEW and "*" or ""
    printf(fmt, r.variant, r.procs, r.acq, string.format("%.0f", r.rate), r.handoffs, ms(r.p50) .. mark,
      ms(r.p99) .. mark, string.format("%.2f", r.rt), string.format("%.2f", r.cmds))
  end
  printf("* fewer than %d handoffs: too few samples, these percentiles vary wildly from run to run.\n", FEW)
end

local ratio = lib.ratio

local function print_comparison(results)
  local by = {}
  for _, r in ipairs(results) do by[r.variant .. "/" .. r.procs] = r end
  printf("\nratios to spin-poll (handoff p50: lower is better; acq/s: higher is better)\n")
  for _, n in ipairs(PROCS) do
    local base = by["spin-poll/" .. n]
    for _, v in ipairs(VARIANTS) do
      local r = v.kind == "redislock" and by[v.name .. "/" .. n]
      if r and base then
        printf("  %-21s x%d  p50 %s   acq/s %s\n", v.name, n, ratio(r.p50, base.p50), ratio(r.rate, base.rate))
      end
    end
  end
  printf("\ntarget: handoff p50 within %.1fx of spin-poll while spending at most %d " ..
    "round trips per acquisition\n", TARGET_P50_RATIO, TARGET_RT)
  for _, v in ipairs(VARIANTS) do
    for _, n in ipairs(PROCS) do
      local r, base = v.target and by[v.name .. "/" .. n], by["spin-poll/" .. n]
      if r and base and r.p50 and base.p50 then
        local q = r.p50 / base.p50
        local pass = q <= TARGET_P50_RATIO and r.rt <= TARGET_RT
        printf("  %-21s x%d: %s  (p50 %.2fx of spin-poll, %.2f round trips per acquisition)\n", v.name, n,
          pass and "PASS" or "MISS", q, r.rt)
      elseif r then
        printf("  %-21s x%d: MISS  (no handoffs to compare)\n", v.name, n)
      end
    end
  end
end

local function print_details(results)
  printf("\ndetails (per acquisition unless noted)\n")
  for _, r in ipairs(results) do
    local parts = {}
    for cmd, n in pairs(r.calls) do parts[#parts + 1] = { cmd, n / math.max(r.acq, 1) } end
    table.sort(parts, function(a, b) return a[2] > b[2] end)
    local s = {}
    for _, p in ipairs(parts) do s[#s + 1] = string.format("%s %.2f", p[1], p[2]) end
    printf("  %s x%d: counter %d/%d %s; wall %.2f s; re-acquisitions by the releaser %d (gap p50 %s ms); " ..
      "connections %d; server round trips %d%s\n    commandstats (incl. inside scripts): %s\n",
      r.variant, r.procs, r.counter, r.expected, r.counter == r.expected and "OK" or "WRONG", r.wall,
      r.reacq, ms(r.reacq_p50), r.conns, r.round_trips,
      r.client_rt and string.format(" (clients sent %d)", r.client_rt) or "",
      table.concat(s, ", "))
  end
end

-- The notify and fair-spin variants again, through bench/traced_worker.lua:
-- each handoff to a waiter woken by that very release, cut at the moments the
-- waiter's BLPOP returned, its winning attempt (notify) started and ended,
-- and its watchdog registration.
local function print_traced(traced)
  for _, r in ipairs(traced) do
    local t = r.trace
    local p = t.parts
    local function line(label, key)
      printf("      %-58s %s\n", label, ms(percentile(p[key], 0.5)))
    end
    local granted = #p.script == 0
    local function count_line(label, key)
      if #p[key] > 0 then line(string.format("%s [%d]", label, #p[key]), key) end
    end
    printf("\n  %s x%d under contention, traced (bench/traced_worker.lua; a separate run):\n",
      r.variant, r.procs)
    printf("    %d handoffs, %d of them to a waiter woken by that release; p50 ms of each step of those:\n",
      r.handoffs, #p.total)
    line("releaser: t_released -> unwatch done (poll + unwatch)", "unwatch")
    line("release script sent -> waiter's BLPOP returned", "notify")
    -- [n]: how many handoffs took that path
    count_line("waiter: BLPOP returned with the lock -> registration", "granted")
    count_line("waiter: BLPOP returned -> retry sent (Lua)", "resume")
    count_line("waiter: acquire script round trip", "script")
    line("waiter: watchdog registration (conn:watch)", "watch")
    line("waiter: -> t_acquired", "rest")
    line("whole handoff", "total")
    line("(for comparison: the release script's own round trip)", "release_rtt")
    if granted then
      printf("    per acquisition: %.2f attempts, %.2f BLPOP waits; %d of %d wakeups did not end in the\n" ..
        "    lock (for notify: the attempt queued behind the BLPOP was refused)\n",
        t.tries / math.max(t.calls, 1), t.waits / math.max(t.calls, 1), t.lost, t.waits)
    else
      printf("    per acquisition: %.2f attempts, %.2f BLPOP waits; %d of %d wakeups lost the race to the\n" ..
        "    releaser re-acquiring at once (the retry failed and the waiter blocked again)\n",
        t.tries / math.max(t.calls, 1), t.waits / math.max(t.calls, 1), t.lost, t.waits)
    end
  end
end

--- data for plots -----------------------------------------------------------------

-- bench/out/handoff-<variant>-x<procs>.dat: the empirical CDF of one row's
-- handoff latencies (bench/plot.gp draws them).
local function write_samples(r)
  local path = ("bench/out/handoff-%s-x%d.dat"):format(r.variant, r.procs)
  local f = assert(io.open(path, "w"))
  f:write(("# bench/handoff.lua: %s, %d processes, %d handoffs; columns: latency ms, fraction <= it\n")
    :format(r.variant, r.procs, #r.samples))
  for i, x in ipairs(r.samples) do f:write(("%.6f %.6f\n"):format(x, i / #r.samples)) end
  f:close()
end

--- main -------------------------------------------------------------------------

local function main()
  local f = io.open("redislock/core.so", "rb")
  if not f then error("redislock/core.so not found: run `make` first (from the repo root)", 0) end
  f:close()
  build_spin_poll()

  local srv = helpers.start_redis()
  local raw = assert(core.connect(url_fields.parse(srv.url)))
  local version = assert(raw:command("INFO", "server")):match("redis_version:([%w%.]+)")
  printf("redis-server %s at %s; %d acquisitions per process, hold %s ms, pause %d ms, ttl %d s\n",
    version or "?", srv.url, ITERATIONS, HOLD_MS, PAUSE_MS, TTL)
  printf("load average before: %s (2 cores here: anything else running skews the numbers)\n\n", loadavg())
  local results = {}
  for _, n in ipairs(PROCS) do
    for _, v in ipairs(VARIANTS) do
      local r = run_variant(v, n, srv, raw)
      results[#results + 1] = r
      write_samples(r)
      printf("  ran %-21s x%d: %d acquisitions in %.2f s, counter %d\n", v.name, n, r.acq, r.wall, r.counter)
    end
  end
  local traced = {}
  for _, v in ipairs(VARIANTS) do
    for _, n in ipairs((v.name == "redislock-notify" or v.name == "redislock-fair-spin") and PROCS or {}) do
      traced[#traced + 1] = run_variant({ name = v.name, kind = "redislock", notify = v.notify, spin = v.spin,
        traced = true }, n, srv, raw)
    end
  end
  local steps = probe(srv, raw)
  raw:close()
  srv:stop()

  printf("\n")
  print_table(results)
  printf("rt/acq and cmds/acq exclude the critical section's GET + SET of the counter (%d per acquisition).\n",
    CS_ROUND_TRIPS)
  print_comparison(results)
  print_details(results)
  printf("\nwhere the time goes: each step alone, one process, no contention, p50 of %d, ms\n", PROBE_N)
  for _, st in ipairs(steps) do printf("  %-62s %s\n", st[1], ms(st[2])) end
  print_traced(traced)
  printf("\nload average after: %s\n", loadavg())
  printf("\ncorrectness: %s\n", #failures == 0 and "every counter equals its acquisitions, no overlapping holds"
    or (#failures .. " failure(s), see above"))
end

local ok, err = xpcall(main, debug.traceback)
helpers.stop_all()
if not ok then
  io.stderr:write(tostring(err), "\n")
  os.exit(1)
end
os.exit(#failures == 0 and 0 or 1)

--[[
bench/renew.lua -- renewing 10,000 held locks: redislock's watchdog against
a raw C loop on hiredis, in one run.

run from the repo root, after `make` (needs ./redislock/core.so):
  lua5.4 bench/renew.lua [N] [TTL] [PERIODS]   (make bench runs it too)

N locks (default 10000), ttl TTL seconds (default 3: a renewal every 1 s),
both sides sending the same script: lua/redislock/scripts/extend.lua, by
EVALSHA, 1 key, token and ttl in ms. Variants, each its own process, one
after the other against one throwaway redis-server (FLUSHALL between them):

  raw-unpipelined  bench/renew_raw.c: one EVALSHA, then its reply, for every
                   key; 5 rounds of all N, run before the watchdog and again
                   after it (figures: the median of both runs' 10 rounds, so
                   that the machine's speed changing meanwhile moves both)
  raw-pipelined    the same in batches of 1,000: append 1,000, read their
                   1,000 replies, next batch; 5 rounds of all N
  watchdog         bench/hold_worker.lua "passes": one client holds N locks
                   (acquire, ttl TTL, watchdog on) and its native thread
                   renews each every TTL/3 s, in pipelines of up to 1,024 it
                   sends without waiting for the previous one's answers

Like for like: both sides renew all N locks as fast as they can when they
are due, and nothing else. For raw a round is timed around its loop. The
watchdog cannot be timed from inside without changing the library, so its
worker samples the watchdog thread's CPU time every 1 ms and cuts its
activity into passes (the thread runs continuously from the first renewal
queued to the last answer applied, then sleeps until the next is due; a
pass ends after 10 ms without the thread running). Reported per variant:

  renewals/s     while renewing: N / a round's wall time (raw: the median
                 of 5 rounds), a pass's renewals / its wall time (watchdog:
                 the median pass of PERIODS periods, default 5)
  x raw-pipel.   that rate over raw-pipelined's (higher is better)
  ms per N       the wall time to renew all N once
  round trips    per N renewals: raw N or N/1,000; watchdog: its pipelines
                 (client:stats().round_trips)
  client us      CPU time per renewal of the renewing code: the raw process
                 (CLOCK_PROCESS_CPUTIME_ID, the median round), the watchdog
                 thread (schedstat, over its passes)
  server us      CPU time per renewal of redis-server's main thread (raw:
                 the median round; watchdog: over its passes)
  passes/period  watchdog only: how many passes the N renewals of a period
                 took (locks acquired more than TTL/6 s apart renew apart)

Placement as in bench/cycle.lua: redis-server pinned to CPU 0, each variant
run with its process on CPU 0 ("same core": the wall time is client plus
server CPU) and then on CPU 1 ("split cores"). Nothing here is a test: the
exit status is non-zero only when a variant fails.
]]
package.path = "./lua/?.lua;./?.lua;" .. package.path
package.cpath = "./?.so;" .. package.cpath

local helpers = require "spec.helpers"
local lib = require "bench.lib"
local core = require "redislock.core"
local url_fields = require "redislock.url"

local N = tonumber(arg and arg[1]) or 10000
local TTL = tonumber(arg and arg[2]) or 3
local PERIODS = tonumber(arg and arg[3]) or 5
local ROUNDS = 5
local BATCH = 1000
local SCRIPT = "lua/redislock/scripts/extend.lua"
local RAW_SRC, RAW_BIN = "bench/renew_raw.c", "bench/out/renew_raw"
local printf, quote = lib.printf, helpers.quote

local failed = false

local fields = lib.fields

-- One run of the raw program: its rounds by kind, or nil and an error.
local function raw_rounds(srv, cpu)
  local cmd = table.concat({ "taskset -c " .. cpu, quote(RAW_BIN), srv.host, srv.port, quote(SCRIPT), N,
    TTL * 1000, ROUNDS, BATCH, srv.pid }, " ")
  local p = helpers.spawn(cmd)
  local code = p:wait(600)
  local out, err = p:stdout(), p:stderr()
  p:stop()
  local by = { unpipelined = {}, pipelined = {} }
  for kind, rest in out:gmatch("round (%a+) ([^\n]+)") do table.insert(by[kind], fields(rest)) end
  if code ~= 0 or #by.pipelined ~= ROUNDS then
    return nil, ("exited %s: %s"):format(tostring(code), err:sub(1, 300))
  end
  return by
end

-- The raw variants over the rounds of every run given (before and after
-- the watchdog's): the median round of each kind.
local function summarize_raw(runs)
  local results = {}
  for _, kind in ipairs({ "unpipelined", "pipelined" }) do
    local rounds = {}
    for _, by in ipairs(runs) do
      for _, r in ipairs(by[kind]) do rounds[#rounds + 1] = r end
    end
    table.sort(rounds, function(a, b) return a.wall_ns < b.wall_ns end)
    local mid = rounds[math.ceil(#rounds / 2)]
    results[#results + 1] = {
      name = "raw-" .. kind,
      rate = mid.n / (mid.wall_ns / 1e9),
      ms = mid.wall_ns / 1e6 * N / mid.n,
      rt = kind == "pipelined" and math.ceil(N / BATCH) or N,
      client_us = mid.cpu_ns / 1000 / mid.n,
      server_us = mid.srv_ns / 1000 / mid.n,
    }
  end
  return results
end

local function run_watchdog(srv, cpu)
  local r, err = lib.watchdog_passes(cpu, srv.url, N, TTL, PERIODS, srv.pid, srv.url)
  if not r then
    failed = true
    return { name = "watchdog", error = err }
  end
  r.name = "watchdog"
  return r
end

local function main()
  local f = io.open("redislock/core.so", "rb")
  if not f then error("redislock/core.so not found: run `make` first (from the repo root)", 0) end
  f:close()
  lib.build_c(RAW_SRC, RAW_BIN)
  local srv = helpers.start_redis()
  local raw = assert(core.connect(url_fields.parse(srv.url)))
  local version = assert(raw:command("INFO", "server")):match("redis_version:([%w%.]+)")
  printf("redis-server %s at %s; renewing %d held locks, ttl %g s (extend.lua by EVALSHA)\n",
    version or "?", srv.url, N, TTL)
  printf("load average before: %s (2 cores here: anything else running skews the numbers)\n\n", lib.loadavg())
  local _, pinned = helpers.sh("taskset -cp 0 " .. srv.pid .. " >/dev/null 2>&1")
  if pinned ~= 0 then error("taskset could not pin redis-server to CPU 0", 0) end
  local placements = { { label = "same core (client and redis-server on CPU 0)", cpu = 0 } }
  if tonumber((helpers.sh("nproc"))) >= 2 then
    placements[2] = { label = "split cores (redis-server on CPU 0, client on CPU 1)", cpu = 1 }
  end
  for _, place in ipairs(placements) do
    -- raw before and after the watchdog, its figures over both runs: a
    -- machine that speeds up or slows down meanwhile moves both sides
    local before, berr = raw_rounds(srv, place.cpu)
    assert(raw:command("FLUSHALL"))
    local wd = run_watchdog(srv, place.cpu)
    assert(raw:command("FLUSHALL"))
    local after, aerr = raw_rounds(srv, place.cpu)
    assert(raw:command("FLUSHALL"))
    if before and after then
      place.results = summarize_raw({ before, after })
    else
      failed = true
      place.results = { { name = "raw", error = berr or aerr } }
    end
    place.results[#place.results + 1] = wd
  end
  raw:close()
  srv:stop()

  for _, place in ipairs(placements) do
    local fmt = "%-16s %11s %12s %10s %11s %10s %10s %13s\n"
    printf("%s\n", place.label)
    printf(fmt, "variant", "renewals/s", "x raw-pipel.", "ms per " .. N, "round trips", "client us", "server us",
      "passes/period")
    local base
    for _, r in ipairs(place.results) do if r.name == "raw-pipelined" and r.rate then base = r end end
    for _, r in ipairs(place.results) do
      if r.error then
        printf("%-16s FAILED: %s\n", r.name, r.error)
      else
        printf(fmt, r.name, string.format("%.0f", r.rate), base and lib.ratio(r.rate, base.rate) or "-",
          string.format("%.1f", r.ms), string.format("%.0f", r.rt), string.format("%.2f", r.client_us),
          string.format("%.2f", r.server_us), r.passes and string.format("%.1f", r.passes) or "")
      end
    end
    printf("\n")
  end
  printf("client us, server us: CPU time per renewal (the raw process / the watchdog thread; redis-server)\n")
  printf("load average after: %s\n", lib.loadavg())
  if failed then os.exit(1) end
end

local ok, err = xpcall(main, debug.traceback)
helpers.stop_all()
if not ok then
  io.stderr:write(tostring(err), "\n")
  os.exit(1)
end

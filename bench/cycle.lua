--[[
bench/cycle.lua -- one uncontended lock cycle (acquire, then release), for
redislock and its peers, against raw hiredis, in one run.

run from the repo root, after `make` (needs ./redislock/core.so):
  lua5.4 bench/cycle.lua [ITERATIONS] [VARIANT...]   (make bench runs it too)

Starts a throwaway redis-server (spec/helpers.lua) and runs, one after the
other, each variant as its own process doing ITERATIONS (default 5000)
cycles on a name nobody else takes:

  raw-hiredis          bench/cycle_raw.c: a fresh 128-bit token, SET NX PX,
                       then a compare-and-delete EVALSHA (loaded before the
                       loop). The least a correct lock can do: 2 round trips,
                       with redislock's per-cycle work (token, EVALSHA) inside
                       the timer.
  redislock            client:acquire(name, {ttl = 10}) + lock:release(),
                       watchdog on (the default): registration and
                       unregistration with the native thread included.
  redislock-nowatchdog the same with watchdog = false.
  redislock-noholder   watchdog on, holder = false: the acquire script
                       records no holder label (the cycle as it was before
                       labels, with today's script): the row above minus
                       this one is what "who holds this lock" costs.
  redislock-nofence    watchdog on, fence = false: the acquire is a plain
                       SET NX PX (no fence drawn, no holder recorded), the
                       release the script.
  redis-py             redis-py's Lock (Debian's python3-redis, run with
                       /usr/bin/python3): acquire(blocking=False) + release().
  node-redlock         node-redlock 4.2.0 on ioredis (bench/peers, installed
                       by `make bench` with npm ci), one instance, retryCount 0:
                       lock() + unlock().
  redislock-tls        redislock, watchdog on, over TLS (rediss://, verified
                       against a CA made for the run): the same server, on
                       its --tls-port (TLS 1.3, P-256 certificate).
  redis-py-tls         redis-py's Lock over TLS (ssl=True, the same CA).

The TLS rows are compared with their plain rows too ("TLS over plain"):
what TLS adds to a cycle, on our side and Redis' (it encrypts too).

BENCH_ROUNDS=N runs every variant N times, interleaved (each round runs
them all in turn), and keeps each variant's round with the lowest p50: on a
machine others load, the least disturbed run of each, taken at about the
same time. A peer that is not installed is skipped with the reason. Each process times
every cycle on a monotonic clock and prints them at the end. Reported per
variant: p50 and p99 of a cycle in microseconds, cycles per second (cycles /
the sum of their times: start-up excluded), round trips per cycle as the
server counts them (bench/lib.lua), the client's CPU time per cycle (its
process, every thread, over the timed loop only; "-" where a peer does not
say), and redis-server's own CPU time per
cycle (its main thread's schedstat over the variant's run, start-up and
connection included), then the ratios to raw-hiredis. CPU times stay put
on a loaded machine where the timings do not: on the same core a cycle is
about the client's CPU plus the server's. Nothing
here is a test: the exit status is non-zero only when a variant fails.

Placement (taskset): redis-server is pinned to CPU 0, and every variant runs
twice, its client pinned to CPU 0 too ("same core": a round trip is two
context switches, so a cycle measures the CPU work of client and server),
then to CPU 1 ("split cores": each round trip wakes an idle CPU, as a
network would add its own latency). Unpinned, the scheduler picks one or the
other per process, and on this 2-vCPU VM the two differ by 5-10x (20-30 us
against 180-200 us per cycle), which made unpinned ratios meaningless.
]]
package.path = "./lua/?.lua;./?.lua;" .. package.path
package.cpath = "./?.so;" .. package.cpath

local helpers = require "spec.helpers"
local lib = require "bench.lib"
local core = require "redislock.core"
local url_fields = require "redislock.url"

local ITERATIONS = tonumber(arg and arg[1]) or 5000
local ROUNDS = math.max(1, tonumber(os.getenv("BENCH_ROUNDS")) or 1)
-- bench/cycle.lua VARIANT...: only those (e.g. redislock redislock-tls)
local ONLY = {}
for i = 2, arg and #arg or 0 do ONLY[arg[i]] = true end
local RAW_SRC, RAW_BIN = "bench/cycle_raw.c", "bench/out/cycle_raw"
local PYTHON = "/usr/bin/python3"   -- Debian's, with python3-redis (not pyenv's)
local printf, quote = lib.printf, helpers.quote

-- Why a peer cannot run here, or nil.
local function python_missing()
  local _, code = helpers.sh(quote(PYTHON) .. " -c 'import redis' 2>&1")
  return code ~= 0 and "python3-redis is not installed (apt-get install python3-redis)" or nil
end

local function node_missing()
  local _, code = helpers.sh("command -v node >/dev/null 2>&1")
  if code ~= 0 then return "node is not installed" end
  local f = io.open("bench/peers/node_modules/redlock/package.json")
  if not f then return "bench/peers/node_modules is missing (cd bench/peers && npm ci)" end
  f:close()
end

-- The TLS variants' certificates: made for the run (spec/support/tls.lua).
local pki

local function tls_missing()
  if not core.tls then return "this redislock.core was built without TLS (make TLS=no)" end
end

local function python_tls_missing()
  return tls_missing() or python_missing()
end

local VARIANTS = {
  { name = "raw-hiredis", cmd = function(srv, key)
      return table.concat({ quote(RAW_BIN), srv.host, srv.port, quote(key), ITERATIONS }, " ")
    end },
  { name = "redislock", cmd = function(srv, key)
      return helpers.lua_cmd("bench/cycle_worker.lua", srv.url, key, ITERATIONS, 1)
    end },
  { name = "redislock-nowatchdog", cmd = function(srv, key)
      return helpers.lua_cmd("bench/cycle_worker.lua", srv.url, key, ITERATIONS, 0)
    end },
  { name = "redislock-noholder", cmd = function(srv, key)
      return helpers.lua_cmd("bench/cycle_worker.lua", srv.url, key, ITERATIONS, 1, 1, 0)
    end },
  { name = "redislock-nofence", cmd = function(srv, key)
      return helpers.lua_cmd("bench/cycle_worker.lua", srv.url, key, ITERATIONS, 1, 0)
    end },
  { name = "redis-py", missing = python_missing, cmd = function(srv, key)
      return table.concat({ quote(PYTHON), "bench/peers/redis_py_cycle.py", srv.host, srv.port, quote(key),
        ITERATIONS }, " ")
    end },
  { name = "node-redlock", missing = node_missing, cmd = function(srv, key)
      return table.concat({ "node", "bench/peers/redlock_cycle.js", srv.host, srv.port, quote(key),
        ITERATIONS }, " ")
    end },
  { name = "redislock-tls", plain = "redislock", missing = tls_missing, cmd = function(srv, key)
      return helpers.lua_cmd("bench/cycle_worker.lua", "rediss://127.0.0.1:" .. srv.tls_port, key, ITERATIONS,
        1, 1, 1, pki.ca)
    end },
  { name = "redis-py-tls", plain = "redis-py", missing = python_tls_missing, cmd = function(srv, key)
      return table.concat({ quote(PYTHON), "bench/peers/redis_py_cycle.py", srv.host, srv.tls_port, quote(key),
        ITERATIONS, quote(pki.ca) }, " ")
    end },
}

local failed = false

local function run(v, srv, raw, cpu)
  local key = "bench:cycle:" .. v.name
  local before = lib.snapshot(raw)
  local srv_ns0 = lib.thread_cpu_ns(srv.pid)
  local p = helpers.spawn("taskset -c " .. cpu .. " " .. v.cmd(srv, key))
  local code = p:wait(300)
  local ns = {}
  for x in p:stdout():gmatch("cycle (%d+)") do ns[#ns + 1] = tonumber(x) end
  local err = p:stderr()
  local cpu_ns = tonumber(p:stdout():match("cpu_ns (%d+)"))
  p:stop()
  if code ~= 0 or #ns ~= ITERATIONS then
    failed = true
    return { name = v.name, error = ("exited %s after %d cycles: %s"):format(tostring(code), #ns, err:sub(1, 300)) }
  end
  if not lib.wait_clients_gone(raw) then failed = true end
  local srv_ns = lib.thread_cpu_ns(srv.pid) - srv_ns0
  local after = lib.snapshot(raw)
  local total = 0
  for _, x in ipairs(ns) do total = total + x end
  table.sort(ns)
  local rt, conns = lib.round_trips(before, after)
  return {
    name = v.name,
    p50 = lib.percentile(ns, 0.50) / 1000,
    p99 = lib.percentile(ns, 0.99) / 1000,
    rate = #ns / (total / 1e9),
    rt = rt / #ns,
    srv_us = srv_ns / 1000 / #ns,
    cli_us = cpu_ns and cpu_ns / 1000 / #ns,
    conns = conns,
  }
end

local function main()
  local f = io.open("redislock/core.so", "rb")
  if not f then error("redislock/core.so not found: run `make` first (from the repo root)", 0) end
  f:close()
  lib.build_c(RAW_SRC, RAW_BIN)
  -- one server for every row: the TLS ones on its --tls-port
  pki = require("spec.support.tls").make()
  local tls_port = helpers.free_port()
  local srv = helpers.start_redis { args = { "--tls-port", tls_port, "--tls-cert-file", pki.server.cert,
    "--tls-key-file", pki.server.key, "--tls-ca-cert-file", pki.ca, "--tls-auth-clients", "no" } }
  srv.tls_port = tls_port
  local raw = assert(core.connect(url_fields.parse(srv.url)))
  local version = assert(raw:command("INFO", "server")):match("redis_version:([%w%.]+)")
  printf("redis-server %s at %s; %d uncontended cycles (acquire + release) per variant%s\n",
    version or "?", srv.url, ITERATIONS, ROUNDS > 1 and (", best of " .. ROUNDS .. " rounds") or "")
  printf("load average before: %s (2 cores here: anything else running skews the numbers)\n\n", lib.loadavg())
  local _, pinned = helpers.sh("taskset -cp 0 " .. srv.pid .. " >/dev/null 2>&1")
  if pinned ~= 0 then error("taskset could not pin redis-server to CPU 0", 0) end
  local placements = { { label = "same core (client and redis-server on CPU 0)", cpu = 0 } }
  if tonumber((helpers.sh("nproc"))) >= 2 then
    placements[2] = { label = "split cores (redis-server on CPU 0, client on CPU 1)", cpu = 1 }
  end
  for _, place in ipairs(placements) do
    place.results = {}
    for _ = 1, ROUNDS do
      for i, v in ipairs(VARIANTS) do
        local why = v.missing and v.missing()
        if next(ONLY) and not ONLY[v.name] then why = "not asked for" end
        local r = why and { name = v.name, skipped = why } or run(v, srv, raw, place.cpu)
        local best = place.results[i]
        if not best or (r.p50 and (not best.p50 or r.p50 < best.p50)) then place.results[i] = r end
      end
    end
  end
  raw:close()
  srv:stop()

  for _, place in ipairs(placements) do
    local fmt = "%-21s %9s %9s %10s %8s %14s %14s\n"
    printf("%s\n", place.label)
    printf(fmt, "variant", "p50 us", "p99 us", "cycles/s", "rt/cycle", "client us/cycle", "server us/cycle")
    local base
    for _, r in ipairs(place.results) do
      if r.skipped then
        printf("%-21s skipped: %s\n", r.name, r.skipped)
      elseif r.error then
        printf("%-21s FAILED: %s\n", r.name, r.error)
      else
        base = base or (r.name == "raw-hiredis" and r)
        printf(fmt, r.name, string.format("%.1f", r.p50), string.format("%.1f", r.p99),
          string.format("%.0f", r.rate), string.format("%.2f", r.rt),
          r.cli_us and string.format("%.1f", r.cli_us) or "-", string.format("%.1f", r.srv_us))
      end
    end
    printf("ratios to raw-hiredis (p50: lower is better; cycles/s: higher is better)\n")
    for _, r in ipairs(place.results) do
      if r.p50 and base and r ~= base then
        printf("  %-21s p50 %s   cycles/s %s\n", r.name, lib.ratio(r.p50, base.p50), lib.ratio(r.rate, base.rate))
      end
    end
    printf("TLS over plain (the TLS row / its plain row: p50, cycles/s, and client + server CPU per cycle)\n")
    for i, v in ipairs(VARIANTS) do
      local r = place.results[i]
      local plain
      for j, w in ipairs(VARIANTS) do
        if w.name == v.plain then plain = place.results[j] end
      end
      if v.plain and r.p50 and plain and plain.p50 then
        local cpu = r.cli_us and plain.cli_us and (r.cli_us + r.srv_us) / (plain.cli_us + plain.srv_us)
        printf("  %-21s p50 %s (%+.1f us)   cycles/s %s   CPU %s\n", r.name, lib.ratio(r.p50, plain.p50),
          r.p50 - plain.p50, lib.ratio(r.rate, plain.rate), cpu and string.format("%.2fx", cpu) or "-")
      end
    end
    printf("\n")
  end
  printf("load average after: %s\n", lib.loadavg())
  if failed then os.exit(1) end
end

main()

--[[
bench/failover_acks.lua -- what the watchdog's WAIT behind each round of
renewals costs (issue 29, csrc/watchdog/wd_ack.c), in one run.

run from the repo root, after `make` (needs ./redislock/core.so):
  lua5.4 bench/failover_acks.lua [N] [TTL] [PERIODS]   (make bench runs it too)

One master with two replicas (diskless sync) and three sentinels watching
it. The same N held locks (default 10000, ttl TTL seconds, default 3) are
renewed by the watchdog of a client that reaches that master two ways, one
after the other (FLUSHALL between them), as bench/hold_worker.lua "passes"
measures (see bench/renew.lua for what a pass is):

  direct     redis://master: one Redis, no WAIT
  sentinel   redis+sentinel://...: the same master through the sentinels;
             its renewals wait for both replicas (one WAIT per pipeline)

The master replicates both the same way; the only difference is the WAIT
(and the follower thread's pass once a second). Reported per variant:
renewals/s while renewing, the ratio to direct, ms to renew all N, round
trips per N, CPU us per renewal of the watchdog thread and of redis-server.
Placement: redis-server pinned to CPU 0, the client on CPU 1 (split cores:
the WAIT's cost is the replica's acknowledgement, a round trip away).
Nothing here is a test: the exit status is non-zero only when a variant fails.
]]
package.path = "./lua/?.lua;./?.lua;" .. package.path
package.cpath = "./?.so;" .. package.cpath

local helpers = require "spec.helpers"
local lib = require "bench.lib"
local topology = require "spec.support.topology"
local failover = require "spec.support.failover"

local N = tonumber(arg and arg[1]) or 10000
local TTL = tonumber(arg and arg[2]) or 3
local PERIODS = tonumber(arg and arg[3]) or 5
local printf = lib.printf

local function main()
  local rep = topology.start_replicated { replicas = 2 }
  local sen = topology.start_sentinels { master = rep.master }
  local master = rep.master
  local _, pinned = helpers.sh("taskset -cp 0 " .. master.pid .. " >/dev/null 2>&1")
  if pinned ~= 0 then error("taskset could not pin redis-server to CPU 0", 0) end
  local cpu = tonumber((helpers.sh("nproc"))) >= 2 and 1 or 0
  printf("renewing %d held locks, ttl %g s, on a master with two replicas; client on CPU %d\n", N, TTL, cpu)
  printf("load average before: %s\n\n", lib.loadavg())
  local variants = {
    { name = "direct", url = master.url },
    { name = "sentinel", url = "redis+sentinel://" .. table.concat(failover.seeds(sen), ",") .. "/mymaster" },
  }
  local failed = false
  for _, v in ipairs(variants) do
    v.r, v.err = lib.watchdog_passes(cpu, v.url, N, TTL, PERIODS, master.pid, master.url)
    failed = failed or not v.r
    assert(master:call("FLUSHALL"))
    topology.wait_replicas_synced(master, rep.replicas, 10)
  end
  local fmt = "%-10s %11s %9s %10s %11s %10s %10s\n"
  printf(fmt, "variant", "renewals/s", "x direct", "ms per " .. N, "round trips", "client us", "server us")
  local base = variants[1].r
  for _, v in ipairs(variants) do
    if not v.r then
      printf("%-10s FAILED: %s\n", v.name, v.err)
    else
      printf(fmt, v.name, string.format("%.0f", v.r.rate), base and lib.ratio(v.r.rate, base.rate) or "-",
        string.format("%.1f", v.r.ms), string.format("%.0f", v.r.rt), string.format("%.2f", v.r.client_us),
        string.format("%.2f", v.r.server_us))
    end
  end
  printf("\nload average after: %s\n", lib.loadavg())
  sen:stop()
  rep:stop()
  if failed then os.exit(1) end
end

local ok, err = xpcall(main, debug.traceback)
helpers.stop_all()
if not ok then
  io.stderr:write(tostring(err), "\n")
  os.exit(1)
end

--[[
bench/redlock.lua -- the latency of Redlock's acquire (and release) over 3
and 5 masters, against a single node, side by side in one run.

run from the repo root, after `make`:  lua5.4 bench/redlock.lua [ITERATIONS]

Starts 5 throwaway redis-servers (spec/helpers.lua) and, in this process,
times ITERATIONS (default 2000) uncontended acquire and release calls of
one name per variant, watchdog off (renewals are measured elsewhere):

  single      redislock.connect{url = one server}
  redlock-3   redislock.connect{redlock = three servers}
  redlock-5   redislock.connect{redlock = five servers}

Prints p50/p99 of acquire and of release in microseconds and the ratios to
single. All servers and the client share this 2-vCPU machine, so a
fan-out to N masters costs N servers' CPU too: read the ratios as an upper
bound of what N separate machines would show.
]]
package.path = "./lua/?.lua;./?.lua;" .. package.path
package.cpath = "./?.so;" .. package.cpath

local helpers = require "spec.helpers"
local redislock = require "redislock"
local core = require "redislock.core"

local ITERATIONS = tonumber(arg and arg[1]) or 2000
local monotime = core.monotime

local function percentile(list, p)
  table.sort(list)
  return list[math.max(1, math.ceil(#list * p))]
end

local function measure(client)
  local acq, rel = {}, {}
  for i = 1, ITERATIONS do
    local t0 = monotime()
    local l = assert(client:acquire("bench:redlock", { ttl = 10, watchdog = false }))
    local t1 = monotime()
    assert(l:release())
    local t2 = monotime()
    acq[i], rel[i] = (t1 - t0) * 1e6, (t2 - t1) * 1e6
  end
  return { acq50 = percentile(acq, 0.5), acq99 = percentile(acq, 0.99),
           rel50 = percentile(rel, 0.5), rel99 = percentile(rel, 0.99) }
end

local servers, urls = {}, {}
for i = 1, 5 do
  servers[i] = helpers.start_redis()
  urls[i] = servers[i].url
end
local variants = {
  { name = "single", opts = { url = urls[1] } },
  { name = "redlock-3", opts = { redlock = { urls[1], urls[2], urls[3] } } },
  { name = "redlock-5", opts = { redlock = urls } },
}
print(string.format("%d uncontended acquire + release per variant, watchdog off; load %s", ITERATIONS,
  (helpers.read_file("/proc/loadavg") or "?"):match("^(%S+ %S+ %S+)")))
print(string.format("%-10s %10s %10s %10s %10s", "variant", "acq p50us", "acq p99us", "rel p50us", "rel p99us"))
local base
for _, v in ipairs(variants) do
  local c = assert(redislock.connect(v.opts))
  measure(c)                               -- warm up (script cache, connections)
  local r = measure(c)
  c:close()
  base = base or r
  print(string.format("%-10s %10.1f %10.1f %10.1f %10.1f   acquire p50 x%.2f", v.name, r.acq50, r.acq99,
    r.rel50, r.rel99, r.acq50 / base.acq50))
end
for _, s in ipairs(servers) do s:stop() end

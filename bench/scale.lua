--[[
bench/scale.lua -- what many clients in one process cost it, and the
sentinels (issue 31, target 3), in one run.

run from the repo root, after `make` (needs ./redislock/core.so):
  lua5.4 bench/scale.lua [CLIENTS]   (default 200; make bench runs it too)

One master with one replica and three sentinels. CLIENTS clients of this
process, configured the same (redis+sentinel://...), each take a lock
(ttl 5 s) and hold it. Reported: the threads of the process (by name: the
renewal thread redislock-wd, the topology's redislock-topo, and the rest),
its connections to each sentinel and to the master, its file descriptors
per client; then SENTINEL FAILOVER, and how many of the locks are still
held and found with their token on the new master once the sentinels
named it and a ttl has passed (every one: each lock followed through it).
Then every client closed, and the threads again (none of ours left).
Nothing here is a test: the exit status is non-zero only when it fails to
run.
]]
package.path = "./lua/?.lua;./?.lua;" .. package.path
package.cpath = "./?.so;" .. package.cpath

local helpers = require "spec.helpers"
local lib = require "bench.lib"
local topology = require "spec.support.topology"
local failover = require "spec.support.failover"
local redislock = require "redislock"
local core = require "redislock.core"

local CLIENTS = tonumber(arg and arg[1]) or 200
local printf = lib.printf
local pid = core.getpid()

-- name -> count, total: the threads of this process.
local function threads()
  local by, total = {}, 0
  local p = io.popen("cat /proc/" .. pid .. "/task/*/comm 2>/dev/null")
  for name in p:lines() do
    by[name] = (by[name] or 0) + 1
    total = total + 1
  end
  p:close()
  return by, total
end

local function show_threads(when)
  local by, total = threads()
  local names = {}
  for name, n in pairs(by) do names[#names + 1] = name .. " " .. n end
  table.sort(names)
  printf("%-28s %3d threads (%s)\n", when, total, table.concat(names, ", "))
  return total
end

local function conns_to(port) return helpers.conns_to(pid, port) end

local function fds()
  local n = 0
  local p = io.popen("ls /proc/" .. pid .. "/fd 2>/dev/null")
  for _ in p:lines() do n = n + 1 end
  p:close()
  return n
end

local function main()
  local rep = topology.start_replicated { replicas = 1 }
  local sen = topology.start_sentinels { master = rep.master }
  local url = "redis+sentinel://" .. table.concat(failover.seeds(sen), ",") .. "/mymaster"
  printf("%d clients of one process, configured the same: %s\n", CLIENTS, url)
  printf("load average before: %s\n\n", lib.loadavg())
  local fds0 = fds()
  local base = show_threads("before any client:")
  local clients, locks = {}, {}
  local t0 = core.monotime()
  for i = 1, CLIENTS do
    clients[i] = assert(redislock.connect { url = url })
    locks[i] = assert(clients[i]:acquire("scale:" .. i, { ttl = 5 }))
  end
  printf("connected and locked in %.2f s\n", core.monotime() - t0)
  local total = show_threads("holding:")
  printf("%-28s %3d (ours: %d)\n", "threads in all:", total, total - base)
  for _, a in ipairs(sen:addrs()) do
    printf("%-28s %3d\n", "connections to :" .. a.port .. ":", conns_to(a.port))
  end
  printf("%-28s %3d (%.2f per client)\n", "connections to the master:", conns_to(rep.master.port),
    conns_to(rep.master.port) / CLIENTS)
  printf("%-28s %3d (%.2f per client)\n", "file descriptors:", fds() - fds0, (fds() - fds0) / CLIENTS)
  local old = sen:master_addr()
  t0 = core.monotime()
  sen:failover()
  sen:wait_master_change(old, 30)
  printf("\nSENTINEL FAILOVER: named in %.2f s\n", core.monotime() - t0)
  helpers.sleep(6)   -- past a ttl: each lock renewed on the new master, or lost
  local master = sen:server_at(nil, select(2, sen:master_addr()), { rep.master, rep.replicas[1] })
  local kept, reasons = 0, {}
  for i = 1, CLIENTS do
    if locks[i]:held() and master:cli_raw("GET", locks[i]._keys.lock) == locks[i].token then
      kept = kept + 1
    else
      local why = tostring(locks[i].lost_reason)
      reasons[why] = (reasons[why] or 0) + 1
    end
  end
  local lost = {}
  for why, n in pairs(reasons) do lost[#lost + 1] = why .. " " .. n end
  printf("%-28s %d of %d%s\n", "held on the new master:", kept, CLIENTS,
    #lost > 0 and " (lost: " .. table.concat(lost, ", ") .. ")" or "")
  for i = 1, CLIENTS do
    locks[i]:release()
    clients[i]:close()
  end
  show_threads("\nevery client closed:")
  sen:stop()
  rep:stop()
end

local ok, err = pcall(main)
if not ok then
  io.stderr:write("bench/scale.lua: " .. tostring(err) .. "\n")
  os.exit(1)
end

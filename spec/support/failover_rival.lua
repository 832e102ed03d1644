-- failover_rival.lua: the rival of the Sentinel failover specs (issue 22;
-- spec/29-sentinel_failover_spec.lua, test/hosts/nginx_topology_spec.lua).
--
-- usage: lua failover_rival.lua SEEDS NAME TTL MODE [INTERVAL]
-- SEEDS: "host:port,host:port,..." of the sentinels watching "mymaster",
-- or a URL ("redis://127.0.0.1:PORT": a rival straight to one node, as a
-- client that already follows the new master would be; issue 29).
-- MODE "keep": one client for the whole run, as a long-running process
-- has (it must follow the failover itself); "fresh": a new client for
-- every attempt, as a process started at that moment has (it asks the
-- sentinels each time).
-- Every INTERVAL seconds (default 0.05): acquire(NAME, {wait = 0, ttl = TTL}); each grant prints
--   grant T0 T1 TOKEN
-- (T0 before the call, T1 right after it returned, both on
-- CLOCK_MONOTONIC, the clock every process of the machine shares) and is
-- released at once. Errors other than busy print "error T MESSAGE", once
-- per change of message. Runs until it is sent SIGTERM.
-- Loadable on Lua 5.1 (the nginx spec runs it on LuaJIT).
local redislock = require "redislock"
local core = require "redislock.core"

local seeds_arg, name, ttl, mode, interval = arg[1], arg[2], tonumber(arg[3]), arg[4], tonumber(arg[5] or 0.05)
local url = seeds_arg:match("^redis") and seeds_arg
local seeds = {}
for s in seeds_arg:gmatch("[^,]+") do seeds[#seeds + 1] = s end
assert(name and ttl and interval and (mode == "keep" or mode == "fresh"),
  "usage: failover_rival.lua SEEDS|URL NAME TTL keep|fresh [INTERVAL]")
io.stdout:setvbuf("line")

local function connect()
  if url then return redislock.connect { url = url, connect_timeout = 1, timeout = 1 } end
  return redislock.connect { sentinels = seeds, master = "mymaster", connect_timeout = 1, timeout = 1 }
end

local last_err
local function report(err)
  err = tostring(err)
  if err ~= last_err then
    io.stdout:write(string.format("error %.6f %s\n", core.monotime(), (err:gsub("\n", " "))))
    last_err = err
  end
end

print(string.format("start %.6f %s", core.monotime(), mode))
local client
while true do
  local err
  if not client then client, err = connect() end
  if client then
    local t0 = core.monotime()
    local lock, kind
    lock, err, kind = client:acquire(name, { wait = 0, ttl = ttl, watchdog = false })
    local t1 = core.monotime()
    if lock then
      io.stdout:write(string.format("grant %.6f %.6f %s\n", t0, t1, lock.token))
      last_err = nil
      lock:release()
    elseif kind ~= "busy" then
      report(err)
    else
      last_err = nil
    end
    if mode == "fresh" then
      client:close()
      client = nil
    end
  else
    report(err)
  end
  core.sleep(interval)
end

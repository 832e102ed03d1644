-- failover_holder.lua: the holder of spec/29-sentinel_failover_spec.lua
-- (issue 22).
--
-- usage: lua failover_holder.lua SEEDS NAME TTL CONTROL
-- SEEDS: "host:port,host:port,..." of the sentinels watching "mymaster".
-- Takes NAME with the watchdog, replicated (replicas = 1: WAIT 1
-- acknowledged the grant), and prints
--   acquired T KEY TOKEN
-- then, every 50 ms,
--   held T 1|0
-- with T on CLOCK_MONOTONIC taken just before held() was called: a lock is
-- never held again once it is not, so a true answer means it was held at T.
-- CONTROL is a file the spec appends commands to, one a line:
--   grant NAME2   take NAME2 on the same client (wait = 0, ttl 10),
--                 tried again each tick on an error (not on busy) for 10 s:
--                 "grant T KEY TOKEN", or "grantfail T ERR" once it gives up
--   stop          release everything, print "released OK|ERR", exit
-- Loadable on Lua 5.1.
local redislock = require "redislock"
local core = require "redislock.core"

local seeds_arg, name, ttl, control = arg[1], arg[2], tonumber(arg[3]), arg[4]
local seeds = {}
for s in seeds_arg:gmatch("[^,]+") do seeds[#seeds + 1] = s end
assert(name and ttl and control, "usage: failover_holder.lua SEEDS NAME TTL CONTROL")
io.stdout:setvbuf("line")

local function say(fmt, ...) io.stdout:write(string.format(fmt, ...), "\n") end

local client = assert(redislock.connect { sentinels = seeds, master = "mymaster", connect_timeout = 1,
  timeout = 1 })
local lock = assert(client:acquire(name, { ttl = ttl, replicas = 1, replicas_timeout = 2 }))
say("acquired %.6f %s %s", core.monotime(), lock._keys.lock, lock.token)

local done = 0          -- control lines already acted on
local pending            -- { name, give_up_at }
local grants = {}

local function commands()
  local f = io.open(control, "r")
  if not f then return {} end
  local list = {}
  for line in f:lines() do list[#list + 1] = line end
  f:close()
  local new = {}
  for i = done + 1, #list do new[#new + 1] = list[i] end
  done = #list
  return new
end

while true do
  local t = core.monotime()
  say("held %.6f %d", t, lock:held() and 1 or 0)
  for _, cmd in ipairs(commands()) do
    local second = cmd:match("^grant (%S+)$")
    if second then
      pending = { second, core.monotime() + 10 }
    elseif cmd == "stop" then
      for _, g in ipairs(grants) do g:release() end
      local ok, err = lock:release()
      say("released %s", ok and "OK" or tostring(err))
      client:close()
      os.exit(0)
    end
  end
  if pending then
    local g, err, kind = client:acquire(pending[1], { ttl = 10, wait = 0 })
    if g then
      grants[#grants + 1] = g
      say("grant %.6f %s %s", core.monotime(), g._keys.lock, g.token)
      pending = nil
    elseif kind == "busy" or core.monotime() > pending[2] then
      say("grantfail %.6f %s", core.monotime(), (tostring(err):gsub("\n", " ")))
      pending = nil
    end
  end
  core.sleep(0.05)
end

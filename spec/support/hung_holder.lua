-- hung_holder.lua: the holder of spec/35-sentinel_hung_spec.lua (issue 29).
--
-- usage: lua hung_holder.lua URL NAME TTL REPLICAS
-- Connects with URL (redis+sentinel://...), connect_timeout = 1 and
-- timeout = 1, takes NAME with the watchdog (ttl TTL, replicas REPLICAS),
-- and prints
--   acquired T KEY TOKEN
-- then, every 10 ms,
--   held T 1|0
-- (T on CLOCK_MONOTONIC, taken just before held() was called), and once
--   lost T REASON
-- when on_lost reports it. Runs until SIGTERM. Loadable on Lua 5.1.
local redislock = require "redislock"
local core = require "redislock.core"

local url, name, ttl, replicas = arg[1], arg[2], tonumber(arg[3]), tonumber(arg[4])
assert(url and name and ttl and replicas, "usage: hung_holder.lua URL NAME TTL REPLICAS")
io.stdout:setvbuf("line")

local function say(fmt, ...) io.stdout:write(string.format(fmt, ...), "\n") end

local client = assert(redislock.connect { url = url, connect_timeout = 1, timeout = 1 })
local lock = assert(client:acquire(name, { ttl = ttl, replicas = replicas, replicas_timeout = 2,
  on_lost = function(_, reason) say("lost %.6f %s", core.monotime(), tostring(reason)) end }))
say("acquired %.6f %s %s", core.monotime(), lock._keys.lock, lock.token)
while true do
  local t = core.monotime()
  say("held %.6f %d", t, lock:held() and 1 or 0)
  client:poll()
  core.sleep(0.01)
end

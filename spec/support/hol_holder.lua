-- hol_holder.lua: two clients of one process, for spec/50-renewal_thread_spec.lua. B (one node, a
-- short ttl) holds a lock; A (Sentinel, its follower thread unable to start:
-- the spec gives this process room for one more thread only) holds another.
-- Prints "ready", then watches B's lock for `secs` seconds and says when it
-- was lost, if it was.
-- usage: lua hol_holder.lua SEEDS(comma-separated) B_URL SECS
local redislock = require "redislock"
local core = require "redislock.core"
local seeds, burl, secs = arg[1], arg[2], tonumber(arg[3])
local function say(fmt, ...) io.stdout:write(string.format(fmt, ...), "\n") io.stdout:flush() end
local function threads(name)
  local n = 0
  local p = io.popen("cat /proc/" .. core.getpid() .. "/task/*/comm 2>/dev/null")
  for line in p:lines() do if line == name then n = n + 1 end end
  p:close()
  return n
end
local list = {}
for s in seeds:gmatch("[^,]+") do list[#list + 1] = s end
local b = assert(redislock.connect { url = burl })
local lost
local bl = assert(b:acquire("hol-b", { ttl = 1, on_lost = function(_, why) lost = why end }))
local a = assert(redislock.connect { sentinels = list, master = "mymaster", connect_timeout = 3, timeout = 1 })
local al = assert(a:acquire("hol-a", { ttl = 6 }))
say("threads wd=%d topo=%d", threads("redislock-wd"), threads("redislock-topo"))
say("ready")
local t0 = core.monotime()
while core.monotime() - t0 < secs do
  if not bl:held() then
    say("b lost after %.2f s: %s", core.monotime() - t0, tostring(lost or bl.lost_reason))
    break
  end
  core.sleep(0.02)
end
say("done a=%s b=%s", tostring(al:held()), tostring(bl:held()))
os.exit(0, true)

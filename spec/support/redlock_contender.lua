-- redlock_contender.lua: one process of spec 20's "restarts under
-- contention" case (SAFETY.md, "Redlock restarts under contention").
--
-- usage: lua redlock_contender.lua ROLE URLS NAME TTL UNTIL
--   ROLE   holder or rival
--   URLS   the masters' urls, comma-separated
--   UNTIL  monotonic seconds (CLOCK_MONOTONIC, shared by every process of
--          the machine) at which the loop ends
--
-- holder: takes NAME (with the watchdog), prints "held <t>", then polls
-- held() every 2 ms until UNTIL. held() is final once false, so two times
-- tell its whole history: it prints "last_true <t>" (the last poll that saw
-- it held) and, if it saw it lost, "lost <t> <reason>" (the first poll that
-- did not), then releases.
-- rival: loops acquire(NAME, {wait = 0}) without a pause until UNTIL,
-- printing "grant <t_start> <t_got>" for each lock it gets (t_start before
-- the call, t_got after it returned) and releasing it at once; at the end
-- "attempts <n> errors <n>" (world failures: a master restarting).
-- Lines are flushed as written: a checker reads them even from a process
-- that had to be killed.
local redislock = require "redislock"
local core = require "redislock.core"

local role, urls, name, ttl, stop_at = arg[1], arg[2], arg[3], tonumber(arg[4]), tonumber(arg[5])
assert(role == "holder" or role == "rival", "usage: redlock_contender.lua holder|rival URLS NAME TTL UNTIL")
local masters = {}
for u in urls:gmatch("[^,]+") do masters[#masters + 1] = u end

local function say(...)
  io.stdout:write(table.concat({ ... }, " "), "\n")
  io.stdout:flush()
end

local function stamp(t) return string.format("%.6f", t) end

local client = assert(redislock.connect { redlock = masters, timeout = 1 })

if role == "holder" then
  local lock = assert(client:acquire(name, { ttl = ttl, wait = 5 }))
  say("held", stamp(core.monotime()))
  local last_true
  while core.monotime() < stop_at do
    local t = core.monotime()
    if not lock:held() then
      say("lost", stamp(t), (tostring(lock.lost_reason):gsub(" ", "_")))
      break
    end
    last_true = t
    core.sleep(0.002)
  end
  say("last_true", stamp(last_true or 0))
  lock:release()
else
  local attempts, errors = 0, 0
  while core.monotime() < stop_at do
    local t_start = core.monotime()
    local ok, l, _, kind = pcall(client.acquire, client, name, { ttl = ttl, wait = 0, watchdog = false })
    local t_got = core.monotime()
    attempts = attempts + 1
    if ok and l then
      say("grant", stamp(t_start), stamp(t_got))
      pcall(l.release, l)
    elseif not ok or kind ~= "busy" then
      errors = errors + 1
    end
  end
  say("attempts", attempts, "errors", errors)
end
client:close()

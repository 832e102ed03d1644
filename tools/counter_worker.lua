-- counter_worker.lua: one process of the torture spec and of `make demo`.
--
-- usage: lua counter_worker.lua URL NAME ITERATIONS [COUNTER_KEY [START_AT]]
-- Loops ITERATIONS times: take the lock NAME, do a deliberately non-atomic
-- GET / add one in Lua / SET of COUNTER_KEY, release. Prints one line per
-- critical section: "hold <t_acquired> <t_released> <fence>" with times on
-- the system-wide monotonic clock, so a checker can look for overlaps across
-- processes. START_AT (seconds on CLOCK_MONOTONIC, which all processes of
-- the machine share) lines the workers up so they really contend.
-- Exits non-zero on any failure.
local redislock = require "redislock"
local core = require "redislock.core"

local url, name, iterations, counter = arg[1], arg[2], tonumber(arg[3]), arg[4] or "counter"
local start_at = tonumber(arg[5])
local client = assert(redislock.connect { url = url })
local raw = assert(core.connect(require("redislock.url").parse(url)))
if start_at and start_at > core.monotime() then core.sleep(start_at - core.monotime()) end

local out = {}
for _ = 1, iterations do
  local lock = assert(client:acquire(name, { ttl = 10, wait = 60 }))
  local t_acquired = core.monotime()
  local value, err = raw:command("GET", counter)   -- false when unset
  assert(value ~= nil, err)
  value = (value and tonumber(value) or 0) + 1
  assert(raw:command("SET", counter, value))
  local t_released = core.monotime()
  assert(lock:release())
  out[#out + 1] = string.format("hold %.9f %.9f %d", t_acquired, t_released, lock.fence)
end
io.stdout:write(table.concat(out, "\n"), "\n")
client:close()
raw:close()

-- counter_worker.lua: one process of the torture spec, the waiting specs,
-- `make demo` and bench/handoff.
--
-- usage: lua counter_worker.lua URL NAME ITERATIONS [COUNTER [START_AT
--            [HOLD_MS [PAUSE_MS [NOTIFY [TTL [SPIN_MS]]]]]]]
-- Loops ITERATIONS times: take the lock NAME (waiting as long as needed),
-- do a deliberately non-atomic GET / add one in Lua / SET of COUNTER, stay
-- HOLD_MS more in the critical section (LO-HI: drawn from that range),
-- release, then pause PAUSE_MS outside it. Prints one line per critical
-- section:
--   hold <t_acquired> <t_released> <fence>
-- with times on CLOCK_MONOTONIC, which all processes of the machine share,
-- so a checker can look for overlaps and measure handoffs across processes.
-- t_released is taken just before release is sent. START_AT (monotonic
-- seconds) lines the workers up so they really contend. NOTIFY "0" waits by
-- polling instead of release notifications, "fair" waits in line (fair =
-- true). SPIN_MS > 0 is acquire's spin option (poll for the wakeup this
-- long before sleeping); 0 or none: no spin; "default": the library's
-- default (adaptive). Exits non-zero on any failure.
local redislock = require "redislock"
local core = require "redislock.core"

local url, name, iterations = arg[1], arg[2], tonumber(arg[3])
local counter = arg[4] or "counter"
local start_at = tonumber(arg[5])
-- HOLD_MS: a number, or a range LO-HI to draw each hold from uniformly
local hold_lo, hold_hi = (arg[6] or "0"):match("^([%d.]+)%-([%d.]+)$")
hold_lo = (tonumber(hold_lo or arg[6]) or 0) / 1000
hold_hi = (tonumber(hold_hi) or hold_lo * 1000) / 1000
math.randomseed(core.getpid())
local pause = (tonumber(arg[7]) or 0) / 1000
local notify = arg[8] ~= "0"
local fair = arg[8] == "fair"
local ttl = tonumber(arg[9]) or 10
local spin = arg[10] ~= "default" and (tonumber(arg[10]) or 0) / 1000 or nil

local client = assert(redislock.connect { url = url })
local raw = assert(core.connect(require("redislock.url").parse(url)))
if start_at and start_at > core.monotime() then core.sleep(start_at - core.monotime()) end

local out = {}
for _ = 1, iterations do
  local lock = assert(client:acquire(name, { ttl = ttl, wait = 120, notify = notify, fair = fair,
    spin = spin }))
  local t_acquired = core.monotime()
  local value, err = raw:command("GET", counter)   -- false when unset
  assert(value ~= nil, err)
  value = (value and tonumber(value) or 0) + 1
  assert(raw:command("SET", counter, value))
  local hold = hold_lo + (hold_hi - hold_lo) * math.random()
  if hold > 0 then core.sleep(hold) end
  local t_released = core.monotime()
  assert(lock:release())
  out[#out + 1] = string.format("hold %.9f %.9f %d", t_acquired, t_released, lock.fence)
  if pause > 0 then core.sleep(pause) end
end
io.stdout:write(table.concat(out, "\n"), "\n")
client:close()
raw:close()

-- demo.lua: `make demo`. Several worker processes fight over one lock that
-- guards a deliberately non-atomic counter (GET, add one in Lua, SET).
-- Without the lock the count comes out short; with it, it is exact.
--
-- Uses REDISLOCK_URL when set; otherwise starts a throwaway redis-server on
-- a free loopback port (spec/helpers.lua) and stops it at the end.
package.path = "./lua/?.lua;./?.lua;" .. package.path
package.cpath = "./?.so;" .. package.cpath

local helpers = require "spec.helpers"
local core = require "redislock.core"
local url_fields = require "redislock.url"

local WORKERS, ITERATIONS = 4, 250
local NAME = "demo:counter-lock"
local COUNTER = "demo:counter"

local srv
local url = os.getenv("REDISLOCK_URL")
if not url or url == "" then
  srv = helpers.start_redis()
  url = srv.url
  print("started a throwaway redis-server at " .. url)
else
  print("using REDISLOCK_URL")
end

local raw = assert(core.connect(url_fields.parse(url)))
raw:command("DEL", COUNTER)

print(string.format("%d workers x %d increments of %s under the lock %q\n",
  WORKERS, ITERATIONS, COUNTER, NAME))
local start_at = core.monotime() + 0.5 -- all workers begin together
local procs = {}
for i = 1, WORKERS do
  procs[i] = helpers.spawn(helpers.lua_cmd("tools/counter_worker.lua", url, NAME, ITERATIONS, COUNTER,
    string.format("%.6f", start_at)))
end
local t0 = start_at

local holds = {}
for i, p in ipairs(procs) do
  local code = p:wait(300)
  if code ~= 0 then
    io.stderr:write("worker ", i, " failed: ", p:stderr(), "\n")
    os.exit(1)
  end
  local first, last, count = nil, nil, 0
  for a, b, fence in p:stdout():gmatch("hold (%S+) (%S+) (%d+)") do
    fence = tonumber(fence)
    holds[#holds + 1] = { t0 = tonumber(a), t1 = tonumber(b), fence = fence, worker = i }
    first = first or fence
    last = fence
    count = count + 1
  end
  print(string.format("worker %d (pid %d): held the lock %d times, fences %d .. %d",
    i, p.pid, count, first or 0, last or 0))
end
local elapsed = core.monotime() - t0

table.sort(holds, function(x, y) return x.fence < y.fence end)
local timeline, overlaps = {}, 0
for i, h in ipairs(holds) do
  if i <= 16 then timeline[#timeline + 1] = string.format("w%d#%d", h.worker, h.fence) end
  if i > 1 and h.t0 < holds[i - 1].t1 then overlaps = overlaps + 1 end
end
print("\nfirst grants in fence order: " .. table.concat(timeline, " ") .. " ...")

local final = tonumber(raw:command("GET", COUNTER))
local expected = WORKERS * ITERATIONS
print(string.format("\nfinal count %d, expected %d: %s", final, expected,
  final == expected and "exact" or "WRONG"))
print(string.format("overlapping holds: %d; %d critical sections in %.2f s (%.0f/s)",
  overlaps, #holds, elapsed, #holds / elapsed))

-- Part two: the same guard from the shell. Two "hosts" fire the same cron
-- job at the same moment through `redislock run`; one runs it, the other
-- skips (exit 1). Then with --wait the second runs after the first.
local function run_guard(host, wait, out_file)
  local lua = helpers.lua_bin
  return helpers.spawn(string.format(
    "REDISLOCK_URL=%s HOST=%s %s bin/redislock run --ttl 2 --wait %s nightly-report -- " ..
    "sh -c 'echo \"$HOST runs the nightly report (fence $REDISLOCK_FENCE)\" >> %s; sleep 0.3'",
    helpers.quote(url), host, helpers.quote(lua), wait, out_file))
end

local ok_guard = true
print("\n`redislock run` from two hosts, cron firing at the same moment:")
local log = helpers.tmpdir() .. "/jobs.log"
for round = 1, 3 do
  local a, b = run_guard("host-a", 0, log), run_guard("host-b", 0, log)
  local ca, cb = a:wait(30), b:wait(30)
  print(string.format("  round %d: host-a exit %d, host-b exit %d", round, ca, cb))
  if not ((ca == 0 and cb == 1) or (ca == 1 and cb == 0)) then ok_guard = false end
end
print("  with --wait 5 both run, one after the other:")
local a, b = run_guard("host-a", 5, log), run_guard("host-b", 5, log)
local ca, cb = a:wait(30), b:wait(30)
print(string.format("  host-a exit %d, host-b exit %d", ca, cb))
if ca ~= 0 or cb ~= 0 then ok_guard = false end
local f = assert(io.open(log))
for line in f:lines() do print("  job log: " .. line) end
f:close()

raw:close()
if srv then srv:stop() end
os.exit(final == expected and overlaps == 0 and ok_guard and 0 or 1)

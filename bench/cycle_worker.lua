-- cycle_worker.lua: redislock's side of bench/cycle.lua. One uncontended
-- lock cycle per iteration: client:acquire(KEY, {ttl = 10, watchdog = ...})
-- then lock:release(), timed on core.monotime.
--
-- usage: lua cycle_worker.lua URL NAME ITERATIONS WATCHDOG(1|0) [FENCE(1|0)
--          [HOLDER(1|0) [CA]]]   (HOLDER 0: holder = false, no holder label
--          recorded; CA: for a rediss:// URL, the CA file to verify it with)
-- Prints one line "cycle <ns>" per iteration, at the end. Exits non-zero on
-- any failure (an acquire refused: the name is ours alone).
local redislock = require "redislock"
local core = require "redislock.core"

local url, name, iterations, watchdog = arg[1], arg[2], tonumber(arg[3]), arg[4] ~= "0"
local fence = arg[5] ~= "0"
local holder = arg[6] ~= "0"
local client = assert(redislock.connect { url = url, tls = arg[7] and { ca = arg[7] } or nil })
local monotime = core.monotime
local opts = { ttl = 10, watchdog = watchdog }
if not fence then opts.fence = false end
if not holder then opts.holder = false end
local ns = {}
local cpu0 = os.clock()   -- process CPU time: every thread, the watchdog's too
for i = 1, iterations do
  local t0 = monotime()
  local lock = assert(client:acquire(name, opts))
  assert(lock:release())
  ns[i] = string.format("cycle %.0f", (monotime() - t0) * 1e9)
end
local cpu = os.clock() - cpu0
io.stdout:write(table.concat(ns, "\n"), "\n", string.format("cpu_ns %.0f\n", cpu * 1e9))
client:close()

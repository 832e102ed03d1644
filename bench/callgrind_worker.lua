-- callgrind_worker.lua: redislock's side of bench/callgrind.lua. N
-- uncontended cycles, client:acquire(NAME, {ttl = 10, watchdog = ...}) then
-- lock:release(), and nothing else per cycle: no clock, no output (so that
-- the instructions of a run, minus those of a shorter run, are the cycles').
--
-- usage: lua callgrind_worker.lua URL NAME N WATCHDOG(1|0)
-- Prints "done N"; exits non-zero on any failure.
local redislock = require "redislock"

local url, name, n, watchdog = arg[1], arg[2], tonumber(arg[3]), arg[4] ~= "0"
local client = assert(redislock.connect { url = url })
local opts = { ttl = 10, watchdog = watchdog }
for _ = 1, n do
  local lock = assert(client:acquire(name, opts))
  assert(lock:release())
end
client:close()
io.stdout:write("done ", n, "\n")

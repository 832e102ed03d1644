-- callgrind_worker.lua: redislock's side of bench/callgrind.lua. N
-- uncontended cycles, client:acquire(NAME, {ttl = 10, watchdog = ...}) then
-- lock:release(), and nothing else per cycle: no clock, no output (so that
-- the instructions of a run, minus those of a shorter run, are the cycles').
--
-- usage: lua callgrind_worker.lua URL NAME N WATCHDOG(1|0|nofence|noholder) [vm]
-- ("nofence": the watchdog on, fence = false; "noholder": the watchdog on,
-- holder = false)
-- Prints "done N"; exits non-zero on any failure.
--
-- With "vm": after 10 untimed cycles, a count hook on every Lua VM
-- instruction attributes the N cycles' bytecode to the Lua function running
-- it, and one line per function is printed before "done":
--   vm <instructions per cycle> <source>:<line defined> <name>
-- (the Lua half of where luaV_execute's time goes; C functions called from
-- Lua run no VM instructions and do not appear).
local redislock = require "redislock"

local url, name, n, watchdog, vm = arg[1], arg[2], tonumber(arg[3]), arg[4] ~= "0", arg[5] == "vm"
local client = assert(redislock.connect { url = url })
local opts = { ttl = 10, watchdog = watchdog }
if arg[4] == "nofence" then opts.fence = false end
if arg[4] == "noholder" then opts.holder = false end

local function cycles(k)
  for _ = 1, k do
    local lock = assert(client:acquire(name, opts))
    assert(lock:release())
  end
end

if vm then
  cycles(10)
  local getinfo, counts, names = debug.getinfo, {}, {}
  debug.sethook(function()
    local info = getinfo(2, "S")
    local key = info.short_src .. ":" .. info.linedefined
    counts[key] = (counts[key] or 0) + 1
    if not names[key] then
      local i = getinfo(2, "n")
      names[key] = i and i.name or "?"
    end
  end, "", 1)
  cycles(n)
  debug.sethook()
  local list = {}
  for key, c in pairs(counts) do list[#list + 1] = { key, c } end
  table.sort(list, function(a, b) return a[2] > b[2] end)
  for _, e in ipairs(list) do io.stdout:write(("vm %.1f %s %s\n"):format(e[2] / n, e[1], names[e[1]])) end
else
  cycles(n)
end
client:close()
io.stdout:write("done ", n, "\n")

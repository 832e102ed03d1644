-- share_worker.lua: one process of the primitives' torture specs.
--
-- usage: lua share_worker.lua URL KIND NAME ITERATIONS START_AT HOLD_MS [PERMITS]
-- KIND: "reentrant" (enter the lock twice, nested, each time), "rw" (a
-- read share or the write side, drawn at random, one in four a write),
-- "reads" (read shares only), "semaphore" (one permit of PERMITS). Inside each hold it does a
-- deliberately non-atomic GET / add one / SET of the key "count:<KIND>"
-- when it holds exclusively (reentrant, writer), stays HOLD_MS (LO-HI:
-- drawn from that range), releases. Prints one line per hold:
--   hold <t_acquired> <t_released> <r|w|x> <fence or 0>
-- on CLOCK_MONOTONIC, which all processes of the machine share, so the
-- checker can look for holds that overlap when they must not.
local redislock = require "redislock"
local core = require "redislock.core"

local url, kind, name, iterations = arg[1], arg[2], arg[3], tonumber(arg[4])
local start_at = tonumber(arg[5])
local hold_lo, hold_hi = (arg[6] or "0"):match("^([%d.]+)%-([%d.]+)$")
hold_lo = (tonumber(hold_lo or arg[6]) or 0) / 1000
hold_hi = (tonumber(hold_hi) or hold_lo * 1000) / 1000
local permits = tonumber(arg[7] or "1")
math.randomseed(core.getpid())

local client = assert(redislock.connect { url = url })
local raw = assert(core.connect(require("redislock.url").parse(url)))
local counter = "count:" .. kind
local rw = client:rwlock(name)
local sem = kind == "semaphore" and assert(client:semaphore(name, permits))
if start_at and start_at > core.monotime() then core.sleep(start_at - core.monotime()) end

local function bump()
  local value, err = raw:command("GET", counter)   -- false when unset
  assert(value ~= nil, err)
  assert(raw:command("SET", counter, (value and tonumber(value) or 0) + 1))
end

local function stay()
  local hold = hold_lo + (hold_hi - hold_lo) * math.random()
  if hold > 0 then core.sleep(hold) end
end

local opts = { ttl = 10, wait = 120 }
local out = {}
for _ = 1, iterations do
  local t_acquired, t_released, mark, fence
  if kind == "reentrant" then
    local outer = assert(client:acquire(name, { ttl = 10, wait = 120, reentrant = true }))
    t_acquired = core.monotime()
    local inner = assert(client:acquire(name, { ttl = 10, wait = 0, reentrant = true }))
    assert(inner.fence == outer.fence, "an inner entry has the grant's fence")
    bump()
    assert(inner:release())
    assert(outer:held())
    stay()
    t_released = core.monotime()
    assert(outer:release())
    mark, fence = "x", outer.fence
  elseif kind == "rw" or kind == "reads" then
    local write = kind == "rw" and math.random(4) == 1
    local l = assert(write and rw:write(opts) or rw:read(opts))
    t_acquired = core.monotime()
    if write then bump() end
    stay()
    t_released = core.monotime()
    assert(l:release())
    mark, fence = write and "w" or "r", l.fence or 0
  else
    local p = assert(sem:acquire(opts))
    t_acquired = core.monotime()
    stay()
    t_released = core.monotime()
    assert(p:release())
    mark, fence = "x", 0
  end
  out[#out + 1] = string.format("hold %.9f %.9f %s %d", t_acquired, t_released, mark, fence)
end
io.stdout:write(table.concat(out, "\n"), "\n")
client:close()
raw:close()

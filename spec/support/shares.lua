-- Support for the primitives' specs (reentrant, rwlock, semaphore): the
-- multi-process torture (tools/share_worker.lua) and its checkers, and a
-- holder process to crash.
local helpers = require "spec.helpers"
local core = require "redislock.core"

local M = {}

--- Runs `procs` workers of tools/share_worker.lua over `kind` and returns
-- their holds { {t0, t1, mark, fence}, ... }; raises if one failed.
function M.torture(url, kind, name, procs, iterations, hold_ms, permits)
  local start_at = string.format("%.6f", core.monotime() + 0.5)
  local ps = {}
  for i = 1, procs do
    ps[i] = helpers.spawn(helpers.lua_cmd("tools/share_worker.lua", url, kind, name, iterations,
      start_at, hold_ms, permits or 1))
  end
  local holds = {}
  for i, p in ipairs(ps) do
    local code = p:wait(180)
    assert(code == 0, "worker " .. i .. " exited " .. tostring(code) .. ": " .. p:stderr())
    for t0, t1, mark, fence in p:stdout():gmatch("hold (%S+) (%S+) (%a) (%d+)") do
      holds[#holds + 1] = { tonumber(t0), tonumber(t1), mark, tonumber(fence) }
    end
    p:stop()
  end
  return holds
end

--- The most holds in progress at once, over holds whose mark is in
-- `marks` (all when nil); a hold ending at t and one starting at t do not
-- overlap.
function M.max_concurrent(holds, marks)
  local events = {}
  for _, h in ipairs(holds) do
    if not marks or marks[h[3]] then
      events[#events + 1] = { h[1], 1 }
      events[#events + 1] = { h[2], -1 }
    end
  end
  table.sort(events, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]   -- ends before starts at the same instant
  end)
  local n, most = 0, 0
  for _, e in ipairs(events) do
    n = n + e[2]
    if n > most then most = n end
  end
  return most
end

--- The first pair of holds that overlap although one of them is marked
-- exclusive ("w" or "x"), as a message; nil when there is none.
function M.exclusive_overlap(holds)
  table.sort(holds, function(a, b) return a[1] < b[1] end)
  for i, h in ipairs(holds) do
    for j = i + 1, #holds do
      local o = holds[j]
      if o[1] >= h[2] then break end          -- starts after h ended
      if h[3] ~= "r" or o[3] ~= "r" then
        return string.format("%s hold [%.6f, %.6f] overlaps %s hold [%.6f, %.6f]",
          h[3], h[1], h[2], o[3], o[1], o[2])
      end
    end
  end
  return nil
end

--- A process that runs `code` (with `c`, a client on `url`, in scope; it
-- must keep what it takes in globals), prints "held", and sleeps: to be
-- killed with SIGKILL, a crashed holder.
function M.holder(url, code)
  local p = helpers.spawn(helpers.lua_cmd(([[
    local redislock = require "redislock"
    c = assert(redislock.connect { url = %q })
    %s
    io.stdout:write("held\n") io.stdout:flush()
    require("redislock.core").sleep(120)
  ]]):format(url, code)))
  assert(helpers.wait_until(function() return p:stdout():find("held") end, 10),
    "holder did not start: " .. p:stderr())
  return p
end

return M

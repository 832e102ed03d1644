--- redislock.losses: delivering the watchdog's loss reports to Lua.
--
-- The thread never touches Lua: it queues reports and makes client:fd()
-- readable. They are delivered here, on the Lua side, inside a library call
-- or client:poll(): the lock is marked lost and its on_lost runs through
-- one protected caller that keeps the error with its traceback.

local _M = {}

local traceback = debug.traceback

--- Calls fn(...) protected; on error, keeps "message + traceback" in
-- client.callback_error and returns false.
function _M.call(client, fn, ...)
  local args = { n = select("#", ...), ... }
  local ok, err = xpcall(function()
    return fn((table.unpack or unpack)(args, 1, args.n)) -- luacheck: ignore 143
  end, function(e) return traceback(tostring(e), 2) end)
  if not ok then client.callback_error = err end
  return ok
end

--- Delivers pending reports: marks those locks lost, calls on_lost once
-- per lock. Returns how many losses were delivered.
function _M.deliver(client, reports, locks)
  local n = 0
  local function lose(lock, reason)
    lock:_lose(reason)
    if lock._state == "lost" and not lock._reported then
      lock._reported = true
      n = n + 1
      if lock._on_lost then _M.call(client, lock._on_lost, lock, lock.lost_reason) end
    end
  end
  for i = 1, #reports, 2 do
    local target = locks[reports[i]]
    if target and target.holds then
      -- a reentrant lock's group: every hold in this client is lost
      for _, lock in ipairs(target:holds()) do lose(lock, reports[i + 1]) end
    elseif target then
      lose(target, reports[i + 1])
    end
  end
  return n
end

return _M

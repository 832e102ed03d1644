--- redislock.losses: delivering the watchdog's loss reports to Lua.
--
-- The thread never touches Lua: it queues reports and makes client:fd()
-- readable. They are delivered here, on the Lua side, inside a library call
-- or client:poll(): every reported lock is marked lost first (held() is
-- false for all of them at once), then each on_lost runs through one
-- protected caller that keeps the error with its traceback.
--
-- Callbacks wait in a queue of the client's and each is taken off before
-- it runs. A callback may yield (it runs in the caller's coroutine), and
-- the coroutine may never be resumed: the reports after it stay queued and
-- the next library call delivers them. A batch is never lost half-way.

local _M = {}

local traceback = debug.traceback
local remove = table.remove
local unpack = table.unpack or unpack -- luacheck: ignore 143

--- Calls fn(...) protected; on error, keeps "message + traceback" in
-- client.callback_error and returns false.
function _M.call(client, fn, ...)
  local args = { n = select("#", ...), ... }
  local ok, err = xpcall(function()
    return fn(unpack(args, 1, args.n))
  end, function(e) return traceback(tostring(e), 2) end)
  if not ok then client.callback_error = err end
  return ok
end

--- Runs the queued calls of client[field] (a list of { fn =, n =, args...
-- }, nil when empty), first in first out, each taken off before it runs.
function _M.drain(client, field)
  local q = client[field]
  while q do
    local entry = remove(q, 1)
    if not entry then
      if client[field] == q then client[field] = nil end
      return
    end
    _M.call(client, entry.fn, unpack(entry, 1, entry.n))
    q = client[field]
  end
end

--- Adds fn(...) to the queue client[field].
function _M.queue(client, field, fn, ...)
  local q = client[field]
  if not q then
    q = {}
    client[field] = q
  end
  q[#q + 1] = { fn = fn, n = select("#", ...), ... }
end

--- Delivers pending reports (nil: none new; queued callbacks still run):
-- marks those locks lost, then calls on_lost once per lock. Returns how
-- many locks were marked lost.
function _M.deliver(client, reports, locks)
  local n = 0
  if reports then
    -- events emitted while marking (on_event's "lost") wait too, so that
    -- a callback that yields cannot stop the marking half-way
    client._defer_events = true
    local function lose(lock, reason)
      lock:_lose(reason)
      if lock._state == "lost" and not lock._reported then
        lock._reported = true
        n = n + 1
        if lock._on_lost then _M.queue(client, "_lost_queue", lock._on_lost, lock, lock.lost_reason) end
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
    client._defer_events = nil
  end
  if client._event_queue then _M.drain(client, "_event_queue") end
  if client._lost_queue then _M.drain(client, "_lost_queue") end
  return n
end

return _M

--- redislock.events: structured events for redislock.connect{on_event = fn}.
--
-- fn(event, fields) runs on the Lua side only, inside a library call or
-- client:poll(), through losses.call: an error it raises is caught and
-- kept, with its traceback, in client.callback_error, and never breaks
-- the call. Events wait in a queue, so one that yields never loses the
-- others (losses.lua). Events from the C side (the watchdog's renewal failures and
-- reconnects, the main connections' reconnects, topology changes) are
-- queued in C and taken here at the next call (client:events()).
--
-- fields never carries a token or a password: locks are named by name and
-- fence, nodes by address. Without on_event no event table is built.
--
--   acquired         name, waited, ttl, fence, attempts
--   busy             name
--   timeout          name, waited, attempts
--   released         name, held, ttl, fence
--   lost             name, reason, held (nil if not taken by acquire), ttl, fence
--   renewal_failed   name, lease_left, ttl, fence
--   reconnect        node, attempts, connection ("client" or "watchdog")
--   topology_changed mode, epoch, changes, nodes, master (Sentinel)

local losses = require "redislock.losses"

local _M = {}

--- Calls the client's on_event(event, fields), protected, through the
-- client's queue of events (losses.queue): a callback that yields and is
-- never resumed leaves the events after it queued for the next call.
function _M.emit(client, event, fields)
  losses.queue(client, "_event_queue", client._on_event, event, fields)
  if not client._defer_events then losses.drain(client, "_event_queue") end
end
local emit = _M.emit

--- Delivers the C side's pending events (ch: the client's channel), all
-- queued before the first callback runs. A renewal failure of a lock
-- already released is dropped: its lease no longer matters to anyone.
function _M.deliver(client, ch)
  local list = ch:events()
  if not list then return end
  local locks = client._locks
  client._defer_events = true
  for i = 1, #list do
    local f = list[i]
    local event = f.event
    f.event = nil
    local ok = true
    if f.id ~= nil then
      local lock = locks[f.id]
      f.id = nil
      ok = lock ~= nil and lock._state == "held"
      if ok then f.name, f.fence, f.ttl = lock.name, lock.fence, lock.ttl end
    end
    if ok then emit(client, event, f) end
  end
  client._defer_events = nil
  losses.drain(client, "_event_queue")
end

return _M

--[[
bench/traced_worker.lua -- tools/counter_worker.lua, unchanged, with timestamps
inside acquire and release, for the "where the time goes" section of
bench/handoff.lua.

usage: the same arguments as tools/counter_worker.lua (run through
helpers.lua_cmd, so that ./lua and ./?.so come first on the paths).

Wraps, in this process only, methods of the worker's client (by name and with
any arguments, so the wrappers do not depend on signatures), of its C
connection (block, wait_try, watch, and script for the acquire scripts), of
the watch handle (unwatch) and of the lock (release).
For every client:acquire call it records
  woke   when the call's last BLPOP wait (the channel's block, or its
         wait_try) returned (0 if the call never waited)
  try0   when its last attempt (its acquire script, conn:script) was sent: the
         winning one (for an attempt queued behind a BLPOP by wait_try, when
         that BLPOP was sent)
  try1   when that script's answer came back
  w0 w1  when the watchdog registration (conn:watch) after it started / returned
  waits  how many BLPOP waits the call made, tries how many attempts
and for every lock:release call
  r0     when release was called, u0 u1 when its unwatch started / returned,
  r1     when release returned (after the release script's round trip).
When the client is closed (the worker's last step) it writes to stderr, in
call order (the k-th line of each kind belongs to the worker's k-th hold):
  trace <woke> <try0> <w0> <w1> <try1> <waits> <tries>
  rtrace <r0> <u0> <u1> <r1>
A method that does not exist (the library renamed it) is not wrapped and its
stamps read 0; the worker runs as usual either way.
]]
local redislock = require "redislock"
local core = require "redislock.core"

local monotime = core.monotime
local connect = redislock.connect

-- Replaces tbl[method] by a wrapper calling before(...) and after(results...).
local function wrap(tbl, method, before, after)
  local orig = type(tbl) == "table" and tbl[method]
  if type(orig) ~= "function" then return end
  tbl[method] = function(...)
    if before then before(...) end
    local r = table.pack(orig(...))
    if after then after(table.unpack(r, 1, r.n)) end
    return table.unpack(r, 1, r.n)
  end
end

-- The shared methods table of a userdata (its metatable's __index).
local function methods(ud)
  local mt = getmetatable(ud)
  return type(mt) == "table" and type(mt.__index) == "table" and mt.__index or nil
end

redislock.connect = function(...)
  local client, err = connect(...)
  if not client then return nil, err end
  local traces, rtraces = {}, {}
  local cur, rel = {}, {}
  local watch_wrapped, lock_wrapped = false, false

  -- The first lock shows us the watch handle's and the lock's methods. It
  -- comes from acquire, whether an attempt or a fair hand-over (a grant
  -- after a BLPOP) produced it.
  local function wrap_lock(lock)
    if type(lock) ~= "table" then return end
    if not watch_wrapped and lock._watch then
      watch_wrapped = true
      wrap(methods(lock._watch), "unwatch", function() rel.u0 = monotime() end,
        function() rel.u1 = monotime() end)
    end
    if not lock_wrapped then
      lock_wrapped = true
      wrap(getmetatable(lock), "release", function()
        rel = { r0 = monotime(), u0 = 0, u1 = 0 }
      end, function()
        rtraces[#rtraces + 1] = string.format("rtrace %.9f %.9f %.9f %.9f", rel.r0, rel.u0, rel.u1,
          monotime())
      end)
    end
  end

  wrap(client, "acquire", function()
    cur = { woke = 0, try0 = 0, w0 = 0, w1 = 0, try1 = 0, waits = 0, tries = 0 }
  end, function(lock)
    traces[#traces + 1] = string.format("trace %.9f %.9f %.9f %.9f %.9f %d %d", cur.woke, cur.try0,
      cur.w0, cur.w1, cur.try1, cur.waits, cur.tries)
    wrap_lock(lock)
  end)
  wrap(methods(client._conn), "block", nil, function()
    cur.woke = monotime()
    cur.waits = cur.waits + 1
  end)
  -- A wait with the next attempt queued behind it (channel wait_try): when
  -- the attempt ran, it was sent with the BLPOP and answered with it.
  local wait_sent = 0
  wrap(methods(client._conn), "wait_try", function() wait_sent = monotime() end, function(sent, _, reply)
    if not sent then return end
    cur.woke = monotime()
    cur.waits = cur.waits + 1
    if type(reply) == "table" then
      cur.try0, cur.try1 = wait_sent, cur.woke
      cur.tries = cur.tries + 1
    end
  end)
  wrap(methods(client._conn), "watch", function() cur.w0 = monotime() end,
    function() cur.w1 = monotime() end)
  -- An attempt is its acquire script (the engine calls its kind's attempt
  -- directly, not through the client, so the channel is where one can be
  -- seen).
  local attempt_scripts = { acquire = true, acquire_fair = true, acquire_reentrant = true }
  local conn_methods = methods(client._conn)
  local script = conn_methods.script
  conn_methods.script = function(ch, name, ...)
    if not attempt_scripts[name] then return script(ch, name, ...) end
    cur.try0 = monotime()
    cur.tries = cur.tries + 1
    return (function(...)
      cur.try1 = monotime()
      return ...
    end)(script(ch, name, ...))
  end
  wrap(client, "close", function()
    local out = {}
    for _, l in ipairs(traces) do out[#out + 1] = l end
    for _, l in ipairs(rtraces) do out[#out + 1] = l end
    if #out > 0 then io.stderr:write(table.concat(out, "\n"), "\n") end
    traces, rtraces = {}, {}
  end)
  return client
end

-- The worker reads the global `arg`, which is ours: same arguments.
dofile("tools/counter_worker.lua")

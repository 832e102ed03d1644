--- redislock.native: the channel over the C core's connections (any Lua
-- host; calls block the calling thread). See redislock.channel for the
-- contract. The main connection runs scripts and commands; waiting for a
-- release blocks on a second connection of its own, made at the first
-- wait, so a BLPOP never holds up the main one (and the watchdog has its
-- own anyway).

local core = require "redislock.core"

local _M = {}

local Native = {}
Native.__index = Native

--- Opens the main connection, checked at once (within connect_timeout): a
-- wrong address or password, or a server that does not answer, fails here.
-- syntax: ch, err, kind = native.open(cfg)
function _M.open(cfg)
  local main_cfg = {}
  for k, v in pairs(cfg) do main_cfg[k] = v end
  main_cfg.probe = true  -- also read INFO memory (the eviction check)
  local main, err, kind = core.connect(main_cfg)
  if not main then return nil, err, kind end
  return setmetatable({ _main = main, _wait = nil }, Native)
end

function Native:script(...) return self._main:script(...) end
function Native:command(...) return self._main:command(...) end
function Native:replicas(n, timeout) return self._main:replicas(n, timeout) end

--- BLPOP key for up to `seconds` on the wait connection. Returns the
-- popped value, false when the time passed without one, or nil, err, kind.
-- Redis checks blocking timeouts only at its hz (every 100 ms by default),
-- so a BLPOP may return well after its timeout: with exact = true our own
-- deadline, a hair after it, ends the wait (the connection is dropped, the
-- server forgets the BLPOP with it, the next wait reconnects); otherwise
-- Redis ends it and the connection is kept. spin: see conn_spin (conn.c).
function Native:block(key, seconds, exact, spin)
  local conn = self._wait
  if not conn then
    -- the same topology (one node, the Sentinel's master, the Cluster's
    -- map), connections of its own
    conn = self._main:wait_client()
    self._wait = conn
  end
  conn:set_timeout(seconds + (exact and 0.005 or 0.25))
  conn:set_spin(spin or 0)
  local r, err, kind = conn:command("BLPOP", key, string.format("%.3f", seconds))
  if r == nil then return nil, err, kind end
  return r and r[2] or false
end

Native.sleep = function(_, seconds) core.sleep(seconds) end

function Native:watch(...) return self._main:watch(...) end
function Native:losses() return self._main:losses() end
function Native:fd() return self._main:fd() end
function Native:stats() return self._main:stats() end
function Native:events() return self._main:events() end
function Native:server_info() return self._main:server_info() end

function Native:close()
  self._main:close()
  if self._wait then self._wait:close() end
  return true
end

function Native:closed() return self._main:closed() end
function Native:__tostring() return tostring(self._main) end

return _M

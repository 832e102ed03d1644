--- redislock.native: the channel over the C core's connections (any Lua
-- host; calls block the calling thread). See redislock.channel for the
-- contract.
--
-- The channel is the C client itself: it implements the contract's
-- methods (script, command, replicas, watch, losses, fd, stats, events,
-- server_info, closed), so the hot path calls C with no Lua layer between.
-- This file adds to the C clients' method table the ones it does in Lua:
-- block (waiting for a release blocks on a second connection of its own,
-- made at the first wait, so a BLPOP never holds up the main one; the
-- watchdog has its own anyway), wait_try (the same wait with the next
-- attempt queued behind it), sleep, wait_next and waited (a WAIT after a
-- script), and a close that closes that wait connection too.

local core = require "redislock.core"

local _M = {}

local waits = setmetatable({}, { __mode = "k" })   -- client -> its wait connection
local wait_next = setmetatable({}, { __mode = "k" })   -- client -> { n, timeout } (wait_next)

--- BLPOP key for up to `seconds` on the wait connection. Returns the
-- popped value, false when the time passed without one, or nil, err, kind.
-- Redis checks blocking timeouts only at its hz (every 100 ms by default),
-- so a BLPOP may return well after its timeout: with exact = true our own
-- deadline, a hair after it, ends the wait (the connection is dropped, the
-- server forgets the BLPOP with it, the next wait reconnects); otherwise
-- Redis ends it and the connection is kept. spin: see conn_spin (conn_wait.c).
local function block(self, key, seconds, exact, spin)
  local conn = waits[self]
  if not conn then
    -- the same topology (one node, the Sentinel's master, the Cluster's
    -- map), connections of its own
    local err, kind
    conn, err, kind = self:wait_client()
    if not conn then return nil, err, kind end
    waits[self] = conn
  end
  conn:set_timeout(seconds + (exact and 0.002 or 0.25))
  conn:set_spin(spin or 0)
  local r, err, kind = conn:command("BLPOP", key, string.format("%.3f", seconds))
  if r == nil then return nil, err, kind end
  return r and r[2] or false
end

--- BLPOP key for up to `seconds` on the wait connection, with the script
-- `name` queued behind it in the same write: Redis runs it the moment the
-- BLPOP returns (see csrc/topo/route_wait.c). `seconds` must end well before the
-- caller's deadline: Redis, not our clock, ends this wait. Returns what
-- redislock.channel's wait_try says (client_wait.c blpop_script), or false
-- when there is no wait connection yet (a client's first wait is an
-- ordinary one, which makes it).
local function wait_try(self, key, seconds, spin, name, ...)
  local conn = waits[self]
  if not conn then return false end
  conn:set_timeout(seconds + 0.25)
  conn:set_spin(spin or 0)
  return conn:blpop_script(key, string.format("%.3f", seconds), name, ...)
end

local function sleep(_, seconds) core.sleep(seconds) end

--- The next script's write is to be acknowledged by `n` replicas within
-- `timeout` seconds: waited() asks (WAIT on the connection of the last
-- script, the one that wrote).
local function set_wait_next(self, n, timeout) wait_next[self] = { n, timeout } end

local function waited(self)
  local w = wait_next[self]
  wait_next[self] = nil
  if not w then return nil, "redis error: no WAIT was asked for", "redis" end
  return self:replicas(w[1], w[2])
end

-- Installs block, sleep and close in the C clients' method table, once.
local installed = false
local function install(client)
  if installed then return end
  local methods = getmetatable(client).__index
  local c_close = methods.close
  methods.block = block
  methods.wait_try = wait_try
  methods.sleep = sleep
  methods.wait_next = set_wait_next
  methods.waited = waited
  methods.close = function(self)
    local w = waits[self]
    if w then
      waits[self] = nil
      w:close()
    end
    return c_close(self)
  end
  -- The wait connection, if one was made: a test hook, only in the
  -- specs' build of the core (core.testing).
  if core.testing then methods.wait_connection = function(self) return waits[self] end end
  installed = true
end

--- Opens the main connection, checked at once (within connect_timeout): a
-- wrong address or password, or a server that does not answer, fails here.
-- syntax: ch, err, kind = native.open(cfg)
function _M.open(cfg)
  local main_cfg = {}
  for k, v in pairs(cfg) do main_cfg[k] = v end
  main_cfg.probe = true  -- also read INFO memory (the eviction check)
  local main, err, kind = core.connect(main_cfg)
  if not main then return nil, err, kind end
  install(main)
  return main
end

return _M

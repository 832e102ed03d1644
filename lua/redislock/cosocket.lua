--[[
redislock.cosocket: the transport for nginx with its Lua module (OpenResty).

Behind redislock.connect{..., transport = "cosocket"}. Every command goes
through lua-resty-redis on an nginx cosocket, so a call that waits (a BLPOP
for a release, a round trip) yields to the event loop instead of blocking the
worker. It offers the methods lua/redislock.lua uses on a native connection:
script, command, set_timeout, set_spin, watch, losses, fd, stats, close.

- Scripts: the very text and SHA1 the C core embeds (core.scripts), EVALSHA
  first and EVAL on NOSCRIPT, as the native transport does.
- Connections: cosockets cannot outlive the request or timer that made them,
  so each call takes one from nginx's pool (AUTH and SELECT only on a new
  one) and puts it back after; a connection that failed or timed out is
  closed instead, since a late reply may still be on its way. The pool is
  our own per address, database and user (the password hashed into its
  name), never shared with other code's connections to the same address.
- Renewals: the native watchdog thread, on a C client that never opens its
  own connection (core.connect{lazy = true}); the thread connects itself and
  never touches the event loop or a Lua state.
- Numbers are written by the core's rule (core.number_arg), every digit of
  an integer: lua-resty-redis uses tostring, which makes a 16-digit fence
  "1.7953298305222e+15" on LuaJIT.
- Errors read as the native ones do: "connection failed: ...", "connection
  lost: timed out (...)", "redis error: ...". Passwords never appear.

Cosockets work in rewrite, access and content handlers and in timers; not in
init, set, header or body filters, or log handlers.
]]
local core = require "redislock.core"

local unpack = table.unpack or unpack -- luacheck: ignore 143

local _M = {}

-- OpenResty ships it as resty.redis; Debian's lua-nginx-redis as nginx.redis.
local function load_redis()
  for _, name in ipairs({ "resty.redis", "nginx.redis" }) do
    local ok, mod = pcall(require, name)
    if ok then return mod end
  end
end

local FOREVER_MS = 2 ^ 31 - 1       -- timeout = 0: no timeout (about 24 days)
local POOL_SIZE = 32                -- idle connections kept per worker
local POOL_IDLE_MS = 60000

local Transport = {}
Transport.__index = Transport

local function where(cfg)
  if cfg.path then return cfg.path end
  local host = cfg.host or "127.0.0.1"
  if host:find(":", 1, true) then host = "[" .. host .. "]" end
  return host .. ":" .. (cfg.port or 6379)
end

local function ms(seconds, default)
  if seconds == nil then seconds = default end
  if seconds == 0 then return FOREVER_MS end
  return math.max(1, math.floor(seconds * 1000 + 0.5))
end

--- A transport for `cfg` (the fields of redislock.connect after URL parsing).
-- native: the C client that hosts the watchdog, or nil (a wait connection).
-- Returns nil, err outside nginx or without lua-resty-redis.
function _M.new(cfg, native)
  if not (ngx and ngx.socket and ngx.socket.tcp) then
    return nil, "transport 'cosocket' needs nginx with its Lua module (ngx.socket.tcp)"
  end
  local redis = load_redis()
  if not redis then
    return nil, "transport 'cosocket' needs lua-resty-redis (resty.redis)"
  end
  local id = table.concat({ where(cfg), cfg.db or 0, cfg.username or "",
    cfg.password and ngx.md5(cfg.password) or "" }, "|")
  return setmetatable({
    _redis = redis,
    _cfg = cfg,
    _native = native,
    _where = where(cfg),
    _pool = "redislock|" .. id,
    _connect_ms = ms(cfg.connect_timeout, 2),
    _timeout_ms = ms(cfg.timeout, 2),
    _closed = false,
  }, Transport)
end

function Transport:_check()
  if self._closed then error("attempt to use a closed redislock client", 3) end
end

-- Every argument as the string Redis gets: numbers with all their digits.
local function to_strings(n, ...)
  local out = {}
  for i = 1, n do
    local v = select(i, ...)
    local t = type(v)
    if t == "number" then
      if v ~= v or v == math.huge or v == -math.huge then
        error("bad argument #" .. i .. " (finite number expected)", 4)
      end
      v = core.number_arg(v)   -- the native transport's rule
    elseif t ~= "string" then
      error("bad argument #" .. i .. " (string or number expected, got " .. t .. ")", 4)
    end
    out[i] = v
  end
  return out
end

-- Replies as the native client gives them: nil replies become false.
local null = ngx and ngx.null
local function convert(v)
  if v == null then return false end
  if type(v) == "table" then
    if v[1] == false and type(v[2]) == "string" and #v == 2 then return v[2] end -- a nested error
    for i = 1, #v do v[i] = convert(v[i]) end
  end
  return v
end

function Transport:_lost(err)
  return "connection lost: " .. (err == "timeout" and "timed out" or tostring(err)) .. " (" .. self._where .. ")"
end

-- A connection from the pool, authenticated and on the right database.
-- timeout_ms: this call's command timeout, read before anything yields (the
-- transport is shared by the requests of a worker).
function Transport:_get(timeout_ms)
  local red = self._redis:new()
  red:set_timeout(self._connect_ms)
  local cfg = self._cfg
  -- A pool of our own per address, database and user: nginx pools by
  -- address alone by default, and a connection that other code left on
  -- another database or user would put our keys there (two holders).
  local opts = { pool = self._pool }
  local ok, err
  if cfg.path then
    ok, err = red:connect("unix:" .. cfg.path, opts)
  else
    ok, err = red:connect(cfg.host or "127.0.0.1", cfg.port or 6379, opts)
  end
  if not ok then
    err = err == "timeout" and "timed out" or tostring(err)
    return nil, "connection failed: " .. err .. " (" .. self._where .. ")"
  end
  red:set_timeout(timeout_ms)
  if (red:get_reused_times() or 0) == 0 then
    local setup = {}
    if cfg.password then
      setup[#setup + 1] = cfg.username and { "auth", cfg.username, cfg.password } or { "auth", cfg.password }
    end
    if cfg.db and cfg.db > 0 then setup[#setup + 1] = { "select", string.format("%d", cfg.db) } end
    for _, c in ipairs(setup) do
      local res, serr = red[c[1]](red, unpack(c, 2))
      if not res then
        red:close()
        if res == false then return nil, "redis error: " .. tostring(serr) end
        return nil, self:_lost(serr)
      end
    end
  end
  return red
end

-- Runs fn(red) on a pooled connection; the result as the native client's.
function Transport:_call(fn)
  local red, err = self:_get(self._timeout_ms)
  if not red then return nil, err end
  local ok, res, rerr = pcall(fn, red)
  if not ok then
    red:close()
    error(res, 0)
  end
  if res == nil then
    red:close()
    return nil, self:_lost(rerr)
  end
  red:set_keepalive(POOL_IDLE_MS, POOL_SIZE)
  if res == false then return nil, "redis error: " .. tostring(rerr) end
  return convert(res)
end

--- One of the embedded scripts: EVALSHA, EVAL on NOSCRIPT.
function Transport:script(name, ...)
  self:_check()
  local s = type(name) == "string" and core.scripts[name]
  if not s then error("bad argument #1 to 'script' (no such script)", 2) end
  local n = select("#", ...)
  if n < s.keys then error(("script '%s' takes %d keys, got %d arguments"):format(name, s.keys, n), 2) end
  local args = to_strings(n, ...)
  return self:_call(function(red)
    local res, err = red:evalsha(s.sha, s.keys, unpack(args, 1, n))
    if res == false and type(err) == "string" and err:find("^NOSCRIPT") then
      res, err = red:eval(s.source, s.keys, unpack(args, 1, n))
    end
    return res, err
  end)
end

-- A BLPOP that ends at the call's timeout without a socket timeout: nginx
-- logs every cosocket read timeout as an [error], and a wait that runs out
-- is no error. Redis ends a BLPOP only at its hz (up to 100 ms late), so a
-- light thread sleeps to the deadline; if it wakes first, the read is
-- killed (the connection goes with it) and the call times out as before.
local function blpop_until(red, timeout_ms, args, n)
  red:set_timeout(math.min(timeout_ms + 1000, FOREVER_MS))  -- Redis answers or the sleeper wins first
  local reader = ngx.thread.spawn(function() return "reply", red:blpop(unpack(args, 1, n)) end)
  local sleeper = ngx.thread.spawn(function() ngx.sleep(timeout_ms / 1000) return "deadline" end)
  local ok, what, res, err = ngx.thread.wait(reader, sleeper)
  if not ok then
    ngx.thread.kill(reader)
    ngx.thread.kill(sleeper)
    error(what, 0)
  end
  if what == "reply" then
    ngx.thread.kill(sleeper)
    return res, err
  end
  ngx.thread.kill(reader)
  return nil, "timeout"
end

--- Any command, as the native client's command.
function Transport:command(name, ...)
  self:_check()
  if type(name) ~= "string" then error("bad argument #1 to 'command' (string expected)", 2) end
  local n = select("#", ...)
  local args = to_strings(n, ...)
  local method = name:lower()
  if method == "blpop" then
    local timeout_ms = self._timeout_ms
    return self:_call(function(red) return blpop_until(red, timeout_ms, args, n) end)
  end
  return self:_call(function(red) return red[method](red, unpack(args, 1, n)) end)
end

--- The per-command timeout from now on, seconds (0: none).
function Transport:set_timeout(seconds)
  self._timeout_ms = ms(seconds)
end

--- No spinning here: a cosocket wait costs the worker nothing, and nginx
-- wakes it when the reply comes.
function Transport.set_spin() end

-- The watchdog side lives on the native client.
function Transport:watch(...) self:_check() return self._native:watch(...) end
function Transport:losses() if self._native then return self._native:losses() end end
function Transport:fd() self:_check() return self._native:fd() end
function Transport:stats() return self._native:stats() end

function Transport:close()
  if not self._closed then
    self._closed = true
    if self._native then self._native:close() end
  end
  return true
end

function Transport:closed() return self._closed end

function Transport:__tostring()
  return "redislock.client (cosocket, " .. self._where .. (self._closed and ", closed)" or ")")
end

return _M

--[[
redislock.cosocket: the transport for nginx with its Lua module (OpenResty).

Behind redislock.connect{..., transport = "cosocket"}. open(cfg) returns a
channel (redislock.channel's contract, the same the native transport
implements) whose requests travel on nginx cosockets, so a call that waits
(a BLPOP for a release, a round trip) yields to the event loop instead of
blocking the worker.

Every request is the C core's request machine (csrc/exec/exec.h, driven by
client:request, csrc/binding/client_request.c), the very one the native
transport and the watchdog run: it picks the node (a Cluster's map, which
it asks the nodes for itself; a Sentinel's confirmed master, from the
follower thread), writes the bytes (the native command, EVALSHA, SCRIPT
LOAD + EVAL after NOSCRIPT, ASKING), reads every reply and says what it
means (MOVED, ASK, READONLY, TRYAGAIN, LOADING, a lost reply, a doubt cast
while it ran). This file only moves the bytes: it connects where it is
told, sends what it is handed, hands back what it reads, and sleeps when
told to.

- Connections: cosockets cannot outlive the request or timer that made them,
  so each request takes one from nginx's pool (the handshake, AUTH and
  SELECT, only on a new one) and puts it back after when every reply it was
  sent for came; one that failed or timed out is closed instead, since a
  late reply may still be on its way. The pool is our own per address,
  database and user (the password hashed into its name), never shared with
  other code's connections to the same address.
- Renewals: the native watchdog thread, on a C client that never opens its
  own connection (core.connect{lazy = true}); the thread connects itself and
  never touches the event loop or a Lua state.
- Errors read as the native ones do: "connection failed: ...", "connection
  lost: timed out (...)", "redis error: ...". Passwords never appear.
- TLS (cfg.tls, from rediss:// or tls = {...}): sslhandshake on every new
  connection, with the server name (tls.server_name, else the host) and
  verification unless tls.verify = false; the CAs are nginx's
  (lua_ssl_trusted_certificate: docs/tls.md), tls.ca being the watchdog
  thread's. A client certificate (tls.cert, tls.key) is read once, when the
  transport is made, and shown with setclientcert (lua-resty-core).

Cosockets work in rewrite, access and content handlers and in timers; not in
init, set, header or body filters, or log handlers.
]]
local core = require "redislock.core"

local monotime = core.monotime

local _M = {}

local FOREVER_MS = 2 ^ 31 - 1       -- timeout = 0: no timeout (about 24 days)
-- idle connections kept per worker and pool: fewer than the requests at
-- once, and the ones beyond reconnect (lua-resty-redis' README keeps 100)
local POOL_SIZE = 100
local POOL_IDLE_MS = 60000
local READ_CHUNK = 65536

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

local function read_file(path, what)
  local f, err = io.open(path, "rb")
  if not f then return nil, what .. ": cannot read " .. path .. " (" .. tostring(err) .. ")" end
  local text = f:read("*a")
  f:close()
  return text
end

-- cfg.tls as the handshakes use it: { name, verify, cert, key, pool },
-- the certificate and key parsed (ngx.ssl); nil, err when they cannot be.
-- Errors name the file, never what is in it.
local function tls_setup(t)
  local out = { name = t.server_name, verify = t.verify ~= false }
  out.pool = "tls:" .. (t.server_name or "") .. (out.verify and "" or ":insecure")
  if t.cert then
    local ok, ssl = pcall(require, "ngx.ssl")
    if not ok then return nil, "tls.cert needs lua-resty-core's ngx.ssl" end
    local pem, err = read_file(t.cert, "tls.cert")
    if not pem then return nil, err end
    out.cert = ssl.parse_pem_cert(pem)
    if not out.cert then return nil, "tls.cert: cannot load " .. t.cert end
    pem, err = read_file(t.key, "tls.key")
    if not pem then return nil, err end
    out.key = ssl.parse_pem_priv_key(pem)
    if not out.key then return nil, "tls.key: cannot load " .. t.key .. " (not an unencrypted PEM key)" end
    out.pool = out.pool .. ":" .. ngx.md5(t.cert)
  end
  return out
end

-- nginx's words for a refused handshake, in the native transport's where
-- they say the same ("18: self-signed certificate": X509_V_ERR_* first).
local function tls_why(err, name)
  local code = tonumber(tostring(err):match("^(%d+):"))
  if code == 10 then return "the server's certificate has expired" end
  if code == 2 or code == 18 or code == 19 or code == 20 or code == 21 or code == 27 then
    return "the server's certificate is from an unknown CA (" .. err:gsub("^%d+: ", "") .. ")"
  end
  if tostring(err):find("host mismatch", 1, true) or code == 62 or code == 64 then
    return "the server's certificate is not for " .. tostring(name) .. " (wrong name)"
  end
  return tostring(err)
end

--- A transport for `cfg` (the fields of redislock.connect after URL
-- parsing) over `native`, the C client whose topology routes its requests
-- and which hosts the watchdog. nil, err outside nginx.
function _M.new(cfg, native)
  if not (ngx and ngx.socket and ngx.socket.tcp) then
    return nil, "transport 'cosocket' needs nginx with its Lua module (ngx.socket.tcp)"
  end
  local tls, terr
  if cfg.tls then
    tls, terr = tls_setup(cfg.tls)
    if not tls then return nil, "connection failed: " .. terr end
  end
  local mode = cfg.mode or "single"
  return setmetatable({
    _tls = tls,
    _cfg = cfg,
    _native = native,
    _mode = mode,
    _where = where(cfg),
    _connect_ms = ms(cfg.connect_timeout, 2),
    _timeout = cfg.timeout or 2,
    _timeout_ms = ms(cfg.timeout, 2),
    -- a pool of our own per address, database and user: nginx pools by
    -- address alone by default, and a connection that other code left on
    -- another database or user would put our keys there (two holders)
    _pool_tail = table.concat({ mode == "cluster" and 0 or cfg.db or 0, cfg.username or "",
      cfg.password and ngx.md5(cfg.password) or "", tls and tls.pool or "" }, "|"),
    _closed = false,
    _noscript = 0,             -- NOSCRIPT reloads (stats: noscript_reloads)
  }, Transport)
end

function Transport:_check()
  if self._closed then error("attempt to use a closed redislock client", 3) end
end

-- A socket to host:port (port nil: a unix socket path), from the pool or
-- new (fresh: true), TLS set up. nil, err (nginx's words, or "tls: ...")
-- when it could not be made.
function Transport:_socket(host, port)
  local sock = ngx.socket.tcp()
  sock:settimeout(self._connect_ms)
  local addr = port and where({ host = host, port = port }) or host
  local opts = { pool = "redislock|" .. addr .. "|" .. self._pool_tail }
  local ok, err
  if port then
    ok, err = sock:connect(host, port, opts)
  else
    ok, err = sock:connect("unix:" .. host, opts)
  end
  if not ok then return nil, err end
  local fresh = (sock:getreusedtimes() or 0) == 0
  local tls = self._tls
  if tls and fresh then
    -- within connect's timeout, as the native handshake
    local name = tls.name or host
    if tls.cert then
      if not sock.setclientcert then
        sock:close()
        return nil, "tls.cert needs setclientcert (lua-resty-core 0.1.23 or later)"
      end
      assert(sock:setclientcert(tls.cert, tls.key))
    end
    ok, err = sock:sslhandshake(false, name, tls.verify)
    -- nginx 1.22's Lua module (0.10.23) may answer true for a handshake
    -- whose certificate it refused and whose socket it closed (it checks
    -- the certificate after OpenSSL's handshake, and that path can miss
    -- the report: its error log has the reason). A closed socket after a
    -- handshake is a refusal, never a connection to use.
    if ok and sock.getoption and not sock:getoption("keepalive") then
      ok, err = nil, "certificate refused (nginx's error log says why)"
    end
    if not ok then
      sock:close()
      return nil, err == "timeout" and "tls handshake timed out" or "tls: " .. tls_why(err, name)
    end
  end
  return sock, fresh
end

-- Reads what came on sock; with `by` (core.monotime's clock), the read ends
-- then whatever the socket's timeout: a BLPOP that ends at the caller's
-- deadline. nginx logs every cosocket read timeout as an [error], and a
-- wait that runs out is no error; Redis ends a BLPOP only at its hz (up to
-- 100 ms late), so a light thread sleeps to the deadline, and if it wakes
-- first the read is killed (the socket goes with it) and the call times out.
local function receive(sock, by)
  if not by then return sock:receiveany(READ_CHUNK) end
  local left = by - monotime()
  if left <= 0 then return nil, "timeout" end
  sock:settimeout(math.min(math.floor(left * 1000) + 1000, FOREVER_MS))   -- the sleeper wins first
  local reader = ngx.thread.spawn(function() return "data", sock:receiveany(READ_CHUNK) end)
  local sleeper = ngx.thread.spawn(function() ngx.sleep(left) return "deadline" end)
  local ok, what, data, err = ngx.thread.wait(reader, sleeper)
  if not ok then
    ngx.thread.kill(reader)
    ngx.thread.kill(sleeper)
    error(what, 0)
  end
  if what == "data" then
    ngx.thread.kill(sleeper)
    return data, err
  end
  ngx.thread.kill(reader)
  return nil, "timeout"
end

-- One attempt of rq on a socket to host:port: what rq says next.
-- read_ms: each read's timeout; by: the reads end then (receive).
function Transport:_attempt(rq, host, port, read_ms, by)
  local sock, fresh = self:_socket(host, port)
  if not sock then return rq:lost(false, fresh) end
  local bytes = rq:write(fresh)
  if not bytes then
    sock:close()
    return rq:next()
  end
  sock:settimeout(read_ms)
  local ok, err = sock:send(bytes)
  while ok do
    local data
    data, err = receive(sock, by)
    if not data then break end
    local act, a, b = rq:feed(data)
    if act == "send" then
      ok, err = sock:send(a)
    elseif act ~= "more" then
      if rq:clean() then sock:setkeepalive(POOL_IDLE_MS, POOL_SIZE) else sock:close() end
      return act, a, b
    end
  end
  -- (a byte may have gone: the machine never sends it again)
  sock:close()
  return rq:lost(true, err)
end

-- Runs rq to its end: rq:result()'s values.
function Transport:_run(rq, read_ms, by)
  local act, a, b = rq:next()
  while true do
    if act == "connect" then
      act, a, b = self:_attempt(rq, a, b, read_ms, by)
    elseif act == "sleep" then
      ngx.sleep(a)
      act, a, b = rq:next(b)
    else
      break   -- "done", "fail"
    end
  end
  self._noscript = self._noscript + rq:reloads()
  return rq:result()
end

-- Raises for an argument Redis cannot be sent (as the native client does,
-- at the caller's level): strings and finite numbers only.
local function check_args(level, ...)
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    local t = type(v)
    if t == "number" then
      if v ~= v or v == math.huge or v == -math.huge then
        error("bad argument #" .. i .. " (finite number expected)", level + 1)
      end
    elseif t ~= "string" then
      error("bad argument #" .. i .. " (string or number expected, got " .. t .. ")", level + 1)
    end
  end
end

--- The caller's own deadline (core.monotime's clock; nil: none) for the
-- next script or command call only: see redislock.channel.
function Transport:deadline(t)
  self._deadline = t
end

-- Takes the deadline deadline() left for this call.
local function take_deadline(self)
  local t = self._deadline
  self._deadline = nil
  return t
end

--- One of the embedded scripts on the node of its first key (the request
-- machine's way: see the top).
function Transport:script(name, ...)
  local until_t = take_deadline(self)
  local wait = self._wait_next
  self._wait_next, self._waited = nil, nil
  self:_check()
  local s = type(name) == "string" and core.scripts[name]
  if not s then error("bad argument #1 to 'script' (no such script)", 2) end
  local n = select("#", ...)
  if n < s.keys then error(("script '%s' takes %d keys, got %d arguments"):format(name, s.keys, n), 2) end
  check_args(2, ...)
  local rq = self._native:request("script", self._timeout, until_t, name, ...)
  if not wait then return self:_run(rq, self._timeout_ms) end
  -- a WAIT asked for (wait_next) goes on the socket that wrote, once the
  -- script ran
  rq:then_wait(wait[1], wait[2])
  local res, acks_or_err, kind = self:_run(rq, self._timeout_ms)
  if res == nil then return nil, acks_or_err, kind end
  self._waited = { acks_or_err }
  return res
end

--- Any command, as the native client's command: on the node of its first
-- argument taken as a key.
function Transport:command(name, ...)
  local until_t = take_deadline(self)
  self:_check()
  if type(name) ~= "string" then error("bad argument #1 to 'command' (string expected)", 2) end
  check_args(2, ...)
  return self:_run(self._native:request("command", self._timeout, until_t, name, ...), self._timeout_ms)
end

--- The per-command timeout from now on, seconds (0: none).
function Transport:set_timeout(seconds)
  self._timeout = seconds
  self._timeout_ms = ms(seconds)
end

--- BLPOP key for up to `seconds`, on a pooled socket of its own (see
-- redislock.channel). No spinning here: a cosocket wait costs the worker
-- nothing, and nginx wakes it when the reply comes. exact: the wait ends
-- at `seconds` (a light thread sees to it), not when Redis ends it.
function Transport:block(key, seconds, exact)
  self:_check()
  local limit = seconds + (exact and 0.002 or 0.25)
  local rq = self._native:request("command", limit, nil, "BLPOP", key, string.format("%.3f", seconds))
  local r, err, kind = self:_run(rq, ms(limit), exact and monotime() + limit or nil)
  if r == nil then return nil, err, kind end
  return r and r[2] or false
end

--- BLPOP key for up to `seconds` with the embedded script `name` queued
-- behind it, in one write on a pooled socket of its own (see
-- redislock.channel): Redis runs the script the moment the BLPOP returns.
-- Redis ends the wait (the caller keeps it well inside its deadline); the
-- read timeout is a margin past it, so a timeout is a fault (nginx logs
-- it). The machine reads the refusals as csrc/topo/route_wait.c does.
function Transport:wait_try(key, seconds, _, name, ...)
  self:_check()
  -- Sentinel: never (as csrc/topo/route_wait.c): a BLPOP on a master
  -- demoted meanwhile ends there, and the attempt behind it would run on
  -- a node the sentinels no longer name. The plain wait sends its attempt
  -- to the confirmed master.
  if self._mode == "sentinel" then return false end
  if not core.scripts[name] then error("bad argument #4 to 'wait_try' (no such script)", 2) end
  check_args(2, ...)
  local limit = seconds + 0.25
  local rq = self._native:request("wait", limit, nil, key, string.format("%.3f", seconds), name, ...)
  return self:_run(rq, ms(limit))
end

function Transport.sleep(_, seconds) ngx.sleep(seconds) end

--- WAIT needs the connection that made the write, and this transport takes
-- a pooled connection per call: not offered here (wait_next is: the WAIT
-- goes in the script's own call).
function Transport.replicas()
  return nil, "replicas: not offered by the cosocket transport (use the native one)", "redis"
end

--- The next script's write is followed by WAIT n on its socket, in the
-- same call (see redislock.channel); waited() gives the answer.
function Transport:wait_next(n, timeout)
  self._wait_next = { n, math.max(1, math.floor(timeout * 1000 + 0.5)) }
end

function Transport:waited()
  local w = self._waited
  self._waited = nil
  if not w then return nil, "connection lost: the WAIT was not sent", "connection" end
  if not w[1] then return nil, "connection lost: the WAIT's answer did not come", "connection" end
  return w[1]
end

--- How many replicas must acknowledge a write on the node of key before a
-- failover keeps it: the C topology's answer (redislock.channel).
function Transport:failover_acks(key)
  if self._mode ~= "sentinel" and self._mode ~= "cluster" then return 0 end
  return self._native:failover_acks(key)
end

--- What INFO memory says (the eviction check), like the native probe.
function Transport:server_info()
  local r, err = self:command("INFO", "memory")
  if not r then return { info_error = err } end
  local policy = r:match("maxmemory_policy:([%w%-]+)")
  return { maxmemory_policy = policy, info_error = not policy and "no maxmemory_policy" or nil }
end

-- The watchdog side lives on the native client.
function Transport:watch(...) self:_check() return self._native:watch(...) end
function Transport:losses() return self._native:losses() end
function Transport:fd() self:_check() return self._native:fd() end
-- The C counters are the watchdog's and the topology's (the native client
-- opens no connection of its own: its reconnects stay 0); NOSCRIPT reloads
-- of the cosockets are counted here. Pool connections are not "reconnects".
function Transport:stats()
  local s = self._native:stats()
  s.noscript_reloads = s.noscript_reloads + self._noscript
  return s
end
function Transport:events() self:_check() return self._native:events() end

function Transport:close()
  if not self._closed then
    self._closed = true
    self._native:close()
  end
  return true
end

--- The channel for `cfg`: the cosocket transport over a native C client
-- that routes and hosts the watchdog (core.connect{lazy = true}: it never
-- opens a connection of its own; the thread connects itself). Checked at
-- once with a PING, as the native transport's connect is.
function _M.open(cfg)
  local lazy = {}
  for k, v in pairs(cfg) do lazy[k] = v end
  lazy.lazy = true
  local native = core.connect(lazy)
  local conn, err = _M.new(cfg, native)
  if not conn then
    native:close()
    return nil, err, "connection"
  end
  local pong, kind
  pong, err, kind = conn:command("PING")
  if not pong then
    conn:close()
    return nil, err, kind
  end
  return conn
end

function Transport:closed() return self._closed end

--- Who calls now: the request (or timer) it runs for, as its ngx.ctx
-- table. One client serves every request of a worker, so a lock this
-- client holds may be another request's, which a call waits for as for
-- any rival's; only one the caller's own request took is refused at once
-- (redislock.engine). Not the coroutine: nginx reuses a finished
-- request's for the next one.
function Transport.caller() return ngx.ctx end

function Transport:__tostring()
  return "redislock.client (cosocket, " .. self._where .. (self._closed and ", closed)" or ")")
end

return _M

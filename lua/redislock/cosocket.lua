--[[
redislock.cosocket: the transport for nginx with its Lua module (OpenResty).

Behind redislock.connect{..., transport = "cosocket"}. Every command goes
through lua-resty-redis on an nginx cosocket, so a call that waits (a BLPOP
for a release, a round trip) yields to the event loop instead of blocking the
worker. open(cfg) returns a channel (redislock.channel's contract, the same
the native transport implements).

- Scripts: the very text and SHA1 the C core embeds (core.scripts), EVALSHA
  first and SCRIPT LOAD + EVAL on NOSCRIPT, as the native transport does.
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

local unpack = table.unpack or unpack -- luacheck: ignore 143
local monotime = core.monotime

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

--- A transport for `cfg` (the fields of redislock.connect after URL parsing).
-- native: the C client that hosts the watchdog, or nil (a wait connection).
-- topo: the C client whose topology routes keys (Sentinel, Cluster): the
-- same for a transport and its wait connection.
-- Returns nil, err outside nginx or without lua-resty-redis.
function _M.new(cfg, native, topo)
  if not (ngx and ngx.socket and ngx.socket.tcp) then
    return nil, "transport 'cosocket' needs nginx with its Lua module (ngx.socket.tcp)"
  end
  local redis = load_redis()
  if not redis then
    return nil, "transport 'cosocket' needs lua-resty-redis (resty.redis)"
  end
  local tls, terr
  if cfg.tls then
    tls, terr = tls_setup(cfg.tls)
    if not tls then return nil, "connection failed: " .. terr end
  end
  return setmetatable({
    _tls = tls,
    _redis = redis,
    _cfg = cfg,
    _native = native,
    _topo = topo or native,
    _mode = cfg.mode or "single",
    _where = where(cfg),
    _connect_ms = ms(cfg.connect_timeout, 2),
    _timeout_ms = ms(cfg.timeout, 2),
    _closed = false,
    _noscript = 0,             -- NOSCRIPT reloads (stats: noscript_reloads)
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

local function lost(err, at)
  return "connection lost: " .. (err == "timeout" and "timed out" or tostring(err)) .. " (" .. at .. ")"
end

-- "host:port" or the unix path of a node table.
local function node_where(node) return where(node) end

-- A connection from the pool to `node` ({host=, port=} or {path=}),
-- authenticated (user, password: the node's credentials) and on database
-- db. A pool of our own per address, database and user: nginx pools by
-- address alone by default, and a connection that other code left on
-- another database or user would put our keys there (two holders).
-- timeout_ms is read before anything yields (the transport is shared by the
-- requests of a worker).
function Transport:_connect(node, timeout_ms, user, password, db)
  local red = self._redis:new()
  red:set_timeout(self._connect_ms)
  local at = node_where(node)
  local tls = self._tls
  local pool = table.concat({ "redislock", at, db or 0, user or "",
    password and ngx.md5(password) or "", tls and tls.pool or "" }, "|")
  local ok, err
  if node.path then
    ok, err = red:connect("unix:" .. node.path, { pool = pool })
  else
    ok, err = red:connect(node.host or "127.0.0.1", node.port or 6379, { pool = pool })
  end
  if not ok then
    err = err == "timeout" and "timed out" or tostring(err)
    return nil, "connection failed: " .. err .. " (" .. at .. ")", true
  end
  local fresh = (red:get_reused_times() or 0) == 0
  if tls and fresh then
    -- within connect's timeout, as the native handshake
    local sock = rawget(red, "_sock")
    local name = tls.name or node.host
    if tls.cert then
      if not sock.setclientcert then
        red:close()
        return nil, "connection failed: tls.cert needs setclientcert (lua-resty-core 0.1.23 or later)"
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
      red:close()
      err = err == "timeout" and "tls handshake timed out" or "tls: " .. tls_why(err, name)
      return nil, "connection failed: " .. err .. " (" .. at .. ")", true
    end
  end
  red:set_timeout(timeout_ms)
  if fresh then
    local setup = {}
    if password then
      setup[#setup + 1] = user and { "auth", user, password } or { "auth", password }
    end
    if db and db > 0 then setup[#setup + 1] = { "select", string.format("%d", db) } end
    for _, c in ipairs(setup) do
      local res, serr = red[c[1]](red, unpack(c, 2))
      if not res then
        red:close()
        if res == false then return nil, "redis error: " .. tostring(serr) end
        return nil, lost(serr, at), true
      end
    end
  end
  return red
end

function Transport:_get(node, timeout_ms)
  local cfg = self._cfg
  return self:_connect(node, timeout_ms, cfg.username, cfg.password, self._mode == "cluster" and 0 or cfg.db)
end

local function parse_hostport(s)
  local host, port = s:match("^%[(.*)%]:(%d+)$")
  if not host then host, port = s:match("^(.*):(%d+)$") end
  return { host = host, port = tonumber(port) }
end

-- Asks the sentinels (Sentinel) or the nodes (Cluster) where keys live,
-- over cosockets, and hands what they said to the C topology, which parses
-- it with the same code as the native transport and the watchdog use.
function Transport:_refresh()
  local mode, seeds, master = self._topo:topology()
  local last = "no address given"
  if mode == "cluster" then
    local known = {}
    local host, port = self._topo:route("")
    if host then known[1] = { host = host, port = port } end
    for _, s in ipairs(seeds) do known[#known + 1] = parse_hostport(s) end
    for _, node in ipairs(known) do
      local red, err = self:_get(node, self._connect_ms)
      if red then
        local res, rerr = red:cluster("slots")
        -- (every master's replicas: a failover could promote one, and then
        -- its renewals wait for one, csrc/watchdog/wd_ack.c)
        local nodes = res and red:cluster("nodes")
        if res then
          red:set_keepalive(POOL_IDLE_MS, POOL_SIZE)
          local ok, perr = self._topo:load_slots(convert(res), node.host, node.port,
            type(nodes) == "string" and nodes or nil)
          if ok then return true end
          last = perr
        else
          red:close()
          last = "redis error: " .. tostring(rerr)
        end
      else
        last = err
      end
    end
    return nil, "connection failed: cluster unreachable (last: " .. tostring(last) .. ")"
  end
  -- Sentinel: whom to trust is decided in one place, the C topology's
  -- follower thread (csrc/topo/sentinel.h: a majority of the sentinels, the
  -- highest config-epoch, no failover under way, ROLE). It runs in this
  -- worker, asks the sentinels every second and at once on their failover
  -- events; here we only ask it to look now and wait for its answer.
  if not self._topo:follow() then
    return nil, "connection failed: cannot follow the sentinels (no thread)"
  end
  ngx.update_time()
  local deadline = ngx.now() + self._connect_ms / 1000
  while not self._topo:route("") do
    ngx.update_time()
    if ngx.now() >= deadline then
      return nil, "connection lost: timed out (no master confirmed by the sentinels for "
        .. tostring(master) .. ")"
    end
    ngx.sleep(0.005)
  end
  return true
end

-- The node of `key` (nil: any). Single: the configured endpoint.
function Transport:_node(key)
  if self._mode == "single" then return self._cfg end
  local host, port, epoch = self._topo:route(key or "")
  if not host then
    local ok, err = self:_refresh()
    if not ok then return nil, err end
    host, port, epoch = self._topo:route(key or "")
    if not host then return nil, "redis error: CLUSTERDOWN no node serves this key's slot" end
  end
  if port then return { host = host, port = port, epoch = epoch } end
  return { path = host, epoch = epoch }
end

-- Sentinel: node's master failed a request (see client:doubt): nothing is
-- routed to it until the sentinels confirm a master again.
function Transport:_doubt(node)
  if self._mode == "sentinel" and node and node.epoch then self._topo:doubt(node.epoch) end
end

local MAX_TRIES = 8
local MAX_WAITS = 200                -- pauses when nothing bounds the call (timeout = 0)

-- A failure as the channel gives it: nil, err, kind.
local function failed(err)
  err = tostring(err)
  return nil, err, err:find("timed out", 1, true) and "timeout" or
    (err:find("^redis error") and "redis" or "connection")
end

-- Runs fn(red) on a pooled connection to the node of key; the result as
-- the native client's. What a refusal or a failure asks for is the C
-- core's rule (core.recovery, csrc/topo/recovery.h), the native router's: MOVED
-- and READONLY look the topology up again and retry, ASK sends ASKING to
-- the named node first, TRYAGAIN and LOADING are waited out until the
-- caller's deadline (until_t, core.monotime's clock) or the timeout,
-- whichever is first, and then are the answer; a connection that could not
-- be made (nothing sent) is tried again once after a fresh look; a request
-- that was sent is never repeated (a lost one has the topology looked up
-- again before the next).
function Transport:_call(fn, key, until_t)
  local timeout_ms, mode = self._timeout_ms, self._mode
  local bounded = until_t ~= nil or timeout_ms ~= FOREVER_MS
  local stop = monotime() + timeout_ms / 1000
  if until_t and until_t < stop then stop = until_t end
  local asking, refreshed, tries, waits = nil, false, 0, 0
  while true do
    tries = tries + 1
    if tries > MAX_TRIES then return failed("redis error: too many redirects (the cluster is resharding?)") end
    if self._stale then
      self._stale = false
      refreshed = true
      self:_refresh()
    end
    local node, err = asking, nil
    if not node then node, err = self:_node(key) end
    if not node then return failed(err) end
    local red, cerr, not_sent = self:_get(node, timeout_ms)
    if not red then
      if not not_sent then
        self:_doubt(node)
        return failed(cerr)
      end
      local _, todo = core.recovery_failure(mode, "refused", false)
      if todo.resolve then self:_doubt(node) end
      if not todo.retry or refreshed then return failed(cerr) end
      -- nothing was sent: the node may be another one now (once)
      if todo.resolve then self._stale = true else refreshed = true end
      asking = nil
    else
      if asking then
        red:asking()
        red._redislock_asking = true
      end
      local ok, res, rerr = pcall(fn, red)
      if not ok then
        red:close()
        error(res, 0)
      end
      if res == nil then
        -- sent, maybe run: never again; but look again next time
        red:close()
        local _, todo = core.recovery_failure(mode, rerr == "timeout" and "timeout" or "reset", true)
        if todo.resolve then
          self._stale = true
          self:_doubt(node)
        end
        return failed(lost(rerr, node_where(node)))
      end
      if res ~= false then
        red:set_keepalive(POOL_IDLE_MS, POOL_SIZE)
        return convert(res)
      end
      rerr = tostring(rerr)
      local _, todo, target = core.recovery(mode, rerr)
      if todo.drop then red:close() else red:set_keepalive(POOL_IDLE_MS, POOL_SIZE) end
      -- (NOSCRIPT is script's own to recover from, inside fn)
      if not todo.retry or todo.eval then return failed("redis error: " .. rerr) end
      if todo.asking then asking = parse_hostport(target) end
      if todo.pause then
        -- it did not run, and may once the node is ready: wait, more each
        -- time, until the deadline, without counting it as a redirect
        waits = waits + 1
        tries = tries - 1
        local left = stop - monotime()
        if left <= 0 or (not bounded and waits > MAX_WAITS) then return failed("redis error: " .. rerr) end
        ngx.sleep(math.min(core.recovery_pause(waits), left))
        if monotime() >= stop then return failed("redis error: " .. rerr) end
      end
      if todo.resolve and not (todo.pause and waits > 1) then
        asking = nil
        self._stale = true
        self:_doubt(node)
      end
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

--- One of the embedded scripts: EVALSHA, SCRIPT LOAD + EVAL on NOSCRIPT (per node: the
-- script cache is not replicated), on the node of its first key.
function Transport:script(name, ...)
  local until_t = take_deadline(self)
  local wait = self._wait_next
  self._wait_next, self._waited = nil, nil
  self:_check()
  local s = type(name) == "string" and core.scripts[name]
  if not s then error("bad argument #1 to 'script' (no such script)", 2) end
  local n = select("#", ...)
  if n < s.keys then error(("script '%s' takes %d keys, got %d arguments"):format(name, s.keys, n), 2) end
  local args = to_strings(n, ...)
  -- a WAIT asked for (wait_next) goes on the connection that wrote, once
  -- the script ran
  local function waited(red, res, err)
    if wait and res ~= nil and res ~= false then
      local acks, werr = red:wait(wait[1], wait[2])
      self._waited = { acks, werr }
    end
    return res, err
  end
  return self:_call(function(red)
    local res, err = red:evalsha(s.sha, s.keys, unpack(args, 1, n))
    if res == false and type(err) == "string" and core.recovery(self._mode, err) == "noscript" then
      self._noscript = self._noscript + 1
      -- SCRIPT LOAD, its answer unread, then EVAL, in one write: a script
      -- SCRIPT LOAD created is never evicted (Redis 8 evicts EVAL's beyond
      -- 500), and EVAL runs it whatever the load answered (an ACL without
      -- script|load). (After an ASK, ASKING again, just before the EVAL:
      -- it holds for one command only.)
      red:init_pipeline(3)
      red:script("load", s.source)
      if red._redislock_asking then red:asking() end
      red:eval(s.source, s.keys, unpack(args, 1, n))
      local vals, perr = red:commit_pipeline()
      if not vals then return nil, perr end
      res = vals[#vals]
      -- (an error answer comes as {false, err}; a script's array never
      -- holds false: Redis turns it into a nil bulk)
      if type(res) == "table" and res[1] == false then return false, res[2] end
      return waited(red, res)
    end
    return waited(red, res, err)
  end, s.keys > 0 and args[1] or nil, until_t)
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

--- Any command, as the native client's command: on the node of its first
-- argument taken as a key.
function Transport:command(name, ...)
  local until_t = take_deadline(self)
  self:_check()
  if type(name) ~= "string" then error("bad argument #1 to 'command' (string expected)", 2) end
  local n = select("#", ...)
  local args = to_strings(n, ...)
  local method = name:lower()
  if method == "blpop" then
    local timeout_ms = self._timeout_ms
    return self:_call(function(red) return blpop_until(red, timeout_ms, args, n) end, args[1])
  end
  return self:_call(function(red) return red[method](red, unpack(args, 1, n)) end, args[1], until_t)
end

--- The per-command timeout from now on, seconds (0: none).
function Transport:set_timeout(seconds)
  self._timeout_ms = ms(seconds)
end

-- The transport that waits (block, wait_try): pooled connections of its
-- own, made at the first wait.
local function wait_transport(self)
  local waiter = self._waiter
  if not waiter then
    waiter = assert(_M.new(self._cfg, nil, self._topo))
    self._waiter = waiter
  end
  return waiter
end

--- BLPOP key for up to `seconds`, on a pooled connection of its own (see
-- redislock.channel). No spinning here: a cosocket wait costs the worker
-- nothing, and nginx wakes it when the reply comes.
function Transport:block(key, seconds, exact)
  self:_check()
  local waiter = wait_transport(self)
  waiter:set_timeout(seconds + (exact and 0.005 or 0.25))
  local r, err = waiter:command("BLPOP", key, string.format("%.3f", seconds))
  if r == nil then return failed(err) end
  return r and r[2] or false
end

--- BLPOP key for up to `seconds` with the embedded script `name` queued
-- behind it, in one pipeline on a pooled connection of the wait transport
-- (see redislock.channel): Redis runs the script the moment the BLPOP
-- returns. Redis ends the wait (the caller keeps it well inside its
-- deadline); the read timeout is a margin past it, so a timeout is a fault
-- (nginx logs it). Refusals (an error for either command: WRONGTYPE,
-- NOSCRIPT, a redirect) read as in the native transport: a nil wakeup, a
-- false reply. A refusal that asks for a fresh look at the topology
-- (core.recovery: MOVED, READONLY, ...) reloads the map, as the native
-- router marks it stale; an ASK is followed by the next plain attempt (when
-- the script did not run) and otherwise not at all: such a waiter backs off
-- until the migration ends.
function Transport:wait_try(key, seconds, _, name, ...)
  self:_check()
  -- Sentinel: never (as csrc/topo/route_wait.c): a BLPOP on a master demoted
  -- meanwhile ends there, and the attempt behind it would run on a node
  -- the sentinels no longer name. The plain wait sends its attempt to the
  -- confirmed master.
  if self._mode == "sentinel" then return false end
  local waiter = wait_transport(self)
  local s = core.scripts[name]
  if not s then error("bad argument #4 to 'wait_try' (no such script)", 2) end
  local n = select("#", ...)
  local args = to_strings(n, ...)
  waiter:set_timeout(seconds + 0.25)
  local res, err = waiter:_call(function(red)
    red:init_pipeline(2)
    red:blpop(key, string.format("%.3f", seconds))
    red:evalsha(s.sha, s.keys, unpack(args, 1, n))
    local vals, perr = red:commit_pipeline()
    if not vals then return nil, perr end
    return { vals[1], vals[2] }
  end, key)
  if res == nil then return failed(err) end
  -- (converted: a nil bulk is false, an error the bare message)
  local woken, reply = res[1], res[2]
  for _, e in ipairs({ woken, reply }) do
    if type(e) == "string" then
      local _, todo = core.recovery(self._mode, e)
      if todo.resolve then
        self:_refresh()
        break
      end
    end
  end
  if type(woken) == "string" then
    woken = nil
  elseif type(woken) == "table" then
    woken = woken[2]
  end
  return true, woken, type(reply) == "table" and reply or false
end

function Transport.sleep(_, seconds) ngx.sleep(seconds) end

--- WAIT needs the connection that made the write, and this transport takes
-- a pooled connection per call: not offered here (wait_next is: the WAIT
-- goes in the script's own call).
function Transport.replicas()
  return nil, "replicas: not offered by the cosocket transport (use the native one)", "redis"
end

--- The next script's write is followed by WAIT n on its connection, in the
-- same call (see redislock.channel); waited() gives the answer.
function Transport:wait_next(n, timeout)
  self._wait_next = { n, math.max(1, math.floor(timeout * 1000 + 0.5)) }
end

function Transport:waited()
  local w = self._waited
  self._waited = nil
  if not w then return nil, "connection lost: the WAIT was not sent", "connection" end
  if not w[1] then return failed("connection lost: " .. tostring(w[2])) end
  return tonumber(w[1])
end

--- How many replicas must acknowledge a write on the node of key before a
-- failover keeps it: the C topology's answer (redislock.channel).
function Transport:failover_acks(key)
  if self._mode ~= "sentinel" and self._mode ~= "cluster" then return 0 end
  return self._topo:failover_acks(key)
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
function Transport:losses() if self._native then return self._native:losses() end end
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
    if self._native then self._native:close() end
  end
  return true
end

--- The channel for `cfg`: the main cosocket transport over a native C
-- client that only hosts the watchdog (core.connect{lazy = true}: it never
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
  local pong
  pong, err = conn:command("PING")
  if not pong then
    conn:close()
    return nil, err, err:find("^redis error") and "redis" or "connection"
  end
  return conn
end

function Transport:closed() return self._closed end

function Transport:__tostring()
  return "redislock.client (cosocket, " .. self._where .. (self._closed and ", closed)" or ")")
end

return _M

--- redislock: safe Redis locks for Lua.
--
-- Policy lives in Lua (options, defaults, waiting, guards); mechanics live
-- in the C core `redislock.core` (connections, the Redis-side scripts,
-- tokens, the monotonic clock, the watchdog thread). Every lock operation is
-- one embedded script from lua/redislock/scripts/, sent as EVALSHA with the
-- EVAL fallback.
--
-- Where each concern lives (lua/redislock/):
--   checks.lua    argument checking, errors at the caller's line
--   errors.lua    the kinds of failure: nil, err, kind (docs/errors.md)
--   keys.lua      the key layout of a name (one Cluster slot per name)
--   lock.lua      the lock object: held, extend, release, lease_end
--   acquire.lua   acquire, waiting (notify, fair, backoff), with_lock
--   fencing.lua   fenced_set, fenced_get
--   admin.lua     inspect, release_token, break_lock
--   reentrant.lua reentrant holds (owner tokens, one renewal each), adopt
--   rwlock.lua, semaphore.lua   the shared primitives (sets of leases);
--   waiting.lua   their options and wait loop
--   losses.lua    delivering the watchdog's loss reports to on_lost
--   metrics.lua   counters, histograms, stats(), metrics() (Prometheus)
--   events.lua    on_event: structured events
--   client.lua    the client object: poll, fd, stats, warnings, close
--   channel.lua   the contract between this policy and a transport;
--   native.lua, cosocket.lua   the two transports
--   url.lua, backoff.lua, cli.lua (cli_options.lua, cli_help.lua)
--
-- Error conventions (lua-resty style): a wrong argument raises an error that
-- names it; a failure of the world returns nil, err, kind, where err starts
-- with kind, one of the words in redislock.errors (docs/errors.md).

local core = require "redislock.core"
local url = require "redislock.url"
local checks = require "redislock.checks"
local clientmod = require "redislock.client"
local channel = require "redislock.channel"
local errors = require "redislock.errors"
checks.own(debug.getinfo(1, "S").source)

local argerror, check_type, check_number = checks.argerror, checks.check_type, checks.check_number

local _M = { _VERSION = "0.2.0", core = core }

local DEFAULT_FENCE_TTL = 7 * 86400   -- seconds

local CONNECT_OPTIONS = {
  url = true, host = true, port = true, path = true, username = true,
  password = true, db = true, connect_timeout = true, timeout = true,
  prefix = true, transport = true, strict = true, fence_ttl = true,
  sentinels = true, master = true, sentinel_username = true, sentinel_password = true,
  cluster = true, redlock = true, on_event = true, native_commands = true, holder = true,
}

-- How a client talks to Redis: each returns a channel (redislock.channel).
local TRANSPORTS = {
  native = function(cfg) return require("redislock.native").open(cfg) end,
  cosocket = function(cfg) return require("redislock.cosocket").open(cfg) end,
}
local ENDPOINT_FIELDS = {
  "host", "port", "path", "username", "password", "db", "sentinels", "master", "cluster", "redlock",
}
local MASTER_FIELDS = { host = true, port = true, path = true, username = true, password = true, db = true }

-- A list of "host:port" strings (sentinels, cluster seeds), checked.
local function check_hosts(argname, list)
  check_type("connect", argname, list, "table")
  if #list == 0 then argerror("connect", argname, "at least one \"host:port\" expected") end
  for i, h in ipairs(list) do
    local host = type(h) == "string" and (h:match("^%[([%x:%.]+)%]:%d+$") or h:match("^([^:%[%]]+):%d+$"))
    if not host or not url.valid_host(host) then
      argerror("connect", argname, "\"host:port\" expected at [" .. i .. "], got " .. tostring(h))
    end
  end
end

-- A host that is no name or address (a space, a control byte) is refused
-- here, before anything looks it up.
local function check_host(argname, host)
  checks.check_string("connect", argname, host, true)
  if host ~= nil and not url.valid_host(host) then
    argerror("connect", argname, "not a host name or address" ..
      (host:find("\0", 1, true) and ": it holds a NUL byte" or ""))
  end
end

-- Only noeviction keeps lock keys under memory pressure: every other
-- policy may evict a key with a ttl (volatile-*) or any key (allkeys-*),
-- and an evicted lock key lets a second client take the lock while the
-- first still holds it. Returns the warnings, or nil, err under strict.
local function eviction_check(ch, strict)
  local info = ch:server_info() or {}
  local policy = info.maxmemory_policy
  if policy == "noeviction" then return {} end
  local msg
  if policy then
    msg = "maxmemory-policy is " .. policy .. ": under memory pressure Redis may evict lock keys,"
      .. " and two clients can then hold the same lock (set maxmemory-policy noeviction)"
  else
    msg = "maxmemory-policy could not be read (" .. (info.info_error or "no INFO memory")
      .. "): only noeviction keeps lock keys under memory pressure"
  end
  if strict then return nil, "unsafe server: " .. msg .. " [strict = true]" end
  return { msg }
end

-- The endpoint fields, from url= or from the fields themselves, checked.
local function endpoint(opts)
  local cfg = {}
  if opts.url ~= nil then
    check_type("connect", "url", opts.url, "string")
    for _, f in ipairs(ENDPOINT_FIELDS) do
      if opts[f] ~= nil then
        argerror("connect", f, "give either url or " .. f .. ", not both")
      end
    end
    local ok, parsed = pcall(url.parse, opts.url)
    if not ok then checks.raise((tostring(parsed):gsub("^redislock: ", ""))) end
    cfg = parsed
  else
    for _, f in ipairs(ENDPOINT_FIELDS) do cfg[f] = opts[f] end
  end
  check_host("host", cfg.host)
  checks.check_string("connect", "path", cfg.path, true)
  check_type("connect", "username", cfg.username, "string", true)
  check_type("connect", "password", cfg.password, "string", true)
  if cfg.host and cfg.path then argerror("connect", "path", "give either host or path, not both") end
  if cfg.username and not cfg.password then
    argerror("connect", "username", "a password is required with a user name")
  end
  if cfg.port ~= nil then checks.check_integer("connect", "port", cfg.port, 1, 65535) end
  if cfg.db ~= nil then checks.check_integer("connect", "db", cfg.db, 0, 2 ^ 20) end
  -- Sentinel: the master named `master`, found through the sentinels
  if cfg.sentinels ~= nil or cfg.master ~= nil then
    check_hosts("sentinels", cfg.sentinels)
    checks.check_string("connect", "master", cfg.master)
    if cfg.host or cfg.path or cfg.port or cfg.cluster then
      argerror("connect", "sentinels", "give sentinels or host/path/port/cluster, not both")
    end
    cfg.mode, cfg.seeds = "sentinel", cfg.sentinels
  elseif cfg.cluster ~= nil then
    check_hosts("cluster", cfg.cluster)
    if cfg.host or cfg.path or cfg.port then
      argerror("connect", "cluster", "give cluster or host/path/port, not both")
    end
    if cfg.db and cfg.db ~= 0 then argerror("connect", "db", "a cluster has only database 0") end
    cfg.mode, cfg.seeds = "cluster", cfg.cluster
  end
  cfg.sentinels, cfg.cluster = nil, nil
  check_type("connect", "sentinel_username", opts.sentinel_username, "string", true)
  check_type("connect", "sentinel_password", opts.sentinel_password, "string", true)
  if opts.sentinel_username and not opts.sentinel_password then
    argerror("connect", "sentinel_username", "a password is required with a user name")
  end
  if (opts.sentinel_username or opts.sentinel_password) and cfg.mode ~= "sentinel" then
    argerror("connect", "sentinel_password", "only with sentinels")
  end
  cfg.sentinel_username, cfg.sentinel_password = opts.sentinel_username, opts.sentinel_password
  cfg.connect_timeout = opts.connect_timeout
  cfg.timeout = opts.timeout
  if cfg.connect_timeout ~= nil then
    check_number("connect", "connect_timeout", cfg.connect_timeout, 0.001, 86400)
  end
  if cfg.timeout ~= nil then check_number("connect", "timeout", cfg.timeout, 0, 86400) end
  -- false: scripts only, and no detection of the native compare commands
  check_type("connect", "native_commands", opts.native_commands, "boolean", true)
  cfg.native_commands = opts.native_commands
  return cfg
end

-- Redlock: each master a URL (redis:// or unix://) or a table of the
-- endpoint fields; the client is lua/redislock/redlock.lua's.
local function redlock_connect(opts, settings, cfg)
  check_type("connect", "redlock", opts.redlock, "table")
  if #opts.redlock == 0 then argerror("connect", "redlock", "at least one master expected") end
  if opts.transport ~= nil and opts.transport ~= "native" then
    argerror("connect", "transport", "Redlock runs on the native transport only")
  end
  local masters = {}
  for i, m in ipairs(opts.redlock) do
    local where = "redlock[" .. i .. "]"
    if type(m) == "string" then
      local ok, parsed = pcall(url.parse, m)
      if not ok then argerror("connect", where, (tostring(parsed):gsub("^redislock: ", ""))) end
      if parsed.sentinels or parsed.cluster then argerror("connect", where, "a single master's url expected") end
      m = parsed
    elseif type(m) == "table" then
      for k in pairs(m) do
        if not MASTER_FIELDS[k] then argerror("connect", where, "unknown field '" .. tostring(k) .. "'") end
      end
    else
      argerror("connect", where, "url or table expected, got " .. type(m))
    end
    check_host(where .. ".host", m.host)
    checks.check_string("connect", where .. ".path", m.path, true)
    if m.port ~= nil then checks.check_integer("connect", where .. ".port", m.port, 1, 65535) end
    if m.db ~= nil then checks.check_integer("connect", where .. ".db", m.db, 0, 2 ^ 20) end
    check_type("connect", where .. ".username", m.username, "string", true)
    check_type("connect", where .. ".password", m.password, "string", true)
    if m.username and not m.password then
      argerror("connect", where .. ".username", "a password is required with a user name")
    end
    masters[i] = m
  end
  local client, err, kind = require("redislock.redlock").connect(masters, settings, cfg)
  if not client then return errors.fail(err, kind) end
  local warnings
  warnings, err = eviction_check(client._conn, opts.strict)
  if not warnings then
    client:close()
    return nil, err, "unsafe"
  end
  client._warnings = warnings
  return client
end

--- Opens a client with one connection to Redis.
-- syntax: client, err = redislock.connect{url=, host=, port=, path=, username=,
--           password=, db=, connect_timeout=2, timeout=2, prefix="",
--           transport="native", strict=false, fence_ttl=604800, on_event=nil,
--           native_commands=true, holder="<hostname>:<pid>"}
-- holder: the label this client's grants record (false: none); acquire's
-- own `holder` option wins (redislock.holder).
-- transport: "native" (the C core) or "cosocket" (inside nginx: calls yield
-- to the event loop; see lua/redislock/cosocket.lua).
function _M.connect(opts)
  check_type("connect", "opts", opts, "table")
  checks.check_options("connect", opts, CONNECT_OPTIONS)
  local cfg = endpoint(opts)
  local prefix = opts.prefix == nil and "" or opts.prefix
  check_type("connect", "prefix", prefix, "string")
  check_type("connect", "strict", opts.strict, "boolean", true)
  local fence_ttl = opts.fence_ttl == nil and DEFAULT_FENCE_TTL or opts.fence_ttl
  check_number("connect", "fence_ttl", fence_ttl, 1, 2 ^ 31)
  local open = TRANSPORTS[opts.transport == nil and "native" or opts.transport]
  if not open then
    argerror("connect", "transport", "'native' or 'cosocket' expected, got " .. tostring(opts.transport))
  end

  checks.check_callable("connect", "on_event", opts.on_event, true)
  require("redislock.holder").check("connect", opts.holder)
  local settings = { prefix = prefix, fence_ttl = fence_ttl, on_event = opts.on_event, holder = opts.holder }
  if opts.redlock ~= nil then
    return redlock_connect(opts, settings, cfg)
  end
  local ch, err, kind = open(cfg)
  if not ch then return errors.fail(err, kind) end
  channel.check(ch)
  local warnings
  warnings, err = eviction_check(ch, opts.strict)
  if not warnings then
    ch:close()
    return nil, err, "unsafe"
  end
  settings.warnings = warnings
  return clientmod.new(ch, settings)
end

return _M

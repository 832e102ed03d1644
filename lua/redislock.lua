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
--   options.lua   the options of every call that takes a lease
--   engine.lua    how every lease is taken: the attempt record, the one
--                 wait loop (notify, fair, backoff), the one grant path
--   acquire.lua   plain and fair locks, adopt
--   reentrant.lua reentrant holds (owner tokens, one renewal each)
--   rwlock.lua, semaphore.lua   the shared primitives (sets of leases);
--   shares.lua    what those two share
--   redlock.lua   the Redlock client, a class of its own
--   fencing.lua   fenced_set, fenced_get
--   admin.lua     inspect, list, release_token, break_lock
--   losses.lua    delivering the watchdog's loss reports to on_lost
--   metrics.lua   counters, histograms, stats(), metrics() (Prometheus)
--   events.lua    on_event: structured events
--   client_base.lua  what every client is: poll, fd, stats, warnings, close
--   client.lua    the client object: its surface, each method a call to
--                 the module of its concern
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

-- seconds: how far the server's clock may step back, at any time, without
-- a name's fences going back (lua/redislock/scripts/lib/next_fence.lua,
-- docs/operations.md)
local DEFAULT_FENCE_TTL = 60

local CONNECT_OPTIONS = {
  url = true, host = true, port = true, path = true, username = true,
  password = true, db = true, connect_timeout = true, timeout = true,
  prefix = true, transport = true, strict = true, fence_ttl = true,
  sentinels = true, master = true, sentinel_username = true, sentinel_password = true,
  cluster = true, redlock = true, on_event = true, native_commands = true, holder = true,
  tls = true, sentinel_tls = true,
}

-- How a client talks to Redis: each returns a channel (redislock.channel).
local TRANSPORTS = {
  native = function(cfg) return require("redislock.native").open(cfg) end,
  cosocket = function(cfg) return require("redislock.cosocket").open(cfg) end,
}
local ENDPOINT_FIELDS = {
  "host", "port", "path", "username", "password", "db", "sentinels", "master", "cluster", "redlock",
}
local MASTER_FIELDS = { host = true, port = true, path = true, username = true, password = true, db = true,
  tls = true }
local TLS_FIELDS = { ca = true, cert = true, key = true, server_name = true, verify = true }

-- A `tls` table (connect's, or a Redlock master's), checked; a copy.
local function check_tls(argname, tls)
  check_type("connect", argname, tls, "table")
  local out = {}
  for k, v in pairs(tls) do
    if not TLS_FIELDS[k] then argerror("connect", argname, "unknown field '" .. tostring(k) .. "'") end
    out[k] = v
  end
  for _, f in ipairs({ "ca", "cert", "key", "server_name" }) do
    checks.check_string("connect", argname .. "." .. f, tls[f], true)
    checks.check_no_nul("connect", argname .. "." .. f, tls[f])
  end
  check_type("connect", argname .. ".verify", tls.verify, "boolean", true)
  if (tls.cert == nil) ~= (tls.key == nil) then
    argerror("connect", argname .. "." .. (tls.cert and "key" or "cert"),
      "a client certificate needs both tls.cert and tls.key")
  end
  return out
end

-- The TLS settings of an endpoint: `url_tls` (the url said rediss://),
-- `url_plain` (it said redis://) and the `tls` table given with it.
-- rediss:// without a table: verified against the system's CA store.
local function tls_of(argname, url_tls, url_plain, tls)
  if tls ~= nil then tls = check_tls(argname, tls) end
  if url_plain and tls then
    argerror("connect", argname, "a redis:// url is plain TCP: rediss:// for TLS")
  end
  if url_tls then tls = tls or {} end
  if tls and not core.tls then
    checks.raise("rediss:// and tls need a build with TLS: this redislock.core was built without"
      .. " (make TLS=no, or no OpenSSL headers)")
  end
  return tls
end

-- The warning a client gives for connections it does not verify.
local function tls_warning(tls)
  if tls and tls.verify == false then
    return "tls.verify = false: the connection is encrypted but the server is not verified"
      .. " (anyone on the path can pose as it)"
  end
end

-- A list of "host:port" strings (sentinels, cluster seeds), checked.
local function check_hosts(argname, list)
  check_type("connect", argname, list, "table")
  if #list == 0 then argerror("connect", argname, "at least one \"host:port\" expected") end
  for i, h in ipairs(list) do
    -- (the C core's one parser, core.hostport: the seeds are read by it)
    local host, port = core.hostport(type(h) == "string" and h or "")
    if not (host and port) then
      argerror("connect", argname, "\"host:port\" expected at [" .. i .. "], got " .. tostring(h) ..
        (host and "" or " (" .. port .. ")"))
    end
  end
end

-- What url.parse found wrong with a url ("port must be ...").
local function url_problem(e)
  return (tostring(e):gsub("^redislock: ", ""):gsub("^bad url %((.*)%)$", "%1"))
end

-- The strings the C core keeps as C strings (checks.check_no_nul), of
-- the table t, each named prefix .. field.
local function check_c_strings(t, prefix, fields)
  for _, f in ipairs(fields) do checks.check_no_nul("connect", prefix .. f, t[f]) end
end

-- The C core reads its config again (core.connect) and raises on what it
-- cannot use, as "bad config field 'F' (why)": a TLS file that cannot be
-- read or loaded (only OpenSSL can tell a key from a certificate), or
-- anything the checks here let through. That is a bad argument to
-- connect, raised again at the caller's line; a Redlock master's field
-- ("nodes[2].tls") by the name it was given (redlock[2].tls). Anything
-- else goes on as it was.
local function config_error(e)
  local field, why = tostring(e):match("bad config field '([^']+)' %((.*)%)$")
  if not field then error(e, 0) end
  argerror("connect", (field:gsub("^nodes%[", "redlock[")), why)
end

local function opened(ok, ...)
  if not ok then config_error((...)) end
  return ...
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
    if not ok then argerror("connect", "url", url_problem(parsed)) end
    cfg = parsed
    cfg.tls = tls_of("tls", parsed.tls, not parsed.tls, opts.tls)
  else
    for _, f in ipairs(ENDPOINT_FIELDS) do cfg[f] = opts[f] end
    cfg.tls = tls_of("tls", false, false, opts.tls)
  end
  check_host("host", cfg.host)
  checks.check_string("connect", "path", cfg.path, true)
  check_type("connect", "username", cfg.username, "string", true)
  check_type("connect", "password", cfg.password, "string", true)
  check_c_strings(cfg, "", { "path", "username", "password" })
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
    checks.check_no_nul("connect", "master", cfg.master)
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
  check_c_strings(opts, "", { "sentinel_username", "sentinel_password" })
  if opts.sentinel_username and not opts.sentinel_password then
    argerror("connect", "sentinel_username", "a password is required with a user name")
  end
  if (opts.sentinel_username or opts.sentinel_password) and cfg.mode ~= "sentinel" then
    argerror("connect", "sentinel_password", "only with sentinels")
  end
  cfg.sentinel_username, cfg.sentinel_password = opts.sentinel_username, opts.sentinel_password
  -- the sentinels over TLS as well (when there is TLS), unless false
  check_type("connect", "sentinel_tls", opts.sentinel_tls, "boolean", true)
  if opts.sentinel_tls ~= nil and (cfg.mode ~= "sentinel" or not cfg.tls) then
    argerror("connect", "sentinel_tls", "only with sentinels and tls")
  end
  cfg.sentinel_tls = opts.sentinel_tls
  if cfg.tls and cfg.path and cfg.tls.verify ~= false and not cfg.tls.server_name then
    argerror("connect", "tls", "over a unix socket, tls.server_name names the certificate to expect"
      .. " (or verify = false)")
  end
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

-- Redlock: each master a URL (redis://, rediss:// or unix://) or a table of
-- the endpoint fields; the client is lua/redislock/redlock.lua's. TLS per
-- master: a rediss:// url, or its own tls= table; connect's tls is the
-- table of the rediss:// ones and of tables without one (a redis:// url
-- with it is refused, as at the top).
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
      if not ok then argerror("connect", where, url_problem(parsed)) end
      if parsed.sentinels or parsed.cluster then argerror("connect", where, "a single master's url expected") end
      parsed.tls = tls_of(where, parsed.tls, not parsed.tls, opts.tls)
      m = parsed
    elseif type(m) == "table" then
      for k in pairs(m) do
        if not MASTER_FIELDS[k] then argerror("connect", where, "unknown field '" .. tostring(k) .. "'") end
      end
      local copy = {}
      for k, v in pairs(m) do copy[k] = v end
      copy.tls = tls_of(where .. ".tls", false, false, m.tls == nil and opts.tls or m.tls)
      m = copy
    else
      argerror("connect", where, "url or table expected, got " .. type(m))
    end
    if m.tls and m.path and m.tls.verify ~= false and not m.tls.server_name then
      argerror("connect", where .. ".tls", "over a unix socket, tls.server_name names the certificate"
        .. " to expect (or verify = false)")
    end
    check_host(where .. ".host", m.host)
    checks.check_string("connect", where .. ".path", m.path, true)
    if m.port ~= nil then checks.check_integer("connect", where .. ".port", m.port, 1, 65535) end
    if m.db ~= nil then checks.check_integer("connect", where .. ".db", m.db, 0, 2 ^ 20) end
    check_type("connect", where .. ".username", m.username, "string", true)
    check_type("connect", where .. ".password", m.password, "string", true)
    check_c_strings(m, where .. ".", { "path", "username", "password" })
    if m.username and not m.password then
      argerror("connect", where .. ".username", "a password is required with a user name")
    end
    masters[i] = m
  end
  local client, err, kind = opened(pcall(require("redislock.redlock").connect, masters, settings, cfg))
  if not client then return errors.fail(err, kind) end
  local warnings
  warnings, err = eviction_check(client._conn, opts.strict)
  if not warnings then
    client:close()
    return nil, err, "unsafe"
  end
  for _, m in ipairs(masters) do
    local w = tls_warning(m.tls)
    if w then
      warnings[#warnings + 1] = w
      break
    end
  end
  client._warnings = warnings
  return client
end

--- Opens a client with one connection to Redis.
-- syntax: client, err = redislock.connect{url=, host=, port=, path=, username=,
--           password=, db=, connect_timeout=2, timeout=2, prefix="",
--           transport="native", strict=false, fence_ttl=60, on_event=nil,
--           native_commands=true, tls=nil, sentinel_tls=true,
--           holder="<hostname>:<pid>"}
-- tls = {ca=, cert=, key=, server_name=, verify=true}: TLS, as a rediss://
-- url is (docs/tls.md).
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
  -- Cluster hashes the text between a key's first "{" and the first "}"
  -- after it, unless that text is empty. Every key of a name carries the
  -- name as that tag (redislock.keys), so they share a slot; but a prefix
  -- whose first "{" is followed at once by "}" makes the tag empty: Redis
  -- hashes each whole key, the keys of a name land in different slots, and
  -- every script fails with CROSSSLOT. Refused here, where the cause is
  -- clear; every other prefix is stored as given, braces included (one with
  -- a whole tag, "{app}:", puts every name in that tag's slot: Redis' rule,
  -- which the user wrote). Escaping it instead would change the keys a
  -- deployment already uses, and ACL patterns written for the prefix.
  local brace = cfg.mode == "cluster" and prefix:find("{", 1, true)
  if brace and prefix:sub(brace + 1, brace + 1) == "}" then
    argerror("connect", "prefix", "under Cluster a prefix whose first '{' is followed by '}' " ..
      "splits a name's keys over slots (CROSSSLOT)")
  end
  check_type("connect", "strict", opts.strict, "boolean", true)
  local fence_ttl = opts.fence_ttl == nil and DEFAULT_FENCE_TTL or opts.fence_ttl
  check_number("connect", "fence_ttl", fence_ttl, 1, 2 ^ 31)
  local open = TRANSPORTS[opts.transport == nil and "native" or opts.transport]
  if not open then
    argerror("connect", "transport", "'native' or 'cosocket' expected, got " .. tostring(opts.transport))
  end

  checks.check_callable("connect", "on_event", opts.on_event, true)
  require("redislock.holder").check("connect", opts.holder)
  local settings = { prefix = prefix, fence_ttl = fence_ttl, on_event = opts.on_event, holder = opts.holder,
    yields = opts.transport == "cosocket", mode = cfg.mode }
  if opts.redlock ~= nil then
    return redlock_connect(opts, settings, cfg)
  end
  local ch, err, kind = opened(pcall(open, cfg))
  if not ch then return errors.fail(err, kind) end
  channel.check(ch)
  local warnings
  warnings, err = eviction_check(ch, opts.strict)
  if not warnings then
    ch:close()
    return nil, err, "unsafe"
  end
  warnings[#warnings + 1] = tls_warning(cfg.tls)
  settings.warnings = warnings
  return clientmod.new(ch, settings)
end

return _M

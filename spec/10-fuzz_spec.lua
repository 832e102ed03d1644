-- The Lua-level fuzzer: every public function of the Lua API (and the C
-- core's Lua-facing functions) called with random Lua values in random
-- positions, against a real redis-server, for a fixed budget. Each call must
-- either raise an error that is a string, return nil, err with err a string
-- (whose first word is one of the documented ones), or succeed; no message
-- may contain a password or a lock token; and the host process must survive
-- (reaching the summary at all is the proof).
--
--   REDISLOCK_FUZZ_SEED=n        another seed (default below; printed)
--   REDISLOCK_FUZZ_ITERATIONS=n  calls to make (default sized for < 10 s)
--
-- The PRNG is our own (MINSTD, exact in doubles), so a seed means the same
-- sequence of choices on every Lua; outcomes that depend on timing (a lock
-- busy or not) can still make two runs drift apart after a while.
--
-- Safety: connects only to the spec's own redis-server or to 127.0.0.1:1;
-- conn:command's first argument comes from an allow-list (or is not a
-- string); core.sleep only ever gets 0 or a value that must be refused; the
-- process functions (kill, spawn, fork, _exit, signalfd, signal_wait) are
-- never called; a random `wait` above 0.05 s is cut to 0.05 s.
local helpers = require "spec.helpers"
local redislock = require "redislock"
local core = require "redislock.core"
local url = require "redislock.url"

local unpack = table.unpack or unpack -- luacheck: ignore 143
local function pack(...) return { n = select("#", ...), ... } end

local DEFAULT_SEED = 20240611
local SEED = tonumber(os.getenv("REDISLOCK_FUZZ_SEED") or "") or DEFAULT_SEED
local ITERATIONS = tonumber(os.getenv("REDISLOCK_FUZZ_ITERATIONS") or "") or 12000

---------------------------------------------------------------------------
-- PRNG: Park-Miller MINSTD. Independent of math.random (which the code under
-- test or other specs may use).
---------------------------------------------------------------------------

local M31 = 2147483647
local prng_state = 1

local function reseed(seed)
  prng_state = math.floor(math.abs(seed)) % (M31 - 1) + 1
end

local function rand()
  prng_state = (prng_state * 48271) % M31
  return prng_state
end

local function rint(lo, hi) return lo + rand() % (hi - lo + 1) end
local function chance(p) return rand() < p * M31 end
local function pick(t) return t[rint(1, #t)] end

---------------------------------------------------------------------------
-- Random Lua values
---------------------------------------------------------------------------

local HUGE_STRING = string.rep("x\0", 512 * 1024)          -- 1 MB
local FN_ERROR = setmetatable({}, { __tostring = function() return "FN_ERROR" end })

local SPECIAL_INTS = {
  0, 1, -1, 2, 1000, 65535, 65536, 2147483648, 9007199254740993,
  math.maxinteger or 2 ^ 53, math.mininteger or -2 ^ 53,
}
local SPECIAL_FLOATS = {
  0 / 0, -(0 / 0), math.huge, -math.huge, -0.0, 1e308, -1e308, 5e-324, 0.5, 0.001,
  0.0005, 0.05, 1.5, 2147483648.5, 1e-300, 2 ^ 63, -2 ^ 63, 86400.5, 1e10,
}
local SPECIAL_STRINGS = {
  "", "0", "1", "-1", "1.5", "nan", "inf", "1e308", "0x10", "  7  ", "%s%s%s%n", "\r\n",
  "a\0b", "\0", "*1\r\n$3\r\nfoo\r\n", "{", "}", "{fz:a}", "{fz:a}:fence", "fz:a", "fz:b",
  "redis://127.0.0.1:1", "redis://:pw@127.0.0.1:1/1", "unix:///nonexistent/x?db=1",
  "redis://[::1]:1", "rediss://127.0.0.1:1", "ttl", "wait", "acquire", "release", "extend",
  "\255\254", string.rep("z", 300),
}
local ALPHABET = { "\0", "\r", "\n", "%", "s", "{", "}", ":", "@", "/", "[", "]", "?", "=",
  "a", "b", "1", "9", " ", "\255", "\128", "x", "." }

local OPTION_KEYS = {
  "ttl", "wait", "watchdog", "on_lost", "max_hold", "notify", "fair",
  "url", "host", "port", "path", "username", "password", "db", "connect_timeout",
  "timeout", "prefix", "bogus", 1,
}

local function random_string()
  local r = rand() % 100
  if r < 40 then return pick(SPECIAL_STRINGS) end
  if r == 99 and chance(0.3) then return HUGE_STRING end
  local t = {}
  for i = 1, rint(0, 40) do
    t[i] = chance(0.5) and pick(ALPHABET) or string.char(rint(0, 255))
  end
  return table.concat(t)
end

-- __index handlers that never hand out something usable as an endpoint or a
-- long wait: they raise, or give a value of a type every field refuses.
local SAFE_INDEX = {
  function(_, k) error("fuzz __index for " .. tostring(k)) end,
  function() return -1 end,
  function() return false end,
  function() return {} end,
}

local extras = {}      -- objects of other types, filled in by setup

local random_value

local function random_table(depth)
  local t = {}
  local kind = rint(1, 6)
  if kind == 1 then
    return t
  elseif kind == 2 then
    for i = 1, rint(1, 5) do t[i] = random_value(depth + 1) end
  elseif kind == 3 or kind == 4 then
    for _ = 1, rint(1, 5) do
      local k = pick(OPTION_KEYS)
      t[k] = random_value(depth + 1)
    end
  elseif kind == 5 then
    t.self = t
    t[1] = t
    t.ttl = t
  else
    for _ = 1, rint(0, 3) do t[pick(OPTION_KEYS)] = random_value(depth + 1) end
    local mt = { __index = pick(SAFE_INDEX) }
    if chance(0.5) then mt.__call = function(_, ...) return ... end end
    if chance(0.3) then mt.__tostring = function() error("fuzz __tostring") end end
    setmetatable(t, mt)
  end
  return t
end

local FUNCTIONS = {
  function() end,
  function(...) return ... end,
  function() error("fuzz function error") end,
  function() error(FN_ERROR) end,
  function() coroutine.yield() end,
}

random_value = function(depth)
  depth = depth or 0
  local r = rint(1, depth > 2 and 11 or 13)
  if r == 1 then return nil
  elseif r == 2 then return chance(0.5)
  elseif r == 3 then return rint(-1000, 1000)
  elseif r == 4 then return pick(SPECIAL_INTS)
  elseif r == 5 then return pick(SPECIAL_FLOATS)
  elseif r == 6 then return (rand() - M31 / 2) * 1e-3
  elseif r == 7 or r == 8 then return random_string()
  elseif r == 9 then return pick(FUNCTIONS)
  elseif r == 10 then
    local co = coroutine.create(function() end)
    if chance(0.5) then coroutine.resume(co) end     -- a dead one
    return co
  elseif r == 11 then return pick(extras)
  else return random_table(depth)
  end
end

-- Arguments for a Redis command: mostly strings and numbers.
local function random_args(n)
  local t = { n = n }
  for i = 1, n do
    local r = rand() % 10
    t[i] = r < 6 and random_string() or r < 8 and pick(SPECIAL_INTS) or random_value()
  end
  return t
end

---------------------------------------------------------------------------
-- The spec
---------------------------------------------------------------------------

describe("lua fuzzer", function()
  local srv
  local clients, locks, conns = {}, {}, {}
  local secrets = {}            -- passwords and tokens: never in a message
  local stats = { calls = 0, raised = 0, nil_err = 0, ok = 0 }
  local violations = {}
  local iteration = 0

  local function violation(label, msg)
    if #violations < 20 then
      violations[#violations + 1] = ("seed %d iteration %d: %s: %s"):format(SEED, iteration, label, msg)
    end
  end

  local function no_secret(label, msg)
    for s in pairs(secrets) do
      if msg:find(s, 1, true) then violation(label, "message contains a secret: " .. msg:sub(1, 200)) end
    end
  end

  local WORLD_ERR = { "^busy", "^timeout", "^not held", "^stale", "^connection ", "^redis error" }
  local function world_err(err)
    for _, p in ipairs(WORLD_ERR) do
      if err:find(p) then return true end
    end
    return false
  end

  -- Calls f(...) and classifies the outcome; returns the results when it
  -- succeeded. `contract`: nil, err must have a documented first word.
  local per_label = {}  -- label -> { raised =, nil_err =, ok = } (REDISLOCK_FUZZ_VERBOSE)
  local function tally(label, kind, detail)
    local t = per_label[label] or { raised = 0, nil_err = 0, ok = 0, samples = {} }
    per_label[label] = t
    t[kind] = t[kind] + 1
    if detail and #t.samples < 6 then t.samples[#t.samples + 1] = tostring(detail):sub(1, 100) end
  end

  local function call(label, contract, f, ...)
    stats.calls = stats.calls + 1
    local res = pack(pcall(f, ...))
    tally(label, not res[1] and "raised" or (res.n >= 2 and res[2] == nil) and "nil_err" or "ok",
      not res[1] and res[2] or res[3])
    if not res[1] then
      local e = res[2]
      stats.raised = stats.raised + 1
      if e == FN_ERROR then return nil end          -- fn's own error, passed on unchanged
      if type(e) ~= "string" then
        violation(label, "raised a " .. type(e) .. " (" .. tostring(e) .. "), not a string")
      else
        no_secret(label, e)
      end
      return nil
    end
    if res.n >= 2 and res[2] == nil then
      local err = res[3]
      if type(err) ~= "string" then
        violation(label, "returned nil with a " .. type(err) .. " error")
        return nil
      end
      stats.nil_err = stats.nil_err + 1
      no_secret(label, err)
      if contract and not world_err(err) then
        violation(label, "undocumented error: " .. err:sub(1, 200))
      end
      return nil
    end
    stats.ok = stats.ok + 1
    return res
  end

  ---- pools ---------------------------------------------------------------

  -- Keeps at most `max` items in `list`, closing the oldest with `close`.
  local function keep(list, item, max, close)
    list[#list + 1] = item
    if #list > max then
      local old = table.remove(list, 1)
      pcall(old[close], old)
    end
  end

  local function add_lock(l)
    if type(l) ~= "table" or getmetatable(l) == nil or type(l.token) ~= "string" then return end
    secrets[l.token] = true
    keep(locks, l, 8, "release")
  end

  local function add_client(c) keep(clients, c, 4, "close") end
  local function add_conn(c) keep(conns, c, 3, "close") end

  local function open_clients()
    local n = 0
    for _, c in ipairs(clients) do
      if not c._conn:closed() then n = n + 1 end
    end
    return n
  end

  ---- plausible arguments -------------------------------------------------

  local NAMES = { "fz:a", "fz:b", "fz:c", "fz:\0", "fz:{x}", "fz:a:fence" }

  local function a_name()
    local r = rand() % 10
    if r < 6 then return pick(NAMES) end
    if r < 9 then return random_string() end
    return random_value()
  end

  local function a_client()
    if chance(0.05) then return random_value() end
    local i = rint(1, #clients)
    local c = clients[i]
    -- Closed clients stay around for a while (using one must raise), but
    -- most get replaced so that the rest of the API sees open ones.
    if c._conn:closed() and chance(0.5) then
      c = assert(redislock.connect { url = srv.url })
      clients[i] = c
    end
    return c
  end

  local function a_conn()
    if #conns == 0 or chance(0.05) then return random_value() end
    local i = rint(1, #conns)
    if conns[i]:closed() and chance(0.5) then conns[i] = assert(core.connect { port = srv.port }) end
    return conns[i]
  end

  local function a_lock()
    if #locks == 0 or chance(0.05) then return random_value() end
    return pick(locks)
  end

  local function a_resource()
    if chance(0.8) then return pick({ "fz:r1", "fz:r2", "fz:a" }) end
    return a_name()
  end

  local function a_fence()
    local r = rand() % 10
    if r < 4 and #locks > 0 then return pick(locks).fence end
    if r < 7 then return rint(1, 50) end
    if r < 8 then return pick(SPECIAL_INTS) end
    return random_value()
  end

  local ON_LOST = {
    function() end,
    function() error("fuzz on_lost error") end,
    function(lock) return lock:held() end,
    function(lock) return lock._client:poll() end,
  }

  local function a_ttl()
    if chance(0.2) then return random_value() end
    return pick({ 0.05, 0.5, 1, 5, 30, 0.001, 0.0005, 2 ^ 31 })
  end

  -- wait > 0.05 (inf included) becomes 0.05 for the real call; NaN,
  -- negative and wrong types pass through so the validation is exercised.
  local function clamp_wait(opts)
    if type(opts) == "table" then
      local w = rawget(opts, "wait")
      if type(w) == "number" and w > 0.05 then rawset(opts, "wait", 0.05) end
    end
    return opts
  end

  local function acquire_opts()
    local r = rand() % 10
    if r == 0 then return nil end
    if r == 1 then return random_value() end
    local o = {}
    if chance(0.6) then o.ttl = a_ttl() end
    if chance(0.4) then o.wait = chance(0.9) and pick({ 0, 0, 0.01, 0.05, math.huge }) or random_value() end
    if chance(0.3) then o.watchdog = chance(0.92) and chance(0.5) or random_value() end
    if chance(0.3) then o.on_lost = chance(0.92) and pick(ON_LOST) or random_value() end
    if chance(0.2) then o.max_hold = chance(0.9) and pick({ 0.01, 1, 100 }) or random_value() end
    if chance(0.2) then o.notify = chance(0.92) and chance(0.5) or random_value() end
    if chance(0.1) then o.fair = chance(0.92) and chance(0.5) or random_value() end
    if chance(0.05) then o[pick(OPTION_KEYS)] = random_value() end
    return o
  end

  local function percent(s)
    return (s:gsub("[^%w]", function(c) return ("%%%02X"):format(c:byte()) end))
  end

  -- Points a connect() table at our server or at 127.0.0.1:1, whatever the
  -- fuzzer put in; values of the wrong type stay (they must raise first).
  local function sanitize_connect(opts)
    if type(opts) ~= "table" then return opts end
    local port = chance(0.8) and srv.port or 1
    local u = rawget(opts, "url")
    if type(u) == "string" then
      local ok, f = pcall(url.parse, u)
      if ok then
        local userinfo = f.password and (percent(f.username or "") .. ":" .. percent(f.password) .. "@") or ""
        local db = f.db and ("/" .. ("%.0f"):format(f.db)) or ""
        rawset(opts, "url", "redis://" .. userinfo .. "127.0.0.1:" .. port .. db)
      end
    end
    local h = rawget(opts, "host")
    if type(h) == "string" then rawset(opts, "host", "127.0.0.1") end
    local p = rawget(opts, "port")
    if p == nil and rawget(opts, "url") == nil then
      rawset(opts, "port", port)
    elseif type(p) == "number" and p >= 1 and p <= 65535 and p == math.floor(p) then
      rawset(opts, "port", port)
    end
    if type(rawget(opts, "path")) == "string" then
      rawset(opts, "path", "/nonexistent/redislock-fuzz.sock")
    end
    return opts
  end

  local function connect_opts()
    local r = rand() % 10
    if r == 0 then return random_value() end
    local o = {}
    if r < 4 then
      o.url = chance(0.7) and ("redis://127.0.0.1:%d/%d"):format(srv.port, rint(0, 20)) or random_string()
    else
      if chance(0.3) then o.host = chance(0.7) and "127.0.0.1" or random_value() end
      if chance(0.5) then o.port = chance(0.8) and srv.port or random_value() end
      if chance(0.1) then o.path = random_value() end
      if chance(0.2) then o.db = chance(0.7) and rint(0, 20) or random_value() end
      if chance(0.1) then o.username = random_value() end
    end
    if chance(0.15) then
      -- A password we look for in every message from now on.
      local pw = ("pw-%08x%08x"):format(rand(), rand())
      secrets[pw] = true
      if o.url then
        o.url = o.url:gsub("^redis://", "redis://" .. (chance(0.5) and "u" or "") .. ":" .. pw .. "@")
      else
        o.password = pw
      end
    end
    if chance(0.2) then o.timeout = chance(0.7) and pick({ 0, 0.05, 1, 2 }) or random_value() end
    if chance(0.2) then o.connect_timeout = chance(0.7) and pick({ 0.05, 1, 2 }) or random_value() end
    if chance(0.2) then o.prefix = random_string() end
    if chance(0.05) then o[pick(OPTION_KEYS)] = random_value() end
    return o
  end

  local function fields()
    local r = rand() % 10
    if r == 0 then return random_value() end
    local f = {}
    if chance(0.3) then f.host = random_value() end
    if chance(0.5) then f.port = chance(0.7) and srv.port or random_value() end
    if chance(0.1) then f.path = random_value() end
    if chance(0.2) then f.db = chance(0.7) and rint(0, 20) or random_value() end
    if chance(0.2) then f.password = random_value() end
    if chance(0.1) then f.username = random_value() end
    if chance(0.2) then f.timeout = random_value() end
    if chance(0.2) then f.connect_timeout = random_value() end
    if chance(0.1) then setmetatable(f, { __index = pick(SAFE_INDEX) }) end
    return f
  end

  -- core.connect fields: the C core checks no integrality, so any in-range
  -- port number is replaced.
  local function sanitize_fields(f)
    if type(f) ~= "table" then return f end
    local port = chance(0.8) and srv.port or 1
    local h = rawget(f, "host")
    if h == nil or type(h) == "string" then rawset(f, "host", "127.0.0.1") end
    local p = rawget(f, "port")
    if p == nil or (type(p) == "number" and p >= 1 and p <= 65535) then rawset(f, "port", port) end
    if type(rawget(f, "path")) == "string" then rawset(f, "path", "/nonexistent/redislock-fuzz.sock") end
    return f
  end

  local SAFE_COMMANDS = { "GET", "SET", "PTTL", "EXISTS", "DEL", "PING", "ECHO", "INCR", "PEXPIRE",
    "TTL", "STRLEN", "TYPE", "get", "set", "del" }

  local function command_name()
    local r = rand() % 10
    if r < 7 then return pick(SAFE_COMMANDS) end
    if r < 8 then return "fz-not-a-command-" .. random_string() end
    -- Not a string: numbers are sent as digits (no command has such a name).
    local v = random_value()
    if type(v) == "string" then return "fz-not-a-command" end
    return v
  end

  local script_names = {}
  local CM, LM          -- the Client and Lock method tables: self can be anything

  local function cap_sleep(v)
    local n = tonumber(v)
    if n and n > 0 then return 0 end
    return v
  end

  local function with_extra(args)
    if chance(0.1) then
      local n = args.n
      for i = 1, rint(1, 2) do args[n + i] = random_value() end
      args.n = n + 2
    end
    return unpack(args, 1, args.n)
  end

  local WITH_LOCK_FNS

  ---- targets -------------------------------------------------------------

  local TARGETS = {
    { "redislock.connect", 3, function()
        local res = call("redislock.connect", true, redislock.connect,
          with_extra({ n = 1, sanitize_connect(connect_opts()) }))
        if res and type(res[2]) == "table" then add_client(res[2]) end
      end },
    { "client:acquire", 14, function()
        local res = call("client:acquire", true, CM.acquire, a_client(), a_name(), clamp_wait(acquire_opts()))
        if res then add_lock(res[2]) end
      end },
    { "client:with_lock", 6, function()
        local args = { n = 4, a_client(), a_name(), clamp_wait(acquire_opts()), pick(WITH_LOCK_FNS)() }
        if chance(0.3) then args[5] = random_value(); args.n = 5 end
        call("client:with_lock", true, CM.with_lock, unpack(args, 1, args.n))
      end },
    { "lock:extend", 6, function() call("lock:extend", true, LM.extend, a_lock(), a_ttl()) end },
    { "lock:release", 5, function()
        call("lock:release", true, LM.release, a_lock(), with_extra({ n = 0 }))
      end },
    { "lock:held", 3, function() call("lock:held", false, LM.held, a_lock()) end },
    { "lock:lease_end", 2, function()
        if not LM.lease_end then return end
        local l = a_lock()
        -- Not a nil, err function: a real lock gives a number; anything
        -- else as self may raise or give nil.
        local ok, t = pcall(LM.lease_end, l)
        stats.calls = stats.calls + 1
        if not ok then
          stats.raised = stats.raised + 1
          if type(t) ~= "string" then violation("lock:lease_end", "raised a " .. type(t)) end
        else
          stats.ok = stats.ok + 1
          if getmetatable(l) == LM and type(t) ~= "number" then
            violation("lock:lease_end", ("a lock (%s) gave %s"):format(tostring(l._state), tostring(t)))
          end
        end
      end },
    { "tostring(lock)", 1, function() call("tostring(lock)", false, tostring, a_lock()) end },
    { "lock:__close", 1, function() call("lock:__close", false, LM.__close, a_lock()) end },
    { "client:poll", 2, function() call("client:poll", false, CM.poll, a_client(), with_extra({ n = 0 })) end },
    { "client:stats", 2, function() call("client:stats", false, CM.stats, a_client()) end },
    { "client:fd", 2, function() call("client:fd", false, CM.fd, a_client()) end },
    { "client:inspect", 3, function() call("client:inspect", true, CM.inspect, a_client(), a_name()) end },
    { "client:release_token", 3, function()
        local token = (#locks > 0 and chance(0.5)) and pick(locks).token or random_value()
        call("client:release_token", true, CM.release_token, a_client(), a_name(), token)
      end },
    { "client:break_lock", 2, function() call("client:break_lock", true, CM.break_lock, a_client(), a_name()) end },
    { "client:fenced_set", 3, function()
        if not CM.fenced_set then return end
        local value = chance(0.8) and (chance(0.5) and random_string() or rint(-5, 5)) or random_value()
        call("client:fenced_set", true, CM.fenced_set, a_client(), a_resource(), value, a_fence())
      end },
    { "client:fenced_get", 3, function()
        if not CM.fenced_get then return end
        call("client:fenced_get", true, CM.fenced_get, a_client(), a_resource(), a_fence())
      end },
    { "client:close", 1, function() call("client:close", false, CM.close, a_client()) end },
    { "tostring(client)", 1, function() call("tostring(client)", false, tostring, a_client()) end },
    { "url.parse", 4, function()
        local v = chance(0.6) and random_string() or random_value()
        stats.calls = stats.calls + 1
        local ok, res = pcall(url.parse, v)
        if ok then
          stats.ok = stats.ok + 1
          if type(res) ~= "table" then violation("url.parse", "returned a " .. type(res)) end
        else
          stats.raised = stats.raised + 1
          if type(res) ~= "string" or not res:find("^redislock:") then
            violation("url.parse", "error is not a redislock: string: " .. tostring(res))
          elseif type(v) == "string" and v:find("pw-", 1, true) then
            no_secret("url.parse", res)
          end
        end
      end },
    { "core.connect", 3, function()
        local res = call("core.connect", true, core.connect, sanitize_fields(fields()), with_extra({ n = 0 }))
        if res and type(res[2]) == "userdata" then add_conn(res[2]) end
      end },
    { "conn:command", 5, function()
        local c = a_conn()
        local args = random_args(rint(0, 4))
        call("conn:command", true, function(...) return c:command(...) end, command_name(),
          unpack(args, 1, args.n))
      end },
    { "conn:script", 4, function()
        local c = a_conn()
        local name = chance(0.8) and pick(script_names) or random_value()
        local args = random_args(rint(0, 7))
        call("conn:script", true, function(...) return c:script(...) end, name, unpack(args, 1, args.n))
      end },
    { "conn:close", 1, function()
        if #conns > 0 then call("conn:close", false, function(c) return c:close() end, pick(conns)) end
      end },
    { "core.token", 1, function() call("core.token", false, core.token, with_extra({ n = 0 })) end },
    { "core.monotime", 1, function() call("core.monotime", false, core.monotime, with_extra({ n = 0 })) end },
    { "core.sleep", 1, function()
        local v = chance(0.3) and 0 or cap_sleep(random_value())
        call("core.sleep", false, core.sleep, v)
      end },
  }

  WITH_LOCK_FNS = {
    function() return function(lock) return lock.fence end end,
    function() return function() error("fuzz fn error") end end,
    function() return function() error(FN_ERROR) end end,
    function() return function(lock) return lock:release() end end,
    function() return function(lock) return lock:extend(a_ttl()) end end,
    function() return function(lock) return lock._client:close() end end,
    function() return function(lock) add_lock(lock) end end,
    function() return function() coroutine.yield() end end,
    function() return setmetatable({}, { __call = function(_, lock) return lock.name end }) end,
    function() return random_value() end,
  }

  local weighted = {}
  for i, t in ipairs(TARGETS) do
    for _ = 1, t[2] do weighted[#weighted + 1] = i end
  end

  setup(function()
    srv = helpers.start_redis()
    for name in pairs(core.scripts) do script_names[#script_names + 1] = name end
    table.sort(script_names)
    script_names[#script_names + 1] = "nope"
    local other = assert(redislock.connect { url = srv.url })
    other:close()
    local c = assert(redislock.connect { url = srv.url })
    local l = assert(c:acquire("fz:extras", { ttl = 5 }))
    CM, LM = getmetatable(c), getmetatable(l)
    extras = { io.stdout, io.stderr, other, other._conn, l._watch or io.stdout, core, redislock }
    l:release()
    c:close()
    add_client(assert(redislock.connect { url = srv.url }))
    add_conn(assert(core.connect { port = srv.port }))
  end)

  teardown(function()
    for _, l in ipairs(locks) do pcall(l.release, l) end
    for _, c in ipairs(clients) do pcall(c.close, c) end
    for _, c in ipairs(conns) do pcall(c.close, c) end
    locks, clients, conns = {}, {}, {}
    collectgarbage()
    if srv then srv:stop() end
  end)

  it("every call raises a string error, returns nil, err, or succeeds", function()
    print(("fuzz: seed=%d iterations=%d (REDISLOCK_FUZZ_SEED / REDISLOCK_FUZZ_ITERATIONS)")
      :format(SEED, ITERATIONS))
    reseed(SEED)
    local t0 = helpers.monotime()
    for i = 1, ITERATIONS do
      iteration = i
      if open_clients() == 0 then add_client(assert(redislock.connect { url = srv.url })) end
      local target = TARGETS[weighted[rint(1, #weighted)]]
      target[3]()
      if i % 500 == 0 then collectgarbage() end
    end
    local elapsed = helpers.monotime() - t0
    print(("fuzz: seed=%d calls=%d raised=%d nil-err=%d ok=%d violations=%d (%.1f s)"):format(
      SEED, stats.calls, stats.raised, stats.nil_err, stats.ok, #violations, elapsed))
    if os.getenv("REDISLOCK_FUZZ_VERBOSE") then
      for label, t in pairs(per_label) do
        print(("  %-22s raised=%d nil-err=%d ok=%d"):format(label, t.raised, t.nil_err, t.ok))
        for _, m in ipairs(t.samples) do print("      " .. m:gsub("%c", "?")) end
      end
    end
    assert(#violations == 0, table.concat(violations, "\n"))
    -- The server is still there and answers.
    assert.equal("PONG", (srv:cli("PING")))
  end)
end)

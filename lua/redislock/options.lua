--- redislock.options: the options of every call that takes a lease
-- (client:acquire and with_lock, adopt, rw:read, rw:write, sem:acquire,
-- the Redlock client's acquire): one check per option, written once, and
-- the set each of them takes.
--
-- The common case costs one type test and a range test per option given;
-- only a bad value goes on to the checks module, which words the error
-- (the same words as everywhere).

local checks = require "redislock.checks"
local lockmod = require "redislock.lock"
local holdermod = require "redislock.holder"
checks.own(debug.getinfo(1, "S").source)

local type, next, getmetatable = type, next, getmetatable
local check_number, check_type = checks.check_number, checks.check_type
local MIN_TTL, MAX_TTL = lockmod.MIN_TTL, lockmod.MAX_TTL

local _M = {}

_M.DEFAULT_TTL = 30
local DEFAULT_TTL = _M.DEFAULT_TTL
local MAX_SPIN = 1                -- seconds of busy-polling per wait, at most
-- Permits one sem:acquire takes at most (one member each in the permits'
-- set: lua/redislock/scripts/lib/permit_members.lua bounds them so too)
_M.MAX_PERMITS_AT_ONCE = 10000

-- What a call gets for opts = nil: no option set, none can be.
_M.EMPTY = setmetatable({}, { __newindex = function() error("read-only", 2) end })
local EMPTY = _M.EMPTY

local function check_boolean(fname, argname, v)
  if type(v) ~= "boolean" then check_type(fname, argname, v, "boolean") end
end

-- Every option, with its check.
local CHECK = {
  ttl = function(fname, v)
    if type(v) ~= "number" or not (v >= MIN_TTL and v <= MAX_TTL) then lockmod.check_ttl(fname, v) end
  end,
  wait = function(fname, v)
    if type(v) ~= "number" or not (v >= 0 and v <= MAX_TTL or v == math.huge) then
      check_number(fname, "wait", v, 0, MAX_TTL, true)
    end
  end,
  watchdog = function(fname, v) check_boolean(fname, "watchdog", v) end,
  on_lost = function(fname, v) checks.check_callable(fname, "on_lost", v) end,
  notify = function(fname, v) check_boolean(fname, "notify", v) end,
  fair = function(fname, v) check_boolean(fname, "fair", v) end,
  spin = function(fname, v) check_number(fname, "spin", v, 0, MAX_SPIN) end,
  max_hold = function(fname, v) check_number(fname, "max_hold", v, MIN_TTL, MAX_TTL) end,
  replicas = function(fname, v) lockmod.check_replicas(fname, v, nil) end,
  replicas_timeout = function(fname, v) lockmod.check_replicas(fname, nil, v) end,
  reentrant = function(fname, v) check_boolean(fname, "reentrant", v) end,
  owner = function(fname, v)
    checks.check_string(fname, "owner", v)
    if #v >= 64 then checks.argerror(fname, "owner", "at most 63 bytes") end
  end,
  fence = function(fname, v) check_boolean(fname, "fence", v) end,
  holder = function(fname, v) holdermod.check(fname, v) end,
  permits = function(fname, v) checks.check_integer(fname, "permits", v, 1, _M.MAX_PERMITS_AT_ONCE) end,
}

-- The set of options named `list`, each with its check.
local function set(list)
  local s = {}
  for _, k in ipairs(list) do s[k] = assert(CHECK[k]) end
  return s
end

--- What each call takes. (A Redlock client's acquire is LOCK's options
-- that one server's atomic view does not need: see redlock.lua.)
_M.LOCK = set { "ttl", "wait", "watchdog", "on_lost", "notify", "fair", "spin", "max_hold", "replicas",
  "replicas_timeout", "reentrant", "owner", "fence", "holder" }
_M.SHARE = set { "ttl", "wait", "watchdog", "on_lost", "max_hold", "notify", "spin", "holder" }
_M.PERMIT = set { "ttl", "wait", "watchdog", "on_lost", "max_hold", "notify", "spin", "holder", "permits" }
_M.ADOPT = set { "ttl", "watchdog", "on_lost", "max_hold" }
_M.SET = set { "ttl", "wait", "watchdog", "on_lost", "max_hold", "holder" }
_M.REDLOCK = set { "ttl", "wait", "watchdog", "on_lost", "max_hold", "holder" }
_M.REDLOCK.reentrant = function(fname, v)
  if v then checks.argerror(fname, "reentrant", "reentrant locks are not offered by a Redlock client") end
end

-- The options whose combinations settings() checks.
local COMBINED = { owner = true, fence = true, fair = true, reentrant = true, holder = true }

local function check_combined(fname, opts)
  if opts.owner ~= nil and not opts.reentrant then
    checks.argerror(fname, "owner", "only with reentrant = true")
  end
  if opts.fence == false and (opts.fair or opts.reentrant) then
    checks.argerror(fname, "fence", "fair and reentrant locks always carry a fence")
  end
  if opts.reentrant and opts.fair then
    checks.argerror(fname, "fair", "a reentrant lock cannot be fair")
  end
  if opts.fence == false and opts.holder then
    -- (the plain SET NX PX of fence = false writes nothing else)
    checks.argerror(fname, "holder", "recorded by the acquire script: not with fence = false")
  end
end

--- Checks a call's name and options against `known` (one of the sets
-- above), once; argument errors name `fname`.
-- syntax: opts, ttl, wait = options.settings(fname, name, opts, known)
-- opts: the table given, or EMPTY for nil.
function _M.settings(fname, name, opts, known)
  if type(name) ~= "string" or name == "" then checks.check_name(fname, name) end
  if opts == nil then return EMPTY, DEFAULT_TTL, 0 end
  if type(opts) ~= "table" then check_type(fname, "opts", opts, "table") end
  local ttl, wait, combined = DEFAULT_TTL, 0, false
  for k, v in next, opts do
    -- the options every call takes checked in line, the rest by their check
    if k == "ttl" then
      if type(v) ~= "number" or not (v >= MIN_TTL and v <= MAX_TTL) then lockmod.check_ttl(fname, v) end
      ttl = v
    elseif k == "watchdog" then
      if type(v) ~= "boolean" then check_type(fname, k, v, "boolean") end
    else
      local check = known[k]
      if not check then checks.argerror(fname, "opts", "unknown option '" .. tostring(k) .. "'") end
      check(fname, v)
      if k == "wait" then wait = v else combined = combined or COMBINED[k] end
    end
  end
  if getmetatable(opts) ~= nil then
    -- options with defaults behind __index (or a proxy): every option read
    -- through it is checked too, and they are combined as given
    for k, check in next, known do
      local v = opts[k]
      if v ~= nil then check(fname, v) end
    end
    ttl, wait, combined = opts.ttl or DEFAULT_TTL, known.wait and opts.wait or 0, true
  end
  if combined then check_combined(fname, opts) end
  return opts, ttl, wait
end

return _M

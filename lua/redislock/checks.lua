--- redislock.checks: argument checking for the whole library.
--
-- Usage errors raise at the caller's line (the first stack level outside
-- the library's own files) with a message that names the argument and the
-- function: "redislock: bad argument 'ttl' to 'acquire' (must be between
-- ...)". World failures are never raised: they return nil, err.

local _M = {}

local huge = math.huge

-- The sources of the library's own files: each module registers itself.
local own = {}

--- Marks the calling file as part of the library, so errors skip it.
-- syntax: checks.own(debug.getinfo(1, "S").source)
function _M.own(source) own[source] = true end
_M.own(debug.getinfo(1, "S").source)

-- The stack level of the first function outside the library, as seen from
-- the function that calls error() (so level 2 is its caller).
local function caller_level()
  local level = 3
  while true do
    local info = debug.getinfo(level, "S")
    -- Lua 5.1 and LuaJIT mark a tail call with a frame of its own
    if not info or (not own[info.source] and info.what ~= "tail") then return level - 1 end
    level = level + 1
  end
end

--- Raises "redislock: <msg>" at the caller's line.
function _M.raise(msg)
  error("redislock: " .. msg, caller_level())
end

--- Raises a bad-argument error that names fname and argname.
function _M.argerror(fname, argname, msg)
  error(string.format("redislock: bad argument '%s' to '%s' (%s)", argname, fname, msg), caller_level())
end
local argerror = _M.argerror

function _M.check_type(fname, argname, value, want, optional)
  if value == nil and optional then return end
  if type(value) ~= want then
    argerror(fname, argname, want .. " expected, got " .. type(value))
  end
end

--- A value that can be called: a function or a table with __call.
function _M.callable(v)
  if type(v) == "function" then return true end
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__call ~= nil
end

function _M.check_callable(fname, argname, value, optional)
  if value == nil and optional then return end
  if not _M.callable(value) then
    argerror(fname, argname, "function expected, got " .. type(value))
  end
end

-- A bound as a message shows it: an integer with every digit (%g would
-- write 2^31 as 2.14748e+09), anything else as %g.
local function bound(x)
  if x == math.floor(x) and x > -1e15 and x < 1e15 then return string.format("%.0f", x) end
  return string.format("%g", x)
end

-- A finite number within [lo, hi]; NaN fails every comparison and so fails.
function _M.check_number(fname, argname, value, lo, hi, allow_inf)
  if type(value) ~= "number" then
    argerror(fname, argname, "number expected, got " .. type(value))
  end
  if value ~= value then argerror(fname, argname, "number expected, got NaN") end
  if value == huge and allow_inf then return end
  if not (value >= lo and value <= hi) then
    argerror(fname, argname, "must be between " .. bound(lo) .. " and " .. bound(hi))
  end
end

function _M.check_integer(fname, argname, value, lo, hi)
  _M.check_number(fname, argname, value, lo, hi)
  if value ~= math.floor(value) then argerror(fname, argname, "integer expected") end
end

--- Checks opts against the set of known option names; returns opts or {}.
function _M.check_options(fname, opts, known)
  if opts == nil then return {} end
  _M.check_type(fname, "opts", opts, "table")
  for k in pairs(opts) do
    if not known[k] then
      argerror(fname, "opts", "unknown option '" .. tostring(k) .. "'")
    end
  end
  return opts
end

function _M.check_string(fname, argname, value, optional)
  if value == nil and optional then return end
  _M.check_type(fname, argname, value, "string")
  if value == "" then argerror(fname, argname, "non-empty string expected") end
end

--- A string the C core keeps as a C string (a path, a password, a file
-- name): a NUL byte would end it early, so one is refused, never cut.
function _M.check_no_nul(fname, argname, value)
  if type(value) == "string" and value:find("\0", 1, true) then
    argerror(fname, argname, "holds a NUL byte")
  end
end

function _M.check_name(fname, name)
  _M.check_string(fname, "name", name)
end

return _M

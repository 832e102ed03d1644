--- redislock.cli_options: the command line's getopt-style options and the
-- NAME checks, for cli.lua. A usage error is raised as { usage = msg }:
-- cli.main turns it into exit status 2 and a pointer to the command's help.

local _M = {}

-- Raises a usage error.
function _M.usage(msg)
  error({ usage = msg }, 0)
end

local usage = _M.usage

-- An option table: long name -> kind ("flag", "string", "number") or
-- { kind, key = canonical name }; short letters map to long names.
local COMMON = {
  url = "list", ["url-file"] = "string", prefix = "string", strict = "flag",
  help = "flag", version = "flag",
  ["tls-ca"] = "string", ["tls-cert"] = "string", ["tls-key"] = "string",
  ["tls-server-name"] = "string", ["tls-insecure"] = "flag",
}
local COMMON_SHORT = { h = "help", V = "version" }

local function spec_of(extra, short)
  local long, letters = {}, {}
  for k, v in pairs(COMMON) do long[k] = v end
  for k, v in pairs(extra or {}) do long[k] = v end
  for k, v in pairs(COMMON_SHORT) do letters[k] = v end
  for k, v in pairs(short or {}) do letters[k] = v end
  return { long = long, short = letters }
end

local function set_option(opts, spec, name, shown, value, next_arg)
  local kind = spec.long[name]
  local key = name
  if type(kind) == "table" then kind, key = kind[1], kind.key end
  if kind == "flag" then
    if value then usage(shown .. " takes no value") end
    opts[key] = true
    return false
  end
  local used_next = false
  if value == nil then
    value = next_arg
    if value == nil then usage(shown .. " needs a value") end
    used_next = true
  end
  if kind == "list" then
    opts[key] = opts[key] or {}
    table.insert(opts[key], value)
    return used_next
  end
  if kind == "number" then
    local n = tonumber(value)
    if not n or n ~= n or n < 0 or n == math.huge then
      usage(shown .. ": not a non-negative number: " .. value)
    end
    value = n
  end
  opts[key] = value
  return used_next
end

-- Parses getopt-style options from args[first]: --name, --name=value,
-- --name value, -x, -xVALUE, -x VALUE, and clusters of flags (-no). Stops
-- at the first argument that is not an option, or after "--". Returns
-- opts and the rest of the arguments.
local function parse(args, first, spec)
  local opts, i = {}, first
  while i <= #args do
    local a = args[i]
    if a == "--" then
      i = i + 1
      break
    end
    if a:sub(1, 1) ~= "-" or a == "-" then break end
    if a:sub(1, 2) == "--" then
      local name, value = a:match("^%-%-([^=]+)=(.*)$")
      name = name or a:sub(3)
      if not spec.long[name] then usage("unknown option --" .. name) end
      if set_option(opts, spec, name, "--" .. name, value, args[i + 1]) then i = i + 1 end
    else
      local j = 2
      while j <= #a do
        local letter = a:sub(j, j)
        local name = spec.short[letter]
        if not name then usage("unknown option -" .. letter) end
        local kind = spec.long[name]
        if type(kind) == "table" then kind = kind[1] end
        if kind == "flag" then
          set_option(opts, spec, name, "-" .. letter)
          j = j + 1
        else
          local value = a:sub(j + 1)
          if value == "" then value = nil end
          if set_option(opts, spec, name, "-" .. letter, value, args[i + 1]) then i = i + 1 end
          break
        end
      end
    end
    i = i + 1
  end
  local rest = {}
  for j = i, #args do rest[#rest + 1] = args[j] end
  return opts, rest
end

-- NAME, checked: lock names that look like options are refused, so that a
-- misplaced option (`break --force -x`) never becomes a lock name.
local function check_name(name, cmd)
  if name == nil or name == "" then usage(cmd .. " needs a NAME") end
  if name:sub(1, 1) == "-" then
    usage("NAME must not start with '-' (options go before NAME): " .. name)
  end
  return name
end

local function one_name(rest, cmd)
  local name = check_name(rest[1], cmd)
  if rest[2] ~= nil then
    if rest[2]:sub(1, 1) == "-" then usage("options go before NAME: " .. rest[2]) end
    usage(cmd .. " takes exactly one NAME")
  end
  return name
end

_M.spec_of, _M.parse, _M.check_name, _M.one_name = spec_of, parse, check_name, one_name

return _M

--[[
tools/check_functions.lua -- every Lua function short and with few
parameters: at most MAX_LINES lines (from its `function` to its `end`) and
at most MAX_PARAMS parameters (a method's self counts; `...` does not). A
longer list wants a record, a longer body a helper (docs/design.md).

usage: lua tools/check_functions.lua LUAC PATH...
PATH: Lua files, or directories searched for *.lua. The spec files
themselves (*_spec.lua) are left out: busted's describe and it blocks are
declarations, not functions one calls. Run by `make lint`.

The listing of LUAC (luac -p -l: the compiler's own parse, so nothing here
reads Lua syntax) gives each function's first and last line and its
parameter count. Prints "file:line: ..." for each breach and exits 1;
prints nothing and exits 0 when there is none.
]]

local MAX_LINES, MAX_PARAMS = 80, 7

local luac = arg[1]
if not luac or not arg[2] then
  io.stderr:write("usage: lua tools/check_functions.lua LUAC PATH...\n")
  os.exit(2)
end

local function quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local files = {}
for i = 2, #arg do
  -- (a file named is taken as it is: bin/redislock has no .lua)
  local p = io.popen("find " .. quote(arg[i]) .. " -type f \\( -name '*.lua' -o ! -path " .. quote(arg[i] .. "/*")
    .. " \\) ! -name '*_spec.lua' | LC_ALL=C sort")
  for f in p:lines() do files[#files + 1] = f end
  p:close()
end

-- The breaches in one file's listing: { "line: what", ... }, or nil, err.
local function breaches(file)
  local p = io.popen(quote(luac) .. " -p -l " .. quote(file) .. " 2>&1")
  local text = p:read("*a")
  local ok = p:close()
  if not ok then return nil, text end
  local out, first, last = {}, nil, nil
  for line in text:gmatch("[^\n]+") do
    local a, b = line:match("^function <.-:(%d+),(%d+)>")
    if a then
      first, last = tonumber(a), tonumber(b)
    elseif first then
      -- the line after a function's header: "N params" or "N+ params" (vararg)
      local n = tonumber(line:match("^(%d+)%+? params?"))
      if n then
        local lines = last - first + 1
        if lines > MAX_LINES then
          out[#out + 1] = string.format("%d: a function of %d lines (at most %d)", first, lines, MAX_LINES)
        end
        if n > MAX_PARAMS then
          out[#out + 1] = string.format("%d: a function of %d parameters (at most %d)", first, n, MAX_PARAMS)
        end
      end
      first = nil
    end
  end
  return out
end

local bad = false
for _, f in ipairs(files) do
  local list, err = breaches(f)
  if not list then
    io.stderr:write(f, ": ", luac, " failed: ", err, "\n")
    bad = true
  else
    for _, b in ipairs(list) do
      print(f .. ":" .. b)
      bad = true
    end
  end
end
os.exit(bad and 1 or 0)

--[[
tools/hiredis_loaded.lua: which hiredis a build of the core was compiled
against and which one it loaded (make test-hiredis1).

usage: lua5.4 tools/hiredis_loaded.lua CPATH [MAJOR]
CPATH: where the core is ("./build/hiredis1/?.so"). Prints one line: the
version of the headers the core was built with (core.hiredis_version) and
the libhiredis file this process mapped when it loaded the core
(/proc/self/maps: the dynamic loader's choice, rpath included). With MAJOR,
exits 1 unless both are hiredis MAJOR.x (the file's name ends in
.so.MAJOR..., Debian's soname).
]]

local cpath, major = arg[1], tonumber(arg[2])
if not cpath then
  io.stderr:write("usage: lua5.4 tools/hiredis_loaded.lua CPATH [MAJOR]\n")
  os.exit(2)
end
package.cpath = cpath
local core = require "redislock.core"

local v = core.hiredis_version
local floor = math.floor
local built = string.format("%d.%d.%d", floor(v / 10000), floor(v / 100) % 100, v % 100)
local loaded
local maps = io.open("/proc/self/maps")
if maps then
  for line in maps:lines() do
    local path = line:match("(/%S*libhiredis%.so[%.%d]*)$")
    if path then loaded = path break end
  end
  maps:close()
end
print(string.format("hiredis: the core at %s was built against hiredis %s and loaded %s",
  cpath, built, loaded or "no libhiredis (statically linked?)"))
if major then
  local file_major = loaded and tonumber(loaded:match("%.so%.(%d+)"))
  if floor(v / 10000) ~= major or file_major ~= major then
    io.stderr:write("hiredis: expected hiredis " .. major .. ".x in both\n")
    os.exit(1)
  end
end

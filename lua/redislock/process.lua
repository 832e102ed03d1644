--- redislock.process: process control for the command line's job guard
-- and the specs (fork, spawn, waitpid, kill, signalfd and signal waits,
-- pipes, the job's process group and its leader). Lock users never need
-- it: redislock.core keeps only what they do.
--
-- Its own luaopen (luaopen_redislock_process, csrc/process/) in the same
-- shared object as the core: found where package.cpath finds
-- redislock.core, and opened from it with package.loadlib (the library is
-- loaded once; this only asks it for the other entry point).
require "redislock.core"

-- package.searchpath, or its equivalent where Lua 5.1 lacks it.
local function find(name)
  if package.searchpath then return package.searchpath(name, package.cpath) end
  local path = name:gsub("%.", "/")
  for pattern in package.cpath:gmatch("[^;]+") do
    local file = pattern:gsub("%?", path)
    local f = io.open(file, "rb")
    if f then
      f:close()
      return file
    end
  end
end

local file = find("redislock.core")
if not file then error("redislock.process: redislock.core is not on package.cpath", 2) end
local open, err = package.loadlib(file, "luaopen_redislock_process")
if not open then error("redislock.process: " .. tostring(err), 2) end
return open()

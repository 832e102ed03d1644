--[[
tools/check_paths.lua: every repository path that the docs and the code's
comments name exists (run by `make lint`).

usage: lua5.4 tools/check_paths.lua [FILE...]
Scans README.md, docs/ (the .md files and the man page), lua/ and csrc/ (or
the FILEs given) for words that name a path in this repository: a word
with a slash whose first part is the name of a folder of the repository
(csrc/topo/topo.c, lua/redislock/cli.lua, spec/helpers.lua, docs/cli.md,
tools/, .ci/run). It must exist from the repository's root, written out
whole: scripts/acquire.lua or topo/topo.c, which leave the reader to guess
where they start, do not (a folder's name alone, "binding/", is a name in
its context, not a path). A word that starts with ../ is resolved from the
file's own folder, as a markdown link is. A word with * names a glob,
which must match at least one file. Anything else (a system header
<sys/types.h>, a URL, /usr/local/..., ./job, what the build makes: build/,
redislock/core.so) is not a repository path; nor is an #include's (the
compiler finds it from csrc/). The files are git's (git
ls-files, new ones too), or the work tree's outside a git checkout. Prints "FILE:LINE: PATH does not exist" for each
and exits 1 if there is any.
]]

local function lines_of(cmd)
  local p = io.popen(cmd .. " 2>/dev/null")
  local out = {}
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  return out
end

-- The repository's files and folders, as a set of paths ("a/b.c", "a", "a/b").
local files = lines_of("git ls-files --cached --others --exclude-standard")
if #files == 0 then
  files = lines_of("find . -path ./build -prune -o -path ./.git -prune -o -type f -print")
  for i, f in ipairs(files) do files[i] = f:gsub("^%./", "") end
end
-- exists: every file and folder; folders: every folder's own name.
local exists, folders = {}, {}
for _, f in ipairs(files) do
  exists[f] = true
  local dir = f:match("^(.*)/[^/]*$")
  while dir do
    exists[dir] = true
    folders[dir:match("[^/]+$")] = true
    dir = dir:match("^(.*)/[^/]*$")
  end
end
-- What the build makes, named in the docs: never in git.
local BUILT = { ["build"] = true, ["redislock/core.so"] = true }

-- "a/./b/../c" -> "a/c"; nil when it climbs out of the repository.
local function normalize(path)
  local parts = {}
  for part in path:gmatch("[^/]+") do
    if part == ".." then
      if #parts == 0 then return nil end
      parts[#parts] = nil
    elseif part ~= "." then
      parts[#parts + 1] = part
    end
  end
  return table.concat(parts, "/")
end

-- A glob (only * and ?) as a Lua pattern anchored on both ends.
local function glob_pattern(glob)
  return "^" .. glob:gsub("[%^%$%(%)%%%.%[%]%+%-]", "%%%0"):gsub("%*", "[^/]*"):gsub("%?", "[^/]") .. "$"
end

local function glob_matches(glob)
  local pat = glob_pattern(glob)
  for _, f in ipairs(files) do
    if f:match(pat) then return true end
  end
  return false
end

-- The repository path a word names (resolved), or nil if it names none.
local function path_of(word, dir)
  if word:find("://", 1, true) then return nil end
  if word:sub(1, 3) == "../" then return normalize(dir .. "/" .. word) end
  local first = word:match("^([^/]+)/")
  if not first or not folders[first] or BUILT[first] or BUILT[word] then return nil end
  -- (a folder's name alone, "binding/", where the text says whose it is)
  if word == first .. "/" and not exists[first] then return nil end
  return word
end

local bad = 0
local function check(file)
  local f = io.open(file, "rb")
  if not f then return end
  local text = f:read("*a")
  f:close()
  if file:match("%.%d$") then text = text:gsub("\\%-", "-"):gsub("\\f[BIRP]", " ") end
  local dir = file:match("^(.*)/[^/]*$") or "."
  local n = 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    -- (an #include names a header from csrc/, as the compiler finds it;
    -- it checks those itself)
    if line:match("^%s*#%s*include") then goto next_line end
    -- A word: path characters, not right after another path character
    -- or a / (so /usr/local/lib is one absolute word, never "usr/...")
    -- nor after < (#include <sys/types.h>).
    for before, word in ("\0" .. line):gmatch("([^%w_./%-<])([%w_.*?%-][%w_./*?%-]*/[%w_./*?%-]*)") do
      local _ = before
      word = word:gsub("[.,:;]+$", "")
      local path = path_of(word, dir)
      if path then
        path = path:gsub("/$", "")
        local ok
        if path:find("[*?]") then ok = glob_matches(path) else ok = exists[path] end
        if not ok then
          print(("%s:%d: %s does not exist"):format(file, n, word))
          bad = bad + 1
        end
      end
    end
    ::next_line::
  end
end

local targets = { ... }
if #targets == 0 then
  for _, f in ipairs(files) do
    if f == "README.md" or f:match("^docs/") or (f:match("^lua/") and f:match("%.lua$"))
      or (f:match("^csrc/") and f:match("%.[ch]$")) then
      targets[#targets + 1] = f
    end
  end
end
for _, f in ipairs(targets) do check(f) end
if bad > 0 then
  io.stderr:write(("check_paths: %d path(s) named that do not exist\n"):format(bad))
  os.exit(1)
end

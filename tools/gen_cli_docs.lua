--[[
tools/gen_cli_docs.lua: docs/cli.md's Options and Exit status tables and the
man page's OPTIONS and EXIT STATUS, made from the command line's own tables
(lua/redislock/cli_options.lua: OPTIONS, EXITS), as `redislock help` makes
its lists from them (lua/redislock/cli_help.lua).

usage: lua5.4 tools/gen_cli_docs.lua [--check]
Rewrites, in docs/cli.md and docs/redislock.1, what lies between each
"BEGIN generated NAME" marker line and its "END generated NAME" line
(markdown: an HTML comment; roff: a .\" comment); the rest of both files is
written by hand. `make docs` runs it. --check writes nothing: it says which
part differs from what it would write and exits 1 (`make lint`).
]]

package.path = "./lua/?.lua;" .. package.path
local options = require "redislock.cli_options"
local help = require "redislock.cli_help"

local check = arg[1] == "--check"
local names, note, exit_meaning = help._names, help._note, help._exit_meaning

local function upper_first(s)
  return (s:gsub("^%l", string.upper))
end

-- The commands an option or an exit status is given by, as the docs prefix
-- it ("`status`, `list`: "): "" when every command, or `run` alone (the
-- page is about run).
local function prefix(cmds)
  if not cmds or (#cmds == 1 and cmds[1] == "run") then return "" end
  local list = {}
  for _, c in ipairs(cmds) do list[#list + 1] = "`" .. c .. "`" end
  return table.concat(list, ", ") .. ": "
end

-- What exit status e means, over every command that gives it (markdown).
local function meaning(e)
  if e.all then return e.all end
  local parts, only_run = {}, true
  for _, c in ipairs(options.COMMANDS) do
    local m = exit_meaning(e, c)
    if m then
      parts[#parts + 1] = { c, m }
      only_run = only_run and c == "run"
    end
  end
  if only_run then return parts[1][2] end
  for i, p in ipairs(parts) do parts[i] = "`" .. p[1] .. "`: " .. p[2] end
  return table.concat(parts, "; ")
end

--- markdown -------------------------------------------------------------

local function md_cell(s)
  return (s:gsub("|", "\\|"))
end

local function md_options()
  local out = { "| option | default | meaning |", "| --- | --- | --- |" }
  for _, o in ipairs(options.OPTIONS) do
    local n, arg = names(o, function(x) return "`" .. x .. "`" end)
    if arg then n = n:gsub("`$", " " .. arg .. "`") end
    out[#out + 1] = ("| %s | %s | %s |"):format(md_cell(n), md_cell(o.default or "none"),
      md_cell(prefix(o.commands) .. o.text))
  end
  return table.concat(out, "\n")
end

local function md_exits()
  local out = { "| exit status | meaning |", "| --- | --- |" }
  for _, e in ipairs(options.EXITS) do
    out[#out + 1] = ("| %s | %s |"):format(tostring(e.code), md_cell(meaning(e)))
  end
  return table.concat(out, "\n")
end

--- roff -------------------------------------------------------------------

-- Markdown's `code` as bold, a link as its text, every backslash and (in
-- code) hyphen escaped, no line starting with a control character.
local function roff(text)
  text = text:gsub("%[([^%]]*)%]%([^)]*%)", "%1"):gsub("\\", "\\e")
  text = text:gsub("`([^`]*)`", function(code) return "\\fB" .. code:gsub("%-", "\\-") .. "\\fR" end)
  return (text:gsub("^([.'])", "\\&%1"))
end

local function man_options()
  local out = {}
  for _, o in ipairs(options.OPTIONS) do
    local n, arg = names(o, function(x) return "\\fB" .. x:gsub("%-", "\\-") .. "\\fR" end)
    out[#out + 1] = ".TP"
    out[#out + 1] = n .. (arg and " \\fI" .. arg .. "\\fR" or "")
    out[#out + 1] = roff(upper_first(prefix(o.commands) .. o.text .. note(o))) .. "."
  end
  return table.concat(out, "\n")
end

local function man_exits()
  local out = {}
  for _, e in ipairs(options.EXITS) do
    out[#out + 1] = ".TP"
    out[#out + 1] = ".B " .. tostring(e.code)
    out[#out + 1] = roff(upper_first(meaning(e))) .. "."
  end
  return table.concat(out, "\n")
end

--- the files --------------------------------------------------------------

local FILES = {
  { path = "docs/cli.md", begin = "<!-- BEGIN generated %s: make docs, from lua/redislock/cli_options.lua -->",
    finish = "<!-- END generated %s -->", parts = { options = md_options, exits = md_exits } },
  { path = "docs/redislock.1", begin = '.\\" BEGIN generated %s: make docs, from lua/redislock/cli_options.lua',
    finish = '.\\" END generated %s', parts = { options = man_options, exits = man_exits } },
}

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local function plain_find(s, needle, from)
  return s:find(needle, from, true)
end

local stale = 0
for _, file in ipairs(FILES) do
  local text = read(file.path)
  local new = text
  for _, name in ipairs({ "options", "exits" }) do
    local b, f = file.begin:format(name), file.finish:format(name)
    local _, b_end = plain_find(new, b .. "\n")
    local f_start = b_end and plain_find(new, "\n" .. f, b_end)
    if not b_end or not f_start then
      io.stderr:write(("gen_cli_docs: %s has no '%s' ... '%s' lines\n"):format(file.path, b, f))
      os.exit(1)
    end
    local body = file.parts[name]()
    if new:sub(b_end + 1, f_start - 1) ~= body then
      if check then
        io.stderr:write(("gen_cli_docs: %s: the generated %s differ from lua/redislock/cli_options.lua's " ..
          "(run make docs)\n"):format(file.path, name))
        stale = stale + 1
      end
      new = new:sub(1, b_end) .. body .. new:sub(f_start)
    end
  end
  if new ~= text and not check then
    local out = assert(io.open(file.path, "wb"))
    out:write(new)
    out:close()
    print("gen_cli_docs: wrote " .. file.path)
  end
end
if stale > 0 then os.exit(1) end

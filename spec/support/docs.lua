-- The documentation as the specs read it: README.md (the front page) and the
-- reference in docs/. Specs that run an example or check a claim take it
-- from here, so a doc cannot drift from what was tested. Paths are relative
-- to the checkout's root, where the specs run.
local helpers = require "spec.helpers"

local M = {}

--- The path of a doc file: a file of docs/ by its name ("api.md",
-- "cli.md", ...), or a path from the root ("README.md", "docs/README.md").
function M.path(name)
  if name == "README.md" or name:find("/", 1, true) then return name end
  return "docs/" .. name
end

--- The text of a doc file (see M.path). Raises if it is missing.
function M.read(name)
  local path = M.path(name)
  return (assert(helpers.read_file(path), "no " .. path))
end

--- The paths of README.md and of every docs/*.md, sorted.
function M.files()
  local names = {}
  for name in helpers.sh("ls docs 2>/dev/null"):gmatch("[^\n]+") do
    if name:match("%.md$") then names[#names + 1] = "docs/" .. name end
  end
  table.sort(names)
  table.insert(names, 1, "README.md")
  return names
end

-- The headings of a markdown text outside fenced code blocks (a "# comment"
-- in a crontab or nginx block is not one): { {start, level, title}, ... }
-- where start is the position of the heading line's first character.
local function headings(text)
  local out, fenced, pos = {}, false, 1
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^```") then
      fenced = not fenced
    elseif not fenced then
      local hashes, title = line:match("^(#+) (.*)$")
      if hashes then out[#out + 1] = { pos, #hashes, title } end
    end
    pos = pos + #line + 1
  end
  return out
end
M.headings = headings

--- The section of doc file `name` whose heading starts with `title`: from
-- its heading line up to the next heading of the same or a higher level
-- (or the end of the file). Raises if there is no such heading.
function M.section(name, title)
  local text = M.read(name)
  local list = headings(text)
  for i, h in ipairs(list) do
    if h[3]:sub(1, #title) == title then
      local stop = #text + 1
      for j = i + 1, #list do
        if list[j][2] <= h[2] then
          stop = list[j][1]
          break
        end
      end
      return text:sub(h[1], stop - 1)
    end
  end
  error(name .. " has no section " .. title, 2)
end

--- The fenced code blocks of a text, with their info strings:
-- { {info = "lua", body = "..."}, ... }
function M.blocks(text)
  local out = {}
  for info, body in ("\n" .. text):gmatch("\n```(%S*)\n(.-\n)```") do
    out[#out + 1] = { info = info, body = body }
  end
  return out
end

return M

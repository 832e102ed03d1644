-- The rockspec installs offline with Debian's hiredis, for the Lua that
-- luarocks is told, and the installed tree alone is enough: to require
-- redislock, and to run the redislock command under cron's environment.
local helpers = require "spec.helpers"
local docs = require "spec.support.docs"

describe("rockspec", function()
  it("luarocks make installs a tree that loads and runs on its own, without warnings #builds", function()
    -- tools/rock_check.sh fails on any luarocks warning (such as "unmatched
    -- variable"), on an installed #!/usr/bin/lua, and on a bin/redislock
    -- that does not run with PATH=/usr/bin:/bin and no LUA_PATH, and on a
    -- man page missing from the rock's doc/ or that groff warns about.
    local version = _VERSION:match("%d+%.%d+")
    local out, code = helpers.sh("tools/rock_check.sh " .. version .. " 2>&1")
    assert.equal(0, code, out)
    assert.matches("rock ok: redislock", out)
    assert.matches("rock bin ok: redislock %S+ on /%S+/lua" .. version:gsub("%.", "%%."), out)
    assert.matches("rock man ok: %S+/doc/man1/redislock%.1", out)
  end)

  it("the docs' luarocks command names the Lua, as tools/rock_check.sh does", function()
    local commands = {}
    for _, path in ipairs(docs.files()) do
      for _, block in ipairs(docs.blocks(docs.read(path))) do
        for line in block.body:gmatch("(luarocks [^\n]+)") do commands[#commands + 1] = line end
      end
    end
    assert.is_true(#commands > 0, "no luarocks command in README.md or docs/")
    -- into the user's own tree, or (said as such) system-wide
    local allowed = { ["luarocks --lua-version 5.4 --local make rockspec/redislock-scm-1.rockspec"] = true,
      ["luarocks --lua-version 5.4 make rockspec/redislock-scm-1.rockspec"] = true }
    for _, line in ipairs(commands) do assert.truthy(allowed[line], line) end
    local section = docs.section("README.md", "With luarocks")
    local first = docs.blocks(section)[1]
    assert.truthy(first and first.body:find("--local make", 1, true), "the first luarocks command is not --local")
    assert.truthy(section:find("system-wide", 1, true), "the command without --local is not said to be system-wide")
    local check = assert(helpers.read_file("tools/rock_check.sh"))
    assert.truthy(check:find('luarocks --lua-version "$lua_version" make --tree "$tree"', 1, true))
    -- and the rockspec uses only variables luarocks defines
    local rockspec = assert(helpers.read_file("rockspec/redislock-scm-1.rockspec"))
    assert.is_nil(rockspec:find("$(LUA_VERSION)", 1, true))
  end)
end)

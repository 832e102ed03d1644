-- The rockspec installs offline with Debian's hiredis, and the installed
-- tree alone is enough to require redislock.
local helpers = require "spec.helpers"

describe("rockspec", function()
  it("luarocks make installs a tree that loads on its own", function()
    local version = _VERSION:match("%d+%.%d+")
    local out, code = helpers.sh("tools/rock_check.sh " .. version .. " 2>&1")
    assert.equal(0, code, out)
    assert.matches("rock ok: redislock", out)
  end)
end)

-- with_lock and a lease lost while fn ran (issue 32, point 1): redis-py's
-- LockNotOwnedError, node-redlock's abort. The guard must not answer
-- true, results when the lock was not held to the end of fn.
local helpers = require "spec.helpers"
local errors = require "redislock.errors"

describe("with_lock when the lease is lost while fn runs", function()
  local raw, c
  local fresh = helpers.names("wl")

  local fx = helpers.redis_fixture { raw = true, clients = 1 }
  setup(function() raw, c = fx.raw, fx.clients[1] end)

  it("returns true and fn's results when the lock was held throughout", function()
    local name = fresh()
    assert.same({ true, 1, "two" }, { c:with_lock(name, { ttl = 5 }, function() return 1, "two" end) })
    assert.equal(0, raw:command("EXISTS", "{" .. name .. "}"))
  end)

  it("returns nil, err, 'not held' when the key was deleted under fn", function()
    local name = fresh()
    local ran = false
    local ok, err, kind = c:with_lock(name, { ttl = 5 }, function()
      ran = true
      assert.equal(1, raw:command("DEL", "{" .. name .. "}"))
      return "result that must not be trusted"
    end)
    assert.is_true(ran)
    assert.is_nil(ok)
    assert.equal("not held", kind)
    assert.equal("not held", errors.kind_of(err))
    assert.matches("^not held: " .. name:gsub("%p", "%%%0") .. " was lost while fn ran", err)
    assert.matches("(not held)", err, 1, true)
  end)

  it("says why when the watchdog reported the loss before fn returned", function()
    local name = fresh()
    local ok, err, kind = c:with_lock(name, { ttl = 0.2 }, function(lock)
      -- another token in its place: the next renewal finds it gone
      raw:command("SET", "{" .. name .. "}", "someone-else", "PX", "60000")
      assert.is_true(helpers.wait_until(function() return not lock:held() end, 5))
    end)
    assert.is_nil(ok)
    assert.equal("not held", kind)
    assert.matches(name, err, 1, true)
    assert.matches("lost while fn ran", err, 1, true)
    -- the other holder's key is untouched
    assert.equal("someone-else", raw:command("GET", "{" .. name .. "}"))
  end)

  it("still raises fn's own error when fn raised after the loss", function()
    local name = fresh()
    local mine = setmetatable({}, { __tostring = function() return "mine" end })
    local ok, e = pcall(c.with_lock, c, name, { ttl = 5 }, function()
      raw:command("DEL", "{" .. name .. "}")
      error(mine)
    end)
    assert.is_false(ok)
    assert.equal(mine, e)
  end)

  it("escapes the name in the message, as holder labels are", function()
    local name = fresh() .. "\n\27[31m"
    local ok, err = c:with_lock(name, { ttl = 5 }, function()
      raw:command("DEL", "{" .. name .. "}")
    end)
    assert.is_nil(ok)
    assert.is_nil(err:find("\n", 1, true))
    assert.is_nil(err:find("\27", 1, true))
    assert.matches("\\x0a\\x1b[31m", err, 1, true)
  end)
end)

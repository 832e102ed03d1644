-- Review of the peers merge (issue 32): two-holder paths found by review.
local helpers = require "spec.helpers"

describe("review peers: reentrant rwlock", function()
  local c, other
  local fresh = helpers.names("rvpeers")

  local fx = helpers.redis_fixture { raw = true, clients = 2 }
  setup(function() c, other = fx.clients[1], fx.clients[2] end)

  -- A hold of a grant that was broken, then given to someone else and
  -- freed, then granted again to the same owner: the old hold's watchdog
  -- renews the newer grant and it never learns it lost the lock, while
  -- the rival held it in between (two holders).
  it("a broken write hold is not kept alive by the owner's newer grant", function()
    local name = fresh()
    local rw = c:rwlock(name, { reentrant = true })
    local old = assert(rw:write { ttl = 1 })
    assert.is_true(other:rwlock(name):break_lock())
    local rival = assert(other:rwlock(name):write { ttl = 1 })
    assert.is_true(rival.fence > old.fence)
    assert.is_true(rival:release())
    local new = assert(rw:write { ttl = 1 })
    assert.is_true(new.fence > rival.fence)
    helpers.sleep(2.5)
    assert.is_true(new:held())
    assert.is_false(old:held(), "the broken hold still reads as held after a rival held the lock")
    new:release()
  end)

  it("a broken read hold is not kept alive by the owner's newer grant", function()
    local name = fresh()
    local rw = c:rwlock(name, { reentrant = true })
    local old = assert(rw:read { ttl = 1 })
    assert.is_true(other:rwlock(name):break_lock())
    local rival = assert(other:rwlock(name):write { ttl = 1 })
    assert.is_true(rival:release())
    local new = assert(rw:read { ttl = 1 })
    helpers.sleep(2.5)
    assert.is_true(new:held())
    assert.is_false(old:held(), "the broken read hold still reads as held after a writer held the lock")
    new:release()
  end)
end)

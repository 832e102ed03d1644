-- Reentrant locks (owner tokens, counts, one renewal per lock) and adopting
-- a held lock: against real redis-server processes.
local helpers = require "spec.helpers"
local shares = require "spec.support.shares"
local redislock = require "redislock"
local core = require "redislock.core"

describe("reentrant locks", function()
  local srv, raw, c, other
  local fresh = helpers.names("re")

  local fx = helpers.redis_fixture { raw = true, clients = 2 }
  setup(function() srv, raw, c, other = fx.srv, fx.raw, fx.clients[1], fx.clients[2] end)

  it("count up for the same owner and free the name at zero", function()
    local name = fresh()
    local a = assert(c:acquire(name, { reentrant = true }))
    local b = assert(c:acquire(name, { reentrant = true }))
    local d = assert(c:acquire(name, { reentrant = true, wait = 0 }))
    assert.equal(a.fence, b.fence)
    assert.equal(a.fence, d.fence)
    assert.equal(c.owner, raw:command("GET", "{" .. name .. "}"))
    assert.equal("3", raw:command("HGET", "{" .. name .. "}:grant", "n"))
    -- another owner, reentrant or not, is kept out
    assert.equal("busy", select(3, other:acquire(name, { reentrant = true })))
    assert.equal("busy", select(3, other:acquire(name)))
    assert.is_true(b:release())
    assert.is_true(d:release())
    assert.is_true(a:held())
    assert.equal(1, raw:command("EXISTS", "{" .. name .. "}"))
    assert.is_true(a:release())
    assert.equal(0, raw:command("EXISTS", "{" .. name .. "}", "{" .. name .. "}:grant"))
    assert.equal("not held", select(3, a:release()))
    assert(other:acquire(name)):release()
  end)

  it("are renewed once by the watchdog, and unregistered with the last hold", function()
    local name = fresh()
    local w0 = c:stats().watched
    local holds = {}
    for i = 1, 5 do holds[i] = assert(c:acquire(name, { reentrant = true, ttl = 0.3 })) end
    assert.equal(w0 + 1, c:stats().watched)
    helpers.sleep(1)                     -- three ttls: only renewals keep it
    for i = 5, 2, -1 do
      assert.is_true(holds[i]:release())
      assert.is_true(holds[1]:held())
      assert.equal(w0 + 1, c:stats().watched)
    end
    assert.is_true(holds[1]:release())
    assert.equal(w0, c:stats().watched)
  end)

  it("take the owner from opts.owner: any client may enter as that owner", function()
    local name = fresh()
    local owner = core.token()
    local a = assert(c:acquire(name, { reentrant = true, owner = owner }))
    local b = assert(other:acquire(name, { reentrant = true, owner = owner }))
    assert.equal(a.fence, b.fence)
    assert.equal("busy", select(3, other:acquire(name, { reentrant = true })))  -- other's own owner
    assert.is_true(a:release())
    assert.is_true(b:held())
    assert.equal(1, raw:command("EXISTS", "{" .. name .. "}"))
    assert.is_true(b:release())
    assert.equal(0, raw:command("EXISTS", "{" .. name .. "}"))
  end)

  it("never let a hold of an earlier grant release a newer one of the same owner", function()
    local name = fresh()
    local old = assert(c:acquire(name, { reentrant = true, ttl = 0.1, watchdog = false }))
    helpers.sleep(0.2)                  -- its lease ran out: the hold is stale
    local new = assert(c:acquire(name, { reentrant = true, ttl = 10 }))
    assert.is_not.equal(old.fence, new.fence)
    assert.equal("not held", select(3, old:release()))
    assert.is_true(new:held())
    assert.equal(c.owner, raw:command("GET", "{" .. name .. "}"))
    assert.is_true(new:release())
  end)

  it("let only the owner release or extend", function()
    local name = fresh()
    local a = assert(c:acquire(name, { reentrant = true, ttl = 5 }))
    assert.equal("not held", select(3, other:release_token(name, core.token())))
    -- (the watchdog's renewal of a reentrant lock, with another owner's token)
    assert.equal(0, raw:command("EVAL", core.scripts.extend_grant.source, 1, "{" .. name .. "}",
      other.owner, 60000))
    assert.is_true(raw:command("PTTL", "{" .. name .. "}") <= 5000)
    assert.is_true(a:extend(20))
    assert.is_true(raw:command("PTTL", "{" .. name .. "}") > 10000)
    assert.is_true(a:release())
  end)

  it("free a crashed holder's name at its lease end", function()
    local name = fresh()
    local p = shares.holder(srv.url, ([[
      a = assert(c:acquire(%q, { reentrant = true, ttl = 1 }))
      b = assert(c:acquire(%q, { reentrant = true, ttl = 1 }))
    ]]):format(name, name))
    assert.equal("busy", select(3, c:acquire(name, { reentrant = true })))
    p:kill("KILL")
    p:wait(5)
    local t0 = helpers.monotime()
    local l = assert(c:acquire(name, { reentrant = true, wait = 5 }))
    local waited = helpers.monotime() - t0
    assert(waited < 1.5, "waited " .. waited .. " s")
    -- the dead holder's count does not carry over
    assert.equal("1", raw:command("HGET", "{" .. name .. "}:grant", "n"))
    assert.is_true(l:release())
    assert.equal(0, raw:command("EXISTS", "{" .. name .. "}"))
    p:stop()
  end)

  it("report a loss to every hold", function()
    local name = fresh()
    local reasons = {}
    local function on_lost(_, reason) reasons[#reasons + 1] = reason end
    local a = assert(c:acquire(name, { reentrant = true, ttl = 0.3, on_lost = on_lost }))
    local b = assert(c:acquire(name, { reentrant = true, ttl = 0.3, on_lost = on_lost }))
    raw:command("DEL", "{" .. name .. "}")
    assert(helpers.wait_until(function() c:poll() return #reasons == 2 end, 3))
    assert.same({ "not held", "not held" }, reasons)
    assert.is_false(a:held())
    assert.is_false(b:held())
  end)

  it("exclude each other across processes (4 x 100 nested holds, a non-atomic counter)", function()
    local name = fresh()
    raw:command("DEL", "count:reentrant")
    local holds = shares.torture(srv.url, "reentrant", name, 4, 100, "0-1")
    assert.equal(400, #holds)
    assert.equal("400", raw:command("GET", "count:reentrant"))
    assert.is_nil(shares.exclusive_overlap(holds))
  end)

  it("reject bad arguments by name", function()
    local function err_of(...)
      local ok, e = pcall(c.acquire, c, ...)
      assert.is_false(ok)
      return e
    end
    assert.matches("bad argument 'reentrant' to 'acquire' %(boolean expected",
      err_of("n", { reentrant = 1 }))
    assert.matches("bad argument 'owner' to 'acquire' %(only with reentrant", err_of("n", { owner = "x" }))
    assert.matches("bad argument 'owner' to 'acquire' %(non%-empty",
      err_of("n", { reentrant = true, owner = "" }))
    assert.matches("bad argument 'owner' to 'acquire' %(at most 63",
      err_of("n", { reentrant = true, owner = ("x"):rep(64) }))
    assert.matches("bad argument 'fair' to 'acquire' %(a reentrant lock cannot be fair",
      err_of("n", { reentrant = true, fair = true, wait = 1 }))
  end)
end)

describe("adopt", function()
  local srv, raw
  local fresh = helpers.names("adopt")

  local fx = helpers.redis_fixture { raw = true }
  setup(function() srv, raw = fx.srv, fx.raw end)

  it("takes over a lock another process holds, renews it, and releases it", function()
    local name = fresh()
    local p = shares.holder(srv.url, ("l = assert(c:acquire(%q, { ttl = 1, watchdog = false }))"
      .. " io.stdout:write(l.token, ' ', string.format('%%.0f', l.fence), '\\n')"):format(name))
    local token, fence = p:stdout():match("(%x+) (%d+)")
    p:kill("KILL")
    p:wait(5)
    local c = assert(redislock.connect { url = srv.url })
    local l = assert(c:adopt(name, token, { ttl = 0.5 }))
    assert.is_true(l.fence > tonumber(fence))   -- a fence of its own, drawn at adoption
    assert.equal(token, l.token)
    helpers.sleep(2)                     -- past both leases: the watchdog renews it now
    assert.is_true(l:held())
    assert.equal(token, raw:command("GET", "{" .. name .. "}"))
    assert.is_true(l:release())
    assert.equal(0, raw:command("EXISTS", "{" .. name .. "}"))
    c:close()
    p:stop()
  end)

  it("never shortens the holder's lease, and needs the holder's token", function()
    local name = fresh()
    local c = assert(redislock.connect { url = srv.url })
    local held = assert(c:acquire(name, { ttl = 20 }))
    local d = assert(redislock.connect { url = srv.url })
    assert.equal("not held", select(3, d:adopt(name, core.token())))
    assert.equal("not held", select(3, d:adopt(fresh(), held.token)))
    local l = assert(d:adopt(name, held.token, { ttl = 1, watchdog = false }))
    assert.is_true(raw:command("PTTL", "{" .. name .. "}") > 10000)
    assert.is_true(l:release())
    c:close()
    d:close()
  end)

  it("rejects bad arguments by name", function()
    local c = assert(redislock.connect { url = srv.url })
    assert.matches("bad argument 'token' to 'adopt'", select(2, pcall(c.adopt, c, "n", nil)))
    assert.matches("bad argument 'token' to 'adopt' %(at most 63",
      select(2, pcall(c.adopt, c, "n", ("a"):rep(64))))
    assert.matches("bad argument 'name' to 'adopt'", select(2, pcall(c.adopt, c, "", "t")))
    assert.matches("unknown option 'wait'", select(2, pcall(c.adopt, c, "n", "t", { wait = 1 })))
    c:close()
  end)
end)

-- Read-write locks as Redisson's RReadWriteLock users know them (issue 32,
-- point 5): reentrant per owner (the writer writes again, counted; the
-- writer reads while it writes, a downgrade; a reader never upgrades),
-- rw:break_lock() for operators, and inspect's counts.
local helpers = require "spec.helpers"
local core = require "redislock.core"
local process = require "redislock.process"

local monotime = core.monotime

describe("reentrant read-write locks", function()
  local raw, c, other
  local fresh = helpers.names("rwre")

  local fx = helpers.redis_fixture { raw = true, clients = 2 }
  setup(function() raw, c, other = fx.raw, fx.clients[1], fx.clients[2] end)

  it("let the writer write again, counted, and free the lock at zero", function()
    local name = fresh()
    local rw = c:rwlock(name, { reentrant = true })
    local w1 = assert(rw:write { ttl = 5 })
    local w2 = assert(rw:write { ttl = 5, wait = 1 })
    assert.equal(w1.fence, w2.fence)
    assert.equal(2, rw:inspect().writes)
    -- everyone else is kept out
    assert.equal("busy", select(3, other:rwlock(name):read()))
    assert.equal("busy", select(3, other:rwlock(name, { reentrant = true }):write()))
    assert.is_true(w2:release())
    assert.is_true(w1:held())
    assert.equal("busy", select(3, other:rwlock(name):write()))
    assert.is_true(w1:release())
    assert(other:rwlock(name):write()):release()
  end)

  it("let the writer read while it writes (a downgrade), and keep the read after the write", function()
    local name = fresh()
    local rw = c:rwlock(name, { reentrant = true })
    local w = assert(rw:write { ttl = 5 })
    local t0 = monotime()
    local r = assert(rw:read { ttl = 5, wait = 2 })
    assert.is_true(monotime() - t0 < 0.5, "the writer waited for itself")
    local info = rw:inspect()
    assert.is_true(info.writer)
    assert.equal(1, info.readers)
    assert.is_true(w:release())
    -- now a reader among readers: others read, nobody writes
    local theirs = assert(other:rwlock(name):read())
    assert.equal("busy", select(3, other:rwlock(name):write()))
    assert.is_true(r:held())
    assert.is_true(r:release())
    assert.is_true(theirs:release())
    assert(other:rwlock(name):write()):release()
  end)

  it("count reads per owner, and let a reader in again while a writer waits", function()
    local name = fresh()
    local rw = c:rwlock(name, { reentrant = true })
    local r1 = assert(rw:read { ttl = 5 })
    -- a writer of another client waits, keeping new readers out
    local p = helpers.spawn(helpers.lua_cmd(([[
      local c = assert(require("redislock").connect { url = %q })
      local w = assert(c:rwlock(%q):write { wait = 10, ttl = 5 })
      io.stdout:write("wrote\n") io.stdout:flush()
      w:release()
    ]]):format(fx.srv.url, name)))
    assert(helpers.wait_until(function() return rw:inspect().writer_waiting end, 5), "the writer never waited")
    assert.equal("busy", select(3, other:rwlock(name):read()))
    -- the owner enters again at once, however the writer waits
    local r2 = assert(rw:read { ttl = 5, wait = 2 })
    assert.equal(2, rw:inspect().reads)
    assert.is_true(r2:release())
    assert.equal(1, rw:inspect().reads)
    assert.is_false(p:stdout():find("wrote") ~= nil)
    assert.is_true(r1:release())
    assert.equal(0, p:wait(10))
    assert.matches("wrote", p:stdout())
  end)

  it("never upgrade a read to a write: refused at once, not a wait for itself", function()
    local name = fresh()
    local rw = c:rwlock(name, { reentrant = true })
    local r = assert(rw:read { ttl = 5 })
    local t0 = monotime()
    local w, err, kind = rw:write { wait = 2 }
    assert.is_nil(w)
    assert.equal("busy", kind)
    assert.matches("^busy: " .. name:gsub("%p", "%%%0") .. " ", err)
    assert.matches("never upgrades", err, 1, true)
    assert.is_true(monotime() - t0 < 0.5)
    assert.is_true(r:release())
    assert(rw:write()):release()
  end)

  it("keep a lost grant's holds from releasing a new one", function()
    local name = fresh()
    local rw = c:rwlock(name, { reentrant = true })
    local old = assert(rw:write { ttl = 5, watchdog = false })
    raw:command("DEL", "{" .. name .. "}:rw")
    local new = assert(rw:write { ttl = 5 })
    assert.equal("not held", select(3, old:release()))
    assert.is_true(new:held())
    assert.equal("busy", select(3, other:rwlock(name):write()))
    assert.is_true(new:release())
  end)

  it("are renewed by the watchdog while any hold is", function()
    local name = fresh()
    local rw = c:rwlock(name, { reentrant = true })
    local w1 = assert(rw:write { ttl = 0.3 })
    local w2 = assert(rw:write { ttl = 0.3 })
    local r = assert(rw:read { ttl = 0.3 })
    helpers.sleep(1)
    assert.is_true(w1:held() and w2:held() and r:held())
    assert.is_true(w2:release())
    helpers.sleep(0.6)
    assert.is_true(w1:held())
    assert.equal("busy", select(3, other:rwlock(name):read()))
    assert.is_true(w1:release())
    assert.is_true(r:release())
  end)

  it("take the owner from opts.owner, or the client's", function()
    local name = fresh()
    local owner = core.token()
    local a = c:rwlock(name, { reentrant = true, owner = owner })
    local b = other:rwlock(name, { reentrant = true, owner = owner })
    local w = assert(a:write())
    local w2 = assert(b:write())
    assert.equal(w.fence, w2.fence)
    assert.is_true(w2:release() and w:release())
    assert.has_error(function() c:rwlock(name, { owner = owner }) end)
    assert.has_error(function() c:rwlock(name, { reentrant = "yes" }) end)
    assert.has_error(function() c:rwlock(name, { bogus = 1 }) end)
  end)

  -- (the entry is not renewed with the share: a reentrant reader held past
  -- fence_ttl lost it, and inspect its holder, while a plain one kept it)
  it("keep a reader's holder entry as long as a plain reader's", function()
    local name = fresh()
    local key = "{" .. name .. "}:rw:readers:holders"
    for _, rw in ipairs({ c:rwlock(name), c:rwlock(name, { reentrant = true }) }) do
      local r = assert(rw:read({ ttl = 5 }))
      local pttl = raw:command("PTTL", key)
      assert.is_true(pttl > 24 * 3600 * 1000, tostring(pttl))
      assert.is_true(r:release())
    end
  end)

  -- (a writer's grant drops a lapsed reader from the readers and not its
  -- entry; the owner's token comes back with its next grant)
  -- (an earlier version's client renews a share and not its entries, which
  -- now expire: deleting them here is what that leaves)
  it("never grant a share over a live one whose entries are gone", function()
    local name = fresh()
    local rw = c:rwlock(name, { reentrant = true })
    local r = assert(rw:read { ttl = 5 })
    raw:command("DEL", "{" .. name .. "}:rw:readers:counts")
    local again = rw:read { ttl = 5 }
    -- (granted, its release would take r's share away)
    if again then again:release() end
    assert.is_nil(again)
    assert.is_nil((other:rwlock(name):write()))   -- r's share still keeps writers out
    assert.is_truthy(raw:command("ZSCORE", "{" .. name .. "}:rw:readers", r.token))
    -- (its entries gone, r's release answers not held: the share ends with
    -- its lease)
    r:release()
    raw:command("DEL", "{" .. name .. "}:rw:readers")
  end)

  it("never name a grant without a label by an earlier grant's label", function()
    local name = fresh()
    local rw = c:rwlock(name, { reentrant = true })
    assert(rw:read { ttl = 0.3, watchdog = false, holder = "first-grant" })
    helpers.sleep(0.5)   -- (the share lapsed, never released)
    assert(other:rwlock(name):write { ttl = 5 }):release()
    local r = assert(rw:read { ttl = 5, holder = false })
    local rows = assert(rw:inspect()).holders
    assert.equal(1, #rows)
    assert.is_nil(rows[1].holder)
    assert.is_true(r:release())
  end)
end)

describe("rw:break_lock", function()
  local raw, c, other
  local fresh = helpers.names("rwbreak")

  local fx = helpers.redis_fixture { raw = true, clients = 2 }
  setup(function() raw, c, other = fx.raw, fx.clients[1], fx.clients[2] end)

  it("removes the writer and wakes the waiters at once", function()
    local name = fresh()
    local w = assert(c:rwlock(name):write { ttl = 30 })
    local p = helpers.spawn(helpers.lua_cmd(([[
      local core = require "redislock.core"
      local c = assert(require("redislock").connect { url = %q })
      local r = assert(c:rwlock(%q):read { wait = 10, ttl = 5 })
      io.stdout:write(string.format("read %%.6f\n", core.monotime())) io.stdout:flush()
      r:release()
    ]]):format(fx.srv.url, name)))
    assert(helpers.wait_until(function() return c:rwlock(name):inspect().waiters == 1 end, 5))
    local t0 = monotime()
    assert.is_true(other:rwlock(name):break_lock())
    assert.equal(0, p:wait(10))
    local got = tonumber(p:stdout():match("read ([%d.]+)"))
    assert.is_true(got - t0 < 0.5, string.format("woken %.3f s after the break", got - t0))
    assert(helpers.wait_until(function() return not w:held() end, 15))
    assert.equal("not held", w.lost_reason)
  end)

  it("removes every reader, reentrant counts included", function()
    local name = fresh()
    local rw = c:rwlock(name, { reentrant = true })
    local r1 = assert(rw:read { ttl = 0.5 })
    local r2 = assert(rw:read { ttl = 0.5 })
    local theirs = assert(other:rwlock(name):read { ttl = 0.5 })
    assert.is_true(c:rwlock(name):break_lock())
    local info = rw:inspect()
    assert.equal(0, info.readers)
    assert.is_false(info.writer)
    assert.equal(0, raw:command("EXISTS", "{" .. name .. "}:rw:readers"))
    assert(helpers.wait_until(function() return not r1:held() and not r2:held() and not theirs:held() end, 5))
    assert(other:rwlock(name):write()):release()
    -- nothing to break: not held, naming it
    assert.same({ nil, "not held: " .. name, "not held" }, { c:rwlock(name):break_lock() })
  end)
end)

describe("a reentrant rwlock in a fork child", function()
  local fx = helpers.redis_fixture { clients = 1 }

  it("is another owner: it never enters its parent's holds", function()
    local c = fx.clients[1]
    local rw = c:rwlock("rw-fork", { reentrant = true })
    local w = assert(rw:write { ttl = 5 })
    local r = assert(rw:read { ttl = 5 })
    local result = helpers.tmpdir() .. "/child.txt"
    local pid = assert(process.fork())
    if pid == 0 then
      local ok, msg = pcall(function()
        local mine, _, kind = rw:write { ttl = 5 }
        local theirs, _, rkind = rw:read { ttl = 5 }
        return "child write " .. tostring(mine ~= nil) .. " " .. tostring(kind) ..
          ", read " .. tostring(theirs ~= nil) .. " " .. tostring(rkind)
      end)
      local f = io.open(result, "w")
      f:write(ok and msg or ("error " .. tostring(msg)))
      f:close()
      process._exit(0)
    end
    process.waitpid(pid)
    local text = helpers.read_file(result)
    assert.is_true(r:release())
    assert.is_true(w:release())
    assert.equal("child write false busy, read false busy", text)
  end)
end)

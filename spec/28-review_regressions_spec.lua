-- Regressions found by a review of the round's diff, each a way two
-- clients could hold one lock (or a lease outlived its last hold). Each
-- asserts the safe behaviour; each failed before its fix.
local helpers = require "spec.helpers"
local redislock = require "redislock"
local core = require "redislock.core"
local process = require "redislock.process"

describe("review regressions", function()
  local srv, raw
  local fresh = helpers.names("rv")

  local fx = helpers.redis_fixture { raw = true }
  setup(function() srv, raw = fx.srv, fx.raw end)

  -- A channel over the client's own that answers `block` with f(...)
  -- instead (the wait for a release); everything else goes to the real one.
  local function with_block(client, f)
    local real = client._conn
    client._conn = setmetatable({}, { __index = function(_, k)
      if k == "block" then return function(_, ...) return f(...) end end
      local v = real[k]
      if type(v) == "function" then return function(_, ...) return v(real, ...) end end
      return v
    end })
    return real
  end

  it("fair hand-over picked up after the fence counter expired keeps its short lease", function()
    local name = fresh()
    local key = "{" .. name .. "}"
    local c = assert(redislock.connect { url = srv.url, fence_ttl = 1 })
    local w = assert(redislock.connect { url = srv.url, fence_ttl = 1 })
    local x = assert(redislock.connect { url = srv.url })
    local h = assert(c:acquire(name, { ttl = 30 }))
    -- The waiter's first attempt puts it in line. It then misses its
    -- wakeup: while it waits, the holder releases (the lock is handed to
    -- the waiter with a 3 s lease), and the wait comes back a little
    -- later with nothing, after the fence counter's fence_ttl (1 s) ran
    -- out (or after it was evicted). Its next attempt finds the hand-over.
    local handed_to, fence_left, remaining
    local real = with_block(w, function()
      assert(h:release())
      handed_to = raw:command("GET", key)
      helpers.sleep(1.2)
      fence_left = raw:command("EXISTS", key .. ":fence")
      remaining = raw:command("PTTL", key)
      return false   -- (no wakeup came in time)
    end)
    local lock = assert(w:acquire(name, { fair = true, ttl = 30, wait = 5 }))
    w._conn = real
    assert.equal(lock.token, handed_to)
    assert.equal(0, fence_left)
    assert.is_true(remaining > 0 and remaining < 2000)
    local believed = lock:lease_end() - core.monotime()
    -- SAFE: the lease it counts on is at most what Redis has left
    local ok_lease = believed <= remaining / 1000
    -- wait past the key's real end: does someone else get it while we "hold"?
    helpers.sleep(remaining / 1000 + 0.3)
    local rival = x:acquire(name, { ttl = 30 })
    local overlap = rival ~= nil and lock:held()
    if rival then rival:release() end
    pcall(lock.release, lock)
    c:close(); w:close(); x:close()
    assert.is_false(overlap, "two holders: the rival got it while the waiter's lock:held() is true")
    assert.is_true(ok_lease, string.format("believes %.1f s, Redis has %.1f s", believed, remaining / 1000))
  end)

  it("a fair waiter whose wait for the hand-over fails is not handed a lock", function()
    -- The failed wait's message is no hand-over: taking it for one granted
    -- a lock (with no fence) that the holder still held.
    local name = fresh()
    local c = assert(redislock.connect { url = srv.url })
    local w = assert(redislock.connect { url = srv.url })
    local h = assert(c:acquire(name, { ttl = 30 }))
    local failed = 0
    local real = with_block(w, function()
      failed = failed + 1
      return nil, "connection lost: reset by peer", "connection"
    end)
    local l, err = w:acquire(name, { fair = true, ttl = 30, wait = 0.3 })
    w._conn = real
    local overlap = l ~= nil and h:held()
    if l then pcall(l.release, l) end
    assert(h:release())
    c:close(); w:close()
    assert.is_false(overlap, "two holders: the waiter was handed a lock the holder still held")
    assert.is_true(failed > 0)
    assert.matches("^timeout: ", err)
  end)

  it("a reentrant group's watchdog registration ends with its last hold", function()
    collectgarbage("stop")   -- (the leak lasts until the group is collected)
    local name = fresh()
    local key = "{" .. name .. "}"
    local c = assert(redislock.connect { url = srv.url })
    local other = assert(redislock.connect { url = srv.url })
    local w0 = c:stats().watched
    local h1 = assert(c:acquire(name, { reentrant = true, watchdog = false, ttl = 0.3 }))
    local h2 = assert(c:acquire(name, { reentrant = true, ttl = 0.3 }))   -- registers the group
    assert.equal(w0 + 1, c:stats().watched)
    assert.is_true(h2:release())
    assert.is_true(h1:release())
    assert.equal(0, raw:command("EXISTS", key))
    local leaked = c:stats().watched - w0
    -- the same owner takes it again WITHOUT a watchdog, ttl 0.3 s, and
    -- forgets it: it must expire on its own
    local h3 = assert(c:acquire(name, { reentrant = true, watchdog = false, ttl = 0.3 }))
    helpers.sleep(1.5)
    local still = raw:command("EXISTS", key)
    local rival = other:acquire(name)
    if rival then rival:release() end
    pcall(h3.release, h3)
    c:close(); other:close()
    collectgarbage("restart")
    assert.equal(0, leaked, "registrations left after the last hold was released")
    assert.equal(0, still, "an unwatched 0.3 s lease is still there after 1.5 s (renewed by the stale registration)")
    assert.is_truthy(rival)
  end)
  it("a forked child is another owner: it cannot enter its parent's reentrant lock", function()
    local name = fresh()
    local c = assert(redislock.connect { url = srv.url })
    local l = assert(c:acquire(name, { reentrant = true, ttl = 5 }))
    local result = helpers.tmpdir() .. "/child.txt"
    local pid = assert(process.fork())
    if pid == 0 then
      local ok, msg = pcall(function()
        local mine, _, kind = c:acquire(name, { reentrant = true, ttl = 5 })
        local out = "child got " .. tostring(mine ~= nil) .. " " .. tostring(kind)
        if mine then mine:release() end
        return out
      end)
      local f = io.open(result, "w")
      f:write(ok and msg or ("error " .. tostring(msg)))
      f:close()
      process._exit(0)
    end
    process.waitpid(pid)
    local text = helpers.read_file(result)
    assert.is_true(l:release())
    c:close()
    -- SAFE: the child is another process, so "busy"
    assert.equal("child got false busy", text)
  end)

  it("adopt gives the adopter a fence of its own, even for a lock taken with fence = false", function()
    local name = fresh()
    local c = assert(redislock.connect { url = srv.url })
    local d = assert(redislock.connect { url = srv.url })
    local first = assert(c:acquire(name, { ttl = 5 }))
    first:release()
    local plain = assert(c:acquire(name, { ttl = 5, fence = false }))
    local adopted = assert(d:adopt(name, plain.token, { ttl = 5 }))
    assert.is_number(adopted.fence)
    assert.is_true(adopted.fence > first.fence, "the adopter shares the previous holder's fence")
    assert.is_true(adopted:release())
    c:close(); d:close()
  end)

  it("a reentrant hold of an earlier grant cannot extend a newer grant of the same owner", function()
    local name = fresh()
    local c = assert(redislock.connect { url = srv.url })
    local old = assert(c:acquire(name, { reentrant = true, ttl = 0.1, watchdog = false }))
    helpers.sleep(0.2)                 -- its lease ran out, unnoticed
    local new = assert(c:acquire(name, { reentrant = true, ttl = 5 }))
    assert.equal("not held", select(3, old:extend(5)))
    assert.is_false(old:held())
    assert.is_true(new:extend(5))
    assert.is_true(new:release())
    c:close()
  end)
  it("a waiter without fence sends its own ttl even when another acquire runs while its SET yields", function()
    -- A channel over the real one that, when a SET has answered and before
    -- the attempt goes on, runs what another light thread could run while a
    -- cosocket SET yields: an acquire with another ttl, and the holder's
    -- release. The attempt must still send its own ttl (30 s), not 0.1 s.
    local name, other_name = fresh(), fresh()
    local c1 = assert(redislock.connect { url = srv.url })
    local c2 = assert(redislock.connect { url = srv.url })
    local c3 = assert(redislock.connect { url = srv.url })
    local holder = assert(c3:acquire(name, { ttl = 30 }))
    local real = c1._conn
    local meanwhile = function()
      local o = assert(c2:acquire(other_name, { ttl = 0.1 }))
      assert(holder:release())
      assert(o:release())
    end
    c1._conn = setmetatable({}, { __index = function(_, k)
      if k == "command" then
        return function(_, cmd, ...)
          local r, e, kind = real:command(cmd, ...)
          if cmd == "SET" and meanwhile then
            local f = meanwhile
            meanwhile = nil
            f()
          end
          return r, e, kind
        end
      end
      local v = real[k]
      if type(v) == "function" then return function(_, ...) return v(real, ...) end end
      return v
    end })
    local l = assert(c1:acquire(name, { fence = false, wait = 2, ttl = 30, watchdog = false }))
    assert.is_nil(meanwhile)                 -- the interleaving happened
    assert.is_true(raw:command("PTTL", "{" .. name .. "}") > 20000)
    helpers.sleep(0.2)
    local c4 = assert(redislock.connect { url = srv.url })
    assert.same({ nil, "busy" }, { nil, select(3, c4:acquire(name, { ttl = 30 })) })
    assert.is_true(l:held())
    c1._conn = real
    assert.is_true(l:release())
    for _, c in ipairs({ c1, c2, c3, c4 }) do c:close() end
  end)
end)

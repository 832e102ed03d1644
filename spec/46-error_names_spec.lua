-- Errors name the lock (issue 32, point 4): every busy, timeout and not
-- held message says which lock, after its kind word, escaped as holder
-- labels are; a service that takes many names logs which one failed.
local helpers = require "spec.helpers"
local redislock = require "redislock"
local errors = require "redislock.errors"

-- err is of `kind` and names `shown` right after the kind word.
local function names(kind, shown, v, err, k)
  assert.is_nil(v)
  assert.equal(kind, k, tostring(err))
  assert.equal(kind, errors.kind_of(err), tostring(err))
  local head = kind .. ": " .. shown
  assert.equal(head, err:sub(1, #head), err)
  local after = err:sub(#head + 1, #head + 1)
  assert.is_true(after == "" or after == " ", err)
  return err
end

describe("errors name the lock", function()
  local srv, raw, c, rival
  local fresh = helpers.names("named")

  local fx = helpers.redis_fixture { raw = true, clients = 2 }
  setup(function() srv, raw, c, rival = fx.srv, fx.raw, fx.clients[1], fx.clients[2] end)

  it("busy: with the holder, without one, and this client's own", function()
    local name = fresh()
    local held = assert(c:acquire(name, { ttl = 5, holder = "nightly" }))
    local err = names("busy", name, rival:acquire(name))
    assert.matches(" held by nightly for %d+%.%d s$", err)
    names("busy", name, rival:with_lock(name, nil, function() end))
    names("busy", name, c:acquire(name))
    assert.is_true(held:release())
    local anon = assert(c:acquire(name, { ttl = 5, holder = false }))
    assert.equal("busy: " .. name, select(2, rival:acquire(name)))
    assert.is_true(anon:release())
  end)

  it("timeout: how long it waited", function()
    local name = fresh()
    local held = assert(c:acquire(name, { ttl = 5 }))
    local err = names("timeout", name, rival:acquire(name, { wait = 0.1 }))
    assert.matches(" not taken within 0%.1%d* s$", err)
    names("timeout", name, rival:acquire(name, { wait = 0.1, notify = false }))
    names("timeout", name, rival:acquire(name, { wait = 0.1, fair = true }))
    assert.is_true(held:release())
  end)

  it("not held: release, extend, release_token, break_lock, adopt, a lease lost in with_lock", function()
    local name = fresh()
    local l = assert(c:acquire(name, { ttl = 5 }))
    raw:command("DEL", "{" .. name .. "}")
    assert.equal("not held: " .. name, select(2, l:extend()))
    assert.equal("not held: " .. name, select(2, l:release()))
    names("not held", name, c:release_token(name, string.rep("0", 32)))
    names("not held", name, c:break_lock(name))
    names("not held", name, c:adopt(name, string.rep("1", 32)))
    local err = names("not held", name, c:with_lock(name, nil, function()
      raw:command("DEL", "{" .. name .. "}")
    end))
    assert.matches("lost while fn ran", err, 1, true)
  end)

  it("read-write locks and semaphores name theirs too", function()
    local name = fresh()
    local rw = c:rwlock(name)
    local w = assert(rw:write { ttl = 5 })
    names("busy", name, rival:rwlock(name):read())
    names("timeout", name, rival:rwlock(name):read { wait = 0.05 })
    assert.is_true(w:release())
    names("not held", name, w:release())
    local sem = assert(c:semaphore(name .. ":sem", 1))
    local p = assert(sem:acquire { ttl = 5 })
    names("busy", name .. ":sem", sem:acquire())
    names("timeout", name .. ":sem", sem:acquire { wait = 0.05 })
    assert.is_true(p:release())
    names("not held", name .. ":sem", p:release())
  end)

  it("escapes a name that would break a log line or drive a terminal", function()
    local base = fresh()
    local name = base .. "\n\27[2J\255"
    local held = assert(c:acquire(name, { ttl = 5 }))
    local err = select(2, rival:acquire(name))
    assert.is_nil(err:find("[\n\27\255]"))
    names("busy", base .. "\\x0a\\x1b[2J\239\191\189", nil, err, "busy")
    assert.is_true(held:release())
    -- a 1 MB name makes a short message
    local long = string.rep("n", 2 ^ 20)
    local h = assert(c:acquire(long, { ttl = 5 }))
    err = select(2, rival:acquire(long))
    assert.is_true(#err < 300, #err)
    assert.matches("^busy: nnnn", err)
    assert.is_true(h:release())
  end)

  it("on Redlock too", function()
    local a, b = helpers.start_redis(), helpers.start_redis()
    local urls = { srv.url, a.url, b.url }
    local r1 = assert(redislock.connect { redlock = urls })
    local r2 = assert(redislock.connect { redlock = urls })
    local name = fresh()
    local l = assert(r1:acquire(name, { ttl = 5 }))
    names("busy", name, r2:acquire(name))
    names("timeout", name, r2:acquire(name, { wait = 0.1 }))
    assert.is_true(l:release())
    names("not held", name, l:release())
    names("not held", name, l:extend())
    names("not held", name, r1:release_token(name, string.rep("0", 32)))
    r1:close()
    r2:close()
    a:stop()
    b:stop()
  end)
end)

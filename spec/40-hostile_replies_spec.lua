-- Hostile replies (issue 33, points 1 and 2): a server, or whatever poses
-- as one, that answers what Redis never would. A reply declaring 2^31
-- elements, a bulk string of 10^12 bytes, a line that never ends, arrays
-- nested past any reply of ours, RESP3: each fails its own call at once
-- (long before its deadline), as a protocol error of kind "connection", on
-- every reader: a Lua call's connection, the watchdog's link, the
-- sentinels'. A reply of the wrong shape for a script (+OK where acquire's
-- array is expected, an extend that answers 7) is a protocol error of kind
-- "redis", and never reads as busy, not held, a grant or a renewal. The
-- server here is spec/support/fake_redis.lua, on loopback; the C side of
-- the same (the guard's bounds, the detached connection the nginx
-- transport uses, the machine's shape check, their fuzzing) is
-- test/c/reply_guard_test.c and test/c/script_answer_test.c.
local helpers = require "spec.helpers"
local redislock = require "redislock"

local HOSTILE = {
  { "an array of 2^31 elements", "*2147483647\r\n" },
  { "an array of 2^31 elements, inside an array", "*2\r\n:1\r\n*2147483647\r\n:1\r\n" },
  { "a bulk string of 10^12 bytes", "$1000000000000\r\nabc" },
  { "a status line that never ends", "+" .. string.rep("a", 200000) },
  { "arrays nested 9 deep", string.rep("*1\r\n", 9) .. ":1\r\n" },
  { "a RESP3 map", "%1\r\n+a\r\n:1\r\n" },
  { "a length that is no number", "*1x\r\n" },
}

-- What a call must take at most when a reply fails it at once: far below
-- its deadline (timeout = 2), with room for a loaded machine.
local PROMPT = 0.5

local function timed(fn, ...)
  local t0, cpu0 = helpers.monotime(), os.clock()
  local a, b, c = fn(...)
  return helpers.monotime() - t0, os.clock() - cpu0, a, b, c
end

describe("a reply that breaks the protocol's bounds", function()
  local fake
  setup(function() fake = helpers.start_fake_redis() end)
  teardown(function() fake:stop() end)
  after_each(function()
    fake:command("answer", "acquire", "default")
    fake:command("answer", "extend", "default")
    fake:command("answer", "SENTINEL", "default")
  end)

  it("fails a Lua call at once, as a protocol error, and the next call connects afresh", function()
    local c = assert(redislock.connect { url = fake.url, timeout = 2, connect_timeout = 2 })
    for _, h in ipairs(HOSTILE) do
      fake:command("answer", "acquire", fake.hex(h[2]))
      local took, cpu, l, err, kind = timed(c.acquire, c, "x", { ttl = 5, watchdog = false })
      assert.is_nil(l, h[1])
      assert.matches("^connection lost: protocol error: ", err, nil, false, h[1])
      assert.equal("connection", kind, h[1])
      assert(took < PROMPT and cpu < PROMPT, h[1] .. ": took " .. took .. " s, " .. cpu .. " s of CPU")
    end
    -- (the connection each one dropped is made again: a sound answer is read)
    fake:command("answer", "acquire", "default")
    local l = assert(c:acquire("x", { ttl = 5, watchdog = false }))
    assert.equal(7, l.fence)
    assert(l:release())
    c:close()
  end)

  it("fails the watchdog's renewal at once: the lease is reported lost at its end, not later", function()
    for _, h in ipairs({ HOSTILE[1], HOSTILE[3], HOSTILE[5] }) do
      local c = assert(redislock.connect { url = fake.url, timeout = 2 })
      local lost
      local cpu0 = os.clock()
      local l = assert(c:acquire("w", { ttl = 1, on_lost = function(_, why) lost = why end }))
      local t0 = helpers.monotime()
      fake:command("answer", "extend", fake.hex(h[2]))
      assert(helpers.wait_until(function()
        c:poll()
        return not l:held()
      end, 3, 0.01), h[1] .. ": still held")
      local took = helpers.monotime() - t0
      -- lost at its lease end (1 s after the grant), within a tick
      assert(took < 1.3, h[1] .. ": reported lost after " .. took .. " s")
      assert(helpers.wait_until(function()
        c:poll()
        return lost ~= nil
      end, 1, 0.01))
      assert.equal("unreachable", lost)
      assert(c._conn:stats().failures > 0)
      local closing = timed(c.close, c)
      assert(closing < PROMPT, h[1] .. ": close took " .. closing .. " s")
      assert(os.clock() - cpu0 < PROMPT, h[1] .. ": " .. (os.clock() - cpu0) .. " s of CPU")
    end
  end)

  it("fails the sentinels' answers at once: connect says so within its timeout", function()
    for _, h in ipairs(HOSTILE) do
      fake:command("answer", "SENTINEL", fake.hex(h[2]))
      local took, _, c, err, kind = timed(redislock.connect, {
        sentinels = { "127.0.0.1:" .. fake.port }, master = "m", connect_timeout = 2 })
      assert.is_nil(c, h[1])
      assert.matches("protocol error: ", err, nil, true, h[1])
      assert.equal("connection", kind, h[1])
      assert(took < PROMPT, h[1] .. ": took " .. took .. " s")
    end
  end)
end)

describe("a script's answer of the wrong shape", function()
  local fake, c
  setup(function()
    fake = helpers.start_fake_redis()
    c = assert(redislock.connect { url = fake.url, timeout = 2 })
  end)
  teardown(function()
    c:close()
    fake:stop()
  end)
  after_each(function()
    for _, name in ipairs({ "acquire", "extend", "release", "WAIT", "SCAN" }) do
      fake:command("answer", name, "default")
    end
  end)

  local NOT_ACQUIRE = {
    "+OK\r\n", ":1\r\n", ":0\r\n", "*1\r\n:1\r\n", "*2\r\n:2\r\n:1\r\n", "*2\r\n+OK\r\n:0\r\n",
    "$-1\r\n", "*-1\r\n", "*0\r\n", "*3\r\n:0\r\n:5\r\n:6\r\n", "*2\r\n:1\r\n$1\r\n7\r\n", "$4\r\nbusy\r\n",
    "*4\r\n:0\r\n:5\r\n:6\r\n:7\r\n",
  }

  it("acquire: never busy, never a grant: a protocol error of kind redis", function()
    for _, bytes in ipairs(NOT_ACQUIRE) do
      for _, wait in ipairs({ 0, 0.3 }) do
        fake:command("answer", "acquire", fake.hex(bytes))
        local before = tonumber(fake:command("count", "acquire"))
        local took, _, l, err, kind = timed(c.acquire, c, "s", { ttl = 5, wait = wait, watchdog = false })
        local what = bytes:gsub("\r\n", " ") .. " wait " .. wait
        assert.is_nil(l, what)
        assert.equal("redis", kind, what)
        assert.matches("^redis error: protocol error: acquire answered ", err, nil, false, what)
        -- (tried once; waiting, the policy tries again until `wait` is
        -- over, as after any failure that is not busy: never past it)
        local sent = tonumber(fake:command("count", "acquire")) - before
        if wait == 0 then assert.equal(1, sent, what) else assert(sent >= 1, what) end
        assert(took < wait + PROMPT, what .. ": took " .. took .. " s")
      end
    end
  end)

  it("SET NX (fence = false): only OK grants, only nil is busy, anything else a protocol error", function()
    -- (a bulk "OK" reads as the status OK: the client sees strings alike)
    for _, bytes in ipairs({ ":1\r\n", "*1\r\n:1\r\n", "+QUEUED\r\n", ":0\r\n" }) do
      fake:command("answer", "SET", fake.hex(bytes))
      local l, err, kind = c:acquire("n", { ttl = 5, fence = false, watchdog = false })
      local what = bytes:gsub("\r\n", " ")
      assert.is_nil(l, what)
      assert.equal("redis", kind, what)
      assert.matches("^redis error: protocol error: SET NX answered ", err, nil, false, what)
    end
    fake:command("answer", "SET", fake.hex("$-1\r\n"))
    local l, err = c:acquire("n", { ttl = 5, fence = false, watchdog = false })
    assert.is_nil(l)
    assert.equal("busy: n", err)
    fake:command("answer", "SET", fake.hex("+OK\r\n"))
    l = assert(c:acquire("n", { ttl = 5, fence = false, watchdog = false }))
    assert.is_falsy(l.fence)
    assert(l:release())
    fake:command("answer", "SET", "default")
  end)

  it("extend and release: never true, never not held", function()
    for _, bytes in ipairs({ "+OK\r\n", ":7\r\n", ":-1\r\n", "*1\r\n:1\r\n", "$1\r\n1\r\n", "$-1\r\n" }) do
      local l = assert(c:acquire("e", { ttl = 5, watchdog = false }))
      fake:command("answer", "extend", fake.hex(bytes))
      fake:command("answer", "release", fake.hex(bytes))
      local what = bytes:gsub("\r\n", " ")
      local ok, err, kind = l:extend(5)
      assert.is_nil(ok, what)
      assert.equal("redis", kind, what)
      assert.matches("^redis error: protocol error: extend answered ", err, nil, false, what)
      ok, err, kind = l:release()
      assert.is_nil(ok, what)
      assert.equal("redis", kind, what)
      assert.matches("^redis error: protocol error: release answered ", err, nil, false, what)
    end
  end)

  it("WAIT: an answer that is no count is a protocol error, never a count of acknowledgements", function()
    for _, bytes in ipairs({ "+OK\r\n", "*1\r\n:1\r\n", "$1\r\n1\r\n" }) do
      fake:command("answer", "WAIT", fake.hex(bytes))
      local l, err, kind = c:acquire("w", { ttl = 5, watchdog = false, replicas = 1 })
      assert.is_nil(l, bytes)
      assert.equal("redis", kind, bytes)
      assert.matches("^redis error: protocol error: WAIT answered ", err, nil, false, bytes)
    end
    fake:command("answer", "WAIT", fake.hex(":1\r\n"))
    assert(c:acquire("w", { ttl = 5, watchdog = false, replicas = 1 })):release()
  end)

  it("SCAN (client:list): an answer that is no page of keys is a protocol error, never a raise", function()
    for _, bytes in ipairs({ "+OK\r\n", "*1\r\n$1\r\n0\r\n", "*2\r\n$1\r\n0\r\n:5\r\n", ":0\r\n" }) do
      fake:command("answer", "SCAN", fake.hex(bytes))
      local rows, err, kind = c:list()
      assert.is_nil(rows, bytes)
      assert.equal("redis", kind, bytes)
      assert.matches("^redis error: protocol error: SCAN answered ", err, nil, false, bytes)
    end
    fake:command("answer", "SCAN", fake.hex("*2\r\n$1\r\n0\r\n*0\r\n"))
    assert.same({}, assert(c:list()))
  end)

  it("the watchdog's renewal: an answer of the wrong shape renews nothing", function()
    -- (":7" is read in place, without a reply object, on the renewals' fast path)
    for _, bytes in ipairs({ ":7\r\n", "+OK\r\n", "*1\r\n:1\r\n" }) do
      local cw = assert(redislock.connect { url = fake.url, timeout = 2 })
      local l = assert(cw:acquire("r", { ttl = 1 }))
      local t0 = helpers.monotime()
      fake:command("answer", "extend", fake.hex(bytes))
      assert(helpers.wait_until(function()
        cw:poll()
        return not l:held()
      end, 3, 0.01), bytes)
      assert(helpers.monotime() - t0 < 1.3, bytes)
      assert(cw._conn:stats().failures > 0)
      cw:close()
    end
  end)

  -- A random reply: a tree of integers (0 and 1 often), statuses, errors,
  -- strings, nils and arrays, as a server gone wrong might send.
  local function random_reply(depth)
    local r = math.random(10)
    if r <= 3 then
      return (":%d\r\n"):format(math.random(-2, 3))
    elseif r == 4 then
      return "+OK\r\n"
    elseif r == 5 then
      return "-ERR fuzz\r\n"
    elseif r == 6 then
      local s = ("x"):rep(math.random(0, 5))
      return ("$%d\r\n%s\r\n"):format(#s, s)
    elseif r == 7 then
      return "$-1\r\n"
    end
    local n = math.random(0, 5)
    local parts = { ("*%d\r\n"):format(n) }
    for i = 1, n do
      parts[i + 1] = depth < 3 and random_reply(depth + 1) or (":%d\r\n"):format(math.random(0, 1))
    end
    return table.concat(parts)
  end

  it("a fuzz of reply shapes: a grant only for {1, fence}, busy only for {0, pttl[, label, ms]}", function()
    math.randomseed(tonumber(os.getenv("REDISLOCK_FUZZ_SEED") or "") or 3301)
    local seen = {}
    for i = 1, 400 do
      local bytes = i % 5 == 0 and ("*2\r\n:%d\r\n:%d\r\n"):format(math.random(0, 1), math.random(1, 99))
                    or random_reply(0)
      fake:command("answer", "acquire", fake.hex(bytes))
      local took, _, l, err, kind = timed(c.acquire, c, "f", { ttl = 5, watchdog = false })
      local what = bytes:gsub("\r\n", " ")
      local grant = bytes:match("^%*2\r\n:1\r\n:(%-?%d+)\r\n$")
      local busy = bytes:match("^%*2\r\n:0\r\n:%-?%d+\r\n$")
                   or bytes:match("^%*4\r\n:0\r\n:%-?%d+\r\n%$%d+\r\n[^\r\n]*\r\n:%-?%d+\r\n$")
      if grant then
        assert(l, what .. ": " .. tostring(err))
        assert.equal(tonumber(grant), l.fence, what)
        assert(l:release())
      elseif busy then
        assert.is_nil(l, what)
        assert.equal("busy", kind, what)
      elseif bytes:sub(1, 1) == "-" then
        assert.is_nil(l, what)
        assert.equal("redis", kind, what)
      else
        assert.is_nil(l, what)
        assert.equal("redis", kind, what)
        assert.matches("^redis error: protocol error: acquire answered ", err, nil, false, what)
      end
      seen[kind or "granted"] = (seen[kind or "granted"] or 0) + 1
      assert(took < PROMPT, what .. ": took " .. took .. " s")
    end
    assert((seen.granted or 0) > 10 and (seen.busy or 0) > 10 and (seen.redis or 0) > 100)
  end)
end)

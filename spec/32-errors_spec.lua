-- One way to fail (docs/errors.md): every failure of the world returns
-- nil, err, kind, err starts with kind, and kind is a word of the one table
-- of kinds. Each failure path is driven for real here, on every topology.
local helpers = require "spec.helpers"
local redislock = require "redislock"
local errors = require "redislock.errors"
local socket = require "socket"

-- The kinds of docs/errors.md's table (its first column).
local function documented_kinds()
  local text = assert(helpers.read_file("docs/errors.md"))
  local kinds, in_table = {}, false
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do   -- (one per line, on every Lua)
    if line:match("^| kind |") then
      in_table = true
    elseif in_table and line:match("^| `") then
      kinds[#kinds + 1] = line:match("^| `([^`]+)`")
    elseif in_table and not line:match("^| ---") then
      in_table = false
    end
  end
  return kinds
end

local DOCUMENTED = {}
for _, k in ipairs(documented_kinds()) do DOCUMENTED[k] = true end

-- The failure (v, err, kind) is of `want`, by the rule.
local function failed_with(want, v, err, kind, where)
  where = where or want
  assert.is_nil(v, where)
  assert.equal(want, kind, where .. ": " .. tostring(err))
  assert.is_true(DOCUMENTED[kind] == true, where .. ": kind '" .. tostring(kind) .. "' is not in docs/errors.md")
  assert.equal(kind, errors.kind_of(err), where .. ": err does not start with its kind: " .. tostring(err))
  return err
end

describe("one way to fail", function()
  it("docs/errors.md and redislock.errors list the same kinds, in the same order", function()
    assert.same(errors.KINDS, documented_kinds())
  end)

  it("fail() keeps a kind the message has, and words one it lacks", function()
    local cases = {
      { "busy", nil, "busy" }, { "busy: held by a for 1.0 s", nil, "busy" },
      { "not held", nil, "not held" },
      { "connection lost: timed out (127.0.0.1:1)", "timeout", "connection" },
      { "no answer in time (master 2 of 3)", "timeout", "connection", "^connection lost: no answer in time" },
      { "master name unknown: x", "redis", "redis", "^redis error: master name unknown" },
      { "sentinels disagree on master: x", "connection", "connection", "^connection failed: sentinels disagree" },
      { "no sentinel reachable (last: x)", nil, "connection" },
      { "out of memory", "memory", "memory", "^memory: out of memory" },
      { "connection failed: out of memory (h:1)", "memory", "memory" },
      { "redis error: WRONGTYPE x", "redis", "redis" },
      { "CLUSTERDOWN x", "redis", "redis", "^redis error: CLUSTERDOWN" },
    }
    for _, c in ipairs(cases) do
      local v, err, kind = errors.fail(c[1], c[2])
      failed_with(c[3], v, err, kind, c[1])
      if c[4] then assert.matches(c[4], err) end
    end
    assert.equal("busy", errors.kind_of("busy"))
    assert.is_nil(errors.kind_of("busyness"))
    assert.is_nil(errors.kind_of("not heldx"))
    assert.is_nil(errors.kind_of("Connection lost"))
  end)

  describe("on one Redis", function()
    local srv, c, rival, fresh
    local fx = helpers.redis_fixture { clients = 2 }
    setup(function()
      srv, c, rival = fx.srv, fx.clients[1], fx.clients[2]
      fresh = helpers.names("err")
    end)

    it("busy, timeout, not held, stale", function()
      local name = fresh()
      local held = assert(c:acquire(name, { ttl = 5 }))
      failed_with("busy", rival:acquire(name))
      failed_with("timeout", rival:acquire(name, { wait = 0.2 }))
      failed_with("busy", rival:with_lock(name, nil, function() end))
      -- this client's own name: busy at once, whatever the wait
      failed_with("busy", c:acquire(name, { wait = 0.2 }))
      failed_with("not held", c:release_token(name, string.rep("0", 32)))
      failed_with("not held", c:break_lock(fresh()))
      assert.is_true(held:release())
      failed_with("not held", held:release())
      failed_with("not held", held:extend())
      local other = assert(c:acquire(name, { ttl = 5, watchdog = false }))
      srv:cli_raw("DEL", other._keys.lock)
      failed_with("not held", other:extend())
      failed_with("not held", other:release())
      -- fenced writes
      local a = assert(c:acquire(fresh(), { ttl = 5 }))
      local b = assert(c:acquire(fresh(), { ttl = 5 }))
      assert(c:fenced_set("res", "x", b.fence))
      failed_with("stale", c:fenced_set("res", "y", a.fence))
      failed_with("stale", c:fenced_get("res", a.fence))
      a:release()
      b:release()
      -- the shared primitives
      local rw = c:rwlock(fresh())
      local w = assert(rw:write { ttl = 5 })
      failed_with("busy", rw:read())
      failed_with("timeout", rw:read { wait = 0.1 })
      w:release()
      local sem = assert(c:semaphore(fresh(), 1))
      local p = assert(sem:acquire { ttl = 5 })
      failed_with("busy", sem:acquire())
      p:release()
      failed_with("not held", p:release())
      -- reentrant, adopt
      local r = assert(c:acquire(name, { reentrant = true, ttl = 5 }))
      failed_with("busy", c:acquire(name, { reentrant = true, owner = "someone else" }))
      r:release()
      failed_with("not held", c:adopt(name, string.rep("1", 32)))
    end)

    it("redis: an error answer (a key of another type, an ACL refusal)", function()
      local name = fresh()
      srv:cli_raw("RPUSH", "{" .. name .. "}:fence", "x")
      failed_with("redis", c:acquire(name))
      srv:cli_raw("DEL", "{" .. name .. "}:fence")
      local locked = helpers.start_redis { acl = { "user limited on >pw ~* &* +@all -evalsha -eval" } }
      local lc = assert(redislock.connect { url = "redis://limited:pw@127.0.0.1:" .. locked.port })
      local err = failed_with("redis", lc:acquire(fresh()))
      assert.matches("NOPERM", err)
      lc:close()
      failed_with("redis", redislock.connect { url = "redis://limited:wrong@127.0.0.1:" .. locked.port })
      locked:stop()
    end)

    it("connection: refused, a listener that never answers, a server that stops or goes away", function()
      local port = helpers.free_port()
      failed_with("connection", redislock.connect { url = "redis://127.0.0.1:" .. port })
      local silent = assert(socket.bind("127.0.0.1", 0))
      local _, sport = silent:getsockname()
      local err = failed_with("connection", redislock.connect { host = "127.0.0.1", port = tonumber(sport),
        connect_timeout = 0.2 })
      assert.matches("timed out", err)
      silent:close()
      local own = helpers.start_redis()
      local oc = assert(redislock.connect { url = own.url, timeout = 0.3 })
      own:kill("STOP")
      failed_with("connection", oc:acquire(fresh()))
      failed_with("connection", oc:inspect(fresh()))
      own:kill("CONT")
      local l = assert(oc:acquire(fresh(), { ttl = 5 }))
      own:kill("KILL")
      helpers.wait_until(function() return not own:alive() end)
      failed_with("connection", l:release())
      failed_with("connection", oc:acquire(fresh()))
      failed_with("connection", oc:semaphore(fresh(), 2))
      oc:close()
      own:stop()
    end)

    it("watchdog: a lock whose renewal connection is refused", function()
      local locked = helpers.start_redis { password = "pw" }
      local lc = assert(redislock.connect { url = "redis://:pw@127.0.0.1:" .. locked.port })
      locked:cli("CONFIG", "SET", "requirepass", "changed")
      local err = failed_with("watchdog", lc:acquire(fresh(), { ttl = 5 }))
      assert.matches("^watchdog failed: ", err)
      lc:close()
      locked:stop()
    end)

    it("unsafe and replicas", function()
      local lru = helpers.start_redis { args = { "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru" } }
      failed_with("unsafe", redislock.connect { url = lru.url, strict = true })
      lru:stop()
      failed_with("replicas", c:acquire(fresh(), { replicas = 1, replicas_timeout = 0.05 }))
      local l = assert(c:acquire(fresh(), { ttl = 5 }))
      failed_with("replicas", l:extend(5, { replicas = 1, replicas_timeout = 0.05 }))
      l:release()
    end)
  end)

  it("on Sentinel: no sentinel reachable, an unknown master name", function()
    local topo = require "spec.support.topology"
    local err = failed_with("connection", redislock.connect {
      sentinels = { "127.0.0.1:" .. helpers.free_port() }, master = "mymaster", connect_timeout = 0.3 })
    assert.matches("no sentinel reachable", err)
    local master = helpers.start_redis()
    local sen = topo.start_sentinels { master = master, count = 1, quorum = 1, replicas = 0 }
    local seeds = {}
    for i, a in ipairs(sen:addrs()) do seeds[i] = a.host .. ":" .. a.port end
    -- (the sentinels answered: a refusal, as a server's error is)
    err = failed_with("redis", redislock.connect { sentinels = seeds, master = "nosuchmaster",
      connect_timeout = 1 })
    assert.matches("^redis error: master name unknown: nosuchmaster", err)
    sen:stop()
    master:stop()
  end)

  it("on Cluster: no node reachable", function()
    local err = failed_with("connection", redislock.connect {
      cluster = { "127.0.0.1:" .. helpers.free_port() }, connect_timeout = 0.3 })
    assert.matches("cluster unreachable", err)
  end)

  it("on Redlock: a stalled majority, an extend short of a majority, a release nobody hears", function()
    local list, urls = {}, {}
    for i = 1, 3 do
      list[i] = helpers.start_redis()
      urls[i] = list[i].url
    end
    local c = assert(redislock.connect { redlock = urls, timeout = 0.2 })
    local kept = assert(c:acquire("rl:kept", { ttl = 2 }))
    list[2]:kill("STOP")
    list[3]:kill("STOP")
    local err = failed_with("connection", c:acquire("rl:new", { ttl = 2 }))
    assert.matches("no answer in time %(master %d of 3%)", err)
    err = failed_with("quorum", kept:extend(2))
    assert.equal("quorum: extend reached only 1 of 3 masters (a majority is 2)", err)
    list[2]:kill("CONT")
    list[3]:kill("CONT")
    assert.is_true(kept:release())
    failed_with("not held", kept:release())
    failed_with("busy", (function()
      local a = assert(c:acquire("rl:busy", { ttl = 2 }))
      local v, e, k = c:acquire("rl:busy")
      a:release()
      return v, e, k
    end)())
    c:close()
    for _, s in ipairs(list) do s:stop() end
  end)
end)

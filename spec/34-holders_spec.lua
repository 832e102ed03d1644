-- Who holds this lock, and since when (issue 25, part 2): the holder label
-- every grant records, client:inspect, the busy error that names the
-- holder, `redislock status` and `redislock list` (single Redis, Cluster,
-- Redlock; --json), and no token anywhere but inspect's token field.
local helpers = require "spec.helpers"
local redislock = require "redislock"
local core = require "redislock.core"
local json = require "dkjson"
local quote = helpers.quote

local BIN = "bin/redislock"
local HOST = core.hostname()

local function args_of(...)
  local parts = {}
  for _, a in ipairs({ ... }) do parts[#parts + 1] = quote(a) end
  return table.concat(parts, " ")
end

-- The server's clock, in seconds.
local function server_time(srv)
  local out = srv:cli_raw("TIME")
  local s, us = out:match("(%d+)%s+(%d+)")
  return tonumber(s) + tonumber(us) / 1e6
end

describe("holders", function()
  -- (rival: another client; this one's own names it refuses at once)
  local srv, c, rival, fresh
  local fx = helpers.redis_fixture { clients = 2 }
  setup(function()
    srv, c, rival = fx.srv, fx.clients[1], fx.clients[2]
    fresh = helpers.names("holders")
  end)

  local function cli(...)
    return "REDISLOCK_URL=" .. quote(srv.url) .. " " .. quote(helpers.lua_bin) .. " " .. BIN .. " " .. args_of(...)
  end
  local function run_sync(...)
    local p = helpers.spawn(cli(...))
    local code = p:wait(30)
    return code, p:stdout(), p:stderr()
  end

  it("every grant records its holder: <hostname>:<pid> by default, since when on the server's clock", function()
    local name = fresh()
    local before = server_time(srv)
    local l = assert(c:acquire(name, { ttl = 10 }))
    local after = server_time(srv)
    local info = assert(c:inspect(name))
    assert.equal(HOST .. ":" .. core.getpid(), info.holder)
    assert.is_true(info.since >= before - 0.001 and info.since <= after + 0.001,
      string.format("since %.6f not within %.6f..%.6f", info.since, before, after))
    assert.is_true(info.held_for >= 0 and info.held_for < 5)
    assert.equal(l.fence, info.fence)
    assert.equal(0, info.waiters)
    assert.equal(l.token, info.token)
    -- the busy error names it, and how long it has been held; its kind is busy
    helpers.sleep(0.3)
    local none, err, kind = rival:acquire(name)
    assert.is_nil(none)
    assert.equal("busy", kind)
    local who, secs = err:match("^busy: " .. name:gsub("%p", "%%%0") .. " held by (.+) for (%d+%.%d) s$")
    assert.equal(HOST .. ":" .. core.getpid(), who)
    assert.is_true(tonumber(secs) >= 0.3 and tonumber(secs) < 5, err)
    -- a wait that runs out is a timeout, as before
    assert.equal("timeout", select(3, rival:acquire(name, { wait = 0.1 })))
    l:release()
    local free = assert(c:inspect(name))
    assert.is_false(free.held)
    assert.is_nil(free.holder)
    assert.is_nil(free.since)
  end)

  -- issue 31 target 5: the record goes with the lock (no key left behind
  -- by a release), and lives as long as the lock however long that is.
  it("the record lives as the lock: renewed by extend and the watchdog, gone at release", function()
    local name = fresh()
    local record = "{" .. name .. "}:holder"
    local l = assert(c:acquire(name, { ttl = 1, watchdog = false }))
    local pttl = (srv:cli_raw("PTTL", record))
    assert.is_true(tonumber(pttl) > 0 and tonumber(pttl) <= 1000, pttl)
    assert.is_true(l:extend(30))
    assert.is_true(tonumber((srv:cli_raw("PTTL", record))) > 1000)
    assert.is_true(l:release())
    assert.equal("0", (srv:cli_raw("EXISTS", record)))
    -- renewed by the watchdog: still there, the holder still named, after
    -- the first lease has passed several times over
    local w = assert(c:acquire(name, { ttl = 0.3 }))
    local t0 = helpers.monotime()
    assert(helpers.wait_until(function() return helpers.monotime() - t0 > 1.2 end, 5, 0.05))
    if w:held() then
      assert.equal(HOST .. ":" .. core.getpid(), c:inspect(name).holder)
    end
    assert.is_true(w:release())
    assert.equal("0", (srv:cli_raw("EXISTS", record)))
  end)

  it("takes the holder option, the client's own, or none; refuses a bad one", function()
    local name = fresh()
    local l = assert(c:acquire(name, { holder = "nightly-report", ttl = 10 }))
    assert.equal("nightly-report", c:inspect(name).holder)
    assert.equal("busy: " .. name .. " held by nightly-report for ",
      select(2, rival:acquire(name)):match("^.* for "))
    l:release()
    local own = assert(redislock.connect { url = srv.url, holder = "web-3 api" })
    l = assert(own:acquire(name, { ttl = 10 }))
    assert.equal("web-3 api", own:inspect(name).holder)
    l:release()
    l = assert(own:acquire(name, { ttl = 10, holder = false }))
    local info = own:inspect(name)
    assert.is_true(info.held)
    assert.is_nil(info.holder)
    assert.equal("busy: " .. name, select(2, c:acquire(name)))   -- no holder to name
    l:release()
    own:close()
    -- a label from an earlier grant is never shown for a later one
    l = assert(c:acquire(name, { ttl = 10, holder = "first" }))
    l:release()
    l = assert(c:acquire(name, { ttl = 10, fence = false }))
    assert.is_nil(c:inspect(name).holder)
    l:release()
    -- bad labels are argument errors
    for _, bad in ipairs({ "", string.rep("x", 201), 42, {} }) do
      assert.has_error(function() c:acquire(name, { holder = bad }) end)
    end
    assert.has_error(function() c:acquire(name, { holder = "x", fence = false }) end)
    assert.has_error(function() redislock.connect { url = srv.url, holder = 1 } end)
    -- a label that holds the lock's own token is refused
    assert.has_error(function() c:acquire(name, { reentrant = true, holder = "me " .. c.owner }) end)
  end)

  it("counts the waiters, notify and fair ones", function()
    local name = fresh()
    local l = assert(c:acquire(name, { ttl = 10 }))
    local waiters = {}
    for i, fair in ipairs({ false, false, true }) do
      waiters[i] = helpers.spawn(helpers.lua_cmd(([[
        local c = assert(require("redislock").connect { url = %q })
        local l = c:acquire(%q, { wait = 10, ttl = 5, fair = %s })
        if l then l:release() end
      ]]):format(srv.url, name, tostring(fair))))
    end
    assert(helpers.wait_until(function() return c:inspect(name).waiters == 3 end, 5),
      "waiters: " .. tostring(c:inspect(name).waiters))
    l:release()
    for _, p in ipairs(waiters) do assert.equal(0, p:wait(15)) end
    assert(helpers.wait_until(function() return c:inspect(name).waiters == 0 end, 5))
    -- one that gives up leaves the count
    l = assert(c:acquire(name, { ttl = 10 }))
    assert.equal("timeout", select(3, rival:acquire(name, { wait = 0.3 })))
    assert.equal(0, c:inspect(name).waiters)
    l:release()
  end)

  it("a fair hand-over records the new holder", function()
    local name = fresh()
    local l = assert(c:acquire(name, { ttl = 10, fair = true, wait = 1 }))
    local p = helpers.spawn(helpers.lua_cmd(([[
      local c = assert(require("redislock").connect { url = %q })
      local l = assert(c:acquire(%q, { wait = 10, ttl = 5, fair = true, holder = "second in line" }))
      print("took") io.stdout:flush()
      require("redislock.core").sleep(2)
      l:release()
    ]]):format(srv.url, name)))
    assert(helpers.wait_until(function() return c:inspect(name).waiters == 1 end, 5))
    l:release()
    assert(helpers.wait_until(function() return p:stdout():find("took") end, 5))
    assert.equal("second in line", c:inspect(name).holder)
    assert.equal(0, p:wait(10))
  end)

  it("reentrant locks keep the first entry's holder; rwlocks and semaphores show each holder", function()
    local name = fresh()
    local outer = assert(c:acquire(name, { reentrant = true, ttl = 10, holder = "outer" }))
    local inner = assert(c:acquire(name, { reentrant = true, ttl = 10, holder = "inner" }))
    assert.equal("outer", c:inspect(name).holder)
    inner:release()
    outer:release()
    -- a read-write lock: each reader, then the writer
    local rw = c:rwlock(fresh())
    local r1 = assert(rw:read { holder = "reader one", ttl = 10 })
    local r2 = assert(rw:read { ttl = 10 })
    local info = assert(rw:inspect())
    assert.equal(2, info.readers)
    local labels = {}
    for _, h in ipairs(info.holders) do
      assert.equal("read", h.kind)
      labels[#labels + 1] = h.holder
      assert.is_true(h.ttl > 9 and h.ttl <= 10)
      assert.is_true(h.held_for >= 0 and h.since > 0)
    end
    table.sort(labels)
    local want = { HOST .. ":" .. core.getpid(), "reader one" }
    table.sort(want)
    assert.same(want, labels)
    r1:release()
    assert.equal(1, #rw:inspect().holders)
    r2:release()
    local w = assert(rw:write { holder = "the writer", ttl = 10 })
    info = rw:inspect()
    assert.same({ "write", "the writer" }, { info.holders[1].kind, info.holders[1].holder })
    assert.equal(w.fence and true, true)
    w:release()
    assert.same({}, rw:inspect().holders)
    -- a semaphore: each permit
    local sem = assert(c:semaphore(fresh(), 3))
    local p1 = assert(sem:acquire { holder = "permit one", ttl = 10 })
    local p2 = assert(sem:acquire { holder = "permit two", ttl = 10 })
    info = assert(sem:inspect())
    assert.equal(2, info.in_use)
    labels = {}
    for _, h in ipairs(info.holders) do labels[#labels + 1] = h.kind .. ":" .. h.holder end
    table.sort(labels)
    assert.same({ "permit:permit one", "permit:permit two" }, labels)
    p1:release()
    p2:release()
    assert.same({}, sem:inspect().holders)
  end)

  describe("from the command line", function()
    it("run records <hostname>:<pid> <command>; status prints holder and since; --verbose names it", function()
      local name = fresh()
      local p = helpers.spawn(cli("run", name, "--", "sleep", "5"))
      assert(helpers.wait_until(function() return c:inspect(name).held end, 5))
      local info = c:inspect(name)
      assert.equal(HOST .. ":" .. p.pid .. " sleep 5", info.holder)
      local code, out = run_sync("status", name)
      assert.equal(0, code)
      assert.matches("\nholder: " .. (HOST .. ":" .. p.pid .. " sleep 5"):gsub("%p", "%%%0") .. "\n", out)
      local y, mo, d, h, mi, s = out:match("\nsince: (%d+)%-(%d+)%-(%d+)T(%d+):(%d+):(%d+)%.%d+Z %(held %d+%.%d s%)\n")
      assert.truthy(y, out)
      local t = os.time({ year = tonumber(y), month = tonumber(mo), day = tonumber(d), hour = tonumber(h),
        min = tonumber(mi), sec = tonumber(s) })
      -- (os.time reads a local time: compare through the same conversion)
      local server = math.floor(info.since)
      local sd = os.date("!*t", server)
      assert.equal(os.time(sd), t)
      assert.matches("\nwaiters: 0\n", out)
      code, out = run_sync("status", "--json", name)
      assert.equal(0, code)
      local obj = assert(json.decode(out))
      assert.same({ name, true, HOST .. ":" .. p.pid .. " sleep 5", info.fence, 0 },
        { obj.name, obj.held, obj.holder, obj.fence, obj.waiters })
      assert.is_true(math.abs(obj.since - info.since) < 0.002)
      assert.is_nil(obj.token)
      local err
      code, out, err = run_sync("run", "--verbose", name, "--", "true")
      assert.equal("", out)
      assert.equal(1, code)
      assert.matches("^redislock: " .. name:gsub("%p", "%%%0") .. " is held by " .. HOST:gsub("%p", "%%%0") .. ":" ..
        p.pid .. " sleep 5 for %d+%.%d s %(busy%)\n$", err)
      p:stop()
      code, out = run_sync("status", name)
      assert.equal(1, code)
      assert.is_nil(out:find("holder:", 1, true))
    end)

    it("list shows every holder on one Redis, as text and as JSON", function()
      local prefix = fresh("list") .. ":"
      local lc = assert(redislock.connect { url = srv.url, prefix = prefix })
      local a = assert(lc:acquire("orders:1", { ttl = 20, holder = "alpha" }))
      local b = assert(lc:acquire("orders:2", { ttl = 20, holder = "beta\nnewline" }))
      local other = assert(lc:acquire("reports", { ttl = 20 }))
      local rw = lc:rwlock("orders:rw")
      local r1 = assert(rw:read { ttl = 20, holder = "reader" })
      local sem = assert(lc:semaphore("orders:sem", 2))
      local s1 = assert(sem:acquire { ttl = 20, holder = "permit" })
      local rows = assert(lc:list("orders:*"))
      local got = {}
      for _, row in ipairs(rows) do got[#got + 1] = row.name .. "|" .. row.kind .. "|" .. tostring(row.holder) end
      assert.same({ "orders:1|lock|alpha", "orders:2|lock|beta\nnewline", "orders:rw|read|reader",
        "orders:sem|permit|permit" }, got)
      assert.equal(5, #assert(lc:list()))
      assert.same({}, assert(lc:list("nothing*")))
      -- the command line, on the same prefix
      local code, out = run_sync("list", "--prefix", prefix, "orders:*")
      assert.equal(0, code)
      local lines = {}
      for line in out:gmatch("[^\n]+") do lines[#lines + 1] = line end
      assert.equal(5, #lines, out)
      assert.matches("^NAME%s+KIND%s+HOLDER%s+HELD%s+TTL%s+WAITERS$", lines[1])
      assert.matches("^orders:1%s+lock%s+alpha%s+%d+%.%d s%s+%d+%.%d s%s+0$", lines[2])
      assert.matches("^orders:2%s+lock%s+beta\\x0anewline%s", lines[3])   -- escaped: one line per holder
      code, out = run_sync("list", "--prefix", prefix, "--json")
      assert.equal(0, code)
      local obj = assert(json.decode(out), out)
      assert.equal(5, #obj.locks)
      local by = {}
      for _, row in ipairs(obj.locks) do by[row.name .. "|" .. row.kind] = row end
      assert.equal("beta\nnewline", by["orders:2|lock"].holder)
      assert.equal(a.fence, by["orders:1|lock"].fence)
      assert.is_true(by["orders:1|lock"].ttl > 15 and by["orders:1|lock"].ttl <= 20)
      assert.is_true(by["orders:1|lock"].held_for >= 0 and by["orders:1|lock"].since > 1e9)
      assert.equal("reader", by["orders:rw|read"].holder)
      assert.equal("permit", by["orders:sem|permit"].holder)
      assert.equal(HOST .. ":" .. core.getpid(), by["reports|lock"].holder)
      -- never KEYS
      local log = helpers.tmpdir() .. "/monitor"
      local mon = helpers.spawn("exec redis-cli -p " .. srv.port .. " MONITOR > " .. log)
      assert(helpers.wait_until(function() return (helpers.read_file(log) or ""):find("OK") end, 5))
      run_sync("list", "--prefix", prefix)
      helpers.sleep(0.2)
      mon:stop()
      local seen = helpers.read_file(log)
      assert.matches('"SCAN"', seen)
      assert.is_nil(seen:find('"KEYS"', 1, true))
      for _, l in ipairs({ a, b, other, r1, s1 }) do l:release() end
      lc:close()
    end)

    it("no token in any holder, status, list, error or inspect field but token", function()
      local prefix = fresh("secret") .. ":"
      local lc = assert(redislock.connect { url = srv.url, prefix = prefix })
      local held = {
        assert(lc:acquire("mutex", { ttl = 20 })),
        assert(lc:acquire("fair", { ttl = 20, fair = true, wait = 1 })),
        assert(lc:acquire("re", { ttl = 20, reentrant = true })),
        assert(lc:rwlock("rw"):read { ttl = 20 }),
        assert(lc:rwlock("rw2"):write { ttl = 20 }),
        assert(assert(lc:semaphore("sem", 2)):acquire { ttl = 20 }),
      }
      local p = helpers.spawn("REDISLOCK_URL=" .. quote(srv.url) .. " " .. quote(helpers.lua_bin) .. " " .. BIN ..
        " run --prefix " .. quote(prefix) .. " job -- sh -c 'echo $REDISLOCK_TOKEN > " .. helpers.tmpdir() ..
        "/t; sleep 5'")
      assert(helpers.wait_until(function() return lc:inspect("job").held end, 5))
      local tokens = { lc.owner }
      for _, l in ipairs(held) do tokens[#tokens + 1] = l.token end
      tokens[#tokens + 1] = lc:inspect("job").token
      local texts = {}
      local function add(s) texts[#texts + 1] = tostring(s) end
      local function walk(v, path)
        if type(v) == "table" then
          for k, x in pairs(v) do if not (path == "" and k == "token") then walk(x, path .. "." .. tostring(k)) end end
        elseif v ~= nil then
          add(v)
        end
      end
      for _, n in ipairs({ "mutex", "fair", "re", "job", "free" }) do walk(assert(lc:inspect(n)), "") end
      walk(assert(lc:rwlock("rw"):inspect()), "")
      walk(assert(lc:rwlock("rw2"):inspect()), "")
      walk(assert(assert(lc:semaphore("sem", 2)):inspect()), "")
      walk(assert(lc:list()), "x")
      for _, n in ipairs({ "mutex", "fair", "re", "job" }) do
        add(select(2, lc:acquire(n)))
        add(select(2, lc:acquire(n, { wait = 0.05 })))
        add(select(2, lc:acquire(n, { reentrant = true, owner = "another" })))
        add(select(2, lc:release_token(n, string.rep("0", 32))))
      end
      add(select(2, lc:rwlock("rw2"):read()))
      add(select(2, lc:rwlock("rw"):write()))
      add(select(2, assert(lc:semaphore("sem", 1)):acquire()))
      for _, args in ipairs({ { "status", "mutex" }, { "status", "--json", "job" }, { "list" }, { "list", "--json" },
                              { "run", "--verbose", "job", "--", "true" }, { "run", "-w", "0.2", "--verbose", "job",
                              "--", "true" }, { "release", "--token", string.rep("0", 32), "job" } }) do
        table.insert(args, 2, "--prefix")
        table.insert(args, 3, prefix)
        local _, out, err = run_sync((table.unpack or unpack)(args)) -- luacheck: ignore 143
        add(out)
        add(err)
      end
      local all = table.concat(texts, "\n")
      assert.is_true(#all > 500)
      for _, t in ipairs(tokens) do
        assert.is_nil(all:find(t, 1, true), "a token was shown: " .. t)
      end
      p:stop()
      for _, l in ipairs(held) do pcall(l.release, l) end
      lc:close()
    end)
  end)
end)

describe("list beyond one Redis", function()
  it("on a Cluster: every master, by SCAN", function()
    local topo = require "spec.support.topology"
    local cl = topo.start_cluster { masters = 3, replicas = 0 }
    local c = assert(redislock.connect { cluster = { cl.seeds[1] } })
    local held, names = {}, {}
    for i = 1, 12 do
      names[i] = "cl:" .. i
      held[i] = assert(c:acquire(names[i], { ttl = 20, holder = "h" .. i }))
    end
    -- spread over the masters: every one holds some
    local on = {}
    for _, n in ipairs(names) do on[cl:node_for_key("{" .. n .. "}").port] = true end
    local count = 0
    for _ in pairs(on) do count = count + 1 end
    assert.is_true(count >= 2)
    local rows = assert(c:list("cl:*"))
    assert.equal(12, #rows)
    for _, row in ipairs(rows) do assert.equal("h" .. row.name:match("%d+"), row.holder) end
    local p = helpers.spawn(quote(helpers.lua_bin) .. " " .. BIN .. " list --json --url " ..
      quote("redis+cluster://" .. table.concat(cl.seeds, ",")) .. " 'cl:*'")
    assert.equal(0, p:wait(20), p:stderr())
    assert.equal(12, #assert(json.decode(p:stdout())).locks)
    for _, l in ipairs(held) do l:release() end
    c:close()
    cl:stop()
  end)

  it("on Redlock: the locks a majority holds", function()
    local list, urls = {}, {}
    for i = 1, 3 do
      list[i] = helpers.start_redis()
      urls[i] = list[i].url
    end
    local c = assert(redislock.connect { redlock = urls })
    local a = assert(c:acquire("rl:a", { ttl = 20, holder = "alpha" }))
    local b = assert(c:acquire("rl:b", { ttl = 20 }))
    -- one master alone with a key of its own: not a lock
    list[1]:cli_raw("SET", "{rl:minority}", "someone", "PX", "20000")
    local info = assert(c:inspect("rl:a"))
    assert.equal("alpha", info.holder)
    assert.is_true(info.held_for >= 0)
    local d = assert(redislock.connect { redlock = urls })
    local none, err, kind = d:acquire("rl:a")
    d:close()
    assert.is_nil(none)
    assert.equal("busy", kind)
    assert.matches("^busy: rl:a held by alpha for %d+%.%d s$", err)
    local rows = assert(c:list())
    local got = {}
    for _, row in ipairs(rows) do got[#got + 1] = row.name .. "|" .. tostring(row.holder) end
    assert.same({ "rl:a|alpha", "rl:b|" .. core.hostname() .. ":" .. core.getpid() }, got)
    local args = {}
    for _, u in ipairs(urls) do args[#args + 1] = "--url " .. quote(u) end
    local p = helpers.spawn(quote(helpers.lua_bin) .. " " .. BIN .. " list --json " .. table.concat(args, " "))
    assert.equal(0, p:wait(20), p:stderr())
    local obj = assert(json.decode(p:stdout()))
    assert.equal(2, #obj.locks)
    assert.equal("alpha", obj.locks[1].holder)
    a:release()
    b:release()
    c:close()
    for _, s in ipairs(list) do s:stop() end
  end)
end)

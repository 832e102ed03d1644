-- Fences that order grants across failover and restart, counters that do
-- not pile up, resources that live and die as one key, and a server that
-- can evict lock keys shown for what it is.
local helpers = require "spec.helpers"
local redislock = require "redislock"

-- INFO replication's master_link_status of srv is up.
local function link_up(srv)
  return (srv:cli_raw("INFO", "replication")):find("master_link_status:up", 1, true) ~= nil
end

describe("fences", function()
  local fresh = helpers.names("fence")

  -- The probing case: a replica has the fence counter but not the latest
  -- lock key or counter when it is promoted; a second client takes the name
  -- there. Its fence must still be above the old master's holder's.
  it("order grants across a promotion of a lagging replica", function()
    local master = helpers.start_redis()
    local link = helpers.start_proxy(master.port)   -- the replication link
    local replica = helpers.start_redis { args = { "--replicaof", "127.0.0.1", link.port } }
    assert(helpers.wait_until(function() return link_up(replica) end, 10, 0.05), "replica never synced")
    local store = helpers.start_redis()             -- the fenced resource lives apart
    local on_master = assert(redislock.connect { url = master.url })
    local resource = assert(redislock.connect { url = store.url })
    local name = fresh()

    local first = assert(on_master:acquire(name, { ttl = 5 }))
    assert.is_true(first:release())
    -- the replica has the counter as of that grant
    assert(helpers.wait_until(function()
      return replica:cli_raw("GET", "{" .. name .. "}:fence") == string.format("%.0f", first.fence)
    end, 5, 0.02))
    link:kill("STOP")                                -- replication stalls
    local old_holder = assert(on_master:acquire(name, { ttl = 30 }))
    assert.equal("OK", (replica:cli_raw("REPLICAOF", "NO", "ONE")))
    local on_replica = assert(redislock.connect { url = replica.url })
    local new_holder = assert(on_replica:acquire(name, { ttl = 30 }))  -- two holders now
    assert.is_true(new_holder.fence > old_holder.fence,
      string.format("new master's fence %.0f, old master's %.0f", new_holder.fence, old_holder.fence))
    -- so the resource takes the new holder's writes and refuses the old one's
    assert.equal(1, resource:fenced_set("res:" .. name, "new", new_holder.fence))
    assert.same({ nil, "stale", "stale" }, { resource:fenced_set("res:" .. name, "old", old_holder.fence) })
    -- and later grants on either keep the order of time
    assert.is_true(old_holder:release())
    local later = assert(on_master:acquire(name, { ttl = 5 }))
    assert.is_true(later.fence > new_holder.fence)
    later:release()
    new_holder:release()
    for _, c in ipairs({ on_master, on_replica, resource }) do c:close() end
    link:kill("CONT")
    link:stop()
    for _, s in ipairs({ replica, master, store }) do s:stop() end
  end)

  describe("counters", function()
    local srv, admin

    local fx = helpers.redis_fixture { raw = true }
    setup(function() srv, admin = fx.srv, fx.raw end)

    it("live fence_ttl after the last grant (60 s by default), refreshed by each grant", function()
      local c = assert(redislock.connect { url = srv.url })
      local name = fresh()
      local l = assert(c:acquire(name, { ttl = 5 }))
      local pttl = admin:command("PTTL", "{" .. name .. "}:fence")
      assert.is_true(pttl > 60 * 1000 - 5000 and pttl <= 60 * 1000, tostring(pttl))
      l:release()
      c:close()
    end)

    -- issue 31 target 5: what a released name leaves, with the default
    -- settings (a holder label, fences): its fence counter alone, <= 100
    -- bytes as MEMORY USAGE counts a key (with its ttl), for fence_ttl.
    it("a released name leaves its fence counter alone: one key, at most 100 bytes", function()
      local c = assert(redislock.connect { url = srv.url })
      for _, name in ipairs({ fresh("order:1234567"), fresh("a") }) do
        local l = assert(c:acquire(name, { ttl = 10 }))
        assert.is_truthy(c:inspect(name).holder)   -- (a label was recorded)
        assert.is_true(l:release())
        local left = admin:command("KEYS", "{" .. name .. "}*")
        assert.same({ "{" .. name .. "}:fence" }, left)
        local bytes = admin:command("MEMORY", "USAGE", left[1], "SAMPLES", "0")
        assert.is_true(bytes <= 100, left[1] .. ": " .. tostring(bytes) .. " bytes")
      end
      -- a reentrant lock, a fair one, a rwlock writer: the same
      local name = fresh()
      local r = assert(c:acquire(name, { reentrant = true }))
      assert.is_true(r:release())
      local f = assert(c:acquire(name, { fair = true, wait = 1 }))
      assert.is_true(f:release())
      assert.same({ "{" .. name .. "}:fence" }, admin:command("KEYS", "{" .. name .. "}*"))
      local w = assert(c:rwlock(name):write())
      assert.is_true(w:release())
      assert.same({}, admin:command("KEYS", "{" .. name .. "}:rw"))
      assert.same({}, admin:command("KEYS", "{" .. name .. "}:rw:holder"))
      -- a set (acquire_all): its holder records renewed with it, gone with it
      local a, b = fresh(), fresh()
      local set = assert(c:acquire_all({ a, b }, { ttl = 1, watchdog = false }))
      for _, n in ipairs({ a, b }) do
        local pttl = admin:command("PTTL", "{" .. n .. "}:holder")
        assert.is_true(pttl > 0 and pttl <= 1000, n .. "'s holder record lives " .. pttl .. " ms, not the lease")
      end
      assert.is_true(set:extend(30))
      for _, n in ipairs({ a, b }) do
        assert.is_true(admin:command("PTTL", "{" .. n .. "}:holder") > 20000, n .. "'s holder record not renewed")
      end
      assert.is_true(set:release())
      for _, n in ipairs({ a, b }) do
        assert.same({ "{" .. n .. "}:fence" }, admin:command("KEYS", "{" .. n .. "}*"))
      end
      c:close()
    end)

    -- issue 31: what a reentrant holder that died leaves (here: never
    -- released, no watchdog, its leases run out). A reentrant lock's and a
    -- reentrant writer's grant (n, fence) and reentrant readers' counts live
    -- as the lock and the shares they count: no key of the names lives
    -- forever, and within one more lease only the fence counters
    -- (fence_ttl) and the readers' holders (kept 7 days, as a plain
    -- reader's) are left.
    it("a reentrant holder that dies leaves no key without a ttl, and soon only fences and holders", function()
      local c = assert(redislock.connect { url = srv.url })
      local a, b, d = fresh(), fresh(), fresh()
      local held = {
        assert(c:acquire(a, { reentrant = true, ttl = 0.3, watchdog = false })),
        assert(c:rwlock(b, { reentrant = true }):write { ttl = 0.3, watchdog = false }),
        assert(c:rwlock(d, { reentrant = true }):read { ttl = 0.3, watchdog = false }),
      }
      local function left()
        local out = {}
        for _, n in ipairs({ a, b, d }) do
          for _, k in ipairs(admin:command("KEYS", "{" .. n .. "}*")) do out[#out + 1] = k end
        end
        table.sort(out)
        return out
      end
      helpers.sleep(0.6)   -- (past the lease)
      for _, l in ipairs(held) do assert.is_false(l:held()) end
      local forever = {}
      for _, k in ipairs(left()) do
        if admin:command("PTTL", k) == -1 then forever[#forever + 1] = k end
      end
      assert.same({}, forever)   -- (keys without a ttl: left forever)
      local kept = { ["{" .. a .. "}:fence"] = true, ["{" .. b .. "}:rw:fence"] = true,
        ["{" .. d .. "}:rw:readers:holders"] = true }
      local rest
      assert(helpers.wait_until(function()
        rest = {}
        for _, k in ipairs(left()) do
          if not kept[k] then rest[#rest + 1] = k end
        end
        return #rest == 0
      end, 0.3, 0.02), "left: " .. table.concat(rest, " "))
      c:close()
    end)

    -- ...and while the holder lives, they live: however its lease was kept
    -- (the watchdog's renewals, an extend, an entry asking for a longer
    -- lease), the owner entering again once the first lease is over enters
    -- the same grant (its fence; a reader's entries counted on), and every
    -- hold extends and releases as before.
    it("a reentrant hold keeps its grant while its lease is kept: watchdog, extend, a longer entry", function()
      local c = assert(redislock.connect { url = srv.url })
      local other = assert(redislock.connect { url = srv.url })
      for _, how in ipairs({ "watchdog", "extend", "enter" }) do
        local a, b, d = fresh(), fresh(), fresh()
        local rwb, rwd = c:rwlock(b, { reentrant = true }), c:rwlock(d, { reentrant = true })
        local function opts(ttl, lock)
          return { reentrant = lock, ttl = ttl, watchdog = how == "watchdog" }
        end
        local ttl = how == "watchdog" and 0.5 or 0.3
        local locks = { assert(c:acquire(a, opts(ttl, true))) }
        local writes = { assert(rwb:write(opts(ttl))) }
        local reads = { assert(rwd:read(opts(ttl))) }
        if how == "watchdog" then
          helpers.sleep(2)   -- (four leases, renewed by the watchdog)
        else
          if how == "extend" then
            for _, l in ipairs({ locks[1], writes[1], reads[1] }) do assert.is_true(l:extend(1.5)) end
          else
            locks[2] = assert(c:acquire(a, opts(1.5, true)))
            writes[2] = assert(rwb:write(opts(1.5)))
            reads[2] = assert(rwd:read(opts(1.5)))
          end
          helpers.sleep(0.6)   -- (twice the first lease)
        end
        local l = assert(c:acquire(a, opts(ttl, true)))
        assert.equal(locks[1].fence, l.fence, how)
        locks[#locks + 1] = l
        local w = assert(rwb:write(opts(ttl)))
        assert.equal(writes[1].fence, w.fence, how)
        writes[#writes + 1] = w
        reads[#reads + 1] = assert(rwd:read(opts(ttl)))
        assert.equal(#writes, rwb:inspect().writes, how)
        assert.equal(#reads, rwd:inspect().reads, how)   -- (entered again, not a fresh grant)
        for _, holds in ipairs({ locks, writes, reads }) do
          for i = #holds, 1, -1 do assert.is_true(holds[i]:extend(5), how) end
          for i = #holds, 2, -1 do assert.is_true(holds[i]:release(), how) end
        end
        assert.equal("busy", select(3, other:acquire(a)))
        assert.equal("busy", select(3, other:rwlock(b):read()))
        assert.equal("busy", select(3, other:rwlock(d):write()))
        for _, holds in ipairs({ locks, writes, reads }) do assert.is_true(holds[1]:release(), how) end
        assert(other:acquire(a)):release()
        assert(other:rwlock(b):write()):release()
        assert(other:rwlock(d):write()):release()
      end
      other:close()
      c:close()
    end)

    it("a name released and taken again gets a higher fence, the counter there or gone", function()
      local c = assert(redislock.connect { url = srv.url, fence_ttl = 1 })
      local name = fresh()
      local a = assert(c:acquire(name, { ttl = 5 }))
      assert.is_true(a:release())
      local b = assert(c:acquire(name, { ttl = 5 }))   -- (the counter still there)
      assert.is_true(b.fence > a.fence, string.format("%.0f after %.0f", b.fence, a.fence))
      assert.is_true(b:release())
      assert(helpers.wait_until(function()
        return admin:command("EXISTS", "{" .. name .. "}:fence") == 0
      end, 5, 0.05))
      local d = assert(c:acquire(name, { ttl = 5 }))   -- (drawn from the clock)
      assert.is_true(d.fence > b.fence, string.format("%.0f after %.0f", d.fence, b.fence))
      d:release()
      c:close()
    end)

    -- The case the counter is for: the server's clock stepped back (here
    -- made by a counter ahead of it, as a clock that read later at the last
    -- grant leaves it). The fence drawn then is ahead of the clock, and its
    -- counter lives until the clock has passed it by fence_ttl, not
    -- fence_ttl from now: the name's fences keep growing however far the
    -- clock went back, while it catches up.
    it("after a clock step back: the counter lives until the clock passes it by fence_ttl", function()
      local c = assert(redislock.connect { url = srv.url, fence_ttl = 2 })
      local name = fresh()
      local l0 = assert(c:acquire(name, { ttl = 5 }))
      l0:release()
      local step = 3600 * 1e6   -- an hour back, in µs
      admin:command("SET", "{" .. name .. "}:fence", string.format("%.0f", l0.fence + step), "PX", 2000)
      local l1 = assert(c:acquire(name, { ttl = 5 }))
      assert.equal(string.format("%.0f", l0.fence + step + 1), string.format("%.0f", l1.fence))
      assert.is_true(l1:release())
      local pttl = admin:command("PTTL", "{" .. name .. "}:fence")
      assert.is_true(pttl > 3600 * 1000 and pttl <= 3600 * 1000 + 2000 + 1000, tostring(pttl))
      local l2 = assert(c:acquire(name, { ttl = 5 }))
      assert.is_true(l2.fence > l1.fence, string.format("%.0f after %.0f", l2.fence, l1.fence))
      l2:release()
      c:close()
    end)

    it("expire without making fences go backwards", function()
      local c = assert(redislock.connect { url = srv.url, fence_ttl = 1 })
      local name = fresh()
      local fences = {}
      for i = 1, 3 do
        local l = assert(c:acquire(name, { ttl = 5 }))
        fences[i] = l.fence
        l:release()
        -- the counter is gone before the next grant
        assert(helpers.wait_until(function()
          return admin:command("EXISTS", "{" .. name .. "}:fence") == 0
        end, 3, 0.05))
      end
      assert.is_true(fences[2] > fences[1] and fences[3] > fences[2])
      c:close()
    end)

    it("grow by one from a counter that is ahead of the server's clock", function()
      local c = assert(redislock.connect { url = srv.url })
      local name = fresh()
      local ahead = string.format("%.0f", (c:acquire(name, { ttl = 1 })).fence + 1e12)
      admin:command("DEL", "{" .. name .. "}")
      admin:command("SET", "{" .. name .. "}:fence", ahead)
      local l = assert(c:acquire(name, { ttl = 1 }))
      assert.equal(string.format("%.0f", tonumber(ahead) + 1), string.format("%.0f", l.fence))
      assert.equal(string.format("%.0f", l.fence), admin:command("GET", "{" .. name .. "}:fence"))
      l:release()
      c:close()
    end)

    it("are not drawn with fence = false: a plain SET NX PX when free, woken like any waiter", function()
      local c = assert(redislock.connect { url = srv.url })
      local name = fresh()
      admin:command("CONFIG", "RESETSTAT")
      -- (no watchdog: its connection's handshake would add its own probe)
      local l = assert(c:acquire(name, { ttl = 5, fence = false, watchdog = false }))
      assert.is_nil(l.fence)
      local stats = admin:command("INFO", "commandstats")
      assert.is_nil(stats:find("cmdstat_evalsha", 1, true))
      assert.matches("cmdstat_set:calls=1,", stats)
      assert.equal(0, admin:command("EXISTS", "{" .. name .. "}:fence"))
      assert.equal("busy", select(3, c:acquire(name, { fence = false })))
      -- a waiter with fence = false registers as one, and is woken by the release
      local p = helpers.spawn(helpers.lua_cmd(([[
        local c = assert(require("redislock").connect { url = %q })
        local l = assert(c:acquire(%q, { ttl = 5, wait = 10, fence = false }))
        io.stdout:write(string.format("got %%.6f %%s\n", require("redislock.core").monotime(), tostring(l.fence)))
        l:release()
      ]]):format(srv.url, name)))
      assert(helpers.wait_until(function() return srv:blocked_clients() >= 1 end, 10), "the waiter did not block")
      local t0 = helpers.monotime()
      assert.is_true(l:release())
      assert.equal(0, p:wait(10), p:stderr())
      local got, fence = p:stdout():match("got (%S+) (%S+)")
      assert(tonumber(got) - t0 < 0.3, "woken " .. (tonumber(got) - t0) .. " s after the release")
      assert.equal("nil", fence)
      p:stop()
      assert.matches("bad argument 'fence' to 'acquire' %(fair and reentrant",
        select(2, pcall(c.acquire, c, name, { fence = false, fair = true })))
      assert.matches("bad argument 'fence' to 'acquire' %(boolean expected",
        select(2, pcall(c.acquire, c, name, { fence = 0 })))
      c:close()
    end)

    it("one resource is one key: value, fence and version live and die together", function()
      local c = assert(redislock.connect { url = srv.url })
      local res = fresh("res")
      assert.equal(1, c:fenced_set(res, "v1", 10))
      assert.equal(2, c:fenced_set(res, "v2", 11))
      local key = "{" .. res .. "}:resource"
      assert.equal("hash", admin:command("TYPE", key))
      assert.same({ "fence", "11", "value", "v2", "version", "2" },
        (function()
          local all = admin:command("HGETALL", key)
          local pairs_ = {}
          for i = 1, #all, 2 do pairs_[#pairs_ + 1] = { all[i], all[i + 1] } end
          table.sort(pairs_, function(x, y) return x[1] < y[1] end)
          local flat = {}
          for _, p in ipairs(pairs_) do flat[#flat + 1] = p[1]; flat[#flat + 1] = p[2] end
          return flat
        end)())
      -- nothing else: no fence or version kept apart from the value
      assert.same({ key }, admin:command("KEYS", "{" .. res .. "}*"))
      c:close()
    end)
  end)
end)

describe("eviction", function()
  it("a server that can evict lock keys is named in warnings, and strict refuses it", function()
    local lru = helpers.start_redis { args = { "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru" } }
    local c = assert(redislock.connect { url = lru.url })
    local w = c:warnings()
    assert.equal(1, #w)
    assert.matches("maxmemory%-policy is allkeys%-lru", w[1])
    assert.matches("noeviction", w[1])
    c:close()
    local none, err, kind = redislock.connect { url = lru.url, strict = true }
    assert.is_nil(none)
    assert.matches("^unsafe server: maxmemory%-policy is allkeys%-lru", err)
    assert.equal("unsafe", kind)
    lru:stop()
  end)

  it("noeviction gives no warning, and strict accepts it", function()
    local srv = helpers.start_redis { args = { "--maxmemory-policy", "noeviction" } }
    local c = assert(redislock.connect { url = srv.url, strict = true })
    assert.same({}, c:warnings())
    c:close()
    srv:stop()
  end)

  it("a user who may not read INFO is warned, and strict refuses what it cannot check", function()
    local srv = helpers.start_redis {
      acl = { "user locker on >pw ~* resetchannels -@all +evalsha +eval +get +set +del +pexpire"
        .. " +pttl +incr +exists +ping +auth +time +select" },
    }
    local u = "redis://locker:pw@127.0.0.1:" .. srv.port
    local c = assert(redislock.connect { url = u })
    local w = c:warnings()
    assert.equal(1, #w)
    assert.matches("maxmemory%-policy could not be read %(NOPERM", w[1])
    c:close()
    local none, err = redislock.connect { url = u, strict = true }
    assert.is_nil(none)
    assert.matches("^unsafe server", err)
    srv:stop()
  end)
end)

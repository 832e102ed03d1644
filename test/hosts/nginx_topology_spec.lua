-- The cosocket transport inside nginx over Redis Cluster and Sentinel: it
-- asks the C topology where a key lives and talks to the nodes itself,
-- over cosockets, feeding what Cluster nodes say to the same C parser the
-- native watchdog routes by; the Sentinel master comes from the C
-- topology's follower thread (csrc/topo/sentinel_watch.h). Real processes on loopback.
-- Issue 22's manual failover runs here too, for a lock held in nginx.
local helpers = require "spec.helpers"
local topology = require "spec.support.topology"
local failover = require "spec.support.failover"
local ngx_host = require "spec.support.nginx"
local core = require "redislock.core"
local http = require "socket.http"

http.TIMEOUT = 20

-- The http block's own lines (spec/support/nginx.lua writes the rest).
local function http_lines(port, cluster_seeds, sentinels)
  return ([[
  init_by_lua_block {
    redislock = require "redislock"
    CLUSTER_URL = %q
    SENTINEL_URL = %q
    LOCKS, CLIENTS = {}, {}
  }
  server {
    listen 127.0.0.1:%d;
    location /acquire {
      content_by_lua_block {
        local a = ngx.req.get_uri_args()
        local c = CLIENTS[a.mode]
        if not c then
          local err
          c, err = redislock.connect { url = a.mode == "cluster" and CLUSTER_URL or SENTINEL_URL,
            transport = "cosocket", connect_timeout = 1, timeout = 1 }
          if not c then return ngx.say("failed ", err) end
          CLIENTS[a.mode] = c
        end
        local l, err = c:acquire(a.name, { ttl = tonumber(a.ttl) or 5, wait = tonumber(a.wait or 0) })
        if not l then return ngx.say("failed ", err) end
        LOCKS[a.name] = l
        ngx.say("ok ", l.token)
      }
    }
    # the other primitives: op = read | write | permit | enter, on the cluster
    location /share {
      content_by_lua_block {
        local a = ngx.req.get_uri_args()
        local c = CLIENTS.share
        if not c then
          c = assert(redislock.connect { url = CLUSTER_URL, transport = "cosocket", connect_timeout = 1,
            timeout = 1 })
          CLIENTS.share = c
        end
        local opts = { ttl = tonumber(a.ttl) or 5, wait = tonumber(a.wait or 0) }
        local l, err
        if a.op == "read" then l, err = c:rwlock(a.name):read(opts)
        elseif a.op == "write" then l, err = c:rwlock(a.name):write(opts)
        elseif a.op == "permit" then l, err = assert(c:semaphore(a.name, tonumber(a.permits))):acquire(opts)
        else
          opts.reentrant = true
          l, err = c:acquire(a.name, opts)
        end
        if not l then return ngx.say("failed ", err) end
        LOCKS[a.key] = l
        ngx.say("ok")
      }
    }
    # issue 22: a client per set of sentinels (ports on 127.0.0.1), the
    # lock's key given back for the spec to look at on the masters
    location /fo/acquire {
      content_by_lua_block {
        local a = ngx.req.get_uri_args()
        local c = CLIENTS["fo " .. a.ports]
        if not c then
          local err
          c, err = redislock.connect { url = "redis+sentinel://127.0.0.1:" .. a.ports:gsub(",", ",127.0.0.1:")
            .. "/mymaster", transport = "cosocket", connect_timeout = 1, timeout = 1 }
          if not c then return ngx.say("failed ", err) end
          CLIENTS["fo " .. a.ports] = c
        end
        local l, err = c:acquire(a.name, { ttl = tonumber(a.ttl), wait = 0 })
        if not l then return ngx.say("failed ", err) end
        LOCKS[a.name] = l
        ngx.say("ok ", l.token, " ", l._keys.lock)
      }
    }
    location /held { content_by_lua_block { ngx.say(tostring(LOCKS[ngx.var.arg_name]:held())) } }
    location /release { content_by_lua_block { ngx.say(tostring(LOCKS[ngx.var.arg_name]:release())) } }
  }
]]):format("redis+cluster://" .. table.concat(cluster_seeds, ","),
    "redis+sentinel://" .. table.concat(sentinels, ",") .. "/mymaster", port)
end

describe("cosocket transport over Cluster and Sentinel (nginx)", function()
  local cl, rep, sen, nginx, base

  setup(function()
    cl = topology.start_cluster { masters = 3, replicas = 0 }
    rep = topology.start_replicated { replicas = 1 }
    sen = topology.start_sentinels { master = rep.master }
    local seeds = {}
    for i, a in ipairs(sen:addrs()) do seeds[i] = a.host .. ":" .. a.port end
    nginx = ngx_host.start {
      http = function(port) return http_lines(port, { cl.seeds[1] }, seeds) end,
      ready = "/held?name=none",
    }
    base = nginx.base
  end)

  teardown(function()
    if nginx then nginx:stop() end
    if sen then sen:stop() end
    if rep then rep:stop() end
    if cl then cl:stop() end
  end)

  it("Cluster: names on every master, taken, renewed by the native watchdog and released", function()
    local per_node = {}
    for i = 1, 30 do
      local name = "co-cl:" .. i
      local token = nginx:get("/acquire?mode=cluster&ttl=0.6&name=" .. name):match("^ok (%x+)$")
      assert(token, name)
      local node = cl:node_for_key("{" .. name .. "}")
      assert.equal(token, (node:cli_raw("GET", "{" .. name .. "}")))
      per_node[node.port] = true
    end
    local n = 0
    for _ in pairs(per_node) do n = n + 1 end
    assert.equal(3, n)
    helpers.sleep(1.2)   -- twice the ttl: only the watchdog keeps them
    for i = 1, 30 do
      assert.equal("true", nginx:get("/held?name=co-cl:" .. i))
      assert.equal("true", nginx:get("/release?name=co-cl:" .. i))
    end
  end)

  it("Cluster: read-write locks, semaphores and reentrant locks over cosockets", function()
    local function share(q) return nginx:get("/share?" .. q) end
    assert.equal("ok", share("op=read&name=rw&key=r1&ttl=0.6"))
    assert.equal("ok", share("op=read&name=rw&key=r2&ttl=0.6"))
    assert.matches("^failed timeout: rw ", share("op=write&name=rw&key=w&wait=0.3"))
    assert.equal("ok", share("op=permit&name=sem&permits=2&key=p1&ttl=0.6"))
    assert.equal("ok", share("op=permit&name=sem&permits=2&key=p2&ttl=0.6"))
    assert.matches("^failed busy: sem", share("op=permit&name=sem&permits=2&key=p3"))
    assert.equal("ok", share("op=enter&name=re&key=e1&ttl=0.6"))
    assert.equal("ok", share("op=enter&name=re&key=e2&ttl=0.6"))
    helpers.sleep(1.3)   -- twice the ttl: only the watchdog keeps them
    for _, k in ipairs { "r1", "r2", "p1", "p2", "e1", "e2" } do
      assert.equal("true", nginx:get("/held?name=" .. k), k)
    end
    -- a writer waiting in one request is woken by releases in others
    local waiter = helpers.spawn("exec curl -s --max-time 10 " .. helpers.quote(base
      .. "/share?op=write&name=rw&key=w&wait=5"))
    -- the writer blocks (BLPOP on the lock's signal list) before the releases
    assert(helpers.wait_until(function()
      for _, m in ipairs(cl:masters()) do
        if m:blocked_clients() > 0 then return true end
      end
    end, 10), "the writer did not block: " .. waiter:stdout())
    local t0 = helpers.monotime()
    assert.equal("true", nginx:get("/release?name=r1"))
    assert.equal("true", nginx:get("/release?name=r2"))
    assert.equal(0, waiter:wait(10))
    assert.equal("ok\n", waiter:stdout())
    assert(helpers.monotime() - t0 < 0.5, "the writer woke late")
    waiter:stop()
    for _, k in ipairs { "w", "p1", "p2", "e2", "e1" } do
      assert.equal("true", nginx:get("/release?name=" .. k), k)
    end
  end)

  it("Cluster: an acquire on a half-migrated slot returns within its wait, with Redis' TRYAGAIN", function()
    -- as in spec/18-cluster_spec.lua: the name's fence counter on the old
    -- node, its lock key nowhere, the slot half-way to another master
    local name = "co-cl-moving"
    assert.matches("^ok", nginx:get("/acquire?mode=cluster&ttl=5&name=" .. name))
    assert.equal("true", nginx:get("/release?name=" .. name))
    local slot = core.slot("{" .. name .. "}")
    local from = cl:node_for_slot(slot)
    local to = cl:other_master(from)
    local migration = cl:migrate_slot(slot, from, to, { stop_after = "migrating" })
    local ok, err = pcall(function()
      for _, wait in ipairs { 0, 0.2, 1 } do
        local t0 = helpers.monotime()
        local reply = nginx:get("/acquire?mode=cluster&ttl=5&wait=" .. wait .. "&name=" .. name)
        local took = helpers.monotime() - t0
        assert.matches("^failed redis error: TRYAGAIN", reply)
        assert(took < wait + 0.5, ("wait = %s took %.2f s"):format(wait, took))
        assert(took >= wait - 0.05, ("wait = %s gave up after %.2f s"):format(wait, took))
      end
    end)
    migration:finish()
    assert(ok, err)
    assert.matches("^ok", nginx:get("/acquire?mode=cluster&ttl=5&wait=1&name=" .. name))
    assert.equal("true", nginx:get("/release?name=" .. name))
  end)

  it("Sentinel: the master found through the sentinels, and again after kill -9", function()
    assert.matches("^ok", nginx:get("/acquire?mode=sentinel&ttl=5&name=co-sen"))
    assert.equal("true", nginx:get("/release?name=co-sen"))
    local old = rep.master
    old:kill("KILL")
    assert(sen:wait_master_change(old, 20), "no failover")
    local _, port = sen:master_addr()
    local reply
    assert(helpers.wait_until(function()
      reply = nginx:get("/acquire?mode=sentinel&ttl=5&name=co-sen2")
      return reply:find("^ok")
    end, 10, 0.2), reply)
    local token = reply:match("^ok (%x+)$")
    assert.equal(token, (rep.replicas[1]:cli_raw("GET", "{co-sen2}")))
    assert.equal(port, rep.replicas[1].port)
    assert.equal("true", nginx:get("/release?name=co-sen2"))
  end)

  -- Issue 22 (spec/29-sentinel_failover_spec.lua, scenario 1) through the
  -- cosocket transport: a lock held in nginx, ttl 8 s, replicated, through
  -- SENTINEL FAILOVER, while two rival processes (native transport, one
  -- client kept, one new per try) try the name every 50 ms. The spec
  -- samples held() over HTTP every ~50 ms. 0 rival grants while held; the
  -- lock kept on the new master; a grant after the switch lands there.
  it("Sentinel: a lock held in nginx through SENTINEL FAILOVER, no rival grant while held (issue 22)", function()
    local TTL = 8
    local frep = topology.start_replicated { replicas = 1 }
    local old, new = frep.master, frep.replicas[1]
    local fsen
    local rivals = {}
    finally(function()
      for _, r in ipairs(rivals) do r:stop() end
      old:kill("CONT")
      if fsen then fsen:stop() end
      frep:stop()
    end)
    fsen = topology.start_sentinels { master = old, down_after_ms = 1000, servers = { old, new } }
    local seeds = failover.seeds(fsen)
    local ports = {}
    for i, a in ipairs(fsen:addrs()) do ports[i] = a.port end
    local acquire = "/fo/acquire?ttl=" .. TTL .. "&ports=" .. table.concat(ports, ",") .. "&name="
    local name = "co-fo"
    local reply = nginx:get(acquire .. name)
    local t_acq = helpers.monotime()
    local token, key = reply:match("^ok (%x+) (%S+)$")
    assert(token, reply)
    -- replicated (the cosocket transport has no replicas option): the
    -- replica reached the master's offset after the grant, and has the key
    assert(topology.wait_replicas_synced(old, { new }, 5), "the replica did not sync")
    assert.equal(token, (new:cli_raw("GET", key)))
    for i, mode in ipairs { "keep", "fresh" } do
      rivals[i] = failover.spawn_rival(seeds, name, 2, mode)
    end
    local samples = {}
    local function sample()
      local t = helpers.monotime()
      samples[#samples + 1] = { t, nginx:get("/held?name=" .. name) == "true" }
    end
    -- the fault 2 s after the grant, before the first renewal (as spec 29)
    local fault_at = math.max(t_acq + 2, helpers.monotime() + 0.5)
    while helpers.monotime() < fault_at do
      sample()
      helpers.sleep(0.05)
    end
    local w = failover.run_fault { kind = "failover", sen = fsen, old = old, new = new, name = name, key = key,
      token = token, ttl = TTL, sample = sample,
      grant = function(second)
        local r = nginx:get(acquire .. second)
        local t, v, k = helpers.monotime(), r:match("^ok (%x+) (%S+)$")
        if v then return { t = t, key = k, token = v } end
        return { fail = r }
      end }
    local kept_value = new:cli_raw("GET", key)
    sample()
    for _, r in ipairs(rivals) do r:kill("TERM") end
    for _, r in ipairs(rivals) do r:wait(5) end
    local held_at_end = samples[#samples][2]
    local released = nginx:get("/release?name=" .. name)
    if w.grant.key then nginx:get("/release?name=" .. name .. ":after") end
    local r = failover.summary { label = "nginx, cosocket transport: SENTINEL FAILOVER", w = w, t_acquired = t_acq,
      samples = samples, rivals = rivals, token = token, kept_value = kept_value, held_at_end = held_at_end }
    print("\n" .. r.line)

    assert.equal(0, r.revived, "held() said true again after false")
    assert.equal(0, r.bad, "rival grants while the lock held in nginx was held()")
    if r.keepable then
      assert.equal(token, kept_value, "the lock is not nginx's on the new master")
      assert.is_true(held_at_end, "nginx lost the lock")
      assert.equal("true", released)
    end
    assert(not w.grant.fail, "the grant after the switch failed: " .. tostring(w.grant.fail))
    assert.is_true(w.grant.on_new, "the grant after the switch is not on the new master")
  end)

  -- Issue 29 (spec/35-sentinel_hung_spec.lua) through the cosocket
  -- transport: a lock held in nginx, ttl 3 s, through SENTINEL FAILOVER
  -- with one sentinel SIGSTOPped (hung, not dead), while a rival connected
  -- straight to the replica's address tries the name every 10 ms. The spec
  -- samples held() over HTTP. 0 rival grants while held.
  it("Sentinel: one sentinel hung through SENTINEL FAILOVER, no rival grant while held (issue 29)", function()
    local TTL = 3
    local frep = topology.start_replicated { replicas = 1 }
    local old, new = frep.master, frep.replicas[1]
    local fsen, rival
    finally(function()
      if rival then rival:stop() end
      if fsen then
        for _, s in ipairs(fsen.list) do s:kill("CONT") end
        fsen:stop()
      end
      frep:stop()
    end)
    fsen = topology.start_sentinels { master = old, down_after_ms = 1000, failover_timeout_ms = 4000,
                                      servers = { old, new } }
    local ports = {}
    for i, a in ipairs(fsen:addrs()) do ports[i] = a.port end
    local name = "co-hung"
    local reply = nginx:get("/fo/acquire?ttl=" .. TTL .. "&ports=" .. table.concat(ports, ",") .. "&name=" .. name)
    local t_acq = helpers.monotime()
    local token, key = reply:match("^ok (%x+) (%S+)$")
    assert(token, reply)
    rival = failover.spawn_rival("redis://" .. new.host .. ":" .. new.port, name, 2, "keep", 0.01)
    local samples = {}
    local function sample()
      local t = helpers.monotime()
      samples[#samples + 1] = { t, nginx:get("/held?name=" .. name) == "true" }
    end
    sample()
    local healthy = { fsen.list[1], fsen.list[3] }
    fsen.list[2]:kill("STOP")
    local t_fault = helpers.monotime()
    local done, out = fsen:failover(healthy[1])
    assert(done, "SENTINEL FAILOVER: " .. tostring(out))
    -- until Sentinel demotes the old master (about 10 s), and 2 s more
    local demoted
    while helpers.monotime() < t_fault + 20 and not (demoted and helpers.monotime() > demoted + 2) do
      sample()
      if not demoted and topology.role(old) == "slave" then demoted = helpers.monotime() end
      helpers.sleep(0.05)
    end
    fsen.list[2]:kill("CONT")
    rival:kill("TERM")
    rival:wait(5)
    local grants = failover.rival_grants(rival:stdout())
    local bad, _, last_true = failover.grants_while_held(t_acq, samples, grants)
    print(("\n# nginx, cosocket transport, sentinel 2 hung: rival grants while held %d of %d;"
      .. " held() true until +%s; demoted +%s"):format(bad, #grants,
      failover.seconds(last_true and last_true - t_fault), failover.seconds(demoted and demoted - t_fault)))
    assert.equal(0, bad, "rival grants while the lock held in nginx was held()")
    if samples[#samples][2] then
      assert.equal(token, (new:cli_raw("GET", key)), "held in nginx, but not the holder's on the new master")
      assert.equal("true", nginx:get("/release?name=" .. name))
    end
  end)
end)

-- The cosocket transport inside nginx over Redis Cluster and Sentinel: it
-- asks the C topology where a key lives and talks to the nodes and the
-- sentinels itself, over cosockets, feeding what they say to the same C
-- parser the native watchdog routes by. Real processes on loopback.
local helpers = require "spec.helpers"
local topology = require "spec.support.topology"
local http = require "socket.http"

http.TIMEOUT = 20

local ROOT = (helpers.sh("pwd"):gsub("%s+$", ""))
local MODULES = "/usr/lib/nginx/modules"

local function conf(dir, port, cluster_seeds, sentinels)
  return ([[
daemon off;
master_process on;
worker_processes 1;
error_log %s/error.log notice;
pid %s/nginx.pid;
load_module %s/ndk_http_module.so;
load_module %s/ngx_http_lua_module.so;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path %s/tmp;
  proxy_temp_path %s/tmp;
  fastcgi_temp_path %s/tmp;
  uwsgi_temp_path %s/tmp;
  scgi_temp_path %s/tmp;
  lua_package_path "%s/lua/?.lua;;";
  lua_package_cpath "%s/build/luajit/?.so;;";
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
    location /held { content_by_lua_block { ngx.say(tostring(LOCKS[ngx.var.arg_name]:held())) } }
    location /release { content_by_lua_block { ngx.say(tostring(LOCKS[ngx.var.arg_name]:release())) } }
  }
}
]]):format(dir, dir, MODULES, MODULES, dir, dir, dir, dir, dir, ROOT, ROOT,
    "redis+cluster://" .. table.concat(cluster_seeds, ","),
    "redis+sentinel://" .. table.concat(sentinels, ",") .. "/mymaster", port)
end

describe("cosocket transport over Cluster and Sentinel (nginx)", function()
  local cl, rep, sen, nginx, base, dir

  local function get(path)
    local body, code = http.request(base .. path)
    assert(body, code)
    if code ~= 200 then
      local log = helpers.read_file(dir .. "/error.log") or ""
      error(("%s: HTTP %s\n%s"):format(path, tostring(code), log:sub(-1500)), 2)
    end
    return (body:gsub("\n$", ""))
  end

  setup(function()
    cl = topology.start_cluster { masters = 3, replicas = 0 }
    rep = topology.start_replicated { replicas = 1 }
    sen = topology.start_sentinels { master = rep.master }
    local seeds = {}
    for i, a in ipairs(sen:addrs()) do seeds[i] = a.host .. ":" .. a.port end
    dir = helpers.tmpdir()
    assert(os.execute("mkdir -p " .. helpers.quote(dir .. "/tmp")))
    local port = helpers.free_port()
    local f = assert(io.open(dir .. "/nginx.conf", "w"))
    f:write(conf(dir, port, { cl.seeds[1] }, seeds))
    f:close()
    nginx = helpers.spawn("exec nginx -p " .. helpers.quote(dir) .. " -c " .. helpers.quote(dir .. "/nginx.conf")
      .. " -e " .. helpers.quote(dir .. "/error.log"))
    base = "http://127.0.0.1:" .. port
    assert(helpers.wait_until(function() return (http.request(base .. "/held?name=none")) end, 10, 0.05),
      "nginx did not start: " .. nginx:stderr())
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
      local token = get("/acquire?mode=cluster&ttl=0.6&name=" .. name):match("^ok (%x+)$")
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
      assert.equal("true", get("/held?name=co-cl:" .. i))
      assert.equal("true", get("/release?name=co-cl:" .. i))
    end
  end)

  it("Cluster: read-write locks, semaphores and reentrant locks over cosockets", function()
    local function share(q) return get("/share?" .. q) end
    assert.equal("ok", share("op=read&name=rw&key=r1&ttl=0.6"))
    assert.equal("ok", share("op=read&name=rw&key=r2&ttl=0.6"))
    assert.equal("failed timeout", share("op=write&name=rw&key=w&wait=0.3"))
    assert.equal("ok", share("op=permit&name=sem&permits=2&key=p1&ttl=0.6"))
    assert.equal("ok", share("op=permit&name=sem&permits=2&key=p2&ttl=0.6"))
    assert.equal("failed busy", share("op=permit&name=sem&permits=2&key=p3"))
    assert.equal("ok", share("op=enter&name=re&key=e1&ttl=0.6"))
    assert.equal("ok", share("op=enter&name=re&key=e2&ttl=0.6"))
    helpers.sleep(1.3)   -- twice the ttl: only the watchdog keeps them
    for _, k in ipairs { "r1", "r2", "p1", "p2", "e1", "e2" } do
      assert.equal("true", get("/held?name=" .. k), k)
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
    assert.equal("true", get("/release?name=r1"))
    assert.equal("true", get("/release?name=r2"))
    assert.equal(0, waiter:wait(10))
    assert.equal("ok\n", waiter:stdout())
    assert(helpers.monotime() - t0 < 0.5, "the writer woke late")
    waiter:stop()
    for _, k in ipairs { "w", "p1", "p2", "e2", "e1" } do
      assert.equal("true", get("/release?name=" .. k), k)
    end
  end)

  it("Sentinel: the master found through the sentinels, and again after kill -9", function()
    assert.matches("^ok", get("/acquire?mode=sentinel&ttl=5&name=co-sen"))
    assert.equal("true", get("/release?name=co-sen"))
    local old = rep.master
    old:kill("KILL")
    assert(sen:wait_master_change(old, 20), "no failover")
    local _, port = sen:master_addr()
    local reply
    assert(helpers.wait_until(function()
      reply = get("/acquire?mode=sentinel&ttl=5&name=co-sen2")
      return reply:find("^ok")
    end, 10, 0.2), reply)
    local token = reply:match("^ok (%x+)$")
    assert.equal(token, (rep.replicas[1]:cli_raw("GET", "{co-sen2}")))
    assert.equal(port, rep.replicas[1].port)
    assert.equal("true", get("/release?name=co-sen2"))
  end)
end)

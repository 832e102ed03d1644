-- redislock inside an OpenResty-like host: nginx with its Lua module
-- (LuaJIT), the core built for LuaJIT (build/luajit, `make testjit`).
-- nginx loads the library in its master (init_by_lua) and forks a worker,
-- as OpenResty does; the worker takes locks over HTTP requests and its
-- watchdog thread renews them. Blocking calls inside nginx stall the worker
-- for their duration: this transport is for short calls there (wait = 0),
-- until a cosocket transport exists.
local helpers = require "spec.helpers"
local core = require "redislock.core"
local http = require "socket.http"

http.TIMEOUT = 10

local ROOT = (helpers.sh("pwd"):gsub("%s+$", ""))
local MODULES = "/usr/lib/nginx/modules"

local function conf(dir, port, redis_url)
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
    LOCKS = {}
    URL = %q
  }
  server {
    listen 127.0.0.1:%d;
    location /info {
      content_by_lua_block { ngx.say(jit and jit.version or _VERSION, " ", ngx.worker.pid()) }
    }
    location /acquire {
      content_by_lua_block {
        CLIENT = CLIENT or assert(redislock.connect { url = URL })
        local a = ngx.req.get_uri_args()
        local l, err = CLIENT:acquire(a.name, { ttl = tonumber(a.ttl), wait = tonumber(a.wait or 0) })
        if not l then return ngx.say("failed ", err) end
        LOCKS[a.name] = l
        ngx.say("fence ", string.format("%%.0f", l.fence))
      }
    }
    location /held {
      content_by_lua_block { ngx.say(tostring(LOCKS[ngx.var.arg_name]:held())) }
    }
    location /release {
      content_by_lua_block { ngx.say(tostring(LOCKS[ngx.var.arg_name]:release())) }
    }
  }
}
]]):format(dir, dir, MODULES, MODULES, dir, dir, dir, dir, dir, ROOT, ROOT, redis_url, port)
end

describe("inside nginx (LuaJIT)", function()
  local srv, nginx, base, dir, admin

  local function get(path)
    local body, code = http.request(base .. path)
    assert(body, code)
    assert.equal(200, code, body)
    return (body:gsub("\n$", ""))
  end

  setup(function()
    srv = helpers.start_redis()
    admin = assert(core.connect { host = "127.0.0.1", port = srv.port })
    dir = helpers.tmpdir()
    assert(os.execute("mkdir -p " .. helpers.quote(dir .. "/tmp")))
    local port = helpers.free_port()
    local f = assert(io.open(dir .. "/nginx.conf", "w"))
    f:write(conf(dir, port, srv.url))
    f:close()
    nginx = helpers.spawn("exec nginx -p " .. helpers.quote(dir) .. " -c " .. helpers.quote(dir .. "/nginx.conf")
      .. " -e " .. helpers.quote(dir .. "/error.log"))
    base = "http://127.0.0.1:" .. port
    assert(helpers.wait_until(function() return (http.request(base .. "/info")) end, 10, 0.05),
      "nginx did not start: " .. nginx:stderr())
  end)

  teardown(function()
    if nginx then nginx:stop() end
    if admin then admin:close() end
    if srv then srv:stop() end
  end)

  it("runs in nginx's LuaJIT, loaded by the master and forked into the worker", function()
    local info = get("/info")
    assert.matches("^LuaJIT 2%.1", info)
    assert.are_not.equal(tostring(nginx.pid), info:match("(%d+)$"))
  end)

  it("the worker's watchdog keeps a 0.5 s lease for 4x its ttl, and the fence has every digit", function()
    local fence = get("/acquire?name=ngx&ttl=0.5"):match("^fence (%d+)$")
    assert.truthy(fence)
    assert.equal(fence, admin:command("GET", "{ngx}:fence"))
    local t0 = helpers.monotime()
    while helpers.monotime() - t0 < 2 do
      assert.is_true(admin:command("PTTL", "{ngx}") > 0, "the key expired inside the worker's hold")
      helpers.sleep(0.05)
    end
    assert.equal("true", get("/held?name=ngx"))
    assert.equal("true", get("/release?name=ngx"))
    assert.equal(0, admin:command("EXISTS", "{ngx}"))
    assert.equal("false", get("/held?name=ngx"))
  end)

  it("a worker killed while holding loses the name at its ttl; the next worker takes it", function()
    assert.matches("^fence", get("/acquire?name=crash&ttl=1"))
    local worker = tonumber(get("/info"):match("(%d+)$"))
    helpers.kill(worker, "KILL")
    local killed = helpers.monotime()
    -- the master forks a new worker; it waits (blocking the worker) for the name
    local reply = get("/acquire?name=crash&ttl=5&wait=5")
    local waited = helpers.monotime() - killed
    assert.matches("^fence", reply)
    assert.are_not.equal(worker, tonumber(get("/info"):match("(%d+)$")))
    assert.is_true(waited < 1 + 0.3, string.format("took %.2f s", waited))
    assert.equal("true", get("/release?name=crash"))
  end)
end)

-- TLS inside nginx (docs/tls.md, "Inside nginx", whose nginx lines are the
-- ones run here): the cosocket transport
-- calls sslhandshake on every new connection, verified against nginx's
-- lua_ssl_trusted_certificate with the server name (tls.server_name, here
-- localhost: nginx checks names, not IP addresses), while the worker's
-- native watchdog thread reaches the same TLS-only redis-server with
-- tls.ca. Run by `make testjit` (the LuaJIT core in build/luajit).
local helpers = require "spec.helpers"
local ngx_host = require "spec.support.nginx"
local core = require "redislock.core"
local http = require "socket.http"

http.TIMEOUT = 10

local ROOT = ngx_host.ROOT
local PASSWORD = "ngx-tls-pw"

-- docs/tls.md's nginx lines, with the spec's CA: the docs cannot drift.
local function docs_nginx_lines(ca)
  local docs = assert(helpers.read_file(ROOT .. "/docs/tls.md"))
  local block = assert(docs:match("```nginx\n(.-)```"), "no nginx block in docs/tls.md")
  local out, n = block:gsub("/etc/ssl/redis%-ca%.pem", (ca:gsub("%%", "%%%%")))
  assert(n == 1, "docs/tls.md's nginx block names its CA file " .. n .. " times")
  return out
end

-- The http block's own lines (spec/support/nginx.lua writes the rest).
local function http_lines(port, pki, redis_port, mtls_port)
  return ([[
  %s
  init_by_lua_block {
    redislock = require "redislock"
    LOCKS = {}
    CA, CERT, KEY = %q, %q, %q
    URL = "rediss://:" .. %q .. "@127.0.0.1:" .. %d
    MTLS = "rediss://:" .. %q .. "@127.0.0.1:" .. %d
  }
  server {
    listen 127.0.0.1:%d;
    location /acquire {
      content_by_lua_block {
        CLIENT = CLIENT or assert(redislock.connect { url = URL, transport = "cosocket",
          tls = { ca = CA, server_name = "localhost" } })
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
    location /mtls {
      content_by_lua_block {
        local tls = { ca = CA, server_name = "localhost" }
        if ngx.var.arg_cert == "1" then tls.cert, tls.key = CERT, KEY end
        local c, err = redislock.connect { url = MTLS, transport = "cosocket", tls = tls }
        if not c then return ngx.say("failed ", err) end
        local l
        l, err = c:acquire("mtls", { ttl = 0.5 })
        if not l then return ngx.say("failed ", err) end
        ngx.sleep(1.2)                  -- the watchdog shows the certificate too
        local held = l:held()
        ngx.say(tostring(held), " ", tostring(l:release()))
        c:close()
      }
    }
    location /connect {
      content_by_lua_block {
        local a = ngx.req.get_uri_args()
        local c, err = redislock.connect { url = a.url, transport = "cosocket",
          tls = { ca = CA, server_name = a.name } }
        if c then c:close() end
        ngx.say(c and "ok" or ("failed " .. err))
      }
    }
  }
]]):format(docs_nginx_lines(pki.ca),
    pki.ca, pki.client.cert, pki.client.key, PASSWORD, redis_port, PASSWORD, mtls_port, port)
end

describe("inside nginx over TLS (cosockets)", function()
  local pki, srv, mtls, other, nginx, base, admin

  local function esc(x) return (x:gsub("[^%w]", function(ch) return ("%%%02X"):format(ch:byte()) end)) end

  setup(function()
    pki = require("spec.support.tls").make()
    -- nginx's worker runs as an unprivileged user: it reads the CA, and the
    -- client certificate and key (test files, made for this run only)
    assert(os.execute("chmod 755 " .. helpers.quote(pki.dir) .. " && chmod 644 " .. helpers.quote(pki.dir) .. "/*"))
    srv = helpers.start_redis { tls = pki:server_tls(), password = PASSWORD }
    mtls = helpers.start_redis { tls = pki:server_tls(nil, { auth_clients = true }), password = PASSWORD }
    other = helpers.start_redis { tls = pki:server_tls("other_server"), password = PASSWORD }
    admin = assert(core.connect { host = "127.0.0.1", port = srv.port, password = PASSWORD,
      tls = { ca = pki.ca } })
    nginx = ngx_host.start {
      http = function(port) return http_lines(port, pki, srv.port, mtls.port) end,
      ready = "/held?name=x",
    }
    base = nginx.base
  end)

  teardown(function()
    if nginx then nginx:stop() end
    if admin then admin:close() end
    for _, s in ipairs({ srv, mtls, other }) do s:stop() end
  end)

  it("takes, renews (the native watchdog, over TLS too) and releases", function()
    local fence = nginx:get("/acquire?name=tls&ttl=0.5"):match("^fence (%d+)$")
    assert.truthy(fence)
    assert.equal(fence, admin:command("GET", "{tls}:fence"))
    local t0 = helpers.monotime()
    while helpers.monotime() - t0 < 2 do
      assert.is_true(admin:command("PTTL", "{tls}") > 0, "the key expired inside the worker's hold")
      helpers.sleep(0.05)
    end
    assert.equal("true", nginx:get("/held?name=tls"))
    assert.equal("true", nginx:get("/release?name=tls"))
    assert.equal(0, admin:command("EXISTS", "{tls}"))
  end)

  it("a waiter's BLPOP goes over TLS too, and gets the lock at the release", function()
    local redislock = require "redislock"
    local me = assert(redislock.connect { url = srv.url:gsub("^rediss://", "rediss://:" .. PASSWORD .. "@"),
      tls = { ca = pki.ca } })
    local held = assert(me:acquire("tls-wait", { ttl = 10 }))
    local waiter = helpers.spawn("exec curl -s " .. helpers.quote(base .. "/acquire?name=tls-wait&ttl=5&wait=5"))
    assert(helpers.wait_until(function()
      return admin:command("CLIENT", "LIST"):find("cmd=blpop")
    end, 5, 0.01), "the waiter never blocked")
    assert.is_true(held:release())
    assert.equal(0, waiter:wait(10))
    assert.matches("^fence %d+", waiter:stdout())
    assert.equal("true", nginx:get("/release?name=tls-wait"))
    me:close()
  end)

  it("mutual TLS: refused without a client certificate, accepted with one", function()
    local reply = nginx:get("/mtls")
    assert.matches("^failed connection", reply)
    assert.is_nil(reply:find(PASSWORD, 1, true))
    assert.equal("true true", nginx:get("/mtls?cert=1"))
  end)

  it("refuses another CA's certificate and another name, saying which", function()
    local url = "rediss://:" .. PASSWORD .. "@127.0.0.1:" .. other.port
    -- (nginx 1.22's Lua module sometimes loses the reason: then "refused")
    local function refused(r, why)
      assert.is_nil(r:find(PASSWORD, 1, true))
      if r:find("certificate refused (nginx's error log says why)", 1, true) then return end
      assert.matches("^failed connection failed: tls: the server's certificate " .. why, r)
    end
    for _ = 1, 5 do
      refused(nginx:get("/connect?name=localhost&url=" .. esc(url)), "is from an unknown CA")
    end
    url = "rediss://:" .. PASSWORD .. "@127.0.0.1:" .. srv.port
    for _ = 1, 5 do
      refused(nginx:get("/connect?name=other-name.test&url=" .. esc(url)), "is not for other%-name%.test")
    end
    assert.equal("ok", nginx:get("/connect?name=localhost&url=" .. esc(url)))
  end)
end)

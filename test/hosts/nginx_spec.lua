-- redislock inside an OpenResty-like host: nginx with its Lua module
-- (LuaJIT), the core built for LuaJIT (build/luajit, `make testjit`).
-- nginx loads the library in its master (init_by_lua) and forks a worker,
-- as OpenResty does; the worker takes locks over HTTP requests and its
-- watchdog thread renews them. On the native transport a call blocks the
-- worker for its duration; transport = "cosocket" yields to nginx instead.
-- docs/nginx.md's nginx.conf is run too, exactly as the doc has it (with
-- the LuaJIT core installed by the doc's own command).
local helpers = require "spec.helpers"
local docs = require "spec.support.docs"
local ngx_host = require "spec.support.nginx"
local core = require "redislock.core"
local http = require "socket.http"

http.TIMEOUT = 10

local ROOT = ngx_host.ROOT

-- The http block's own lines (spec/support/nginx.lua writes the rest).
local function http_lines(port, redis_url, redis_port)
  return ([[
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
    # the cosocket transport: calls yield to nginx instead of blocking it
    location /c/acquire {
      content_by_lua_block {
        CCLIENT = CCLIENT or assert(redislock.connect { url = URL, transport = "cosocket" })
        local a = ngx.req.get_uri_args()
        local l, err = CCLIENT:acquire(a.name, { ttl = tonumber(a.ttl), wait = tonumber(a.wait or 0),
          fair = a.fair == "1" })
        if not l then return ngx.say("failed ", err) end
        LOCKS[a.name] = l
        ngx.say("fence ", string.format("%%.0f", l.fence))
      }
    }
    # other code in the worker leaves a pooled connection on another database
    location /c/pollute {
      content_by_lua_block {
        local ok, redis = pcall(require, "resty.redis")
        if not ok then redis = require "nginx.redis" end
        local red = redis:new()
        assert(red:connect("127.0.0.1", %d))
        assert(red:select(5))
        assert(red:set_keepalive(60000, 32))
        ngx.say("ok")
      }
    }
    # a client per url: password, database, unix socket
    location /c/acquire_url {
      content_by_lua_block {
        local a = ngx.req.get_uri_args()
        BYURL = BYURL or {}
        local c, err = BYURL[a.url]
        if not c then
          c, err = redislock.connect { url = a.url, transport = "cosocket" }
          if not c then return ngx.say("failed ", err) end
          BYURL[a.url] = c
        end
        local l
        l, err = c:acquire(a.name, { ttl = 5 })
        if not l then return ngx.say("failed ", err) end
        ngx.say(tostring(l:release()))
      }
    }
    # one request taking the same name twice (issue 32 point 3)
    location /c/twice {
      content_by_lua_block {
        CCLIENT = CCLIENT or assert(redislock.connect { url = URL, transport = "cosocket" })
        local name = ngx.var.arg_name
        local first = assert(CCLIENT:acquire(name, { ttl = 5 }))
        local t0 = ngx.now()
        local again, err = CCLIENT:acquire(name, { wait = 2 })
        ngx.update_time()
        first:release()
        ngx.say(tostring(again), " ", err, " ", string.format("%%.1f", ngx.now() - t0))
      }
    }
    location /c/fenced_set {
      content_by_lua_block {
        local a = ngx.req.get_uri_args()
        local v, err = CCLIENT:fenced_set(a.res, a.value, tonumber(a.fence))
        ngx.say(v and ("version " .. v) or ("failed " .. err))
      }
    }
    location /c/connect {
      content_by_lua_block {
        local c, err = redislock.connect { url = ngx.var.arg_url, transport = "cosocket" }
        if c then c:close() end
        ngx.say(c and "ok" or ("failed " .. err))
      }
    }
  }
]]):format(redis_url, port, redis_port)
end

describe("inside nginx (LuaJIT)", function()
  local srv, nginx, base, admin

  setup(function()
    srv = helpers.start_redis()
    admin = assert(core.connect { host = "127.0.0.1", port = srv.port })
    nginx = ngx_host.start {
      http = function(port) return http_lines(port, srv.url, srv.port) end,
      ready = "/info",
    }
    base = nginx.base
  end)

  teardown(function()
    if nginx then nginx:stop() end
    if admin then admin:close() end
    if srv then srv:stop() end
  end)

  it("runs in nginx's LuaJIT, loaded by the master and forked into the worker", function()
    local info = nginx:get("/info")
    assert.matches("^LuaJIT 2%.1", info)
    assert.are_not.equal(tostring(nginx.pid), info:match("(%d+)$"))
  end)

  it("the worker's watchdog keeps a 0.5 s lease for 4x its ttl, and the fence has every digit", function()
    local fence = nginx:get("/acquire?name=ngx&ttl=0.5"):match("^fence (%d+)$")
    assert.truthy(fence)
    assert.equal(fence, admin:command("GET", "{ngx}:fence"))
    local t0 = helpers.monotime()
    while helpers.monotime() - t0 < 2 do
      assert.is_true(admin:command("PTTL", "{ngx}") > 0, "the key expired inside the worker's hold")
      helpers.sleep(0.05)
    end
    assert.equal("true", nginx:get("/held?name=ngx"))
    assert.equal("true", nginx:get("/release?name=ngx"))
    assert.equal(0, admin:command("EXISTS", "{ngx}"))
    assert.equal("false", nginx:get("/held?name=ngx"))
  end)

  describe("with transport = 'cosocket'", function()
    it("takes, renews (native watchdog) and releases, with exact fences and NOSCRIPT handled", function()
      admin:command("CONFIG", "RESETSTAT")
      admin:command("SCRIPT", "FLUSH")
      local fence = nginx:get("/c/acquire?name=co&ttl=0.5"):match("^fence (%d+)$")
      assert.truthy(fence)
      -- NOSCRIPT, then SCRIPT LOAD + EVAL in one pipeline (before the
      -- watchdog's first renewal, due a third of the ttl later)
      local stats = admin:command("INFO", "commandstats")
      assert.truthy(stats:find("cmdstat_script|load:calls=", 1, true), stats)
      assert.truthy(stats:find("cmdstat_eval:calls=", 1, true), stats)
      assert.equal(fence, admin:command("GET", "{co}:fence"))
      helpers.sleep(1.5)
      assert.is_true(admin:command("PTTL", "{co}") > 0)
      assert.equal("true", nginx:get("/held?name=co"))
      assert.equal("version 1", nginx:get("/c/fenced_set?res=r&value=v&fence=" .. fence))
      assert.equal("failed stale",
        nginx:get("/c/fenced_set?res=r&value=old&fence=" .. string.format("%.0f", fence - 1)))
      assert.equal("true", nginx:get("/release?name=co"))
      assert.equal(0, admin:command("EXISTS", "{co}"))
    end)

    for _, fair in ipairs({ "0", "1" }) do
      it("a waiter yields to nginx: the worker serves other requests meanwhile (fair = " .. fair .. ")",
        function()
          local redislock = require "redislock"
          local me = assert(redislock.connect { url = srv.url })
          local name = "co-wait-" .. fair
          local held = assert(me:acquire(name, { ttl = 10 }))
          local waiter = helpers.spawn("exec curl -s " .. helpers.quote(base .. "/c/acquire?name=" .. name ..
            "&ttl=5&wait=5&fair=" .. fair))
          assert(helpers.wait_until(function()
            return admin:command("CLIENT", "LIST"):find("cmd=blpop")
          end, 5, 0.01), "the waiter never blocked")
          -- one worker, and it still answers at once
          local t0 = helpers.monotime()
          assert.matches("^LuaJIT", nginx:get("/info"))
          assert.is_true(helpers.monotime() - t0 < 0.5, "the worker was blocked")
          local released = helpers.monotime()
          assert.is_true(held:release())
          assert.equal(0, waiter:wait(10))
          assert.matches("^fence %d+", waiter:stdout())
          assert.is_true(helpers.monotime() - released < 1)
          assert.equal("true", nginx:get("/release?name=" .. name))
          me:close()
        end)
    end

    it("one client, shared by the worker's requests: a request waits for another's lock, "
      .. "and one that takes its own again is refused at once", function()
      assert.equal("nil busy: twice already held by this client 0.0", nginx:get("/c/twice?name=twice"))
      -- a lock taken in one request, kept past it, is another request's
      -- to wait for, as any rival's
      assert.matches("^fence", nginx:get("/c/acquire?name=across&ttl=5"))
      local waiter = helpers.spawn("exec curl -s " .. helpers.quote(base .. "/c/acquire?name=across&ttl=5&wait=5"))
      assert(helpers.wait_until(function()
        return admin:command("CLIENT", "LIST"):find(" flags=b ", 1, true)
      end, 5, 0.005), "the second request never waited: " .. waiter:stdout())
      assert.equal("true", nginx:get("/release?name=across"))
      assert.equal(0, waiter:wait(10))
      assert.matches("^fence %d+", waiter:stdout())
      assert.equal("true", nginx:get("/release?name=across"))
    end)

    it("a woken waiter's attempt rides with its BLPOP: the releaser's retake at once is refused", function()
      local redislock = require "redislock"
      local me = assert(redislock.connect { url = srv.url })
      local name = "co-retake"
      local held = assert(me:acquire(name, { ttl = 10 }))
      -- the worker's wait transport is made by a first, plain wait
      assert.matches("^failed timeout: co%-retake ", nginx:get("/c/acquire?name=" .. name .. "&ttl=5&wait=0.05"))
      for _ = 1, 4 do
        local waiter = helpers.spawn("exec curl -s " .. helpers.quote(base .. "/c/acquire?name=" .. name ..
          "&ttl=5&wait=5"))
        assert(helpers.wait_until(function()
          return admin:command("CLIENT", "LIST"):find(" flags=b ", 1, true)
        end, 5, 0.005), "the waiter never blocked")
        assert.is_true(held:release())
        -- sent as soon as the release is answered: the waiter's attempt,
        -- queued behind its BLPOP, ran before it
        local again, _, kind = me:acquire(name, { ttl = 10 })
        assert.is_nil(again)
        assert.equal("busy", kind)
        assert.equal(0, waiter:wait(10))
        assert.matches("^fence %d+", waiter:stdout())
        assert.equal("true", nginx:get("/release?name=" .. name))
        held = assert(me:acquire(name, { ttl = 10 }))
      end
      assert.is_true(held:release())
      me:close()
    end)

    it("keeps a pool of its own: a connection other code left on another db is never used", function()
      for _ = 1, 3 do assert.equal("ok", nginx:get("/c/pollute")) end
      assert.matches("^fence", nginx:get("/c/acquire?name=pool&ttl=5"))
      assert.equal(1, admin:command("EXISTS", "{pool}"))
      assert.equal("true", nginx:get("/release?name=pool"))
      assert.equal(0, admin:command("EXISTS", "{pool}"))
    end)

    it("authenticates, selects the database and reaches a unix socket", function()
      -- nginx's worker runs as an unprivileged user: let it reach the socket
      local other = helpers.start_redis { unix = true, password = "s3cret", args = { "--unixsocketperm", "777" } }
      assert(os.execute("chmod 755 " .. helpers.quote(other.dir)))
      local watch = assert(core.connect { path = other.path, password = "s3cret", db = 2 })
      local url = "unix://:s3cret@" .. other.path .. "?db=2"
      local function esc(x) return (x:gsub("[^%w]", function(ch) return ("%%%02X"):format(ch:byte()) end)) end
      assert(watch:command("SET", "{sock}", "someone"))  -- held in db 2: must be busy
      assert.equal("failed busy: sock", nginx:get("/c/acquire_url?name=sock&url=" .. esc(url)))
      assert(watch:command("DEL", "{sock}"))
      assert.equal("true", nginx:get("/c/acquire_url?name=sock&url=" .. esc(url)))
      assert.equal("1", watch:command("GET", "{sock}:fence"):sub(1, 1))
      -- a wrong password fails closed, and no message shows it
      local reply = nginx:get("/c/acquire_url?name=sock&url=" .. esc("unix://:wrong-pw@" .. other.path))
      assert.matches("^failed redis error: ", reply)
      assert.is_nil(reply:find("wrong-pw", 1, true))
      watch:close()
      other:stop()
    end)

    it("reports connection failures as the native transport does", function()
      local reply = nginx:get("/c/connect?url=" .. "redis://127.0.0.1:" .. helpers.free_port())
      assert.matches("^failed connection failed: .*%(127%.0%.0%.1:%d+%)$", reply)
    end)
  end)

  it("a worker killed while holding loses the name at its ttl; the next worker takes it", function()
    assert.matches("^fence", nginx:get("/acquire?name=crash&ttl=1"))
    local worker = tonumber(nginx:get("/info"):match("(%d+)$"))
    helpers.kill(worker, "KILL")
    local killed = helpers.monotime()
    -- the master forks a new worker; it waits (blocking the worker) for the name
    local reply = nginx:get("/acquire?name=crash&ttl=5&wait=5")
    local waited = helpers.monotime() - killed
    assert.matches("^fence", reply)
    assert.are_not.equal(worker, tonumber(nginx:get("/info"):match("(%d+)$")))
    assert.is_true(waited < 1 + 0.3, string.format("took %.2f s", waited))
    assert.equal("true", nginx:get("/release?name=crash"))
  end)
end)

-- docs/nginx.md, "Inside nginx": its install command and its
-- nginx.conf, taken from the file so that the docs cannot drift. Only the
-- install prefix, the listen port and the Redis URL are replaced (each
-- must be found exactly where the doc has it); pid, daemon and the
-- error log come from nginx's command line.
describe("docs/nginx.md's nginx.conf", function()
  local srv, nginx, base, admin

  local function section()
    return docs.section("nginx.md", "Inside nginx")
  end

  local function replace_once(text, old, new, count)
    local escaped = old:gsub("%p", "%%%0")
    local out, n = text:gsub(escaped, (new:gsub("%%", "%%%%")))
    assert.equal(count or 1, n, "docs/nginx.md's nginx.conf: '" .. old .. "' found " .. n .. " times")
    return out
  end

  local function get(path)
    local body, code = http.request(base .. path)
    assert(body, code)
    if code == 500 then error("HTTP 500\n" .. nginx:error_log(), 2) end
    return code, (body:gsub("\n$", ""))
  end

  setup(function()
    srv = helpers.start_redis()
    admin = assert(core.connect { host = "127.0.0.1", port = srv.port })
    local text = section()
    -- the doc's install command, into a prefix of our own
    local install = assert(text:match("\n(make install PREFIX=/usr/local [^\n]+)"), "no install command for nginx")
    local prefix = helpers.tmpdir()
    assert(os.execute("chmod 755 " .. helpers.quote(prefix)))  -- nginx's workers run unprivileged
    install = replace_once(install, "PREFIX=/usr/local", "PREFIX=" .. prefix)
    local out, code = helpers.sh("cd " .. helpers.quote(ROOT) .. " && " .. install .. " 2>&1")
    assert(code == 0, out)
    local readme_conf = assert(text:match("```nginx\n(.-)```"), "no nginx block")
    readme_conf = replace_once(readme_conf, "/usr/local", prefix, 2)
    readme_conf = replace_once(readme_conf, "redis://127.0.0.1:6379/0", srv.url .. "/0")
    -- the doc's whole nginx.conf: daemon, pid and error log given with -g
    nginx = ngx_host.start {
      conf = function(port)
        return replace_once(readme_conf, "listen 127.0.0.1:8080;", "listen 127.0.0.1:" .. port .. ";")
      end,
      ready = "/report",
    }
    base = nginx.base
  end)

  teardown(function()
    if nginx then nginx:stop() end
    if admin then admin:close() end
    if srv then srv:stop() end
  end)

  it("takes the lock in the handler and releases it there", function()
    local code, body = get("/report")
    assert.equal(200, code, body)
    local fence = body:match("^report done, fence (%d+)$")
    assert.truthy(fence, body)
    assert.equal(fence, admin:command("GET", "{report}:fence"))
    assert.equal(0, admin:command("EXISTS", "{report}"))   -- released, not left to the watchdog
  end)

  it("serves concurrent requests one at a time, every one of them", function()
    local clients = {}
    for i = 1, 3 do
      clients[i] = helpers.spawn("exec curl -s -w ' %{http_code}' " .. helpers.quote(base .. "/report"))
    end
    local fences = {}
    for i = 1, 3 do
      assert.equal(0, clients[i]:wait(10))
      local fence = clients[i]:stdout():match("^report done, fence (%d+)\n 200$")
      assert.truthy(fence, clients[i]:stdout())
      fences[#fences + 1] = fence
    end
    table.sort(fences)
    assert.is_true(fences[1] < fences[2] and fences[2] < fences[3])
    assert.equal(0, admin:command("EXISTS", "{report}"))
  end)

  it("answers 409 when the wait runs out, and logs no error for it", function()
    local redislock = require "redislock"
    local me = assert(redislock.connect { url = srv.url })
    local held = assert(me:acquire("report", { ttl = 10 }))
    local t0 = helpers.monotime()
    for _ = 1, 2 do
      local code, body = get("/report")
      assert.equal(409, code)
      assert.equal("timeout: report not taken within ", body:match("^.* within "))
    end
    assert.is_true(helpers.monotime() - t0 >= 4)
    assert.is_true(held:release())
    assert.equal(200, (get("/report")))
    me:close()
    local log = nginx:error_log(true)
    assert.is_nil(log:find("[error]", 1, true), log)
    assert.is_nil(log:find("timed out", 1, true), log)
    assert.is_nil(log:find("global", 1, true), log)   -- "writing a global Lua variable"
  end)
end)

-- docs/nginx.md's "Metrics and events in nginx" snippet, run as written inside
-- nginx with its Lua module (LuaJIT, the core from build/luajit: `make
-- testjit`): only the Redis address and the listen port are replaced. Some
-- locks are taken through /job, one times out, and /metrics must answer
-- valid Prometheus text with those counters.
local helpers = require "spec.helpers"
local docs = require "spec.support.docs"
local prometheus = require "spec.support.prometheus"
local ngx_host = require "spec.support.nginx"
local redislock = require "redislock"
local http = require "socket.http"
local ltn12 = require "ltn12"

http.TIMEOUT = 10

-- docs/nginx.md's nginx block that serves /metrics, verbatim.
local function doc_snippet()
  for block in docs.read("nginx.md"):gmatch("```nginx\n(.-)```") do
    if block:find("location = /metrics", 1, true) then return block end
  end
  error("docs/nginx.md has no nginx block with location = /metrics")
end

-- The http block's own lines: the snippet (spec/support/nginx.lua writes the rest).
local function http_lines(port, redis_url)
  local snippet = doc_snippet()
  local n1, n2
  snippet, n1 = snippet:gsub("redis://127%.0%.0%.1:6379", redis_url)
  snippet, n2 = snippet:gsub("listen 127%.0%.0%.1:8080;", "listen 127.0.0.1:" .. port .. ";")
  assert(n1 == 1 and n2 == 1, "the docs/nginx.md snippet's address or port changed")
  return snippet
end

describe("docs/nginx.md's nginx metrics snippet", function()
  local srv, nginx, base

  local function log_tail()
    return nginx:error_log()
  end

  -- body, status, headers
  local function get(path)
    local chunks = {}
    local ok, code, headers = http.request { url = base .. path, sink = ltn12.sink.table(chunks) }
    assert(ok, code)
    return table.concat(chunks), code, headers
  end

  setup(function()
    srv = helpers.start_redis()
    nginx = ngx_host.start {
      http = function(port) return http_lines(port, srv.url) end,
      ready = function(url)
        local _, code = http.request(url .. "/metrics")
        return code == 200
      end,
    }
    base = nginx.base
  end)

  teardown(function()
    if nginx then nginx:stop() end
    if srv then srv:stop() end
  end)

  it("serves valid Prometheus text with the counters of the locks taken", function()
    -- the cosockets count their own NOSCRIPT reloads
    local admin = assert(require("redislock.core").connect { host = "127.0.0.1", port = srv.port })
    assert(admin:command("SCRIPT", "FLUSH"))
    admin:close()
    for _ = 1, 3 do
      local body, code = get("/job")
      assert.equal(200, code, log_tail())
      assert.equal("done\n", body)
    end
    -- held elsewhere: /job waits its 1 s and answers 409
    local other = assert(redislock.connect { url = srv.url })
    local held = assert(other:acquire("job", { ttl = 10 }))
    local _, code = get("/job")
    assert.equal(409, code, log_tail())
    assert.is_true(held:release())
    other:close()

    local text, mcode, headers = get("/metrics")
    assert.equal(200, mcode, log_tail())
    assert.matches("^text/plain; version=0%.0%.4", headers["content-type"])
    local p = prometheus.parse(text)
    local w = { worker = "0" }
    assert.equal(3, prometheus.sample(p, "redislock_acquires_total", w))
    assert.equal(3, prometheus.sample(p, "redislock_releases_total", w))
    assert.equal(1, prometheus.sample(p, "redislock_timeouts_total", w))
    assert.equal(1, prometheus.sample(p, "redislock_waits_total", w))
    assert.equal(0, prometheus.sample(p, "redislock_holds", w))
    assert.equal(3, prometheus.sample(p, "redislock_wait_seconds_count", w))
    assert.equal(3, prometheus.sample(p, "redislock_hold_seconds_bucket", { worker = "0", le = "+Inf" }))
    assert.equal(0, prometheus.sample(p, "redislock_losses_total", { worker = "0", reason = "not held" }))
    assert.is_true(prometheus.sample(p, "redislock_noscript_reloads_total", w) >= 1)
    assert.equal("counter", p.families.redislock_acquires_total.type)
    assert.equal("histogram", p.families.redislock_wait_seconds.type)
    for _, s in ipairs(p.samples) do assert.equal("0", s.labels.worker, s.name) end
    -- (a wait that ends at its deadline logs nginx's own "lua tcp socket
    -- read timed out": the cosocket transport ends the BLPOP that way)
    local log = nginx:error_log(true)
    assert.is_nil(log:find("runtime error", 1, true), log)
    assert.is_nil(log:find("global Lua variable", 1, true), log)
  end)
end)

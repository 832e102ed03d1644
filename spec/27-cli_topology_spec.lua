-- `redislock run` beyond one Redis: over Redlock (--url repeated, a URL file
-- of several lines, $REDISLOCK_URL with spaces), Sentinel and Cluster URLs;
-- and a job that adopts its own lock through REDISLOCK_TOKEN.
local helpers = require "spec.helpers"
local topology = require "spec.support.topology"

local BIN = "bin/redislock"
local quote = helpers.quote

local function cli(env, ...)
  local parts = {}
  for _, a in ipairs({ ... }) do parts[#parts + 1] = quote(a) end
  return (env or "") .. " " .. quote(helpers.lua_bin) .. " " .. BIN .. " " .. table.concat(parts, " ")
end

local function run_sync(env, ...)
  local p = helpers.spawn(cli(env, ...))
  local code = p:wait(60)
  local out, err = p:stdout(), p:stderr()
  p:stop()
  return code, out, err
end

-- A job that prints its environment's lock variables and stays `secs`.
local function job(secs)
  return "sh", "-c", 'echo "token=$REDISLOCK_TOKEN fence=$REDISLOCK_FENCE"; sleep ' .. secs
end

describe("redislock run beyond one Redis", function()
  local fresh = helpers.names("clitopo")

  describe("over Redlock", function()
    local servers, urls = {}, {}
    setup(function()
      for i = 1, 3 do
        servers[i] = helpers.start_redis()
        urls[i] = servers[i].url
      end
    end)
    teardown(function() for _, s in ipairs(servers) do s:stop() end end)

    it("holds one lock on every master for the job, with --url repeated", function()
      local name = fresh()
      local p = helpers.spawn(cli(nil, "run", "--url", urls[1], "--url", urls[2], "--url", urls[3],
        "--ttl", "1", name, "--", job(2)))
      assert(helpers.wait_until(function() return p:stdout():find("token=") end, 10), p:stderr())
      local token, fence = p:stdout():match("token=(%x+) fence=(%S*)")
      assert.equal("", fence)     -- no fence over Redlock
      helpers.sleep(1.2)           -- past the ttl: renewed on every master
      for _, s in ipairs(servers) do assert.equal(token, (s:cli_raw("GET", "{" .. name .. "}"))) end
      -- a second run over the same masters is kept out
      local code = run_sync(nil, "run", "--url", urls[1], "--url", urls[2], "--url", urls[3], name, "--",
        "true")
      assert.equal(1, code)
      assert.equal(0, p:wait(20), p:stderr())
      p:stop()
      for _, s in ipairs(servers) do assert.equal("0", (s:cli_raw("EXISTS", "{" .. name .. "}"))) end
    end)

    it("reads several URLs from a URL file and from $REDISLOCK_URL", function()
      local file = helpers.tmpdir() .. "/urls"
      local f = assert(io.open(file, "w"))
      f:write("# the three masters\n", urls[1], "\n\n", urls[2], "\n", urls[3], "\n")
      f:close()
      local name = fresh()
      -- the job counts the masters that hold its token (a grant needs a
      -- majority; the last master may answer a little later)
      local count = "n=0; for p in " .. servers[1].port .. " " .. servers[2].port .. " " .. servers[3].port
        .. "; do [ \"$(redis-cli -p $p GET '{" .. name .. "}')\" = \"$REDISLOCK_TOKEN\" ] && n=$((n+1)); done;"
        .. " echo held=$n"
      local code, out, err = run_sync(nil, "run", "--url-file", file, name, "--", "sh", "-c", count)
      assert.equal(0, code, err)
      assert.is_true(tonumber(out:match("held=(%d)")) >= 2, out)
      code, out, err = run_sync("REDISLOCK_URL=" .. quote(table.concat(urls, " ")), "run", name, "--",
        "sh", "-c", count)
      assert.equal(0, code, err)
      assert.is_true(tonumber(out:match("held=(%d)")) >= 2, out)
      -- status: held on a majority
      code, out = run_sync("REDISLOCK_URL=" .. quote(table.concat(urls, " ")), "status", name)
      assert.equal(1, code)        -- status: not held
      assert.matches("held: no", out)
    end)
  end)

  it("runs over a Cluster URL: the lock on the node of its slot", function()
    local cl = topology.start_cluster { masters = 3, replicas = 0 }
    local name = fresh()
    local url = "redis+cluster://" .. cl.seeds[1]
    local p = helpers.spawn(cli(nil, "run", "--url", url, "--ttl", "1", name, "--", job(1.5)))
    assert(helpers.wait_until(function() return p:stdout():find("token=") end, 10), p:stderr())
    local token = p:stdout():match("token=(%x+)")
    assert.equal(token, (cl:node_for_key("{" .. name .. "}"):cli_raw("GET", "{" .. name .. "}")))
    assert.equal(0, p:wait(20), p:stderr())
    p:stop()
    cl:stop()
  end)

  it("runs over a Sentinel URL: the lock on the master the sentinels name", function()
    local rep = topology.start_replicated { replicas = 1 }
    local sen = topology.start_sentinels { master = rep.master }
    local hosts = {}
    for i, a in ipairs(sen:addrs()) do hosts[i] = a.host .. ":" .. a.port end
    local name = fresh()
    local url = "redis+sentinel://" .. table.concat(hosts, ",") .. "/mymaster"
    local p = helpers.spawn(cli(nil, "run", "--url", url, name, "--", job(1)))
    assert(helpers.wait_until(function() return p:stdout():find("token=") end, 10), p:stderr())
    local token = p:stdout():match("token=(%x+)")
    assert.equal(token, (rep.master:cli_raw("GET", "{" .. name .. "}")))
    assert.equal(0, p:wait(20), p:stderr())
    p:stop()
    sen:stop()
    rep:stop()
  end)

  it("lets the job adopt its lock through REDISLOCK_TOKEN", function()
    local srv = helpers.start_redis()
    local name = fresh()
    local code, out, err = run_sync("REDISLOCK_URL=" .. quote(srv.url), "run", "--keep-env", "--ttl", "0.5", name,
      "--", helpers.lua_bin, "-e", ([[
        package.path = %q .. package.path
        package.cpath = %q .. package.cpath
        local c = assert(require("redislock").connect { url = os.getenv("REDISLOCK_URL") })
        local l = assert(c:adopt(os.getenv("REDISLOCK_NAME"), os.getenv("REDISLOCK_TOKEN"), { ttl = 0.5 }))
        assert(l.fence > tonumber(os.getenv("REDISLOCK_FENCE")), "a fence of its own")
        require("redislock.core").sleep(1.5)   -- three ttls: renewed by both
        print("adopted", l:held())
      ]]):format(helpers.sh("pwd"):gsub("%s+$", "") .. "/lua/?.lua;",
        helpers.sh("pwd"):gsub("%s+$", "") .. "/?.so;"))
    assert.equal(0, code, err)
    assert.matches("adopted\ttrue", out)
    assert.equal("0", (srv:cli_raw("EXISTS", "{" .. name .. "}")))
    srv:stop()
  end)
end)

-- docs/topology.md's Sentinel recipe (a master, a replica, three sentinels),
-- run as pasted: its sh block, with its five ports and its folder replaced by
-- ours (loopback only, as it is written), then what the doc says of it:
-- the sentinels find the replica and each other, a failover promotes the
-- replica, and the URL it gives takes locks on whichever is master.
-- The recipe daemonizes its servers: they are stopped here by the pid files
-- it writes, whatever happens (finally).
local helpers = require "spec.helpers"
local docs = require "spec.support.docs"

local quote = helpers.quote

describe("docs/topology.md's Sentinel recipe", function()
  it("starts as pasted, fails over, and its URL takes locks on the new master", function()
    local section = docs.section("topology.md", "Sentinel: a master, a replica and three sentinels")
    local sh, lua
    for _, b in ipairs(docs.blocks(section)) do
      if b.info == "sh" and not sh then sh = b.body end
      if b.info == "lua" and not lua then lua = b.body end
    end
    assert.truthy(sh, "no sh block")
    assert.truthy(lua, "no lua block")

    local dir = helpers.tmpdir()
    local ports = {}
    -- The doc's ports, longest first ("26380" holds "6380"), each a free one of ours.
    local DOC_PORTS = { "26379", "26380", "26381", "6380", "6381" }
    local function ours(text)
      local n = 0
      for _, p in ipairs(DOC_PORTS) do
        local k
        text, k = text:gsub("%f[%d]" .. p .. "%f[%D]", ports[p])
        n = n + k
      end
      return text, n
    end
    for _, p in ipairs(DOC_PORTS) do
      ports[p] = tostring(helpers.free_port())
    end
    local script, n_ports = ours(sh)
    local n_dir
    script, n_dir = script:gsub("/tmp/redislock%-sentinel", dir)
    assert.equal(2, n_dir, "the recipe's folder changed")   -- mkdir, cd
    assert.is_true(n_ports >= 6, "the recipe's ports changed")
    -- (SERVER=valkey: the same recipe on valkey-server and valkey-sentinel)
    script = script:gsub("redis%-server", helpers.bin.server):gsub("redis%-sentinel", helpers.bin.sentinel)
    local cli = helpers.bin.cli

    finally(function()
      helpers.sh("for f in " .. quote(dir) .. "/*.pid; do [ -f \"$f\" ] && kill -KILL \"$(cat \"$f\")\"; done " ..
        "2>/dev/null; true")
    end)
    local out, code = helpers.sh("sh -c " .. quote(script) .. " 2>&1")
    assert.equal(0, code, out)

    local function ask(port, ...)
      local args = {}
      for i = 1, select("#", ...) do args[i] = quote((select(i, ...))) end
      return (helpers.sh(cli .. " -p " .. port .. " --raw " .. table.concat(args, " ") .. " </dev/null 2>&1"))
    end
    -- every sentinel knows the two others and the replica, which follows the master
    local why
    assert(helpers.wait_until(function()
      for _, p in ipairs({ "26379", "26380", "26381" }) do
        -- (--raw: each sentinel a list of lines, its first "name")
        local sentinels = select(2, ("\n" .. ask(ports[p], "SENTINEL", "SENTINELS", "mymaster")):gsub("\nname\n", ""))
        local replicas = ask(ports[p], "SENTINEL", "REPLICAS", "mymaster")
        why = p .. ": " .. sentinels .. " other sentinels; replicas: " .. replicas
        if sentinels ~= 2 or not replicas:find("master-link-status\nok", 1, true) then return false end
      end
      return true
    end, 30, 0.2), "the recipe's sentinels never agreed: " .. tostring(why))

    -- its URL, on our ports
    local url = assert(lua:match('url = "([^"]+)"'), lua)
    local n
    url, n = ours(url)
    assert.equal(3, n, url)
    local redislock = require "redislock"
    local c = assert(redislock.connect { url = url })
    local lock = assert(c:acquire("recipe", { ttl = 10 }))
    assert.equal("1", (ask(ports["6380"], "EXISTS", "{recipe}"):gsub("%s+$", "")))
    assert.truthy(lock:release())

    -- the failover the doc suggests promotes the replica
    local answer = ask(ports["26379"], "SENTINEL", "FAILOVER", "mymaster")
    assert.matches("^OK", answer)
    assert(helpers.wait_until(function()
      return ask(ports["26379"], "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"):find(ports["6381"], 1, true)
        and ask(ports["6381"], "ROLE"):match("^master")
    end, 30, 0.2), "no failover to the replica: " .. ask(ports["26379"], "SENTINEL", "MASTERS"))
    -- and the client follows: a lock taken now is on the new master
    assert(helpers.wait_until(function()
      local l = c:acquire("recipe:after", { ttl = 10, wait = 5 })
      if not l then return false end
      local there = ask(ports["6381"], "EXISTS", "{recipe:after}"):gsub("%s+$", "") == "1"
      l:release()
      return there
    end, 20, 0.2), "no lock on the promoted replica")
    c:close()
  end)
end)

-- Several OS processes fight over one lock guarding a non-atomic counter:
-- the final count is exact and no two holds overlap in time.
local helpers = require "spec.helpers"
local core = require "redislock.core"

local PROCESSES = 8
local ITERATIONS = 500


describe("multi-process torture", function()
  local srv

  setup(function() srv = helpers.start_redis() end)
  teardown(function() srv:stop() end)

  it(PROCESSES .. " processes x " .. ITERATIONS .. " critical sections keep an exact count", function()
    local procs = {}
    local start_at = string.format("%.6f", core.monotime() + 0.5) -- all begin together
    for i = 1, PROCESSES do
      procs[i] = helpers.spawn(helpers.lua_cmd("tools/counter_worker.lua", srv.url, "torture",
        ITERATIONS, "counter", start_at))
    end
    local holds = {}
    for i, p in ipairs(procs) do
      assert.equal(0, p:wait(120), "worker " .. i .. ": " .. (p:stderr() or ""))
      for _, h in ipairs(helpers.holds_of(p:stdout())) do holds[#holds + 1] = h end
    end
    assert.equal(PROCESSES * ITERATIONS, #holds)

    local raw = assert(core.connect(require("redislock.url").parse(srv.url)))
    assert.equal(tostring(PROCESSES * ITERATIONS), raw:command("GET", "counter"))
    raw:close()

    -- Mutex history: ordered by fence (grant order), each hold ends before
    -- the next begins, and fences are unique.
    table.sort(holds, function(x, y) return x[3] < y[3] end)
    for i = 2, #holds do
      assert(holds[i][3] > holds[i - 1][3], "duplicate fence " .. holds[i][3])
      assert(holds[i][1] >= holds[i - 1][2],
        string.format("holds with fences %d and %d overlap", holds[i - 1][3], holds[i][3]))
    end
  end)
end)

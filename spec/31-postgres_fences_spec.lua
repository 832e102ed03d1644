-- Fenced writes on a real PostgreSQL (docs/fencing-postgres.md): the
-- inventory that must not be oversold and the transfer that must not run
-- twice, with workers in separate processes, a short ttl and holders
-- SIGSTOPped past their lease between their read and their write. Each
-- with its negative control (the same workload without the fence guard),
-- which must show the oversell or the double transfer: proof the checks
-- can fail. And the pitfall of a lock released before its transaction
-- commits.
local helpers = require "spec.helpers"
local fenced = require "spec.support.pg_fenced"
local run = require("spec.support.pg_run").run


-- Figures of a run, for the log and for failure messages.
local function figures(r)
  local keys = {}
  for k, v in pairs(r) do
    if k ~= "log" then keys[#keys + 1] = k .. "=" .. (type(v) == "number" and ("%g"):format(v) or tostring(v)) end
  end
  table.sort(keys)
  return table.concat(keys, " ")
end

local function why(r) return figures(r) .. "\n" .. table.concat(r.log, "\n") end

describe("fenced writes on PostgreSQL", function()
  local pg, srv

  setup(function()
    pg = helpers.start_postgres()
    srv = helpers.start_redis()
  end)
  teardown(function()
    srv:stop()
    pg:stop()
  end)

  describe("inventory (SELECT ... FOR UPDATE and the fence guard)", function()
    it("3 workers, holders paused past their lease: never oversold, one order per unit", function()
      local r = run { pg = pg, lock_url = srv.url, case = "inventory", mode = "fenced", stock = 12, pauses = 2 }
      print("\n# inventory, fenced: " .. figures(r))
      assert.equal(2, r.pauses, why(r))
      assert.equal(0, r.stock, why(r))
      assert.equal(12, r.orders, why(r))
      assert.equal(0, r.oversold, why(r))
      assert.equal(r.orders, r.accepted, why(r))      -- every acknowledged sale is an order, and no more
      assert.is_true(r.stale >= r.pauses, why(r))     -- each paused holder was refused
      assert.equal(0, r.errors, why(r))
    end)

    it("negative control: the same without the fence guard oversells", function()
      local r = run { pg = pg, lock_url = srv.url, case = "inventory", mode = "unfenced", stock = 12, pauses = 2 }
      print("\n# inventory, no fence guard (control): " .. figures(r))
      assert.equal(2, r.pauses, why(r))
      assert.equal(0, r.stock, why(r))
      assert.is_true(r.oversold > 0, "the control sold no more than its stock: the check cannot fail\n" .. why(r))
      assert.equal(r.orders, r.accepted, why(r))
    end)
  end)

  describe("transfer (last_fence checked and raised in the same transaction)", function()
    it("3 workers, holders paused past their lease: no transfer applied twice", function()
      local r = run { pg = pg, lock_url = srv.url, case = "transfer", mode = "fenced", transfers = 16, pauses = 2 }
      print("\n# transfer, fenced: " .. figures(r))
      assert.equal(2, r.pauses, why(r))
      assert.equal(16, r.done, why(r))
      assert.equal(16, r.applied, why(r))
      assert.equal(0, r.doubled, why(r))
      assert.equal(0, r.lost_money, why(r))
      assert.equal(0, r.balance_drift, why(r))
      assert.is_true(r.stale >= r.pauses, why(r))
      assert.equal(0, r.errors, why(r))
    end)

    it("negative control: the same without the fence guard applies transfers twice", function()
      local r = run { pg = pg, lock_url = srv.url, case = "transfer", mode = "unfenced", transfers = 16, pauses = 2 }
      print("\n# transfer, no fence guard (control): " .. figures(r))
      assert.equal(2, r.pauses, why(r))
      assert.equal(16, r.done, why(r))
      assert.is_true(r.doubled > 0, "the control applied nothing twice: the check cannot fail\n" .. why(r))
      assert.is_true(r.lost_money > 0, why(r))
      assert.equal(0, r.balance_drift, why(r))        -- doubled, not torn: each application is whole
    end)
  end)

  -- A lock taken inside a transaction that commits only after the release
  -- (a framework's transaction around a method that locks and unlocks):
  -- A writes and releases; B takes the lock, reads the row A has not
  -- committed yet, and writes after A's commit. B's fence is newer, so its
  -- guarded write is accepted: the fence cannot see this, only the order
  -- can prevent it. B's read is a plain SELECT here; a read that locks the
  -- row (FOR UPDATE, or the fenced read's UPDATE) would wait for A's commit.
  describe("commit before release", function()
    local ITEM = 900000
    local A = [[
      local redislock = require "redislock"
      local fenced = require "spec.support.pg_fenced"
      local client = assert(redislock.connect { url = lock_url })
      local env = assert(require("luasql.postgres").postgres())
      local db = assert(env:connect(conninfo))
      local lock = assert(client:acquire("item:" .. item, { ttl = 10 }))
      local f = fenced.int(lock.fence)
      assert(db:execute("BEGIN"))
      local stock = tonumber(db:execute("SELECT stock FROM items WHERE id = " .. item):fetch())
      assert(db:execute(("UPDATE items SET stock = %d, last_fence = %s WHERE id = %d AND last_fence <= %s")
        :format(stock - 1, f, item, f)) == 1)
      assert(db:execute(("INSERT INTO orders (item_id, fence) VALUES (%d, %s)"):format(item, f)))
      print("written " .. stock) io.stdout:flush()
      while not io.open(go) do require("redislock.core").sleep(0.01) end
      if order == "release-then-commit" then
        assert(lock:release())
        require("redislock.core").sleep(0.5)     -- the framework's way to its COMMIT
        assert(db:execute("COMMIT"))
      else
        assert(db:execute("COMMIT"))
        assert(lock:release())
      end
      print("done")
    ]]
    local B = [[
      local redislock = require "redislock"
      local fenced = require "spec.support.pg_fenced"
      local client = assert(redislock.connect { url = lock_url })
      local env = assert(require("luasql.postgres").postgres())
      local db = assert(env:connect(conninfo))
      print("waiting") io.stdout:flush()
      local lock = assert(client:acquire("item:" .. item, { ttl = 10, wait = 10 }))
      local f = fenced.int(lock.fence)
      assert(db:execute("BEGIN"))
      local stock = tonumber(db:execute("SELECT stock FROM items WHERE id = " .. item .. lock_read):fetch())
      local n = db:execute(("UPDATE items SET stock = %d, last_fence = %s WHERE id = %d AND last_fence <= %s")
        :format(stock - 1, f, item, f))
      assert(db:execute(("INSERT INTO orders (item_id, fence) VALUES (%d, %s)"):format(item, f)))
      assert(db:execute("COMMIT"))
      assert(lock:release())
      print("read " .. stock .. " updated " .. n)
    ]]

    -- Two sales of item `item` (stock 10) by A and B in turn, A ending in
    -- `order`, B reading with FOR UPDATE if `lock_read`; returns the final
    -- stock, the orders and B's line.
    local function sell_twice(item, order, lock_read)
      assert(select(2, pg:psql(("INSERT INTO items (id, stock) VALUES (%d, 10)"):format(item))))
      local dir = helpers.tmpdir()
      local go = dir .. "/go"
      local a = helpers.spawn(helpers.lua_cmd(("local lock_url, conninfo, item, order, go = %q, %q, %d, %q, %q\n")
        :format(srv.url, pg.conninfo, item, order, go) .. A))
      finally(function() a:stop() end)
      assert(helpers.wait_until(function() return a:stdout():find("written") end, 10), a:stderr())
      local b = helpers.spawn(helpers.lua_cmd(("local lock_url, conninfo, item, lock_read = %q, %q, %d, %q\n")
        :format(srv.url, pg.conninfo, item, lock_read and " FOR UPDATE" or "") .. B))
      finally(function() b:stop() end)
      assert(helpers.wait_until(function() return b:stdout():find("waiting") end, 10), b:stderr())
      helpers.sleep(0.2)                       -- B is in acquire, the lock busy
      assert(io.open(go, "w")):close()
      assert.equal(0, a:wait(15), a:stderr())
      assert.equal(0, b:wait(15), b:stderr())
      local stock = tonumber((pg:psql("SELECT stock FROM items WHERE id = " .. item)))
      local orders = tonumber((pg:psql("SELECT count(*) FROM orders WHERE item_id = " .. item)))
      return stock, orders, b:stdout():match("read %d+ updated %d+")
    end

    it("released first, then committed: the next holder reads the old row and an update is lost", function()
      local stock, orders, b = sell_twice(ITEM + 1, "release-then-commit")
      print(("\n# release then commit: 2 orders, stock 10 -> %d (B: %s)"):format(stock, b))
      assert.equal(2, orders)
      assert.equal(9, stock, "no update lost: B did not read before A's commit (" .. b .. ")")
      assert.equal("read 10 updated 1", b)      -- the fence let B's write through: B is newer
    end)

    it("committed first, then released: both updates stay", function()
      local stock, orders, b = sell_twice(ITEM + 2, "commit-then-release")
      assert.equal(2, orders)
      assert.equal(8, stock)
      assert.equal("read 9 updated 1", b)
    end)

    it("released first, then committed, a read that locks the row waits for the commit", function()
      -- (PostgreSQL's row lock, not the Redis lock: any read that does not
      -- lock the row, anywhere, still sees the old value)
      local stock, orders, b = sell_twice(ITEM + 3, "release-then-commit", true)
      assert.equal(2, orders)
      assert.equal(8, stock)
      assert.equal("read 9 updated 1", b)
    end)
  end)

  it("fences and ids pass into SQL with all their digits, on every Lua", function()
    local top = 2 ^ 53 - 1
    assert.equal("9007199254740991", fenced.int(top))
    assert.equal("1795424810233412", fenced.int(1795424810233412))
    assert.equal("1795424810233412", fenced.int("1795424810233412"))
    for _, bad in ipairs({ 2 ^ 53, -1, 1.5, "x", 0 / 0, math.huge }) do
      assert.has_error(function() fenced.int(bad) end)
    end
    -- and a bigint column keeps them: compared in SQL, not in Lua
    assert.equal("t", (pg:psql(("SELECT %s::bigint > %s::bigint"):format(fenced.int(top), fenced.int(top - 1)))))
  end)

  it("docs/fencing-postgres.md shows the code these specs run, word for word", function()
    local doc = assert(helpers.read_file("docs/fencing-postgres.md"), "no docs/fencing-postgres.md")
    local files = { "spec/support/pg_fenced.lua", "spec/support/pg_worker.lua" }
    local src = ""
    for _, f in ipairs(files) do src = src .. assert(helpers.read_file(f)) .. "\n" end
    -- Lua: the block's lines, indentation dropped, one after another in a file
    local function lines(text)
      local out = {}
      for line in text:gmatch("[^\n]*") do
        line = line:gsub("^%s+", ""):gsub("%s+$", "")
        if line ~= "" then out[#out + 1] = line end
      end
      return "\n" .. table.concat(out, "\n") .. "\n"
    end
    -- SQL: each statement, comments dropped and spaces collapsed, equal to
    -- one in a string of the code
    local function statements(text, into)
      into = into or {}
      for stmt in (text:gsub("%-%-[^\n]*", "") .. ";"):gmatch("([^;]*);") do
        stmt = stmt:gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
        if stmt ~= "" then into[#into + 1] = stmt end
      end
      return into
    end
    local have_lua, have_sql = lines(src), {}
    for s in src:gmatch('"(.-)"') do statements(s, have_sql) end
    for s in src:gmatch("%[%[(.-)%]%]") do statements(s, have_sql) end
    local known = {}
    for _, s in ipairs(have_sql) do known[s] = true end
    local n = { lua = 0, sql = 0 }
    for info, body in doc:gmatch("\n```(%S*)\n(.-\n)```") do
      if info == "lua" then
        n.lua = n.lua + 1
        assert(have_lua:find(lines(body), 1, true),
          "docs/fencing-postgres.md has a ```lua block that " .. table.concat(files, " and ") .. " do not:\n" .. body)
      elseif info == "sql" then
        for _, stmt in ipairs(statements(body)) do
          n.sql = n.sql + 1
          assert(known[stmt], "docs/fencing-postgres.md has a statement that the code does not run:\n" .. stmt)
        end
      end
    end
    -- (7 Lua blocks; the schema's 5 tables, the inventory's 9 statements, the transfer's 7)
    assert.is_true(n.lua >= 7 and n.sql >= 21, ("only %d Lua blocks and %d statements checked"):format(n.lua, n.sql))
  end)
end)

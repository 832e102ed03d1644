-- pg_run.lua: runs one of the PostgreSQL cases end to end and counts what
-- the database shows (spec/31-postgres_fences_spec.lua, make demo-postgres).
--
--   local run = require("spec.support.pg_run").run
--   local r = run { pg = pg, lock_url = srv.url, case = "inventory", mode = "fenced" }
--
-- Puts a fresh item (or fresh transfers) in the schema, starts `workers`
-- processes (spec/support/pg_worker.lua), and SIGSTOPs `pauses` holders,
-- each caught between its read and its write, for `pause` seconds (3 ttl
-- by default: well past its lease), one at a time. Returns a table:
--   inventory: initial, stock (final), orders, oversold = orders - (initial - stock)
--   transfer:  transfers, done (status 'done'), applied (ledger rows), doubled
--              (transfers applied more than once), lost_money (what the source paid beyond the amounts
--              of the transfers done), balance_drift (sum of balances moved: must be 0)
--   both:      accepted, stale (refused writes and reads), errors (PostgreSQL's),
--              pauses (pauses that landed between a read and its write),
--              seconds, log (workers' lines)
local helpers = require "spec.helpers"
local fenced = require "spec.support.pg_fenced"

local M = {}
-- (not `table.unpack and table.unpack(t) or unpack(t)`: and/or keep one value)
local unpack_ = table.unpack or unpack -- luacheck: ignore 143

-- Creates the schema once per cluster.
local function schema(pg)
  if pg.pg_fenced_schema then return end
  local out, ok = pg:psql(fenced.SCHEMA)
  assert(ok, out)
  pg.pg_fenced_schema = true
end

local function number(pg, sql)
  local out, ok = pg:psql(sql)
  assert(ok, out)
  return tonumber(out)
end

-- Lines a worker has written so far.
local function lines(p)
  local out = {}
  for line in p:stdout():gmatch("[^\n]+") do out[#out + 1] = line end
  return out
end

-- A worker caught between a read and its write: its last line is a read
-- that will be followed by a write (a stock above 0, a pending transfer),
-- with no "slept" after it (the worker logs that when its sleep ends, before
-- the write: a worker stopped after it may have committed already, its
-- "write" line not yet written; that once counted a stop after a write as a
-- pause, and the run found one stale write fewer than pauses).
local function reading(p, case)
  local all = lines(p)
  local last = all[#all]
  if not last then return nil end
  local value = last:match("^read %S+ %S+ (%S+)")
  if not value then return nil end
  if case == "inventory" and (tonumber(value) or 0) > 0 then return last, #all end
  if case == "transfer" and value == "pending" then return last, #all end
end

-- Fresh rows for one run: an item, or two accounts and their transfers.
-- Returns the run's first id (its own rows: its own lock names) and the
-- ids the workers take.
local function seed(pg, o)
  pg.pg_fenced_runs = (pg.pg_fenced_runs or 0) + 1
  local base = pg.pg_fenced_runs * 1000
  local ids = {}
  if o.case == "inventory" then
    ids[1] = base
    assert(select(2, pg:psql(("INSERT INTO items (id, stock) VALUES (%d, %d)"):format(base, o.stock or 12))))
  else
    assert(select(2, pg:psql(("INSERT INTO accounts (id, balance) VALUES (%d, 1000000), (%d, 0)")
      :format(base, base + 1))))
    for i = 1, o.transfers or 8 do
      ids[i] = base + i
      assert(select(2, pg:psql(("INSERT INTO transfers (id, from_id, to_id, amount) VALUES (%d, %d, %d, %d)")
        :format(base + i, base, base + 1, 100 + i))))
    end
  end
  return base, ids
end

-- Stops worker p if it is caught between a read and its write, for `pause`
-- seconds, and until another worker has read the same id under a newer
-- grant: only then must the paused holder's write be refused (on a loaded
-- machine the others may not have taken the name within the pause, and a
-- write nobody overtook is rightly accepted). Returns nil when p was not
-- reading; else whether the pause counts.
local function pause_one(p, procs, case, pause)
  local line, count = reading(p, case)
  if not line then return nil end
  p:kill("STOP")
  local counts = false
  -- still there once stopped: the pause is inside the section
  local again, count2 = reading(p, case)
  if again == line and count2 == count then
    -- Reads of the same item or transfer by the others so far (a read of
    -- another id proves nothing).
    local id = line:match("^read (%S+)")
    local function reads(q) return select(2, ("\n" .. q:stdout()):gsub("\nread " .. id .. " ", "")) end
    local before = {}
    for i, q in ipairs(procs) do before[i] = reads(q) end
    helpers.sleep(pause)
    counts = helpers.wait_until(function()
      for i, q in ipairs(procs) do
        if q ~= p and reads(q) > before[i] then return true end
      end
    end, 10, 0.01) and true or false
  end
  p:kill("CONT")
  return counts, again == line and count2 == count
end

-- The pauses, one holder at a time, while the workers run. Returns how
-- many landed (and were overtaken).
local function pauses_of(procs, o, t0, seconds)
  local pauses, pause = o.pauses or 2, o.pause or 3 * (o.ttl or 0.5)
  local landed, next_at = 0, t0 + (o.first_pause or 0.3)
  local function running()
    for _, p in ipairs(procs) do
      if p:alive() then return true end
    end
  end
  while running() and helpers.monotime() - t0 < seconds + 5 do
    if landed < pauses and helpers.monotime() >= next_at then
      for _, p in ipairs(procs) do
        local counts, stopped = pause_one(p, procs, o.case, pause)
        if counts ~= nil then
          -- a pause nobody overtook is not one whose write must be refused
          if counts then landed = landed + 1 end
          if stopped then next_at = helpers.monotime() + (o.gap or 0.5) end
          break
        end
      end
    end
    helpers.sleep(0.005)
  end
  return landed
end

-- What the workers' lines say, once they have ended.
local function collect(procs, landed)
  local r = { pauses = landed, accepted = 0, stale = 0, errors = 0, log = {} }
  for i, p in ipairs(procs) do
    local code = p:wait(10)
    assert(code == 0, ("worker %d exited %s: %s"):format(i, tostring(code), p:stderr()))
    for _, line in ipairs(lines(p)) do
      r.log[#r.log + 1] = "w" .. i .. " " .. line
      local what, result = line:match("^(%S+) %S+ %S+ (%S+)")
      if what == "write" and (result:match("^ok") or result == "applied") then r.accepted = r.accepted + 1 end
      if (what == "write" or what == "read") and result == "stale" then r.stale = r.stale + 1 end
      if (what == "write" or what == "read") and result:match("^err") then r.errors = r.errors + 1 end
    end
    p:stop()
  end
  return r
end

-- What the database shows of the run's rows, into r.
local function count_rows(pg, r, o, base, ids)
  if o.case == "inventory" then
    r.initial = o.stock or 12
    r.stock = number(pg, "SELECT stock FROM items WHERE id = " .. base)
    r.orders = number(pg, "SELECT count(*) FROM orders WHERE item_id = " .. base)
    r.oversold = r.orders - (r.initial - r.stock)
    return
  end
  local first, last = base + 1, base + #ids
  r.transfers = #ids
  r.applied = number(pg, ("SELECT count(*) FROM ledger WHERE transfer_id BETWEEN %d AND %d"):format(first, last))
  r.doubled = number(pg, ("SELECT count(*) FROM (SELECT transfer_id FROM ledger WHERE transfer_id BETWEEN %d AND %d"
    .. " GROUP BY transfer_id HAVING count(*) > 1) AS d"):format(first, last))
  r.done = number(pg, ("SELECT count(*) FROM transfers WHERE id BETWEEN %d AND %d AND status = 'done'")
    :format(first, last))
  local paid = number(pg, "SELECT 1000000 - balance FROM accounts WHERE id = " .. base)
  local owed = number(pg, ("SELECT coalesce(sum(amount), 0) FROM transfers WHERE id BETWEEN %d AND %d"
    .. " AND status = 'done'"):format(first, last))
  r.lost_money = paid - owed
  r.balance_drift = number(pg, ("SELECT sum(balance) - 1000000 FROM accounts WHERE id IN (%d, %d)")
    :format(base, base + 1))
end

function M.run(o)
  local pg, case, mode = o.pg, o.case, o.mode
  local workers, ttl = o.workers or 3, o.ttl or 0.5
  local cs = o.cs or 0.2
  local seconds = o.seconds or 45
  schema(pg)
  -- each run its own rows, and so its own lock names
  local base, ids = seed(pg, o)
  local t0 = helpers.monotime()
  local procs = {}
  for i = 1, workers do
    procs[i] = helpers.spawn(helpers.lua_cmd("spec/support/pg_worker.lua", o.lock_url, pg.conninfo, case, mode,
      ttl, cs, seconds, unpack_(ids)))
  end
  local r = collect(procs, pauses_of(procs, o, t0, seconds))
  r.seconds = helpers.monotime() - t0
  count_rows(pg, r, o, base, ids)
  return r
end

return M

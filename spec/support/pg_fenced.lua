-- pg_fenced.lua: fenced writes to PostgreSQL through LuaSQL, the two cases
-- of docs/fencing-postgres.md (an inventory that must not be oversold, a
-- transfer that must not run twice). The specs, `make torture
-- RESOURCE=postgres` and `make demo-postgres` run exactly this code; the
-- doc quotes it, and spec/31-postgres_fences_spec.lua checks that every
-- block and statement it quotes is here word for word.
--
-- db is a LuaSQL connection (require "luasql.postgres"). Every function
-- returns its result, or nil, "stale" when a newer holder of the lock has
-- been seen (nothing was changed), or nil, err from PostgreSQL (the
-- transaction was rolled back). M.unfenced has the same functions without
-- the fence guard: the negative control, which must lose updates.
-- LuaSQL has no bound parameters: the statements' $1, $2, ... are filled
-- in by bind(), with integers only (int()).
-- Lua 5.1 and LuaJIT too (no goto, no integer division).
local M = {}

M.SCHEMA = [[
CREATE TABLE items (
  id         bigint  PRIMARY KEY,
  stock      integer NOT NULL CHECK (stock >= 0),
  last_fence bigint  NOT NULL DEFAULT 0  -- newest fence of lock "item:<id>" seen
);
CREATE TABLE orders (                    -- one row per unit sold
  id      bigserial PRIMARY KEY,         -- the order the sales were accepted in
  item_id bigint NOT NULL REFERENCES items,
  fence   bigint NOT NULL
);
CREATE TABLE accounts (
  id      bigint PRIMARY KEY,
  balance bigint NOT NULL
);
CREATE TABLE transfers (
  id         bigint PRIMARY KEY,
  from_id    bigint NOT NULL REFERENCES accounts,
  to_id      bigint NOT NULL REFERENCES accounts,
  amount     bigint NOT NULL,
  status     text   NOT NULL DEFAULT 'pending',
  last_fence bigint NOT NULL DEFAULT 0   -- newest fence of lock "transfer:<id>" seen
);
CREATE TABLE ledger (                    -- one row per application of a transfer
  transfer_id bigint NOT NULL REFERENCES transfers,
  fence       bigint NOT NULL
);
]]

-- An integer as SQL text with all its digits, on every Lua: fences are
-- below 2^53, exact in a double, but Lua 5.1, 5.2 and LuaJIT's tostring keeps 14.
local function int(n)
  n = tonumber(n)
  assert(n and n >= 0 and n < 2^53 and n % 1 == 0, "not an integer below 2^53")
  return string.format("%.0f", n)
end
M.int = int

-- A statement with $1, $2, ... replaced by the integers given.
local function bind(sql, ...)
  local args = { ... }
  return (sql:gsub("%$(%d+)", function(i) return int(args[tonumber(i)]) end))
end

-- Runs a statement: LuaSQL's result (a cursor, or the number of rows
-- changed), or nil, err.
local function exec(db, sql, ...)
  return db:execute(bind(sql, ...))
end

-- The first row of a query as a list of strings, false if it has none.
local function row(db, sql, ...)
  local cur, err = exec(db, sql, ...)
  if not cur then return nil, err end
  local r = cur:fetch({}, "n")
  cur:close()
  return r or false
end

-- Runs fn() in a transaction: COMMIT if it returns a value, ROLLBACK if it
-- returns nil, err (or raises, raised again after the ROLLBACK).
local function transaction(db, fn)
  local begun, berr = db:execute("BEGIN")
  if not begun then return nil, berr end
  local ok, res, err = pcall(fn)
  if ok and res ~= nil then
    local done, cerr = db:execute("COMMIT")
    if not done then return nil, cerr end
    return res
  end
  db:execute("ROLLBACK")
  if not ok then error(res, 0) end
  return nil, err
end
M.transaction = transaction

-- Inventory ------------------------------------------------------------------

-- The read that raises the bar: under the lock "item:<id>", read the stock
-- and record our fence, unless a newer holder has been seen.
function M.read_stock(db, item, fence)
  return transaction(db, function()
    local r, err = row(db, "SELECT stock, last_fence <= $2 FROM items WHERE id = $1 FOR UPDATE", item, fence)
    if not r then return nil, err or "no item " .. int(item) end
    if r[2] ~= "t" then return nil, "stale" end
    local ok
    ok, err = exec(db, "UPDATE items SET last_fence = $2 WHERE id = $1", item, fence)
    if not ok then return nil, err end
    return tonumber(r[1])
  end)
end

-- The guarded write: sell one unit (the stock read above, minus one) and
-- record the order, both or neither, unless a newer holder has been seen.
-- Returns the order's id.
function M.sell_one(db, item, fence, stock)
  return transaction(db, function()
    local r, err = row(db, "SELECT last_fence <= $2 FROM items WHERE id = $1 FOR UPDATE", item, fence)
    if not r then return nil, err or "no item " .. int(item) end
    if r[1] ~= "t" then return nil, "stale" end
    local ok
    ok, err = exec(db, "UPDATE items SET stock = $3 WHERE id = $1", item, fence, stock - 1)
    if not ok then return nil, err end
    r, err = row(db, "INSERT INTO orders (item_id, fence) VALUES ($1, $2) RETURNING id", item, fence)
    if not r then return nil, err end
    return tonumber(r[1])
  end)
end

-- Transfer -------------------------------------------------------------------

-- The read that raises the bar, as one statement: under the lock
-- "transfer:<id>", the transfer's status, and our fence recorded. No row:
-- a newer holder has been seen.
function M.read_transfer(db, id, fence)
  local r, err = row(db, [[
    UPDATE transfers SET last_fence = $2
     WHERE id = $1 AND last_fence <= $2
    RETURNING status]], id, fence)
  if r == false then return nil, "stale" end
  if not r then return nil, err end
  return r[1]
end

-- Applies a transfer read as 'pending': last_fence checked and raised in
-- the transaction that moves the money, so a paused older holder's
-- transaction is refused whole.
function M.apply_transfer(db, id, fence)
  return transaction(db, function()
    local t, err = row(db, [[
      UPDATE transfers SET status = 'done', last_fence = $2
       WHERE id = $1 AND last_fence <= $2
      RETURNING from_id, to_id, amount]], id, fence)
    if t == false then return nil, "stale" end
    if not t then return nil, err end
    local ok
    ok, err = exec(db, "UPDATE accounts SET balance = balance - $5 WHERE id = $3", id, fence, t[1], t[2], t[3])
    if not ok then return nil, err end
    ok, err = exec(db, "UPDATE accounts SET balance = balance + $5 WHERE id = $4", id, fence, t[1], t[2], t[3])
    if not ok then return nil, err end
    ok, err = exec(db, "INSERT INTO ledger (transfer_id, fence) VALUES ($1, $2)", id, fence)
    if not ok then return nil, err end
    return true
  end)
end

-- The negative control ---------------------------------------------------------

-- The same workload without the fence guard: the row lock, the
-- transaction and the Redis lock, but no last_fence. A holder paused past
-- its lease then writes what it computed from an old read.
M.unfenced = {}

function M.unfenced.read_stock(db, item)
  return transaction(db, function()
    local r, err = row(db, "SELECT stock FROM items WHERE id = $1 FOR UPDATE", item)
    if not r then return nil, err or "no item " .. int(item) end
    return tonumber(r[1])
  end)
end

function M.unfenced.sell_one(db, item, fence, stock)
  fence = fence or 0   -- (recorded with the order only; Redlock has none)
  return transaction(db, function()
    local r, err = row(db, "SELECT stock FROM items WHERE id = $1 FOR UPDATE", item)
    if not r then return nil, err or "no item " .. int(item) end
    local ok
    ok, err = exec(db, "UPDATE items SET stock = $3 WHERE id = $1", item, fence, stock - 1)
    if not ok then return nil, err end
    r, err = row(db, "INSERT INTO orders (item_id, fence) VALUES ($1, $2) RETURNING id", item, fence)
    if not r then return nil, err end
    return tonumber(r[1])
  end)
end

function M.unfenced.read_transfer(db, id)
  local r, err = row(db, "SELECT status FROM transfers WHERE id = $1", id)
  if not r then return nil, err or "no transfer " .. int(id) end
  return r[1]
end

function M.unfenced.apply_transfer(db, id, fence)
  fence = fence or 0
  return transaction(db, function()
    local t, err = row(db, "UPDATE transfers SET status = 'done' WHERE id = $1 RETURNING from_id, to_id, amount", id)
    if not t then return nil, err or "no transfer " .. int(id) end
    local ok
    ok, err = exec(db, "UPDATE accounts SET balance = balance - $5 WHERE id = $3", id, fence, t[1], t[2], t[3])
    if not ok then return nil, err end
    ok, err = exec(db, "UPDATE accounts SET balance = balance + $5 WHERE id = $4", id, fence, t[1], t[2], t[3])
    if not ok then return nil, err end
    ok, err = exec(db, "INSERT INTO ledger (transfer_id, fence) VALUES ($1, $2)", id, fence)
    if not ok then return nil, err end
    return true
  end)
end

-- The critical sections ------------------------------------------------------

-- Whole critical sections over a set of the functions above (M's, or
-- M.unfenced's for the control): lock, read, work, write, COMMIT, release.
local function sections(sql)
  -- One sale of `item`: its order's id, or nil and "sold out", "stale",
  -- or acquire's or PostgreSQL's error. work(stock, lock), if given, is the
  -- rest of the business (a payment, ...) between the read and the write.
  function sql.sell(client, db, item, lock_opts, work)
    local lock, err = client:acquire("item:" .. item, lock_opts)
    if not lock then return nil, err end
    local stock, order
    stock, err = sql.read_stock(db, item, lock.fence)
    if stock == 0 then
      err = "sold out"
    elseif stock then
      if work then work(stock, lock) end
      order, err = sql.sell_one(db, item, lock.fence, stock)
    end
    lock:release()   -- after sell_one's COMMIT, never before
    if not order then return nil, err end
    return order
  end

  -- Applies transfer `id` once: "applied", "done" (it was already), or
  -- nil and "stale" or an error. work(lock), if given, runs before the
  -- transaction.
  function sql.transfer(client, db, id, lock_opts, work)
    local lock, err = client:acquire("transfer:" .. id, lock_opts)
    if not lock then return nil, err end
    local status, applied
    status, err = sql.read_transfer(db, id, lock.fence)
    if status == "pending" then
      if work then work(lock) end
      applied, err = sql.apply_transfer(db, id, lock.fence)
      status = applied and "applied"
    end
    lock:release()   -- after apply_transfer's COMMIT, never before
    if not status then return nil, err end
    return status
  end
end
sections(M)
sections(M.unfenced)

return M

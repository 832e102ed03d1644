-- pg_worker.lua: one worker process of the PostgreSQL cases
-- (spec/support/pg_run.lua drives several and pauses them).
--
-- usage: lua pg_worker.lua LOCK_URL CONNINFO CASE MODE TTL CS SECONDS ID...
--   CASE inventory: ID is one item; loop pg_fenced's sell (lock "item:<ID>",
--        read the stock, sleep CS, sell one, release) until sold out.
--   CASE transfer: for each transfer ID in turn, pg_fenced's transfer (lock
--        "transfer:<ID>", read its status, and if pending sleep CS and
--        apply it; release).
--   MODE fenced: spec/support/pg_fenced.lua's functions; unfenced: the same
--        without the fence guard (the negative control).
-- Stops after SECONDS whatever happens. The sleep between the read and the
-- write is where the driver SIGSTOPs a holder past its lease. One line per
-- event on stdout, flushed at once, times on CLOCK_MONOTONIC:
--   read ID FENCE VALUE T     a read that will be followed by a write
--                             (VALUE: the stock, or "pending")
--   write ID - RESULT T       RESULT: ok:ORDER_ID | applied | stale | err:WORD
--   slept ID T                the read's sleep is over: the write follows
--   read ID - RESULT T        a read not followed by a write: RESULT
--                             soldout | done | stale | err:WORD
--   fail ID ERRWORD T         the lock was not taken
--   done
local redislock = require "redislock"
local core = require "redislock.core"
local luasql = require "luasql.postgres"
local fenced = require "spec.support.pg_fenced"

local lock_url, conninfo, case, mode = arg[1], arg[2], arg[3], arg[4]
local ttl, cs, seconds = tonumber(arg[5]), tonumber(arg[6]), tonumber(arg[7])
local ids = {}
for i = 8, #arg do ids[#ids + 1] = tonumber(arg[i]) end
assert(case == "inventory" or case == "transfer", "CASE: inventory or transfer")
assert(mode == "fenced" or mode == "unfenced", "MODE: fenced or unfenced")
local sql = mode == "fenced" and fenced or fenced.unfenced

local function log(...)
  local words = { ... }
  words[#words + 1] = string.format("%.6f", core.monotime())
  io.stdout:write(table.concat(words, " "), "\n")
  io.stdout:flush()
end

local function word(err) return tostring(err):match("^(%S+)") or "?" end

local stop_at = core.monotime() + seconds
local client = assert(redislock.connect { url = lock_url })
local env = assert(luasql.postgres())
local db = assert(env:connect(conninfo))

-- One critical section on `id` (pg_fenced's sell or transfer); returns
-- true when this worker is finished with it (sold out, or the transfer
-- applied or done).
local function section(id)
  local read_logged = false
  local function work(lock, value)
    log("read", id, fenced.int(lock.fence), value)
    read_logged = true
    core.sleep(cs)   -- the driver's SIGSTOP lands here
    log("slept", id)  -- past this line the write may have committed: a stop
                      -- seen after it is not a pause inside the section
  end
  local opts = { ttl = ttl, wait = 2 }
  local result, err
  if case == "inventory" then
    result, err = sql.sell(client, db, id, opts, function(stock, lock) work(lock, stock) end)
  else
    result, err = sql.transfer(client, db, id, opts, function(lock) work(lock, "pending") end)
  end
  local what = read_logged and "write" or "read"
  if result then
    log(what, id, "-", case == "inventory" and "ok:" .. result or result)
  elseif err == "stale" or err == "sold out" then
    log(what, id, "-", err == "stale" and "stale" or "soldout")
  elseif not read_logged and not tostring(err):match("^LuaSQL") then
    log("fail", id, word(err))   -- (PostgreSQL's errors come from LuaSQL)
  else
    log(what, id, "-", "err:" .. word(err))
  end
  if case == "inventory" then return err == "sold out" end
  return result ~= nil or read_logged   -- applied, done, or refused: someone newer has it
end

local n = 1
while n <= #ids and core.monotime() < stop_at do
  if section(ids[n]) then n = n + 1 end
end
log("done")
db:close()
env:close()
client:close()

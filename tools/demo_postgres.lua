-- demo_postgres.lua: `make demo-postgres`. The inventory of
-- docs/fencing-postgres.md on a throwaway PostgreSQL: worker processes sell
-- an item under a Redis lock with a short lease, and now and then one of
-- them is frozen (SIGSTOP, as a long GC pause would) between reading the
-- stock and writing it, past its lease. Once with the fence guard, once
-- without; prints how many units each sold beyond the stock.
--
-- Starts its own redis-server and PostgreSQL cluster (spec/helpers.lua),
-- loopback and unix sockets only, and stops both at the end.
package.path = "./lua/?.lua;./?.lua;" .. package.path
package.cpath = "./?.so;" .. package.cpath

local helpers = require "spec.helpers"
local run = require("spec.support.pg_run").run

local STOCK, WORKERS, PAUSES, TTL = 20, 3, 3, 0.5

io.stdout:setvbuf("line")
print("starting a throwaway redis-server and PostgreSQL 15 cluster ...")
local srv = helpers.start_redis()
local pg = helpers.start_postgres()
print(("redis at %s, postgres on the unix socket in %s\n"):format(srv.url, pg.dir))
print(("%d worker processes sell item stock %d under the lock \"item:<id>\" (ttl %g s);"):format(
  WORKERS, STOCK, TTL))
print(("%d times a holder is frozen for %g s between its read and its write.\n"):format(PAUSES, 3 * TTL))

local results = {}
for _, mode in ipairs({ "fenced", "unfenced" }) do
  local r = run { pg = pg, lock_url = srv.url, case = "inventory", mode = mode, workers = WORKERS,
                  stock = STOCK, pauses = PAUSES, ttl = TTL }
  results[mode] = r
  print(("%-30s %2d orders for %d units, stock now %d: oversold by %d; %d stale writes refused; %.1f s"):format(
    mode == "fenced" and "with fences (last_fence guard):" or "without fences:",
    r.orders, STOCK, r.stock, r.oversold, r.stale, r.seconds))
end

print([[

Without fences, a frozen holder wakes up after its lease ended and another
worker sold units meanwhile; it still writes the stock it computed before the
pause (and its order), so the units sold in between are sold again. With
fences, every read records the lock's fence in items.last_fence and the
write is refused when a newer fence has been seen: the frozen holder's sale
is rolled back, whole. See docs/fencing-postgres.md.]])

pg:stop()
srv:stop()
local ok = results.fenced.oversold == 0 and results.unfenced.oversold > 0
if not ok then
  print(("\nunexpected: %d oversold with fences, %d without (%d and %d pauses landed)"):format(
    results.fenced.oversold, results.unfenced.oversold, results.fenced.pauses, results.unfenced.pauses))
end
os.exit(ok and 0 or 1, true)

-- worker.lua: one process of the torture run (test/torture/run.lua).
--
-- usage: lua worker.lua LOCK_URL RESOURCE_URL MODE DURATION TTL CS_MAX NAME...
-- Loops until DURATION seconds have passed: take one of the lock NAMEs, run
-- a critical section on that name's resource in the resource store, release.
-- MODE "fenced": read with fenced_get and write with fenced_set (the lock's
-- fence guards the resource). MODE "plain": GET, sleep, SET with no fencing:
-- the negative control, which must lose updates when paused past its lease.
-- RESOURCE_URL "postgres:NAME=ITEM,...:CONNINFO": the resource is item ITEM
-- of a PostgreSQL database (run.lua --resource postgres), written through
-- spec/support/pg_fenced.lua: fenced, read_stock then sell_one (VERSION is
-- the order's id, which grows in the order sales are accepted); plain, the
-- same without the fence guard (pg_fenced.unfenced).
-- The critical section sleeps a random time up to CS_MAX seconds between
-- the read and the write. Every event is a line on stdout, flushed at once
-- (the driver reads them while we run), times on CLOCK_MONOTONIC:
--   acq NAME FENCE TOKEN T
--   write NAME FENCE RESULT T        RESULT: ok:VERSION | stale | err:...
--   hold NAME FENCE T_ACQ T_END END LEASE_END LOST_AT REASON
--   fail NAME ERRWORD T
-- END says what ended the hold: release, lost (the report came first) or
-- lease (our lease end came first). LOST_AT is -1 when no loss was reported.
local redislock = require "redislock"
local core = require "redislock.core"
local url = require "redislock.url"

local lock_url, resource_url, mode = arg[1], arg[2], arg[3]
local duration, ttl, cs_max = tonumber(arg[4]), tonumber(arg[5]), tonumber(arg[6])
local names = {}
for i = 7, #arg do names[#names + 1] = arg[i] end

local function log(...)
  io.stdout:write(table.concat({ ... }, " "), "\n")
  io.stdout:flush()
end

local function rand()
  return tonumber(core.token():sub(1, 8), 16) / 4294967296
end

local stop_at = core.monotime() + duration
local client, resource, raw
-- "redlock:URL,URL,...": one lock over those masters
local redlock = lock_url:match("^redlock:(.*)$")
local masters
if redlock then
  masters = {}
  for u in redlock:gmatch("[^,]+") do masters[#masters + 1] = u end
end
while not client and core.monotime() < stop_at do
  client = redislock.connect(masters and { redlock = masters, timeout = 1 } or { url = lock_url, timeout = 1 })
  if not client then core.sleep(0.1) end
end
-- PostgreSQL: the item id of each name, and a connection
local pg_items, conninfo = resource_url:match("^postgres:([^:]*):(.*)$")
local items, db, env, pg_fenced = {}, nil, nil, nil
if pg_items then
  pg_fenced = require "spec.support.pg_fenced"
  for name, id in pg_items:gmatch("([^,=]+)=(%d+)") do items[name] = tonumber(id) end
  env = assert(require("luasql.postgres").postgres())
  db = assert(env:connect(conninfo))
else
  resource = assert(redislock.connect { url = resource_url })
  raw = assert(core.connect(url.parse(resource_url)))
end
assert(client, "never connected")

while core.monotime() < stop_at do
  local name = names[1 + math.floor(rand() * #names)]
  local lost_at, reason = -1, "-"
  local lock, err, kind = client:acquire(name, { ttl = ttl, wait = 2, on_lost = function(_, why)
    lost_at, reason = core.monotime(), why
  end })
  if not lock then
    log("fail", name, ((kind or err:match("^%S+")):gsub(" ", "_")), string.format("%.6f", core.monotime()))
    if kind ~= "timeout" and kind ~= "busy" then core.sleep(0.05) end
  else
    local t_acq = core.monotime()
    local fence = lock.fence or 0   -- (Redlock has none)
    log("acq", name, fence, lock.token, string.format("%.6f", t_acq))
    local res = "res:" .. name
    local result
    if db then
      local sql = mode == "fenced" and pg_fenced or pg_fenced.unfenced
      local function failed(e) return e == "stale" and "stale" or "err:" .. (tostring(e):match("^%S+") or "?") end
      local stock, e = sql.read_stock(db, items[name], fence)
      if stock == nil then
        result = failed(e)
      else
        core.sleep(rand() * cs_max)
        local order
        order, e = sql.sell_one(db, items[name], fence, stock)
        result = order and ("ok:" .. order) or failed(e)
      end
    elseif mode == "fenced" then
      local value, e = resource:fenced_get(res, fence)
      if value == nil then
        result = e == "stale" and "stale" or "err:" .. e:match("^%S+")
      else
        core.sleep(rand() * cs_max)
        local version
        version, e = resource:fenced_set(res, (tonumber(value) or 0) + 1, fence)
        result = version and ("ok:" .. version) or (e == "stale" and "stale" or "err:" .. e:match("^%S+"))
      end
    else
      local value, e = raw:command("GET", res)
      if value == nil then
        result = "err:" .. e:match("^%S+")
      else
        core.sleep(rand() * cs_max)
        local ok
        ok, e = raw:command("SET", res, (tonumber(value) or 0) + 1)
        result = ok and "ok:0" or ("err:" .. e:match("^%S+"))
      end
    end
    log("write", name, fence, result, string.format("%.6f", core.monotime()))
    local t_rel = core.monotime()
    lock:held() -- delivers a pending loss report
    local lease_end = lock:lease_end()
    local t_end, ended = t_rel, "release"
    if lost_at >= 0 and lost_at < t_end then t_end, ended = lost_at, "lost" end
    if lease_end < t_end then t_end, ended = lease_end, "lease" end
    lock:release()
    log("hold", name, fence, string.format("%.6f %.6f", t_acq, t_end), ended,
      string.format("%.6f %.6f", lease_end, lost_at), reason)
  end
end
client:close()
if db then
  db:close()
  env:close()
else
  resource:close()
  raw:close()
end

-- run.lua: the torture run (`make torture`), Jepsen-style on one machine.
--
-- usage: lua test/torture/run.lua [--duration S] [--procs N] [--ttl S]
--                                 [--interval S] [--seed N] [--cs S]
--                                 [--sentinel 1] [--redlock N]
--                                 [--resource redis|postgres]
--
-- --resource postgres: the resource store is a private PostgreSQL cluster
-- (spec/helpers.lua's start_postgres) instead of a redis-server, written
-- through LuaSQL with spec/support/pg_fenced.lua, the code that
-- docs/fencing-postgres.md shows: each name is an item with a large stock;
-- a fenced worker's section is read_stock (SELECT ... FOR UPDATE, and its
-- fence recorded), sleep, sell_one (the guarded write: one unit sold and
-- one order row, or "stale"); a control's is the same without the fence
-- guard. Lost updates are acknowledged sales the stock does not show; a
-- stale write accepted is an order whose fence is below an earlier
-- order's of the same item, read from the orders table itself.
--
-- --redlock N: the locks are Redlock locks over N independent masters; all
-- workers write without fences (Redlock has none), the nemeses kill -9 a
-- master and restart it (empty) after the ttl, as Redlock requires, pause
-- one, flush scripts, kill clients: no hold may overlap at all. A key that
-- vanishes early on one master (early_expiry) is that master forgetting
-- the lock at once, which a holder granted by a bare majority does not
-- survive (a rival gets that master and the one the holder never had):
-- overlaps that begin within a lease of it are counted apart, as for a
-- single Redis. (Restarting at once, or a majority, is the documented
-- unsafe case: spec/20-redlock_spec.lua shows it.)
--
-- --sentinel 1: the locks live on a master with one replica, watched by
-- three sentinels, and the workers find the master through them; the
-- nemeses add SENTINEL FAILOVER, SENTINEL FAILOVER with the old master
-- then SIGSTOPped 2 s (failover_pause), the master SIGSTOPped until
-- Sentinel has failed over by itself (auto_failover), and kill -9 of the
-- master (restarted as a replica), and drop the proxy faults (a proxy
-- cannot follow a failover).
-- Overlaps that begin while a failover is under way (the new master may
-- lack the latest lock, and the old one stays a master until Sentinel
-- demotes it) are counted apart, as for a restart.
--
-- Starts a lock server and a separate resource store (two redis-servers,
-- no persistence, loopback), N worker processes (test/torture/worker.lua),
-- each reaching the lock server through a loopback TCP proxy of its own, and
-- a nemesis that injects one fault every --interval seconds, cycling through
-- every kind in a seeded random order. Afterwards it checks the logs:
--
--   mutex history  per name, no two holds overlap, a hold ending at its
--                  release, at its loss report or at the lease end the
--                  client computed, whichever came first. Overlaps that start
--                  while Redis itself had lost the lock (killed without
--                  persistence, or a key expired early) are counted apart:
--                  a single Redis cannot prevent those, fencing must.
--   fenced set     fenced workers' acknowledged increments all survive
--                  (0 lost updates) and no write with an older fence than an
--                  earlier accepted one was accepted (0 stale writes).
--   control        plain (unfenced) workers, paused mid-section past their
--                  lease, MUST lose updates: proof the checker can fail.
--
-- Prints a report table; exits 0 only if every check holds. Loopback only.
package.path = "./lua/?.lua;./?.lua;" .. package.path
package.cpath = (os.getenv("REDISLOCK_CPATH") or "./?.so") .. ";" .. package.cpath

local helpers = require "spec.helpers"
local core = require "redislock.core"
local url = require "redislock.url"

-- options ----------------------------------------------------------------

local opts = { duration = 30, procs = 8, ttl = 1, interval = 2, seed = os.time(), cs = 0.4, sentinel = 0,
  redlock = 0, resource = "redis" }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(%w+)$")
    local v = arg[i + 1]
    if k == "resource" then
      v = (v == "redis" or v == "postgres") and v or nil
    else
      v = tonumber(v)
    end
    if not k or opts[k] == nil or v == nil then
      io.stderr:write("usage: run.lua [--duration S] [--procs N] [--ttl S] [--interval S] [--seed N] [--cs S]"
        .. " [--sentinel 1] [--redlock N] [--resource redis|postgres]\n")
      os.exit(2)
    end
    opts[k] = v
    i = i + 2
  end
end
math.randomseed(opts.seed)
local TTL = opts.ttl
local CONTROLS = math.max(2, math.floor(opts.procs / 4))
local FENCED_NAMES = { "f1", "f2" }
-- (not `table.unpack and table.unpack(t) or unpack(t)`: and/or keep one value)
local unpack_ = table.unpack or unpack -- luacheck: ignore 143
local CONTROL_NAMES = { "c1" }

local function now() return core.monotime() end
local function say(...) io.stdout:write(string.format(...), "\n") io.stdout:flush() end

-- setup --------------------------------------------------------------------

local SENTINEL = opts.sentinel == 1
local REDLOCK = opts.redlock > 0
local lock_srv, rep, sen, lock_url
local masters = {}
if REDLOCK then
  local urls = {}
  for i = 1, opts.redlock do
    masters[i] = helpers.start_redis()
    urls[i] = masters[i].url
  end
  lock_srv = masters[1]
  lock_url = "redlock:" .. table.concat(urls, ",")
elseif SENTINEL then
  local topology = require "spec.support.topology"
  rep = topology.start_replicated { replicas = 1 }
  sen = topology.start_sentinels { master = rep.master }
  lock_srv = rep.master
  local seeds = {}
  for i, a in ipairs(sen:addrs()) do seeds[i] = a.host .. ":" .. a.port end
  sen.seeds = seeds
  lock_url = "redis+sentinel://" .. table.concat(seeds, ",") .. "/mymaster"
else
  lock_srv = helpers.start_redis { debug = true }
end
-- the resource store: a redis-server, or PostgreSQL with one item per name
local PG = opts.resource == "postgres"
local STOCK = 1000000
local store, store_url, pg, pg_fenced
if PG then
  pg_fenced = require "spec.support.pg_fenced"
  pg = helpers.start_postgres()
  local out, ok = pg:psql(pg_fenced.SCHEMA)
  assert(ok, out)
  local ids = {}
  for i, name in ipairs({ FENCED_NAMES[1], FENCED_NAMES[2], CONTROL_NAMES[1] }) do
    assert(select(2, pg:psql(("INSERT INTO items (id, stock) VALUES (%d, %d)"):format(i, STOCK))))
    ids[#ids + 1] = name .. "=" .. i
  end
  -- postgres:NAME=ITEM,...:CONNINFO (worker.lua)
  store_url = "postgres:" .. table.concat(ids, ",") .. ":" .. pg.conninfo
else
  store = helpers.start_redis()
  store_url = store.url
end
-- the admin connection follows the master too
local function admin_connect()
  if SENTINEL then
    return assert(core.connect { mode = "sentinel", seeds = sen.seeds, master = "mymaster" })
  end
  return assert(core.connect(url.parse(lock_srv.url)))
end
local admin = admin_connect()
local store_conn = store and assert(core.connect(url.parse(store.url)))

-- PostgreSQL: one number from psql
local function pg_number(sql)
  local out, ok = pg:psql(sql)
  assert(ok, out)
  return tonumber(out)
end
local function item_of(name)
  return tonumber(store_url:match("[:,]" .. name .. "=(%d+)"))
end

-- Increments the store shows for `name`: the counter's value, or the
-- units of the item sold.
local function final_value(name, fenced_mode)
  if PG then return STOCK - pg_number("SELECT stock FROM items WHERE id = " .. item_of(name)) end
  if fenced_mode then
    return tonumber(store_conn:command("HGET", "{res:" .. name .. "}:resource", "value") or 0) or 0
  end
  return tonumber(store_conn:command("GET", "res:" .. name) or 0) or 0
end

-- The server object that is the master now (Sentinel: as the sentinels say).
local function master()
  if not SENTINEL then return lock_srv end
  local _, port = sen:master_addr()
  return sen:server_at(nil, port, { rep.master, rep.replicas[1] }) or lock_srv
end

local function start_proxy(listen_port)
  local p = helpers.spawn(helpers.lua_cmd("spec/support/proxy.lua", lock_srv.port, "127.0.0.1", listen_port or 0))
  local port
  assert(helpers.wait_until(function()
    port = tonumber(p:stdout():match("port (%d+)"))
    return port
  end, 5, 0.01), "proxy did not start")
  return p, port
end

local workers = {}
for i = 1, opts.procs do
  local w = { id = i, mode = (i <= CONTROLS or REDLOCK) and "plain" or "fenced" }
  if not SENTINEL and not REDLOCK then w.proxy, w.port = start_proxy() end
  local names = w.mode == "plain" and CONTROL_NAMES or FENCED_NAMES
  w.proc = helpers.spawn(helpers.lua_cmd("test/torture/worker.lua",
    lock_url or "redis://127.0.0.1:" .. w.port, store_url, w.mode, opts.duration, TTL, opts.cs,
    unpack_(names)))
  workers[i] = w
end
say("torture: %d workers (%s), ttl %g s, %g s, a fault every %g s, seed %d%s%s",
  opts.procs, REDLOCK and "none fenced: Redlock has no fences" or
    string.format("%d fenced, %d control", opts.procs - CONTROLS, CONTROLS),
  TTL, opts.duration, opts.interval, opts.seed,
  SENTINEL and ", over Sentinel" or REDLOCK and (", Redlock over " .. opts.redlock .. " masters") or "",
  PG and ", resource store PostgreSQL" or "")

-- the holder of a name right now, from the workers' live logs
local function holder_of(name)
  local token = admin:command("GET", "{" .. name .. "}")
  if not token then return nil end
  for _, w in ipairs(workers) do
    if w.proc:stdout():find(" " .. token .. " ", 1, true) then return w end
  end
end

-- nemeses -----------------------------------------------------------------

local faults = {}           -- kind -> count
local NOT_NOW = {}          -- a nemesis' answer: the world cannot take it yet, draw it again later
local windows = {}          -- periods when Redis itself lost locks: {from, to, name|nil, kind}
local demotions = {}        -- Sentinel: windows open until the old master is demoted

local function count(kind) faults[kind] = (faults[kind] or 0) + 1 end
-- SIGSTOP a process past the ttl (1.5-2.5x), then SIGCONT it.
local function pause(proc, kind)
  proc:kill("STOP")
  helpers.sleep(TTL * (1.5 + math.random()))
  proc:kill("CONT")
  count(kind)
end

local NEMESES = {
  -- a holder paused past its lease (the GC-pause case)
  client_pause = function()
    local w = holder_of(FENCED_NAMES[math.random(#FENCED_NAMES)]) or workers[math.random(#workers)]
    pause(w.proc, "client_pause")
  end,
  -- the same to the unfenced control, caught just after a fresh grant so
  -- the pause lands inside its read-sleep-write: it must lose updates
  control_pause = function()
    local name = CONTROL_NAMES[1]
    local first = admin:command("GET", "{" .. name .. "}")
    local w
    helpers.wait_until(function()
      local token = admin:command("GET", "{" .. name .. "}")
      if token and token ~= first then w = holder_of(name) end
      return w
    end, 3, 0.002)
    if not w then return NOT_NOW end   -- no fresh grant to catch (a failover under way?)
    pause(w.proc, "control_pause")
  end,
  server_kill = function()
    local t = now()
    lock_srv:kill("KILL")
    lock_srv:restart()
    admin:close()
    admin = assert(core.connect(url.parse(lock_srv.url)))
    windows[#windows + 1] = { t, now() + TTL + 0.5, nil, "server_kill" }
    count("server_kill")
  end,
  server_pause = function()
    pause(master(), "server_pause")
  end,
  proxy_hold = function()
    pause(workers[math.random(#workers)].proxy, "proxy_hold")
  end,
  proxy_drop = function()
    local w = workers[math.random(#workers)]
    w.proxy:kill("KILL")
    w.proxy:wait(5)
    helpers.sleep(0.2)
    w.proxy = start_proxy(w.port)
    count("proxy_drop")
  end,
  script_flush = function()
    admin:command("SCRIPT", "FLUSH")
    count("script_flush")
  end,
  client_kill = function()
    -- every normal client but our own admin connection (asked twice: a
    -- failover may have closed the admin connection since its last use)
    local killed = admin:command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
      or admin:command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    assert(killed, "CLIENT KILL failed")
    count("client_kill")
  end,
  -- the key vanishes early, as after a clock jump on the server
  early_expiry = function()
    local name = FENCED_NAMES[math.random(#FENCED_NAMES)]
    local t = now()
    admin:command("PEXPIRE", "{" .. name .. "}", 1)
    windows[#windows + 1] = { t, now() + TTL / 3 + 0.5, name, "early_expiry" }
    count("early_expiry")
  end,
}
if SENTINEL then
  -- a proxy cannot follow a failover; a restart is a failover here
  NEMESES.proxy_hold, NEMESES.proxy_drop, NEMESES.server_kill = nil, nil, nil
  -- The old master stays a master until Sentinel demotes it: overlaps
  -- from the fault until a lease after the demotion are the failover's.
  -- The window stays open while the nemesis goes on; it is closed when
  -- the demotion is seen (or at the end of the run).
  local function until_demoted(old, t, kind)
    local win = { t, math.huge, nil, kind, old = old }
    windows[#windows + 1] = win
    demotions[#demotions + 1] = win
  end
  NEMESES.failover = function()
    local old, t = master(), now()
    sen:failover()
    sen:wait_master_change(old, 20)
    until_demoted(old, t, "failover")
    count("failover")
  end
  -- A master paused past down-after-milliseconds is failed over by the
  -- sentinels, and resumes as a second master until they demote it: when
  -- that happens, it is a failover window like the others.
  NEMESES.server_pause = function()
    local old, t = master(), now()
    pause(old, "server_pause")
    if sen:wait_master_change(old, 5) then until_demoted(old, t, "server_pause") end
  end
  -- Issue 22's other two cases (spec/29-sentinel_failover_spec.lua). Each
  -- needs a replica Sentinel can promote; after a failover the old master
  -- is one only once Sentinel has demoted it (about 10 s) and it synced.
  -- Until then the nemesis answers NOT_NOW: it is drawn again later, and
  -- the other kinds go on meanwhile.
  local topology = require "spec.support.topology"
  local function failover_ready(m)
    local other = m == rep.master and rep.replicas[1] or rep.master
    local i = topology.info(other, "replication")
    if i.role ~= "slave" or tonumber(i.master_port) ~= m.port or i.master_link_status ~= "up" then return false end
    for _, s in ipairs(sen.list) do
      if (s:cli_raw("SENTINEL", "MASTER", sen.name)):match("\nflags\n([^\n]*)") ~= "master" then return false end
      if (s:cli_raw("SENTINEL", "REPLICAS", sen.name)):match("\nflags\n([^\n]*)") ~= "slave" then return false end
    end
    return true
  end
  -- SENTINEL FAILOVER, then the old master SIGSTOPped 2 s as soon as the
  -- sentinels name the new one, and resumed: still a master until demoted
  NEMESES.failover_pause = function()
    local old, t = master(), now()
    if not failover_ready(old) or not sen:failover() then return NOT_NOW end
    -- (Sentinel may still give it up: an aborted failover, say a replica
    -- it judged not good enough after the last fault; then nothing moved,
    -- and the nemesis is drawn again later, as when it was not ready)
    if not sen:wait_master_change(old, 20) then return NOT_NOW end
    old:kill("STOP")
    helpers.sleep(2)
    old:kill("CONT")
    until_demoted(old, t, "failover_pause")
    count("failover_pause")
  end
  -- The master SIGSTOPped past down-after-milliseconds until the sentinels
  -- have failed over by themselves (8 s at most), then resumed: a second
  -- master until they demote it. No failover seen by 5 s after the resume:
  -- it was only a server pause (its leases expire at once on resume, as
  -- server_pause's), not counted.
  NEMESES.auto_failover = function()
    local old, t = master(), now()
    if not failover_ready(old) then return NOT_NOW end
    old:kill("STOP")
    local ok, moved = pcall(sen.wait_master_change, sen, old, 8)
    old:kill("CONT")
    assert(ok, moved)
    if not moved and not sen:wait_master_change(old, 5) then return NOT_NOW end
    until_demoted(old, t, "auto_failover")
    count("auto_failover")
  end
  -- kill -9 of the master; it comes back (empty: no persistence) and
  -- Sentinel makes it a replica of the new master
  NEMESES.master_kill = function()
    local old, t = master(), now()
    old:kill("KILL")
    sen:wait_master_change(old, 20)
    old:restart()
    until_demoted(old, t, "master_kill")
    count("master_kill")
  end
end
if REDLOCK then
  -- one master at a time; the others keep a majority
  local function one() return masters[math.random(#masters)] end
  NEMESES = {
    client_pause = NEMESES.client_pause,
    control_pause = NEMESES.control_pause,
    -- kill -9, and back (empty) only after the ttl: the delayed restart
    -- Redlock's safety needs (a holder's lease has ended by then, or it
    -- still has a majority without this master)
    master_restart = function()
      local m = one()
      m:kill("KILL")
      helpers.sleep(TTL + 0.1)
      m:restart()
      count("master_restart")
    end,
    master_pause = function() pause(one(), "master_pause") end,
    script_flush = function()
      for _, m in ipairs(masters) do m:cli_raw("SCRIPT", "FLUSH") end
      count("script_flush")
    end,
    client_kill = function()
      one():cli_raw("CLIENT", "KILL", "TYPE", "normal")
      count("client_kill")
    end,
    -- the lock's key vanishes on one master (Redlock workers take the
    -- control names only)
    early_expiry = function()
      local name = CONTROL_NAMES[math.random(#CONTROL_NAMES)]
      local t = now()
      one():cli_raw("PEXPIRE", "{" .. name .. "}", 1)
      windows[#windows + 1] = { t, now() + TTL + 0.5, name, "early_expiry" }
      count("early_expiry")
    end,
  }
end
local KINDS = {}
for k in pairs(NEMESES) do KINDS[#KINDS + 1] = k end
table.sort(KINDS)

-- Closes the failover windows whose old master Sentinel has demoted (one
-- never demoted stays open to the end).
local function close_demotions()
  for i = #demotions, 1, -1 do
    local win = demotions[i]
    if (win.old:cli_raw("ROLE")):find("^slave") then
      win[2] = now() + TTL + 0.5
      table.remove(demotions, i)
    end
  end
end

local t_start = now()
local order = {}
-- sleeps `seconds`, closing demoted failover windows as it goes
local function nap(seconds)
  local until_t = now() + seconds
  while now() < until_t do
    helpers.sleep(math.min(0.1, until_t - now()))
    close_demotions()
  end
end

while now() - t_start < opts.duration - opts.interval do
  nap(opts.interval * (0.75 + 0.5 * math.random()))
  if #order == 0 then
    for i, k in ipairs(KINDS) do order[i] = k end
    for i = #order, 2, -1 do
      local j = math.random(i)
      order[i], order[j] = order[j], order[i]
    end
  end
  local kind = table.remove(order)
  local ok, err = pcall(NEMESES[kind])
  if not ok then
    say("nemesis %s failed: %s", kind, tostring(err))
  elseif err == NOT_NOW then
    table.insert(order, 1, kind)   -- drawn again after the others of this round
  end
  close_demotions()
end

-- (the workers run to the end of the duration: keep watching demotions)
if #demotions > 0 then nap(math.max(0, opts.duration + 1 - (now() - t_start))) end

-- collect ------------------------------------------------------------------

local holds, writes, acquisitions, failures = {}, {}, 0, 0
local losses = {}      -- reason -> { count, margins... }
for _, w in ipairs(workers) do
  local code = w.proc:wait(opts.duration + 30)
  if code ~= 0 then say("worker %d exited %s: %s", w.id, tostring(code), w.proc:stderr()) end
  for line in w.proc:stdout():gmatch("[^\n]+") do
    local kind = line:match("^(%S+)")
    if kind == "acq" then
      acquisitions = acquisitions + 1
    elseif kind == "fail" then
      failures = failures + 1
    elseif kind == "write" then
      local name, fence, result = line:match("^write (%S+) (%d+) (%S+)")
      writes[#writes + 1] = { name = name, fence = tonumber(fence), result = result, mode = w.mode }
    elseif kind == "hold" then
      local name, fence, t0, t1, ended, lease_end, lost_at, reason =
        line:match("^hold (%S+) (%d+) (%S+) (%S+) (%S+) (%S+) (%S+) (.+)$")
      holds[#holds + 1] = { name = name, fence = tonumber(fence), t0 = tonumber(t0), t1 = tonumber(t1),
        worker = w.id, mode = w.mode }
      if tonumber(lost_at) >= 0 then
        local l = losses[reason] or { n = 0, margins = {} }
        l.n = l.n + 1
        l.margins[#l.margins + 1] = tonumber(lease_end) - tonumber(lost_at)
        losses[reason] = l
      end
      if ended == "lease" and tonumber(lost_at) < 0 then
        local l = losses["(lease end, no report yet)"] or { n = 0, margins = {} }
        l.n = l.n + 1
        losses["(lease end, no report yet)"] = l
      end
    end
  end
  if w.proxy then w.proxy:stop() end
end

-- check: mutex history -------------------------------------------------------

local function in_window(t, name)
  for _, win in ipairs(windows) do
    if t >= win[1] and t <= win[2] and (win[3] == nil or win[3] == name) then return win[4] end
  end
end

if os.getenv("TORTURE_DEBUG") then
  for _, win in ipairs(windows) do
    say("window %s: +%.3f .. +%.3f s", win[4], win[1] - t_start, win[2] - t_start)
  end
end
local overlaps, expected_overlaps = 0, {}
local by_name = {}
for _, h in ipairs(holds) do
  by_name[h.name] = by_name[h.name] or {}
  table.insert(by_name[h.name], h)
end
for name, list in pairs(by_name) do
  table.sort(list, function(a, b) return a.t0 < b.t0 end)
  local last_end, last = -math.huge, nil
  for _, h in ipairs(list) do
    if h.t0 < last_end then
      local why = in_window(h.t0, name)
      if why then
        expected_overlaps[why] = (expected_overlaps[why] or 0) + 1
        if os.getenv("TORTURE_DEBUG") then
          say("expected overlap (%s) on %s: fence %d (w%d) [%.3f, %.3f] vs fence %d (w%d) [%.3f, %.3f]",
            why, name, h.fence, h.worker, h.t0, h.t1, last.fence, last.worker, last.t0, last.t1)
        end
      else
        overlaps = overlaps + 1
        say("OVERLAP on %s: fence %d (worker %d) began %.3f ms before fence %d (worker %d) ended (at +%.3f s)",
          name, h.fence, h.worker, (last_end - h.t0) * 1000, last.fence, last.worker, h.t0 - t_start)
      end
    end
    if h.t1 > last_end then last_end, last = h.t1, h end
  end
end

-- check: fenced set and control -------------------------------------------------

local acked = { fenced = {}, plain = {} }
local stale_rejected, write_errors = 0, 0
local versions = {}
for _, w in ipairs(writes) do
  local version = w.result:match("^ok:(%d+)")
  if version then
    acked[w.mode][w.name] = (acked[w.mode][w.name] or 0) + 1
    if w.mode == "fenced" then
      versions[w.name] = versions[w.name] or {}
      table.insert(versions[w.name], { tonumber(version), w.fence })
    end
  elseif w.result == "stale" then
    stale_rejected = stale_rejected + 1
  else
    write_errors = write_errors + 1
  end
end

local lost_fenced, stale_accepted, lost_control = 0, 0, 0
for _, name in ipairs(FENCED_NAMES) do
  lost_fenced = lost_fenced + (acked.fenced[name] or 0) - final_value(name, true)
  local list = versions[name] or {}
  table.sort(list, function(a, b) return a[1] < b[1] end)
  local newest = 0
  for _, v in ipairs(list) do
    if v[2] < newest then stale_accepted = stale_accepted + 1 end
    newest = math.max(newest, v[2])
  end
end
-- PostgreSQL: the same from the table itself, where a write the log missed
-- shows too: orders (in the order they were accepted) whose fence is below
-- an earlier order's of the same item. The control's count shows the query
-- sees them.
local function stale_in_table(names)
  local ids = {}
  for i, name in ipairs(names) do ids[i] = item_of(name) end
  return pg_number(("SELECT count(*) FROM (SELECT fence < max(fence) OVER (PARTITION BY item_id ORDER BY id"
    .. " ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS stale FROM orders WHERE item_id IN (%s)) AS o"
    .. " WHERE stale"):format(table.concat(ids, ", ")))
end
if PG then stale_accepted = math.max(stale_accepted, stale_in_table(FENCED_NAMES)) end
for _, name in ipairs(CONTROL_NAMES) do
  lost_control = lost_control + (acked.plain[name] or 0) - final_value(name, false)
end

-- report --------------------------------------------------------------------

local elapsed = now() - t_start
local rows = {}
local function row(k, v) rows[#rows + 1] = string.format("  %-44s %s", k, tostring(v)) end
row("resource store", PG and "PostgreSQL (orders in a table, fence in a bigint column)" or "redis-server")
row("duration (s)", string.format("%.1f", elapsed))
row("acquisitions", acquisitions)
row("acquire failures (timeout, busy, connection)", failures)
row("operations per second", string.format("%.0f", (acquisitions + #writes) / elapsed))
local fault_total = 0
for _, k in ipairs(KINDS) do
  row("fault: " .. k, faults[k] or 0)
  fault_total = fault_total + (faults[k] or 0)
end
row("holds checked", #holds)
row("overlaps (a single healthy Redis: must be 0)", overlaps)
for _, k in ipairs(SENTINEL and { "failover", "failover_pause", "auto_failover", "master_kill", "server_pause",
  "early_expiry" }
  or { "server_kill", "early_expiry" }) do
  row("holds overlapping while Redis had lost it: " .. k, expected_overlaps[k] or 0)
end
row("fenced: acknowledged writes", (acked.fenced.f1 or 0) + (acked.fenced.f2 or 0))
row("fenced: lost updates (must be 0)", lost_fenced)
row("fenced: stale writes accepted (must be 0)", stale_accepted)
row("fenced: stale writes rejected", stale_rejected)
row("write errors (connection)", write_errors)
row("control (no fencing): acknowledged writes", acked.plain.c1 or 0)
row("control: lost updates (must be > 0)", lost_control)
if PG then row("control: stale writes accepted (orders table)", stale_in_table(CONTROL_NAMES)) end
local reasons = {}
for r in pairs(losses) do reasons[#reasons + 1] = r end
table.sort(reasons)
for _, r in ipairs(reasons) do
  local l = losses[r]
  local detail = ""
  if #l.margins > 0 then
    table.sort(l.margins)
    detail = string.format(" (%.0f ms median, %.0f ms min before the lease end%s)",
      l.margins[math.ceil(#l.margins / 2)] * 1000, l.margins[1] * 1000,
      l.margins[1] < 0 and "; negative: delivered after it, the process being paused or blocked" or "")
  end
  row("losses reported: " .. r, l.n .. detail)
end
say("\n%s\n", table.concat(rows, "\n"))
if (faults.server_kill or 0) > 0 then
  say("note: kill -9 of a Redis without persistence forgets every lock: a second holder")
  say("      can be granted before the first learns it at its next renewal. Those overlaps")
  say("      are a single Redis' limit. The fence counter, lost too, restarts from the")
  say("      server's clock, above every fence handed out, so the fenced resource still")
  say("      refused the old holder's writes.")
end

local ok = overlaps == 0 and lost_fenced == 0 and stale_accepted == 0 and lost_control > 0
  and fault_total >= #KINDS and acquisitions > 0
for _, k in ipairs(KINDS) do ok = ok and (faults[k] or 0) > 0 end
say("torture: %s", ok and "PASS" or "FAIL")

admin:close()
if store_conn then store_conn:close() end
if REDLOCK then
  for _, m in ipairs(masters) do m:kill("CONT") m:stop() end
elseif SENTINEL then
  sen:stop()
  rep:stop()
else
  lock_srv:stop()
end
if store then store:stop() end
if pg then pg:stop() end
os.exit(ok and 0 or 1, true)   -- true: close the state, so stop_all runs

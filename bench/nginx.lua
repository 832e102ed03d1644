--[[
bench/nginx.lua -- a lock per HTTP request inside nginx: redislock's
cosocket transport against a lock written by hand with lua-resty-redis,
under wrk, in one run.

run from the repo root, after `make -s build/luajit/redislock/core.so`
(make bench builds it):
  lua5.4 bench/nginx.lua [SECONDS]          (make bench runs it too)
  BENCH_ROUNDS=N lua5.4 bench/nginx.lua     rounds (default 3)

Starts a throwaway redis-server (spec/helpers.lua) and two nginx (Debian's
nginx with libnginx-mod-http-lua, LuaJIT), one with 1 worker and one with 2,
each serving bench/nginx_app.lua's two locations on the checkout's lua/ and
the LuaJIT core without test hooks (build/luajit/redislock/core.so):

  redislock   /rl/NAME: client:acquire(NAME, {ttl = 10}) + lock:release(),
              transport = "cosocket", everything else the defaults
  hand        /hand/NAME: lua-resty-redis, SET NX PX + an EVAL
              compare-and-delete, set_keepalive(10000, 100)

A cell is a worker count (1, 2) and a wrk connection count (-c16, -c64;
wrk -t1, keep-alive). Every request asks for a name never asked for
before. Each round runs every cell, both sides back to back (the side that
goes first alternates by round), SECONDS (5) each after a warm-up of every
side and nginx; the database is flushed before each run (untimed), so each
run starts from the same Redis.

Per cell and side: requests/s and wrk's p99 (the median over rounds, and
the range), then per request as the server counts it over the run: the
commands Redis ran (those inside scripts too), the round trips
(bench/lib.lua: reads off client sockets), the connections made, the bytes
read and written by Redis, the keys left behind, redis-server's CPU (its
main thread) and nginx's (its workers). The ratios are redislock's over
hand's of the same round, adjacent in time: their median, and the range.
The load average is printed at every round. Nothing here is a test: the
exit status is non-zero only when a request failed (any answer but 200).
]]
package.path = "./lua/?.lua;./?.lua;" .. package.path
package.cpath = "./?.so;" .. package.cpath

local helpers = require "spec.helpers"
local ngx_host = require "spec.support.nginx"
local lib = require "bench.lib"
local core = require "redislock.core"
local url_fields = require "redislock.url"

local SECONDS = tonumber(arg and arg[1]) or 5
local ROUNDS = math.max(1, tonumber(os.getenv("BENCH_ROUNDS")) or 3)
local WARMUP_SECONDS = 2
local CORE = "build/luajit/redislock/core.so"
local WORKERS = { 1, 2 }
local CONNS = { 16, 64 }
local SIDES = {
  { name = "redislock", path = "/rl/" },
  { name = "hand", path = "/hand/" },
}
local printf, quote = lib.printf, helpers.quote
local ROOT = ngx_host.ROOT

-- nginx.conf for `workers` workers on `port` (bench/nginx_app.lua's
-- locations; the app reaches Redis at srv).
local function conf(dir, port, workers, srv)
  return ([[
master_process on;
worker_processes %d;
load_module %s/ndk_http_module.so;
load_module %s/ngx_http_lua_module.so;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 100000000;
  client_body_temp_path %s/tmp;
  proxy_temp_path %s/tmp;
  fastcgi_temp_path %s/tmp;
  uwsgi_temp_path %s/tmp;
  scgi_temp_path %s/tmp;
  lua_package_path "%s/lua/?.lua;%s/?.lua;;";
  lua_package_cpath "%s/build/luajit/?.so;;";
  init_by_lua_block {
    require("bench.nginx_app").setup { host = %q, port = %d }
  }
  server {
    listen 127.0.0.1:%d backlog=1024;
    location /rl/ { content_by_lua_block { require("bench.nginx_app").redislock(ngx.var.uri:sub(5)) } }
    location /hand/ { content_by_lua_block { require("bench.nginx_app").hand(ngx.var.uri:sub(7)) } }
  }
}
]]):format(workers, ngx_host.MODULES, ngx_host.MODULES, dir, dir, dir, dir, dir, ROOT, ROOT, ROOT, srv.host,
    srv.port, port)
end

-- Starts nginx with `workers` workers: { n = ngx_host's, workers, pids }.
local function start_nginx(workers, srv)
  local n = ngx_host.start {
    conf = function(port, dir) return conf(dir, port, workers, srv) end,
    ready = "/nothing",
  }
  local pids = {}
  helpers.wait_until(function()
    pids = {}
    for pid in helpers.sh("ps -o pid= --ppid " .. n.pid):gmatch("%d+") do pids[#pids + 1] = pid end
    return #pids == workers
  end, 5, 0.05)
  return { n = n, workers = workers, pids = pids }
end

local function workers_cpu(ng)
  local s = 0
  for _, pid in ipairs(ng.pids) do s = s + (lib.process_cpu_s(pid) or 0) end
  return s
end

local run_id = 0

-- One wrk run of `seconds` against side's location: wrk's line as fields.
local function wrk(ng, side, conns, seconds)
  run_id = run_id + 1
  local out, code = helpers.sh(("wrk -t1 -c%d -d%ds -s bench/nginx_wrk.lua %s -- %s %s 2>&1"):format(conns,
    seconds, quote(ng.n.base), side.path, quote(("r%d-"):format(run_id))))
  local line = out:match("wrk (requests=[^\n]+)")
  if code ~= 0 or not line then error("wrk failed (" .. tostring(code) .. "):\n" .. out, 0) end
  return lib.fields(line)
end

local failed = false

-- One measured run: a flushed database, then wrk, with the server's counts.
local function run(raw, srv, ng, side, conns)
  assert(raw:command("FLUSHALL"))
  local before = lib.info(raw, "stats", "commandstats")
  local srv_ns0, ngx_s0 = lib.thread_cpu_ns(srv.pid), workers_cpu(ng)
  local w = wrk(ng, side, conns, SECONDS)
  local srv_ns, ngx_s = lib.thread_cpu_ns(srv.pid) - srv_ns0, workers_cpu(ng) - ngx_s0
  local after = lib.info(raw, "stats", "commandstats")
  local keys = assert(raw:command("DBSIZE"))
  local info_calls = (after.calls.info or 0) - (before.calls.info or 0)
  local rt, conns_made = lib.round_trips(before, after)
  local n = w.requests
  if w.errors > 0 or n == 0 then
    failed = true
    printf("  ! %s -c%d, %d workers: %d errors in %d requests (%d not 200): see %s/error.log\n", side.name, conns,
      ng.workers, w.errors, n, w.status, ng.n.dir)
  end
  n = math.max(n, 1)
  return {
    rate = w.requests / (w.duration_us / 1e6),
    p50 = w.p50_us / 1000,
    p99 = w.p99_us / 1000,
    cmds = (after.total_commands_processed - before.total_commands_processed - info_calls) / n,
    rt = rt / n,
    conns = conns_made / n,
    bytes_in = (after.total_net_input_bytes - before.total_net_input_bytes) / n,
    bytes_out = (after.total_net_output_bytes - before.total_net_output_bytes) / n,
    keys = keys / n,
    srv_us = srv_ns / 1000 / n,
    ngx_us = ngx_s * 1e6 / n,
    calls = lib.diff_calls(before, after),
    requests = w.requests,
  }
end

local function median(list)
  local s = {}
  for i, x in ipairs(list) do s[i] = x end
  table.sort(s)
  local k = #s
  if k == 0 then return nil end
  if k % 2 == 1 then return s[(k + 1) / 2] end
  return (s[k / 2] + s[k / 2 + 1]) / 2
end

local function field(runs, name)
  local t = {}
  for i, r in ipairs(runs) do t[i] = r[name] end
  return t
end

-- The ratio of redislock's field over hand's, round by round.
local function ratios(cell, name)
  local t = {}
  for i, r in ipairs(cell.redislock) do
    local h = cell.hand[i]
    if h and h[name] > 0 then t[#t + 1] = r[name] / h[name] end
  end
  return t
end

local function cell_key(workers, conns) return workers .. "w-c" .. conns end

-- The commands Redis ran per request, by name, for a side's runs.
local function calls_line(runs)
  local sum, n = {}, 0
  for _, r in ipairs(runs) do
    n = n + r.requests
    for cmd, k in pairs(r.calls) do if cmd ~= "info" and cmd ~= "flushall" then sum[cmd] = (sum[cmd] or 0) + k end end
  end
  local names = {}
  for cmd in pairs(sum) do names[#names + 1] = cmd end
  table.sort(names)
  local parts = {}
  for _, cmd in ipairs(names) do parts[#parts + 1] = ("%s %.2f"):format(cmd, sum[cmd] / math.max(n, 1)) end
  return table.concat(parts, ", ")
end

local function report(cells)
  printf("\n%-7s %-10s %9s %-15s %8s %6s %5s %6s %7s %7s %5s %7s %7s\n", "cell", "side", "req/s", "(range)",
    "p99 ms", "cmds", "rt", "conns", "B in", "B out", "keys", "srv us", "ngx us")
  for _, w in ipairs(WORKERS) do
    for _, c in ipairs(CONNS) do
      local cell = cells[cell_key(w, c)]
      for _, side in ipairs(SIDES) do
        local runs = cell[side.name]
        local m = function(name) return median(field(runs, name)) end
        printf("%-7s %-10s %9.0f %-15s %8.2f %6.2f %5.2f %6.3f %7.0f %7.0f %5.2f %7.1f %7.1f\n", cell_key(w, c),
          side.name, m("rate"), "(" .. lib.range(field(runs, "rate"), "%.0f") .. ")", m("p99"), m("cmds"), m("rt"),
          m("conns"), m("bytes_in"), m("bytes_out"), m("keys"), m("srv_us"), m("ngx_us"))
      end
    end
  end
  printf("\nredislock / hand, round by round (median, range); target: req/s >= 0.90x, p99 <= 1.20x\n")
  printf("%-7s %-22s %-22s %-16s %-16s\n", "cell", "req/s", "p99", "srv CPU/req", "nginx CPU/req")
  for _, w in ipairs(WORKERS) do
    for _, c in ipairs(CONNS) do
      local cell = cells[cell_key(w, c)]
      local function r(name)
        local t = ratios(cell, name)
        return ("%.2fx (%s)"):format(median(t) or 0, lib.range(t))
      end
      printf("%-7s %-22s %-22s %-16s %-16s\n", cell_key(w, c), r("rate"), r("p99"), r("srv_us"), r("ngx_us"))
    end
  end
  printf("\ncommands Redis ran per request (every cell):\n")
  for _, side in ipairs(SIDES) do
    local all = {}
    for _, cell in pairs(cells) do for _, x in ipairs(cell[side.name]) do all[#all + 1] = x end end
    printf("  %-10s %s\n", side.name, calls_line(all))
  end
end

local function check_tools()
  local f = io.open(CORE, "rb")
  if not f then error(CORE .. " not found: run `make -s " .. CORE .. "` first (from the repo root)", 0) end
  f:close()
  for _, tool in ipairs({ "wrk", "nginx" }) do
    local _, code = helpers.sh("command -v " .. tool .. " >/dev/null 2>&1")
    if code ~= 0 then error(tool .. " is not installed (make bench installs it)", 0) end
  end
end

local function main()
  check_tools()
  local srv = helpers.start_redis()
  local raw = assert(core.connect(url_fields.parse(srv.url)))
  local version = assert(raw:command("INFO", "server")):match("redis_version:([%w%.]+)")
  local nginxes = {}
  for _, w in ipairs(WORKERS) do nginxes[w] = start_nginx(w, srv) end
  printf("redis-server %s at %s; nginx %s; wrk -t1, %d s per run, %d rounds, every request a new name\n",
    version or "?", srv.url, (helpers.sh("nginx -v 2>&1"):match("nginx/([%d%.]+)") or "?"), SECONDS, ROUNDS)
  printf("load average before: %s (2 cores here, shared: anything else running skews the numbers)\n",
    lib.loadavg())
  for _, w in ipairs(WORKERS) do
    for _, side in ipairs(SIDES) do wrk(nginxes[w], side, 16, WARMUP_SECONDS) end
  end
  local cells = {}
  for _, w in ipairs(WORKERS) do
    for _, c in ipairs(CONNS) do cells[cell_key(w, c)] = { redislock = {}, hand = {} } end
  end
  for round = 1, ROUNDS do
    for _, w in ipairs(WORKERS) do
      for _, c in ipairs(CONNS) do
        local order = round % 2 == 1 and { SIDES[1], SIDES[2] } or { SIDES[2], SIDES[1] }
        for _, side in ipairs(order) do
          local list = cells[cell_key(w, c)][side.name]
          list[#list + 1] = run(raw, srv, nginxes[w], side, c)
        end
      end
    end
    printf("round %d done, load average %s\n", round, lib.loadavg())
  end
  report(cells)
  printf("\nload average after: %s\n", lib.loadavg())
  for _, ng in pairs(nginxes) do ng.n:stop() end
  raw:close()
  srv:stop()
end

local ok, err = pcall(main)
helpers.stop_all()
if not ok then
  io.stderr:write("bench/nginx.lua: ", tostring(err), "\n")
  os.exit(1)
end
os.exit(failed and 1 or 0)

--[[
bench/lib.lua -- what the benchmarks share: output, percentiles, building a C
baseline, and counting round trips the way the server sees them.

Round trips: every request a client sends costs the server one read (a
pipeline that arrives together is one read), a BLPOP wakeup costs none, and
neither do commands run inside a script. So over a run,

  round trips = d total_reads_processed      requests read off client sockets
              - d total_connections_received one EOF read per closed connection
              - d cmdstat_info               the benchmark's own INFO commands

taken on the benchmark's own connection before the clients start and after
they have all gone (connected_clients back to 1). See bench/README.md.
]]
local helpers = require "spec.helpers"

local M = {}

function M.printf(fmt, ...) io.stdout:write(fmt:format(...)) io.stdout:flush() end

-- Nearest-rank percentile of a sorted list; nil when empty.
function M.percentile(sorted, p)
  local n = #sorted
  if n == 0 then return nil end
  local rank = math.max(1, math.ceil(p * n))
  return sorted[math.min(rank, n)]
end

function M.ms(x) return x and string.format("%.3f", x) or "-" end

function M.ratio(a, b) return (a and b and b > 0) and string.format("%.2fx", a / b) or "-" end

function M.loadavg()
  local f = io.open("/proc/loadavg", "r")
  if not f then return "?" end
  local s = f:read("l") or "?"
  f:close()
  return (s:match("^(%S+ %S+ %S+)")) or s
end

-- A worker's "key=value ..." line as a table (numbers where they read as one).
function M.fields(line)
  local t = {}
  for k, v in line:gmatch("([%w_]+)=(%S+)") do t[k] = tonumber(v) or v end
  return t
end

--- bench/hold_worker.lua "passes" MODE URL N TTL PERIODS SERVER_PID
-- [SERVER_URL], on CPU `cpu`, summed up as bench/renew.lua reports a
-- variant: { rate (renewals/s, the median pass), ms (to renew all n), rt
-- (round trips per n), client_us, server_us (CPU per renewal), passes (per
-- period) }, or nil and why it failed.
function M.watchdog_passes(cpu, url, n, ttl, periods, srv_pid, srv_url)
  local p = helpers.spawn("taskset -c " .. cpu .. " " ..
    helpers.lua_cmd("bench/hold_worker.lua", "passes", url, n, ttl, periods, srv_pid, srv_url))
  local code = p:wait(120 + 10 * ttl)
  local out, err = p:stdout(), p:stderr()
  p:stop()
  local w = M.fields(out:match("window ([^\n]+)") or "")
  local passes = {}
  for rest in out:gmatch("pass ([^\n]+)") do passes[#passes + 1] = M.fields(rest) end
  if code ~= 0 or not w.renewals then return nil, ("exited %s: %s"):format(tostring(code), err:sub(1, 300)) end
  local ren, wd_cpu, srv_cpu = 0, 0, 0
  for _, x in ipairs(passes) do
    ren, wd_cpu, srv_cpu = ren + x.renewals, wd_cpu + x.cpu_s, srv_cpu + x.srv_cpu_s
    x.rate = x.renewals / x.seconds
  end
  if ren == 0 or w.failures > 0 then
    return nil, ("%d passes, %d renewals, %d failures"):format(#passes, ren, w.failures)
  end
  table.sort(passes, function(a, b) return a.rate < b.rate end)
  local rate = passes[math.ceil(#passes / 2)].rate   -- the median pass
  return { rate = rate, ms = n / rate * 1000, rt = w.pipelines / w.renewals * n, client_us = wd_cpu / ren * 1e6,
           server_us = srv_cpu / ren * 1e6, passes = #passes / w.periods }
end

-- Builds a C baseline on hiredis into bench/out/.
function M.build_c(src, bin)
  local out, code = helpers.sh("mkdir -p bench/out && cc -O2 -Wall -Wextra " ..
    "$(pkg-config --cflags hiredis) " .. src .. " $(pkg-config --libs hiredis) -o " .. bin .. " 2>&1")
  if code ~= 0 then error("building " .. bin .. " failed:\n" .. out, 0) end
end

-- INFO sections as { field = number, calls = { command = calls },
-- usec = { command = usec }, failed = { command = rejected + failed calls } }.
-- A script's redis.call()s are counted (calls and usec) under their own
-- commands too, and inside the script's usec.
function M.info(raw, ...)
  local text = assert(raw:command("INFO", ...))
  local t = { calls = {}, usec = {}, failed = {} }
  for line in text:gmatch("[^\r\n]+") do
    local cmd, calls, usec = line:match("^cmdstat_([^:]+):calls=(%d+),usec=(%d+)")
    if cmd then
      t.calls[cmd] = tonumber(calls)
      t.usec[cmd] = tonumber(usec)
      t.failed[cmd] = (tonumber(line:match("rejected_calls=(%d+)")) or 0) +
        (tonumber(line:match("failed_calls=(%d+)")) or 0)
    else
      local k, v = line:match("^([%w_]+):(%d+)$")
      if k then t[k] = tonumber(v) end
    end
  end
  return t
end

function M.snapshot(raw)
  return M.info(raw, "stats", "commandstats")
end

-- Waits until only our own connection is left, so that the EOF of every
-- client connection has been read before the closing snapshot.
function M.wait_clients_gone(raw)
  return helpers.wait_until(function()
    return M.info(raw, "clients").connected_clients == 1
  end, 5, 0.01)
end

-- Calls per command between two snapshots (INFO itself included).
function M.diff_calls(before, after)
  local d = {}
  for cmd, n in pairs(after.calls) do
    local delta = n - (before.calls[cmd] or 0)
    if delta > 0 then d[cmd] = delta end
  end
  return d
end

-- Round trips between two snapshots, and the connections made meanwhile.
-- INFO is counted in commandstats after it runs and in total_reads_processed
-- when it is read: the delta of cmdstat_info (the opening INFO and any polls)
-- equals the INFO reads in the delta (the polls and the closing INFO).
function M.round_trips(before, after)
  local info_reads = M.diff_calls(before, after).info or 0
  local reads = after.total_reads_processed - before.total_reads_processed
  local conns = after.total_connections_received - before.total_connections_received
  return reads - conns - info_reads, conns
end

-- On-CPU time of one thread in nanoseconds (/proc/PID/task/TID/schedstat,
-- field 1: exact, where /proc/PID/stat counts 10 ms clock ticks). TID
-- defaults to PID, the main thread (for redis-server: the one that runs
-- every command). nil when the thread is gone.
function M.thread_cpu_ns(pid, tid)
  local f = io.open(("/proc/%s/task/%s/schedstat"):format(pid, tid or pid), "r")
  if not f then return nil end
  local s = f:read("l")
  f:close()
  return s and tonumber(s:match("^(%d+)"))
end

-- utime + stime of a whole process (every thread) in seconds, from
-- /proc/PID/stat (fields 14 and 15, clock ticks of 1/100 s: Linux's USER_HZ).
function M.process_cpu_s(pid)
  local f = io.open(("/proc/%s/stat"):format(pid or "self"), "r")
  if not f then return nil end
  local s = f:read("l")
  f:close()
  -- comm (field 2) may hold spaces and parens: count from the last ") "
  local rest = s and s:match(".*%) (.*)$")
  if not rest then return nil end
  local fields = {}
  for x in rest:gmatch("%S+") do fields[#fields + 1] = x end
  -- rest starts at field 3 (state): utime is field 14, stime 15
  return (tonumber(fields[12]) + tonumber(fields[13])) / 100
end

-- "lo-hi" of a list of numbers formatted with fmt, or the one value.
function M.range(list, fmt)
  fmt = fmt or "%.2f"
  if #list == 0 then return "-" end
  local lo, hi = math.huge, -math.huge
  for _, x in ipairs(list) do lo, hi = math.min(lo, x), math.max(hi, x) end
  local a, b = fmt:format(lo), fmt:format(hi)
  return a == b and a or (a .. "-" .. b)
end

return M

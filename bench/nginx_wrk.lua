--[[
bench/nginx_wrk.lua -- wrk's script for bench/nginx.lua: every request a
name never asked for before, and one line of results at the end.

  wrk -t1 -cN -dS -s bench/nginx_wrk.lua URL -- PATH PREFIX
    GET PATH .. PREFIX .. <thread>-<n> for n = 1, 2, ...

done() prints "wrk requests=... duration_us=... p50_us=... p99_us=...
max_us=... errors=..." (errors: wrk's connect, read, write, timeout and
non-2xx counts summed; status: the non-2xx alone).
]]
-- luacheck: globals wrk setup init request done id

local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end

local path, n = "/", 0

function init(args)
  path = (args[1] or "/") .. (args[2] or "") .. tostring(id or 1) .. "-"
end

function request()
  n = n + 1
  return wrk.format(nil, path .. n)
end

function done(summary, latency)
  local e = summary.errors
  io.write(string.format("wrk requests=%d duration_us=%d p50_us=%d p99_us=%d max_us=%d errors=%d status=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.max,
    e.connect + e.read + e.write + e.timeout + e.status, e.status))
end

--[[
bench/nginx_app.lua -- the two locations bench/nginx.lua puts under wrk,
loaded inside nginx (its Lua module, LuaJIT): each request takes a lock on
a name nobody took before and releases it at once.

  /rl/NAME    redislock over its cosocket transport, defaults throughout:
              client:acquire(NAME, { ttl = 10 }) then lock:release()
              (a fence drawn, the holder recorded, the watchdog on)
  /hand/NAME  what OpenResty users write today with lua-resty-redis
              (Debian's lua-nginx-redis): SET key token NX PX 10000, then
              a compare-and-delete by EVAL; the connection back to the
              pool as its README shows (set_keepalive(10000, 100))

A failure answers 500 and logs why (wrk counts it; bench/nginx.lua fails
the run). init_by_lua calls setup{ host =, port = } in the master;
each worker makes its redislock client at its first request (never in the
master: docs/nginx.md).
]]
local redislock = require "redislock"
local ok_resty, redis = pcall(require, "resty.redis")
if not ok_resty then redis = require "nginx.redis" end

local _M = {}

local HOST, PORT
local TTL_MS = 10000
local UNLOCK = 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end'

local client

--- The Redis address, from init_by_lua (the master).
function _M.setup(opts)
  HOST, PORT = opts.host, opts.port
end

local function fail(what, err)
  ngx.log(ngx.ERR, what, ": ", tostring(err))
  return ngx.exit(500)
end

--- /rl/NAME: redislock's cosocket transport.
function _M.redislock(name)
  if not client then
    local err
    client, err = redislock.connect { host = HOST, port = PORT, transport = "cosocket" }
    if not client then return fail("connect", err) end
  end
  local lock, err = client:acquire(name, { ttl = TTL_MS / 1000 })
  if not lock then return fail("acquire", err) end
  local ok, rerr = lock:release()
  if not ok then return fail("release", rerr) end
  ngx.say("ok")
end

--- /hand/NAME: lua-resty-redis by hand.
function _M.hand(name)
  local red = redis:new()
  red:set_timeout(2000)
  local ok, err = red:connect(HOST, PORT)
  if not ok then return fail("connect", err) end
  local key, token = "lock:" .. name, ngx.var.request_id
  local res
  res, err = red:set(key, token, "NX", "PX", TTL_MS)
  if res ~= "OK" then
    red:close()
    return fail("set", err or "busy")
  end
  res, err = red:eval(UNLOCK, 1, key, token)
  if res ~= 1 then
    red:close()
    return fail("unlock", err or "not held")
  end
  red:set_keepalive(10000, 100)
  ngx.say("ok")
end

return _M

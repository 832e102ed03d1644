--[[
spec/support/nginx.lua -- nginx with its Lua module (LuaJIT), as the host
specs (test/hosts/nginx*_spec.lua) run it: one master and one worker in the
foreground, pid, error log and temp files in a temp dir of its own
(helpers.tmpdir), the checkout's lua/ and the LuaJIT core (build/luajit,
`make testjit`) on the module's paths.

  local ngx_host = require "spec.support.nginx"
  local n = ngx_host.start {
    -- the lines inside http {} after the common ones (init_by_lua, servers)
    http = function(port, dir) return "  server { listen 127.0.0.1:" .. port .. "; ... }\n" end,
    ready = "/path",          -- up once GET /path answers at all; or
                              -- function(base) ... end: up once it returns true
  }
  http.request(n.base .. "/path")     -- n.dir, n.port, n.base, n.proc (helpers.spawn's), n.pid
  n:get("/path")                      -- the body of a 200 answer, its last newline cut;
                                      -- any other status raises with the error log's tail
  n:error_log()                       -- the error log's tail (n:error_log(true): all of it)
  n:stop()                            -- in teardown; safe to call twice

A whole nginx.conf of its own (a doc's): opts.conf = function(port, dir)
instead of opts.http. It must leave daemon, pid and error_log out: they come
from the command line (-g), into n.dir like the others.
]]
local helpers = require "spec.helpers"
local http = require "socket.http"

local M = {}

local quote = helpers.quote

-- The checkout's root (the specs run there), absolute: nginx runs elsewhere.
M.ROOT = (helpers.sh("pwd"):gsub("%s+$", ""))
-- Debian's nginx modules (nginx-light, libnginx-mod-http-lua).
M.MODULES = "/usr/lib/nginx/modules"

local START_TIMEOUT = 10   -- seconds for nginx to answer
local TAIL_CHARS = 1500    -- error_log()'s tail

--- The common nginx.conf: main and events, and the head of http {} (temp
-- paths in dir/tmp, the module's paths); `http_lines` follows, then the
-- http block's closing brace.
function M.conf(dir, http_lines)
  return ([[
daemon off;
master_process on;
worker_processes 1;
error_log %s/error.log notice;
pid %s/nginx.pid;
load_module %s/ndk_http_module.so;
load_module %s/ngx_http_lua_module.so;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path %s/tmp;
  proxy_temp_path %s/tmp;
  fastcgi_temp_path %s/tmp;
  uwsgi_temp_path %s/tmp;
  scgi_temp_path %s/tmp;
  lua_package_path "%s/lua/?.lua;;";
  lua_package_cpath "%s/build/luajit/testing/?.so;;";
]]):format(dir, dir, M.MODULES, M.MODULES, dir, dir, dir, dir, dir, M.ROOT, M.ROOT) .. http_lines .. "}\n"
end

--- What M.conf puts in the main context (daemon, pid, error log), as a -g
-- argument: for an nginx.conf that is not M.conf's.
function M.globals(dir)
  return "daemon off; pid " .. dir .. "/nginx.pid; error_log " .. dir .. "/error.log notice;"
end

--- The shell command running nginx in the foreground on dir/nginx.conf
-- (exec: the spawned process is nginx's master); `globals`, if given, is
-- passed with -g.
function M.command(dir, globals)
  local cmd = "exec nginx -p " .. quote(dir) .. " -c " .. quote(dir .. "/nginx.conf")
    .. " -e " .. quote(dir .. "/error.log")
  if globals then cmd = cmd .. " -g " .. quote(globals) end
  return cmd
end

local Nginx = {}
Nginx.__index = Nginx

--- The last TAIL_CHARS characters of the error log ("" before it exists),
-- or all of it if `all`.
function Nginx:error_log(all)
  local log = helpers.read_file(self.dir .. "/error.log") or ""
  return all and log or log:sub(-TAIL_CHARS)
end

--- GET path: the body of a 200 answer without its last newline; raises
-- (at the caller's line) with the status and the error log's tail otherwise.
function Nginx:get(path)
  local body, code = http.request(self.base .. path)
  assert(body, code)
  if code ~= 200 then
    error(("%s: HTTP %s\n%s"):format(path, tostring(code), self:error_log()), 2)
  end
  return (body:gsub("\n$", ""))
end

--- Stops nginx (TERM to its pid's group, KILL after 2 s: helpers' Proc:stop).
-- The dir stays (helpers.stop_all removes it). Safe to call twice.
function Nginx:stop()
  if self.proc then self.proc:stop() end
end

-- A function(base) -> true once nginx is up, from opts.ready: a path
-- (any HTTP answer to GET path will do), or such a function itself.
local function ready_check(ready)
  if type(ready) == "function" then return ready end
  return function(base) return (http.request(base .. (ready or "/"))) ~= nil end
end

--- Writes the nginx.conf (opts.http or opts.conf, see the header), starts
-- nginx on a free port and waits until opts.ready says it is up. Raises
-- with nginx's stderr and its error log's tail if it is not within
-- START_TIMEOUT seconds (having stopped it).
function M.start(opts)
  assert(opts.http or opts.conf, "nginx.start: opts.http or opts.conf")
  local n = setmetatable({ dir = helpers.tmpdir(), port = helpers.free_port() }, Nginx)
  n.base = "http://127.0.0.1:" .. n.port
  assert(os.execute("mkdir -p " .. quote(n.dir .. "/tmp")))
  local text = opts.conf and opts.conf(n.port, n.dir) or M.conf(n.dir, opts.http(n.port, n.dir))
  local f = assert(io.open(n.dir .. "/nginx.conf", "w"))
  f:write(text)
  f:close()
  n.proc = helpers.spawn(M.command(n.dir, opts.conf and M.globals(n.dir)))
  n.pid = n.proc.pid
  local up = ready_check(opts.ready)
  if not helpers.wait_until(function() return up(n.base) end, START_TIMEOUT, 0.05) then
    local why = n.proc:stderr() .. n:error_log()
    n:stop()
    error("nginx did not start: " .. why, 2)
  end
  return n
end

return M

-- proxy.lua: a loopback TCP proxy for fault injection in specs.
--
-- usage: lua proxy.lua TARGET [TARGET_HOST [LISTEN_PORT]]
-- TARGET is a port on TARGET_HOST (127.0.0.1 by default), or the path of a
-- unix socket ("/..." or "unix:/..."). Listens on 127.0.0.1 (on LISTEN_PORT,
-- or a free port), prints "port N" on stdout, then "control M", and forwards
-- every connection to the target. Faults on every connection at once come
-- from signals sent by the spec to this process:
--   SIGSTOP  hold: nothing is forwarded, connections stay open
--   SIGCONT  resume: buffered bytes flow again
--   SIGKILL  close: every connection is reset at once
-- Faults on some connections come from the control port: a client sends one
-- line per command and reads one line back ("ok ..." or "error ..."). N is a
-- connection's number, 1 for the first one accepted, or "all": every open
-- connection AND every one accepted later (clients connect lazily). DIR is
-- up (what the client sends), down (what it receives) or both.
--   count               ok <connections accepted so far>
--   open                ok <connections still open>
--   hold N DIR          buffer instead of sending, until flush/normal
--   buffered N DIR      ok <bytes held> (summed over connections for all)
--   flush N DIR         send what was held and stop holding: ok <bytes>
--   trickle N DIR MS    pass one byte every MS ms, dropping nothing: a slow,
--                       not dead, link (each byte resets a per-call timeout)
--   delay N DIR MS      deliver each chunk MS ms after it arrived, in order
--   normal N DIR        back to plain forwarding; whatever was held, delayed
--                       or trickling goes out at once, in order
--   queued N DIR        ok <bytes accepted but not yet sent on>
--   mode N DIR          ok <mode> <ms> of one connection (N may be all: the
--                       mode given to new connections)
--   drop N              close both ends of N at once (all: every open one)
-- Sends never block: a slow reader or a trickle never stalls the control
-- port or the other connections. When one end closes, what is already on
-- its way to the other end is delivered (at the link's pace), then both
-- ends close. Loopback only, by design.
local socket = require "socket"
local has_system, system = pcall(require, "system")
local now = has_system and system.monotime or socket.gettime

local USAGE = "usage: proxy.lua TARGET_PORT|UNIX_PATH [HOST [LISTEN_PORT]]"
local target = assert(arg[1], USAGE)
local target_port = tonumber(target)
local target_path = not target_port and (target:match("^unix:(.+)$") or target:match("^/.*"))
assert(target_port or target_path, USAGE)
local target_host = arg[2] or "127.0.0.1"
if target_host == "" then target_host = "127.0.0.1" end
local listen_port = tonumber(arg[3]) or 0

local CHUNK = 65536
local MAX_QUEUED = 4 * 1024 * 1024  -- per direction: stop reading (TCP backpressure)

local server = assert(socket.bind("127.0.0.1", listen_port))
server:settimeout(0)
local control = assert(socket.bind("127.0.0.1", 0))
control:settimeout(0)
io.stdout:write("port ", select(2, server:getsockname()), "\n")
io.stdout:write("control ", select(2, control:getsockname()), "\n")
io.stdout:flush()

-- A connection has two pipes, one per direction. A pipe reads from `from`,
-- and either holds what it reads (mode hold) or queues it as chunks
-- { data, off (bytes already sent), due (time it may go) } for `to`.
local conns = {}        -- number -> { number, client, upstream, up = pipe, down = pipe, closed }
local reader = {}       -- socket -> the pipe that reads it
local writer = {}       -- socket -> the pipe that writes to it
local controllers = {}  -- control socket -> partial line received so far
local defaults = { up = { mode = "normal", ms = 0 }, down = { mode = "normal", ms = 0 } }

local function sum(list)
  local n = 0
  for _, c in ipairs(list) do n = n + #c.data - (c.off or 0) end
  return n
end

local function close_conn(c)
  if c.closed then return end
  c.closed = true
  for _, s in ipairs({ c.client, c.upstream }) do
    reader[s], writer[s] = nil, nil
    s:close()
  end
end

local function enqueue(p, data, due)
  p.queue[#p.queue + 1] = { data = data, off = 0, due = due }
end

-- Leaving hold releases what was held into the queue (due now, or later for
-- delay), so a "hold then trickle" sends the held bytes at the trickle pace.
local function set_mode(p, mode, ms)
  if p.mode == "hold" and mode ~= "hold" then
    local data = table.concat(p.held)
    p.held = {}
    if #data > 0 then enqueue(p, data, now() + (mode == "delay" and ms / 1000 or 0)) end
  end
  if mode == "normal" then
    for _, chunk in ipairs(p.queue) do chunk.due = 0 end
  end
  if mode == "trickle" and p.mode ~= "trickle" then p.next_at = now() end
  p.mode, p.ms = mode, ms or 0
end

local function new_pipe(conn, dir, from, to)
  local p = { conn = conn, dir = dir, from = from, to = to, mode = "normal", ms = 0,
              held = {}, queue = {}, next_at = 0 }
  reader[from], writer[to] = p, p
  set_mode(p, defaults[dir].mode, defaults[dir].ms)
  return p
end

local function connect_upstream()
  local up, ok
  if target_path then
    up = require("socket.unix").stream()
    ok = up:connect(target_path)
  else
    up = socket.tcp()
    ok = up:connect(target_host, target_port)
    if ok then up:setoption("tcp-nodelay", true) end
  end
  if not ok then
    up:close()
    return nil
  end
  up:settimeout(0)
  return up
end

local function accept()
  local client = server:accept()
  if not client then return end
  local upstream = connect_upstream()
  if not upstream then
    client:close()
    return
  end
  client:settimeout(0)
  client:setoption("tcp-nodelay", true)
  local c = { number = #conns + 1, client = client, upstream = upstream }
  c.up = new_pipe(c, "up", client, upstream)
  c.down = new_pipe(c, "down", upstream, client)
  conns[c.number] = c
end

-- Read what `p.from` has. EOF stops reading; the connection closes once the
-- queue toward the other end is empty (see the main loop).
local function pump_in(p)
  local data, err, partial = p.from:receive(CHUNK)
  data = data or partial
  if data and #data > 0 then
    if p.mode == "hold" then
      p.held[#p.held + 1] = data
    else
      enqueue(p, data, now() + (p.mode == "delay" and p.ms / 1000 or 0))
    end
  end
  if err == "closed" then p.eof = true end
end

-- When the head of the queue may next be written (nil: nothing queued).
local function ready_at(p)
  local head = p.queue[1]
  if not head then return nil end
  if p.mode == "trickle" and p.next_at > head.due then return p.next_at end
  return head.due
end

-- Write what is due to `p.to` without blocking: a trickle writes one byte,
-- otherwise as much as the socket takes. A dead peer closes the connection.
local function pump_out(p)
  local t = now()
  while p.queue[1] and ready_at(p) <= t do
    local head = p.queue[1]
    local last_byte = p.mode == "trickle" and head.off + 1 or #head.data
    local i, err, partial = p.to:send(head.data, head.off + 1, last_byte)
    local sent = i or partial or head.off
    if sent > head.off and p.mode == "trickle" then p.next_at = t + p.ms / 1000 end
    head.off = sent
    if head.off >= #head.data then table.remove(p.queue, 1) end
    if err then
      if err ~= "timeout" then close_conn(p.conn) end
      return
    end
    if p.mode == "trickle" then return end
  end
end

---------------------------------------------------------------------------
-- Control commands
---------------------------------------------------------------------------

-- The open pipes a (N, DIR) pair names, and whether N was "all".
local function pipes(n, dir)
  local dirs = (dir == "both" and { "up", "down" }) or ((dir == "up" or dir == "down") and { dir })
  if not dirs then return nil, "error bad direction " .. tostring(dir) end
  local list = {}
  local function add(c)
    if not c.closed then
      for _, d in ipairs(dirs) do list[#list + 1] = c[d] end
    end
  end
  if n == "all" then
    for _, c in ipairs(conns) do add(c) end
    return list, dirs
  end
  local c = conns[tonumber(n)]
  if not c then return nil, "error no connection " .. tostring(n) end
  add(c)
  return list
end

local MODES = { hold = true, trickle = true, delay = true, normal = true }

local function command(line)
  local words = {}
  for w in line:gmatch("%S+") do words[#words + 1] = w end
  local cmd, n, dir, ms = words[1], words[2], words[3], tonumber(words[4])
  if cmd == "count" then return "ok " .. #conns end
  if cmd == "open" then
    local k = 0
    for _, c in ipairs(conns) do if not c.closed then k = k + 1 end end
    return "ok " .. k
  end
  if cmd == "drop" then
    if n == "all" then
      for _, c in ipairs(conns) do close_conn(c) end
      return "ok"
    end
    local c = conns[tonumber(n)]
    if not c then return "error no connection " .. tostring(n) end
    close_conn(c)
    return "ok"
  end
  local list, all_dirs = pipes(n, dir)
  if not list then return all_dirs end
  if MODES[cmd] then
    if (cmd == "trickle" or cmd == "delay") and not (ms and ms >= 0) then
      return "error " .. cmd .. " needs MS >= 0"
    end
    if all_dirs then
      for _, d in ipairs(all_dirs) do defaults[d] = { mode = cmd, ms = ms or 0 } end
    end
    for _, p in ipairs(list) do set_mode(p, cmd, ms) end
    return "ok"
  elseif cmd == "flush" then
    local bytes = 0
    for _, p in ipairs(list) do
      bytes = bytes + #table.concat(p.held)
      if p.mode == "hold" then set_mode(p, "normal") end
    end
    if all_dirs then
      for _, d in ipairs(all_dirs) do
        if defaults[d].mode == "hold" then defaults[d] = { mode = "normal", ms = 0 } end
      end
    end
    return "ok " .. bytes
  elseif cmd == "buffered" or cmd == "queued" then
    local bytes = 0
    for _, p in ipairs(list) do
      bytes = bytes + (cmd == "buffered" and #table.concat(p.held) or sum(p.queue))
    end
    return "ok " .. bytes
  elseif cmd == "mode" then
    local m = all_dirs and defaults[all_dirs[1]] or list[1]
    if not m then return "error connection closed" end
    return "ok " .. m.mode .. " " .. m.ms
  end
  return "error unknown command " .. tostring(cmd)
end

-- Non-blocking line reader: receive("*l") hands back a partial line on
-- timeout, which we keep until the rest arrives.
local function serve_controller(s)
  while true do
    local line, err, partial = s:receive("*l")
    if line then
      line = controllers[s] .. line
      controllers[s] = ""
      s:settimeout(1)  -- a one-line answer to a reading client: never blocks long
      s:send(command(line) .. "\n")
      s:settimeout(0)
    else
      controllers[s] = controllers[s] .. (partial or "")
      if err ~= "timeout" then
        controllers[s] = nil
        s:close()
      end
      return
    end
  end
end

---------------------------------------------------------------------------
-- Main loop
---------------------------------------------------------------------------

while true do
  local t = now()
  local rset, wset, timeout = { server, control }, {}, 1
  for s in pairs(controllers) do rset[#rset + 1] = s end
  for _, c in ipairs(conns) do
    if not c.closed then
      for _, p in ipairs({ c.up, c.down }) do
        if not p.eof and sum(p.queue) < MAX_QUEUED then rset[#rset + 1] = p.from end
        local at = ready_at(p)
        if at and at <= t then
          wset[#wset + 1] = p.to
        elseif at and at - t < timeout then
          timeout = at - t
        end
      end
    end
  end
  local readable, writable = socket.select(rset, wset, timeout)
  for _, s in ipairs(writable) do
    local p = writer[s]
    if p and not p.conn.closed then pump_out(p) end
  end
  for _, s in ipairs(readable) do
    if s == server then
      accept()
    elseif s == control then
      local c = control:accept()
      if c then
        c:settimeout(0)
        controllers[c] = ""
      end
    elseif controllers[s] then
      serve_controller(s)
    elseif reader[s] and not reader[s].conn.closed then
      pump_in(reader[s])
    end
  end
  for _, c in ipairs(conns) do
    if not c.closed and ((c.up.eof and not c.up.queue[1]) or (c.down.eof and not c.down.queue[1])) then
      close_conn(c)
    end
  end
end

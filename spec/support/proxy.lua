-- proxy.lua: a loopback TCP proxy for fault injection in specs.
--
-- usage: lua proxy.lua TARGET_PORT [TARGET_HOST [LISTEN_PORT]]
-- Listens on 127.0.0.1 (on LISTEN_PORT, or a free port), prints "port N" on
-- stdout, then "control M", and forwards every connection to
-- TARGET_HOST:TARGET_PORT (127.0.0.1 by default). Faults on every
-- connection at once come from signals sent by the spec to this process:
--   SIGSTOP  hold: nothing is forwarded, connections stay open
--   SIGCONT  resume: buffered bytes flow again
--   SIGKILL  close: every connection is reset at once
-- Faults on one connection come from the control port: a client sends one
-- line per command and reads one line back ("ok ..." or "error ..."). N is
-- a connection's number, 1 for the first one accepted:
--   count            ok <connections accepted so far>
--   hold N up|down   buffer what N's client sends (up) or receives (down)
--   buffered N up|down  ok <bytes buffered in that direction>
--   flush N up|down  send what was buffered and stop holding: ok <bytes>
--   drop N           close both ends of N at once
--   trickle N up|down MS  pass that direction on one byte every MS ms,
--                    dropping nothing (a slow, not dead, link); N may be
--                    "all": every connection, and every later one too
--   normal N up|down      back to forwarding at once (N may be "all")
-- Loopback only, by design.
local socket = require "socket"

local target_port = assert(tonumber(arg[1]), "usage: proxy.lua TARGET_PORT [HOST]")
local target_host = arg[2] or "127.0.0.1"
local listen_port = tonumber(arg[3]) or 0

local server = assert(socket.bind("127.0.0.1", listen_port))
server:settimeout(0)
local control = assert(socket.bind("127.0.0.1", 0))
control:settimeout(0)
io.stdout:write("port ", select(2, server:getsockname()), "\n")
io.stdout:write("control ", select(2, control:getsockname()), "\n")
io.stdout:flush()

local peer = {}     -- socket -> the socket it forwards to
local sockets = { server, control }
local conns = {}    -- number -> { client =, upstream = }
local held = {}     -- socket read from -> parts buffered instead of sent
local trickle = {}  -- socket read from -> { ms =, buf =, next_at = } (one byte per ms)
local trickle_all = {} -- "up"/"down" -> ms, for connections to come
local controllers = {}

local function remove(x)
  for i = #sockets, 1, -1 do
    if sockets[i] == x then table.remove(sockets, i) end
  end
end

local function drop(s)
  local p = peer[s]
  for _, x in ipairs({ s, p }) do
    if x then
      x:close()
      peer[x] = nil
      held[x] = nil
      trickle[x] = nil
      remove(x)
    end
  end
end

local function set_trickle(s, ms)
  if ms then
    local t = trickle[s] or { buf = "", next_at = socket.gettime() }
    t.ms = ms
    trickle[s] = t
  elseif trickle[s] then
    local rest = trickle[s].buf
    trickle[s] = nil
    if peer[s] and #rest > 0 then peer[s]:send(rest) end
  end
end

-- One byte per trickled direction whose time has come; returns the time
-- until the next one is due (or nil).
local function pump_trickles()
  local now, wait = socket.gettime(), nil
  for s, t in pairs(trickle) do
    if #t.buf > 0 then
      if now >= t.next_at then
        if peer[s] then peer[s]:send(t.buf:sub(1, 1)) end
        t.buf = t.buf:sub(2)
        t.next_at = now + t.ms / 1000
      end
      if #t.buf > 0 then
        local d = t.next_at - now
        if not wait or d < wait then wait = d end
      end
    end
  end
  return wait
end

local function send_all(to, data)
  to:settimeout(5)
  to:send(data)
  to:settimeout(0)
end

-- The socket whose incoming bytes go in direction dir of connection n.
local function source(n, dir)
  local c = conns[tonumber(n)]
  if not c then return nil end
  if dir == "up" then return c.client elseif dir == "down" then return c.upstream end
end

local function command(line)
  local words = {}
  for w in line:gmatch("%S+") do words[#words + 1] = w end
  local cmd, n, dir = words[1], words[2], words[3]
  if cmd == "count" then return "ok " .. #conns end
  if cmd == "trickle" or cmd == "normal" then
    local ms = cmd == "trickle" and tonumber(words[4]) or nil
    if cmd == "trickle" and not (ms and ms > 0) then return "error trickle needs MS" end
    if dir ~= "up" and dir ~= "down" then return "error bad direction" end
    local targets = {}
    if n == "all" then
      trickle_all[dir] = ms
      for i = 1, #conns do targets[#targets + 1] = source(i, dir) end
    else
      targets[1] = source(n, dir)
      if not targets[1] then return "error bad connection" end
    end
    for _, s in ipairs(targets) do set_trickle(s, ms) end
    return "ok"
  end
  if cmd == "drop" then
    local c = conns[tonumber(n)]
    if not c then return "error no connection " .. tostring(n) end
    drop(c.client)
    return "ok"
  end
  local s = source(n, dir)
  if not s then return "error bad connection or direction" end
  if cmd == "hold" then
    held[s] = held[s] or {}
    return "ok"
  elseif cmd == "buffered" then
    return "ok " .. #table.concat(held[s] or {})
  elseif cmd == "flush" then
    local data = table.concat(held[s] or {})
    held[s] = nil
    if peer[s] and #data > 0 then send_all(peer[s], data) end
    return "ok " .. #data
  end
  return "error unknown command " .. tostring(cmd)
end

while true do
  local wait = pump_trickles()
  local readable = socket.select(sockets, nil, wait and math.max(0, math.min(wait, 1)) or 1)
  for _, s in ipairs(readable) do
    if s == server then
      local client = server:accept()
      if client then
        local upstream = socket.tcp()
        if upstream:connect(target_host, target_port) then
          client:settimeout(0)
          upstream:settimeout(0)
          client:setoption("tcp-nodelay", true)
          upstream:setoption("tcp-nodelay", true)
          peer[client], peer[upstream] = upstream, client
          sockets[#sockets + 1] = client
          sockets[#sockets + 1] = upstream
          conns[#conns + 1] = { client = client, upstream = upstream }
          if trickle_all.up then set_trickle(client, trickle_all.up) end
          if trickle_all.down then set_trickle(upstream, trickle_all.down) end
        else
          client:close()
        end
      end
    elseif s == control then
      local c = control:accept()
      if c then
        c:settimeout(1)
        controllers[c] = true
        sockets[#sockets + 1] = c
      end
    elseif controllers[s] then
      local line, err = s:receive("*l")
      if line then
        s:send(command(line) .. "\n")
      elseif err == "closed" then
        controllers[s] = nil
        remove(s)
        s:close()
      end
    elseif peer[s] then
      local data, err, partial = s:receive(65536)
      data = data or partial
      if data and #data > 0 then
        if held[s] then
          held[s][#held[s] + 1] = data
        elseif trickle[s] then
          trickle[s].buf = trickle[s].buf .. data
        else
          send_all(peer[s], data)
        end
      end
      if err == "closed" then drop(s) end
    end
  end
end

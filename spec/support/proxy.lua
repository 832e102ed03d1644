-- proxy.lua: a loopback TCP proxy for fault injection in specs.
--
-- usage: lua proxy.lua TARGET_PORT [TARGET_HOST [LISTEN_PORT]]
-- Listens on 127.0.0.1 (on LISTEN_PORT, or a free port), prints "port N" on
-- stdout, and
-- forwards every connection to TARGET_HOST:TARGET_PORT (127.0.0.1 by
-- default). Faults come from signals sent by the spec to this process:
--   SIGSTOP  hold: nothing is forwarded, connections stay open
--   SIGCONT  resume: buffered bytes flow again
--   SIGKILL  close: every connection is reset at once
-- Loopback only, by design.
local socket = require "socket"

local target_port = assert(tonumber(arg[1]), "usage: proxy.lua TARGET_PORT [HOST]")
local target_host = arg[2] or "127.0.0.1"
local listen_port = tonumber(arg[3]) or 0

local server = assert(socket.bind("127.0.0.1", listen_port))
server:settimeout(0)
io.stdout:write("port ", select(2, server:getsockname()), "\n")
io.stdout:flush()

local peer = {}     -- socket -> the socket it forwards to
local sockets = { server }

local function drop(s)
  local p = peer[s]
  for _, x in ipairs({ s, p }) do
    if x then
      x:close()
      peer[x] = nil
      for i = #sockets, 1, -1 do
        if sockets[i] == x then table.remove(sockets, i) end
      end
    end
  end
end

while true do
  local readable = socket.select(sockets, nil, 1)
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
        else
          client:close()
        end
      end
    elseif peer[s] then
      local data, err, partial = s:receive(65536)
      data = data or partial
      if data and #data > 0 then
        peer[s]:settimeout(5)
        peer[s]:send(data)
        peer[s]:settimeout(0)
      end
      if err == "closed" then drop(s) end
    end
  end
end

-- dns_stub.lua: a DNS server for name-resolution specs, on loopback only.
--
-- usage: lua dns_stub.lua MODE [NAME IP] [PORT]
--   MODE silent   read every query, answer none (a resolver that hangs)
--   MODE answer   answer A queries for NAME with IP at once, and AAAA
--                 queries (and any other name) with no records
-- Listens on 127.0.0.1:PORT (53 by default): run it inside a network
-- namespace of its own (spec/helpers.lua's spawn_isolated), where
-- 127.0.0.1:53 is free and /etc/resolv.conf points at it. Prints "ready".
local socket = require "socket"

local mode, name, ip = arg[1], arg[2], arg[3]
local port = tonumber(arg[4]) or 53
local udp = assert(socket.udp())
assert(udp:setsockname("127.0.0.1", port))
io.stdout:write("ready\n")
io.stdout:flush()

-- The query's name, as dotted text, and the offset after its question.
local function question(q)
  local labels, i = {}, 13
  while true do
    local len = q:byte(i)
    if not len or len == 0 then break end
    labels[#labels + 1] = q:sub(i + 1, i + len)
    i = i + len + 1
  end
  return table.concat(labels, "."), i + 5     -- zero byte, QTYPE, QCLASS
end

local function u16(n) return string.char(math.floor(n / 256) % 256, n % 256) end

while true do
  local q, from, from_port = udp:receivefrom()
  if q and #q >= 12 and mode == "answer" then
    local qname, after = question(q)
    local qtype = q:byte(after - 4) * 256 + q:byte(after - 3)
    local hit = qname:lower() == (name or ""):lower() and qtype == 1
    local reply = q:sub(1, 2) .. u16(0x8180) .. u16(1) .. u16(hit and 1 or 0) .. u16(0) .. u16(0)
      .. q:sub(13, after - 1)
    if hit then
      local a, b, c, d = ip:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
      reply = reply .. u16(0xC00C) .. u16(1) .. u16(1) .. u16(0) .. u16(5) .. u16(4)
        .. string.char(tonumber(a), tonumber(b), tonumber(c), tonumber(d))
    end
    udp:sendto(reply, from, from_port)
  end
end

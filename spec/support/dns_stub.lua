-- dns_stub.lua: a tiny DNS server over UDP on loopback, for specs of bounded
-- name resolution (run it inside helpers.spawn_isolated, where resolv.conf
-- points at 127.0.0.1:53, so nothing ever leaves the machine).
--
-- usage: lua dns_stub.lua MODE NAME DELAY_MS [HOST [PORT [ADDRESS]]]
--   MODE  silent  read every query, never answer (a resolver that is down)
--         slow    answer like "answer", DELAY_MS later
--         answer  answer at once
--   NAME     answered (case-insensitive) with ADDRESS (default 127.0.0.1)
--            for A queries and with no records (NODATA) for other types;
--            any other name gets NXDOMAIN
--   HOST     address to listen on (default 127.0.0.1), PORT (default 53; 0
--            for a free one)
-- Prints "port N" once listening, then "query NAME TYPE" per query received
-- (TYPE as a number, e.g. 1 = A, 28 = AAAA), flushed at once.
-- Plain string.byte/char, no string.pack: runs on Lua 5.1 as well.
local socket = require "socket"
local has_system, system = pcall(require, "system")
local now = has_system and system.monotime or socket.gettime

local mode = arg[1] or "answer"
local name = (arg[2] or "redis.invalid-test"):lower():gsub("%.$", "")
local delay = (tonumber(arg[3]) or 2000) / 1000
local host = arg[4] or "127.0.0.1"
local port = tonumber(arg[5]) or 53
local address = arg[6] or "127.0.0.1"
assert(mode == "silent" or mode == "slow" or mode == "answer", "bad mode " .. tostring(mode))

local udp = assert(socket.udp())
assert(udp:setsockname(host, port))
udp:settimeout(0)
io.stdout:write("port ", select(2, udp:getsockname()), "\n")
io.stdout:flush()

local function u16(s, i) return s:byte(i) * 256 + s:byte(i + 1) end
local function be16(n) return string.char(math.floor(n / 256) % 256, n % 256) end

-- The question's name (dotted, lower case), type, and the offset after it.
-- Queries carry no compression pointers; anything odd yields nil.
local function parse_question(q)
  if #q < 12 or u16(q, 5) < 1 then return nil end
  local labels, i = {}, 13
  while true do
    local len = q:byte(i)
    if not len or len >= 64 then return nil end
    if len == 0 then break end
    labels[#labels + 1] = q:sub(i + 1, i + len)
    i = i + 1 + len
  end
  if #q < i + 4 then return nil end
  return table.concat(labels, "."):lower(), u16(q, i + 1), i + 5
end

-- The reply: the query's id and question, RD copied, RA set, and an A record
-- (name as a pointer to the question, ttl 0) when the name and type match.
local function reply(q, qname, qtype, qend)
  local rd = q:byte(3) % 2  -- RD is the low bit of the first flags byte
  local rcode, answers = 0, ""
  if qname ~= name then
    rcode = 3
  elseif qtype == 1 then
    local a, b, c, d = address:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
    answers = "\192\12" .. be16(1) .. be16(1) .. "\0\0\0\0" .. be16(4) ..
      string.char(tonumber(a), tonumber(b), tonumber(c), tonumber(d))
  end
  local flags = 0x8000 + rd * 0x100 + 0x80 + rcode
  local ancount = #answers > 0 and 1 or 0
  return q:sub(1, 2) .. be16(flags) .. be16(1) .. be16(ancount) .. be16(0) .. be16(0) ..
    q:sub(13, qend - 1) .. answers
end

local pending = {}  -- { due, data, ip, port } in arrival order (one delay for all)

while true do
  local timeout = 1
  if pending[1] then timeout = math.max(0, pending[1].due - now()) end
  socket.select({ udp }, nil, timeout)
  while true do
    local q, ip, from_port = udp:receivefrom()
    if not q then break end
    local qname, qtype, qend = parse_question(q)
    if qname then
      io.stdout:write("query ", qname, " ", qtype, "\n")
      io.stdout:flush()
      if mode ~= "silent" then
        pending[#pending + 1] = { due = now() + (mode == "slow" and delay or 0),
                                  data = reply(q, qname, qtype, qend), ip = ip, port = from_port }
      end
    end
  end
  while pending[1] and pending[1].due <= now() do
    local r = table.remove(pending, 1)
    udp:sendto(r.data, r.ip, r.port)
  end
end

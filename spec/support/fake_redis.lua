-- fake_redis.lua: a loopback server that answers like Redis until told to
-- answer like nothing Redis would send, for the specs of hostile replies
-- (spec/40-hostile_replies_spec.lua). Never a stand-in for Redis in any
-- other spec: it knows only what those specs need.
--
-- usage: lua fake_redis.lua
-- Listens on 127.0.0.1 (a free port the kernel picks), prints "port N" on
-- stdout, then "control M". Each client gets, per command:
--   AUTH, SELECT, CLIENT, READONLY   +OK
--   PING                             +PONG
--   INFO                             a bulk with maxmemory_policy:noeviction
--   COMMAND                          an empty array (no native commands)
--   SET                              -ERR syntax error (the native probe)
--   SCRIPT LOAD src                  the script's SHA (the real scripts only)
--   EVALSHA sha / EVAL src           the answer set for that script
--                                    (-NOSCRIPT for a SHA it does not know)
--   SENTINEL sub name                the answer set for SENTINEL
--   anything else                    -ERR unknown command
-- The answers set by default: acquire {1, 7} (granted, fence 7), extend 1,
-- release 1; other scripts -ERR.
-- The control port takes one line per command and answers one line ("ok
-- ..." or "error ..."):
--   answer NAME HEX     the bytes (hex) to answer script NAME with, or a
--                       command (PING, SENTINEL, ...) in capitals
--   answer NAME default back to the default
--   count NAME          ok <how many times NAME was asked>
--   drop                close every client connection
-- Loopback only, by design.
local socket = require "socket"
local core = require "redislock.core"

local server = assert(socket.bind("127.0.0.1", 0))
server:settimeout(0)
local control = assert(socket.bind("127.0.0.1", 0))
control:settimeout(0)
io.stdout:write("port ", select(2, server:getsockname()), "\n")
io.stdout:write("control ", select(2, control:getsockname()), "\n")
io.stdout:flush()

local by_sha, by_source = {}, {}
for name, s in pairs(core.scripts) do
  by_sha[s.sha] = name
  by_source[s.source] = name
end

local INFO = "# Memory\r\nmaxmemory_policy:noeviction\r\n"
local DEFAULTS = {
  acquire = "*2\r\n:1\r\n:7\r\n",
  extend = ":1\r\n",
  release = ":1\r\n",
  AUTH = "+OK\r\n", SELECT = "+OK\r\n", CLIENT = "+OK\r\n", READONLY = "+OK\r\n",
  PING = "+PONG\r\n",
  INFO = "$" .. #INFO .. "\r\n" .. INFO .. "\r\n",
  COMMAND = "*0\r\n",
  SET = "-ERR syntax error\r\n",
}
local answers, counts = {}, {}
for k, v in pairs(DEFAULTS) do answers[k] = v end

local function unhex(h)
  return (h:gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end))
end

local clients = {}       -- socket -> { buf = bytes received, out = bytes to send }
local controllers = {}   -- socket -> partial line

-- One whole command at the start of buf: its words and the rest, or nil.
local function parse_command(buf)
  local n, at = buf:match("^%*(%d+)\r\n()")
  if not n then return nil end
  local words = {}
  for _ = 1, tonumber(n) do
    local len, from = buf:match("^%$(%d+)\r\n()", at)
    if not len then return nil end
    len = tonumber(len)
    if #buf < from + len + 1 then return nil end
    words[#words + 1] = buf:sub(from, from + len - 1)
    at = from + len + 2
  end
  return words, buf:sub(at)
end

local function answer_of(name)
  counts[name] = (counts[name] or 0) + 1
  return answers[name] or ("-ERR fake: no answer for " .. name .. "\r\n")
end

local function reply_to(words)
  local cmd = (words[1] or ""):upper()
  if cmd == "EVALSHA" then
    local name = by_sha[words[2]]
    if not name then return "-NOSCRIPT No matching script\r\n" end
    return answer_of(name)
  elseif cmd == "EVAL" then
    return answer_of(by_source[words[2]] or "?")
  elseif cmd == "SCRIPT" and (words[2] or ""):upper() == "LOAD" then
    local name = by_source[words[3]]
    if not name then return "-ERR fake: unknown script\r\n" end
    local sha = core.scripts[name].sha
    return "$" .. #sha .. "\r\n" .. sha .. "\r\n"
  end
  return answer_of(cmd)
end

local function serve(c)
  while true do
    local words, rest = parse_command(c.buf)
    if not words then return end
    c.buf = rest
    c.out = c.out .. reply_to(words)
  end
end

local function command(line)
  local w = {}
  for word in line:gmatch("%S+") do w[#w + 1] = word end
  if w[1] == "answer" and w[2] and w[3] then
    answers[w[2]] = w[3] == "default" and DEFAULTS[w[2]] or unhex(w[3])
    return "ok"
  elseif w[1] == "count" and w[2] then
    return "ok " .. (counts[w[2]] or 0)
  elseif w[1] == "drop" then
    for s in pairs(clients) do s:close() end
    clients = {}
    return "ok"
  end
  return "error unknown command: " .. line
end

while true do
  local watch = { server, control }
  local writing = {}
  for s, c in pairs(clients) do
    watch[#watch + 1] = s
    if #c.out > 0 then writing[#writing + 1] = s end
  end
  for s in pairs(controllers) do watch[#watch + 1] = s end
  local readable, writable = socket.select(watch, writing, 1)
  for _, s in ipairs(readable) do
    if s == server then
      local cl = server:accept()
      if cl then
        cl:settimeout(0)
        clients[cl] = { buf = "", out = "" }
      end
    elseif s == control then
      local cl = control:accept()
      if cl then
        cl:settimeout(0)
        controllers[cl] = ""
      end
    elseif clients[s] then
      local data, err, partial = s:receive(65536)
      data = data or partial
      if data and #data > 0 then
        clients[s].buf = clients[s].buf .. data
        serve(clients[s])
      elseif err == "closed" then
        clients[s] = nil
        s:close()
      end
    elseif controllers[s] then
      local data, err, partial = s:receive(4096)
      data = data or partial
      if data and #data > 0 then
        local buf = controllers[s] .. data
        local nl = buf:find("\n", #controllers[s] + 1, true)
        while nl do   -- (a line may be long: an answer of 200 KB, in hex)
          s:send(command(buf:sub(1, nl - 1)) .. "\n")
          buf = buf:sub(nl + 1)
          nl = buf:find("\n", 1, true)
        end
        controllers[s] = buf
      elseif err == "closed" then
        controllers[s] = nil
        s:close()
      end
    end
  end
  for _, s in ipairs(writable) do
    local c = clients[s]
    if c and #c.out > 0 then
      local sent, _, upto = s:send(c.out)
      c.out = c.out:sub((sent or upto or 0) + 1)
    end
  end
end

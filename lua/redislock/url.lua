--- redislock.url: parse connection URLs into connect() fields.
--
-- Accepted forms:
--   redis://[[username]:password@]host[:port][/db]
--   redis://[[username]:password@][::1][:port][/db]      (IPv6 in brackets)
--   unix://[[username]:password@]/path/to/redis.sock[?db=N]
--   redis+sentinel://[[username]:password@]host1:port1,host2:port2/master[/db]
--   redis+cluster://[[username]:password@]host1:port1,host2:port2
-- (the user and password of the Sentinel and Cluster forms are those of
-- the data nodes; a sentinel's own come from connect's sentinel_username
-- and sentinel_password)
--   rediss://, rediss+sentinel://, rediss+cluster://: the same over TLS
-- (the fields get tls = true; connect's tls table says how: docs/tls.md).
-- User and password may be percent-encoded. Errors never echo the password.

local core = require "redislock.core"

local _M = { _VERSION = "0.1.0" }

-- A part percent-decoded; what (the user name, the password, ...) names it
-- in the error when it would hold a NUL byte: the C core's strings end at
-- one, so "p%00ss" would be sent as "p" (and a NUL is never in a name).
local function unescape(s, what)
  local out = s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)
  if out:find("\0", 1, true) then error("redislock: bad url (" .. what .. " holds a NUL byte)", 0) end
  return out
end

-- Splits "user:pass@rest" into fields; a bare "user@" is refused because
-- Redis needs a password with an ACL user name. The userinfo ends at the
-- last "@" before the host (TCP) or the socket path (unix), so a password
-- with a raw "@" stays whole instead of leaking into the host name.
local function parse_userinfo(rest, out, unix)
  local userinfo, after
  if unix then
    userinfo, after = rest:match("^(.*)@(/.*)$")
  else
    local authority, path = rest:match("^([^/]*)(.*)$")
    local ui, host = authority:match("^(.*)@([^@]*)$")
    if ui then userinfo, after = ui, host .. path end
  end
  if not userinfo then return rest end
  local user, pass = userinfo:match("^([^:]*):(.*)$")
  if not user then
    error("redislock: bad url (a user name needs a password: user:password@)", 0)
  end
  if user ~= "" then out.username = unescape(user, "the user name") end
  out.password = unescape(pass, "the password")
  return after
end

local function parse_db(s)
  local db = tonumber(s)
  if not s:match("^%d+$") or not db then
    error("redislock: bad url (database must be a non-negative integer)", 0)
  end
  return db
end

--- Is host a name or an address we may look up: letters, digits, '-',
-- '.' and '_' (at most 253 bytes), or an IPv6 address? Anything else (a
-- space, a control byte, a '/') is refused before any lookup. The C
-- core's rule (csrc/base/hostport.h), the one every host goes by.
_M.valid_host = core.valid_host

-- "host[:port]" or "[v6][:port]": host, port (nil: none given), by the C
-- core's one parser (core.hostport). The part that is wrong is named;
-- where: "" or " in the host list".
local function host_port(hostport, where)
  local host, port = core.hostport(hostport)
  if not host then error("redislock: bad url (" .. port .. where .. ")", 0) end
  return host, port
end

local function parse_tcp(rest, out)
  rest = parse_userinfo(rest, out)
  local hostport, path = rest:match("^([^/]*)(.*)$")
  out.host, out.port = host_port(hostport, "")
  if path ~= "" and path ~= "/" then
    out.db = parse_db(path:sub(2))
  end
  return out
end

local function parse_unix(rest, out)
  rest = parse_userinfo(rest, out, true)
  local path, query = rest:match("^([^?]*)%??(.*)$")
  if path:sub(1, 1) ~= "/" then
    error("redislock: bad url (unix:// needs an absolute socket path)", 0)
  end
  if path:find("\0", 1, true) then error("redislock: bad url (the socket path holds a NUL byte)", 0) end
  out.path = path
  if query ~= "" then
    local db = query:match("^db=(.*)$")
    if not db then error("redislock: bad url (only ?db=N is understood)", 0) end
    out.db = parse_db(db)
  end
  return out
end

-- "h1:p1,[::1]:p2,..." -> { "h1:p1", "[::1]:p2", ... } (default port given)
local function parse_hosts(list, default_port)
  local out = {}
  for item in (list .. ","):gmatch("([^,]*),") do
    local host, p = host_port(item, " in the host list")
    if host:find(":", 1, true) then host = "[" .. host .. "]" end
    out[#out + 1] = host .. ":" .. (p or default_port)
  end
  return out
end

local function parse_sentinel(rest, out)
  rest = parse_userinfo(rest, out)
  local hosts, path = rest:match("^([^/]*)/?(.*)$")
  out.sentinels = parse_hosts(hosts, 26379)
  local master, db = path:match("^([^/]+)/?(.*)$")
  if not master then error("redislock: bad url (redis+sentinel:// needs /master-name)", 0) end
  out.master = unescape(master, "the master name")
  if db ~= "" then out.db = parse_db(db) end
  return out
end

local function parse_cluster(rest, out)
  rest = parse_userinfo(rest, out)
  local hosts, path = rest:match("^([^/]*)(.*)$")
  if path ~= "" and path ~= "/" and path ~= "/0" then
    error("redislock: bad url (a cluster has only database 0)", 0)
  end
  out.cluster = parse_hosts(hosts, 6379)
  return out
end

--- Parses url into a table of connect() fields.
-- syntax: fields = url.parse(str)   -- raises on a malformed url
function _M.parse(str)
  if type(str) ~= "string" then
    error("redislock: bad url (string expected, got " .. type(str) .. ")", 0)
  end
  local scheme, rest = str:match("^(%a[%w+.-]*)://(.*)$")
  if not scheme then
    error("redislock: bad url (expected redis://host:port/db or unix:///path)", 0)
  end
  scheme = scheme:lower()
  -- rediss...: TLS, otherwise the same form
  local tls = scheme:match("^rediss") ~= nil
  local out = tls and { tls = true } or {}
  if tls then scheme = "redis" .. scheme:sub(7) end
  if scheme == "redis" then
    if rest:find("?", 1, true) then
      error("redislock: bad url (query parameters are not supported)", 0)
    end
    return parse_tcp(rest, out)
  elseif (scheme == "unix" or scheme == "redis+unix") and not tls then
    return parse_unix(rest, out)
  elseif scheme == "redis+sentinel" then
    if rest:find("?", 1, true) then
      error("redislock: bad url (query parameters are not supported)", 0)
    end
    return parse_sentinel(rest, out)
  elseif scheme == "redis+cluster" then
    if rest:find("?", 1, true) then
      error("redislock: bad url (query parameters are not supported)", 0)
    end
    return parse_cluster(rest, out)
  end
  if tls then scheme = "rediss" .. scheme:sub(6) end
  error("redislock: bad url (unknown scheme '" .. scheme .. "')", 0)
end

return _M

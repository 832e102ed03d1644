--- redislock.admin: looking at and clearing locks from outside (for
-- operators and the CLI): who holds a lock and since when
-- (redislock.holder), every lock held now, and the break-glass tools.
-- Plain functions of a client (client.lua's methods call them); scan,
-- glob_pattern and break_lock serve the Redlock client too.

local checks = require "redislock.checks"
local errors = require "redislock.errors"
local holdermod = require "redislock.holder"
local keysmod = require "redislock.keys"
local MUTEX = require("redislock.acquire").MUTEX
checks.own(debug.getinfo(1, "S").source)

local _M = {}

-- The most holders of one rwlock or semaphore that inspect lists.
local MAX_SHARES = 1000

--- A glob (Redis' MATCH: *, ?, [...], \x) as a Lua pattern for the whole
-- string.
function _M.glob_pattern(glob)
  local out, i, n = { "^" }, 1, #glob
  while i <= n do
    local c = glob:sub(i, i)
    if c == "*" then
      out[#out + 1] = ".*"
    elseif c == "?" then
      out[#out + 1] = "."
    elseif c == "\\" and i < n then
      i = i + 1
      out[#out + 1] = "%" .. glob:sub(i, i)
    elseif c == "[" and glob:find("]", i + 2, true) then
      local close = glob:find("]", i + 2, true)
      local set = glob:sub(i + 1, close - 1)
      local neg = set:sub(1, 1) == "^"
      if neg then set = set:sub(2) end
      set = set:gsub("[%%%]%^]", "%%%0"):gsub("%%%^", "%%^")
      out[#out + 1] = "[" .. (neg and "^" or "") .. set .. "]"
      i = close
    else
      out[#out + 1] = c:gsub("%W", "%%%0")
    end
    i = i + 1
  end
  out[#out + 1] = "$"
  return table.concat(out)
end

-- s with the characters MATCH reads as a pattern escaped.
local function glob_escape(s)
  return (s:gsub("[%*%?%[%]\\]", "\\%0"))
end

-- The kinds of key a lock shows itself by, after its name's "{tag}".
local SUFFIX = { [""] = "lock", [":rw"] = "rwlock", [":rw:readers"] = "rwlock", [":sem"] = "semaphore" }

--- The names whose keys match `pattern` on every node a channel routes
-- to, found with SCAN, and what each is: { {name, what}, ... } sorted by
-- name then what ("lock", "rwlock", "semaphore": one name may be each of
-- them at once) | nil, err, kind.
function _M.scan(ch, prefix, pattern)
  if not ch.nodes then checks.raise("list is not offered by this transport") end
  local n, err, kind = ch:nodes()
  if not n then return errors.fail(err, kind) end
  local match = glob_escape(prefix) .. "{" .. pattern .. "}*"
  local exact = _M.glob_pattern(pattern)
  local seen, found = {}, {}
  for i = 1, n do
    local cursor = "0"
    repeat
      local r
      r, err, kind = ch:node_command(i, "SCAN", cursor, "MATCH", match, "COUNT", "1000")
      if not r then return errors.fail(err, kind) end
      -- {cursor, {key...}}: anything else is no page of keys (a proxy, a
      -- fake), and read as one it would raise here
      if type(r) ~= "table" or type(r[1]) ~= "string" or type(r[2]) ~= "table" then
        return errors.fail("redis error: protocol error: SCAN answered " .. type(r) .. ", not a page of keys")
      end
      cursor = r[1]
      for _, key in ipairs(r[2]) do
        local tagged, suffix = key:sub(#prefix + 1):match("^{([^}]*)}(.*)$")
        local what = tagged and key:sub(1, #prefix) == prefix and SUFFIX[suffix]
        if what then
          local name = keysmod.untag(tagged)
          local id = what .. "\0" .. name
          if not seen[id] and name:find(exact) then
            seen[id] = true
            found[#found + 1] = { name, what }
          end
        end
      end
    until cursor == "0"
  end
  table.sort(found, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  return found
end

-- A share's holders (rw_inspect's, sem_inspect's flat lists) as rows.
local function shares(list, kind)
  local out = {}
  for i = 1, #list, 4 do
    out[#out + 1] = { kind = kind, holder = list[i] or nil, since = holdermod.since(list[i + 1]),
      held_for = list[i + 2] and list[i + 2] / 1000 or nil, ttl = list[i + 3] / 1000 }
  end
  return out
end

--- Deletes `name` whoever holds it (a stuck lock), waking its waiters. The
-- holder is not told until its next renewal; prefer release_token. One rule
-- for every client that has inspect and release_token (a single Redis,
-- Sentinel, Cluster, Redlock).
-- syntax: ok, err = client:break_lock(name)
function _M.break_lock(client, name)
  checks.check_name("break_lock", name)
  local info, err, kind = client:inspect(name)
  if not info then return nil, err, kind end
  if not info.held then return errors.not_held(name) end
  -- Compare-and-delete on the token just read: if it changed hands in
  -- between, the new holder is left alone.
  return client:release_token(name, info.token)
end

--- What Redis says about the lock `name` now (one round trip): client:inspect.
function _M.inspect(client, name)
  checks.check_name("inspect", name)
  local ch = client:_open()
  local keys = client._keys_of(name)
  local r, err, kind = ch:script("inspect", keys.lock, keys.fence, keys.holder, keys.waiting, keys.deadlines)
  if not r then return errors.fail(err, kind) end
  local token, pttl = r[1], r[2]
  return {
    held = token ~= false,
    ttl = (token and pttl > 0) and pttl / 1000 or nil,
    fence = r[3] and tonumber(r[3]) or 0,
    token = token or nil,
    holder = token and r[4] or nil,
    since = token and holdermod.since(r[5]) or nil,
    held_for = token and r[6] and r[6] / 1000 or nil,
    waiters = r[7],
  }
end

--- The holders of the read-write lock `name`: rows of list(); the
-- waiters; and rw_inspect's reply.
function _M.rw_holders(client, name)
  local k = keysmod.rwlock(client._prefix, name)
  local r, err, kind = client:_open():script("rw_inspect", k.writer, k.readers, k.marker, k.writer_holder,
    k.reader_holders, k.readers_waiting, k.writers_waiting, k.writer_grant, k.reader_counts, MAX_SHARES)
  if not r then return errors.fail(err, kind) end
  local rows = shares(r[7], "read")
  if r[1] ~= -2 then
    table.insert(rows, 1, { kind = "write", holder = r[2] or nil, since = holdermod.since(r[3]),
      held_for = r[4] and r[4] / 1000 or nil, ttl = r[1] > 0 and r[1] / 1000 or nil })
  end
  return rows, r[8] + r[9], r
end

--- The permits of the semaphore `name`: rows of list(); the waiters; the
-- limit (-1: none stored) and the permits in use.
function _M.sem_holders(client, name)
  local k = keysmod.semaphore(client._prefix, name)
  local r, err, kind = client:_open():script("sem_inspect", k.permits, k.limit, k.holders, k.waiting, MAX_SHARES)
  if not r then return errors.fail(err, kind) end
  return shares(r[3], "permit"), r[4], r[1], r[2]
end

-- The rows of one name found by scan() (`what` it is), and its waiters.
local function rows_of(client, name, what)
  if what == "rwlock" then return _M.rw_holders(client, name) end
  if what == "semaphore" then return _M.sem_holders(client, name) end
  local info, err, kind = _M.inspect(client, name)
  if not info then return nil, err, kind end
  local list = info.held and { { kind = "lock", holder = info.holder, since = info.since, held_for = info.held_for,
    ttl = info.ttl, fence = info.fence } } or {}
  return list, info.waiters
end

--- Every lock held now whose name matches `pattern`: client:list.
function _M.list(client, pattern)
  if pattern == nil then pattern = "*" end
  checks.check_string("list", "pattern", pattern)
  local found, err, kind = _M.scan(client:_open(), client._prefix, pattern)
  if not found then return nil, err, kind end
  local rows = {}
  for _, f in ipairs(found) do
    local name = f[1]
    local list, waiters, k3 = rows_of(client, name, f[2])
    if not list then return nil, waiters, k3 end
    for _, row in ipairs(list) do
      row.name, row.waiters = name, waiters
      rows[#rows + 1] = row
    end
  end
  return rows
end

--- Releases `name` on behalf of its holder, given the holder's token:
-- client:release_token.
function _M.release_token(client, name, token)
  checks.check_name("release_token", name)
  checks.check_string("release_token", "token", token)
  client:_open()
  local r, err, kind = MUTEX.release(client, client._keys_of(name), token)
  if not r then return errors.fail(err, kind) end
  if r ~= 1 then return errors.not_held(name) end
  return true
end

return _M

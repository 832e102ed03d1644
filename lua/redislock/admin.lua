--- redislock.admin: looking at and clearing locks from outside (Client
-- methods, for operators and the CLI): who holds a lock and since when
-- (redislock.holder), every lock held now, and the break-glass tools.

local checks = require "redislock.checks"
local errors = require "redislock.errors"
local holdermod = require "redislock.holder"
local keysmod = require "redislock.keys"
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
  if not info.held then return nil, "not held", "not held" end
  -- Compare-and-delete on the token just read: if it changed hands in
  -- between, the new holder is left alone.
  return client:release_token(name, info.token)
end

local function install(Client)

  --- What Redis says about the lock `name` now (one round trip).
  -- syntax: info, err, kind = client:inspect(name)
  -- info: { held = bool, ttl = seconds or nil, fence = last fence drawn (0
  -- if never or expired), token = the holder's token or nil (a secret:
  -- show it only to operators), holder = its label or nil, since = when
  -- it was granted (seconds since the epoch, the server's clock) or nil,
  -- held_for = seconds or nil, waiters = n }. holder, since and held_for
  -- are nil for a lock granted without a label (holder = false, fence =
  -- false) or by an older version.
  function Client:inspect(name)
    checks.check_name("inspect", name)
    local ch = self:_open()
    local keys = self._keys_of(name)
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

  -- The holders of the read-write lock `name`: rows of list(); and the
  -- waiters.
  function Client:_rw_holders(name)
    local k = keysmod.rwlock(self._prefix, name)
    local r, err, kind = self:_open():script("rw_inspect", k.writer, k.readers, k.marker, k.writer_holder,
      k.reader_holders, k.readers_waiting, k.writers_waiting, MAX_SHARES)
    if not r then return errors.fail(err, kind) end
    local rows = shares(r[7], "read")
    if r[1] ~= -2 then
      table.insert(rows, 1, { kind = "write", holder = r[2] or nil, since = holdermod.since(r[3]),
        held_for = r[4] and r[4] / 1000 or nil, ttl = r[1] > 0 and r[1] / 1000 or nil })
    end
    return rows, r[8] + r[9], r
  end

  -- The permits of the semaphore `name`: rows of list(); the waiters; the
  -- limit (-1: none stored) and the permits in use.
  function Client:_sem_holders(name)
    local k = keysmod.semaphore(self._prefix, name)
    local r, err, kind = self:_open():script("sem_inspect", k.permits, k.limit, k.holders, k.waiting, MAX_SHARES)
    if not r then return errors.fail(err, kind) end
    return shares(r[3], "permit"), r[4], r[1], r[2]
  end

  --- Every lock held now whose name matches `pattern` (a glob as Redis'
  -- MATCH has it: *, ?, [abc]; default "*"), found with SCAN (never KEYS)
  -- on every node: the one Redis, the Sentinel's master, every master of a
  -- Cluster. One row per holder: a lock's, a rwlock's writer and each
  -- reader, each permit of a semaphore; sorted by name.
  -- syntax: rows, err, kind = client:list(pattern)
  -- row: { name =, kind = "lock" | "write" | "read" | "permit", holder =,
  --        since =, held_for =, ttl =, waiters =, fence = (locks, writers) }
  function Client:list(pattern)
    if pattern == nil then pattern = "*" end
    checks.check_string("list", "pattern", pattern)
    local ch = self:_open()
    local found, err, kind = _M.scan(ch, self._prefix, pattern)
    if not found then return nil, err, kind end
    local rows = {}
    for _, f in ipairs(found) do
      local name, what = f[1], f[2]
      local list, waiters, k3
      if what == "lock" then
        local info
        info, err, kind = self:inspect(name)
        if not info then return nil, err, kind end
        list = info.held and { { kind = "lock", holder = info.holder, since = info.since, held_for = info.held_for,
          ttl = info.ttl, fence = info.fence } } or {}
        waiters = info.waiters
      elseif what == "rwlock" then
        list, waiters, k3 = self:_rw_holders(name)
      else
        list, waiters, k3 = self:_sem_holders(name)
      end
      if not list then return nil, waiters, k3 end
      for _, row in ipairs(list) do
        row.name, row.waiters = name, waiters
        rows[#rows + 1] = row
      end
    end
    return rows
  end

  --- Releases `name` on behalf of its holder, given the holder's token (an
  -- operator's tool): the same compare-and-delete as lock:release().
  -- syntax: ok, err = client:release_token(name, token)
  function Client:release_token(name, token)
    checks.check_name("release_token", name)
    checks.check_string("release_token", "token", token)
    self:_open()
    local r, err, kind = self:_release_keys(self._keys_of(name), token)
    if not r then return errors.fail(err, kind) end
    if r ~= 1 then return nil, "not held", "not held" end
    return true
  end

  Client.break_lock = _M.break_lock
end

-- require("redislock.admin")(Client) installs the methods; the module's
-- own functions (scan, glob_pattern, break_lock) serve the Redlock client too.
return setmetatable(_M, { __call = function(_, Client) return install(Client) end })

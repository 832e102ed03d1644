--- redislock.holder: who holds a lock, the operator's first question.
--
-- Every grant records a holder label beside the lock, in the same script
-- (no extra round trip): what the holder chose to be known by (the
-- `holder` option; by default "<hostname>:<pid>", `redislock run` adds
-- its command), and when, on the server's clock. The record names the
-- token it belongs to, and is read only while that token holds the lock;
-- it lives as the lock does: renewed by every extend, deleted by the
-- release (lua/redislock/scripts/lib/record_holder.lua). A label is
-- plain text the holder chose: bounded here, and escaped wherever it is
-- shown (redislock.text). It never holds a token: a label that contains
-- the lock's own token is refused.

local core = require "redislock.core"
local checks = require "redislock.checks"
local text = require "redislock.text"
local errors = require "redislock.errors"
checks.own(debug.getinfo(1, "S").source)

local _M = {}

--- The longest label, in bytes.
_M.MAX = 200

--- Checks a `holder` option: a label (1 to MAX bytes), false (no record),
-- or nil (the client's default).
function _M.check(fname, v)
  if v == nil or v == false then return end
  if type(v) ~= "string" then checks.argerror(fname, "holder", "string or false expected, got " .. type(v)) end
  if v == "" or #v > _M.MAX then
    checks.argerror(fname, "holder", "1 to " .. _M.MAX .. " bytes expected, got " .. #v)
  end
end

-- "<hostname>:<pid>" for the process `pid` (core.getpid()), drawn again in
-- a fork child.
local default, default_pid
function _M.default(pid)
  if pid ~= default_pid then
    default = (core.hostname() or "?") .. ":" .. string.format("%d", pid)
    default_pid = pid
  end
  return default
end
local default_of = _M.default

--- The label a grant records: the option (false: none, ""), the client's
-- own (connect's `holder`), or "<hostname>:<pid>". Raises when it holds
-- the token.
function _M.label(client, v, token, fname)
  if v == false then return "" end
  local label = v or client._holder
  if label == false then return "" end
  label = label or default_of(core.getpid())
  if token and label:find(token, 1, true) then
    checks.argerror(fname or "acquire", "holder", "must not contain the lock's token")
  end
  return label
end

--- The "busy" a refusal of `name` gives: the holder and how long it has
-- held the lock, when its record said so (label, held_ms from the
-- scripts); the name escaped (redislock.errors).
function _M.busy(name, label, held_ms)
  if type(label) ~= "string" then return errors.about("busy", name) end
  return errors.about("busy", name, string.format("held by %s for %.1f s", text.shown(label, _M.MAX),
    (tonumber(held_ms) or 0) / 1000))
end

--- Seconds since the epoch (the server's clock) of a record's "since", a
-- string of microseconds; nil for none.
function _M.since(us)
  if type(us) ~= "string" then return nil end
  local n = tonumber(us)
  return n and n / 1e6 or nil
end

return _M

--- redislock.fencing: resources that refuse stale writers (plain
-- functions of a client: client:fenced_set and fenced_get call them).
--
-- A fenced resource lives in one Redis hash, {resource}:resource, with its
-- value, the newest fence it has seen and a write version: one key, so
-- eviction or expiry can only drop all three together, never the fence
-- alone (which would let a stale writer in).

local checks = require "redislock.checks"
local keys = require "redislock.keys"
local errors = require "redislock.errors"
checks.own(debug.getinfo(1, "S").source)

local argerror = checks.argerror

local function check_fence(fname, fence)
  checks.check_integer(fname, "fence", fence, 1, 2 ^ 53)
end

local _M = {}

--- client:fenced_set: `value` written only if `fence` is not older than
-- the newest fence the resource has seen.
function _M.set(client, resource, value, fence)
  checks.check_string("fenced_set", "resource", resource)
  local t = type(value)
  if t == "number" then
    if value ~= value or value == math.huge or value == -math.huge then
      argerror("fenced_set", "value", "finite number expected")
    end
  elseif t ~= "string" then
    argerror("fenced_set", "value", "string or number expected, got " .. t)
  end
  check_fence("fenced_set", fence)
  local ch = client:_open()
  local r, err, kind = ch:script("fenced_set", keys.resource(client._prefix, resource), value, fence)
  if not r then return errors.fail(err, kind) end
  if r == 0 then return nil, "stale", "stale" end
  return r
end

--- client:fenced_get: the value read as the holder of `fence`, older
-- fences refused from then on.
function _M.get(client, resource, fence)
  checks.check_string("fenced_get", "resource", resource)
  check_fence("fenced_get", fence)
  local ch = client:_open()
  local r, err, kind = ch:script("fenced_get", keys.resource(client._prefix, resource), fence)
  if not r then return errors.fail(err, kind) end
  if r[1] ~= 1 then return nil, "stale", "stale" end
  return r[2]
end

return _M

--- redislock.fencing: resources that refuse stale writers (Client methods).
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

return function(Client)

  --- Writes `value` to the resource only if `fence` is not older than the
  -- newest fence the resource has seen (from fenced_set or fenced_get).
  -- syntax: version, err = client:fenced_set(resource, value, fence)
  -- version: the order in which writes were accepted (1, 2, ...);
  -- err: "stale" when refused, or a connection/redis error.
  function Client:fenced_set(resource, value, fence)
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
    local ch = self:_open()
    local r, err, kind = ch:script("fenced_set", keys.resource(self._prefix, resource), value, fence)
    if not r then return errors.fail(err, kind) end
    if r == 0 then return nil, "stale", "stale" end
    return r
  end

  --- Reads the resource as the holder of `fence`, and refuses older fences
  -- from then on. Returns the value, or false when it was never written
  -- (or was evicted).
  -- syntax: value, err = client:fenced_get(resource, fence)
  -- err: "stale" when a newer fence has been seen, or a connection/redis error.
  function Client:fenced_get(resource, fence)
    checks.check_string("fenced_get", "resource", resource)
    check_fence("fenced_get", fence)
    local ch = self:_open()
    local r, err, kind = ch:script("fenced_get", keys.resource(self._prefix, resource), fence)
    if not r then return errors.fail(err, kind) end
    if r[1] ~= 1 then return nil, "stale", "stale" end
    return r[2]
  end
end

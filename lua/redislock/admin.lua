--- redislock.admin: looking at and clearing locks from outside (Client
-- methods, for operators and the CLI).

local checks = require "redislock.checks"
local errors = require "redislock.errors"
checks.own(debug.getinfo(1, "S").source)

return function(Client)

  --- What Redis says about the lock `name` now.
  -- syntax: info, err = client:inspect(name)
  -- info: { held = bool, ttl = seconds or nil, fence = last fence drawn (0 if
  -- never or expired), token = the holder's token or nil }. Treat the token
  -- as a secret.
  function Client:inspect(name)
    checks.check_name("inspect", name)
    local ch = self:_open()
    local keys = self._keys_of(name)
    local token, err, kind = ch:command("GET", keys.lock)
    if token == nil then return errors.fail(err, kind) end
    local pttl
    pttl, err, kind = ch:command("PTTL", keys.lock)
    if pttl == nil then return errors.fail(err, kind) end
    local fence
    fence, err, kind = ch:command("GET", keys.fence)
    if fence == nil then return errors.fail(err, kind) end
    return {
      held = token ~= false,
      ttl = (token and pttl > 0) and pttl / 1000 or nil,
      fence = fence and tonumber(fence) or 0,
      token = token or nil,
    }
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

  --- Deletes `name` whoever holds it (a stuck lock), waking its waiters. The
  -- holder is not told until its next renewal; prefer release_token.
  -- syntax: ok, err = client:break_lock(name)
  function Client:break_lock(name)
    checks.check_name("break_lock", name)
    local info, err, kind = self:inspect(name)
    if not info then return nil, err, kind end
    if not info.held then return nil, "not held", "not held" end
    -- Compare-and-delete on the token just read: if it changed hands in
    -- between, the new holder is left alone.
    return self:release_token(name, info.token)
  end
end

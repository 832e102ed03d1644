--- redislock.backoff: how long to sleep before the next try for a busy lock.
--
-- Exponential backoff with full jitter (AWS Architecture Blog, "Exponential
-- Backoff And Jitter"): sleep a uniform random time in [0, min(cap, base*2^n)].
-- The jitter spreads waiters that failed together so they do not retry in
-- lockstep; the randomness comes from the kernel (core.token), so processes
-- forked from one parent, or Lua 5.1 states that were never seeded, still
-- draw different delays.

local core = require "redislock.core"

local _M = {
  _VERSION = "0.1.0",
  base = 0.002,   -- seconds: the first retry waits at most this long
  cap = 0.1,      -- seconds: no retry waits longer than this
  floor = 0.001,  -- seconds: never spin without sleeping at all
}

-- A uniform float in [0, 1) from 32 random bits.
local function uniform()
  local hex = assert(core.token())
  return tonumber(hex:sub(1, 8), 16) / 4294967296
end

--- The delay before retry number `attempt` (1, 2, ...), in seconds.
-- syntax: seconds = backoff.delay(attempt)
function _M.delay(attempt)
  local ceiling = math.min(_M.cap, _M.base * 2 ^ math.min(attempt - 1, 30))
  return math.max(_M.floor, ceiling * uniform())
end

return _M

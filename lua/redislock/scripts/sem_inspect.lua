-- sem_inspect: what Redis says about a semaphore now: its limit and every
-- permit, with their holders (sem_acquire.lua), in one round trip. Writes
-- nothing.
-- KEYS[1] permits (token -> lease end, ms), KEYS[2] the limit, KEYS[3] the
-- permits' holders, KEYS[4] waiting clients
-- ARGV[1] the most permits to list
-- Returns {limit in force (-1: none stored), permits in use, {label or
-- false, since (µs, a string) or false, held_ms or false, lease left ms,
-- ...} for the first ARGV[1] permits, waiters}.
--@splice shares_of
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local after = '(' .. string.format('%.0f', math.floor(now_us / 1000))
local list = shares_of(KEYS[1], KEYS[3], tonumber(ARGV[1]), now_us)
local limit = redis.call('GET', KEYS[2])
return {limit and tonumber(limit) or -1, redis.call('ZCOUNT', KEYS[1], after, '+inf'), list,
  redis.call('ZCOUNT', KEYS[4], after, '+inf')}

-- inspect: what Redis says about a lock now, in one round trip (operators,
-- the CLI's status and list). Writes nothing.
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] the holder record
-- (acquire.lua), KEYS[4] the notify waiters (token -> until, ms), KEYS[5]
-- the fair line's deadlines (token -> until, ms)
-- Returns {token or false, pttl, fence or false, label or false, since
-- (µs on the server's clock, a string) or false, held_ms or false,
-- waiters}: the record only when it is the current holder's; waiters:
-- those waiting for a release now, notify and fair ones.
--@splice holder_of
local token = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local fence = redis.call('GET', KEYS[2])
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now_ms = math.floor(now_us / 1000)
local after = '(' .. string.format('%.0f', now_ms)
local waiters = redis.call('ZCOUNT', KEYS[4], after, '+inf') + redis.call('ZCOUNT', KEYS[5], after, '+inf')
local label, since, held = holder_of(KEYS[3], token)
return {token, pttl, fence, label or false, since or false, held or false, waiters}

-- redlock_inspect: what one Redlock master has for a lock (operators, CLI).
-- KEYS[1] lock key
-- Returns {token or false, pttl}.
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}

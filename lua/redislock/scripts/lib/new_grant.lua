-- new_grant(grant, f, ms): the hash `grant` of a reentrant lock's fresh
-- grant (acquire_reentrant.lua, rw_write_reentrant.lua): one entry (n), and
-- the fence f that names the grant, which reenter.lua reads and
-- extend_reentrant.lua and release_reentrant.lua compare. Made anew: what
-- a holder of an earlier grant that died left there is overwritten. It
-- lives as the lock: given the lock's lease ms here, raised with it by
-- reenter.lua, renewed with it (extend_reentrant.lua, the watchdog's
-- extend_grant.lua), deleted with it by a release; a holder that dies
-- leaves it to expire with its lease. Spliced by tools/gen_scripts.lua at
-- "--@splice new_grant".
local function new_grant(grant, f, ms)
  redis.call('DEL', grant)
  redis.call('HSET', grant, 'n', 1, 'fence', string.format('%.0f', f))
  redis.call('PEXPIRE', grant, ms)
end

-- new_grant(grant, f): the hash `grant` of a reentrant lock's fresh grant
-- (acquire_reentrant.lua, rw_write_reentrant.lua): one entry (n), and the
-- fence f that names the grant, which reenter.lua reads and
-- extend_reentrant.lua and release_reentrant.lua compare. Made anew: what
-- a holder of an earlier grant that died left there is overwritten (the
-- hash has no ttl; it goes with the lock). Spliced by
-- tools/gen_scripts.lua at "--@splice new_grant".
local function new_grant(grant, f)
  redis.call('DEL', grant)
  redis.call('HSET', grant, 'n', 1, 'fence', string.format('%.0f', f))
end

-- permit_members(token): the members of a semaphore's set of leases that
-- the permit `token` holds. A permit of one is its token; sem:acquire{
-- permits = n} takes n at once under the token "<random>*n", one member
-- each ("<random>*n#1" .. "<random>*n#n"), with one lease end, so that
-- counting the set counts permits. Returns the list, or nil for a count
-- out of range (never a loop of 2^31). Spliced by tools/gen_scripts.lua at
-- "--@splice permit_members".
local function permit_members(token)
  local n = token:match('%*(%d+)$')
  if not n then return {token} end
  n = tonumber(n)
  if n < 2 or n > 10000 then return nil end
  local list = {}
  for i = 1, n do list[i] = token .. '#' .. i end
  return list
end

-- shares_of(zkey, hkey, n, now_us): the first n live shares of a shared
-- lock (a read-write lock's readers, a semaphore's permits): the set zkey
-- (token -> lease end, ms) and their holders in the hash hkey (token ->
-- "<since µs> <label>", rw_read.lua, sem_acquire.lua), at now_us on the
-- server's clock. Returns {label or false, since (µs, a string) or false,
-- held_ms or false, lease left ms, ...}: never a nil, which would cut a
-- reply short. Spliced by tools/gen_scripts.lua at "--@splice shares_of".
local function shares_of(zkey, hkey, n, now_us)
  local list = {}
  local after = '(' .. string.format('%.0f', math.floor(now_us / 1000))
  local live = redis.call('ZRANGEBYSCORE', zkey, after, '+inf', 'WITHSCORES', 'LIMIT', 0, n)
  for i = 1, #live, 2 do
    local entry = redis.call('HGET', hkey, live[i])
    local s, label = false, false
    if entry then s, label = entry:match('^(%d+) (.*)$') end
    list[#list + 1] = label or false
    list[#list + 1] = s or false
    list[#list + 1] = s and math.max(0, math.floor((now_us - tonumber(s)) / 1000)) or false
    list[#list + 1] = math.max(0, math.floor(tonumber(live[i + 1]) - now_us / 1000))
  end
  return list
end

-- wake_waiters(waiters, signal, n, now): wake up to n of the clients that
-- block on the list `signal` for a wakeup, registered in the sorted set
-- `waiters` (token -> until when it blocks, ms of the server's clock, as
-- release_share.lua's waiters): each takes one wakeup; no more wakeups are
-- kept than there are waiters. Spliced by tools/gen_scripts.lua at
-- "--@splice wake_waiters".
local function wake_waiters(waiters, signal, n, now)
  redis.call('ZREMRANGEBYSCORE', waiters, '-inf', now)
  local count = math.min(redis.call('ZCARD', waiters), 1000)
  n = math.min(n, count)
  if n <= 0 then return end
  local ones = {}
  for i = 1, n do ones[i] = '1' end
  redis.call('RPUSH', signal, unpack(ones))
  redis.call('LTRIM', signal, -count, -1)
  local last = redis.call('ZRANGE', waiters, -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', signal, math.max(tonumber(last[2]) - now, 1))
end

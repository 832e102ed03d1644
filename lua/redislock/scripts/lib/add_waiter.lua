-- add_waiter(waiting, token, block_ms, now): a caller refused that will
-- block up to block_ms (ms; 0: it will not) for a wakeup is registered in
-- the sorted set `waiting` (token -> until when it blocks, ms of the
-- server's clock, a second of slack after), which lives as long as its
-- last waiter; a release wakes as many as it frees (wake_waiters). Spliced
-- by tools/gen_scripts.lua at "--@splice add_waiter".
local function add_waiter(waiting, token, block_ms, now)
  if block_ms <= 0 then return end
  redis.call('ZADD', waiting, now + block_ms + 1000, token)
  if redis.call('PTTL', waiting) < block_ms + 1000 then
    redis.call('PEXPIRE', waiting, block_ms + 1000)
  end
end

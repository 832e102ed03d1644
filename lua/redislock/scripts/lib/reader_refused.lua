-- reader_refused(writer, marker, waiting, token, block_ms, now): writer
-- preference for a new reader of a read-write lock (rw_read.lua,
-- rw_read_reentrant.lua): it is kept out while the writer key lives, or
-- a waiting writer's marker does (so the readers in place drain and the
-- writer gets its turn however many readers keep arriving). Kept out, it
-- is registered to wait (add_waiter.lua) and the reply {0, ms} returned
-- (ms: the PTTL of the key in its way); nil when it may read. Spliced by
-- tools/gen_scripts.lua at "--@splice reader_refused", after add_waiter.
local function reader_refused(writer, marker, waiting, token, block_ms, now)
  local blocked = redis.call('PTTL', writer)
  if blocked == -2 then blocked = redis.call('PTTL', marker) end
  if blocked == -2 then return nil end
  add_waiter(waiting, token, block_ms, now)
  return {0, blocked}
end

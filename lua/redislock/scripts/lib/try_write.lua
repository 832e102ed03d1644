-- try_write(w, now): one attempt at the write side of a read-write lock
-- (rw_write.lua, rw_write_reentrant.lua), once the readers whose lease ran
-- out by now (ms) are dropped. w: writer (the writer key), readers,
-- marker (the writer-waiting marker), waiting (the waiting writers),
-- record (the writer's holder record), token, lease (ms), block_ms (how
-- long the caller will block for a wakeup: add_waiter.lua), marker_ms (the
-- marker's life), label. With no reader and no writer the writer key is
-- taken: the writer's marker (if its own) comes down, it leaves the
-- waiting set, its holder record is written (record_holder.lua), and the
-- grant's TIME is returned, the caller's to draw the fence from.
-- Otherwise the writer keeps new readers out while it waits (writer
-- preference: another waiting writer's marker does that as well, one is
-- enough, and it is that writer's to refresh), is registered to wait, and
-- nil is returned with the reply {0, ms} (ms: until the writer's lease or
-- the first reader's ends). Spliced by tools/gen_scripts.lua at
-- "--@splice try_write", after record_holder and add_waiter.
local function try_write(w, now)
  local first = redis.call('ZRANGE', w.readers, 0, 0, 'WITHSCORES')
  if #first == 0 and redis.call('SET', w.writer, w.token, 'NX', 'PX', w.lease) then
    if redis.call('GET', w.marker) == w.token then redis.call('DEL', w.marker) end
    redis.call('ZREM', w.waiting, w.token)
    local t = redis.call('TIME')
    record_holder(w.record, t, w.token, w.label, w.lease)
    return t
  end
  if not redis.call('SET', w.marker, w.token, 'NX', 'PX', w.marker_ms) and
      redis.call('GET', w.marker) == w.token then
    redis.call('PEXPIRE', w.marker, w.marker_ms)
  end
  local wait = redis.call('PTTL', w.writer)
  if wait < 0 and #first > 0 then wait = tonumber(first[2]) - now end
  add_waiter(w.waiting, w.token, w.block_ms, now)
  return nil, {0, wait}
end

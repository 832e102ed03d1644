-- stopped_holder.lua: holds a lock and reports what it sees after a pause.
--
-- usage: lua stopped_holder.lua URL NAME TTL
-- Prints "held" once the lock is taken; the spec then SIGSTOPs this process
-- beyond the ttl and SIGCONTs it. On resume the loss must be visible: prints
-- "lost <reason>" and the outcome of release ("release nil not held").
local redislock = require "redislock"
local core = require "redislock.core"

local url, name, ttl = arg[1], arg[2], tonumber(arg[3])
local client = assert(redislock.connect { url = url })
local lock = assert(client:acquire(name, { ttl = ttl }))
io.stdout:write("held\n")
io.stdout:flush()

-- Poll in small steps; the SIGSTOP lands somewhere in here.
local t0 = core.monotime()
while lock:held() and core.monotime() - t0 < 30 do core.sleep(0.01) end
io.stdout:write("lost ", tostring(lock.lost_reason), "\n")
local ok, err = lock:release()
io.stdout:write("release ", tostring(ok), " ", tostring(err), "\n")
client:close()

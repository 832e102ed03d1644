--- redislock.keys: where a name's keys live.
--
-- Every key of a name shares one Cluster hash tag, so they land in one slot
-- and one script may touch them all. The tag is the whole name between
-- braces; a name that itself contains "{" or "}" could end the tag early
-- (the tag is the text between the FIRST "{" and the first "}" after it:
-- "a}b" would tag "a"), so such names are written with those two bytes
-- escaped, which keeps every possible name whole and distinct inside the
-- braces. Plain names are stored exactly as "{name}", as before.
--
-- The tables are cached per prefix and name (bounded), because an acquire
-- and its release build them on the hot path.

local _M = {}

local CACHE_MAX = 1024

-- "{" -> "\1(", "}" -> "\1)", "\1" -> "\1\1": injective, and free of braces.
local function tag(name)
  if not name:find("[{}\1]") then return name end
  return (name:gsub("[{}\1]", { ["{"] = "\1(", ["}"] = "\1)", ["\1"] = "\1\1" }))
end
_M.tag = tag

local function build(prefix, name)
  local key = prefix .. "{" .. tag(name) .. "}"
  return {
    lock = key,
    fence = key .. ":fence",        -- grows with every grant; lives until the
                                    -- server's clock is fence_ttl past it
    waiters = key .. ":waiters",    -- set while someone waits for a release
    signal = key .. ":signal",      -- release leaves a wakeup here (fair
                                    -- waiters: here .. ":" .. their token)
    queue = key .. ":queue",        -- fair waiters in arrival order
    deadlines = key .. ":queue:deadlines",
    leases = key .. ":queue:leases",
    grant = key .. ":grant",        -- a reentrant lock's grant: its entries
                                    -- and fence; lives as the lock (renewed
                                    -- with it, extend_grant finds it by this
                                    -- suffix, as a reentrant writer's)
    holder = key .. ":holder",      -- "<since us> <token> <label>", written
                                    -- with every grant; lives as the lock
                                    -- (renewed by extend, deleted by release)
    waiting = key .. ":waiting",    -- notify waiters: token -> until when it
                                    -- waits (ms), for inspect's count
  }
end

--- A cache of key tables for one prefix.
-- syntax: keys_of = keys.cache(prefix); keys_of(name) -> { lock=, fence=, ... }
function _M.cache(prefix)
  local cache, n = {}, 0
  return function(name)
    local k = cache[name]
    if k then return k end
    k = build(prefix, name)
    if n >= CACHE_MAX then
      cache, n = {}, 0
    end
    cache[name] = k
    n = n + 1
    return k
  end
end

--- The keys of the read-write lock `name`: apart from the mutex of the
-- same name, in the same slot.
function _M.rwlock(prefix, name)
  local key = prefix .. "{" .. tag(name) .. "}:rw"
  return {
    writer = key,                           -- the writer's token, its lease
    readers = key .. ":readers",            -- reader token -> lease end (ms)
    marker = key .. ":writer_waiting",      -- keeps new readers out
    fence = key .. ":fence",                -- writers' fences
    readers_waiting = key .. ":readers_waiting", -- token -> blocks until (ms)
    readers_signal = key .. ":readers_signal",
    writers_waiting = key .. ":writers_waiting",
    writers_signal = key .. ":writers_signal",
    writer_holder = key .. ":holder",       -- the writer's, as a lock's holder
    reader_holders = key .. ":readers:holders", -- reader token -> "<since us> <label>"
    writer_grant = key .. ":grant",         -- a reentrant writer's entries (n, fence),
                                            -- living as the writer key (extend_grant)
    reader_counts = key .. ":readers:counts", -- a reentrant reader's entries, its grant;
                                            -- living as the shares (rw_renew_reentrant)
  }
end

--- The keys of the semaphore `name`, in one slot.
function _M.semaphore(prefix, name)
  local key = prefix .. "{" .. tag(name) .. "}:sem"
  return {
    permits = key,                          -- permit token -> lease end (ms)
    limit = key .. ":limit",                -- the permits in force
    waiting = key .. ":waiting",            -- token -> blocks until (ms)
    signal = key .. ":signal",
    holders = key .. ":holders",            -- permit token -> "<since us> <label>"
  }
end

--- The name whose keys start with "{" .. tag .. "}" (the inverse of tag).
function _M.untag(t)
  if not t:find("\1", 1, true) then return t end
  return (t:gsub("\1(.)", { ["("] = "{", [")"] = "}", ["\1"] = "\1" }))
end

--- The key of a fenced resource: its value, fence and version in one hash,
-- so that they live and die together (eviction cannot drop the fence and
-- keep the value).
function _M.resource(prefix, resource)
  return prefix .. "{" .. tag(resource) .. "}:resource"
end

return _M

--- redislock.errors: the one table of error kinds, and the one way a
-- failure of the world leaves the library: nil, err, kind, where err starts
-- with its kind (docs/errors.md is this table for readers; a spec checks
-- that the two agree and drives each failure path).
--
-- Inside, a transport (redislock.channel) names its failures with kinds of
-- its own ("connection", "timeout", "redis", "memory"): a socket deadline
-- is "timeout" there, which the wait for a release needs to tell from a
-- dropped connection. Outside, what the caller sees is what happened to the
-- call: a command that timed out is a connection failure ("connection lost:
-- timed out (...)"), and "timeout" means a wait for the lock ran out. fail()
-- turns the one into the other, in one place.

local text = require "redislock.text"

local _M = {}

-- The kinds, in the order docs/errors.md explains them (its table; a spec
-- checks that both list the same words).
_M.KINDS = {
  "busy", "timeout", "not held", "connection", "redis", "watchdog", "unsafe", "replicas", "quorum",
  "stale", "memory", "interrupted", "absent",
}

local IS_KIND = {}
for _, k in ipairs(_M.KINDS) do IS_KIND[k] = true end

--- The kind `err` starts with ("not held", or its first word followed by
-- the end, a space or a colon), or nil.
function _M.kind_of(err)
  if type(err) ~= "string" then return nil end
  if err:sub(1, 8) == "not held" then
    local after = err:sub(9, 9)
    if after == "" or after == ":" or after == " " then return "not held" end
    return nil
  end
  local word = err:match("^(%l+)[%s:]") or err:match("^(%l+)$")
  if word and IS_KIND[word] then return word end
  return nil
end
local kind_of = _M.kind_of

-- What a message from a transport that starts with none of the words gets
-- in front, by the transport's kind.
local PREFIX = {
  memory = "memory: ",
  redis = "redis error: ",
  timeout = "connection lost: ",
}

--- nil, err, kind for the failure err (a message), with hint: the kind
-- the transport gave (redislock.channel), if any. A message that already
-- starts with a kind keeps it (the transport's "timeout" for a command
-- that timed out reads "connection lost: timed out" and is a connection
-- failure); out of memory is always "memory"; anything else is a
-- connection failure (a Sentinel or a Cluster that could not be reached
-- says so in words of its own).
function _M.fail(err, hint)
  err = err == nil and "connection failed: unknown reason" or tostring(err)
  if hint == "memory" or err:sub(1, 13) == "out of memory" then
    if err:sub(1, 7) ~= "memory:" then err = "memory: " .. err end
    return nil, err, "memory"
  end
  local kind = kind_of(err)
  if kind then return nil, err, kind end
  err = (PREFIX[hint] or "connection failed: ") .. err
  return nil, err, kind_of(err)
end
local fail = _M.fail

-- The texts of the failures the library words itself, each written once
-- here (the acquire engine, the Redlock client and client:fd use them).

--- A signal ended a wait (csrc/base/intr.h: Ctrl-C while waiting); a wait
-- the C core ended says so in a message of its own, with the same word.
_M.STOPPED = "interrupted: a signal ended the wait"

--- Did a signal end the call? (its err then starts with the word)
function _M.interrupted(err)
  return type(err) == "string" and err:sub(1, 11) == "interrupted"
end

--- A grant whose reply came after the lease it gave had ended: released,
-- never handed out (the caller would act without a lock, etcd #11456).
_M.TOO_SLOW = "connection too slow: the grant came after its lease ended"

--- What a wait that ran out says: "timeout" where the last attempt said
-- "busy" (the lock was held all along); any other failure as it was.
function _M.waited(err)
  if err == "busy" then return "timeout" end
  return err
end

--- A lock's name as a message shows it: text chosen by the caller, so
-- escaped as holder labels are (redislock.text: control bytes, invalid
-- UTF-8) and bounded (a 1 MB name makes a short message).
_M.NAME_MAX = 200
function _M.shown_name(name)
  return text.shown(name, _M.NAME_MAX)
end

--- A message of `kind` about the lock `name`: the kind word, then the
-- name (escaped), then `rest`, if any. Every busy, timeout and not held
-- message names its lock so (a log line of a service that takes many
-- names says which).
-- syntax: err = errors.about(kind, name [, rest])
function _M.about(kind, name, rest)
  return kind .. ": " .. _M.shown_name(name) .. (rest and " " .. rest or "")
end

--- nil, "not held: NAME", "not held": a release or extend of a lock
-- that is not ours (any more).
function _M.not_held(name)
  return nil, _M.about("not held", name), "not held"
end

--- What with_lock answers when the lease of `name` was lost while fn ran
-- (reason: the lock's lost_reason, docs/errors.md).
function _M.lost_in_fn(name, reason)
  return _M.about("not held", name, "was lost while fn ran (" .. tostring(reason or "not held") .. ")")
end

--- The err of a call for `name` that waited `waited` seconds and ended
-- without a lease, as the caller gets it: a bare kind word (busy,
-- timeout, not held) names the lock; anything else is left as it is.
function _M.named(err, name, waited)
  if err == "timeout" then
    return _M.about("timeout", name, string.format("not taken within %.3g s", waited))
  elseif err == "busy" or err == "not held" then
    return _M.about(err, name)
  end
  return err
end

--- The lock was taken but could not be given a renewal path (why: the
-- transport's reason), or no eventfd could be made for client:fd().
function _M.watchdog_failed(why)
  return "watchdog failed: " .. tostring(why)
end

--- value, or the failure as fail() gives it: the tail of every public call.
-- syntax: return errors.result(value, err, hint)
function _M.result(v, err, hint)
  if v ~= nil and v ~= false then return v end
  if v == false and err == nil then return v end
  return fail(err, hint)
end

return _M

--- redislock.channel: the contract between the policy (acquire, waiting,
-- fencing, admin) and a transport. A transport's open(cfg) returns a
-- channel: an object with exactly these methods. redislock.native (the C
-- core, any Lua host) and redislock.cosocket (nginx cosockets) implement it.
--
-- World failures come back as nil, err, kind, never raised. err is a
-- message for people; kind is what code branches on, never the text:
--   "connection"  could not connect, or the connection was lost
--   "timeout"     the deadline passed (connecting, or waiting for a reply)
--   "redis"       Redis answered with an error
--   "memory"      out of memory
-- These are the transport's own: redislock.errors turns them into the kinds
-- callers see (a command that timed out is a "connection" failure there).
--
--   ch:script(name, keys..., args...)  -> reply | nil, err, kind
--       runs the embedded script `name` (EVALSHA, LOAD + EVAL on NOSCRIPT) on the
--       node that holds its first key
--   ch:command(name, args...)          -> reply | nil, err, kind
--       on the node of its first argument taken as a key
--   ch:deadline(t)                     the caller's own deadline (core.monotime's
--       clock; nil: none) for the next script or command call only: a
--       refusal that did not run and asks to be waited out (TRYAGAIN while
--       a slot moves, LOADING) is waited out until t at most, and then is
--       that call's answer (even after one try, when t is over already);
--       each request still gets the whole timeout for its reply. What a
--       refusal asks for is the C core's rule (csrc/exec/recovery.h), in
--       every transport
--   ch:replicas(n, timeout)            -> acks | nil, err, kind
--       WAIT n on the connection of the last script (its write)
--   ch:wait_next(n, timeout), ch:waited() -> acks | nil, err, kind
--       the next script call's write is followed by WAIT n on its own
--       connection (cosockets: in the same call); waited() gives the answer
--   ch:failover_acks(key)              -> n
--       replicas that must acknowledge a write on the node of key before a
--       failover keeps it: every one a failover could promote in that
--       node's place (csrc/watchdog/wd_ack.c), 0 where none could
--   ch:block(key, seconds, exact, spin) -> value | false | nil, err, kind
--       BLPOP key on a connection of its own for up to `seconds` (false:
--       none came); exact = true: the caller's deadline ends at `seconds`,
--       so the transport must end the wait then, not when Redis does
--   ch:wait_try(key, seconds, spin, name, keys..., args...)
--       -> true, wakeup | false | nil, reply | false  |  false  |
--          nil, err, kind [, "unsent"]
--       the same BLPOP with script `name` queued behind it on that
--       connection, so Redis runs it the moment the BLPOP returns; Redis
--       ends the wait (seconds must end well before the caller's
--       deadline). true: wakeup as block's (nil: Redis refused the BLPOP,
--       nobody waited), reply the script's (false: it did not run). false:
--       nothing sent (the transport cannot, or not now): wait with block.
--       nil, err, kind: failed, the script may have run ("unsent": it did
--       not, nothing was sent)
--   ch:sleep(seconds)                  waits without blocking others where
--                                      the host can (nginx)
--   ch:watch(key, token, ttl, lease_end, hold_until, renew [, spare]) -> watch, id | nil, err
--       registers a held lock with the native watchdog thread; spare: a
--       released lock's watch handle, bound anew instead of a new one
--       made (false or absent: none). Both transports' (the cosocket one's
--       watchdog is native too)
--   ch:losses() -> { id, reason, ... } | nil     pending loss reports
--   ch:fd() -> fd | nil, err                      readable while reports wait
--   ch:stats() -> table                           the C core's counters
--   ch:events() -> { {event =, ...}, ... } | nil  C-side events for on_event
--       (renewal_failed, reconnect, topology_changed); the first call turns
--       them on (redislock.events)
--   ch:server_info() -> { maxmemory_policy =, info_error = }
--   ch:close(), ch:closed() -> bool
--   ch:caller() -> a value     only a transport whose waits yield (cosocket):
--       who calls now (nginx: the request's ngx.ctx), so that a call is
--       refused at once only for a lock its own caller holds

local _M = {}

_M.METHODS = {
  "script", "command", "deadline", "replicas", "wait_next", "waited", "failover_acks", "block", "wait_try",
  "sleep", "watch", "losses", "fd", "stats", "events", "server_info", "close", "closed",
}

--- Raises if ch lacks a method of the contract (a transport's bug).
function _M.check(ch)
  for _, m in ipairs(_M.METHODS) do
    if type(ch[m]) ~= "function" then
      error("redislock: transport channel lacks '" .. m .. "'", 2)
    end
  end
  return ch
end

return _M

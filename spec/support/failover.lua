--[[
spec/support/failover.lua -- the checker and the outside view of issue 22's
Sentinel failover specs (spec/29-sentinel_failover_spec.lua and the nginx
one in test/hosts/nginx_topology_spec.lua).

  local failover = require "spec.support.failover"
  local rival = failover.spawn_rival(seeds, name, ttl, "keep")
  local grants = failover.rival_grants(rival:stdout())
  local n, list, last_true = failover.grants_while_held(t_acquired, samples, grants)
  local w = failover.watch { sen = sen, old = master, new = replica, key = k, token = t, ttl = 8 }
  w:tick()   -- in the spec's loop: w.t_named, w.t_promoted, w.t_renew, w.t_demoted

Every time is on CLOCK_MONOTONIC (helpers.monotime, core.monotime: the same
clock in every process of the machine). Loadable on Lua 5.1 (the nginx spec
runs on LuaJIT).
]]

local helpers = require "spec.helpers"
local core = require "redislock.core"

local M = {}

--- "host:port" of every sentinel of `sen` (topology.start_sentinels).
function M.seeds(sen)
  local out = {}
  for i, a in ipairs(sen:addrs()) do out[i] = a.host .. ":" .. a.port end
  return out
end

--- A rival process (spec/support/failover_rival.lua) trying `name` every
-- `interval` seconds (default 0.05) through the sentinels (`seeds`, a list)
-- or straight to one node (`seeds`, a URL); mode "keep" (one client) or
-- "fresh" (a new client per try). Returns the Proc once it has started.
function M.spawn_rival(seeds, name, ttl, mode, interval)
  local where = type(seeds) == "table" and table.concat(seeds, ",") or seeds
  local p = helpers.spawn(helpers.lua_cmd("spec/support/failover_rival.lua", where, name, ttl, mode,
    interval or 0.05))
  p.mode = mode
  assert(helpers.wait_until(function() return p:stdout():find("^start ") or not p:alive() end, 10, 0.02)
    and p:alive(), "rival did not start: " .. p:stderr())
  return p
end

--- A holder process (`script` with its arguments: failover_holder.lua,
-- hung_holder.lua) started, and its grant: the Proc, then the time it
-- printed "acquired T KEY TOKEN" with, the key and the token. Raises if it
-- did not acquire within 15 s.
function M.spawn_holder(script, ...)
  local holder = helpers.spawn(helpers.lua_cmd(script, ...))
  local t, key, token
  assert(helpers.wait_until(function()
    t, key, token = holder:stdout():match("acquired (%S+) (%S+) (%x+)")
    return t or not holder:alive()
  end, 15, 0.02) and t, "holder did not acquire: " .. holder:stderr())
  return holder, tonumber(t), key, token
end

--- The grants a rival logged: { {t0, t1, token}, ... }.
function M.rival_grants(text)
  local list = {}
  for t0, t1, token in text:gmatch("grant (%S+) (%S+) (%x+)") do
    list[#list + 1] = { tonumber(t0), tonumber(t1), token }
  end
  return list
end

--- The holder's held() samples from failover_holder.lua's log: { {t, bool}, ... }.
function M.held_samples(text)
  local list = {}
  for t, h in text:gmatch("held (%S+) ([01])") do list[#list + 1] = { tonumber(t), h == "1" } end
  return list
end

--- The checker. A lock is never held again once it is not (lock:held()),
-- so the holder held it from t_acquired to its last true sample (each
-- sample's time taken before the call). A rival grant counts when the
-- moment its acquire returned (T1: the server granted it at or before T1)
-- lies in that span: then two processes held the name at once, each told
-- so by the library. Returns the count, those grants, the last true
-- sample's time, and how many samples said true after one said false
-- (must be 0: held() never comes back).
function M.grants_while_held(t_acquired, samples, grants)
  local last_true, seen_false, revived = nil, false, 0
  for _, s in ipairs(samples) do
    if s[2] then
      if seen_false then revived = revived + 1 end
      if not last_true or s[1] > last_true then last_true = s[1] end
    else
      seen_false = true
    end
  end
  local bad = {}
  if last_true then
    for _, g in ipairs(grants) do
      if g[2] >= t_acquired and g[2] <= last_true then bad[#bad + 1] = g end
    end
  end
  return #bad, bad, last_true, revived
end

---------------------------------------------------------------------------
-- The outside view: when the sentinels name the new master, when it was
-- promoted, when the holder's key there was first set by a renewal sent to
-- it, when the old master was demoted.
---------------------------------------------------------------------------

local Watch = {}
Watch.__index = Watch

-- One command on the new master over a direct connection (made again
-- after an error: Sentinel kills the clients of the node it promotes).
function Watch:_ask(...)
  for _ = 1, 2 do
    if not self.conn then
      self.conn = core.connect { host = self.new.host, port = self.new.port, connect_timeout = 0.5, timeout = 0.5 }
    end
    if self.conn then
      local r = self.conn:command(...)
      if r ~= nil then return r end
      self.conn:close()
      self.conn = nil
    end
  end
  return nil
end

local KEY_STATE = "return (redis.call('GET', KEYS[1]) or '') .. ' ' .. redis.call('PTTL', KEYS[1])"

--- One look at the world; call it every ~50 ms. Sets, each once:
--   t_named     the first moment a sentinel named another master than `old`
--   named_port  that master's port
--   t_promoted  the first look at which the new master said ROLE master
--   t_renew     when the holder's key on the new master was set to the full
--               ttl by a write sent to the new master itself (from its
--               PTTL: a renewal replicated before the promotion dates from
--               before it), the holder's first renewal there
--   t_demoted   the first look at which `old` said it is a replica (not
--               asked while w.paused is true: a SIGSTOPped server would
--               never answer redis-cli)
function Watch:tick()
  local now = helpers.monotime()
  if not self.t_named then
    for _, s in ipairs(self.sen.list) do
      local _, port = self.sen:master_addr(s)
      if port and port ~= self.old.port then
        self.t_named, self.named_port = now, port
        break
      end
    end
  end
  local before = helpers.monotime()
  local role = self:_ask("ROLE")
  if not self.t_promoted and type(role) == "table" and role[1] == "master" then
    -- promoted at some moment since the previous look
    self.t_promoted, self.promoted_after = before, self.t_last_look or before
  end
  self.t_last_look = before
  if self.t_promoted and not self.t_renew then
    local t0 = helpers.monotime()
    local state = self:_ask("EVAL", KEY_STATE, 1, self.key)
    local t1 = helpers.monotime()
    local value, pttl = tostring(state or ""):match("^(%S*) (%-?%d+)$")
    pttl = tonumber(pttl)
    if value == self.token and pttl and pttl > 0 then
      local set_at = (t0 + t1) / 2 + pttl / 1000 - self.ttl
      -- 20 ms for PTTL's rounding and this look's own duration
      if set_at > self.promoted_after + 0.02 then
        self.t_renew = set_at
      elseif not self.replicated_until then
        self.replicated_until = set_at + self.ttl
      end
    end
  end
  if not self.t_demoted and not self.paused and now >= (self.next_role_at or 0) then
    self.next_role_at = now + 0.5
    if (self.old:cli_raw("ROLE")):find("^slave") then self.t_demoted = now end
  end
end

function Watch:close()
  if self.conn then self.conn:close() end
  self.conn = nil
end

--- A watch over a failover from `old` to `new` (server objects), for the
-- key `key` holding `token` with a lease of `ttl` seconds; `sen` the
-- sentinels.
function M.watch(opts)
  return setmetatable({ sen = opts.sen, old = opts.old, new = opts.new, key = opts.key, token = opts.token,
                        ttl = opts.ttl }, Watch)
end

--- "1.23 s", or "never" for nil.
function M.seconds(t)
  if not t then return "never" end
  return string.format("%.2f s", t)
end

---------------------------------------------------------------------------
-- One scenario's fault and the watch over it, and what it showed
---------------------------------------------------------------------------

-- The holder asks for a second name this long after the first sentinel
-- named the new master: time for a client to learn of the switch (and, in
-- "failover_pause", after the old master resumed). The grant must land there.
M.GRANT_AFTER = 2.5
-- How long a scenario watches after the naming: the lease on the new
-- master runs out within the ttl if nobody renews it there, and Sentinel
-- demotes an old master that still says "master" after about 10 s; then
-- AFTER_DEMOTION more. At most OBSERVE_MAX if no demotion is seen.
M.AFTER_DEMOTION, M.OBSERVE_MAX = 2, 20
-- The lock can be kept only if the lease the new master got by
-- replication outlasts the naming by this much (a master paused on a slow
-- day: Sentinel may fail over after the lease there ended).
M.KEEP_SLACK = 2

--- Makes the fault and watches until the end of the scenario.
-- opts:
--   kind = "failover"        SENTINEL FAILOVER alone
--          "failover_pause"  SENTINEL FAILOVER, the old master SIGSTOPped
--                            2 s from the moment a sentinel names the new one
--          "master_pause"    the master SIGSTOPped 4 s (past
--                            down-after-milliseconds: Sentinel fails over)
--   sen, old, new, key, token, ttl   as for watch()
--   name            the held name (the second grant is NAME:after)
--   sample()        called every ~50 ms (a spec that takes the holder's
--                   held() samples itself)
--   grant(name)     asks the holder for `name`, GRANT_AFTER after the
--                   naming, and is called again each tick until it answers:
--                   nil while it has no answer, then {t =, key =, token =}
--                   (t: when the grant returned) or {fail = why}
-- Returns the watch (closed), t_fault, and the grant with on_new / on_old
-- (its key holds its token there, looked at as soon as it was granted: a
-- demoted old master loses its data).
function M.run_fault(opts)
  local w = M.watch(opts)
  local old, new = opts.old, opts.new
  local ok, err = pcall(function()
    w.t_fault = helpers.monotime()
    local resume_at
    if opts.kind == "master_pause" then
      old:kill("STOP")
      w.paused, resume_at = true, w.t_fault + 4
    else
      local done, out = opts.sen:failover()
      assert(done, "SENTINEL FAILOVER: " .. tostring(out))
    end
    local paused_once = opts.kind == "master_pause"
    local asked
    while true do
      w:tick()
      if opts.sample then opts.sample() end
      local now = helpers.monotime()
      if opts.kind == "failover_pause" and w.t_named and not paused_once then
        old:kill("STOP")
        w.paused, resume_at, paused_once = true, now + 2, true
      end
      if w.paused and now >= resume_at then
        old:kill("CONT")
        w.paused = false
      end
      if w.t_named and not w.grant and now >= w.t_named + M.GRANT_AFTER then
        local g = opts.grant(opts.name .. ":after", asked)
        asked = true
        if g then
          if g.key then
            g.on_new = new:cli_raw("GET", g.key) == g.token
            g.on_old = not w.paused and old:cli_raw("GET", g.key) == g.token
          end
          w.grant = g
        end
      end
      if not w.t_named then
        assert(now - w.t_fault < 20, "no failover: the sentinels still name the old master")
      elseif not w.paused and w.grant and now >= w.t_named + opts.ttl + 3
        and (now >= (w.t_demoted or math.huge) + M.AFTER_DEMOTION or now >= w.t_named + M.OBSERVE_MAX) then
        break
      elseif not w.paused and now >= w.t_named + M.OBSERVE_MAX + 10 then
        break   -- the holder never answered the grant
      end
      helpers.sleep(0.05)
    end
  end)
  old:kill("CONT")
  w.paused = false
  w:close()
  if not ok then error(err, 0) end
  w.grant = w.grant or { fail = "no answer from the holder" }
  return w, w.t_fault, w.grant
end

--- What a scenario showed. opts: label, w (from run_fault), t_acquired
-- (the holder's), samples (held() samples), rivals (their Procs, still
-- with their logs), token (the holder's), kept_value (GET of the held key
-- on the new master at the end), held_at_end (nil: the last sample).
-- Returns { bad (rival grants while held), grants (all), revived,
-- keepable, kept, held_at_end, line (the "# ..." text to print) }.
function M.summary(opts)
  local w, t_fault = opts.w, opts.w.t_fault
  local grants, by_mode = {}, {}
  for _, r in ipairs(opts.rivals) do
    local list = M.rival_grants(r:stdout())
    local n = M.grants_while_held(opts.t_acquired, opts.samples, list)
    by_mode[#by_mode + 1] = ("%s client %d of %d"):format(r.mode, n, #list)
    for _, g in ipairs(list) do grants[#grants + 1] = g end
  end
  table.sort(grants, function(a, b) return a[2] < b[2] end)
  local bad, list, last_true, revived = M.grants_while_held(opts.t_acquired, opts.samples, grants)
  local grant = w.grant
  local first_on_new = w.t_renew
  if grant.on_new and (not first_on_new or grant.t < first_on_new) then first_on_new = grant.t end
  local function at(t) return t and ("+" .. M.seconds(t - t_fault)) or "never" end
  local r = { bad = bad, grants = #grants, revived = revived, kept = opts.kept_value == opts.token,
              keepable = w.t_renew ~= nil or (w.replicated_until or -math.huge) > w.t_named + M.KEEP_SLACK }
  r.held_at_end = opts.held_at_end
  if r.held_at_end == nil then r.held_at_end = opts.samples[#opts.samples] and opts.samples[#opts.samples][2] end
  local lines = {
    ("# %s: rival grants while held %d, rival grants %d (%s)"):format(opts.label, bad, #grants,
      table.concat(by_mode, ", ")),
    ("#   the holder's first renewal or grant on the new master %s after the naming (renewal %s;"
      .. " its grant after the switch: %s)"):format(M.seconds(first_on_new and first_on_new - w.t_named),
      M.seconds(w.t_renew and w.t_renew - w.t_named),
      grant.on_new and "on the new master" or grant.on_old and "on the OLD master"
        or grant.fail and ("failed: " .. grant.fail) or "on neither master"),
    ("#   from the fault: named %s, demoted %s, replicated lease on the new master until %s,"
      .. " first rival grant while held %s, held() true until %s; lock kept on the new master: %s%s"):format(
      at(w.t_named), at(w.t_demoted), at(w.replicated_until), at(list[1] and list[1][2]), at(last_true),
      tostring(r.kept), r.keepable and "" or " (not asked: the replicated lease there ended too soon)"),
  }
  r.line = table.concat(lines, "\n")
  return r
end

return M

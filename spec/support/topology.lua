--[[
spec/support/topology.lua -- replication, Sentinel and Cluster set-ups made of
real redis-server / redis-sentinel processes on loopback, for specs
(valkey-server / valkey-sentinel with SERVER=valkey: helpers.bin).

  local topo = require "spec.support.topology"
  local rep = topo.start_replicated { replicas = 1, link_proxy = true }
  local sen = topo.start_sentinels { master = rep.master, count = 3 }
  local cl  = topo.start_cluster { masters = 3, replicas = 1 }

Every process comes from helpers.start_redis / helpers.start_proxy, so it is
registered for helpers.stop_all() and dies with this Lua process through its
guardian, even on kill -9. Each set-up also has an idempotent :stop().
Loadable on Lua 5.1 (no goto, no bit operators, no integer division).
]]

local helpers = require "spec.helpers"

local M = {}

local function copy(t)
  local c = {}
  for k, v in pairs(t or {}) do c[k] = v end
  return c
end

-- A double-quoted string as Redis' config parser (sdssplitargs) reads it.
local function conf_quote(s)
  assert(not s:find("%c"), "control characters in a config value")
  return '"' .. s:gsub('[\\"]', "\\%0") .. '"'
end

local function lines(s)
  local list = {}
  for line in (s or ""):gmatch("[^\r\n]+") do list[#list + 1] = line end
  return list
end

-- The readiness checks below poll many servers many times a second: they
-- ask through Server:call (a connection in this process), not redis-cli (a
-- process per question, which loaded the machine the spec files share).

-- A bulk string reply of srv, "" if it gave anything else.
local function bulk(srv, ...)
  local v = srv:call(...)
  return type(v) == "string" and v or ""
end

--- INFO [section] of `srv` as a table of strings ("role" -> "master").
function M.info(srv, section)
  local t = {}
  for k, v in bulk(srv, "INFO", section or "everything"):gmatch("([%w_]+):([^\r\n]*)") do
    t[k] = v
  end
  return t
end

--- "master", "slave" (or "sentinel") from ROLE; nil if it does not answer.
function M.role(srv)
  local reply = srv:call("ROLE")
  local r = type(reply) == "table" and reply[1]
  if r == "master" or r == "slave" or r == "sentinel" then return r end
  return nil
end

---------------------------------------------------------------------------
-- Replication
---------------------------------------------------------------------------

local Replicated = {}
Replicated.__index = Replicated

--- Wait until every replica's link is up, its initial sync done, and its
-- offset has reached the master's offset at the time of the call (so every
-- write acknowledged before the call is on every replica). true, or nil
-- after timeout_s (default 10).
function M.wait_replicas_synced(master, replicas, timeout_s)
  local target = tonumber(M.info(master, "replication").master_repl_offset) or 0
  return helpers.wait_until(function()
    for _, r in ipairs(replicas) do
      local i = M.info(r, "replication")
      if i.master_link_status ~= "up" or i.master_sync_in_progress ~= "0"
        or (tonumber(i.slave_repl_offset) or -1) < target then
        return false
      end
    end
    return true
  end, timeout_s or 10, 0.02)
end

-- The nodes of the group by their role now (a failover swaps them): the one
-- master and the others, or nil while there is not exactly one master.
local function roles(nodes)
  local master, others = nil, {}
  for _, n in ipairs(nodes) do
    if M.info(n, "replication").role == "master" then
      if master then return nil end
      master = n
    else
      others[#others + 1] = n
    end
  end
  return master, others
end

--- Wait until every node replicates, in sync, from the group's one master,
-- whichever node that is now (a spec's failover may have swapped them).
function Replicated:wait_sync(timeout_s)
  local nodes = { self.master }
  for _, r in ipairs(self.replicas) do nodes[#nodes + 1] = r end
  return helpers.wait_until(function()
    local master, others = roles(nodes)
    return master ~= nil and M.wait_replicas_synced(master, others, 0)
  end, timeout_s or 10, 0.05)
end

--- Stop the replicas, their link proxies and the master. Idempotent.
function Replicated:stop()
  for _, r in ipairs(self.replicas) do r:stop() end
  for _, l in pairs(self.links) do l:stop() end
  self.master:stop()
end

--- A master and `replicas` replicas (--replicaof), synced on return.
-- opts (all optional):
--   replicas = 1        how many
--   link_proxy = false  true: replica i replicates through its own proxy
--                       (rep.links[i], spec/support/proxy.lua), so a spec can
--                       stall replication with rep.links[i]:kill("STOP") or
--                       proxy commands, e.g. before `REPLICAOF NO ONE`
--   password = "pw"     on every node (masterauth too)
--   args = {...}        extra redis-server arguments for every node
--   debug = true        --enable-debug-command local on every node
--   tls = {...}         every node TLS only (helpers.start_redis's tls;
--                       replication = true for the replicas' links)
--   timeout = 10        seconds to wait for the sync
-- Returns { master = srv, replicas = {srv...}, links = {proxy...} } with
-- :wait_sync(timeout_s) and :stop().
-- Masters sync diskless with no delay (repl-diskless-sync-delay 0) so a
-- replica is ready in well under a second instead of Redis' default 5 s.
function M.start_replicated(opts)
  opts = opts or {}
  local base = { password = opts.password, debug = opts.debug, tls = opts.tls, args = { "--repl-diskless-sync", "yes",
    "--repl-diskless-sync-delay", "0" } }
  for _, a in ipairs(opts.args or {}) do base.args[#base.args + 1] = a end
  local g = setmetatable({ replicas = {}, links = {} }, Replicated)
  g.master = helpers.start_redis(copy(base))
  local ok, err = pcall(function()
    for i = 1, opts.replicas or 1 do
      local o = copy(base)
      o.replicaof = g.master
      if opts.link_proxy then
        g.links[i] = helpers.start_proxy(g.master)
        o.replicaof = { host = "127.0.0.1", port = g.links[i].port }
      end
      g.replicas[i] = helpers.start_redis(o)
    end
    assert(g:wait_sync(opts.timeout or 10), "replicas did not sync")
  end)
  if not ok then
    g:stop()
    error(err, 2)
  end
  return g
end

---------------------------------------------------------------------------
-- Sentinel
---------------------------------------------------------------------------

local Sentinels = {}
Sentinels.__index = Sentinels

-- A flat array reply (SENTINEL MASTER ...) of key, value, ... as a table.
local function kv(list)
  local t = {}
  if type(list) ~= "table" then return t end
  for i = 1, #list - 1, 2 do t[list[i]] = list[i + 1] end
  return t
end

local function live(list)
  local out = {}
  for _, s in ipairs(list) do
    if not s.stopped and s:alive() then out[#out + 1] = s end
  end
  return out
end

--- host, port of the master as `sentinel` (default: the first one alive)
-- reports it (SENTINEL GET-MASTER-ADDR-BY-NAME); nil if it cannot say.
function Sentinels:master_addr(sentinel)
  local s = sentinel or live(self.list)[1]
  if not s then return nil end
  local addr = s:call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name)
  if type(addr) ~= "table" or not addr[1] or not tonumber(addr[2]) then return nil end
  return addr[1], tonumber(addr[2])
end

--- SENTINEL FAILOVER on `sentinel` (default the first alive). true, or
-- false and the reply (e.g. "NOGOODSLAVE ...").
function Sentinels:failover(sentinel)
  local s = sentinel or live(self.list)[1]
  local out = s:cli_raw("SENTINEL", "FAILOVER", self.name)
  return out == "OK", out
end

-- "host:port" of a server, a {host, port} pair, "host:port" or a port.
local function addr_of(x)
  if type(x) == "table" then
    return (x.host or x[1] or "127.0.0.1") .. ":" .. tostring(x.port or x[2])
  end
  if tonumber(x) then return "127.0.0.1:" .. x end
  return tostring(x)
end

--- Wait until every live sentinel reports the same master address, other
-- than `old` (a server, {host, port}, "host:port" or a port). Returns host,
-- port, and the seconds waited; nil after timeout_s (default 15).
function Sentinels:wait_master_change(old, timeout_s)
  old = addr_of(old)
  local t0 = helpers.monotime()
  local host, port
  local found = helpers.wait_until(function()
    local seen
    for _, s in ipairs(live(self.list)) do
      local h, p = self:master_addr(s)
      if not h or h .. ":" .. p == old or (seen and seen ~= h .. ":" .. p) then return false end
      seen, host, port = h .. ":" .. p, h, p
    end
    return seen ~= nil
  end, timeout_s or 15, 0.05)
  if not found then return nil end
  return host, port, helpers.monotime() - t0
end

--- The server object (among `candidates`, default the group's known
-- servers) listening on host:port; nil if none.
function Sentinels:server_at(host, port, candidates)
  for _, s in ipairs(candidates or self.servers or {}) do
    if s.port == port and (s.host == host or not host) then return s end
  end
  return nil
end

--- {host, port} of every sentinel, for a client's configuration.
function Sentinels:addrs()
  local out = {}
  for i, s in ipairs(self.list) do out[i] = { host = s.host, port = s.port } end
  return out
end

--- true once every live sentinel sees the master, `replicas` healthy
-- replicas and the other live sentinels (what a failover needs); else
-- false and what the first one not ready said.
function Sentinels:ready(replicas)
  local alive = live(self.list)
  for _, s in ipairs(alive) do
    local m = kv(s:call("SENTINEL", "MASTER", self.name))
    if m.flags ~= "master" or tonumber(m["num-other-sentinels"]) ~= #alive - 1
      or tonumber(m["num-slaves"] or -1) < replicas then
      return false, ("flags %s, %s other sentinel(s), %s replica(s)"):format(tostring(m.flags),
        tostring(m["num-other-sentinels"]), tostring(m["num-slaves"]))
    end
    local list = s:call("SENTINEL", "REPLICAS", self.name)
    local good = 0
    for _, r in ipairs(type(list) == "table" and list or {}) do
      local f = kv(r)
      if f.flags == "slave" and f["master-link-status"] == "ok" then good = good + 1 end
    end
    if good < replicas then return false end
  end
  return true
end

function Sentinels:stop()
  for _, s in ipairs(self.list) do s:stop() end
end

--- `count` redis-sentinel processes monitoring `master`, each on a free
-- loopback port with a writable config file in its own temp dir.
-- opts:
--   master = srv                the master to monitor (required)
--   name = "mymaster"
--   count = 3, quorum = 2
--   down_after_ms = 1000        sentinel down-after-milliseconds
--   failover_timeout_ms = 3000  sentinel failover-timeout
--   password = master.password  sentinel auth-pass (the data nodes' password)
--   sentinel_password = nil     requirepass of the sentinels themselves
--                               (and sentinel sentinel-pass between them)
--   replicas = <master's connected_slaves>  wait until the sentinels see
--                               this many healthy replicas
--   servers = {srv...}          the data nodes, for :server_at()
--   tls = {...}                 the sentinels TLS only (helpers.start_redis's
--                               tls; replication = true: they reach the
--                               data nodes and each other over TLS)
--   timeout = 15                seconds to wait until ready
-- Returns { list = {sentinel srv...}, name, master } with :master_addr(),
-- :failover(), :wait_master_change(old, t), :server_at(host, port),
-- :addrs(), :ready(n), :stop(). Ready on return: every sentinel knows the
-- others (hello messages, ~2 s) and the replicas, so a failover can start.
function M.start_sentinels(opts)
  local master = assert(opts and opts.master, "start_sentinels: master required")
  local name = opts.name or "mymaster"
  local password = opts.password
  if password == nil then password = master.password end
  local conf = {
    ("sentinel monitor %s %s %d %d"):format(name, master.host, master.port, opts.quorum or 2),
    ("sentinel down-after-milliseconds %s %d"):format(name, opts.down_after_ms or 1000),
    ("sentinel failover-timeout %s %d"):format(name, opts.failover_timeout_ms or 3000),
    ("sentinel parallel-syncs %s 1"):format(name),
  }
  if password then conf[#conf + 1] = ("sentinel auth-pass %s %s"):format(name, conf_quote(password)) end
  if opts.sentinel_password then
    conf[#conf + 1] = ("sentinel sentinel-pass %s"):format(conf_quote(opts.sentinel_password))
  end
  local replicas = opts.replicas or tonumber(M.info(master, "replication").connected_slaves) or 0
  local g = setmetatable({ list = {}, name = name, master = master, servers = opts.servers }, Sentinels)
  local ok, err = pcall(function()
    for i = 1, opts.count or 3 do
      g.list[i] = helpers.start_redis { bin = helpers.bin.sentinel, config = table.concat(conf, "\n") .. "\n",
                                        password = opts.sentinel_password, tls = opts.tls }
    end
    local why
    assert(helpers.wait_until(function()
      local ready
      ready, why = g:ready(replicas)
      return ready
    end, opts.timeout or 15, 0.1), "sentinels did not see each other and " .. replicas .. " replica(s): "
      .. tostring(why))
  end)
  if not ok then
    g:stop()
    error(err, 2)
  end
  return g
end

--- A describe block's master, replicas and three sentinels: started in its
-- setup, stopped in its teardown. Returns a table that holds, once set up,
-- .rep (start_replicated's), .sen (start_sentinels') and .seeds (their
-- "host:port" list). opts: start_replicated's, and .sentinels for
-- start_sentinels' (its master is .rep.master).
function M.sentinel_fixture(opts)
  opts = opts or {}
  local busted = require "busted"   -- (its setup, teardown: not globals here)
  local fx = {}
  busted.setup(function()
    fx.rep = M.start_replicated(opts)
    local so = { master = fx.rep.master }
    for k, v in pairs(opts.sentinels or {}) do so[k] = v end
    fx.sen = M.start_sentinels(so)
    fx.seeds = {}
    for i, a in ipairs(fx.sen:addrs()) do fx.seeds[i] = a.host .. ":" .. a.port end
  end)
  busted.teardown(function()
    if fx.sen then fx.sen:stop() end
    if fx.rep then fx.rep:stop() end
  end)
  return fx
end

---------------------------------------------------------------------------
-- Cluster
---------------------------------------------------------------------------

-- Lua 5.1 has no bit operators: xor by arithmetic, bit by bit.
local function bxor16(a, b)
  local r, p = 0, 1
  for _ = 1, 16 do
    local x, y = a % 2, b % 2
    if x ~= y then r = r + p end
    a, b, p = (a - x) / 2, (b - y) / 2, p * 2
  end
  return r
end

--- The cluster slot of `key` (CRC16/XMODEM of the key or of its {hash tag},
-- mod 16384), as CLUSTER KEYSLOT computes it, without asking a server.
function M.keyslot(key)
  local s = key:find("{", 1, true)
  if s then
    local e = key:find("}", s + 1, true)
    if e and e > s + 1 then key = key:sub(s + 1, e - 1) end
  end
  local crc = 0
  for i = 1, #key do
    crc = bxor16(crc, key:byte(i) * 256)
    for _ = 1, 8 do
      if crc >= 32768 then
        crc = bxor16((crc * 2) % 65536, 0x1021)
      else
        crc = (crc * 2) % 65536
      end
    end
  end
  return math.floor(crc % 16384)
end

local Cluster = {}
Cluster.__index = Cluster

-- CLUSTER NODES as seen by `srv`: list of { id, host, port, flags (set),
-- master_id, slots = { {from, to}... }, migrating = {slot = id},
-- importing = {slot = id}, myself }.
local function parse_nodes(text)
  local list = {}
  for _, line in ipairs(lines(text)) do
    local f = {}
    for w in line:gmatch("%S+") do f[#f + 1] = w end
    if #f >= 8 then
      local host, port = f[2]:match("^(.*):(%d+)@")
      local n = { id = f[1], host = host, port = tonumber(port), flags = {}, master_id = f[4],
                  link = f[8], slots = {}, migrating = {}, importing = {} }
      for flag in f[3]:gmatch("[^,]+") do n.flags[flag] = true end
      for i = 9, #f do
        local a, b = f[i]:match("^(%d+)%-(%d+)$")
        local one = f[i]:match("^(%d+)$")
        local ms, mid = f[i]:match("^%[(%d+)%->%-(%x+)%]$")
        local is, iid = f[i]:match("^%[(%d+)%-<%-(%x+)%]$")
        if a then
          n.slots[#n.slots + 1] = { tonumber(a), tonumber(b) }
        elseif one then
          n.slots[#n.slots + 1] = { tonumber(one), tonumber(one) }
        elseif ms then
          n.migrating[tonumber(ms)] = mid
        elseif is then
          n.importing[tonumber(is)] = iid
        end
      end
      n.myself = n.flags.myself or false
      list[#list + 1] = n
    end
  end
  return list
end

--- The nodes as `via` (default the first live node) sees them: CLUSTER NODES
-- parsed, each entry with .srv (our server object) when we started it.
function Cluster:view(via)
  via = via or self:any()
  local list = parse_nodes(bulk(via, "CLUSTER", "NODES"))
  for _, n in ipairs(list) do n.srv = self.by_port[n.port] end
  return list
end

function Cluster:any()
  for _, s in ipairs(self.nodes) do
    if not s.stopped and s:alive() then return s end
  end
  error("cluster: no node alive", 2)
end

--- The server owning `slot` (0..16383) according to `via`; nil if none.
function Cluster:node_for_slot(slot, via)
  for _, n in ipairs(self:view(via)) do
    if n.flags.master and not n.flags.fail then
      for _, r in ipairs(n.slots) do
        if slot >= r[1] and slot <= r[2] then return n.srv, n end
      end
    end
  end
  return nil
end

--- The server owning `key`'s slot; also returns the slot.
function Cluster:node_for_key(key, via)
  local slot = M.keyslot(key)
  return self:node_for_slot(slot, via), slot
end

--- Live masters (server objects) in slot order, and replicas of `master`.
function Cluster:masters(via)
  local list = {}
  for _, n in ipairs(self:view(via)) do
    if n.flags.master and not n.flags.fail and n.slots[1] and n.srv then
      list[#list + 1] = { n.slots[1][1], n.srv }
    end
  end
  table.sort(list, function(a, b) return a[1] < b[1] end)
  for i, e in ipairs(list) do list[i] = e[2] end
  return list
end

--- A live master other than `node` (the first in slot order): where a
-- slot of `node`'s can be moved.
function Cluster:other_master(node, via)
  for _, m in ipairs(self:masters(via)) do
    if m ~= node then return m end
  end
end

function Cluster:replicas(master, via)
  local list = {}
  for _, n in ipairs(self:view(via)) do
    if n.flags.slave and n.master_id == master.id and not n.flags.fail and n.srv then
      list[#list + 1] = n.srv
    end
  end
  return list
end

--- A key name starting with `prefix` (default "k") whose slot `node` owns.
function Cluster:key_on(node, prefix)
  for i = 1, 100000 do
    local key = (prefix or "k") .. i
    if self:node_for_slot(M.keyslot(key)) == node then return key end
  end
end

-- One string summing up slot ownership and roles, as `srv` sees them.
local function signature(list)
  local parts = {}
  for _, n in ipairs(list) do
    local r = {}
    for _, s in ipairs(n.slots) do r[#r + 1] = s[1] .. "-" .. s[2] end
    parts[#parts + 1] = n.id .. (n.flags.master and " M " or " S " .. n.master_id) .. table.concat(r, ",")
  end
  table.sort(parts)
  return table.concat(parts, ";")
end

--- True when every live node says cluster_state:ok, knows every live node,
-- all agree on slot owners and roles, and every replica's link is up.
function Cluster:ok()
  local sig
  local nodes = {}
  for _, s in ipairs(self.nodes) do
    if not s.stopped and s:alive() then nodes[#nodes + 1] = s end
  end
  for _, s in ipairs(nodes) do
    local info = {}
    for k, v in bulk(s, "CLUSTER", "INFO"):gmatch("([%w_]+):([^\r\n]*)") do info[k] = v end
    if info.cluster_state ~= "ok" then return false end
    local view = self:view(s)
    local sg = signature(view)
    if sig and sg ~= sig then return false end
    sig = sg
    for _, n in ipairs(view) do
      if n.flags.fail or n.flags["fail?"] or n.flags.handshake then return false end
    end
    if M.role(s) == "slave" and M.info(s, "replication").master_link_status ~= "up" then
      return false
    end
  end
  return true
end

--- Wait for ok(); true, or nil after timeout_s (default 15).
function Cluster:wait_ok(timeout_s)
  return helpers.wait_until(function() return self:ok() end, timeout_s or 15, 0.05)
end

-- Whether `master`'s `n` replicas acknowledge a write now: SET of a key it
-- owns, then WAIT n 100, on one connection of our own (WAIT counts the
-- writes of its connection). A replica whose link is up may not acknowledge
-- yet: Valkey 8's, for up to a second after the cluster is ok, and a
-- renewal it does not acknowledge is not credited (issue 29), so specs
-- that count renewals start once this holds. TLS-only nodes: not checked
-- (no TLS socket in this process).
local function replicas_ack(cl, master, n)
  if n == 0 or (master.opts.tls and not master.opts.tls.outbound_only) then return true end
  local key = cl:key_on(master, "ready")
  local sock = require("socket").connect(master.host, master.port)
  if not sock then return false end
  sock:settimeout(2)
  local request = helpers.resp
  local out = (master.password and request("AUTH", master.password) or "") .. request("SET", key, "1")
    .. request("WAIT", n, 100)
  local replies = {}
  if sock:send(out) then
    for i = 1, master.password and 3 or 2 do replies[i] = sock:receive("*l") end
  end
  sock:close()
  return replies[#replies] ~= nil and (tonumber(replies[#replies]:match("^:(%d+)")) or 0) >= n
end

--- Wait until every master's replicas acknowledge writes (see
-- replicas_ack); true, or false after timeout_s (default 10).
function Cluster:wait_acks(timeout_s)
  return helpers.wait_until(function()
    for _, m in ipairs(self:masters()) do
      if not replicas_ack(self, m, #self:replicas(m)) then return false end
    end
    return true
  end, timeout_s or 10, 0.05)
end

--- CLUSTER FAILOVER [FORCE|TAKEOVER] on `replica`, then wait until it is a
-- master and the cluster is ok again. Returns the seconds it took; raises
-- after timeout_s (default 15). opts.mode = "FORCE" | "TAKEOVER".
function Cluster:failover(replica, opts)
  opts = opts or {}
  local t0 = helpers.monotime()
  local out
  if opts.mode then
    out = replica:cli_raw("CLUSTER", "FAILOVER", opts.mode)
  else
    out = replica:cli_raw("CLUSTER", "FAILOVER")
  end
  assert(out == "OK", "CLUSTER FAILOVER: " .. out)
  assert(helpers.wait_until(function()
    return M.role(replica) == "master" and self:ok()
  end, opts.timeout or 15, 0.05), "failover did not finish")
  return helpers.monotime() - t0
end

local Migration = {}
Migration.__index = Migration

local STEPS = { "importing", "migrating", "keys", "done" }

-- Run the steps of the migration up to and including `last`.
function Migration:run(last)
  local c, slot, from, to = self.cluster, self.slot, self.from, self.to
  for i, step in ipairs(STEPS) do
    if i > self.step_index then
      if step == "importing" then
        assert(to:cli_raw("CLUSTER", "SETSLOT", slot, "IMPORTING", from.id) == "OK")
      elseif step == "migrating" then
        assert(from:cli_raw("CLUSTER", "SETSLOT", slot, "MIGRATING", to.id) == "OK")
      elseif step == "keys" then
        while true do
          local keys = lines((from:cli_raw("CLUSTER", "GETKEYSINSLOT", slot, 100)))
          if #keys == 0 then break end
          local argv = { "MIGRATE", to.host, to.port, "", 0, 5000 }
          if c.password then
            argv[#argv + 1] = "AUTH"
            argv[#argv + 1] = c.password
          end
          argv[#argv + 1] = "KEYS"
          for _, k in ipairs(keys) do argv[#argv + 1] = k end
          local out = from:cli_raw((table.unpack or unpack)(argv))
          assert(out == "OK" or out == "NOKEY", "MIGRATE: " .. out)
        end
      else
        -- destination first, then the source, then every other master
        assert(to:cli_raw("CLUSTER", "SETSLOT", slot, "NODE", to.id) == "OK")
        assert(from:cli_raw("CLUSTER", "SETSLOT", slot, "NODE", to.id) == "OK")
        for _, m in ipairs(c:masters()) do
          if m ~= to and m ~= from then m:cli_raw("CLUSTER", "SETSLOT", slot, "NODE", to.id) end
        end
      end
      self.step_index, self.state = i, step
    end
    if step == last then break end
  end
  return self
end

--- Finish a migration stopped half-way; waits until every node agrees.
function Migration:finish(timeout_s)
  self:run("done")
  assert(self.cluster:wait_ok(timeout_s or 15), "cluster not ok after migrating slot " .. self.slot)
  return self
end

--- Move `slot` from master `from` to master `to` the way redis-cli does:
-- CLUSTER SETSLOT IMPORTING (on to), MIGRATING (on from), GETKEYSINSLOT +
-- MIGRATE ... KEYS until empty, then SETSLOT NODE on to, from and every
-- other master. opts.stop_after = "importing" | "migrating" | "keys" stops
-- after that step (while MIGRATING, `from` answers -ASK for keys it does not
-- have; after "keys", for every key of the slot). Returns a migration with
-- .state (the last step done), .slot, .from, .to and :finish().
function Cluster:migrate_slot(slot, from, to, opts)
  opts = opts or {}
  local m = setmetatable({ cluster = self, slot = slot, from = from, to = to, step_index = 0,
                           state = "none" }, Migration)
  if opts.stop_after then
    return m:run(opts.stop_after)
  end
  return m:finish(opts.timeout)
end

--- Stop every node. Idempotent.
function Cluster:stop()
  for _, s in ipairs(self.nodes) do s:stop() end
end

--- A Redis Cluster of `masters` masters with `replicas` replicas each, on
-- loopback, made by `redis-cli --cluster create`, ok on return.
-- opts:
--   masters = 3 (at least 3: redis-cli's rule), replicas = 1 (0 allowed)
--   node_timeout = 2000     --cluster-node-timeout, ms
--   password = "pw"         requirepass + masterauth on every node
--   args = {...}            extra redis-server arguments for every node
--   tls = {...}             every node TLS only (helpers.start_redis's tls;
--                           cluster = true for a TLS bus and TLS ports in
--                           CLUSTER SLOTS, replication = true for replicas)
--   timeout = 20            seconds to wait for the cluster to be ok, and
--                           then for every replica to acknowledge a write
-- Returns { nodes = {srv...} (each with .id, .bus_port), by_port, by_id,
-- seeds = {"127.0.0.1:port"...}, password } with :masters(), :other_master(node),
-- :replicas(master), :node_for_slot(slot), :node_for_key(key),
-- :key_on(node, prefix), :view(via), :ok(), :wait_ok(t),
-- :migrate_slot(slot, from, to, opts), :failover(replica, opts), :stop().
function M.start_cluster(opts)
  opts = opts or {}
  local masters, per = opts.masters or 3, opts.replicas or 1
  assert(masters >= 3, "redis-cli --cluster create needs at least 3 masters")
  local c = setmetatable({ nodes = {}, by_port = {}, by_id = {}, seeds = {},
                           password = opts.password }, Cluster)
  local ok, err = pcall(function()
    -- replicas sync at once instead of after Redis' default 5 s diskless delay
    local args = { "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0" }
    for _, a in ipairs(opts.args or {}) do args[#args + 1] = a end
    for i = 1, masters * (1 + per) do
      local s = helpers.start_redis { cluster = true, cluster_node_timeout = opts.node_timeout or 2000,
                                      password = opts.password, args = args, tls = opts.tls }
      c.nodes[i] = s
      c.by_port[s.port] = s
      c.seeds[i] = s.host .. ":" .. s.port
      s.id = s:cli_raw("CLUSTER", "MYID")
      c.by_id[s.id] = s
    end
    local cmd = { helpers.bin.cli }
    if opts.password then cmd[#cmd + 1] = "-a " .. helpers.quote(opts.password) .. " --no-auth-warning" end
    if opts.tls then
      cmd[#cmd + 1] = "--tls --insecure"
      if opts.tls.client_cert then
        cmd[#cmd + 1] = "--cert " .. helpers.quote(opts.tls.client_cert)
          .. " --key " .. helpers.quote(opts.tls.client_key)
      end
    end
    cmd[#cmd + 1] = "--cluster create"
    for _, a in ipairs(c.seeds) do cmd[#cmd + 1] = a end
    cmd[#cmd + 1] = "--cluster-replicas " .. per .. " --cluster-yes </dev/null 2>&1"
    local out, code = helpers.sh(table.concat(cmd, " "))
    assert(code == 0 and out:find("All 16384 slots covered", 1, true), "cluster create failed:\n" .. out)
    assert(c:wait_ok(opts.timeout or 20), "cluster did not become ok")
    assert(c:wait_acks(opts.timeout or 20), "the cluster's replicas do not acknowledge writes")
  end)
  if not ok then
    c:stop()
    error(err, 2)
  end
  return c
end

return M

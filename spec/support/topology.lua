--[[
spec/support/topology.lua: replication, Sentinel and Cluster topologies of
real redis-server / redis-sentinel processes on loopback, for the specs.
Every process is started by spec/helpers.lua (so it is stopped by its pid,
by stop() or when the test process dies) and small timeouts keep
failovers to a few seconds.

  local topology = require "spec.support.topology"
  local rep = topology.replicated { replicas = 1, link_proxy = true }
  local sen = topology.sentinels { master = rep.master, count = 3 }
  local cl  = topology.cluster { masters = 3, replicas = 1 }
  ... cl:stop(); sen:stop(); rep:stop()
]]
local helpers = require "spec.helpers"
local core = require "redislock.core"

local M = {}

local function info(srv, section)
  return (srv:cli_raw("INFO", section))
end

local function field(text, name)
  return text:match(name .. ":([^\r\n]*)")
end

--- Waits until replica is connected to its master and in sync.
function M.wait_synced(replica, timeout)
  return helpers.wait_until(function()
    local text = info(replica, "replication")
    return field(text, "master_link_status") == "up" and field(text, "master_sync_in_progress") == "0"
  end, timeout or 10, 0.05)
end

--- A master and `replicas` replicas (1 by default). link_proxy = true puts
-- a loopback proxy in each replication link (rep.links[i]), so a spec can
-- stall replication with links[i]:kill("STOP").
-- Fields: master, replicas = {...}, links = {...}; :stop().
function M.replicated(opts)
  opts = opts or {}
  local rep = { master = helpers.start_redis(opts.master_opts), replicas = {}, links = {} }
  for i = 1, opts.replicas or 1 do
    local port = rep.master.port
    if opts.link_proxy then
      rep.links[i] = helpers.start_proxy(rep.master.port)
      port = rep.links[i].port
    end
    rep.replicas[i] = helpers.start_redis { args = { "--replicaof", "127.0.0.1", tostring(port) } }
    assert(M.wait_synced(rep.replicas[i]), "replica " .. i .. " never synced")
  end
  function rep.stop()
    for _, l in ipairs(rep.links) do l:kill("CONT"); l:stop() end
    for _, r in ipairs(rep.replicas) do r:stop() end
    rep.master:stop()
  end
  return rep
end

local Sentinels = {}
Sentinels.__index = Sentinels

--- `count` sentinels (3) watching `master` under `name` ("mymaster"), with
-- quorum 2 and short timeouts (down_after_ms 1000, failover_timeout_ms
-- 3000). password: the data nodes' password; sentinel_password: their own.
-- Fields: nodes = {srv...}, addrs = {"127.0.0.1:port", ...}, name.
function M.sentinels(opts)
  local name = opts.name or "mymaster"
  local lines = {
    string.format("sentinel monitor %s 127.0.0.1 %d %d", name, opts.master.port, opts.quorum or 2),
    string.format("sentinel down-after-milliseconds %s %d", name, opts.down_after_ms or 1000),
    string.format("sentinel failover-timeout %s %d", name, opts.failover_timeout_ms or 3000),
    string.format("sentinel parallel-syncs %s 1", name),
  }
  if opts.password then lines[#lines + 1] = string.format("sentinel auth-pass %s %s", name, opts.password) end
  if opts.sentinel_password then lines[#lines + 1] = "requirepass " .. opts.sentinel_password end
  local set = setmetatable({ nodes = {}, addrs = {}, name = name }, Sentinels)
  for i = 1, opts.count or 3 do
    set.nodes[i] = helpers.start_redis { sentinel = table.concat(lines, "\n"), password = opts.sentinel_password }
    set.addrs[i] = "127.0.0.1:" .. set.nodes[i].port
  end
  -- every sentinel knows the master and has seen the other sentinels
  assert(helpers.wait_until(function()
    for _, s in ipairs(set.nodes) do
      local out = s:cli_raw("SENTINEL", "MASTER", name)
      local others = out:match("num%-other%-sentinels\n(%d+)")
      if not others or tonumber(others) < #set.nodes - 1 then return false end
    end
    return true
  end, 15, 0.1), "the sentinels never saw each other")
  return set
end

--- The master's port as the first sentinel names it (a number), or nil.
function Sentinels:master_port()
  local out = self.nodes[1]:cli_raw("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name)
  return tonumber(out:match("\n(%d+)"))
end

--- SENTINEL FAILOVER, then waits until every sentinel names another master.
function Sentinels:failover(timeout)
  local old = self:master_port()
  self.nodes[1]:cli_raw("SENTINEL", "FAILOVER", self.name)
  return self:wait_master_change(old, timeout)
end

--- Waits until every sentinel names a master other than port `old`;
-- returns the new master's port.
function Sentinels:wait_master_change(old, timeout)
  local new
  helpers.wait_until(function()
    for _, s in ipairs(self.nodes) do
      local p = tonumber((s:cli_raw("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name)):match("\n(%d+)"))
      if not p or p == old then return false end
      new = p
    end
    return true
  end, timeout or 20, 0.05)
  return new
end

function Sentinels:stop()
  for _, s in ipairs(self.nodes) do s:stop() end
end

local Cluster = {}
Cluster.__index = Cluster

--- A cluster of `masters` masters (3) with `replicas` replicas each (0),
-- made by redis-cli --cluster create. Fields: nodes = {srv...}, seeds =
-- {"127.0.0.1:port", ...}.
function M.cluster(opts)
  opts = opts or {}
  local n = (opts.masters or 3) * (1 + (opts.replicas or 0))
  local cl = setmetatable({ nodes = {}, seeds = {} }, Cluster)
  for i = 1, n do
    cl.nodes[i] = helpers.start_redis { cluster = true, cluster_node_timeout = opts.node_timeout }
    cl.seeds[i] = "127.0.0.1:" .. cl.nodes[i].port
  end
  local out, code = helpers.sh("redis-cli --cluster create " .. table.concat(cl.seeds, " ")
    .. " --cluster-replicas " .. (opts.replicas or 0) .. " --cluster-yes 2>&1")
  assert(code == 0, "redis-cli --cluster create failed:\n" .. out)
  assert(helpers.wait_until(function()
    for _, node in ipairs(cl.nodes) do
      if field(info(node, "cluster") .. (node:cli_raw("CLUSTER", "INFO")), "cluster_state") ~= "ok" then
        return false
      end
    end
    return true
  end, 20, 0.1), "the cluster never became ok")
  if (opts.replicas or 0) > 0 then
    assert(helpers.wait_until(function()
      for _, node in ipairs(cl.nodes) do
        local text = info(node, "replication")
        if field(text, "role") == "slave" and field(text, "master_link_status") ~= "up" then return false end
      end
      return true
    end, 20, 0.1), "the replicas never synced")
  end
  return cl
end

--- The node (a server object) with this port.
function Cluster:node(port)
  for _, node in ipairs(self.nodes) do
    if node.port == port then return node end
  end
end

--- The hash slot of key, as the cluster computes it.
function Cluster:slot(key)
  return tonumber((self.nodes[1]:cli_raw("CLUSTER", "KEYSLOT", key)))
end

--- The server object that serves `slot` now (from CLUSTER SLOTS).
function Cluster:owner(slot)
  for _, node in ipairs(self.nodes) do
    if node:alive() then
      local c = core.connect { host = "127.0.0.1", port = node.port }
      local map = c and c:command("CLUSTER", "SLOTS")
      if c then c:close() end
      if type(map) == "table" then
        for _, range in ipairs(map) do
          if slot >= range[1] and slot <= range[2] then return self:node(range[3][2]) end
        end
        return nil
      end
    end
  end
end

--- The node id of a node.
function Cluster.id(node)
  return (node:cli_raw("CLUSTER", "MYID"))
end

--- Starts moving `slot` from one master to another, as redis-cli --cluster
-- reshard does: IMPORTING on the target, MIGRATING on the source, then
-- MIGRATE of every key. With stop_after = "migrating" it stops there (the
-- source now answers -ASK for keys it no longer has); call finish_slot.
function Cluster:migrate_slot(slot, from, to, opts)
  assert(to:cli_raw("CLUSTER", "SETSLOT", slot, "IMPORTING", Cluster.id(from)) == "OK")
  assert(from:cli_raw("CLUSTER", "SETSLOT", slot, "MIGRATING", Cluster.id(to)) == "OK")
  if opts and opts.stop_after == "migrating" then return end
  self:move_keys(slot, from, to)
  self:finish_slot(slot, to)
end

--- MIGRATEs every key of `slot` from one node to the other.
function Cluster.move_keys(_, slot, from, to)
  while true do
    local keys = from:cli_raw("CLUSTER", "GETKEYSINSLOT", slot, 100)
    if keys == "" then break end
    local args = { "MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS" }
    for k in keys:gmatch("[^\n]+") do args[#args + 1] = k end
    local out = from:cli_raw((table.unpack or unpack)(args)) -- luacheck: ignore 143
    assert(out == "OK" or out == "NOKEY", out)
  end
end

--- Ends a migration: the slot belongs to `to` on every master.
function Cluster:finish_slot(slot, to)
  local id = Cluster.id(to)
  for _, node in ipairs(self.nodes) do
    if node:alive() then node:cli_raw("CLUSTER", "SETSLOT", slot, "NODE", id) end
  end
end

--- CLUSTER FAILOVER on a replica; waits until it says it is a master.
function Cluster.failover(_, replica)
  replica:cli_raw("CLUSTER", "FAILOVER")
  return helpers.wait_until(function()
    return field(info(replica, "replication"), "role") == "master"
  end, 20, 0.05)
end

--- The replicas of a master (server objects).
function Cluster:replicas_of(master)
  local out = {}
  for _, node in ipairs(self.nodes) do
    local text = info(node, "replication")
    if field(text, "role") == "slave" and tonumber(field(text, "master_port")) == master.port then
      out[#out + 1] = node
    end
  end
  return out
end

function Cluster:stop()
  for _, node in ipairs(self.nodes) do node:stop() end
end

return M

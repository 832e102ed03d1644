--[[
spec/support/tls.lua -- certificates for the TLS specs, made by the openssl
command in a temp dir of their own (helpers.tmpdir: removed with the rest).

  local pki = require("spec.support.tls").make()
  local srv = helpers.start_redis { tls = pki:server_tls() }
  redislock.connect { url = srv.url, tls = { ca = pki.ca } }

Two CAs (ca, other_ca) and, signed by them (P-256 keys: quick to make):
  server        by ca, for localhost, 127.0.0.1 and ::1 (serverAuth, and
                clientAuth: a node shows it as a client on the cluster bus,
                which always wants one, and on replication links)
  other_server  by other_ca, same names          (an unknown CA)
  wrong_name    by ca, for other-name.test only   (a name mismatch; a name
                that is never looked up: the specs connect to 127.0.0.1)
  expired       by ca, same names, expired yesterday
  client        by ca (clientAuth), for mutual TLS
  other_client  by other_ca (clientAuth)
Each is { cert = path, key = path }. Loopback names only.
]]
local helpers = require "spec.helpers"

local M = {}

local quote = helpers.quote

local function openssl(args)
  local out, code = helpers.sh("openssl " .. args .. " 2>&1")
  assert(code == 0, "openssl " .. args .. ":\n" .. out)
  return out
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local KEY = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
local SERVER_NAMES = "DNS:localhost,IP:127.0.0.1,IP:::1"

-- A CA: self-signed, CA:TRUE (openssl req -x509's v3_ca).
local function make_ca(dir, name)
  local ca = { cert = dir .. "/" .. name .. ".crt", key = dir .. "/" .. name .. ".key" }
  openssl(("req -x509 %s -keyout %s -out %s -subj /CN=%s -days 3"):format(KEY, quote(ca.key),
    quote(ca.cert), "redislock-test-" .. name))
  return ca
end

-- A leaf certificate signed by ca: names (subjectAltName), usage
-- (serverAuth or clientAuth), days (-1: expired yesterday).
local function make_leaf(dir, name, ca, names, usage, days)
  local leaf = { cert = dir .. "/" .. name .. ".crt", key = dir .. "/" .. name .. ".key" }
  local csr, ext = dir .. "/" .. name .. ".csr", dir .. "/" .. name .. ".ext"
  local lines = { "basicConstraints=CA:FALSE", "extendedKeyUsage=" .. usage }
  if names then lines[#lines + 1] = "subjectAltName=" .. names end
  write(ext, table.concat(lines, "\n") .. "\n")
  openssl(("req -new %s -keyout %s -out %s -subj /CN=%s"):format(KEY, quote(leaf.key), quote(csr), name))
  openssl(("x509 -req -in %s -CA %s -CAkey %s -CAcreateserial -out %s -days %d -extfile %s"):format(
    quote(csr), quote(ca.cert), quote(ca.key), quote(leaf.cert), days or 3, quote(ext)))
  return leaf
end

local Pki = {}
Pki.__index = Pki

--- helpers.start_redis's tls for a server with certificate `which` (default
-- "server"), trusting client certificates of ca; opts: auth_clients,
-- replication, cluster (booleans). The cli uses the client certificate.
function Pki:server_tls(which, opts)
  opts = opts or {}
  local leaf = self[which or "server"]
  return { cert = leaf.cert, key = leaf.key, ca = self.ca, auth_clients = opts.auth_clients,
           replication = opts.replication, cluster = opts.cluster,
           client_cert = self.client.cert, client_key = self.client.key }
end

--- Everything above, in a fresh temp dir.
function M.make()
  local dir = helpers.tmpdir()
  local ca, other = make_ca(dir, "ca"), make_ca(dir, "other_ca")
  local p = setmetatable({ dir = dir, ca = ca.cert, ca_key = ca.key, other_ca = other.cert }, Pki)
  p.server = make_leaf(dir, "server", ca, SERVER_NAMES, "serverAuth,clientAuth")
  p.other_server = make_leaf(dir, "other_server", other, SERVER_NAMES, "serverAuth,clientAuth")
  p.wrong_name = make_leaf(dir, "wrong_name", ca, "DNS:other-name.test", "serverAuth,clientAuth")
  p.expired = make_leaf(dir, "expired", ca, SERVER_NAMES, "serverAuth,clientAuth", -1)
  p.client = make_leaf(dir, "client", ca, nil, "clientAuth")
  p.other_client = make_leaf(dir, "other_client", other, nil, "clientAuth")
  return p
end

return M

-- Installs that work from any prefix, a build that works on a fresh
-- machine, every Lua in CI, and specs that leave nothing behind.
local helpers = require "spec.helpers"

local quote = helpers.quote
-- make as a user types it: not with the LUA that `make test` exports to
-- its specs (nor `make sanitize`'s "valgrind ... lua5.4"), nor its flags.
local MAKE = "env -u LUA -u MAKEFLAGS -u MAKELEVEL make --no-print-directory"
local ROOT = (helpers.sh("pwd"):gsub("%s+$", ""))

local function write(path, text, mode)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  if mode then helpers.sh("chmod " .. mode .. " " .. quote(path)) end
end

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

describe("make install", function()
  local srv, opt

  setup(function() srv = helpers.start_redis() end)
  teardown(function() srv:stop() end)

  -- `make install` into a prefix of our own, once for the two tests that
  -- read it (the second one uninstalls it).
  local function installed()
    if not opt then
      opt = helpers.tmpdir() .. "/opt"
      local out, code = helpers.sh(MAKE .. " install PREFIX=" .. quote(opt) .. " 2>&1")
      assert(code == 0, out)
    end
    return opt
  end

  it("installs a man page that man and groff render without a warning #builds", function()
    -- groff-base brings groff and nroff (man-db's man runs them)
    local out, code = helpers.sh("tools/deps.sh groff-base 2>&1")
    if code ~= 0 or select(2, helpers.sh("command -v groff >/dev/null")) ~= 0 then
      pending("no groff here, and tools/deps.sh could not install groff-base: " .. out)
      return
    end
    local man = installed() .. "/share/man/man1/redislock.1"
    assert.equal(helpers.read_file("docs/redislock.1"), helpers.read_file(man))
    -- -ww: every warning; -z: no output, only the diagnostics
    out, code = helpers.sh("groff -man -Tutf8 -ww -z " .. quote(man) .. " 2>&1")
    assert.equal(0, code, out)
    assert.equal("", out)
    local text = helpers.sh("LC_ALL=C.UTF-8 MANWIDTH=80 groff -man -Tutf8 " .. quote(man) .. " 2>&1 | col -b")
    for _, heading in ipairs({ "NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "ENVIRONMENT",
      "EXAMPLES", "SEE ALSO" }) do
      assert.truthy(text:find("\n" .. heading .. "\n"), "no " .. heading .. " in:\n" .. text)
    end
    assert.truthy(text:find("flock(1)", 1, true))
    if select(2, helpers.sh("command -v man >/dev/null")) == 0 then
      out, code = helpers.sh("LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l " .. quote(man) .. " 2>&1 >/dev/null")
      assert.equal(0, code, out)
      assert.equal("", out)
    end
  end)

  it("puts a command in PREFIX/bin that runs with no LUA_PATH, under cron's PATH, from anywhere #builds", function()
    local prefix = installed()
    local out, code
    local bin = prefix .. "/bin/redislock"
    -- the interpreter it runs is written in as an absolute path
    local launcher = helpers.read_file(bin)
    assert.matches("\nlua='/[^'\n]+/lua5%.4'\n", launcher)
    assert.is_nil(launcher:find("^#!/usr/bin/lua\n"))
    out, code = helpers.sh("cd / && env -i PATH=/usr/bin:/bin REDISLOCK_URL=" .. quote(srv.url) .. " " ..
      quote(bin) .. " run inst -- sh -c 'echo ran $REDISLOCK_FENCE' 2>&1")
    assert.equal(0, code, out)
    assert.matches("^ran %d+\n$", out)
    -- the module paths are written in too (nothing else points at them)
    assert.truthy(launcher:find("[==[" .. prefix .. "/share/lua/5.4]==]", 1, true))
    -- the core installed has no test hook (they are the specs' build's:
    -- Makefile TESTING_SRCS); the checkout's own has them
    local probe = [[local c = require "redislock.core"
      print(c.testing, c._test_next_id, c.hist_bucket, c.recovery, c.recorder ~= nil)]]
    out, code = helpers.sh("cd / && env -i PATH=/usr/bin:/bin LUA_CPATH=" .. quote(prefix .. "/lib/lua/5.4/?.so") ..
      " lua5.4 -e " .. quote(probe) .. " 2>&1")
    assert.equal(0, code, out)
    assert.equal("nil\tnil\tnil\tnil\ttrue\n", out)
    out = helpers.sh("LUA_CPATH='./?.so' lua5.4 -e " .. quote(probe) .. " 2>&1")
    assert.matches("^true\tfunction: [^\t]+\tfunction: [^\t]+\tfunction: [^\t]+\ttrue\n$", out)
    -- the man page, where man looks for it beside PREFIX/bin
    local man = prefix .. "/share/man/man1/redislock.1"
    assert.equal(helpers.read_file("docs/redislock.1"), helpers.read_file(man))
    out, code = helpers.sh(MAKE .. " uninstall PREFIX=" .. quote(prefix) .. " 2>&1")
    assert.equal(0, code, out)
    assert.is_false(exists(bin))
    assert.is_false(exists(man))
    assert.is_false(exists(prefix .. "/share/lua/5.4/redislock.lua"))
    assert.is_false(exists(prefix .. "/lib/lua/5.4/redislock/core.so"))
  end)

  it("compiles the core for the Lua being installed, not the one the checkout built #builds", function()
    local version
    for _, v in ipairs({ "5.3", "5.2", "5.1" }) do
      local _, has_lua = helpers.sh("command -v lua" .. v .. " >/dev/null")
      local _, has_dev = helpers.sh("pkg-config --exists lua" .. v)
      if has_lua == 0 and has_dev == 0 then
        version = v
        break
      end
    end
    if not version then
      pending("no Lua 5.1, 5.2 or 5.3 with headers here (make test51/test52/test53 install them)")
      return
    end
    local prefix = helpers.tmpdir()
    local out, code = helpers.sh(MAKE .. " install DEPS=no LUA_VERSION=" .. version ..
      " PREFIX=" .. quote(prefix) .. " 2>&1")
    assert.equal(0, code, out)
    out, code = helpers.sh("cd / && env -i PATH=/usr/bin:/bin " .. quote(prefix .. "/bin/redislock") ..
      " status --url " .. quote(srv.url) .. " inst-" .. version .. " 2>&1")
    assert.equal(1, code, out)   -- not held: it ran, on lua5.x, and talked to Redis
    assert.matches("held: no", out)
    assert.matches("lua" .. version:gsub("%.", "%%."), helpers.read_file(prefix .. "/bin/redislock"))
  end)
end)

describe("a plain make", function()
  it("installs the build packages first (tools/deps.sh), then builds", function()
    local out, code = helpers.sh(MAKE .. " -n all 2>&1")
    assert.equal(0, code, out)
    local deps = out:find("tools/deps.sh pkg-config liblua5.4-dev lua5.4 libhiredis-dev", 1, true)
    assert.truthy(deps, out)
    assert.is_nil(helpers.sh(MAKE .. " -n all DEPS=no 2>&1"):find("tools/deps.sh", 1, true))
  end)

  it("asks for the packages of the Lua it builds for: LuaJIT's for LUA_PC=luajit, real names dpkg reports", function()
    local out = helpers.sh(MAKE .. " -n install PREFIX=/nonexistent LUA=luajit LUA_PC=luajit LUA_VERSION=5.1 2>&1")
    assert.truthy(out:find("tools/deps.sh pkg-config libluajit2-5.1-dev luajit2 libhiredis-dev", 1, true), out)
    out = helpers.sh(MAKE .. " -n all LUA_VERSION=5.1 2>&1")
    assert.truthy(out:find("tools/deps.sh pkg-config liblua5.1-0-dev lua5.1 libhiredis-dev", 1, true), out)
  end)

  it("tools/deps.sh is quiet and idempotent: apt only for what is missing, its output only on failure", function()
    if helpers.sh("id -u"):match("%d+") ~= "0" then
      pending("needs root (deps.sh would run sudo)")
      return
    end
    local dir = helpers.tmpdir()
    write(dir .. "/dpkg-query", [[#!/bin/sh
for pkg in $FAKE_MISSING; do [ "$pkg" = "$3" ] && exit 1; done
printf 'install ok installed'
]], "755")
    write(dir .. "/apt-get", [[#!/bin/sh
echo "$*" >> "$FAKE_LOG"
echo "Reading package lists... (apt's chatter)"
echo "debconf: delaying package configuration (more chatter)" >&2
[ "$1" = update ] && exit ${FAKE_UPDATE_STATUS:-0}
exit ${FAKE_APT_STATUS:-0}
]], "755")
    local env = "PATH=" .. quote(dir) .. ":$PATH FAKE_LOG=" .. quote(dir .. "/apt.log") ..
      " DEPS_POLICY_RC_D=" .. quote(dir .. "/policy-rc.d") .. " "
    -- everything installed: nothing printed, apt never called
    local out, code = helpers.sh(env .. "tools/deps.sh pkg-a pkg-b 2>&1")
    assert.equal(0, code)
    assert.equal("", out)
    assert.is_false(exists(dir .. "/apt.log"))
    -- one missing: one line, exactly that package, apt's output hidden
    out, code = helpers.sh(env .. "FAKE_MISSING=pkg-b tools/deps.sh pkg-a pkg-b 2>&1")
    assert.equal(0, code)
    assert.equal("deps.sh: installing pkg-b\n", out)
    assert.equal("update -qq\ninstall -y -qq --no-install-recommends pkg-b\n", helpers.read_file(dir .. "/apt.log"))
    assert.is_false(exists(dir .. "/policy-rc.d"))
    -- one source of the machine's fails to update: the install still runs, quietly
    os.remove(dir .. "/apt.log")
    out, code = helpers.sh(env .. "FAKE_MISSING=pkg-b FAKE_UPDATE_STATUS=100 tools/deps.sh pkg-b 2>&1")
    assert.equal(0, code, out)
    assert.equal("deps.sh: installing pkg-b\n", out)
    assert.equal("update -qq\ninstall -y -qq --no-install-recommends pkg-b\n", helpers.read_file(dir .. "/apt.log"))
    -- apt fails: its output is shown, and deps.sh fails
    out, code = helpers.sh(env .. "FAKE_MISSING=pkg-b FAKE_APT_STATUS=100 tools/deps.sh pkg-b 2>&1")
    assert.are_not.equal(0, code)
    assert.matches("apt's chatter", out)
    assert.matches("apt%-get failed", out)
  end)
end)

describe("CI", function()
  it("has make test52 and make test53, built apart like test51, and runs 5.1, 5.2, 5.3 and LuaJIT", function()
    for _, v in ipairs({ "2", "3" }) do
      local out, code = helpers.sh(MAKE .. " -n test5" .. v .. " 2>&1")
      assert.equal(0, code, out)
      assert.matches("build/lua5%." .. v .. "/testing/redislock/core%.so", out)
      assert.matches("LUA=lua5%." .. v, out)
      assert.matches("spec/01%-core_spec%.lua", out)
    end
    local ci = assert(helpers.read_file(".ci/run"))
    for _, target in ipairs({ "test", "test51", "test52", "test53", "testjit" }) do
      assert.matches("\nrun_specs make " .. target .. "\n", ci)
    end
  end)
end)

describe("the specs' temp dirs", function()
  it("are all gone after a run, even those of a child that exits without cleaning up", function()
    local tmp = helpers.tmpdir()
    -- What spec/11's torture run does: a child Lua process that uses these
    -- helpers (a redis-server, finished and running commands) and leaves
    -- with os.exit(0), which runs no __gc. The parent ends as busted does.
    local child = helpers.lua_cmd([[
      local helpers = require "spec.helpers"
      local srv = helpers.start_redis()
      local done = helpers.spawn("true")
      assert(done:wait(5) == 0)
      helpers.spawn("sleep 30")
      helpers.tmpdir()
      assert(srv:cli("PING"))
      os.exit(0)
    ]])
    local parent = helpers.lua_cmd(([[
      local helpers = require "spec.helpers"
      local p = helpers.spawn(%q)
      assert(p:wait(20) == 0, p:stderr())
      local q = helpers.spawn("true")
      assert(q:wait(5) == 0)
    ]]):format(child))
    local out, code = helpers.sh("cd " .. quote(ROOT) .. " && TMPDIR=" .. quote(tmp) .. " " .. parent .. " 2>&1")
    assert.equal(0, code, out)
    -- guardians notice their owner is gone within a poll (0.2 s)
    local left = helpers.wait_until(function()
      local list = helpers.sh("ls -A " .. quote(tmp))
      return list == "" and "none" or nil
    end, 5, 0.1)
    assert.equal("none", left, helpers.sh("find " .. quote(tmp)))
  end)
end)

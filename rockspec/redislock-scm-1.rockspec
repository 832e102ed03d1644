-- luarocks --lua-version 5.4 make rockspec/redislock-scm-1.rockspec
-- Builds with the project's Makefile (the scripts are embedded into the C
-- core by a generator at build time), against Debian's hiredis, for the Lua
-- luarocks is told (Debian's luarocks defaults to 5.1: name the version).
rockspec_format = "3.0"
package = "redislock"
version = "scm-1"
source = {
  url = "git+file:///dev/null",  -- built from a checkout: luarocks make
}
description = {
  summary = "Safe Redis locks for Lua: atomic leases, fencing tokens and a native watchdog",
  detailed = [[
    redislock gives Lua programs Redis locks that are safe by construction:
    SET NX PX acquisition, compare-and-delete release, compare-and-expire
    extension, 128-bit owner tokens from the kernel CSPRNG, fencing tokens,
    and a native watchdog thread that renews held leases and reports losses.
  ]],
  license = "MIT",
}
dependencies = {
  "lua >= 5.1",
}
external_dependencies = {
  HIREDIS = { header = "hiredis/hiredis.h" },
}
-- Only variables luarocks defines (it has no LUA_VERSION). LUA is the full
-- path of the chosen interpreter: the Makefile writes it into bin/redislock.
-- DEPS = "no": the Makefile installs no Debian packages under luarocks.
-- The install step compiles the core again, so it gets the same flags.
-- MANDIR: the man page goes into the rock's doc/ (doc/man1/redislock.1,
-- listed by `luarocks doc --list redislock`), not outside the tree.
build = {
  type = "make",
  build_variables = {
    LUA = "$(LUA)",
    CFLAGS = "$(CFLAGS)",
    LUA_CFLAGS = "-I$(LUA_INCDIR)",
    DEPS = "no",
  },
  install_variables = {
    LUA = "$(LUA)",
    CFLAGS = "$(CFLAGS)",
    LUA_CFLAGS = "-I$(LUA_INCDIR)",
    DEPS = "no",
    LUA_LMOD = "$(LUADIR)",
    LUA_CMOD = "$(LIBDIR)",
    BINDIR = "$(BINDIR)",
    MANDIR = "$(DOCDIR)",
  },
}
-- bin/redislock is a shell launcher (it reads the signals ignored at start
-- before any Lua interpreter runs) that finds its modules from its own
-- place in the tree: luarocks' Lua wrapper would skip the shell part.
deploy = {
  wrap_bin_scripts = false,
}

-- luarocks make rockspec/redislock-scm-1.rockspec
-- Builds with the project's Makefile (the scripts are embedded into the C
-- core by a generator at build time), against Debian's hiredis.
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
build = {
  type = "make",
  build_variables = {
    LUA = "$(LUA)",
    LUA_VERSION = "$(LUA_VERSION)",
    CFLAGS = "$(CFLAGS)",
    LUA_CFLAGS = "-I$(LUA_INCDIR)",
  },
  install_variables = {
    LUA_LMOD = "$(LUADIR)",
    LUA_CMOD = "$(LIBDIR)",
    BINDIR = "$(BINDIR)",
    LUA_VERSION = "$(LUA_VERSION)",
  },
}

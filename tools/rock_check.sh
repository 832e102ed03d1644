#!/bin/sh
# rock_check.sh: prove the rockspec installs offline and the result loads.
#
# usage: tools/rock_check.sh LUA_VERSION
# Copies the sources to a scratch dir (so the checkout's own build is left
# alone), runs `luarocks make` there into a throwaway tree (no registry
# needed: the only dependency is Lua itself), then requires redislock from
# that tree alone.
set -eu
lua_version=${1:-5.4}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
src="$scratch/src"
tree="$scratch/tree"
mkdir -p "$src"
for path in Makefile csrc lua tools rockspec bin; do
    [ -e "$path" ] && cp -r "$path" "$src/"
done

(cd "$src" && luarocks --lua-version "$lua_version" make --tree "$tree" \
    rockspec/redislock-scm-1.rockspec) >"$scratch/build.log" 2>&1 || {
    cat "$scratch/build.log" >&2
    exit 1
}
# Only the tree on the search path: nothing from the checkout.
(cd "$tree" && "lua$lua_version" -e "
  package.path = '$tree/share/lua/$lua_version/?.lua;$tree/share/lua/$lua_version/?/init.lua'
  package.cpath = '$tree/lib/lua/$lua_version/?.so'
  local redislock = require 'redislock'
  local core = require 'redislock.core'
  assert(core.scripts.acquire.sha and redislock._VERSION)
  assert(package.searchpath('redislock.core', package.cpath):find('$tree', 1, true))
  print('rock ok: redislock ' .. redislock._VERSION .. ' from ' .. package.searchpath('redislock', package.path))
")

#!/bin/sh
# rock_check.sh: prove the rockspec installs offline and the result works.
#
# usage: tools/rock_check.sh LUA_VERSION
# Copies the sources to a scratch dir (so the checkout's own build is left
# alone), runs `luarocks --lua-version V make` there into a throwaway tree
# (no registry needed: the only dependency is Lua itself), then:
#   - luarocks printed no warning (such as "unmatched variable");
#   - redislock and redislock.core load from that tree alone;
#   - the tree's bin/redislock runs with cron's environment (PATH=/usr/bin:/bin,
#     no LUA_PATH) and on that Lua version, and no installed file starts with
#     #!/usr/bin/lua (Lua 5.1 on Debian, whatever version was asked for);
#   - the man page is in the rock's doc/man1/, the same as docs/redislock.1,
#     and groff renders it without a warning (when groff is installed).
set -eu
lua_version=${1:-5.4}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
src="$scratch/src"
tree="$scratch/tree"
mkdir -p "$src"
for path in Makefile csrc lua tools rockspec bin docs README.md LICENSE CHANGELOG.md; do
    [ -e "$path" ] && cp -r "$path" "$src/"
done

(cd "$src" && luarocks --lua-version "$lua_version" make --tree "$tree" \
    rockspec/redislock-scm-1.rockspec) >"$scratch/build.log" 2>&1 || {
    cat "$scratch/build.log" >&2
    exit 1
}
if grep -i "warning" "$scratch/build.log" >&2; then
    echo "rock_check: luarocks warned (above)" >&2
    exit 1
fi
# Only the tree on the search path: nothing from the checkout.
(cd "$tree" && "lua$lua_version" -e "
  package.path = '$tree/share/lua/$lua_version/?.lua;$tree/share/lua/$lua_version/?/init.lua'
  package.cpath = '$tree/lib/lua/$lua_version/?.so'
  local searchpath = package.searchpath or function(name, path)  -- not in 5.1
    for p in path:gmatch('[^;]+') do
      local f = io.open((p:gsub('%?', (name:gsub('%.', '/')))))
      if f then f:close() return (p:gsub('%?', (name:gsub('%.', '/')))) end
    end
  end
  local redislock = require 'redislock'
  local core = require 'redislock.core'
  assert(core.scripts.acquire.sha and redislock._VERSION)
  assert(searchpath('redislock.core', package.cpath):find('$tree', 1, true))
  print('rock ok: redislock ' .. redislock._VERSION .. ' from ' .. searchpath('redislock', package.path))
")
if grep -rl '^#!/usr/bin/lua$' "$tree" >&2; then
    echo "rock_check: an installed script runs /usr/bin/lua (Lua 5.1 on Debian)" >&2
    exit 1
fi
out=$(cd / && env -i PATH=/usr/bin:/bin "$tree/bin/redislock" --version) || {
    echo "rock_check: $tree/bin/redislock does not run with PATH=/usr/bin:/bin and no LUA_PATH" >&2
    exit 1
}
lua_used=$(sed -n "s/^lua='\(.*\)'$/\1/p" "$tree/bin/redislock")
case $lua_used in
    */lua"$lua_version") ;;
    *) echo "rock_check: bin/redislock runs '$lua_used', not Lua $lua_version" >&2; exit 1 ;;
esac
echo "rock bin ok: $out on $lua_used"
man=$(find "$tree" -path '*/redislock/*/doc/man1/redislock.1')
if [ -z "$man" ] || ! cmp -s "$man" docs/redislock.1; then
    echo "rock_check: no doc/man1/redislock.1 in the rock, or not docs/redislock.1" >&2
    exit 1
fi
if command -v groff >/dev/null 2>&1; then
    warnings=$(groff -man -Tutf8 -ww -z "$man" 2>&1)
    if [ -n "$warnings" ]; then
        printf '%s\n' "$warnings" >&2
        echo "rock_check: groff warns about the man page" >&2
        exit 1
    fi
fi
echo "rock man ok: ${man#"$tree"/}"

#!/bin/sh
# valkey.sh: install Valkey 8 (valkey-server, valkey-sentinel, valkey-cli)
# for `make test-valkey`, only if missing.
#
# usage: tools/valkey.sh
# On Debian 12 (bookworm) Valkey 8 is in bookworm-backports only. If apt
# does not know that suite yet, this adds it, from the mirror apt already
# uses for bookworm (asked of apt itself: `apt-get indextargets`), as
# /etc/apt/sources.list.d/redislock-bookworm-backports.sources, pinned by
# /etc/apt/preferences.d/redislock-bookworm-backports at priority 50: below
# the 100 of an installed version, so nothing already installed is ever
# upgraded from it, and nothing is installed from it unless named. The
# three packages are then named with /bookworm-backports (tools/deps.sh).
# A suite the machine already had is left as its owner set it.
# On a later Debian, where Valkey is in the release itself, it is plain
# tools/deps.sh. Idempotent and quiet, like tools/deps.sh: nothing is
# done or printed when the packages are there.
set -eu
cd "$(dirname "$0")"

PKGS="valkey-server valkey-sentinel valkey-tools"
installed() {
    for p in $PKGS; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 1
    done
}
command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 || {
    command -v valkey-server >/dev/null 2>&1 || {
        echo "valkey.sh: not a Debian system: install Valkey 8 (valkey-server, valkey-sentinel, valkey-cli)" >&2
        exit 1
    }
    exit 0
}
installed && exit 0

codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
if [ "$codename" != bookworm ]; then
    # shellcheck disable=SC2086
    exec ./deps.sh $PKGS
fi

SUITE=bookworm-backports
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
src=/etc/apt/sources.list.d/redislock-$SUITE.sources
pin=/etc/apt/preferences.d/redislock-$SUITE
# apt's own word on its sources: "URI suite" for each index it reads.
targets=$(apt-get indextargets --format '$(SITE) $(RELEASE)' 2>/dev/null | sort -u)
if ! echo "$targets" | grep -q " $SUITE\$" && [ ! -e "$src" ]; then
    mirror=$(echo "$targets" | awk '$2 == "bookworm" { print $1; exit }')
    if [ -z "$mirror" ]; then
        echo "valkey.sh: apt has no source for bookworm to take $SUITE from" >&2
        exit 1
    fi
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    echo "valkey.sh: adding $SUITE (pinned to 50: only what is named is installed from it)" >&2
    {
        echo "# redislock's tools/valkey.sh: Valkey 8 for make test-valkey"
        echo "Types: deb"
        echo "URIs: $mirror"
        echo "Suites: $SUITE"
        echo "Components: main"
        [ ! -f "$keyring" ] || echo "Signed-By: $keyring"
    } | $sudo tee "$src.tmp" >/dev/null
    printf '%s\n' "# redislock's tools/valkey.sh: install from $SUITE only what is named" \
        "Package: *" "Pin: release n=$SUITE" "Pin-Priority: 50" | $sudo tee "$pin" >/dev/null
    $sudo mv "$src.tmp" "$src"
fi
# (deps.sh runs apt-get update first: the new suite's lists come with it)
# shellcheck disable=SC2046
exec ./deps.sh $(for p in $PKGS; do printf '%s/%s ' "$p" "$SUITE"; done)

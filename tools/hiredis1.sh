#!/bin/sh
# hiredis1.sh: Debian trixie's hiredis 1.x (libhiredis-dev, libhiredis1.1.0),
# unpacked into build/hiredis1/root/ for `make test-hiredis1`, never installed:
# the system's libhiredis 0.14 stays what every other build uses.
#
# usage: tools/hiredis1.sh [DIR]   (DIR: build/hiredis1)
# The two .debs are fetched with apt-get download under a configuration of
# their own (DIR/apt/: a sources list naming trixie only, its own package
# lists, cache and state), so the machine's apt sources, lists and dpkg
# database are not touched; the mirror is the one apt already uses for
# Debian (asked of apt: `apt-get indextargets`). Then `dpkg-deb -x` each into
# DIR/root/. Idempotent and quiet: nothing is done or printed once
# DIR/root/ has the library; otherwise one line, and apt's output only if
# it fails, with what failed.
set -eu

DIR=${1:-build/hiredis1}
SUITE=trixie
PKGS="libhiredis-dev libhiredis1.1.0"
ROOT=$DIR/root

lib=$(ls "$ROOT"/usr/lib/*/libhiredis.so.1.1.0 2>/dev/null | head -n 1 || true)
[ -z "$lib" ] || [ ! -f "$ROOT/usr/include/hiredis/hiredis.h" ] || exit 0

for tool in apt-get dpkg-deb; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "hiredis1.sh: needs $tool (Debian's apt and dpkg): cannot fetch $SUITE's hiredis here" >&2
        exit 1
    }
done

# (the mirror of this machine's own release: a Debian one)
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
mirror=$(apt-get indextargets --format '$(SITE) $(RELEASE)' 2>/dev/null | sort -u |
    awk -v c="$codename" '$2 == c { print $1; exit }')
if [ -z "$mirror" ]; then
    echo "hiredis1.sh: apt names no Debian mirror to fetch $SUITE's hiredis from" >&2
    exit 1
fi

echo "hiredis1.sh: fetching $SUITE's $PKGS into $DIR" >&2
apt=$DIR/apt
rm -rf "$apt" "$ROOT"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs" "$ROOT"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
signed=""
[ ! -f "$keyring" ] || signed="[signed-by=$keyring] "
echo "deb $signed$mirror $SUITE main" > "$apt/sources.list"
: > "$apt/status"
# Only this configuration: no sources.list.d, no preferences, an empty dpkg
# status (the system's 0.14 plays no part in what is downloaded).
set -- -o Dir::Etc::sourcelist="$PWD/$apt/sources.list" -o Dir::Etc::sourceparts=- \
    -o Dir::Etc::preferencesparts=- -o Dir::State::Lists="$PWD/$apt/lists" \
    -o Dir::State::status="$PWD/$apt/status" -o Dir::Cache="$PWD/$apt/cache" \
    -o APT::Sandbox::User="$(id -un)" -o Debug::NoLocking=1 -q
log=$apt/log
if ! apt-get "$@" update >"$log" 2>&1; then
    cat "$log" >&2
    echo "hiredis1.sh: apt-get update of $SUITE ($mirror) failed: see above" >&2
    exit 1
fi
# shellcheck disable=SC2086
if ! (cd "$apt/debs" && apt-get "$@" download $PKGS) >"$log" 2>&1; then
    cat "$log" >&2
    echo "hiredis1.sh: apt-get download $PKGS from $SUITE failed: see above" >&2
    exit 1
fi
for deb in "$apt"/debs/*.deb; do
    dpkg-deb -x "$deb" "$ROOT"
done
lib=$(ls "$ROOT"/usr/lib/*/libhiredis.so.1.1.0 2>/dev/null | head -n 1 || true)
if [ -z "$lib" ] || [ ! -f "$ROOT/usr/include/hiredis/hiredis.h" ]; then
    echo "hiredis1.sh: the .debs of $SUITE hold no libhiredis.so.1.1.0 and hiredis.h:" >&2
    ls "$apt"/debs >&2
    exit 1
fi

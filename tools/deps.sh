#!/bin/sh
# deps.sh: install the Debian packages a target needs, only those missing.
#
# usage: tools/deps.sh PACKAGE[/SUITE]...
# PACKAGE/SUITE installs that package from that suite (apt-get's own form,
# for a suite pinned below the default, such as tools/valkey.sh's
# bookworm-backports); whether it is missing is asked of PACKAGE.
# Idempotent and quiet: does nothing and prints nothing when all are
# installed (or when this is not a Debian-like system: no dpkg-query or
# apt-get; the build then says what is missing). Otherwise prints one line,
# runs `apt-get update` once (package lists may be absent on a fresh
# machine) and `apt-get install -y` of exactly the missing ones; apt's own
# output is shown only if it fails.
set -eu

command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 || exit 0

missing=""
for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "${pkg%%/*}" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $pkg"
    fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
    sudo=""
elif command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
else
    echo "deps.sh: missing packages:$missing (run as root or install them)" >&2
    exit 1
fi

echo "deps.sh: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
# Packages such as redis-server and nginx start their service on install,
# listening on default ports of every address. The specs start their own on
# loopback, so forbid service starts for this install (policy-rc.d exit 101)
# unless the machine already has a policy of its own. (The path can be moved
# for a test of this script.)
policy=${DEPS_POLICY_RC_D:-/usr/sbin/policy-rc.d}
cleanup="rm -f '$log'"
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod 755 "$policy"
    cleanup="$cleanup; $sudo rm -f '$policy'"
fi
trap "$cleanup" EXIT
# A source of the machine's own that fails to update (a mirror refusing one
# suite, say) must not stop the install: the lists of the others are fresh,
# and apt-get install says so itself if a package really cannot be had.
# shellcheck disable=SC2086
if ! { $sudo apt-get update -qq || true; $sudo apt-get install -y -qq --no-install-recommends $missing; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "deps.sh: apt-get failed for:$missing" >&2
    exit 1
fi

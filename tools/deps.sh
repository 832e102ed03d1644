#!/bin/sh
# deps.sh: install the Debian packages a target needs, only those missing.
#
# usage: tools/deps.sh PACKAGE...
# Idempotent and quiet: does nothing when all are installed; otherwise runs
# `apt-get update` once (package lists may be absent on a fresh machine) and
# `apt-get install -y` of exactly the missing ones.
set -eu

missing=""
for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
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
# Packages such as redis-server and nginx start their service on install,
# listening on default ports of every address. The specs start their own on
# loopback, so forbid service starts for this install (policy-rc.d exit 101)
# unless the machine already has a policy of its own.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod 755 "$policy"
    trap '$sudo rm -f "$policy"' EXIT
fi
$sudo apt-get update -qq >/dev/null
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null

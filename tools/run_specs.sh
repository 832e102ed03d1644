#!/bin/bash
# run_specs.sh: run the busted specs and end with "N passed, N failed".
#
# usage: LUA=lua5.4 BUSTED=/usr/bin/busted tools/run_specs.sh [SPEC...]
# Busted's own summary is not a line CI reads, so we ask busted for TAP and
# count its "ok" / "not ok" lines. Exits non-zero if busted did, if anything
# failed, or if no test ran at all.
set -u -o pipefail

LUA=${LUA:-lua5.4}
BUSTED=${BUSTED:-/usr/bin/busted}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# $LUA is unquoted on purpose: make valgrind passes "valgrind ... lua5.4".
# shellcheck disable=SC2086
$LUA "$BUSTED" -o TAP "$@" 2>&1 | tee "$log"
status=$?

passed=$(grep -c '^ok ' "$log")
failed=$(grep -c '^not ok ' "$log")
echo "$passed passed, $failed failed"
if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
    exit 1
fi

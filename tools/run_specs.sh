#!/bin/bash
# run_specs.sh: run busted spec files, several at a time, and end with
# "N passed, N failed".
#
# usage: LUA=lua5.4 BUSTED=/usr/bin/busted [JOBS=4] tools/run_specs.sh [-j N] [OPTION...] [SPEC...]
# SPEC: spec files or directories (default: spec/, as .busted says); an
# argument that names no file or directory is a busted option, given to
# every busted (--exclude-tags=heavy).
#
# Each spec file runs in a busted process of its own, JOBS (-j) at a time:
# the specs mostly wait (for servers, leases, timeouts), so more processes
# than cores pay. Each file starts its own servers on ports it claims
# (spec/helpers.lua), in temp dirs of its own. Each file's output is printed
# whole once it ends (never interleaved with another's), with its time.
# Busted's own summary is not a line CI reads, so each busted writes TAP and
# the "ok" / "not ok" lines of all of them are counted. Exits non-zero if a
# busted did, if anything failed, or if no test ran at all.
#
# SPEC_JOBSERVER=fifo (optional): a named pipe holding one byte per spec
# file the machine may run at once, shared by runners started together
# (.ci/run runs several make targets side by side), as make's jobserver is:
# a file runs only while its runner holds a byte it read from there, and
# the byte goes back when the file ends. The pipe must be kept open by
# whoever filled it.
set -u -o pipefail

LUA=${LUA:-lua5.4}
BUSTED=${BUSTED:-/usr/bin/busted}
JOBS=${JOBS:-4}
SPEC_JOBSERVER=${SPEC_JOBSERVER:-}

opts=()
files=()
add_dir() {
    local f
    while IFS= read -r f; do files+=("$f"); done < <(find "$1" -name '*_spec.lua' -type f | LC_ALL=C sort)
}
while [ $# -gt 0 ]; do
    case $1 in
        -j) JOBS=$2; shift ;;
        -j*) JOBS=${1#-j} ;;
        *)
            if [ -d "$1" ]; then add_dir "$1"
            elif [ -f "$1" ]; then files+=("$1")
            else opts+=("$1")
            fi ;;
    esac
    shift
done
[ ${#files[@]} -gt 0 ] || add_dir spec
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || { echo "run_specs: JOBS must be a positive number: $JOBS" >&2; exit 2; }

# The files that take longest start first (order among the rest as given):
# with JOBS at a time, a long file started last would end the run alone.
# From the times .ci/run printed (issue 23); only an order, never a filter.
SLOW=(spec/11-torture_spec.lua spec/35-sentinel_hung_spec.lua spec/36-renewal_acks_spec.lua
      spec/29-sentinel_failover_spec.lua spec/18-cluster_spec.lua spec/09-cli_spec.lua
      spec/20-redlock_spec.lua spec/19-sentinel_spec.lua spec/06-watchdog_spec.lua
      test/hosts/nginx_spec.lua spec/00-topology_support_spec.lua spec/07-rockspec_spec.lua
      spec/13-install_spec.lua spec/08-waiting_spec.lua spec/14-docs_spec.lua)
ordered=()
for s in "${SLOW[@]}"; do
    for f in "${files[@]}"; do [ "$f" != "$s" ] || ordered+=("$f"); done
done
for f in "${files[@]}"; do
    case " ${SLOW[*]} " in *" $f "*) ;; *) ordered+=("$f") ;; esac
done
files=("${ordered[@]}")

out=$(mktemp -d)
# Interrupted: end the busteds (their servers' guardians then end the
# servers) and the jobs waiting for them.
cleanup() {
    local p
    for p in $(jobs -p); do
        pkill -TERM -P "$p" 2>/dev/null
        kill "$p" 2>/dev/null
    done
    rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Runs file number $1 ($2) into $out/$1.log; its exit status and seconds go
# to $out/$1.rc and $out/$1.time. With SPEC_JOBSERVER it first reads a byte
# from it (a blocking read: no polling), and writes it back after; busted
# does not get the pipe's descriptor.
run_one() {
    local i=$1 file=$2 t0 rc token=
    if [ -n "$SPEC_JOBSERVER" ]; then
        exec 8<>"$SPEC_JOBSERVER"
        IFS= read -r -n 1 -u 8 token
    fi
    t0=$(date +%s)
    # $LUA is unquoted on purpose: make valgrind passes "valgrind ... lua5.4".
    # shellcheck disable=SC2086
    $LUA "$BUSTED" -o TAP "${opts[@]}" "$file" >"$out/$i.log" 2>&1 8>&-
    rc=$?
    [ -z "$SPEC_JOBSERVER" ] || printf '%s' "$token" >&8
    echo $(( $(date +%s) - t0 )) >"$out/$i.time"
    echo "$rc" >"$out/$i.rc.tmp" && mv "$out/$i.rc.tmp" "$out/$i.rc"
}

# Print what file $1 wrote, once, when it has ended.
printed=()
report() {
    local i=$1
    [ -z "${printed[$i]:-}" ] || return 0
    printed[i]=1
    local ok nok
    ok=$(grep -c '^ok ' "$out/$i.log")
    nok=$(grep -c '^not ok ' "$out/$i.log")
    echo "# ${files[$i]}: $ok passed, $nok failed, exit $(cat "$out/$i.rc"), $(cat "$out/$i.time") s"
    cat "$out/$i.log"
}

# Ended files are counted by their .rc (written before the job ends), not by
# wait -n's returns: several jobs may end between two waits.
reap() {
    local j
    nended=0
    for j in "${!files[@]}"; do
        if [ -f "$out/$j.rc" ]; then nended=$((nended + 1)); report "$j"; fi
    done
}
started=0
nended=0
for i in "${!files[@]}"; do
    while [ $((started - nended)) -ge "$JOBS" ]; do
        wait -n || [ $? -ne 127 ] || break
        reap
    done
    run_one "$i" "${files[$i]}" &
    started=$((started + 1))
done
while [ "$nended" -lt "$started" ]; do
    wait -n || [ $? -ne 127 ] || break
    reap
done

passed=0
failed=0
status=0
for i in "${!files[@]}"; do
    passed=$((passed + $(grep -c '^ok ' "$out/$i.log")))
    failed=$((failed + $(grep -c '^not ok ' "$out/$i.log")))
    [ "$(cat "$out/$i.rc")" -eq 0 ] || status=1
done
echo "# times (s): $(for i in "${!files[@]}"; do printf '%s=%s ' "$(basename "${files[$i]}" _spec.lua)" "$(cat "$out/$i.time")"; done)"
echo "$passed passed, $failed failed"
if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
    exit 1
fi

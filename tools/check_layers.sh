#!/bin/sh
# check_layers.sh: the C core's layers include only what lies below them.
#
# csrc/ holds one folder per layer, from the bottom: base, net, cmd, exec,
# topo, watchdog, binding; process stands apart (it needs only base, and
# binding's compat.h, the Lua version shim). Headers are included by path
# ("net/conn.h", the build has only -Icsrc), never by bare name. A file may
# include headers of its own layer and of the layers below; only binding
# and process include Lua's headers (lua.h, lauxlib.h, lualib.h); nothing
# includes a .c file. Prints each breach as "file: includes header (layer)"
# and exits 1 if there is any. Run by `make lint`.
set -eu
cd "$(dirname "$0")/.."

rank() {
    case "$1" in
        base) echo 0 ;; net) echo 1 ;; cmd) echo 2 ;; exec) echo 3 ;; topo) echo 4 ;;
        watchdog) echo 5 ;; binding) echo 6 ;; process) echo 1 ;;
        *) echo "" ;;
    esac
}

# an included header -> its layer: "net/conn.h" is net's; a bare name of
# one of ours ("conn.h") is a breach of its own (by path only), reported
# by the caller; anything else (system, hiredis, build/scripts_gen.h): ""
layer_of() {
    case "$1" in
        */*) if [ -f "csrc/$1" ]; then echo "${1%%/*}"; else echo ""; fi ;;
        *) echo "" ;;
    esac
}

# a bare name that is one of our headers: its path ("net/conn.h"), else ""
ours_bare() {
    case "$1" in */*) return ;; esac
    for d in csrc/*/; do
        if [ -f "$d$1" ]; then echo "$(basename "$d")/$1"; return 0; fi
    done
    return 0
}

bad=0
for f in csrc/*/*.c csrc/*/*.h; do
    layer=$(basename "$(dirname "$f")")
    mine=$(rank "$layer")
    if [ -z "$mine" ]; then
        echo "$f: in no known layer"; bad=1; continue
    fi
    for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]\([^>"]*\)[>"].*/\1/p' "$f"); do
        case "$h" in
            *.c) echo "$f: includes a .c file ($h)"; bad=1; continue ;;
            lua.h|lauxlib.h|lualib.h|luajit.h)
                case "$layer" in binding|process) ;; *) echo "$f: includes $h (only binding and process may)"; bad=1 ;; esac
                continue ;;
        esac
        path=$(ours_bare "$h")
        if [ -n "$path" ]; then
            echo "$f: includes \"$h\" by its bare name (by path: \"$path\")"; bad=1; continue
        fi
        theirs_layer=$(layer_of "$h")
        [ -n "$theirs_layer" ] || continue        # system, hiredis, build/scripts_gen.h
        if [ "$layer" = process ]; then
            case "$theirs_layer:$h" in
                base:*|process:*|binding:binding/compat.h) ;;
                *) echo "$f: includes $h ($theirs_layer): process needs only base"; bad=1 ;;
            esac
            continue
        fi
        theirs=$(rank "$theirs_layer")
        if [ "$theirs" -gt "$mine" ] || { [ "$theirs_layer" = process ] && [ "$layer" != process ] && [ "$layer" != binding ]; }; then
            echo "$f: includes $h ($theirs_layer), above $layer"; bad=1
        fi
    done
done
exit $bad

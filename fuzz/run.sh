#!/bin/bash
# fuzz/run.sh [SECONDS]: build the libFuzzer target, then fuzz for SECONDS
# (default 30) starting from fuzz/corpus/. Exits non-zero on a crash, a
# sanitizer report or a contract violation; the input is left in
# fuzz/out/crash-* (copy it into fuzz/corpus/ to keep it as a regression).
#
# New inputs found during the run go to fuzz/out/corpus/, not to the seed
# corpus, so that the corpus in the repo stays small. Leak detection stays on.
# Run from anywhere; needs `make` at the top level to have generated
# build/scripts_gen.h (the fuzz Makefile does it when missing).
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-30}
make --no-print-directory -s out/fuzz_reply
mkdir -p out/corpus
# -max_len 1024: seeds are < 1 KB. -timeout 10: one input never needs more
# than a few ms; a hang is a finding. rss_limit keeps a runaway bounded.
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
exec out/fuzz_reply -max_total_time="$secs" -max_len=1024 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix=out/ out/corpus corpus

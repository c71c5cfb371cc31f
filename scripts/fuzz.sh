#!/usr/bin/env bash
# Runs every libFuzzer target of BUILD (a HET_FUZZ build: make fuzz) for SECONDS each, starting
# from the committed seeds in fuzz/corpus/<target>/ (new inputs go to BUILD/corpus/<target>/,
# not committed). Fails on the first crash, leak, timeout or sanitizer report; the input is
# left as BUILD/crash-<target>-* (add it to fuzz/corpus/<target>/ and make it a regression test).
# Usage: scripts/fuzz.sh BUILD [SECONDS]  (default FUZZ_SECONDS or 30)
set -u
cd "$(dirname "$0")/.." || exit 1
B=${1:?usage: fuzz.sh BUILD [SECONDS]}
S=${2:-${FUZZ_SECONDS:-30}}
status=0
for src in fuzz/fuzz_*.c; do
    t=$(basename "$src" .c)
    name=${t#fuzz_}
    mkdir -p "$B/corpus/$name"
    # -timeout: one input over 10 s is a hang; -rss_limit_mb: a reader must not balloon
    "$B/$t" -max_total_time="$S" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$B/crash-$name-" "$B/corpus/$name" "fuzz/corpus/$name" \
        >"$B/fuzz-$name.log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/fuzz-$name.log")
    if [ $rc -ne 0 ]; then
        echo "fuzz $name: FAILED (exit $rc) after ${runs:-?} runs; see $B/fuzz-$name.log" >&2
        grep -E '^(SUMMARY|fuzz:)|Test unit written' "$B/fuzz-$name.log" >&2
        status=1
    else
        echo "fuzz $name: ${runs:-?} runs in $S s, no crash"
    fi
done
exit $status

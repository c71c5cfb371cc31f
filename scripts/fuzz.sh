#!/usr/bin/env bash
# Runs every libFuzzer target of BUILD (a HET_FUZZ build: make fuzz) for SECONDS each, starting
# from the committed seeds in fuzz/corpus/<target>/ (new inputs go to BUILD/corpus/<target>/,
# not committed), JOBS targets at once (default: the number of cores; a target runs on one).
# Fails on any crash, leak, timeout or sanitizer report; the input is left as
# BUILD/crash-<target>-* (add it to fuzz/corpus/<target>/ and make it a regression test).
# Usage: scripts/fuzz.sh BUILD [SECONDS]  (default FUZZ_SECONDS or 30; env JOBS)
set -u
cd "$(dirname "$0")/.." || exit 1
B=${1:?usage: fuzz.sh BUILD [SECONDS]}
S=${2:-${FUZZ_SECONDS:-30}}
J=${JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$J" -ge 1 ] 2>/dev/null || J=1

# run_one NAME: the target for S seconds; its verdict into BUILD/fuzz-NAME.verdict
run_one() {
    local name=$1 rc runs
    mkdir -p "$B/corpus/$name"
    # -timeout: one input over 10 s is a hang; -rss_limit_mb: a reader must not balloon
    "$B/fuzz_$name" -max_total_time="$S" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$B/crash-$name-" "$B/corpus/$name" "fuzz/corpus/$name" \
        >"$B/fuzz-$name.log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/fuzz-$name.log")
    if [ $rc -ne 0 ]; then
        { echo "fuzz $name: FAILED (exit $rc) after ${runs:-?} runs; see $B/fuzz-$name.log"
          grep -E '^(SUMMARY|fuzz:)|Test unit written' "$B/fuzz-$name.log"; } >"$B/fuzz-$name.verdict"
    else
        echo "fuzz $name: ${runs:-?} runs in $S s, no crash" >"$B/fuzz-$name.verdict"
    fi
}

names=()
for src in fuzz/fuzz_*.c; do
    t=$(basename "$src" .c)
    names+=("${t#fuzz_}")
done
running=0
for name in "${names[@]}"; do
    rm -f "$B/fuzz-$name.verdict"
    if [ "$running" -ge "$J" ]; then wait -n; running=$((running - 1)); fi
    run_one "$name" &
    running=$((running + 1))
done
wait
status=0
for name in "${names[@]}"; do
    v="$B/fuzz-$name.verdict"
    if [ ! -s "$v" ]; then echo "fuzz $name: no verdict (the runner was killed?)" >&2; status=1
    elif grep -q ': FAILED' "$v"; then cat "$v" >&2; status=1
    else cat "$v"; fi
done
exit $status

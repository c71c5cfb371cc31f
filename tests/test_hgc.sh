#!/usr/bin/env bash
# hgc under real mpirun (CTest runs it alone: it measures speeds):
# - calibration under --slowdown 1,2 finds speeds within 15 % of 2:1 (hetrain calibrate
#   --out FILE writes them; hgc --speeds-file reads them back);
# - --rebalance after a slowdown change (2,2, then 2:6 from epoch 2: the ratio --slowdown-at
#   2:1:3 makes, on ranks that both sleep half their time or more, so that two ranks computing
#   at once on this machine's cores do not distort what is measured) converges to the new 3:1
#   ratio within 2 epochs (within 35 %: the re-balanced partition equalizes step times, and
#   the per-step costs that do not shrink with the batch, multiplied by the slowdown, put the
#   balanced per-sample ratio at 2.9-3.9 here), while a fixed partition keeps its speeds;
# - resume on 2 ranks with given speeds is bitwise the uninterrupted run (checkpoint bytes);
# - bad speeds and too small a global batch are refused with one line, exit 1 or 2.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found" >&2; exit 1; }
het_mpi_np_ok 3 || { echo "test_hgc: SKIPPED: needs 3 ranks, more than the cores ($het_mpi_flavor busy-polls)"; exit 77; }
T=$(mktemp -d /tmp/het_hgc_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# HET_TEST_NO_TIMING (make test-asan): the runs still run, their timings go unchecked
timing_off() { [ -n "${HET_TEST_NO_TIMING:-}" ] && [ "$HET_TEST_NO_TIMING" != 0 ]; }
within() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a / b - 1; exit !(d <= t && d >= -t) }'; }
mpi() { local P=$1; shift; het_mpirun "$P" "$HETRAIN" "$@"; }
COMMON=(--model lenet5 --data synthetic --test-limit 128 --seed 5 --progress off)

# ---- calibration: 2:1 within 15 % (up to eight tries: on 2 cores single runs measured 1.5-2.8
# for 2 and 3.1-4.1 for 3 below, 2026-11-30, on an otherwise idle machine; five tries all
# missed once in a full make test) ----
ok=0
for try in 1 2 3 4 5 6 7 8; do
    mpi 2 calibrate "${COMMON[@]}" --slowdown 1,2 --out speeds.txt >cal.out 2>&1 ||
        { fail "calibrate exited $?: $(cat cal.out)"; break; }
    s0=$(grep -v '^#' speeds.txt | sed -n 1p)
    s1=$(grep -v '^#' speeds.txt | sed -n 2p)
    ratio=$(awk -v a="$s0" -v b="$s1" 'BEGIN { print (b > 0 ? a / b : 0) }')
    echo "calibration try $try: speeds $s0 $s1, ratio $ratio (expected 2)"
    if within "$ratio" 2 0.15; then ok=1; break; fi
done
[ $ok -eq 1 ] || timing_off || fail "calibration ratio $ratio not within 15 % of 2"
mpi 2 train "${COMMON[@]}" --strategy hgc --speeds-file speeds.txt --epochs 1 \
    --train-limit 256 >f.out 2>&1 || fail "hgc with --speeds-file: $(cat f.out)"
grep -q "^hgc: file speeds" f.out || fail "no speeds line: $(cat f.out)"

# ---- re-balancing after a slowdown mid-run (up to eight tries, as above) ----
speeds() { # epoch file -> "s0 s1" from the metrics file
    grep "\"type\":\"epoch\",\"epoch\":$1," "$2" | sed 's/.*"speed":\[\([^]]*\)\].*/\1/' | tr ',' ' '
}
ok=0
for try in 1 2 3 4 5 6 7 8; do
    mpi 2 train "${COMMON[@]}" --strategy hgc --speeds 1,1 --rebalance --slowdown 2,2 \
        --slowdown-at 2:1:6 --epochs 4 --train-limit 4096 --batch 256 --metrics rb.jsonl \
        >rb.out 2>&1 ||
        { fail "rebalance run: $(cat rb.out)"; break; }
    read -r a b <<<"$(speeds 4 rb.jsonl)"
    r4=$(awk -v a="$a" -v b="$b" 'BEGIN { print (b > 0 ? a / b : 0) }')
    echo "rebalance try $try: epoch 4 speeds $a $b, ratio $r4 (expected 3)"
    if within "$r4" 3 0.35 && grep -q '^epoch 3/4 .*hgc (re-balanced)' rb.out; then ok=1; break; fi
done
[ $ok -eq 1 ] || timing_off || fail "re-balanced ratio $r4 at epoch 4 not within 35 % of 3: $(cat rb.out)"
mpi 2 train "${COMMON[@]}" --strategy hgc --speeds 1,1 --slowdown-at 2:1:3 --epochs 3 \
    --train-limit 512 --metrics fx.jsonl >fx.out 2>&1 || fail "fixed run: $(cat fx.out)"
read -r a b <<<"$(speeds 3 fx.jsonl)"
[ "$a" = "$b" ] || fail "a fixed partition changed its speeds: $a $b"

# ---- resume: bitwise the uninterrupted run ----
R=(--strategy hgc --speeds 3,1 --train-limit 300 --batch 32)
mpi 2 train "${COMMON[@]}" "${R[@]}" --epochs 2 --checkpoint s.ckpt >s.out 2>&1 || fail "straight: $(cat s.out)"
mpi 2 train "${COMMON[@]}" "${R[@]}" --epochs 1 --checkpoint r.ckpt >r1.out 2>&1 || fail "part 1: $(cat r1.out)"
mpi 2 train "${COMMON[@]}" "${R[@]}" --epochs 2 --checkpoint r.ckpt --resume >r2.out 2>&1 || fail "resume: $(cat r2.out)"
cmp -s s.ckpt r.ckpt || fail "hgc resume on 2 ranks differs from the straight run"

# ---- refusals ----
mpi 2 train "${COMMON[@]}" --strategy hgc --speeds 1,2,3 --epochs 1 >e1.out 2>e1.err
rc=$?
[ $rc -eq 1 ] && grep -q "3 speeds for 2 ranks" e1.err && [ "$(grep -c "^hetrain: " e1.err)" -eq 1 ] ||
    fail "3 speeds on 2 ranks: exit $rc, $(cat e1.err)"
mpi 2 train "${COMMON[@]}" --strategy hgc --speeds 1,0 --epochs 1 >e2.out 2>e2.err
rc=$?
[ $rc -eq 2 ] && grep -q "speeds" e2.err || fail "speed 0: exit $rc, $(cat e2.err)"
mpi 3 train "${COMMON[@]}" --strategy hgc --speeds 1,1,1 --batch 2 --epochs 1 >e3.out 2>e3.err
rc=$?
[ $rc -eq 1 ] && grep -q "global batch 2 is smaller than 3 ranks" e3.err ||
    fail "batch 2 on 3 ranks: exit $rc, $(cat e3.err)"
printf '0.5\nfast\n' >bad.txt
mpi 2 train "${COMMON[@]}" --strategy hgc --speeds-file bad.txt --epochs 1 >e4.out 2>e4.err
rc=$?
[ $rc -eq 1 ] && grep -q "bad.txt:2: 'fast' is not one speed" e4.err ||
    fail "bad speeds file: exit $rc, $(cat e4.err)"

[ $failures -eq 0 ] && echo "test_hgc: passed" || exit 1

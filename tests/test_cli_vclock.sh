#!/usr/bin/env bash
# The virtual clock end to end, under real mpirun (CTest runs it alone: its last part times):
# - allreduce (2 ranks, --slowdown 1,2, two emulated nodes on a 1 Gbit/s link), hgc (3 ranks,
#   fixed speeds, --slowdown 1,2,4) and daso (2 x 2 ranks): the weights after training are
#   bitwise those of --clock wall (virtual time never changes the arithmetic); daso's
#   non-blocking averages charged as SMPI's linear exchange (--coll-model smpi) take
#   longer than as the ring, with the same weights;
# - the metrics say "clock":"virtual", and rank 0's compute + comm + wait is its epoch's
#   virtual time (nothing else moves V); the epoch line shows vtime; the slow rank's compute
#   is about 2x the other's (CPU time x factor, nothing slept; the median of up to 3 runs);
# - --compute-cost calibrated:FILE (hetrain calibrate --costs-out FILE): two runs, one beside
#   a CPU hog, give the same metrics (virtual times to 17 digits) and weights, bit for bit; the
#   slow rank's compute is its factor x the other's; a bad table, another network's (by its
#   fingerprint) and a version 1 table are refused with one line, and calibrated costs on the
#   wall clock too; the Chrome trace ends at
#   the run's virtual time;
# - timing (skipped under HET_TEST_NO_TIMING): the measured slow rank's 2x above, in a wide
#   band. The agreement of the virtual clock with the wall clock and with a CPU hog beside are
#   benchmarks: bench/bench_vclock.sh, figures in docs/BENCHMARKS.md (2026-12-03: within 4 %
#   and under 1 %).
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found" >&2; exit 1; }
het_mpi_np_ok 4 || { echo "test_cli_vclock: SKIPPED: needs 4 ranks, more than the cores ($het_mpi_flavor busy-polls)"; exit 77; }
T=$(mktemp -d /tmp/het_cli_vclock_XXXXXX)
hogs=()
trap 'for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
timing_off() { [ -n "${HET_TEST_NO_TIMING:-}" ] && [ "$HET_TEST_NO_TIMING" != 0 ]; }
within() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a / b - 1; exit !(d <= t && d >= -t) }'; }
mpi() { local P=$1; shift; het_mpirun "$P" "$HETRAIN" "$@"; }
COMMON=(--model lenet5 --data synthetic --train-limit 1536 --test-limit 128 --seed 3 --progress off)
# a value of the metrics' last epoch line: json_num FILE KEY (arrays: the first element)
json_num() { grep '"type":"epoch"' "$1" | tail -1 | sed -n "s/.*\"$2\":\\[\\{0,1\\}\\([-0-9.e+]*\\).*/\\1/p"; }
json_arr() { grep '"type":"epoch"' "$1" | tail -1 | sed -n "s/.*\"$2\":\\[\\([^]]*\\)\\].*/\\1/p"; }

# ---- the same weights on either clock ----
same_weights() { # name P args...
    local name=$1 P=$2; shift 2
    for clk in wall virtual; do
        mpi "$P" train "${COMMON[@]}" "$@" --clock $clk --metrics "$name.$clk.jsonl" \
            --export-safetensors "$name.$clk.st" >"$name.$clk.out" 2>&1 ||
            { fail "$name --clock $clk exited $?: $(tail -3 "$name.$clk.out")"; return; }
    done
    cmp -s "$name.wall.st" "$name.virtual.st" || fail "$name: weights differ between the clocks"
}
same_weights allreduce 2 --epochs 2 --slowdown 1,2 --ranks-per-node 1 --net-bw 125M --net-lat 50e-6
same_weights hgc 3 --epochs 2 --strategy hgc --speeds 4,2,1 --slowdown 1,2,4
same_weights daso 4 --epochs 3 --strategy daso --ranks-per-node 2 --daso-warmup-epochs 1 \
    --daso-cooldown-epochs 1 --net-bw 125M
echo "test_cli_vclock: weights bitwise equal between the clocks (allreduce, hgc, daso)"

# ---- --coll-model: what the clock charges, never the arithmetic ----
# daso on 3 nodes of one rank, 100 Mbit/s: its global averages are non-blocking all-reduces,
# charged as libnbc's ring (mpi: 4/3 of a buffer out of each node) or SMPI's linear exchange
# (smpi: 2 buffers), so the smpi epoch is the longer (the shipped cost table: the same on
# every CPU); the weights are the same bits
for nbc in mpi smpi; do
    mpi 3 train "${COMMON[@]}" --epochs 1 --strategy daso --ranks-per-node 1 \
        --daso-warmup-epochs 0 --daso-cooldown-epochs 0 --net-bw 12.5M --clock virtual \
        --compute-cost shipped --coll-model $nbc --metrics "nbc.$nbc.jsonl" --export-safetensors "nbc.$nbc.st" \
        >"nbc.$nbc.out" 2>&1 || fail "--coll-model $nbc exited $?: $(tail -3 "nbc.$nbc.out")"
done
cmp -s nbc.mpi.st nbc.smpi.st || fail "--coll-model changed the weights"
e_mpi=$(json_num nbc.mpi.jsonl epoch_s) e_smpi=$(json_num nbc.smpi.jsonl epoch_s)
awk -v a="${e_mpi:-0}" -v b="${e_smpi:-0}" 'BEGIN { exit !(a > 0 && b > a * 1.1) }' ||
    fail "--coll-model smpi: epoch $e_smpi s, not above the ring's $e_mpi s x 1.1"
echo "test_cli_vclock: --coll-model smpi charged $e_smpi s against the ring's $e_mpi s, the same weights"

# ---- what the virtual metrics say ----
m=allreduce.virtual.jsonl
grep -q '"clock":"virtual"' "$m" || fail "no \"clock\":\"virtual\" in $m"
grep -q '"clock"' allreduce.wall.jsonl && fail "the wall clock's metrics name a clock"
grep -q '^epoch 2/2 .*samples/s (virtual) .* vtime [0-9.]*s (epoch [0-9.]*s)' allreduce.virtual.out ||
    fail "no vtime in the epoch line: $(grep '^epoch 2' allreduce.virtual.out)"
ep=$(json_num "$m" epoch_s)
sum=$(grep '"type":"epoch"' "$m" | tail -1 | awk '{
    n = 0; split("compute_s comm_s wait_s delay_s", k, " ")
    for (i = 1; i <= 4; i++) { s = $0; sub(".*\"" k[i] "\":\\[", "", s); sub(",.*", "", s); n += s }
    print n }')
within "$sum" "$ep" 0.001 || fail "rank 0's split sums to $sum s, its virtual epoch is $ep s"
# measured CPU times of two ranks sharing 2 cores move with the host's load: identical work
# measured 0.155 or 0.20-0.24 s per epoch on this VM (bimodal), so one run's ratio went from
# 1.47x to 2.7x. The factor shows in the median of up to 3 runs (exactly so with calibrated
# costs below); a slowdown not applied gives about 1x. (A timing: under the sanitizers 1.2x
# was seen.)
ratio_of() { awk -v a="$(json_arr "$1" compute_s | cut -d, -f2)" \
                 -v b="$(json_arr "$1" compute_s | cut -d, -f1)" 'BEGIN { print a / b }'; }
in_band() { awk -v r="$1" 'BEGIN { exit !(r > 1.5 && r < 4) }'; }
if ! timing_off; then
    ratios=$(ratio_of "$m")
    if ! in_band "$ratios"; then
        for t in 2 3; do
            mpi 2 train "${COMMON[@]}" --epochs 2 --slowdown 1,2 --ranks-per-node 1 --net-bw 125M \
                --net-lat 50e-6 --clock virtual --metrics "ratio$t.jsonl" >"ratio$t.out" 2>&1 ||
                fail "slowdown 2, try $t exited $?: $(tail -2 "ratio$t.out")"
            ratios="$ratios $(ratio_of "ratio$t.jsonl")"
        done
        med=$(echo "$ratios" | tr ' ' '\n' | sort -g | sed -n 2p)
        in_band "$med" || fail "slowdown 2: rank 1 computed $ratios x rank 0's (median $med, expected about 2x)"
    fi
fi
d=$(json_arr "$m" delay_s)
[ "$d" = "0,0" ] || fail "the virtual clock slept: delay_s [$d]"

# ---- calibrated costs: the same bits every run, a CPU hog beside or not ----
mpi 1 calibrate "${COMMON[@]}" --clock virtual --costs-out costs.txt >cal.out 2>&1 ||
    fail "calibrate --costs-out exited $?: $(tail -2 cal.out)"
grep -q '^hetrain-costs 2$' costs.txt && grep -q '^layer 0 ' costs.txt && grep -q '^range 0 ' costs.txt &&
    grep -q '^net [0-9a-f]\{16\}$' costs.txt && grep -q '^ref sgemm512 [0-9]' costs.txt ||
    fail "costs.txt: $(head -8 costs.txt)"
CAL=(--epochs 2 --clock virtual --compute-cost calibrated:costs.txt --slowdown 1,3
     --ranks-per-node 1 --net-bw 125M --net-lat 50e-6)
mpi 2 train "${COMMON[@]}" "${CAL[@]}" --metrics cal1.jsonl --export-safetensors cal1.st \
    >cal1.out 2>&1 || fail "calibrated run 1 exited $?: $(tail -2 cal1.out)"
(while :; do :; done) & hogs+=($!)
mpi 2 train "${COMMON[@]}" "${CAL[@]}" --metrics cal2.jsonl --export-safetensors cal2.st \
    >cal2.out 2>&1 || fail "calibrated run 2 exited $?: $(tail -2 cal2.out)"
for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done
hogs=()
# the trace is in virtual time: its last event ends at the run's virtual time (to 1 %; the
# evaluation adds nothing to it), not at the wall time the run took
mpi 2 train "${COMMON[@]}" "${CAL[@]}" --epochs 1 --metrics tr.jsonl --trace tr.json >tr.out 2>&1 ||
    fail "traced run exited $?: $(tail -2 tr.out)"
last_us=$(grep -o '"ts":[0-9.]*,"dur":[0-9.]*' tr.json | awk -F'[:,]' '{ e = $2 + $4; if (e > m) m = e } END { print m }')
vt=$(json_num tr.jsonl vtime_s)
within "$(awk -v a="$last_us" 'BEGIN { print a / 1e6 }')" "$vt" 0.01 ||
    fail "the trace ends at $last_us us, the run's virtual time is $vt s"
grep -q 'compute costs (virtual clock): read from costs.txt' cal1.out || fail "no costs line: $(grep -m1 costs cal1.out)"
# what is not virtual time: the wall time and the processes' memory
no_wall() { sed 's/"elapsed_s":[^,]*,//; s/,"peak_rss_max":[^,]*,"peak_rss_sum":[^,]*,"pss_sum":[^,}]*//' "$1"; }
[ -s cal1.jsonl ] && cmp -s <(no_wall cal1.jsonl) <(no_wall cal2.jsonl) ||
    fail "calibrated runs differ in their metrics: $(diff <(no_wall cal1.jsonl) <(no_wall cal2.jsonl) | head -3)"
cmp -s cal1.st cal2.st || fail "calibrated runs differ in their weights"
# the slow rank's compute is 3x the other's exactly (one table, its slowdown)
c0=$(json_arr cal1.jsonl compute_s | cut -d, -f1)
c1=$(json_arr cal1.jsonl compute_s | cut -d, -f2)
within "$(awk -v a="$c1" -v b="$c0" 'BEGIN { print a / b }')" 3 0.001 ||
    fail "calibrated, slowdown 3: rank 1 computed $c1 s, rank 0 $c0 s"
# refusals: one line each, exit 1 or 2
sed 's/^fb .*/fb 1 x/' costs.txt >bad.txt
mpi 1 train "${COMMON[@]}" --epochs 1 --clock virtual --compute-cost calibrated:bad.txt \
    >bad.out 2>&1 && fail "a bad cost table was accepted"
grep -q 'bad.txt:8: expected .fb A B' bad.out || fail "bad table: $(grep -m1 -i error bad.out)"
# a table of another network (its fingerprint), whatever its model line says
sed 's/^net .*/net 0123456789abcdef/' costs.txt >other.txt
mpi 1 train "${COMMON[@]}" --epochs 1 --clock virtual --compute-cost calibrated:other.txt \
    >other.out 2>&1 && fail "another network's table was accepted"
grep -q 'other.txt: costs of another network (lenet5, 12 layers, fingerprint 0123456789abcdef)' \
    other.out || fail "other network: $(grep -m1 -i error other.out)"
# a table of an older hetrain (version 1: no fingerprint, no reference rate)
printf 'hetrain-costs 1\nmodel lenet5\nlayers 12\n' >old.txt
mpi 1 train "${COMMON[@]}" --epochs 1 --clock virtual --compute-cost calibrated:old.txt \
    >old.out 2>&1 && fail "a version 1 table was accepted"
grep -q 'old.txt:1: a cost table of version 1.*calibrate --costs-out' old.out ||
    fail "version 1 table: $(grep -m1 -i error old.out)"
"$HETRAIN" train "${COMMON[@]}" --epochs 1 --compute-cost calibrated >wall.out 2>&1
[ $? -eq 2 ] && grep -q 'add --clock virtual' wall.out || fail "calibrated on the wall clock: $(cat wall.out)"
echo "test_cli_vclock: calibrated costs: metrics and weights bitwise equal run to run (a CPU hog beside one)"

# The wall clock against the virtual one (within 10 % with a core per rank) and a CPU hog beside
# a measured run are figures of the host, not behaviour: bench/bench_vclock.sh measures them
# (figures in docs/BENCHMARKS.md). As a test, a [0.65, 1.10] band on two ranks failed on a fresh
# Debian root under ctest -j2 (2026-12-03); the standards keep such goals out of timed tests.
[ $failures -eq 0 ] || exit 1
echo "test_cli_vclock: passed"

#!/usr/bin/env bash
# make test-smpi: hetrain under SimGrid's SMPI (the hetrain-smpi of make smpi, run by smpirun)
# against the same runs under hetrain's virtual clock, on one platform (hetrain platform: 2
# nodes x 2 ranks, 1 Gbit/s, 50 us; hosts as fast as the shipped table's) and the shipped cost
# table. The arithmetic does not depend on the clock:
# - allreduce, 4 ranks, lenet5, one epoch of synthetic data: the same loss and accuracy to the
#   printed digit, every weight within 1e-5 (SMPI's all-reduce adds in another order than Open
#   MPI's, so the last bits may differ);
# - asp with one worker (2 ranks: plain SGD) gives the very same weights, bit for bit;
# - asp with 3 workers runs to the end under SMPI with every batch taken once (the order in
#   which the server applies gradients follows each simulator's times, so its weights are not
#   compared);
# - hetrain compare --simulator smpi runs every strategy through smpirun and writes its table;
#   without --platform it is refused;
# - under SMPI the emulation options are refused with one line.
# The epoch times of both simulators are printed, not checked: bench/validate_smpi.sh measures
# the gap. Env: HETRAIN (the normal build), HETRAIN_SMPI (make smpi's hetrain-smpi).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
HETRAIN_SMPI=${HETRAIN_SMPI:?set HETRAIN_SMPI to the hetrain-smpi of make smpi}
command -v smpirun >/dev/null || { echo "FAIL: smpirun not found (scripts/setup.sh smpi)" >&2; exit 1; }
HETRAIN=$(readlink -f "$HETRAIN") HETRAIN_SMPI=$(readlink -f "$HETRAIN_SMPI")
. "$(dirname "$0")/mpi.sh"
T=$(mktemp -d /tmp/het_smpi_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0 checks=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { checks=$((checks + 1)); }
SIM=(--cfg=smpi/simulate-computation:no --cfg=smpi/coll-selector:ompi --cfg=smpi/test:1e-7
     --cfg=smpi/iprobe:1e-7 --log=root.thresh:error)
smpi() { local P=$1; shift; timeout -k 5 300 smpirun -np "$P" -platform plat.xml -hostfile hosts "${SIM[@]}" "$HETRAIN_SMPI" "$@"; }
mpi() { local P=$1; shift; het_mpirun "$P" "$HETRAIN" "$@"; }
# hetrain re-executes itself with OPENBLAS_CORETYPE set where OpenBLAS fell back to its generic
# kernels (tensor/blas_select.c); hetrain-smpi cannot (its ranks are threads of smpirun's
# process), so both sides get the kernels the normal build runs, or the weights differ in their
# last bits (an Intel Xeon model 207: OpenBLAS's Prescott under SMPI, SkylakeX under mpirun)
core=$("$HETRAIN" train --model mlp --data synthetic --train-limit 8 --test-limit 8 --epochs 1 \
    --progress off 2>&1 | sed -n 's/.*OpenBLAS kernels \([A-Za-z0-9]*\).*/\1/p' | head -1)
[ -n "${OPENBLAS_CORETYPE:-}" ] || [ -z "$core" ] || export OPENBLAS_CORETYPE=$core
COMMON=(--model lenet5 --data synthetic --train-limit 1024 --test-limit 128 --seed 3 --batch 32
        --epochs 1 --progress off --compute-cost shipped)
VC=(--clock virtual --ranks-per-node 2 --net-bw 125M --net-lat 50e-6 --allreduce-algo flat)
json_num() { grep '"type":"epoch"' "$1" | tail -1 | sed -n "s/.*\"$2\":\\([-0-9.e+]*\\).*/\\1/p"; }
# the float32 payload of a safetensors file, one value a line
floats() { local n; n=$(od -An -t u8 -N8 "$1" | tr -d ' '); od -An -v -f -j $((8 + n)) "$1" | tr -s ' ' '\n' | sed '/^$/d'; }
"$HETRAIN" platform --ranks 4 --ranks-per-node 2 --net-bw 125M --net-lat 50e-6 --host-speed shipped \
    --model lenet5 --out plat.xml --hostfile hosts >plat.out 2>&1 || fail "hetrain platform: $(cat plat.out)"

# ---- allreduce, 4 ranks ----
smpi 4 train "${COMMON[@]}" --export-safetensors s.st --metrics s.jsonl >s.out 2>&1 ||
    fail "allreduce under SMPI exited $?: $(tail -3 s.out)"
mpi 4 train "${COMMON[@]}" "${VC[@]}" --export-safetensors v.st --metrics v.jsonl >v.out 2>&1 ||
    fail "allreduce under hetrain's clock exited $?: $(tail -3 v.out)"
a=$(grep -o 'test_loss [0-9.]* test_acc [0-9.]*' s.out | tail -1) b=$(grep -o 'test_loss [0-9.]* test_acc [0-9.]*' v.out | tail -1)
[ -n "$a" ] && [ "$a" = "$b" ] && ok || fail "allreduce: SMPI '$a', hetrain '$b'"
if [ -s s.st ] && [ -s v.st ]; then
    paste <(floats s.st) <(floats v.st) | awk '{ d = $1 - $2; if (d < 0) d = -d; m = ($2 < 0 ? -$2 : $2); if (m < 1) m = 1;
        if (d / m > w) w = d / m; n++ } END { printf "%d %g\n", n, w; exit !(n > 60000 && w <= 1e-5) }' >w.txt &&
        ok || fail "allreduce: weights differ beyond 1e-5 (values, largest relative difference: $(cat w.txt))"
fi
echo "check_smpi: allreduce 4 ranks: epoch $(json_num s.jsonl epoch_s) s under SMPI, $(json_num v.jsonl epoch_s) s on hetrain's clock; weights: $(cat w.txt 2>/dev/null)"

# ---- asp: one worker is SGD, bit for bit; three run to the end ----
smpi 2 train "${COMMON[@]}" --strategy asp --export-safetensors a1s.st >a1s.out 2>&1 ||
    fail "asp 2 ranks under SMPI exited $?: $(tail -3 a1s.out)"
mpi 2 train "${COMMON[@]}" "${VC[@]}" --ranks-per-node 1 --strategy asp --export-safetensors a1v.st \
    >a1v.out 2>&1 || fail "asp 2 ranks under hetrain's clock exited $?: $(tail -3 a1v.out)"
cmp -s a1s.st a1v.st && ok || fail "asp with one worker: the weights differ between SMPI and hetrain's clock"
smpi 4 train "${COMMON[@]}" --strategy asp --metrics a3.jsonl >a3.out 2>&1 ||
    fail "asp 4 ranks under SMPI exited $?: $(tail -3 a3.out)"
steps=$(grep '"type":"epoch"' a3.jsonl | tail -1 | sed -n 's/.*"worker_steps":\[\([0-9,]*\)\].*/\1/p')
awk -v s="$steps" 'BEGIN { k = split(s, a, ","); for (i = 1; i <= k; i++) t += a[i]; exit !(k == 3 && t == 32) }' &&
    ok || fail "asp 3 workers under SMPI: batches per worker '$steps' (expected 3 summing to 32)"
echo "check_smpi: asp: one worker bitwise equal; 3 workers took batches $steps in $(json_num a3.jsonl epoch_s) s"

# ---- hetrain compare --simulator smpi: every run under smpirun, the same table ----
CMP=(--model lenet5 --data synthetic --train-limit 1024 --test-limit 128 --seed 3 --batch 32 --epochs 1
     --compute-cost shipped)
HETRAIN_SMPI="$HETRAIN_SMPI" "$HETRAIN" compare "${CMP[@]}" --clock virtual --platform plat.xml \
    --hostfile hosts --simulator smpi --ranks 4 --strategies allreduce,asp --out cmp >cmp.out 2>&1 ||
    fail "compare --simulator smpi exited $?: $(tail -3 cmp.out)"
grep -q "Clock: SimGrid's (--simulator smpi" cmp/compare.md 2>/dev/null && grep -q '^| allreduce | 4 ' cmp/compare.md &&
    grep -q '^| asp | 4 ' cmp/compare.md && ok || fail "compare --simulator smpi: $(head -12 cmp/compare.md 2>&1)"
grep -q 'smpirun -platform plat.xml -hostfile hosts' cmp/compare.md && ok ||
    fail "compare --simulator smpi: the runs' command lines do not name smpirun"
"$HETRAIN" compare "${CMP[@]}" --clock virtual --simulator smpi --ranks 4 --out cmp2 >cmp2.out 2>&1 &&
    fail "compare --simulator smpi without --platform was accepted"
grep -q 'simulator smpi needs --platform FILE' cmp2.out && ok || fail "compare --simulator smpi without --platform: $(cat cmp2.out)"

# ---- refusals under SMPI ----
smpi 2 train "${COMMON[@]}" --clock virtual >r.out 2>&1 && fail "--clock virtual accepted under SMPI"
grep -q 'clock: not in the SMPI build: SimGrid simulates the cluster' r.out && ok ||
    fail "--clock virtual under SMPI: $(grep -m1 hetrain r.out)"
smpi 2 train "${COMMON[@]}" --strategy qfb >r.out 2>&1 && fail "qfb accepted under SMPI"
grep -q 'strategy: not in the SMPI build: qfb runs a forward and a backward thread' r.out && ok ||
    fail "qfb under SMPI: $(grep -m1 hetrain r.out)"

echo "check_smpi: $checks passed, $failures failed"
[ $failures -eq 0 ]

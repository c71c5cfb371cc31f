#!/usr/bin/env bash
# The parameter-server strategies end to end under real mpirun (asp; strategy/asp.c, ps.c):
# - one worker (2 ranks: a worker and the server) gives exactly plain SGD on that worker's
#   batches, bit for bit against one process: lenet5 with momentum on both clocks, mlp with
#   Adam (the optimizer's state lives on the server and comes back to rank 0);
# - 4 ranks (3 workers, one 5x slower) on the virtual clock with the shipped cost table: two
#   runs give the same weights and metrics bit for bit (the server takes gradients in virtual
#   time order); every batch of the epoch is taken once (the per-worker steps sum to the
#   epoch's batches, one update each); the slow worker does fewer batches than either fast
#   one and does not hold them back (their batches outnumber its own by more than 2x);
# - resume: 1 epoch, checkpoint, resume to 2 gives the weights of 2 epochs straight
#   (virtual clock, the shipped costs: every count below is the same on any host);
# - the server on rank 0 (--ps-rank 0), more workers than the epoch has batches, and a last
#   partial batch: the run ends cleanly (no message left at the drain point, checked by the
#   strategy) with every sample counted;
# - asp --ps-shards 2 with one worker is SGD bit for bit (adam: the state is split too);
#   --max-staleness 1 keeps every worker within 2 batches of the others;
# - inhad: one worker with an update per IN and --max-staleness 0 is SGD bit for bit on both
#   clocks; 2 nodes x 2 workers at bound 0 make 12 updates of one gradient per worker, staleness
#   0, two node aggregates per update into the server (bytes counted exactly); one worker 5x
#   slower (default bound 1): reproducible bit for bit on the virtual clock, each of the
#   others does at least the even share of the batches and the slow one at most half of it;
#   resume equals an uninterrupted run; the wall clock runs to the end;
# - one rank is refused with one line; an inhad threshold that could never be reached too.
# Under MPICH (busy-polling ranks: no more than the cores) the 2-rank parts run alone.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found" >&2; exit 1; }
# more ranks than cores only where the MPI does not busy-poll (MPICH: the 2-rank parts alone)
many=1
het_mpi_np_ok 5 || { many=0; echo "test_ps: the parts with 3 to 5 ranks skipped: more than the cores ($het_mpi_flavor busy-polls)"; }
T=$(mktemp -d /tmp/het_ps_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
mpi() { local P=$1; shift; het_mpirun "$P" "$HETRAIN" "$@"; }
COMMON=(--data synthetic --train-limit 1536 --test-limit 128 --seed 3 --progress off --batch 32
        --lr 0.02)
# the ps member of the metrics' last epoch line: ps_val FILE KEY
ps_val() { grep '"type":"epoch"' "$1" | tail -1 | sed -n "s/.*\"ps\":{.*\"$2\":\\([-0-9.e+]*\\).*/\\1/p"; }
ps_arr() { grep '"type":"epoch"' "$1" | tail -1 | sed -n "s/.*\"ps\":{.*\"$2\":\\[\\([-0-9.e+,]*\\)\\].*/\\1/p"; }
ep_val() { grep '"type":"epoch"' "$1" | tail -1 | sed -n "s/.*\"$2\":\\([-0-9.e+]*\\).*/\\1/p"; }
# the metrics without what differs between identical runs (wall time, memory)
stable() { sed -e 's/"samples_per_s":[^,]*,//' -e 's/"elapsed_s":[^,]*,//' \
               -e 's/"peak_rss[a-z_]*":[0-9]*,//g' -e 's/"pss_sum":[-0-9]*,//' "$1"; }

# ---- one worker: plain SGD, bit for bit ----
one_worker() { # name args...
    local name=$1; shift
    "$HETRAIN" train "${COMMON[@]}" "$@" --export-safetensors "$name.one.st" >"$name.one.out" 2>&1 ||
        { fail "$name: one process exited $?: $(tail -3 "$name.one.out")"; return; }
    mpi 2 train "${COMMON[@]}" "$@" --strategy asp --export-safetensors "$name.asp.st" \
        >"$name.asp.out" 2>&1 || { fail "$name: asp exited $?: $(tail -3 "$name.asp.out")"; return; }
    cmp -s "$name.one.st" "$name.asp.st" || fail "$name: asp with one worker differs from SGD"
}
one_worker lenet5 --model lenet5 --epochs 2 --momentum 0.9
one_worker lenet5v --model lenet5 --epochs 2 --momentum 0.9 --clock virtual
# (one process folds mlp's update into its step, equal up to rounding (nn.h): --on-nan
# skip-step makes it run the two calls a server's update is)
one_worker mlp --model mlp --epochs 2 --optimizer adam --lr 0.001 --on-nan skip-step
grep -q "asp: server on rank 1" lenet5.asp.out || fail "asp: no plan line: $(head -5 lenet5.asp.out)"
echo "test_ps: one worker is plain SGD (lenet5 momentum on both clocks, mlp adam)"

if [ $many = 1 ]; then
# ---- 3 workers, one 5x slower, virtual clock: reproducible, each batch once ----
# the shipped cost table (costs/lenet5.costs): the same virtual times on every host, so the
# counts below do not depend on how fast this CPU is
V=(--model lenet5 --strategy asp --clock virtual --compute-cost shipped
   --slowdown 1,5,1,1)
for i in 1 2; do
    mpi 4 train "${COMMON[@]}" "${V[@]}" --epochs 2 --metrics "v$i.jsonl" --export-safetensors "v$i.st" \
        >"v$i.out" 2>&1 || fail "3 workers run $i exited $?: $(tail -3 "v$i.out")"
done
cmp -s v1.st v2.st || fail "3 workers: the weights differ between two virtual-clock runs"
[ "$(stable v1.jsonl)" = "$(stable v2.jsonl)" ] || fail "3 workers: the metrics differ between two runs"
steps=$(ps_arr v1.jsonl worker_steps) updates=$(ps_val v1.jsonl updates)
samples=$(ep_val v1.jsonl samples)
awk -v s="$steps" -v u="$updates" -v n="$samples" 'BEGIN {
    k = split(s, a, ","); t = a[1] + a[2] + a[3]
    exit !(k == 3 && t == 48 && u == 48 && n == 1536 && a[2] < a[1] && a[2] < a[3] &&
           a[1] + a[3] > 4 * a[2]) }' ||
    fail "3 workers: per-worker batches '$steps', updates '$updates', samples '$samples' (expected 48 batches taken once each, the slow worker's fewest)"
echo "test_ps: 3 workers (one 5x slower): reproducible in virtual time, batches per worker $steps"

# ---- resume equals an uninterrupted run (virtual clock) ----
mpi 4 train "${COMMON[@]}" "${V[@]}" --epochs 1 --checkpoint ck.bin \
    >r1.out 2>&1 || fail "resume: first part exited $?: $(tail -3 r1.out)"
mpi 4 train "${COMMON[@]}" "${V[@]}" --epochs 2 --checkpoint ck.bin --resume --export-safetensors r.st \
    >r2.out 2>&1 || fail "resume: second part exited $?: $(tail -3 r2.out)"
cmp -s r.st v1.st || fail "resume: the weights differ from 2 epochs straight"
echo "test_ps: resume equals an uninterrupted run"

# ---- --bcast-model: what the clock charges for the broadcasts at the epoch's end ----
# lenet5's weights and momentum (247 kB each) from the server, 4 ranks one a node, 100 Mbit/s:
# the linear broadcast sends 3 copies out of the server's node at once, the binomial tree 2 of
# them one after another (the third beside the second, from another node): one transfer less
# each (2 x 19.8 ms); the library's rules (mpi) pick the linear one at that size under Open MPI,
# the binomial tree under MPICH; the arithmetic is the same
for b in mpi linear binomial; do
    mpi 4 train "${COMMON[@]}" --model lenet5 --strategy asp --clock virtual --compute-cost shipped \
        --train-limit 384 --epochs 1 --ranks-per-node 1 --net-bw 12.5M --bcast-model $b \
        --metrics "bc.$b.jsonl" --export-safetensors "bc.$b.st" >"bc.$b.out" 2>&1 ||
        fail "--bcast-model $b exited $?: $(tail -3 "bc.$b.out")"
done
cmp -s bc.mpi.st bc.linear.st && cmp -s bc.mpi.st bc.binomial.st ||
    fail "--bcast-model changed the weights"
e_m=$(ep_val bc.mpi.jsonl epoch_s) e_l=$(ep_val bc.linear.jsonl epoch_s) e_b=$(ep_val bc.binomial.jsonl epoch_s)
rules=linear e_r=$e_l
[ "$het_mpi_flavor" = mpich ] && rules=binomial e_r=$e_b
awk -v m="${e_m:-0}" -v r="${e_r:-0}" -v l="${e_l:-0}" -v b="${e_b:-0}" 'BEGIN {
    exit !(m > 0 && m == r && l - b > 1.5 * 246824 / 12.5e6 && l - b < 2.5 * 246824 / 12.5e6) }' ||
    fail "--bcast-model: epoch mpi $e_m, linear $e_l, binomial $e_b s (expected mpi = $rules, binomial 2 transfers of 19.7 ms shorter)"
echo "test_ps: --bcast-model: epoch $e_l s linear, $e_b s binomial, the library's rules ($rules) $e_m"

# ---- server on rank 0, more workers than batches, a partial batch ----
mpi 4 train --model mlp --data synthetic --train-limit 70 --test-limit 64 --batch 32 \
    --progress off --epochs 2 --strategy asp --ps-rank 0 --metrics e.jsonl >e.out 2>&1 ||
    fail "ps-rank 0 exited $?: $(tail -3 e.out)"
[ "$(ep_val e.jsonl samples)" = 70 ] && [ "$(ps_arr e.jsonl worker_steps)" != "" ] ||
    fail "ps-rank 0: samples '$(ep_val e.jsonl samples)' (expected 70), steps '$(ps_arr e.jsonl worker_steps)'"
grep -q "server on rank 0" e.out || fail "ps-rank 0: the plan does not name rank 0"

# ---- asp: shards and the stale-synchronous bound ----
"$HETRAIN" train "${COMMON[@]}" --model lenet5 --epochs 2 --optimizer adam --lr 0.001 \
    --export-safetensors sh.one.st >sh.one.out 2>&1 || fail "shards: one process: $(tail -2 sh.one.out)"
mpi 3 train "${COMMON[@]}" --model lenet5 --epochs 2 --optimizer adam --lr 0.001 --strategy asp \
    --ps-shards 2 --export-safetensors sh.st >sh.out 2>&1 || fail "ps-shards 2 exited $?: $(tail -3 sh.out)"
cmp -s sh.one.st sh.st || fail "asp --ps-shards 2 with one worker differs from SGD (adam)"
mpi 4 train "${COMMON[@]}" "${V[@]}" --epochs 1 --max-staleness 1 --metrics ssp.jsonl >ssp.out 2>&1 ||
    fail "max-staleness 1 exited $?: $(tail -3 ssp.out)"
awk -v s="$(ps_arr ssp.jsonl worker_steps)" 'BEGIN { k = split(s, a, ","); lo = a[1]; hi = a[1]
    for (i = 2; i <= k; i++) { if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] }
    exit !(k == 3 && hi - lo <= 2) }' ||
    fail "asp --max-staleness 1: batches per worker '$(ps_arr ssp.jsonl worker_steps)' spread more than 2"
echo "test_ps: asp with 2 shards is SGD; --max-staleness 1 keeps the workers within 2 batches"

fi

# ---- inhad ----
# one worker, an update per iteration number, no gradient outside the weights: plain SGD
for clk in wall virtual; do
    mpi 2 train "${COMMON[@]}" --model lenet5 --epochs 2 --momentum 0.9 --clock $clk \
        --strategy inhad --inhad-threshold 1 --max-staleness 0 --export-safetensors "in1.$clk.st" \
        >"in1.$clk.out" 2>&1 || fail "inhad one worker ($clk) exited $?: $(tail -3 "in1.$clk.out")"
    cmp -s lenet5.one.st "in1.$clk.st" || fail "inhad with one worker ($clk clock) differs from SGD"
done
if [ $many = 1 ]; then
# 2 nodes x 2 workers + the server, soft-sync 1, --max-staleness 0, no slowdown: every update
# holds one gradient of every worker (staleness 0) and one aggregate per node
I=(--model lenet5 --strategy inhad --ranks-per-node 2 --net-bw 125M --net-lat 50e-6 --clock virtual
   --compute-cost shipped)
mpi 5 train "${COMMON[@]}" "${I[@]}" --epochs 1 --max-staleness 0 --metrics s0.jsonl >s0.out 2>&1 ||
    fail "inhad max-staleness 0 exited $?: $(tail -3 s0.out)"
agg=$((4 * 8 + 4 * $(sed -n 's/.*server on rank 4 (node 2, \([0-9]*\) params).*/\1/p' s0.out)))
awk -v u="$(ps_val s0.jsonl updates)" -v sm="$(ps_val s0.jsonl staleness_max)" \
    -v b="$(ps_val s0.jsonl server_bytes_in)" -v st="$(ps_arr s0.jsonl worker_steps)" -v agg="$agg" \
    'BEGIN { exit !(u == 12 && sm == 0 && st == "12,12,12,12" && b == 12 * 2 * agg + 48 * 16) }' ||
    fail "inhad max-staleness 0: updates '$(ps_val s0.jsonl updates)' (12), staleness max '$(ps_val s0.jsonl staleness_max)' (0), bytes in '$(ps_val s0.jsonl server_bytes_in)' (two aggregates of $agg per update + 48 INs), steps '$(ps_arr s0.jsonl worker_steps)'"
# one worker 5x slower (default bound 1): reproducible bit for bit, the others not held back
for i in 1 2; do
    mpi 5 train "${COMMON[@]}" "${I[@]}" --epochs 2 --slowdown 1,5,1,1,1 --metrics "in$i.jsonl" \
        --export-safetensors "in$i.st" >"in$i.out" 2>&1 || fail "inhad run $i exited $?: $(tail -3 "in$i.out")"
done
cmp -s in1.st in2.st || fail "inhad: the weights differ between two virtual-clock runs"
[ "$(stable in1.jsonl)" = "$(stable in2.jsonl)" ] || fail "inhad: the metrics differ between two runs"
# the fast workers take up the slow one's share: each at least the even share (48 / 4), the
# slow one at most half of it
awk -v s="$(ps_arr in1.jsonl worker_steps)" 'BEGIN { k = split(s, a, ",")
    exit !(k == 4 && a[1] + a[2] + a[3] + a[4] == 48 && a[2] <= 6 && a[1] >= 12 && a[3] >= 12 &&
           a[4] >= 12) }' ||
    fail "inhad slow worker: batches per worker '$(ps_arr in1.jsonl worker_steps)'"
# resume equals an uninterrupted run
mpi 5 train "${COMMON[@]}" "${I[@]}" --epochs 1 --slowdown 1,5,1,1,1 --checkpoint ick.bin \
    >ir1.out 2>&1 || fail "inhad resume: first part exited $?: $(tail -3 ir1.out)"
mpi 5 train "${COMMON[@]}" "${I[@]}" --epochs 2 --slowdown 1,5,1,1,1 --checkpoint ick.bin --resume \
    --export-safetensors ir.st >ir2.out 2>&1 || fail "inhad resume: second part exited $?: $(tail -3 ir2.out)"
cmp -s ir.st in1.st || fail "inhad resume: the weights differ from 2 epochs straight"
# the wall clock: runs to the end with every sample counted
mpi 5 train "${COMMON[@]}" --model lenet5 --strategy inhad --ranks-per-node 2 --epochs 1 \
    --slowdown 1,1,1,3,1 --metrics iw.jsonl >iw.out 2>&1 || fail "inhad wall clock exited $?: $(tail -3 iw.out)"
[ "$(ep_val iw.jsonl samples)" = 1536 ] || fail "inhad wall clock: samples '$(ep_val iw.jsonl samples)'"
echo "test_ps: inhad: one worker is SGD (both clocks), synchronous at bound 0, reproducible, resume"

fi

# ---- refusals ----
out=$(mpi 1 train --model mlp --data synthetic --train-limit 64 --strategy asp --progress off 2>&1)
rc=$?
[ $rc -ne 0 ] && printf '%s\n' "$out" | grep -q "needs a parameter server and at least one worker" ||
    fail "asp on one rank: exit $rc, '$out'"

out=$(mpi 2 train --model mlp --data synthetic --train-limit 64 --strategy inhad --progress off \
    --max-staleness 0 --inhad-threshold 2 2>&1)
rc=$?
[ $rc -ne 0 ] && printf '%s\n' "$out" | grep -q "would wait forever" ||
    fail "inhad threshold 2 with 1 worker at bound 0: exit $rc, '$out'"

[ $failures -eq 0 ] || { echo "test_ps: $failures failure(s)" >&2; exit 1; }
echo "test_ps: ok"

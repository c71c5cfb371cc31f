#!/usr/bin/env bash
# --eval-every N: the test accuracy every N steps inside an epoch, charged to no clock, under
# real mpirun:
# - allreduce (2 ranks on two emulated nodes), hgc (3 ranks, --slowdown 1,2,4), qfb (2
#   stages) and daso (3 ranks on nodes of 2 and 1, cycling from epoch 1: its ranks' models
#   differ between syncs and the evaluation takes their mean), asp (a server and 2 workers) and
#   inhad (4 workers on 2 nodes and the server; both: the server evaluates its model alone,
#   every N of its updates, and hands the records round at the epoch's end) on the virtual clock with the shipped cost table: the epoch records (test accuracy,
#   virtual times to 17 digits) and the weights are bit for bit those of the same run without
#   it; one "eval" record at every N-th step that is not an epoch's last, with the step, the
#   epoch's samples, an increasing time before its epoch's end, and the evaluation's wall time;
# - on the wall clock the records have times and eval_s, and the epoch's elapsed_s is past them;
# - asp and inhad refuse it in one line with --ps-shards 2 (each server holds a slice) and for a
#   model with batch-norm statistics (the workers hold them) (they evaluate at epoch ends only);
# - compare passes it to the strategies that take it: the time to the target is the first
#   accuracy (an evaluation's or an epoch's) that reaches it, compare.md says where accuracy was
#   read, and a run of every strategy evaluates inside its epochs.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found" >&2; exit 1; }
het_mpi_np_ok 3 || { echo "test_eval_every: SKIPPED: needs 3 ranks, more than the cores ($het_mpi_flavor busy-polls)"; exit 77; }
T=$(mktemp -d /tmp/het_eval_every_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
mpi() { local P=$1; shift; het_mpirun "$P" "$HETRAIN" "$@"; }
RUN=(--model lenet5 --data synthetic --train-limit 1536 --test-limit 256 --seed 3 --batch 64
     --epochs 2)
COMMON=("${RUN[@]}" --progress off)
# the epoch records without their wall-clock members (elapsed_s, samples_per_s on the wall clock)
epochs_of() { grep '"type":"epoch"' "$1" | sed -E 's/,"(elapsed_s|peak_rss_max|peak_rss_sum|pss_sum)":[0-9.e+-]*//g'; }

# ---- the same run with and without it, on the virtual clock ----
same_run() { # name P every args...
    local name=$1 P=$2 N=$3; shift 3
    for ev in 0 "$N"; do
        mpi "$P" train "${COMMON[@]}" "$@" --clock virtual --compute-cost shipped \
            --eval-every "$ev" --metrics "$name.$ev.jsonl" --export-safetensors "$name.$ev.st" \
            >"$name.$ev.out" 2>&1 ||
            { fail "$name --eval-every $ev exited $?: $(tail -3 "$name.$ev.out")"; return 1; }
    done
    cmp -s "$name.0.st" "$name.$N.st" || fail "$name: the weights differ with --eval-every $N"
    [ "$(epochs_of "$name.0.jsonl")" = "$(epochs_of "$name.$N.jsonl")" ] ||
        fail "$name: the epoch records differ with --eval-every $N:
$(epochs_of "$name.0.jsonl")
$(epochs_of "$name.$N.jsonl")"
    grep -q '"type":"eval"' "$name.0.jsonl" && fail "$name: eval records without --eval-every"
    # every eval record: its step a multiple of N, not an epoch's last; times increasing and
    # before the end of their epoch; eval_s > 0
    awk -v N="$N" -v name="$name" '
        function num(k,   m) { if (match($0, "\"" k "\":[0-9.e+-]+")) return substr($0, RSTART + length(k) + 3, RLENGTH - length(k) - 3); return "x" }
        /"type":"eval"/ { n++; s = num("step"); t = num("time_s"); e = num("eval_s")
            if (s % N != 0) { print name ": eval at step " s ", not a multiple of " N; bad = 1 }
            if (!(t > last)) { print name ": eval times not increasing: " t " after " last; bad = 1 }
            if (!(e > 0)) { print name ": eval_s " e; bad = 1 }
            if ($0 !~ /"clock":"virtual"/) { print name ": no clock in " $0; bad = 1 }
            if (s == laststep) { print name ": two evals at step " s; bad = 1 }
            last = t; laststep = s; inside++ }
        /"type":"epoch"/ { v = num("vtime_s"); if (!(last < v)) { print name ": eval at " last " not before its epoch end " v; bad = 1 }
            if (inside < 1) { print name ": no eval inside epoch " num("epoch"); bad = 1 }
            inside = 0 }
        END { if (n < 2) { print name ": " n " eval records"; bad = 1 } exit bad }' "$name.$N.jsonl" >"$name.check" ||
        fail "$(cat "$name.check")"
    grep -q "^eval epoch 1 step $N (.* samples): test_loss [0-9.]* test_acc [0-9.]* at [0-9.]*s (virtual); evaluation [0-9.]*s, charged to no clock" "$name.$N.out" ||
        fail "$name: no eval line: $(grep -m2 '^eval' "$name.$N.out")"
}
same_run allreduce 2 7 --ranks-per-node 1 --net-bw 125M --net-lat 50e-6 --slowdown 1,2
same_run hgc 3 5 --strategy hgc --speeds 4,2,1 --slowdown 1,2,4
same_run qfb 2 6 --strategy qfb
same_run daso 3 5 --strategy daso --ranks-per-node 2 --daso-warmup-epochs 0 \
    --daso-cooldown-epochs 0 --net-bw 125M --net-lat 50e-6
same_run asp 3 5 --strategy asp
same_run inhad 5 4 --strategy inhad --ranks-per-node 2 --net-bw 125M --net-lat 50e-6
echo "test_eval_every: allreduce, hgc, qfb, daso, asp, inhad: the same weights and epoch records with and without it"

# ---- the wall clock ----
mpi 2 train "${COMMON[@]}" --eval-every 10 --metrics wall.jsonl >wall.out 2>&1 ||
    fail "--eval-every on the wall clock exited $?: $(tail -3 wall.out)"
awk '/"type":"eval"/ { n++; if ($0 ~ /"clock"/ || $0 !~ /"time_s":[0-9]/ || $0 !~ /"eval_s":[0-9]/) bad = 1
                       match($0, /"time_s":[0-9.e+-]+/); t = substr($0, RSTART + 9, RLENGTH - 9) }
     /"type":"epoch"/ && !done { match($0, /"elapsed_s":[0-9.e+-]+/); if (!(substr($0, RSTART + 12, RLENGTH - 12) + 0 > t + 0)) bad = 1; done = 1 }
     END { exit bad || n < 2 }' wall.jsonl || fail "wall clock eval records: $(cat wall.jsonl)"

# ---- what the parameter servers refuse ----
mpi 3 train "${COMMON[@]}" --strategy asp --ps-shards 2 --eval-every 5 >shards.refused 2>&1 &&
    fail "asp took --eval-every with --ps-shards 2"
grep -q -- "--eval-every 5: asp evaluates inside an epoch on one server only (--ps-shards 2" \
    shards.refused || fail "asp --ps-shards 2: no one-line refusal: $(grep -m2 hetrain: shards.refused)"
mpi 3 train "${COMMON[@]}" --model resnet20 --strategy inhad --eval-every 5 >bn.refused 2>&1 &&
    fail "inhad took --eval-every on resnet20"
grep -q -- "--eval-every 5: inhad cannot evaluate inside an epoch a model with batch-norm" \
    bn.refused || fail "inhad resnet20: no one-line refusal: $(grep -m2 hetrain: bn.refused)"


# ---- compare ----
timeout 300 "$HETRAIN" compare "${RUN[@]}" --strategies allreduce,asp,daso --ranks 2 --ranks-per-node 1 \
    --clock virtual --compute-cost shipped --eval-every 4 --target-acc 0.01 --out cmp \
    >cmp.out 2>cmp.err || fail "compare --eval-every exited $?: $(cat cmp.err)"
grep -q '"type":"eval"' cmp/allreduce-seed3.jsonl || fail "compare: allreduce got no --eval-every"
for s in asp daso; do
    grep -q '"type":"eval"' "cmp/$s-seed3.jsonl" || fail "compare: $s got no --eval-every"
done
grep -q "read at each epoch's end and every 4 steps (--eval-every)" \
    cmp/compare.md || fail "compare.md does not say where accuracy was read: $(grep -m1 'time to' cmp/compare.md)"
# a target every accuracy reaches: the table's time is the first evaluation's, inside epoch 1
want=$(grep -m1 '"type":"eval"' cmp/allreduce-seed3.jsonl | sed -n 's/.*"time_s":\([0-9.e+-]*\).*/\1/p')
ep1=$(grep -m1 '"type":"epoch"' cmp/allreduce-seed3.jsonl | sed -n 's/.*"vtime_s":\([0-9.e+-]*\).*/\1/p')
col=$(head -1 cmp/compare.csv | tr ',' '\n' | grep -n '^time_to_target_s$' | cut -d: -f1)
got=$(grep '^allreduce,' cmp/compare.csv | cut -d, -f"$col")
awk -v a="$got" -v b="$want" -v e="$ep1" 'BEGIN { exit !(a != "" && b != "" && (a - b) ^ 2 < 1e-12 && a + 0 < e + 0) }' ||
    fail "compare: allreduce's time to 0.01 is '$got', expected the first evaluation's '$want' (before epoch 1's end, $ep1)"

[ "$failures" -eq 0 ] || { echo "test_eval_every: $failures failure(s)" >&2; exit 1; }
echo "test_eval_every: all checks passed"

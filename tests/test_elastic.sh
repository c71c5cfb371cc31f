#!/usr/bin/env bash
# A lost rank does not lose the job (issue 40), under real mpirun:
# - --checkpoint-steps N: a run that loses a rank mid-epoch (--fail-at R:@S, SIGKILL) and is
#   resumed on as many ranks ends with the checkpoint bytes of the uninterrupted run, for
#   allreduce, hgc, gpipe and qfb (2 and 3 ranks); strategies that run whole epochs only
#   refuse the option in one line;
# - a checkpoint written by P ranks resumes on Q = P - 1 and P + 1 ranks for every strategy:
#   training goes on, the loss keeps falling, and one line names what changed; --resize-lr
#   linear scales the lr by Q / P0.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found (the launcher of the MPI this build uses)" >&2; exit 1; }
T=$(mktemp -d /tmp/het_elastic_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
mpi() { local P=$1; shift; HET_MPI_TIMEOUT=90 het_mpirun "$P" "$HETRAIN" "$@"; }
# the loss of epoch E in a log
loss_of() { sed -n "s/^epoch $2\/[0-9]* loss \([0-9.]*\) .*/\1/p" "$1"; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }
C=(--model lenet5 --data synthetic --train-limit 384 --test-limit 96 --seed 5 --progress off
   --batch 32)

# ---- checkpoints inside an epoch: lose a rank, resume, the uninterrupted run's bytes ----
# the pipelines' cuts fixed: the measured plan times layers of a tenth of a millisecond, moves
# with the host's load (seen under ASan in CI), and the checkpoint holds the cuts
for case in "allreduce 2" "allreduce 3" "hgc 3 --speeds 0.5,0.3,0.2" "gpipe 2 --stages 4" \
    "qfb 3 --stages 3,4"; do
    set -- $case
    s=$1 P=$2
    shift 2
    mpi "$P" train "${C[@]}" --strategy "$s" "$@" --epochs 2 --checkpoint u.ckpt >u.out 2>&1 ||
        { fail "$s on $P: the uninterrupted run: $(tail -3 u.out)"; continue; }
    # 12 steps an epoch: lost at step 17 (epoch 2), the last checkpoint at step 15
    mpi "$P" train "${C[@]}" --strategy "$s" "$@" --epochs 2 --checkpoint i.ckpt \
        --checkpoint-steps 5 --fail-at $((P - 1)):@17 >i.out 2>&1
    rc=$?
    [ $rc -ne 0 ] || fail "$s on $P: --fail-at did not end the run"
    grep -q "rank $((P - 1)): injected failure .* at step 17" i.out ||
        fail "$s on $P: no line of the injected failure: $(tail -3 i.out)"
    # named by a peer's watch under Open MPI; MPICH's launcher kills the job at once with its
    # own line ("YOUR APPLICATION TERMINATED ... Killed (signal 9)"), before a peer sees it
    [ "$het_mpi_flavor" = mpich ] || grep -q "rank $((P - 1)) (pid [0-9]*) is gone" i.out ||
        fail "$s on $P: the lost rank is not named: $(tail -3 i.out)"
    mpi "$P" train "${C[@]}" --strategy "$s" "$@" --epochs 2 --checkpoint i.ckpt --resume \
        >r.out 2>&1 || { fail "$s on $P: resume: $(tail -3 r.out)"; continue; }
    grep -q "^resumed from i.ckpt inside epoch 2 at sample 96 (step 15)" r.out ||
        fail "$s on $P: resume line: $(grep resumed r.out)"
    cmp -s u.ckpt i.ckpt || fail "$s on $P: resumed inside an epoch, the checkpoint differs" \
        "from the uninterrupted run's"
    # the same epoch lines (figures of the resumed epoch summed over its pieces)
    a=$(grep '^epoch 2/2' u.out | cut -d' ' -f1-11)
    b=$(grep '^epoch 2/2' r.out | cut -d' ' -f1-11)
    [ "$a" = "$b" ] || fail "$s on $P: epoch 2 '$b', uninterrupted '$a'"
done
for s in daso asp inhad; do
    mpi 2 train "${C[@]}" --strategy "$s" --epochs 1 --checkpoint d.ckpt --checkpoint-steps 5 \
        >d.out 2>&1 && fail "$s accepted --checkpoint-steps"
    grep -q "checkpoint-steps 5: $s checkpoints at epoch ends only" d.out ||
        fail "$s: no refusal line: $(tail -2 d.out)"
done

# ---- P -> Q for every strategy ----
# each strategy on P ranks for 2 epochs, then on Q for 2 more: the loss falls, one line says
# what changed. FIRST: options of the first run only (hgc's speeds: a resume keeps them).
FIRST=()
resize() {
    local s=$1 P=$2 Q=$3
    shift 3
    rm -f z.ckpt
    mpi "$P" train "${C[@]}" --strategy "$s" "$@" "${FIRST[@]}" --epochs 2 --checkpoint z.ckpt \
        >p.out 2>&1 ||
        { fail "$s $P->$Q: the run on $P: $(tail -3 p.out)"; return; }
    mpi "$Q" train "${C[@]}" --strategy "$s" "$@" --epochs 4 --checkpoint z.ckpt --resume \
        >q.out 2>&1 || { fail "$s $P->$Q: the resume on $Q: $(tail -3 q.out)"; return; }
    grep -q "^resume: $Q ranks from a checkpoint of $P: data re-dealt over $Q ranks from the start of epoch 3; lr [0-9.]* kept" q.out ||
        fail "$s $P->$Q: no line of what changed: $(grep -i resume q.out)"
    local l2 l4
    l2=$(loss_of p.out 2) l4=$(loss_of q.out 4)
    lt "${l4:-9}" "${l2:-0}" || fail "$s $P->$Q: loss of epoch 4 $l4, not below epoch 2's $l2"
    echo "$s $P->$Q: loss $l2 -> $l4: $(grep '^resume: ' q.out)"
}
resize allreduce 3 2
resize allreduce 2 3
resize hgc 3 2
FIRST=(--speeds 0.6,0.4)
resize hgc 2 3
FIRST=()
grep -q "hgc speeds re-scaled from 2 to 3 ranks" q.out || fail "hgc 2->3: speeds: $(grep resume q.out)"
resize daso 4 3 --ranks-per-node 2
grep -q "daso node groups" q.out || fail "daso 4->3: groups: $(grep resume q.out)"
resize daso 4 5 --ranks-per-node 2
# the parameter servers on the virtual clock (reproducible), at a lower lr (asp at 0.05 with
# 3 stale workers swings up and down between epochs)
PS=(--clock virtual --lr 0.02)
resize asp 3 2 "${PS[@]}"
resize asp 3 4 "${PS[@]}"
grep -q "parameter server: roles re-dealt" q.out || fail "asp 3->4: roles: $(grep resume q.out)"
resize inhad 4 5 --ranks-per-node 2 "${PS[@]}"
resize inhad 5 4 --ranks-per-node 2 "${PS[@]}"
resize gpipe 2 3
grep -q "gpipe: re-planned from 2 stages to 3" q.out || fail "gpipe 2->3: plan: $(grep resume q.out)"
resize gpipe 3 2
resize qfb 3 2
grep -q "qfb: error-feedback residuals of 3 ranks dropped" q.out ||
    fail "qfb 3->2: residuals: $(grep resume q.out)"
resize qfb 2 3

# ---- inside an epoch on another number of ranks; --resize-lr linear ----
mpi 3 train "${C[@]}" --epochs 2 --checkpoint m.ckpt --checkpoint-steps 5 --fail-at 2:@17 \
    >m1.out 2>&1 && fail "the run with --fail-at 2:@17 did not fail"
mpi 2 train "${C[@]}" --epochs 3 --checkpoint m.ckpt --resume --resize-lr linear >m2.out 2>&1 ||
    fail "resume of a checkpoint inside an epoch on 2 of 3 ranks: $(tail -3 m2.out)"
grep -q "^resume: 2 ranks from a checkpoint of 3: data re-dealt over 2 ranks from sample 96 of epoch 2; lr 0.05 -> 0.0333333 (--resize-lr linear: x 2/3" m2.out ||
    fail "linear lr: $(grep resume m2.out)"
grep -q "^epoch 3/3 .* lr 0.03333 " m2.out || fail "linear lr not used: $(grep '^epoch 3' m2.out)"
# back on 3 ranks: the lr of the run's start again
mpi 3 train "${C[@]}" --epochs 4 --checkpoint m.ckpt --resume --resize-lr linear >m3.out 2>&1 ||
    fail "back on 3 ranks: $(tail -3 m3.out)"
grep -q "^epoch 4/4 .* lr 0.05 " m3.out || fail "lr back on 3 ranks: $(grep '^epoch 4' m3.out)"

# ---- --fail-at RANK:TIME on the virtual clock: the same step and checkpoint every time ----
V=(--clock virtual --compute-cost shipped --slowdown 1,2)
for k in 1 2; do
    rm -f v$k.ckpt
    mpi 2 train "${C[@]}" "${V[@]}" --epochs 2 --checkpoint v$k.ckpt --checkpoint-steps 4 \
        --fail-at 1:0.05 >v$k.out 2>&1 && fail "--fail-at 1:0.05 (virtual) did not end the run"
done
s1=$(sed -n 's/.*rank 1: injected failure .* at step \([0-9]*\), \([0-9.]*\) s into.*/\1 \2/p' v1.out)
s2=$(sed -n 's/.*rank 1: injected failure .* at step \([0-9]*\), \([0-9.]*\) s into.*/\1 \2/p' v2.out)
[ -n "$s1" ] && [ "$s1" = "$s2" ] || fail "--fail-at on the virtual clock: '$s1' then '$s2'"
cmp -s v1.ckpt v2.ckpt || fail "--fail-at on the virtual clock: the checkpoints left differ"
echo "--fail-at 1:0.05 (virtual): step and time $s1, twice"
# --fail-rate: seeded, the same failure twice
for k in 1 2; do
    mpi 2 train "${C[@]}" "${V[@]}" --epochs 3 --checkpoint w$k.ckpt --checkpoint-steps 2 --fail-rate 8 >w$k.out 2>&1
done
f1=$(grep 'injected failure' w1.out | sort) f2=$(grep 'injected failure' w2.out | sort)
[ -n "$f1" ] && [ "$f1" = "$f2" ] || fail "--fail-rate: '$f1' then '$f2'"
cmp -s w1.ckpt w2.ckpt || fail "--fail-rate: the checkpoints left differ"
echo "--fail-rate 8 (virtual): $f1, twice"
mpi 2 train "${C[@]}" --epochs 1 --fail-at 2:1 >b.out 2>&1 && fail "--fail-at of rank 2 of 2 accepted"
grep -q "fail-at '2:1': rank 2, expected below the 2 ranks" b.out || fail "bad --fail-at: $(tail -1 b.out)"

# ---- hetrain run with this host's launcher: --fail-at 1:@17 on 3 ranks, the relaunch on 2 ----
# (tests/test_supervise.sh: kill -9 on a 3-host vcluster, where namespaces can be made)
timeout 300 "$HETRAIN" run --restarts 1 --min-ranks 2 --metrics sv.jsonl -- "$HET_MPIEXEC" \
    "$HET_MPIEXEC_NUMPROC_FLAG" 3 "${het_mpi_pre[@]}" "$HETRAIN" train "${C[@]}" --epochs 2 \
    --slowdown 1,3,2 --checkpoint sv.ckpt --checkpoint-steps 5 --fail-at 1:@17 >sv.out 2>&1 ||
    fail "hetrain run: exit $?: $(tail -3 sv.out)"
grep -q "^hetrain run: restart 1/1: rank 1 .*lost .*; relaunching on 2 ranks .*from sv.ckpt (after epoch 1, step 15); lost steps 2$" sv.out ||
    fail "hetrain run: restart line: $(grep 'hetrain run' sv.out)"
l2=$(grep '^hetrain run: launch 2: ' sv.out)
case $l2 in *" 2 "*"--slowdown 1,2 "*"--resume"*) ;; *) fail "relaunch: '$l2'" ;; esac
case $l2 in *--fail-at*) fail "relaunch kept --fail-at: '$l2'" ;; esac
grep -q '^hetrain run: done after 1 restart$' sv.out || fail "hetrain run: not done: $(tail -2 sv.out)"
grep -q '"restart":1,"lost_rank":1,.*"ranks":2,"ckpt_epoch":1,"ckpt_step":15,"lost_steps":2' sv.jsonl ||
    fail "hetrain run: metrics: $(cat sv.jsonl)"
grep -q '"restart":1,"downtime_s":[0-9.]*}' sv.jsonl || fail "hetrain run: downtime: $(cat sv.jsonl)"

# hetrain run's usage errors: one line, exit 2, nothing started
"$HETRAIN" run --restarts x -- mpirun -np 2 "$HETRAIN" train >z.out 2>&1
[ $? -eq 2 ] && grep -q "^hetrain run: --restarts: expected a whole number" z.out ||
    fail "bad --restarts: $(head -1 z.out)"
"$HETRAIN" run -- mpirun -np 2 "$HETRAIN" train --epochs 1 >z.out 2>&1
[ $? -eq 2 ] && grep -q "need --checkpoint FILE" z.out || fail "no --checkpoint: $(head -1 z.out)"
"$HETRAIN" run -- mpirun "$HETRAIN" train --checkpoint c.ckpt >z.out 2>&1
[ $? -eq 2 ] && grep -q "needs -np N" z.out || fail "no -np: $(head -1 z.out)"
grep -q "^hetrain run: launch " z.out && fail "a refused hetrain run launched something"

[ $failures -eq 0 ] || { echo "$failures failure(s)" >&2; exit 1; }
echo "test_elastic: OK"

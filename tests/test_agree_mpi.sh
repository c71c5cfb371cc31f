#!/usr/bin/env bash
# Ranks that read different inputs (shared FINDINGS #5): every rank of `hetrain train` compares
# its configuration, its dataset's size and shape and, after a resume, the checkpoint's
# position and parameters with rank 0's before any collective that depends on them. Each case
# runs 2 ranks that differ in one thing (node-local files simulated with a per-rank path, or
# an MPMD command line) and must end within seconds, exit 1 on every rank, and print one line
# (rank 0's) naming the rank and what differs: a stale checkpoint copy, config files that
# differ, MPMD --batch, --epochs, --model and a strategy's own option, hgc speeds files, and
# a strategy's checkpointed state (daso's schedule, hgc's speeds) in per-rank checkpoint
# copies. Ranks that agree still train.
# Skipped (passes) when mpirun is not installed. Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found (the launcher of the MPI this build uses)" >&2; exit 1; }
T=$(mktemp -d /tmp/het_agree_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# a hang fails the test (timeout's 124 / 137) instead of blocking it
run() { timeout -s KILL 40 "$HET_MPIEXEC" "${het_mpi_pre[@]}" "$@" >o.txt 2>e.txt; }
# the rank, for per-rank file names: Open MPI's variable, or the PMI one (MPICH)
R='${OMPI_COMM_WORLD_RANK:-$PMI_RANK}'
O=(--model mlp --data synthetic --train-limit 256 --test-limit 64 --progress off)

# expect_differ NAME PATTERN: the last run exited 1 with one hetrain line matching PATTERN
expect_differ() {
    local rc=$1 name=$2 want=$3 lines
    lines=$(grep -c '^hetrain' e.txt)
    if [ "$rc" -ne 1 ] || [ "$lines" -ne 1 ] || ! grep -q -- "^hetrain: $want" e.txt; then
        fail "$name: rc $rc (expected 1), $lines hetrain lines (expected 1), stderr: $(cat e.txt)"
    fi
}

# ---- a stale checkpoint copy on rank 1 (epoch 1) while rank 0 has epoch 2 ----
"$HETRAIN" train "${O[@]}" --epochs 1 --checkpoint e1.ckpt --quiet || fail "epoch 1 run"
cp e1.ckpt e2.ckpt
"$HETRAIN" train --resume --checkpoint e2.ckpt --epochs 2 --quiet --progress off || fail "epoch 2"
cp e2.ckpt r0.ckpt
cp e1.ckpt r1.ckpt
run -np 2 bash -c "exec $HETRAIN train --resume --checkpoint r$R.ckpt \
    --epochs 3 --progress off"
expect_differ $? "stale checkpoint" "rank 1 differs from rank 0: checkpoint position (epoch 1 vs 2 on rank 0)"
grep -q '^epoch' o.txt && fail "stale checkpoint: trained anyway: $(cat o.txt)"
# the same epoch, other weights (another seed): the parameters differ
"$HETRAIN" train "${O[@]}" --epochs 1 --checkpoint s1.ckpt --quiet --seed 9 || fail "seed 9 run"
cp e1.ckpt r0.ckpt
cp s1.ckpt r1.ckpt
run -np 2 bash -c "exec $HETRAIN train --resume --checkpoint r$R.ckpt \
    --epochs 2 --seed 1 --progress off"
expect_differ $? "other weights" "rank 1 differs from rank 0: checkpoint (parameters)"

# ---- config files that differ (batch 64 vs 32) ----
printf 'model = mlp\nbatch = 64\n' >r0.cfg
printf 'model = mlp\nbatch = 32\n' >r1.cfg
run -np 2 bash -c "exec $HETRAIN train --config r$R.cfg --epochs 1 \
    --data synthetic --train-limit 256 --test-limit 64 --progress off"
expect_differ $? "config files" "rank 1 differs from rank 0: configuration (batch 32 vs 64 on rank 0)"

# ---- MPMD command lines: --batch, --epochs, --model ----
run -np 1 "$HETRAIN" train "${O[@]}" --epochs 1 : -np 1 "$HETRAIN" train "${O[@]}" --epochs 1 \
    --batch 32
expect_differ $? "MPMD --batch" "rank 1 differs from rank 0: configuration (batch 32 vs 64 on rank 0)"
run -np 1 "$HETRAIN" train "${O[@]}" --epochs 1 : -np 1 "$HETRAIN" train "${O[@]}" --epochs 2
expect_differ $? "MPMD --epochs" "rank 1 differs from rank 0: configuration (epochs 2 vs 1 on rank 0)"
run -np 2 "$HETRAIN" train "${O[@]}" --epochs 1 : -np 1 "$HETRAIN" train "${O[@]}" --epochs 1 \
    --model lenet5
expect_differ $? "MPMD --model" "rank 2 differs from rank 0: configuration (model lenet5 vs mlp on rank 0)"
# a strategy's own options (config.h strategy_opts) are one value, compared as the keys are
run -np 1 "$HETRAIN" train "${O[@]}" --epochs 1 --strategy asp : -np 1 "$HETRAIN" train "${O[@]}" \
    --epochs 1 --strategy asp --max-staleness 2
expect_differ $? "MPMD --max-staleness" "rank 1 differs from rank 0: configuration (strategy options)"
# hgc speeds files read per rank that differ
printf '1\n1\n' >s0.txt
printf '2\n1\n' >s1.txt
run -np 2 bash -c "exec $HETRAIN train ${O[*]} --epochs 1 --strategy hgc \
    --speeds-file s$R.txt"
expect_differ $? "speeds files" "rank 1 differs from rank 0: hgc speeds file (s0.txt on rank 0)"
# ---- a strategy's checkpointed state (its agreed_state): each rank resumes its own copy ----
# daso (FINDINGS-v3 B1): two runs that differ only in the plateau detector, blocking every
# batch (all epochs cool-down), so weights and optimizer agree and only the schedule differs
# (gs 1 after two plateaus vs 4); they entered other collectives (MPI_ERR_TRUNCATE, or a hang)
D=(--model lenet5 --data synthetic --train-limit 640 --test-limit 64 --progress off --quiet
   --strategy daso --ranks-per-node 2 --daso-warmup-epochs 0 --daso-cooldown-epochs 10)
if het_mpi_np_ok 4; then
    het_mpirun 4 "$HETRAIN" train "${D[@]}" --epochs 3 --daso-patience 0 \
        --daso-plateau-threshold 0.99 --checkpoint ya.ckpt >/dev/null 2>&1 || fail "daso run a"
    het_mpirun 4 "$HETRAIN" train "${D[@]}" --epochs 3 --checkpoint yb.ckpt >/dev/null 2>&1 ||
        fail "daso run b"
    for r in 0 2; do cp yb.ckpt "y$r.ckpt"; done
    for r in 1 3; do cp ya.ckpt "y$r.ckpt"; done
    run -np 4 bash -c "exec $HETRAIN train --resume --checkpoint y$R.ckpt --epochs 6 \
        --daso-warmup-epochs 0 --daso-cooldown-epochs 0 --daso-patience 2 \
        --daso-plateau-threshold 0.05 --progress off"
    rc=$?
    expect_differ $rc "daso schedule copies" "rank 1 and 1 other rank differ from rank 0: strategy state (daso schedule gs 1 vs 4 on rank 0)"
    grep -q 'TRUNCATE\|^epoch' o.txt e.txt && fail "daso schedule copies: $(cat o.txt e.txt)"
    cmp -s y0.ckpt yb.ckpt && cmp -s y1.ckpt ya.ckpt || fail "daso schedule copies: a checkpoint changed"
fi
# hgc: speeds calibrated under other slowdowns; weights kept equal (lr 1e-30, no momentum),
# the configuration equal on resume (--slowdown given again): only the saved speeds differ
H=(--model lenet5 --data synthetic --train-limit 256 --test-limit 64 --progress off --quiet
   --strategy hgc --lr 1e-30 --momentum 0 --epochs 1)
het_mpirun 2 "$HETRAIN" train "${H[@]}" --slowdown 1,3 --checkpoint ha.ckpt >/dev/null 2>&1 || fail "hgc run a"
het_mpirun 2 "$HETRAIN" train "${H[@]}" --slowdown 3,1 --checkpoint hb.ckpt >/dev/null 2>&1 || fail "hgc run b"
cp ha.ckpt h0.ckpt
cp hb.ckpt h1.ckpt
run -np 2 bash -c "exec $HETRAIN train --resume --checkpoint h$R.ckpt --epochs 2 \
    --slowdown 1,1 --progress off"
expect_differ $? "hgc speeds copies" "rank 1 differs from rank 0: strategy state (hgc speeds)"

# paths that may differ per node (data-dir, metrics) and the worker threads do not count
run -np 1 "$HETRAIN" train "${O[@]}" --epochs 1 --metrics m.jsonl : -np 1 "$HETRAIN" train \
    "${O[@]}" --epochs 1 --threads 2 --data-dir "$T"
rc=$?
[ $rc -eq 0 ] && grep -q '^done: 1 epochs' o.txt ||
    fail "ranks differing only in local settings: rc $rc, $(cat o.txt e.txt)"

[ $failures -eq 0 ] && echo "test_agree_mpi: passed" || exit 1

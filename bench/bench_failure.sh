#!/usr/bin/env bash
# What one failure costs each strategy (issue 40), on the virtual clock with the shipped cost
# tables (the same virtual times on any host): lenet5 on Fashion-MNIST on 4 ranks, time to a
# target test accuracy without a failure, and with rank 1 lost on the way (--fail-at 1:T, T
# half the failure-free run's virtual time to the target) under `hetrain run`, which relaunches on 3 ranks
# from the last checkpoint (--checkpoint-steps where the strategy has it, else the last
# epoch's). The time with the failure is the failed launch's virtual time at the failure plus
# the relaunched run's virtual time to the target; the relaunch itself (processes, MPI start,
# reading the checkpoint) costs wall time that the virtual clock does not see: RESTART_S
# (default 5.8 s, bench_recovery.sh's figure on the vcluster) is added in the last column.
# A benchmark: it prints a Markdown table, it does not pass or fail.
# Env: HETRAIN (build/hetrain), STRATEGIES, TARGET (0.80), EPOCHS (6), LIMIT (12000), CKPT_STEPS
# (20), RESTART_S (5.8).
set -u
cd "$(dirname "$0")/.." || exit 1
HETRAIN=${HETRAIN:-$PWD/build/hetrain}
STRATEGIES=${STRATEGIES:-allreduce hgc daso asp inhad gpipe qfb}
TARGET=${TARGET:-0.80}
RESTART_S=${RESTART_S:-5.8}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=$(mktemp -d /tmp/het_failure_XXXXXX)
trap 'rm -rf "$T"' EXIT
TR=(train --model lenet5 --data fashion-mnist --train-limit "${LIMIT:-12000}" --test-limit 2000
    --batch 64 --epochs "${EPOCHS:-6}" --seed 3 --progress off --clock virtual
    --compute-cost shipped --slowdown 1,1,1.5,2 --ranks-per-node 2)
MPI=(mpirun --oversubscribe -np 4)
# the first epoch line of a log at or above the target: its vtime (since its launch's start)
reach() { awk -v t="$TARGET" '/^epoch /{ for (i = 1; i <= NF; i++) { if ($i == "test_acc") a = $(i+1); if ($i == "vtime") v = $(i+1) }
          sub(/s$/, "", v); if (a + 0 >= t) { print v; exit } }' "$1"; }
last_vtime() { awk '/^epoch /{ for (i = 1; i <= NF; i++) if ($i == "vtime") v = $(i+1) } END { sub(/s$/, "", v); print v }' "$1"; }
echo "| strategy | no failure: vtime to $TARGET (s) | failure at (s) | checkpoints | with the failure, virtual (s) | + relaunch ${RESTART_S} s | cost of the failure |"
echo "|---|---|---|---|---|---|---|"
cd "$T" || exit 1
for s in $STRATEGIES; do
    ck=(--checkpoint-steps "${CKPT_STEPS:-20}")
    every="every ${CKPT_STEPS:-20} steps"
    case $s in daso|asp|inhad) ck=(); every="every epoch" ;; esac
    rm -f a.ckpt b.ckpt
    timeout 900 "${MPI[@]}" "$HETRAIN" "${TR[@]}" --strategy "$s" --checkpoint a.ckpt >a.out 2>&1
    t0=$(reach a.out)
    tot=$(last_vtime a.out)
    mid=$(awk -v v="${t0:-$tot}" 'BEGIN { printf "%.3f", v / 2 }')
    timeout 1800 "$HETRAIN" run --restarts 1 --min-ranks 2 -- "${MPI[@]}" "$HETRAIN" "${TR[@]}" \
        --strategy "$s" --checkpoint b.ckpt "${ck[@]}" --fail-at "1:$mid" >b.out 2>&1
    vf=$(sed -n 's/.*rank 1: injected failure .*, \([0-9.]*\) s into this launch (virtual).*/\1/p' b.out)
    sed -n '/^hetrain run: launch 2/,$p' b.out >b2.out
    t2=$(reach b2.out)
    if [ -z "$t0" ]; then t0="not reached"; fi
    if [ -n "$vf" ] && [ -n "$t2" ]; then
        with=$(awk -v a="$vf" -v b="$t2" 'BEGIN { printf "%.2f", a + b }')
        plus=$(awk -v a="$with" -v r="$RESTART_S" 'BEGIN { printf "%.2f", a + r }')
        cost=$(awk -v a="$plus" -v b="$t0" 'BEGIN { if (b + 0 > 0) printf "+%.0f %%", 100 * (a - b) / b; else print "-" }')
    else
        with="not reached"; plus="-"; cost="-"
        [ -n "$vf" ] || with="no failure seen ($(grep -c '^hetrain run: launch' b.out) launches)"
        # a relaunched run that had reached the target before the failure: reached in launch 1
        t1=$(sed -n '1,/^hetrain run: launch 2/p' b.out | reach /dev/stdin)
        [ -n "$t1" ] && with="$t1 (before the failure)" && plus="$t1" && cost="+0 %"
    fi
    echo "| $s | $t0 | ${vf:--} | $every | $with | $plus | $cost |"
done
echo
echo "lenet5, Fashion-MNIST ${LIMIT:-12000} samples, batch 64, 4 ranks on 2 emulated nodes (slowdown 1,1,1.5,2), --clock virtual --compute-cost shipped, target test accuracy $TARGET; the failure: rank 1 at half the failure-free run's virtual time to the target, relaunched on 3 ranks (slowdown 1,1.5,2)"

#!/usr/bin/env bash
# Recovery time of `hetrain run` on the virtual cluster (issue 40): lenet5 on Fashion-MNIST on
# 4 hosts of tools/vcluster (one rank each, Open MPI over TCP), --checkpoint-steps 20; rank 1 is
# killed (kill -9) in epoch 2, the supervisor relaunches on the 3 hosts left. Prints the time
# from the kill to the relaunched run's "resumed from" line (its first step starts right after),
# the supervisor's downtime (the failed job's end to that line), the steps lost and both final
# accuracies. A benchmark: it prints figures, it does not pass or fail. Needs root (vcluster).
# Env: HETRAIN (default build/hetrain), EPOCHS (3), LIMIT (training samples, 12000).
set -u
cd "$(dirname "$0")/.." || exit 1
HETRAIN=${HETRAIN:-$PWD/build/hetrain}
VC=$PWD/tools/vcluster
export VCLUSTER_DIR=/run/hetrain-vcluster-bench
T=$(mktemp -d /tmp/het_recovery_XXXXXX)
trap '"$VC" down >/dev/null 2>&1; rm -rf "$T"' EXIT
"$VC" up 4 --slots 1 >/dev/null || exit 1
TR=(train --model lenet5 --data fashion-mnist --train-limit "${LIMIT:-12000}" --test-limit 2000
    --batch 64 --epochs "${EPOCHS:-3}" --seed 3 --progress off --stall-warn 0)
cd "$T" || exit 1
"$VC" run -np 4 --map-by node "$HETRAIN" "${TR[@]}" --checkpoint u.ckpt >u.out 2>&1
"$HETRAIN" run --restarts 1 --min-ranks 2 --hosts "$VCLUSTER_DIR/hostfile" --metrics r.jsonl -- \
    "$VC" run -np 4 --map-by node "$HETRAIN" "${TR[@]}" --checkpoint s.ckpt \
    --checkpoint-steps 20 2>&1 | while IFS= read -r l; do
        printf '%s %s\n' "$(date +%s.%N)" "$l"; done >s.out &
sup=$!
until grep -q ' epoch 1/' s.out 2>/dev/null && [ -f s.ckpt ]; do sleep 0.2; done
sleep 2
for p in $(pgrep -f "$HETRAIN train"); do
    [ "$(ip netns identify "$p" 2>/dev/null)" = vh2 ] || continue # this cluster's, no other job's
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && victim=$p
done
[ -n "${BENCH_DEBUG:-}" ] && echo "victim ${victim:-none}: $(ps -o pid,args -p ${victim:-1} | tail -1)" >&2
t_kill=$(date +%s.%N)
kill -9 "${victim:?no rank 1}"
wait $sup
[ -n "${BENCH_DEBUG:-}" ] && cut -d" " -f2- s.out | grep -v "^config" >&2
t_res=$(awk '/ resumed from /{print $1; exit}' s.out)
echo "lenet5, 4 ranks on 4 vcluster hosts, rank 1 killed in epoch 2 (--checkpoint-steps 20):"
awk -v a="$t_kill" -v b="$t_res" 'BEGIN { printf "  recovery (kill -9 to the relaunched run resuming on 3 hosts): %.2f s\n", b - a }'
echo "  supervisor: $(cut -d' ' -f2- s.out | grep '^hetrain run: restart 1/' | sed 's/^hetrain run: //')"
echo "  $(cut -d' ' -f2- s.out | grep '^hetrain run: restart 1: downtime')"
echo "  final accuracy: uninterrupted $(sed -n 's/^done: .* test_acc \([0-9.]*\).*/\1/p' u.out), with the failure $(sed -n 's/.* done: .* test_acc \([0-9.]*\).*/\1/p' s.out)"

#!/usr/bin/env bash
# qfb's two threads per stage, many times over (label threads: make test-tsan runs it under
# ThreadSanitizer): one rank, one stage, so no MPI message: 1,000 micro-batches of mlp and 100
# of lenet5. The forward thread runs ahead of the backward one on the same layers and
# weights, each micro-batch on its own tape: the run ends (no deadlock) with every sample
# counted, and lenet5 (micro-batches of 16, the model's chunk) gives one process's weights
# bit for bit.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
T=$(mktemp -d /tmp/het_qfb_threads_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
timeout 600 "$HETRAIN" train --model mlp --data synthetic --train-limit 1000 --test-limit 64 --seed 1 \
    --progress off --epochs 1 --batch 10 --strategy qfb --micro-batches 10 --metrics many.jsonl \
    >many.out 2>&1 || fail "1,000 micro-batches exited $?: $(tail -3 many.out)"
grep -q '"type":"epoch".*"samples":1000' many.jsonl || fail "1,000 micro-batches: $(tail -1 many.jsonl)"
L=(--model lenet5 --data synthetic --train-limit 1600 --test-limit 64 --seed 2 --progress off
   --epochs 1 --batch 64 --lr 0.05 --momentum 0.9)
"$HETRAIN" train "${L[@]}" --export-safetensors one.st >one.out 2>&1 || fail "one process exited $?"
timeout 600 "$HETRAIN" train "${L[@]}" --strategy qfb --micro-batches 4 --export-safetensors q.st \
    >q.out 2>&1 || fail "lenet5, 100 micro-batches exited $?: $(tail -3 q.out)"
cmp -s one.st q.st || fail "lenet5: qfb on one stage differs from one process"
[ $failures -eq 0 ] || { echo "test_qfb_threads: $failures failure(s)" >&2; exit 1; }
echo "test_qfb_threads: all checks passed"

#!/usr/bin/env bash
# make demo: trains LeNet-5 on Fashion-MNIST (Debian's dataset-fashion-mnist) and prints the
# final test accuracy. EPOCHS, THREADS and BATCH can be overridden from the environment.
set -euo pipefail
build=${1:-build}
epochs=${EPOCHS:-10}
threads=${THREADS:-$(nproc 2>/dev/null || echo 1)}
exec "$build/hetrain" train --model lenet5 --data fashion-mnist --epochs "$epochs" \
     --batch "${BATCH:-64}" --lr 0.02 --schedule cosine --momentum 0.9 --seed 1 --threads "$threads" \
     --metrics "$build/demo.metrics.jsonl"

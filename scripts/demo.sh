#!/usr/bin/env bash
# make demo: `hetrain compare` of every strategy on an emulated heterogeneous cluster: LeNet-5
# on Fashion-MNIST (Debian's dataset-fashion-mnist), 4 MPI ranks as 2 nodes of 2, one rank 3x
# slower, a 1 Gbit/s link with 50 us latency between the nodes. Prints the table and where the
# plots are. daso averages every batch in its first and last epoch (warm-up and cool-down 1,
# not the default 4, which would fill a 5-epoch run).
# Overridable from the environment: EPOCHS (5), TRAIN_LIMIT (0: all 60000), BATCH (64),
# SEEDS (2: mean ± spread over seeds 1, 2), TARGET (0.88), STRATEGIES (all), OUT (BUILD/demo).
set -euo pipefail
build=${1:-build}
out=${OUT:-$build/demo}
strategies=()
[ -z "${STRATEGIES:-}" ] || strategies=(--strategies "$STRATEGIES")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
start=$(date +%s)
"$build/hetrain" compare --model lenet5 --data fashion-mnist --epochs "${EPOCHS:-5}" \
    --train-limit "${TRAIN_LIMIT:-0}" --batch "${BATCH:-64}" --lr 0.02 --schedule cosine \
    --momentum 0.9 --seed 1 --threads 1 \
    --ranks 4 --ranks-per-node 2 --slowdown 1,1,1,3 --net-bw 125M --net-lat 50e-6 \
    --daso-warmup-epochs 1 --daso-cooldown-epochs 1 \
    --seeds "${SEEDS:-2}" --target-acc "${TARGET:-0.88}" --out "$out" "${strategies[@]}"
echo
echo "demo: $(($(date +%s) - start)) s; table $out/compare.md (and .csv), plots $out/accuracy.svg" \
     "and $out/split.svg (open them in a browser; tools/screenshot_compare.sh $out renders PNGs)"

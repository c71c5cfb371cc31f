#!/usr/bin/env bash
# make demo: `hetrain compare` of all seven strategies (the four papers' methods and their
# baselines) on an emulated heterogeneous cluster: LeNet-5 on Fashion-MNIST (Debian's
# dataset-fashion-mnist), 4 MPI ranks on the cluster of platforms/demo.xml (2 nodes of 2 ranks,
# node1 3x slower than node0, a 1 Gbit/s link with 50 us latency between them, SMPI's
# message-size factors; a SimGrid platform file, written by `hetrain platform --ranks 4
# --ranks-per-node 2 --slowdown 1,1,3,3 --net-bw 125M --net-lat 50e-6 --net-factors smpi
# --host-speed shipped --model lenet5`, that smpirun runs too).
# Prints the table and where the plots are. The test accuracy is read every 200 steps
# (--eval-every; the parameter servers' every 200 of their updates), charged to no clock. daso averages every batch in its first and last epoch
# (warm-up and cool-down 1, not the default 4, which would fill a 5-epoch run). Times are
# virtual (--clock virtual): every rank's own clock, its compute charged from the shipped table
# of compute costs (costs/lenet5.costs, built into hetrain: every strategy and seed is charged
# alike, and the table's times are the same on every machine), its communication by the
# network model; nothing sleeps, so the table does not depend on how many cores or how fast a
# CPU this machine has (4 ranks on 2 cores would otherwise time the contention, not the
# methods). Every strategy runs with the same learning rate and momentum: no strategy is tuned
# here.
# Overridable from the environment: EPOCHS (5), TRAIN_LIMIT (0: all 60000), BATCH (64),
# SEEDS (2: mean ± spread over seeds 1, 2), TARGET (0.88), STRATEGIES (all seven:
# allreduce,hgc,daso,asp,inhad,gpipe,qfb), EVAL_EVERY (200), OUT (BUILD/demo),
# COSTS (a cost table of `hetrain calibrate --costs-out FILE` instead of the shipped one: this
# host's times).
set -euo pipefail
build=${1:-build}
out=${OUT:-$build/demo}
strategies=(--strategies "${STRATEGIES:-allreduce,hgc,daso,asp,inhad,gpipe,qfb}")
here=$(cd "$(dirname "$0")/.." && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
start=$(date +%s)
cost=shipped
[ -z "${COSTS:-}" ] || cost="calibrated:$COSTS"
"$build/hetrain" compare --model lenet5 --data fashion-mnist --epochs "${EPOCHS:-5}" \
    --train-limit "${TRAIN_LIMIT:-0}" --batch "${BATCH:-64}" --lr 0.02 --schedule cosine \
    --momentum 0.9 --seed 1 --threads 1 \
    --ranks 4 --platform "$here/platforms/demo.xml" --hostfile "$here/platforms/demo.hosts" \
    --clock virtual --compute-cost "$cost" --eval-every "${EVAL_EVERY:-200}" \
    --daso-warmup-epochs 1 --daso-cooldown-epochs 1 \
    --seeds "${SEEDS:-2}" --target-acc "${TARGET:-0.88}" --out "$out" "${strategies[@]}"
echo
echo "demo: $(($(date +%s) - start)) s; table $out/compare.md (and .csv), plots $out/accuracy.svg" \
     "and $out/split.svg (open them in a browser; tools/screenshot_compare.sh $out renders PNGs)"

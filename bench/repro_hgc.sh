#!/usr/bin/env bash
# HGC's claims (docs/REPRODUCTION.md), paired over seeds on the virtual clock with the shipped
# cost table (the figures do not depend on the host): 4 ranks of one node, speeds 8:1:1:1
# (--slowdown 1,8,8,8: three ranks 8x slower, where the unweighted scheme's effective batch is
# far from B), and the setting where HGC should not win, equal speeds. Per setting three ways
# of splitting the global batch B = 64 (the paper's ablations, hgc's options):
#   equal       --batching equal --weighting rank      (plain synchronous data parallelism)
#   prop-rank   --batching proportional --weighting rank   (the 2020 static load balancing)
#   prop-sample --batching proportional --weighting sample (the 2022 paper: hgc's default)
# The claims: prop-sample's epoch much shorter than equal's where speeds differ, at comparable
# time to prop-rank's, and its accuracy better than prop-rank's. Printed: per way its virtual
# time per epoch and final test accuracy (means), and prop-sample against the other two, paired
# by seed: the ratio of epoch times and the accuracy difference in points, each with its 95 %
# interval (Student's t).
#   bash bench/repro_hgc.sh [BUILD]   (MODEL=lenet5, EPOCHS=5, SEEDS="1 2 3", LR=0.05)
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh" # data_dir, het_paired
model=${MODEL:-lenet5}
epochs=${EPOCHS:-5}
seeds=${SEEDS:-1 2 3}
lr=${LR:-0.05}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=$(mktemp -d /tmp/het_repro_hgc_XXXXXX)
trap 'rm -rf "$T"' EXIT
ways=(equal prop-rank prop-sample)
declare -A flags=([equal]="--batching equal --weighting rank"
                  [prop-rank]="--batching proportional --weighting rank"
                  [prop-sample]="--batching proportional --weighting sample")
last() { grep '"type":"epoch"' "$1" | tail -1; }
num() { last "$1" | sed -n "s/.*\"$2\":\\([-0-9.e+]*\\).*/\\1/p"; }
echo "# HGC reproduced: $model, Fashion-MNIST, 4 ranks, B = 64, lr $lr, momentum 0.9, $epochs epochs, seeds $seeds; virtual clock, shipped costs ($(date -u +%F))"
for setting in "speeds 8:1:1:1|1,8,8,8" "equal speeds|1,1,1,1"; do
    name=${setting%|*} slow=${setting#*|}
    for s in $seeds; do
        for w in "${ways[@]}"; do
            # shellcheck disable=SC2086
            mpirun --oversubscribe -np 4 "$build/hetrain" train --model "$model" \
                --data fashion-mnist --data-dir "$data_dir" --epochs "$epochs" --batch 64 \
                --lr "$lr" --momentum 0.9 --seed "$s" --strategy hgc ${flags[$w]} \
                --slowdown "$slow" --clock virtual --compute-cost shipped --progress off \
                --metrics "$T/$slow.$w.$s.jsonl" >"$T/$slow.$w.$s.out" 2>&1 ||
                { echo "$w seed $s ($name) failed: $(tail -3 "$T/$slow.$w.$s.out")" >&2; exit 1; }
        done
        echo "$name: seed $s done" >&2
    done
    echo
    echo "## $name (--slowdown $slow)"
    echo
    echo "| way | virtual s / epoch (mean) | final test acc (mean) | prop-sample's epoch / this one's | prop-sample's acc - this one's (points) |"
    echo "|---|---:|---:|---:|---:|"
    for w in "${ways[@]}"; do
        e=() a=() pe=() pa=()
        for s in $seeds; do
            e+=("$(awk -v v="$(num "$T/$slow.$w.$s.jsonl" vtime_s)" -v n="$epochs" 'BEGIN { print v / n }')")
            a+=("$(num "$T/$slow.$w.$s.jsonl" test_acc)")
            pe+=("$(awk -v v="$(num "$T/$slow.prop-sample.$s.jsonl" vtime_s)" -v n="$epochs" 'BEGIN { print v / n }')")
            pa+=("$(num "$T/$slow.prop-sample.$s.jsonl" test_acc)")
        done
        me=$(echo "${e[*]}" | awk '{ for (i = 1; i <= NF; i++) s += $i; printf "%.3f", s / NF }')
        ma=$(echo "${a[*]}" | awk '{ for (i = 1; i <= NF; i++) s += $i; printf "%.4f", s / NF }')
        if [ "$w" = prop-sample ]; then r="-" d="-"; else
            r=$(het_paired "${pe[*]}" "${e[*]}" ratio) d=$(het_paired "${pa[*]}" "${a[*]}" points); fi
        echo "| $w | $me | $ma | $r | $d |"
    done
done

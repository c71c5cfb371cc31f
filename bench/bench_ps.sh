#!/usr/bin/env bash
# The parameter-server strategies against allreduce (a benchmark: prints figures, never fails
# on time), the setting of the InHAD issue: 2 nodes x 2 workers, one worker 3x slower
# (rank 3), a 1 Gbit/s link between nodes (--net-bw 125M --net-lat 50e-6); LeNet-5 on
# Fashion-MNIST, SGD momentum 0.9, lr 0.02 cosine, the same epochs for all.
# - allreduce: 4 ranks (--ranks-per-node 2), global batch 64;
# - asp and inhad: 5 ranks, the server on rank 4 in a node of its own; --batch 16 is each
#   worker's batch (allreduce's 64 / 4 workers: the same compute per batch): asp updates on
#   every 16-sample gradient (4x allreduce's updates), inhad every 4 iteration numbers
#   (soft-sync 1: about 64 samples an update, as allreduce).
#
#   bash bench/bench_ps.sh BUILD
#
# Per strategy and seed: the virtual time to TARGET test accuracy (the first epoch's end that
# reaches it), the final test accuracy, the mean staleness and the payload bytes into the
# server per epoch (asp), and the wall time the run took. Virtual time: the shipped table of
# compute costs (costs/lenet5.costs; COSTS=FILE for a table of this host) is charged to every
# run, so that 5 ranks on 2 cores time the method, not the contention, on any host.
#
# Env: EPOCHS (default 8), TRAIN_LIMIT (default 0 = all 60 000), TEST_LIMIT (0 = all 10 000),
# SEEDS (default "1 2 3"), TARGET (default 0.88), RUNS (default "allreduce asp asp-slr inhad";
# asp-slr is asp with inhad's --staleness-lr on, the lr divided by the mean staleness; inhad-bN
# is inhad with --max-staleness N), PS_FLAGS (more flags for asp and inhad, e.g. "--staleness-lr
# off"), COSTS (a cost table to charge instead of measuring one; kept: a later run with the same
# table times the same), NET_BW, NET_LAT, HET_DATA_DIR, BLAS_CORETYPE.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh" # data_dir, Open MPI as root, het_bench_blas_kernels
het="$build/hetrain"
export OPENBLAS_NUM_THREADS=1
[ -x "$het" ] || { echo "bench_ps.sh: $het not found; build first" >&2; exit 1; }
het_bench_blas_kernels "$build/bench_train"
epochs=${EPOCHS:-8}
limit=${TRAIN_LIMIT:-0}
test_limit=${TEST_LIMIT:-0}
seeds=${SEEDS:-1 2 3}
target=${TARGET:-0.88}
runs=${RUNS:-allreduce asp asp-slr inhad}
net_bw=${NET_BW:-125M}
net_lat=${NET_LAT:-50e-6}
out=$(mktemp -d /tmp/het_bench_ps_XXXXXX)
trap 'rm -rf "$out"' EXIT
cost=shipped # costs/lenet5.costs, the same on every host; COSTS=FILE: a table of this host
[ -z "${COSTS:-}" ] || cost="calibrated:$COSTS"
common=(train --model lenet5 --data fashion-mnist --data-dir "$data_dir"
        --progress off --threads 1 --epochs "$epochs" --train-limit "$limit"
        --test-limit "$test_limit" --lr 0.02 --schedule cosine --momentum 0.9
        --ranks-per-node 2 --net-bw "$net_bw" --net-lat "$net_lat"
        --clock virtual --compute-cost "$cost")
# time to target (virtual s), final accuracy, mean staleness, MB into the server per epoch
summary() {
    awk -F'[:,\\[\\]{}]' -v target="$target" '/"type":"epoch"/ {
        for (i = 1; i <= NF; i++) {
            if ($i == "\"vtime_s\"") v = $(i + 1)
            if ($i == "\"test_acc\"") a = $(i + 1)
            if ($i == "\"staleness_mean\"") s = $(i + 1)
            if ($i == "\"server_bytes_in\"") b += $(i + 1)
        }
        e++
        if (a >= target && t == "") t = sprintf("%.2f", v)
    }
    END { printf "%s | %.4f | %s | %s", t == "" ? "not reached" : t, a,
                 s == "" ? "-" : sprintf("%.2f", s), b == 0 ? "-" : sprintf("%.1f", b / e / 1e6) }' "$1"
}
echo "lenet5, Fashion-MNIST, ${limit/#0/60000} samples x $epochs epochs; 2 nodes x 2 workers," \
     "rank 3 3x slower; link --net-bw $net_bw --net-lat $net_lat; $(nproc) cores, OpenBLAS" \
     "$blas_core; virtual clock, compute costs: $cost"
echo
echo "| strategy | seed | virtual s to $target | final test acc | staleness mean | MB into server/epoch | wall s |"
echo "|---|---|---|---|---|---|---|"
for s in $runs; do
    for seed in $seeds; do
        case $s in
            allreduce) np=4 extra=(--strategy allreduce --batch 64 --slowdown 1,1,1,3) ;;
            asp-slr) np=5 extra=(--strategy asp --staleness-lr on --batch 16 --slowdown 1,1,1,3,1
                                 ${PS_FLAGS:-}) ;;
            inhad-b*) np=5 extra=(--strategy inhad --max-staleness "${s#inhad-b}" --batch 16
                                  --slowdown 1,1,1,3,1 ${PS_FLAGS:-}) ;;
            *) np=5 extra=(--strategy "$s" --batch 16 --slowdown 1,1,1,3,1 ${PS_FLAGS:-}) ;;
        esac
        t0=$(date +%s)
        mpirun --oversubscribe -np $np "$het" "${common[@]}" "${extra[@]}" --seed "$seed" \
            --metrics "$out/$s-$seed.jsonl" >"$out/$s-$seed.out"
        echo "| $s | $seed | $(summary "$out/$s-$seed.jsonl") | $(($(date +%s) - t0)) |"
    done
done

#!/usr/bin/env bash
# Scaling in virtual time (a benchmark: prints figures, never fails on time): allreduce, hgc and
# daso on 4, 8, 16, 32 and 64 emulated ranks on this one machine, 8 ranks a node, a 1 Gbit/s
# link between nodes (--net-bw 125M --net-lat 50e-6), every eighth rank (r % 8 == 7) 2x slower,
# LeNet-5 on Fashion-MNIST, 32 samples per rank and step (global batch 32 P: weak scaling).
# Every run is charged the shipped table of compute costs (costs/lenet5.costs: lines fitted at
# 16 and 64 samples, measured once and built into hetrain), so the figures are the method's on
# the emulated cluster, whatever the host's cores and speed.
# Per run: virtual samples/s of the last epoch, efficiency against 4 ranks (samples/s per rank
# over 4 ranks' per rank), and the wall time the run took on this machine (contention: many
# ranks share 2 cores; memory: each rank holds the data set).
#
#   bash bench/bench_scale.sh BUILD
#
# Env: RANKS (default "4 8 16 32 64"), STRATEGIES (default "allreduce hgc daso"), TRAIN_LIMIT
# (default 20480 samples an epoch), EPOCHS (default 2; daso: no warm-up or cool-down epochs, so
# both are cycling epochs), HET_DATA_DIR, BLAS_CORETYPE.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh" # data_dir, Open MPI as root, het_bench_blas_kernels, het_epoch_rate
het="$build/hetrain"
export OPENBLAS_NUM_THREADS=1
[ -x "$het" ] || { echo "bench_scale.sh: $het not found; build first" >&2; exit 1; }
het_bench_blas_kernels "$build/bench_train"
ranks=${RANKS:-4 8 16 32 64}
strategies=${STRATEGIES:-allreduce hgc daso}
limit=${TRAIN_LIMIT:-20480}
epochs=${EPOCHS:-2}
out=$(mktemp -d /tmp/het_bench_scale_XXXXXX)
trap 'rm -rf "$out"' EXIT
echo "lenet5, Fashion-MNIST, $limit samples x $epochs epochs, 32 samples per rank and step," \
     "8 ranks a node, --net-bw 125M --net-lat 50e-6, rank r % 8 == 7 at 2x; virtual time" \
     "(the shipped compute-cost table, costs/lenet5.costs); $(nproc) cores, OpenBLAS $blas_core"
echo
echo "| strategy | ranks | nodes | virtual samples/s | efficiency vs 4 ranks | wall s of the run |"
echo "|---|---:|---:|---:|---:|---:|"
for s in $strategies; do
    base=""
    for P in $ranks; do
        slow=$(awk -v p="$P" 'BEGIN { for (r = 0; r < p; r++) printf "%s%d", r ? "," : "", r % 8 == 7 ? 2 : 1 }')
        extra=()
        [ "$s" = daso ] && extra=(--daso-warmup-epochs 0 --daso-cooldown-epochs 0)
        t0=$(date +%s.%N)
        mpirun --oversubscribe -np "$P" "$het" train \
            --model lenet5 --data fashion-mnist --data-dir "$data_dir" --batch $((32 * P)) \
            --lr 0.02 --momentum 0.9 --progress off --threads 1 --epochs "$epochs" \
            --train-limit "$limit" --test-limit 1000 --ranks-per-node 8 --slowdown "$slow" \
            --net-bw 125M --net-lat 50e-6 --clock virtual --compute-cost shipped \
            --strategy "$s" "${extra[@]}" >"$out/$s-$P.out" 2>&1 ||
            { echo "| $s | $P | run failed: $(tail -1 "$out/$s-$P.out") |"; continue; }
        wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
        sps=$(het_epoch_rate "$out/$s-$P.out")
        [ -n "$base" ] || base=$(awk -v r="$sps" -v p="$P" 'BEGIN { print r / p }')
        eff=$(awk -v r="$sps" -v p="$P" -v b="$base" 'BEGIN { printf "%.2f", r / p / b }')
        nodes=$(( (P + 7) / 8 ))
        echo "| $s | $P | $nodes | $sps | $eff | $wall |"
    done
done

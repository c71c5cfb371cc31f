#!/usr/bin/env bash
# Distributed training figures on Fashion-MNIST (a benchmark: prints figures, never fails on
# time). LeNet-5, global batch 64, SGD lr 0.05 momentum 0.9.
#
#   bash bench/bench_dist.sh BUILD            # throughput, one epoch each (~1-2 minutes):
#       hetrain 1 rank 1 thread; hetrain 2 ranks (mpirun -np 2, 1 thread each);
#       PyTorch 1.13 DDP (gloo) with 2 processes (bench/torch_ddp.py)
#       goals: 2 ranks >= 1.7x hetrain 1 rank, >= 2.5x torch DDP
#   bash bench/bench_dist.sh BUILD accuracy   # 10 epochs (lr 0.02, cosine, momentum 0.9) on
#       1, 2 and 4 ranks: final test accuracies (goal: 2 and 4 ranks within 0.5 point of 1)
#
# Env: PYTHON (default /usr/bin/python3, needs python3-torch), HET_DATA_DIR, EPOCHS (speed mode,
# default 1), BLAS_CORETYPE (bench/common.sh). Runs as root need OMPI_ALLOW_RUN_AS_ROOT (set
# in common.sh).
set -euo pipefail
build=${1:-build}
mode=${2:-speed}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh" # data_dir, py, Open MPI as root, het_bench_blas_kernels, het_epoch_rate/acc
epochs=${EPOCHS:-1}
het="$build/hetrain"
export OPENBLAS_NUM_THREADS=1
[ -x "$het" ] || { echo "bench_dist.sh: $het not found; build first" >&2; exit 1; }
# One OpenBLAS kernel set for hetrain and torch (common.sh, as bench/run.sh).
het_bench_blas_kernels "$build/bench_train"
common=(train --model lenet5 --data fashion-mnist --data-dir "$data_dir" --batch 64
        --progress off --seed 1)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
out=$(mktemp -d /tmp/het_bench_dist_XXXXXX)
trap 'rm -rf "$out"' EXIT

if [ "$mode" = accuracy ]; then
    echo "| ranks | test accuracy after 10 epochs (lenet5, batch 64, lr 0.02 cosine) |"
    echo "|---|---|"
    for P in 1 2 4; do
        mpirun --oversubscribe -np "$P" "$het" "${common[@]}" --epochs 10 --lr 0.02 \
            --schedule cosine --momentum 0.9 >"$out/acc$P.out"
        echo "| $P | $(het_epoch_acc "$out/acc$P.out") |"
    done
    exit 0
fi

"$het" "${common[@]}" --epochs "$epochs" --threads 1 >"$out/one.out"
one=$(het_epoch_rate "$out/one.out")
mpirun --oversubscribe -np 2 --bind-to core "$het" "${common[@]}" --epochs "$epochs" \
    --threads 1 >"$out/two.out"
two=$(het_epoch_rate "$out/two.out")
split=$(sed -n 's/^epoch .*| \(.*\)$/\1/p' "$out/two.out" | tail -n 1)
ddp=0
if "$py" -c 'import torch' 2>/dev/null; then
    "$py" "$here/torch_ddp.py" --model lenet5 --data-dir "$data_dir" --procs 2 --batch 64 \
        --epochs "$epochs" >"$out/ddp.out"
    ddp=$(sed -n 's/.*img_per_s=\([0-9]*\).*/\1/p' "$out/ddp.out")
else
    echo "bench_dist.sh: $py cannot import torch: DDP skipped" >&2
fi
echo "| run (lenet5, Fashion-MNIST, global batch 64, $epochs epoch) | images/s | test acc |"
echo "|---|---|---|"
echo "| hetrain 1 rank, 1 thread | $one | $(het_epoch_acc "$out/one.out") |"
echo "| hetrain 2 ranks (mpirun -np 2), 1 thread each | $two | $(het_epoch_acc "$out/two.out") |"
echo "| PyTorch 1.13 DDP gloo, 2 processes x 1 thread | $ddp | $(sed -n 's/.*test_acc=\([0-9.]*\).*/\1/p' "$out/ddp.out" 2>/dev/null) |"
echo
echo "2 ranks / 1 rank: $(ratio "$two" "$one") (goal >= 1.7); 2 ranks / torch DDP: $(ratio "$two" "$ddp") (goal >= 2.5)"
echo "2-rank time split (rank 0): $split"

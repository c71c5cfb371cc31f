#!/usr/bin/env bash
# bf16's accuracy, paired over seeds: the test accuracy of fp32 and --precision bf16 after
# EPOCHS full epochs of Fashion-MNIST (one process, --threads 2, the zoo's defaults: batch 64,
# SGD lr 0.05 momentum 0.9), for every model of MODELS and every seed of SEEDS; per model the
# mean accuracies and the mean paired difference bf16 - fp32 with its 95 % interval (Student's
# t over the seeds). The issue's bound is 0.3 point. Long: cifar-cnn takes about 5 minutes an
# epoch pair on 2 cores, so 10 epochs x 3 seeds about 50 minutes.
#   MODELS=cifar-cnn SEEDS="1 2 3" EPOCHS=10 bash bench/bench_bf16_acc.sh [BUILD]
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh" # data_dir, het_epoch_acc, het_paired
models=${MODELS:-cifar-cnn resnet20}
seeds=${SEEDS:-1 2 3}
epochs=${EPOCHS:-10}
echo "# bench_bf16_acc: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $epochs epochs, seeds $seeds; $(date -u +%F)"
"$build/hetrain" train --model lenet5 --data synthetic --train-limit 64 --test-limit 64 --epochs 1 \
    --precision bf16 --progress off 2>&1 | grep '^precision:' || true
echo
echo "| model | epochs | seeds | fp32 test acc (mean) | bf16 test acc (mean) | bf16 - fp32 (points, mean [95 % interval]) | per seed (fp32 / bf16) |"
echo "|---|---|---|---|---|---|---|"
for m in $models; do
    f=() b=() per=""
    for s in $seeds; do
        for p in fp32 bf16; do
            out=$("$build/hetrain" train --model "$m" --data fashion-mnist --data-dir "$data_dir" \
                  --epochs "$epochs" --seed "$s" --threads 2 --precision "$p" --progress off 2>&1) ||
                { echo "$out" >&2; exit 1; }
            a=$(het_epoch_acc <(echo "$out"))
            if [ "$p" = fp32 ]; then f+=("$a"); else b+=("$a"); fi
        done
        per="$per ${f[-1]} / ${b[-1]};"
        echo "$m seed $s: fp32 ${f[-1]} bf16 ${b[-1]}" >&2
    done
    mf=$(echo "${f[*]}" | awk '{ for (i = 1; i <= NF; i++) s += $i; printf "%.4f", s / NF }')
    mb=$(echo "${b[*]}" | awk '{ for (i = 1; i <= NF; i++) s += $i; printf "%.4f", s / NF }')
    echo "| $m | $epochs | $seeds | $mf | $mb | $(het_paired "${b[*]}" "${f[*]}" points) |${per%;} |"
done

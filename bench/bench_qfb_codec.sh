#!/usr/bin/env bash
# qfb's gradient codec, paired over seeds: test accuracy of lenet5 on Fashion-MNIST, 2 stages,
# after EPOCHS epochs, with the codecs off (gpipe's bits), the default (int8 activations, int8
# gradients: 2-Step GC without its first step) and the paper's two steps (top-k 10 %, then
# int8; without and with error feedback). Per setting: the mean accuracy and the mean paired
# difference to codecs off with its 95 % interval (Student's t over the seeds), and the bytes
# sent backward against fp32. Accuracy does not depend on the clock: the runs use the virtual
# clock with the shipped costs, so the machine's load changes nothing but how long this takes.
#   bash bench/bench_qfb_codec.sh [BUILD]     (EPOCHS=3, SEEDS="1 2 3")
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh" # data_dir, het_paired
epochs=${EPOCHS:-3}
seeds=${SEEDS:-1 2 3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=$(mktemp -d /tmp/het_qfb_codec_XXXXXX)
trap 'rm -rf "$T"' EXIT
names=(off default topk10 topk10fb)
declare -A flags=(
    [off]="--act-codec off --grad-codec off"
    [default]=""
    [topk10]="--grad-sparsify topk --grad-topk 0.1 --grad-feedback off"
    [topk10fb]="--grad-sparsify topk --grad-topk 0.1 --grad-feedback on"
)
declare -A label=(
    [off]="codecs off (fp32 both ways)"
    [default]="int8 activations, int8 gradients (the default)"
    [topk10]="int8 activations, top-k 10 % then int8, no feedback"
    [topk10fb]="int8 activations, top-k 10 % then int8, error feedback"
)
for s in $seeds; do
    for n in "${names[@]}"; do
        # shellcheck disable=SC2086
        mpirun --oversubscribe -np 2 "$build/hetrain" train --model lenet5 --data fashion-mnist \
            --data-dir "$data_dir" --progress off --epochs "$epochs" --batch 64 --lr 0.05 \
            --schedule cosine --momentum 0.9 --micro-batches 4 --strategy qfb --seed "$s" \
            --clock virtual --compute-cost shipped ${flags[$n]} --metrics "$T/$n.$s.jsonl" \
            >"$T/$n.$s.out" 2>&1 || { echo "run $n seed $s failed: $(tail -3 "$T/$n.$s.out")" >&2; exit 1; }
    done
    echo "seed $s done" >&2
done
last() { grep '"type":"epoch"' "$1" | tail -1; }
acc() { last "$1" | sed -n 's/.*"test_acc":\([-0-9.e+]*\).*/\1/p'; }
echo "# qfb's gradient codec: lenet5, Fashion-MNIST, 2 stages x 4 micro-batches, $epochs epochs, seeds $seeds ($(date -u +%F))"
echo
echo "| setting | test acc (mean) | paired difference to codecs off (points, mean [95 % interval]) | bytes backward / fp32 |"
echo "|---|---:|---:|---:|"
for n in "${names[@]}"; do
    a=""
    for s in $seeds; do a="$a $(acc "$T/$n.$s.jsonl")"; done
    ratio=$(awk -v s="$(last "$T/$n.${seeds%% *}.jsonl" | sed -n 's/.*"bytes_bwd":\[\([-0-9.e+,]*\)\].*/\1/p')" \
                -v r="$(last "$T/$n.${seeds%% *}.jsonl" | sed -n 's/.*"bytes_bwd_fp32":\[\([-0-9.e+,]*\)\].*/\1/p')" \
                'BEGIN { split(s, a, ","); split(r, b, ","); x = 0; y = 0
                         for (i in a) x += a[i]; for (i in b) y += b[i]
                         printf "%.3f", (y > 0 ? x / y : 1) }')
    offs=""
    for s in $seeds; do offs="$offs $(acc "$T/off.$s.jsonl")"; done
    ma=$(echo "$a" | awk '{ for (i = 1; i <= NF; i++) s += $i; printf "%.4f", s / NF }')
    echo "| ${label[$n]} | $ma | $(het_paired "$a" "$offs" points) | $ratio |"
done

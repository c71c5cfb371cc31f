#!/usr/bin/env bash
# The pipelines (a benchmark: prints figures, never fails on time): qfb against gpipe and
# 1F1B, and Q-FB's two threads against the same rank's two workers.
#
#   bash bench/bench_pipe.sh BUILD [PART...]     PART: threads, pipes, bytes, accuracy (all)
#
# - threads: one rank, wall clock, LeNet-5 on Fashion-MNIST, batch 64: the rank's forward and
#   backward in sequence on 1 and on 2 worker threads (allreduce --threads 1 / 2) against qfb
#   with one stage (a forward and a backward thread, M = 4 micro-batches, no message) and
#   gpipe with one stage (one thread, M = 4); samples/s of the last epoch, side by side,
#   ROUNDS times in turn (the median is printed).
# - pipes: throughput and bubble (per stage: the part of the epoch in which no thread of the
#   stage computed) of gpipe, gpipe --pipe-schedule 1f1b, qfb with codecs off and qfb with
#   codecs on: K = 2 on 2 ranks (both clocks) and K = 4 x --pipelines 2 on 8 ranks (virtual
#   clock only: 8 ranks on 2 cores; the virtual runs charge the shipped cost table,
#   costs/lenet5.costs, so their figures are the same on any host), M = 8, 1 Gbit/s between
#   nodes (a rank a node).
# - bytes: qfb's bytes between stages with codecs on against their fp32 size (the metrics'
#   bytes_fwd/bwd and bytes_fwd/bwd_fp32), K = 2.
# - accuracy: EPOCHS (10) epochs of lenet5 and resnet20 on all of Fashion-MNIST on 2 ranks
#   (K = 2, M = 4, SGD momentum 0.9, lr 0.05 cosine, batch 64): the final test accuracy of
#   gpipe, qfb with codecs off and qfb with codecs on. Long: about 1 minute per lenet5 run
#   and 25 per resnet20 run on 2 cores (MODELS=lenet5 for the short part).
#
# Env: ROUNDS (3), EPOCHS (10), MODELS ("lenet5 resnet20"), TRAIN_LIMIT (0 = all) and RUNS
# ("gpipe qfb-off qfb"; qfb-off gives gpipe's weights bit for bit, tests/test_qfb.sh) for the
# accuracy part, HET_DATA_DIR, BLAS_CORETYPE.
set -euo pipefail
build=${1:-build}
shift || true
parts=${*:-threads pipes bytes accuracy}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh" # data_dir, Open MPI as root, het_bench_blas_kernels, het_epoch_rate/acc
het="$build/hetrain"
export OPENBLAS_NUM_THREADS=1
[ -x "$het" ] || { echo "bench_pipe.sh: $het not found; build first" >&2; exit 1; }
het_bench_blas_kernels "$build/bench_train"
rounds=${ROUNDS:-3}
out=$(mktemp -d /tmp/het_bench_pipe_XXXXXX)
trap 'rm -rf "$out"' EXIT
data=(--data fashion-mnist --data-dir "$data_dir" --progress off)
echo "bench_pipe: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores, OpenBLAS $blas_core, $(date -u +%Y-%m-%d)"
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# the member KEY (an array) of the epoch's strategy object: arr FILE STRATEGY KEY
arr() { grep '"type":"epoch"' "$1" | tail -1 | sed -n "s/.*\"$2\":{.*\"$3\":\\[\\([-0-9.e+,]*\\)\\].*/\\1/p"; }
sum() { tr ',' '\n' | awk '{ s += $1 } END { printf "%.0f", s }'; }

for part in $parts; do
case $part in
threads)
    echo
    echo "== one rank, wall clock: lenet5, batch 64, 12 800 samples x 2 epochs; samples/s (median of $rounds) =="
    base=(train --model lenet5 "${data[@]}" --train-limit 12800 --test-limit 500 --epochs 2 --batch 64)
    declare -A r=()
    names=("1 worker" "2 workers" "gpipe, 1 stage, M=4" "qfb, 1 stage, M=4")
    for ((k = 0; k < rounds; k++)); do
        for n in "${names[@]}"; do
            case $n in
            "1 worker") a=(--threads 1) ;;
            "2 workers") a=(--threads 2) ;;
            gpipe*) a=(--strategy gpipe --micro-batches 4) ;;
            qfb*) a=(--strategy qfb --micro-batches 4) ;;
            esac
            "$het" "${base[@]}" "${a[@]}" >"$out/t.out" 2>&1
            r[$n]="${r[$n]:-} $(het_epoch_rate "$out/t.out")"
        done
    done
    w2=$(echo ${r["2 workers"]} | tr ' ' '\n' | median)
    for n in "${names[@]}"; do
        m=$(echo ${r[$n]} | tr ' ' '\n' | median)
        printf '%-22s %8s samples/s  %.2fx of 2 workers   (runs:%s)\n' "$n" "$m" \
            "$(awk -v a="$m" -v b="$w2" 'BEGIN { print a / b }')" "${r[$n]}"
    done
    ;;
pipes)
    echo
    echo "== pipelines: lenet5, batch 64, M = 8, 12 800 samples, 2 epochs, 1 Gbit/s, a rank a node =="
    base=(train --model lenet5 "${data[@]}" --train-limit 12800 --test-limit 500 --epochs 2 --batch 64
          --micro-batches 8 --ranks-per-node 1 --net-bw 125M --net-lat 50e-6)
    printf '%-28s %-8s %12s  %s\n' "run" "clock" "samples/s" "bubble per stage (pipeline 0)"
    for setting in "2 1 wall" "2 1 virtual" "8 2 virtual"; do
        set -- $setting
        P=$1 R=$2 clk=$3
        for s in gpipe 1f1b qfb-off qfb; do
            case $s in
            gpipe) a=(--strategy gpipe) st=gpipe ;;
            1f1b) a=(--strategy gpipe --pipe-schedule 1f1b) st=gpipe ;;
            qfb-off) a=(--strategy qfb --act-codec off --grad-codec off) st=qfb ;;
            qfb) a=(--strategy qfb) st=qfb ;;
            esac
            cost=() # the virtual clock charges the shipped table: the same figures on any host
            [ "$clk" = virtual ] && cost=(--compute-cost shipped)
            mpirun --oversubscribe -n "$P" "$het" "${base[@]}" "${a[@]}" --pipelines "$R" \
                --clock "$clk" "${cost[@]}" --metrics "$out/p.jsonl" >"$out/p.out" 2>&1 ||
                { echo "$s on $P ranks failed: $(tail -2 "$out/p.out")"; continue; }
            bub=$(arr "$out/p.jsonl" "$st" bubble | tr ',' '\n' | awk '{ printf "%s%.0f%%", (NR > 1 ? " " : ""), 100 * $1 }')
            printf '%-28s %-8s %12s  %s\n' "$s, K=$((P / R)) x R=$R" "$clk" \
                "$(het_epoch_rate "$out/p.out")" "$bub"
        done
    done
    ;;
bytes)
    echo
    echo "== qfb's bytes between stages, K = 2, lenet5, M = 8, 12 800 samples, 1 epoch =="
    mpirun -n 2 "$het" train --model lenet5 "${data[@]}" --train-limit 12800 --test-limit 500 \
        --epochs 1 --batch 64 --micro-batches 8 --strategy qfb --metrics "$out/b.jsonl" >"$out/b.out" 2>&1
    for d in fwd bwd; do
        s=$(arr "$out/b.jsonl" qfb "bytes_$d" | sum)
        f=$(arr "$out/b.jsonl" qfb "bytes_${d}_fp32" | sum)
        printf '%s: %s bytes, fp32 %s bytes: %.1f %%\n' "$d" "$s" "$f" "$(awk -v a="$s" -v b="$f" 'BEGIN { print 100 * a / b }')"
    done
    ;;
accuracy)
    epochs=${EPOCHS:-10}
    echo
    echo "== test accuracy after $epochs epochs, 2 ranks (K = 2, M = 4), batch 64, lr 0.05 cosine, momentum 0.9 =="
    for model in ${MODELS:-lenet5 resnet20}; do
        for s in ${RUNS:-gpipe qfb-off qfb}; do
            case $s in
            gpipe) a=(--strategy gpipe) ;;
            qfb-off) a=(--strategy qfb --act-codec off --grad-codec off) ;;
            qfb) a=(--strategy qfb) ;;
            esac
            t0=$(date +%s)
            mpirun -n 2 "$het" train --model "$model" "${data[@]}" --train-limit "${TRAIN_LIMIT:-0}" \
                --epochs "$epochs" --batch 64 --lr 0.05 --schedule cosine --momentum 0.9 \
                --micro-batches 4 "${a[@]}" >"$out/a.out" 2>&1 ||
                { echo "$model $s failed: $(tail -2 "$out/a.out")"; continue; }
            printf '%-9s %-8s test_acc %s   (%d s)\n' "$model" "$s" "$(het_epoch_acc "$out/a.out")" \
                $(($(date +%s) - t0))
        done
    done
    ;;
*) echo "bench_pipe.sh: unknown part '$part' (threads, pipes, bytes, accuracy)" >&2; exit 2 ;;
esac
done

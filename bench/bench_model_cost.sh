#!/usr/bin/env bash
# What the network model costs in wall time (a benchmark: prints figures, never fails on them):
# one 64-rank epoch on the virtual clock under two builds of hetrain, side by side, rounds
# interleaved (issue 36's bound: the run time of a 64-rank virtual epoch grows by at most 1.5x).
# Each run: lenet5 on Fashion-MNIST, 8 nodes x 8 ranks, 1 Gbit/s between nodes (--net-bw 125M
# --net-lat 50e-6), 8 steps of 32 samples per rank, the shipped compute-cost table (the same
# virtual times on every host), every strategy the two builds both have; per strategy the
# median wall seconds of each build over ROUNDS, their ratio, and each build's virtual epoch
# (what the model charged: it changes where the model did). 64 processes share this machine's
# cores, so the wall time is mostly the host's: compare the ratio, measured in one run.
#
#   bash bench/bench_model_cost.sh OLD_BUILD NEW_BUILD
#
# OLD_BUILD: a build folder of the code to compare with, e.g. issue 36's start:
#   git worktree add /tmp/base 66df412 && cmake -S /tmp/base -B /tmp/base/build
#   -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/base/build --target hetrain_cli
# Env: ROUNDS (default 3), STRATEGIES (default "allreduce hgc daso asp inhad gpipe qfb"),
# SIZE (nodes x ranks per node, default 8x8), HET_DATA_DIR.
set -euo pipefail
old=${1:?usage: bench_model_cost.sh OLD_BUILD NEW_BUILD}
new=${2:?usage: bench_model_cost.sh OLD_BUILD NEW_BUILD}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh" # data_dir, Open MPI as root
for b in "$old" "$new"; do
    [ -x "$b/hetrain" ] || { echo "bench_model_cost.sh: $b/hetrain not found; build first" >&2; exit 1; }
done
rounds=${ROUNDS:-3}
strategies=${STRATEGIES:-allreduce hgc daso asp inhad gpipe qfb}
size=${SIZE:-8x8}
N=${size%x*} R=${size#*x} P=$((N * R))
out=$(mktemp -d /tmp/het_model_cost_XXXXXX)
trap 'rm -rf "$out"' EXIT
echo "$P ranks ($size), lenet5, 8 steps of 32 samples per rank, --net-bw 125M --net-lat 50e-6," \
     "virtual clock, shipped costs; $rounds rounds interleaved; $(nproc) cores;" \
     "old $(cd "$old/.." && git rev-parse --short HEAD 2>/dev/null || echo '?')," \
     "new $(cd "$new/.." && git rev-parse --short HEAD 2>/dev/null || echo '?'); $(date -u +%F)"
echo
echo "| strategy | old wall s (median) | new wall s (median) | new / old | old virtual epoch s | new virtual epoch s |"
echo "|---|---:|---:|---:|---:|---:|"
# one run of build $1, strategy $2: prints "wall_s epoch_s" (epoch "-" when it failed)
run() {
    local b=$1 s=$2 extra=() t0 t1 e
    case $s in
        daso) extra=(--daso-warmup-epochs 0 --daso-cooldown-epochs 0) ;;
        gpipe | qfb) extra=(--pipelines $((P / 2)) --micro-batches 4) ;;
    esac
    t0=$(date +%s.%N)
    mpirun --oversubscribe -np "$P" "$b/hetrain" train --model lenet5 --data fashion-mnist \
        --data-dir "$data_dir" --batch $((32 * P)) --train-limit $((8 * 32 * P)) --test-limit 64 \
        --epochs 1 --lr 0.02 --momentum 0.9 --seed 1 --progress off --threads 1 \
        --ranks-per-node "$R" --net-bw 125M --net-lat 50e-6 --clock virtual \
        --compute-cost shipped --strategy "$s" "${extra[@]}" --metrics "$out/m.jsonl" \
        >"$out/run.out" 2>&1 || true
    t1=$(date +%s.%N)
    e=$(grep '"type":"epoch"' "$out/m.jsonl" 2>/dev/null | tail -1 |
        sed -n 's/.*"epoch_s":\([0-9.e+-]*\).*/\1/p')
    rm -f "$out/m.jsonl"
    awk -v a="$t0" -v b="$t1" -v e="${e:--}" 'BEGIN { printf "%.2f %s\n", b - a, e }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for s in $strategies; do
    : >"$out/old" && : >"$out/new"
    for ((i = 0; i < rounds; i++)); do
        run "$old" "$s" >>"$out/old"
        run "$new" "$s" >>"$out/new"
    done
    wo=$(cut -d' ' -f1 "$out/old" | median) wn=$(cut -d' ' -f1 "$out/new" | median)
    eo=$(tail -1 "$out/old" | cut -d' ' -f2) en=$(tail -1 "$out/new" | cut -d' ' -f2)
    printf '| %s | %s | %s | %s | %s | %s |\n' "$s" "$wo" "$wn" \
        "$(awk -v a="$wo" -v b="$wn" 'BEGIN { printf "%.2f", b / a }')" \
        "$(awk -v x="$eo" 'BEGIN { if (x == "-") print "- (failed)"; else printf "%.4g", x }')" \
        "$(awk -v x="$en" 'BEGIN { if (x == "-") print "- (failed)"; else printf "%.4g", x }')"
done

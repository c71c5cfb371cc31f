#!/usr/bin/env bash
# shellcheck disable=SC2054,SC2154 # commas are option values; data_dir is common.sh's
# The time claims of DASO, InHAD and Q-FB (docs/REPRODUCTION.md), each in the setting its
# paper is about and in one where it should not win. Each setting is one `hetrain compare` on
# the virtual clock with the shipped cost table (the figures do not depend on the host),
# paired over seeds with the paper's baseline, the time to the target read every 200 steps
# (--eval-every; a parameter server's: every 200 of its updates). PAPER and its settings:
#   daso   allreduce against daso, both tuned on the same grid (--tune-lr x --tune-momentum,
#          the best held-out accuracy; B = 64 global):
#          1g-heat    2 nodes of 2 ranks, 1 Gbit/s between them, HeAT's schedule (4 warm-up and
#                     4 cool-down epochs of blocking averages, the cycling phase in between)
#          1g-short   the same with 1 warm-up and 1 cool-down epoch (the paper leaves the
#                     lengths open: more of the run in the cycling phase)
#          100m-heat  100 Mbit/s between the nodes, HeAT's schedule
#          fast       100 Gbit/s between the nodes (nothing to hide): should not win (daso needs
#                     2 nodes or more, so one node is not a setting)
#   inhad  allreduce (5 ranks, B = 256 global: the samples of an inhad update) against asp
#          and inhad (a server and 4 workers, B = 64 each), tuned alike:
#          slow       2 nodes of 2 ranks and the server's, one worker 3x slower, 1 Gbit/s
#          fast       one node, equal workers: should not win
#   qfb    gpipe with 2 threads a stage (qfb's compute) against qfb, 2 stages, and allreduce on
#          the same 2 ranks of 2 threads (the same cores), tuned alike:
#          1g         the stages on 2 nodes, 1 Gbit/s between them
#          one-node   both stages on one node (messages nearly free): should not win
# Printed per setting: compare's per-strategy means (virtual time per epoch, time to the
# target, final test accuracy), its paired rows (each strategy's figure over the baseline's
# on the same seed: mean [95 % interval, Student's t]) and the grid points chosen; compare's
# own output (compare.md, the runs' metrics and logs) is kept in OUT.
#   bash bench/repro_paper.sh PAPER [BUILD]   (EPOCHS: daso 10, inhad 8, qfb 5; SEEDS=3,
#       TARGET=0.88, SETTINGS="..." a subset, OUT=dir (default a temporary one, removed))
set -euo pipefail
paper=${1:?usage: bash bench/repro_paper.sh daso|inhad|qfb [BUILD]}
build=${2:-build}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh" # data_dir
seeds=${SEEDS:-3}
target=${TARGET:-0.88}
tune=(--tune-lr 0.01,0.02,0.05 --tune-momentum 0.5,0.9 --tune-epochs 2)
case $paper in
daso) epochs=${EPOCHS:-10} all="1g-heat 1g-short 100m-heat fast"
      run=(--ranks 4 --strategies allreduce,daso --baseline allreduce --eval-every 200 "${tune[@]}") ;;
inhad) epochs=${EPOCHS:-8} all="slow fast"
      run=(--ranks 5 --strategies allreduce,asp,inhad --set allreduce:batch=256 --baseline allreduce
           --eval-every 200 "${tune[@]}") ;;
qfb) epochs=${EPOCHS:-5} all="1g one-node"
      run=(--ranks 2 --strategies gpipe,qfb,allreduce --set gpipe:threads=2 --set allreduce:threads=2
           --baseline gpipe --eval-every 200
           "${tune[@]}") ;;
*) echo "repro_paper: unknown paper '$paper' (daso, inhad or qfb)" >&2; exit 2 ;;
esac
settings=${SETTINGS:-$all}
if [ -n "${OUT:-}" ]; then T=$OUT; mkdir -p "$T"; else
    T=$(mktemp -d /tmp/het_repro_paper_XXXXXX); trap 'rm -rf "$T"' EXIT; fi
echo "# $paper reproduced: lenet5, Fashion-MNIST, $epochs epochs, seeds 1-$seeds, target $target; virtual clock, shipped costs ($(date -u +%F))"
for set in $settings; do
    case $paper/$set in
    daso/1g-heat) net=(--ranks-per-node 2 --net-bw 125M --net-lat 50e-6) ;;
    daso/1g-short) net=(--ranks-per-node 2 --net-bw 125M --net-lat 50e-6 --daso-warmup-epochs 1
                        --daso-cooldown-epochs 1) ;;
    daso/100m-heat) net=(--ranks-per-node 2 --net-bw 12.5M --net-lat 50e-6) ;;
    daso/fast) net=(--ranks-per-node 2 --net-bw 12.5G --net-lat 2e-6) ;;
    inhad/slow) net=(--ranks-per-node 2 --slowdown 1,3,1,1,1 --net-bw 125M --net-lat 50e-6) ;;
    inhad/fast) net=(--ranks-per-node 5) ;;
    qfb/1g) net=(--ranks-per-node 1 --net-bw 125M --net-lat 50e-6) ;;
    qfb/one-node) net=(--ranks-per-node 2) ;;
    *) echo "repro_paper: $paper has no setting '$set' (its settings: $all)" >&2; exit 2 ;;
    esac
    "$build/hetrain" compare --model lenet5 --data fashion-mnist --data-dir "$data_dir" \
        --epochs "$epochs" "${net[@]}" --clock virtual --compute-cost shipped "${run[@]}" \
        --seeds "$seeds" --target-acc "$target" --out "$T/$set" >"$T/$set.log" 2>&1 ||
        { echo "repro_paper: $paper $set: compare exited $?: $(tail -3 "$T/$set.log")" >&2; exit 1; }
    md=$T/$set/compare.md
    echo
    echo "## $set (${net[*]})"
    echo "strategy | time/epoch (virtual s) | time to $target (virtual s) | final test acc"
    grep -E '^\| [a-z0-9]+ \| [0-9]+ \|' "$md" | cut -d'|' -f2,4-6
    echo "paired | time/epoch ratio | time to $target ratio | acc difference (points)"
    grep -E '^\| [a-z0-9]+ \| [0-9.]+ \[' "$md" ||
        { echo "repro_paper: $paper $set: no paired row in $md" >&2; exit 1; }
    grep -E '^\| [a-z0-9]+ \| ([0-9.]+|-) \|' "$md" | awk -F'|' -v h="$(grep -m1 -E '^\| strategy \| lr ' "$md")" '
        BEGIN { n = split(h, col, "|") }
        { for (i = 3; i <= NF; i++) if ($i ~ /\*\*/) print "tuned:" $2 "->" col[i] }'
done

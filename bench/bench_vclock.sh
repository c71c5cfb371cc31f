#!/usr/bin/env bash
# The virtual clock against real time (a benchmark: prints figures, never fails on time).
#
#   bash bench/bench_vclock.sh BUILD            # agreement with a core per rank: the virtual
#       epoch (--clock virtual, measured CPU time) against the wall-clock epoch under the same
#       emulation, 1 rank, and 2 ranks with --slowdown 1,2 as 2 emulated nodes on a 1 Gbit/s
#       link (--net-bw 125M --net-lat 50e-6); lenet5 and mlp, the median epoch of 5, ROUNDS
#       rounds taken in turn (median).
#   bash bench/bench_vclock.sh BUILD vcluster   # the virtual clock against a real network:
#       2 ranks, one per host of the virtual cluster (tools/vcluster: network namespaces, Open
#       MPI over TCP, a 100 Mbit/s tbf link: a rate this machine emulates faithfully), against
#       the virtual clock with --ranks-per-node 1 --net-bw 12.5M --net-lat LAT (default 50e-6);
#       lenet5 and mlp. Needs root.
#
# Env: ROUNDS (3), TRAIN_LIMIT (6400), EPOCHS (5), LAT (50e-6), BURST (the tbf bucket of the
# vcluster link, 16kb: a packet that finds the bucket full leaves at once, which the model's
# latency + bytes / bandwidth does not have; 64kb let about a quarter of each lenet5 gradient
# through unshaped, and real ran 1.14x faster than the model, 2026-12-02), HET_DATA_DIR, BLAS_CORETYPE.
set -euo pipefail
build=${1:-build}
mode=${2:-agree}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
H=$(cd "$build" && pwd)/hetrain
export OPENBLAS_NUM_THREADS=1
rounds=${ROUNDS:-3}
w=$(mktemp -d /tmp/het_bench_vclock_XXXXXX)
VC="$here/../tools/vcluster"
export VCLUSTER_DIR=/run/hetrain-vcluster-vclock
trap '[ "$mode" = vcluster ] && "$VC" down >/dev/null 2>&1; rm -rf "$w"' EXIT
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
# the median epoch_s of a metrics file
epoch_s() { sed -n 's/.*"epoch_s":\([-0-9.e+]*\).*/\1/p' "$1" | median; }
args() { # model
    echo train --model "$1" --data fashion-mnist --data-dir "$data_dir" --epochs "${EPOCHS:-5}" \
        --train-limit "${TRAIN_LIMIT:-6400}" --test-limit 500 --batch 64 --threads 1 \
        --progress off --quiet --seed 1
}
if [ "$mode" = vcluster ]; then
    "$VC" up 2 --rate 100mbit --burst "${BURST:-16kb}" >/dev/null
    lat=${LAT:-50e-6}
    echo "2 ranks, one per host; real: tools/vcluster, 100 Mbit/s tbf link (bucket ${BURST:-16kb}); virtual:" \
         "--ranks-per-node 1 --net-bw 12.5M --net-lat $lat; median epoch of ${EPOCHS:-5}," \
         "median of $rounds rounds"
    echo
    echo "| model | real (vcluster) epoch s | virtual epoch s | virtual / real |"
    echo "|---|---|---|---|"
    for m in lenet5 mlp; do
        : >"$w/real"; : >"$w/virt"
        for _ in $(seq "$rounds"); do
            # shellcheck disable=SC2046
            "$VC" run -np 2 --map-by node "$H" $(args "$m") --metrics "$w/r.jsonl" >/dev/null
            epoch_s "$w/r.jsonl" >>"$w/real"
            # shellcheck disable=SC2046
            mpirun -np 2 "$H" $(args "$m") --ranks-per-node 1 --net-bw 12.5M --net-lat "$lat" \
                --clock virtual --metrics "$w/v.jsonl" >/dev/null
            epoch_s "$w/v.jsonl" >>"$w/virt"
        done
        r=$(median <"$w/real"); v=$(median <"$w/virt")
        echo "| $m | $r | $v | $(awk -v a="$v" -v b="$r" 'BEGIN { printf "%.2f", a / b }') |"
    done
    exit 0
fi
echo "virtual (measured CPU time) against wall under the same emulation, a core per rank;" \
     "median epoch of ${EPOCHS:-5}, median of $rounds rounds; $(nproc) cores"
echo
echo "| model | ranks | emulation | wall epoch s | virtual epoch s | virtual / wall |"
echo "|---|---|---|---|---|---|"
for m in lenet5 mlp; do
    for P in 1 2; do
        emu=()
        [ "$P" = 2 ] && emu=(--slowdown 1,2 --ranks-per-node 1 --net-bw 125M --net-lat 50e-6)
        : >"$w/wall"; : >"$w/virt"
        for _ in $(seq "$rounds"); do
            for clk in wall virtual; do
                # shellcheck disable=SC2046
                mpirun -np "$P" "$H" $(args "$m") "${emu[@]}" --clock "$clk" \
                    --metrics "$w/$clk.jsonl" >/dev/null
            done
            epoch_s "$w/wall.jsonl" >>"$w/wall"
            epoch_s "$w/virtual.jsonl" >>"$w/virt"
        done
        a=$(median <"$w/wall"); v=$(median <"$w/virt")
        echo "| $m | $P | ${emu[*]:-none} | $a | $v | $(awk -v x="$v" -v y="$a" 'BEGIN { printf "%.2f", x / y }') |"
    done
done

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
#   bash bench/bench_vclock.sh BUILD hog        # measured CPU time beside a CPU hog: 1 rank,
#       --clock virtual, lenet5 and mlp; ROUNDS pairs of runs, one quiet and one beside a busy
#       loop (2 runnable threads on 2 cores: the rank keeps a core), taken in turn; the median
#       epoch of each, then the median over the rounds, and hog / quiet.
#   The agreement mode runs both ways the wall clock can wait (HET_EMUL_WAIT=sleep, and the
#   default auto, which spins here: a core per rank) side by side.
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
# timed LIST CMD...: runs CMD with --metrics and appends its median epoch to $w/LIST
timed() {
    local list=$1
    shift
    "$@" --metrics "$w/m.jsonl" >/dev/null
    epoch_s "$w/m.jsonl" >>"$w/$list"
}
ratio() { awk -v x="$1" -v y="$2" -v d="${3:-2}" 'BEGIN { printf "%.*f", d, x / y }'; }
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
            timed real "$VC" run -np 2 --map-by node "$H" $(args "$m")
            # shellcheck disable=SC2046
            timed virt mpirun -np 2 "$H" $(args "$m") --ranks-per-node 1 --net-bw 12.5M \
                --net-lat "$lat" --clock virtual
        done
        r=$(median <"$w/real"); v=$(median <"$w/virt")
        echo "| $m | $r | $v | $(ratio "$v" "$r") |"
    done
    exit 0
fi
if [ "$mode" = hog ]; then
    echo "1 rank, --clock virtual (measured CPU time), quiet against beside a CPU hog; median" \
         "epoch of ${EPOCHS:-5}, median of $rounds pairs; $(nproc) cores"
    echo
    echo "| model | quiet epoch s (virtual) | beside a hog | hog / quiet |"
    echo "|---|---|---|---|"
    for m in lenet5 mlp; do
        : >"$w/quiet"; : >"$w/hog"
        for _ in $(seq "$rounds"); do
            # shellcheck disable=SC2046
            timed quiet mpirun -np 1 "$H" $(args "$m") --clock virtual
            (while :; do :; done) &
            hog=$!
            # shellcheck disable=SC2046
            timed hog mpirun -np 1 "$H" $(args "$m") --clock virtual
            kill "$hog"
            wait "$hog" 2>/dev/null || true
        done
        q=$(median <"$w/quiet"); h=$(median <"$w/hog")
        echo "| $m | $q | $h | $(ratio "$h" "$q" 3) |"
    done
    exit 0
fi
echo "virtual (measured CPU time) against wall under the same emulation, a core per rank;" \
     "median epoch of ${EPOCHS:-5}, median of $rounds rounds; $(nproc) cores"
echo
echo "| model | ranks | emulation | wall waits | wall epoch s | virtual epoch s | virtual / wall |"
echo "|---|---|---|---|---|---|---|"
for m in lenet5 mlp; do
    for P in 1 2; do
        emu=()
        [ "$P" = 2 ] && emu=(--slowdown 1,2 --ranks-per-node 1 --net-bw 125M --net-lat 50e-6)
        : >"$w/sleep"; : >"$w/auto"; : >"$w/virt"
        for _ in $(seq "$rounds"); do
            # shellcheck disable=SC2046
            HET_EMUL_WAIT=sleep timed sleep mpirun -np "$P" "$H" $(args "$m") "${emu[@]}" --clock wall
            # shellcheck disable=SC2046
            HET_EMUL_WAIT=auto timed auto mpirun -np "$P" "$H" $(args "$m") "${emu[@]}" --clock wall
            # shellcheck disable=SC2046
            timed virt mpirun -np "$P" "$H" $(args "$m") "${emu[@]}" --clock virtual
        done
        s=$(median <"$w/sleep"); a=$(median <"$w/auto"); v=$(median <"$w/virt")
        spin=spin
        [ "$P" = 1 ] && spin="-" # nothing waits without emulation
        [ "$P" = 2 ] && [ "$(nproc)" -lt 2 ] && spin=sleep
        echo "| $m | $P | ${emu[*]:-none} | sleep | $s | $v | $(ratio "$v" "$s") |"
        [ "$P" = 2 ] && echo "| $m | $P | the same | $spin (default) | $a | $v | $(ratio "$v" "$a") |"
    done
done

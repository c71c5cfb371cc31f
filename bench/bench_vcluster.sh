#!/usr/bin/env bash
# The emulated network against a real one: 4 ranks as 2 hosts x 2 on the virtual cluster
# (tools/vcluster: network namespaces, Open MPI over TCP, a 1 Gbit/s tbf link) and the same run
# on one host with the emulation (--ranks-per-node 2 --net-bw 125M --net-lat 50e-6), for lenet5
# and mlp, both placements (block = mpirun --map-by slot: ranks 0,1 on host 1; cyclic =
# --map-by node: ranks 0,2 on host 1) and both gradient all-reduces (flat, hier). Prints the
# training seconds of one epoch (samples / samples_per_s from --metrics: evaluation excluded),
# the median of ROUNDS runs taken in turn, and emulated / real.
# Needs root (tools/vcluster). usage: bash bench/bench_vcluster.sh [BUILD]
#   env: ROUNDS (3), TRAIN_LIMIT (12800), MODELS (lenet5 mlp), ALGOS (flat hier), EXTRA (more
#   hetrain arguments for both runs, e.g. "--stall-warn 0": the blocking MPI_Allreduce, whose
#   algorithm is Open MPI's own choice, instead of libnbc's ring)
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/common.sh
. "$here/common.sh"
H=$(cd "$build" && pwd)/hetrain
VC="$here/../tools/vcluster"
rounds=${ROUNDS:-3}
read -r -a models <<<"${MODELS:-lenet5 mlp}"
read -r -a algos <<<"${ALGOS:-flat hier}"
read -r -a extra <<<"${EXTRA:-}"
w=$(mktemp -d)
export VCLUSTER_DIR=/run/hetrain-vcluster-bench
trap '"$VC" down >/dev/null 2>&1; rm -rf "$w"' EXIT
"$VC" up 2 --rate 1gbit >/dev/null

# train seconds of the run whose metrics file is $1
train_s() { sed -n 's/.*"samples":\([0-9]*\),"samples_per_s":\([0-9.e+]*\).*/\1 \2/p' "$1" |
            awk '{ printf "%.4f\n", $1 / $2 }'; }
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

run_one() { # kind model placement algo -> seconds
    local kind=$1 m=$2 pl=$3 algo=$4 f="$w/m.jsonl"
    local args=(train --model "$m" --data fashion-mnist --data-dir "$data_dir" --epochs 1
                --train-limit "${TRAIN_LIMIT:-12800}" --test-limit 500 --batch 64 --threads 1
                --progress off --quiet --allreduce-algo "$algo" --metrics "$f" --seed 1
                ${extra[@]+"${extra[@]}"})
    rm -f "$f"
    if [ "$kind" = real ]; then
        local map=slot; [ "$pl" = cyclic ] && map=node
        timeout 600 "$VC" run -np 4 --map-by "$map" "$H" "${args[@]}" >/dev/null 2>"$w/err" ||
            { cat "$w/err" >&2; return 1; }
    else
        timeout 600 mpirun --oversubscribe -np 4 "$H" "${args[@]}" --ranks-per-node 2 \
            --placement "$pl" --net-bw 125M --net-lat 50e-6 >/dev/null 2>"$w/err" ||
            { cat "$w/err" >&2; return 1; }
    fi
    train_s "$f"
}

printf '%-7s %-7s %-5s %10s %10s %9s\n' model place algo real_s emul_s emul/real
for m in "${models[@]}"; do
    for pl in block cyclic; do
        for algo in "${algos[@]}"; do
            : >"$w/real"; : >"$w/emul"
            for _ in $(seq "$rounds"); do
                run_one real "$m" "$pl" "$algo" >>"$w/real"
                run_one emul "$m" "$pl" "$algo" >>"$w/emul"
            done
            r=$(median <"$w/real"); e=$(median <"$w/emul")
            printf '%-7s %-7s %-5s %10s %10s %9s\n' "$m" "$pl" "$algo" "$r" "$e" \
                "$(awk -v a="$e" -v b="$r" 'BEGIN { printf "%.2f", a / b }')"
        done
    done
done
echo "(training seconds of 1 epoch, median of $rounds; real: tools/vcluster, 2 hosts, 1 Gbit/s tbf;" \
     "emul: one host, --ranks-per-node 2 --placement P --net-bw 125M --net-lat 50e-6)${EXTRA:+; both with $EXTRA}"

#!/usr/bin/env bash
# Soak: 4 ranks (2 emulated nodes of 2) train a small model for many epochs with every
# strategy, and the resident memory of every rank is sampled every
# 0.1 s and booked to the epoch then running. Memory must be flat after the first epoch: a leak
# per step or per epoch shows as growth. Prints, per strategy, the largest rank's peak RSS in
# epoch 1, epoch 2 and the last epoch, the growth from epoch 2 to the last, and exits 1 if
# any strategy grew by more than LIMIT_KB (default 1024 KiB: RSS moves by a few pages as the
# allocator and MPI settle).
# usage: bash bench/soak.sh [BUILD]   env: EPOCHS (30), MODEL (lenet5), STRATEGIES
#                                          (allreduce hgc daso), LIMIT_KB (1024)
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/common.sh
. "$here/common.sh"
H=$build/hetrain
epochs=${EPOCHS:-30}
model=${MODEL:-lenet5}
limit=${LIMIT_KB:-1024}
read -r -a strategies <<<"${STRATEGIES:-allreduce hgc daso}"
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT

# the RSS (KiB) of the ranks of the mpirun whose pid is $1 (its children), largest first;
# empty once they have exited
rss_ranks() { { ps --ppid "$1" -o rss= || true; } | sort -rn | tr -s ' \n' ' '; }

printf '%-10s %6s %12s %12s %12s %10s\n' strategy epochs peak_e1_kib peak_e2_kib peak_last_kib \
    growth_kib
bad=0
for s in "${strategies[@]}"; do
    peak=()
    own=() # a strategy's own options go to its runs only (another strategy refuses them)
    [ "$s" = daso ] && own=(--daso-warmup-epochs 1 --daso-cooldown-epochs 1)
    mpirun --oversubscribe -np 4 "$H" train --strategy "$s" --model "$model" --data synthetic \
        --epochs "$epochs" --batch 32 --threads 1 --progress off --ranks-per-node 2 \
        "${own[@]}" --seed 1 >"$w/out" 2>&1 &
    mp=$!
    # every 0.1 s: the largest rank's RSS, booked to the epoch running (rank 0 prints a line
    # as each epoch ends); per epoch the peak is kept
    while kill -0 "$mp" 2>/dev/null; do
        e=$(( $(grep -c '^epoch ' "$w/out" || true) + 1 ))
        r=$(rss_ranks "$mp"); top=${r%% *}
        if [ -n "$top" ] && [ "$e" -le "$epochs" ]; then
            [ "${peak[e]:-0}" -ge "$top" ] || peak[e]=$top
            echo "$s epoch $e: rss $r" >>"$w/log"
        fi
        sleep 0.1
    done
    wait "$mp" || { cat "$w/out" >&2; echo "soak: $s failed" >&2; exit 1; }
    [ -n "${peak[2]:-}" ] && [ -n "${peak[epochs]:-}" ] || { echo "soak: $s: no samples" >&2; exit 1; }
    g=$((peak[epochs] - peak[2]))
    printf '%-10s %6d %12d %12d %12d %10d\n' "$s" "$epochs" "${peak[1]:-0}" "${peak[2]}" \
        "${peak[epochs]}" "$g"
    [ "$g" -le "$limit" ] || bad=1
done
echo "(peak RSS of the largest of the 4 ranks during epoch 1, 2 and $epochs, sampled every 0.1 s;" \
     "growth: last epoch - epoch 2; KEEP=1 prints every sample)"
[ -z "${KEEP:-}" ] || cat "$w/log"
[ "$bad" -eq 0 ] || { echo "soak: memory grew by more than $limit KiB after epoch 1" >&2; exit 1; }

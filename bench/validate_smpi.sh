#!/usr/bin/env bash
# The validation benchmark of the virtual clock against SimGrid's SMPI (a benchmark: prints
# figures, never fails on them). Every cell runs one epoch of a strategy twice on one platform
# file and one cost table (the shipped one): under hetrain's virtual clock (mpirun, --clock
# virtual --platform FILE --hostfile HOSTS) and under SMPI (smpirun -platform FILE -hostfile
# HOSTS hetrain-smpi, the compute pieces charged from the same table), and prints the epoch time
# of each, their ratio, hetrain's link over capacity (the share of its epoch in which the model
# let a node link carry more than its bandwidth: comm/links.c), and per setting whether the
# strategies come out in the same order (a pair whose SMPI times are within TIE, 1 %, of each
# other is a tie; "differs" names the pairs the two order the other way).
#
# The matrix: STRATEGIES (allreduce,hgc,daso,asp,inhad,gpipe,1f1b; qfb cannot run under SMPI:
# its two threads per rank), MODELS (lenet5,resnet20), SIZES (nodes x ranks per node: 2x2, 4x4,
# 8x8), SLOW (none and one slow node, its ranks 3x: "1 3"), BWS (between nodes: 100Mbit/s,
# 1Gbit/s, 10Gbit/s = 12.5M,125M,1250M bytes/s; 50 us). Each run: 8 steps of 32 samples per
# rank (16 for resnet20) of Fashion-MNIST (lenet5; synthetic data of the model's shape for
# resnet20, with --synthetic-samples enough for the 8 steps), SGD momentum 0.9; daso with no
# warm-up or cool-down epoch (its global averaging runs); gpipe and 1f1b as pipelines of 2
# stages (P/2 of them), 4 micro-batches; asp and inhad with their server on the last rank.
# hetrain's clock runs the flat all-reduce, as SMPI does (the SMPI build refuses the two-level
# one). COLL=blocking (the default): the gradients' all-reduce is one blocking MPI_Allreduce
# after backward in both (--bucket-mb 0, and --stall-warn 0 on hetrain's side, whose stall
# inspector otherwise posts it non-blocking), so that both run the algorithm Open MPI's rules
# pick; COLL=nonblocking keeps the buckets (hetrain models Open MPI's libnbc ring, SMPI 3.32
# runs its own non-blocking all-reduce, another algorithm). daso's global averaging is
# non-blocking either way; SMPI 3.32 runs MPI_Iallreduce as a linear exchange (every rank's
# buffer to every other), not Open MPI's libnbc ring, and from 32 ranks MVAPICH2's level-by-level
# k-nomial broadcast where Open MPI sends to all children at once, so COLL_FIX=1 (the default)
# has hetrain's model charge those (--coll-model smpi) and the cells compare one algorithm on
# both (COLL_FIX=0: hetrain models Open MPI's, what a user under Open MPI gets). SMPI's ranks
# run one thread, so inhad's aggregator serves pulls between its batches there and every
# worker waits for its IN's answer: INHAD_FIX=1 (the default) runs hetrain's inhad so too
# (--inhad-aggregator loop), INHAD_FIX=0 the paper's aggregator thread (hetrain's default). SMPI's collectives follow Open MPI's selector (smpi/coll-selector:ompi), its network
# model is its default calibrated one (FACTORS=1: latency and bandwidth factors set to 1 and
# no TCP cross-traffic), an MPI_Test or MPI_Iprobe costs POLL (GROW below); on 4-15 ranks its broadcast is
# flattree, Open MPI's basic_linear, where the selector would run another algorithm, and
# hetrain's model charges the same for every size (--bcast-model), as SMPI then runs it
# (BCAST_FIX; BCAST=linear|binomial: one for every size, any number of ranks).
#
# Usage: bench/validate_smpi.sh [BUILD]   (make build and make smpi first; BUILD: build)
# Env: STRATEGIES, MODELS, SIZES ("2x2 4x4 8x8"), SLOW ("1 3"), BWS ("12.5M 125M 1250M"), COLL,
#      FACTORS (default | 1), BCAST_FIX (1 | 0), BCAST (auto | linear | binomial), COLL_FIX (1 | 0), INHAD_FIX (1 | 0), GROW (0 | 1), POLL (seconds), SMPI_CFG (more --cfg=KEY:VALUE words for smpirun), NETF (smpi | none: hetrain's message-size factors),
#      P2P (local | arbiter: hetrain's --p2p-model; the arbiter needs INHAD_FIX=1, the default), EAGER (0 | 1: every message eager on both sides), OUT (a folder for the runs' files and the table; default: a
#      temporary one, removed), SIDE (both | smpi: SMPI's side alone, its table then read by
#      bench/stub/smpirun for hetrain's side; SMPI's 64-rank ResNet-20 inhad holds about 16 GB,
#      so on a small machine run it alone). Prints a Markdown table; OUT/validate.md holds it
#      too.
set -u
build=${1:-build}
het=$(readlink -f "$build/hetrain") smpi_bin=$(readlink -f "$build-smpi/hetrain-smpi")
[ -x "$het" ] || { echo "validate_smpi: no $build/hetrain (make build)" >&2; exit 1; }
[ -x "$smpi_bin" ] || { echo "validate_smpi: no $build-smpi/hetrain-smpi (make smpi)" >&2; exit 1; }
side=${SIDE:-both}
case $side in both | smpi) ;; *) echo "validate_smpi: SIDE=$side: both or smpi" >&2; exit 1 ;; esac
command -v smpirun >/dev/null || { echo "validate_smpi: no smpirun (scripts/setup.sh smpi)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
IFS=, read -r -a strategies <<<"${STRATEGIES:-allreduce,hgc,daso,asp,inhad,gpipe,1f1b}"
IFS=, read -r -a models <<<"${MODELS:-lenet5,resnet20}"
read -r -a sizes <<<"${SIZES:-2x2 4x4 8x8}"
read -r -a slows <<<"${SLOW:-1 3}"
read -r -a bws <<<"${BWS:-12.5M 125M 1250M}"
if [ -n "${OUT:-}" ]; then out=$OUT; mkdir -p "$out"; else
    out=$(mktemp -d /tmp/het_validate_XXXXXX); trap 'rm -rf "$out"' EXIT; fi
# SMPI multiplies a test's or probe's cost by the number of failed ones before it (on by default,
# to speed up busy-wait loops): daso's progress tests between layers then cost it 7 ms an epoch
# at 16 ranks, and a wait of W seconds is noticed up to sqrt(2 W POLL) late. GROW=0 (the
# default) keeps every test and probe at POLL seconds (1e-6: a wait noticed at most 1 us late;
# asp's 4-rank epoch at 100 Mbit/s 0.22518 s against 0.22507 at 1e-7, in a tenth of the wall
# time); GROW=1: SMPI's growing costs from POLL (1e-7 by default then).
poll=${POLL:-$([ "${GROW:-0}" = 0 ] && echo 1e-6 || echo 1e-7)}
sim=(--cfg=smpi/simulate-computation:no --cfg=smpi/coll-selector:ompi --cfg=smpi/test:$poll
     --cfg=smpi/iprobe:$poll --log=root.thresh:error)
[ "${GROW:-0}" = 0 ] && sim+=(--cfg=smpi/grow-injected-times:no)
[ "${FACTORS:-default}" = 1 ] && sim+=(--cfg=smpi/bw-factor:0:1 --cfg=smpi/lat-factor:0:1
                                      --cfg=network/crosstraffic:0)
read -r -a extra_cfg <<<"${SMPI_CFG:-}"   # more --cfg=... words for smpirun (a study)
sim+=("${extra_cfg[@]}")
# hetrain's model: SMPI's default message-size factors, written into each cell's platform file
# (which SMPI reads too), or none (NETF=none: the model before them; the file then tells SMPI
# factors of 1 and no cross-traffic, as hetrain platform writes since 2026-12-06, so FACTORS=1
# only says it twice); FACTORS=1 sets none
netf=${NETF:-smpi}
[ "${FACTORS:-default}" = 1 ] && netf=none
epoch_s() { grep '"type":"epoch"' "$1" 2>/dev/null | tail -1 | sed -n 's/.*"epoch_s":\([0-9.e+-]*\).*/\1/p'; }
# the network model's sanity counter: the share of the epoch a node link carried more than its
# bandwidth in hetrain's run (comm/links.c), as a percentage
link_over() { grep '"type":"epoch"' "$1" 2>/dev/null | tail -1 |
    sed -n 's/.*"link_over_max":\([0-9.e+-]*\).*/\1/p' | awk '{ printf "%.1f %%", 100 * $1 }'; }
table=$out/validate.md
{
    echo "SMPI $(smpirun -version 2>/dev/null | head -1 | sed 's/^.*version //'), network model:" \
         "${FACTORS:-default} factors; hetrain's factors: $netf; all-reduce ${COLL:-blocking};" \
         "$(nproc) cores; $(date -u +%F)"
    echo
    echo "| model | ranks | slow | link | strategy | hetrain s | SMPI s | hetrain / SMPI | wall s (hetrain, SMPI) | hetrain link over capacity |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
} >"$table"
cat "$table"
orders_same=0 orders=0
for model in "${models[@]}"; do
    shape=1x28x28 per=32 data=(--data fashion-mnist)
    [ "$model" = resnet20 ] && shape=3x32x32 per=16 data=(--data synthetic --synthetic-shape 3x32x32)
    for size in "${sizes[@]}"; do
        N=${size%x*} R=${size#*x} P=$((N * R))
        # Open MPI's rules give the linear broadcast (basic_linear: the root sends to every rank)
        # on 4-15 ranks for most sizes; SMPI's ompi selector runs its pipelined chain (NTSL) in
        # its place, another algorithm. BCAST_FIX=1 (the default) has SMPI run flattree, its
        # basic_linear, on those sizes (also for broadcasts below 8 KiB, which Open MPI sends
        # down a tree: a latency or two).
        # smpi/bcast applies to every size, where Open MPI's rules change algorithm with it (at
        # 4-7 ranks their chain from 1 MiB, ResNet-20's weights, which SMPI runs segmented), so
        # BCAST_FIX has both sides run the linear one for every size on 4-15 ranks. On 16-31
        # ranks both follow the rules (the binomial tree from 4 KiB to 1 MiB, lenet5's 247 kB;
        # scatter + all-gather above, SMPI's scatter_rdb_allgather, hetrain's
        # het_netem_bcast_scatter_allgather_s). BCAST=linear / binomial: that algorithm on both
        # sides for any number of ranks.
        bcast=${BCAST:-auto}
        if [ "$bcast" = auto ] && [ "${BCAST_FIX:-1}" = 1 ] && [ "$P" -ge 4 ] && [ "$P" -lt 16 ]
        then bcast=linear; fi
        bcast_cfg=() bcast_het=()
        case $bcast in
            linear) bcast_cfg=(--cfg=smpi/bcast:flattree) bcast_het=(--bcast-model linear) ;;
            binomial) bcast_cfg=(--cfg=smpi/bcast:binomial_tree) bcast_het=(--bcast-model binomial) ;;
        esac
        more=()  # synthetic data: enough samples for 8 steps
        [ "$model" = resnet20 ] && more=(--synthetic-samples $((8 * per * P > 2048 ? 8 * per * P : 2048)))
        for slow in "${slows[@]}"; do
            factors=$(awk -v n="$N" -v r="$R" -v s="$slow" 'BEGIN { for (i = 0; i < n * r; i++)
                printf "%s%s", i ? "," : "", (i >= (n - 1) * r) ? s : 1 }')
            for bw in "${bws[@]}"; do
                cell=$out/$model-$P-$slow-$bw
                mkdir -p "$cell"
                "$het" platform --ranks "$P" --ranks-per-node "$R" --slowdown "$factors" --net-bw "$bw" \
                    --net-lat 50e-6 --net-factors "$netf" --host-speed shipped --model "$model" --data synthetic \
                    --synthetic-shape "$shape" --out "$cell/plat.xml" --hostfile "$cell/hosts" \
                    >"$cell/plat.out" 2>&1 || { echo "platform failed: $(cat "$cell/plat.out")"; continue; }
                # EAGER=1: no message waits for its receive, on both sides (SMPI's
                # async-small-thresh and send-is-detached-thresh in the platform's config, which
                # hetrain reads too): what --p2p-model arbiter carries
                [ "${EAGER:-0}" = 1 ] && sed -i 's|<config>|<config>\n    <prop id="smpi/async-small-thresh" value="1000000000"/>\n    <prop id="smpi/send-is-detached-thresh" value="1000000000"/>|' "$cell/plat.xml"
                common=(train --model "$model" "${data[@]}" "${more[@]}" --train-limit $((8 * per * P)) --test-limit 64 --batch $((per * P))
                        --epochs 1 --lr 0.02 --momentum 0.9 --seed 1 --progress off
                        --compute-cost shipped)
                vonly=("${bcast_het[@]}")
                [ -n "${P2P:-}" ] && vonly+=(--p2p-model "$P2P")
                [ "${COLL_FIX:-1}" = 1 ] && vonly+=(--coll-model smpi)
                [ "${COLL:-blocking}" = blocking ] && common+=(--bucket-mb 0) && vonly+=(--stall-warn 0)
                declare -A th ts
                for s in "${strategies[@]}"; do
                    extra=(--strategy "$s") vs=()
                    case $s in
                        inhad) [ "${INHAD_FIX:-1}" = 1 ] && vs=(--inhad-aggregator loop) ;;
                        daso) extra+=(--daso-warmup-epochs 0 --daso-cooldown-epochs 0) ;;
                        gpipe) extra+=(--pipelines $((P / 2)) --micro-batches 4) ;;
                        1f1b) extra=(--strategy gpipe --pipe-schedule 1f1b --pipelines $((P / 2))
                                     --micro-batches 4) ;;
                    esac
                    rm -f "$cell/$s.v.jsonl" "$cell/$s.s.jsonl" # an earlier run's, in OUT
                    t0=$(date +%s.%N)
                    [ "$side" = smpi ] ||
                    timeout 1800 mpirun -np "$P" "$het" "${common[@]}" "${extra[@]}" --clock virtual \
                        --allreduce-algo flat "${vonly[@]}" "${vs[@]}" --platform "$cell/plat.xml" \
                        --hostfile "$cell/hosts" \
                        --metrics "$cell/$s.v.jsonl" >"$cell/$s.v.out" 2>&1
                    t1=$(date +%s.%N)
                    timeout 1800 smpirun -np "$P" -platform "$cell/plat.xml" -hostfile "$cell/hosts" \
                        "${sim[@]}" "${bcast_cfg[@]}" "$smpi_bin" "${common[@]}" "${extra[@]}" \
                        --metrics "$cell/$s.s.jsonl" >"$cell/$s.s.out" 2>&1
                    t2=$(date +%s.%N)
                    v=$(epoch_s "$cell/$s.v.jsonl") m=$(epoch_s "$cell/$s.s.jsonl")
                    v=${v:+$(awk -v x="$v" 'BEGIN { printf "%.5g", x }')}
                    m=${m:+$(awk -v x="$m" 'BEGIN { printf "%.5g", x }')}
                    th[$s]=${v:-nan} ts[$s]=${m:-nan}
                    ratio=$(awk -v a="${v:-0}" -v b="${m:-0}" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else print "-" }')
                    why=""
                    [ -z "$v" ] && [ "$side" != smpi ] &&
                        why="hetrain: $(grep -m1 '^hetrain' "$cell/$s.v.out" | cut -c1-80)"
                    [ -z "$m" ] && why="$why SMPI: $(grep -m1 'hetrain:\|rror' "$cell/$s.s.out" | cut -c1-80)"
                    printf '| %s | %d (%s) | %s | %s | %s | %s | %s | %s | %.0f, %.0f | %s |\n' "$model" "$P" "$size" \
                        "$([ "$slow" = 1 ] && echo none || echo "1 node ${slow}x")" "$bw" "$s" \
                        "${v:--}" "${m:--}${why:+ ($why)}" "$ratio" \
                        "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
                        "$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')" \
                        "$(link_over "$cell/$s.v.jsonl")" | tee -a "$table"
                done
                # the same order of strategies (by epoch time) under both? Two strategies whose SMPI
                # times are within TIE (1 %) of each other are a tie: either order is the same.
                ov=$(for s in "${strategies[@]}"; do echo "${th[$s]} $s"; done | sort -g | awk '{ printf "%s ", $2 }')
                os=$(for s in "${strategies[@]}"; do echo "${ts[$s]} $s"; done | sort -g | awk '{ printf "%s ", $2 }')
                inv=$(for s in "${strategies[@]}"; do echo "$s ${th[$s]} ${ts[$s]}"; done |
                    awk -v tie="${TIE:-0.01}" '{ n[NR] = $1; v[NR] = $2; m[NR] = $3 }
                        END { for (i = 1; i <= NR; i++) for (j = 1; j <= NR; j++)
                              if (m[i] * (1 + tie) < m[j] && v[i] > v[j]) printf "%s/%s ", n[i], n[j] }')
                verdict=same
                if [ -n "$inv" ]; then verdict="differs (${inv% })"
                elif [ "$ov" != "$os" ]; then verdict="same (ties within ${TIE:-0.01})"; fi
                if [ "$side" = smpi ]; then ov="- " verdict=-  # no hetrain side to order
                else
                    orders=$((orders + 1))
                    [ -z "$inv" ] && orders_same=$((orders_same + 1))
                fi
                echo "|  |  |  |  | order | ${ov% } | ${os% } | $verdict |  |  |" | tee -a "$table"
                unset th ts
            done
        done
    done
done
awk -F'|' '$9 ~ /^ *[0-9.]+ *$/ { r = $9 + 0; e = r - 1; if (e < 0) e = -e; s += e; n++; if (e > w) w = e }
    END { if (n) printf "\n%d cells: mean |hetrain / SMPI - 1| = %.1f %%, worst %.1f %%\n", n, 100 * s / n, 100 * w }' "$table" | tee -a "$table"
echo "settings with the same order of strategies (ties: SMPI times within ${TIE:-0.01}): $orders_same of $orders" | tee -a "$table"

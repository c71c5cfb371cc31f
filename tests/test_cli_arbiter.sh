#!/usr/bin/env bash
# --p2p-model arbiter end to end (the point-to-point messages between nodes as flows that world
# rank 0 completes in virtual-time order: comm/p2p_arb.c), under real mpirun:
# - refused with one line where it cannot run: the wall clock, qfb (its stage threads), inhad's
#   aggregator thread (all 4 ranks exit);
# - a platform whose messages wait for their receive (SMPI's default, rendezvous): asp and inhad
#   (--inhad-aggregator loop) reproducible bit for bit, their epochs within 10 % of the local
#   rules'; asp's link counter sees the arbiter's flows (busy as under the local rules, 0 over);
# - --stall-warn 0 (the blocking collectives' models; the inspector runs silent, polling them, so
#   that rank 0 serves inside them): allreduce on 4 nodes charges what the local rules charge
#   with --stall-warn 0 (to the last digit printed), and asp runs;
# - asp, inhad (--inhad-aggregator loop) and gpipe on 2 x 2 ranks at 100 Mbit/s with SMPI's
#   factors and cross-traffic: two runs give the same weights and metrics bit for bit; daso's
#   collectives beside it run too;
# - asp with --eval-every (evaluations charged to no clock, after which the clock goes back:
#   the arbiter is told none of it) over 2 epochs; resume from its checkpoint equals the
#   uninterrupted run, bit for bit;
# - gpipe's 4 stages on 2 nodes: its activations and gradients cross the link at once, each
#   taking 0.05 of the other's way (cross-traffic), which the local rules do not see: the
#   arbiter's epoch is longer than theirs, by less than 5 %.
# Under MPICH (busy-polling ranks: no more than the cores) the multi-rank parts are skipped.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found" >&2; exit 1; }
T=$(mktemp -d /tmp/het_arb_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
mpi() { local P=$1; shift; het_mpirun "$P" "$HETRAIN" "$@"; }
stable() { sed -e 's/"samples_per_s":[^,]*,//' -e 's/"elapsed_s":[^,]*,//' \
               -e 's/"peak_rss[a-z_]*":[0-9]*,//g' -e 's/"pss_sum":[-0-9]*,//' "$1"; }
ep_val() { grep '"type":"epoch"' "$1" | tail -1 | sed -n "s/.*\"$2\":\\([-0-9.e+]*\\).*/\\1/p"; }
C=(--model lenet5 --data synthetic --train-limit 512 --test-limit 64 --seed 3 --progress off
   --batch 32 --lr 0.02 --epochs 1 --compute-cost shipped)
V=(--clock virtual --ranks-per-node 2 --net-bw 12.5M --net-lat 50e-6 --net-factors smpi
   --p2p-model arbiter)

# ---- refusals, one line each ----
refused() { # what expected-text args...
    local what=$1 want=$2; shift 2
    out=$("$@" 2>&1); rc=$?
    [ $rc -ne 0 ] && grep -q -- "$want" <<<"$out" ||
        fail "$what: exit $rc, expected a refusal saying '$want': $(tail -2 <<<"$out")"
}
refused "wall clock" "add --clock virtual" "$HETRAIN" train "${C[@]}" --p2p-model arbiter
refused "qfb" "qfb's stage threads" "$HETRAIN" train "${C[@]}" "${V[@]}" --strategy qfb
refused "a bad word" "p2p-model" "$HETRAIN" train "${C[@]}" --clock virtual --p2p-model flows

if het_mpi_np_ok 4; then
refused "inhad's thread" "inhad-aggregator loop" mpi 4 train "${C[@]}" "${V[@]}" --strategy inhad
"$HETRAIN" platform --ranks 4 --ranks-per-node 2 --net-bw 12.5M --net-lat 50e-6 \
    --host-speed shipped --model lenet5 --data synthetic --out plat.xml --hostfile hosts \
    >plat.out 2>&1 || fail "platform: $(tail -2 plat.out)"
echo "test_cli_arbiter: refusals"

# ---- rendezvous (a platform file: SMPI's default, every message waits for its receive) ----
R=(--clock virtual --platform plat.xml --hostfile hosts --stall-warn 0)
for s in asp "inhad --inhad-aggregator loop"; do
    n=${s%% *}
    for run in arbiter.1 arbiter.2 local; do
        mpi 4 train "${C[@]}" "${R[@]}" --strategy $s --p2p-model "${run%.*}" \
            --metrics "r.$n.$run.jsonl" --export-safetensors "r.$n.$run.st" >"r.$n.$run.out" 2>&1 ||
            fail "$n, rendezvous, $run: exited $?: $(tail -3 "r.$n.$run.out")"
    done
    cmp -s "r.$n.arbiter.1.st" "r.$n.arbiter.2.st" || fail "$n, rendezvous: the weights differ"
    a=$(ep_val "r.$n.arbiter.1.jsonl" epoch_s) b=$(ep_val "r.$n.arbiter.2.jsonl" epoch_s)
    l=$(ep_val "r.$n.local.jsonl" epoch_s)
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "$n, rendezvous: epochs '$a' and '$b' s"
    awk -v a="$a" -v l="$l" 'BEGIN { exit !(l > 0 && a / l > 0.9 && a / l < 1.1) }' ||
        fail "$n, rendezvous: the arbiter's epoch $a s against the local rules' $l s"
    echo "test_cli_arbiter: $n with rendezvous: $a s (arbiter), $l s (local rules)"
done
# the link counter sees the arbiter's flows (rank 0 notes each one's share between events): the
# server's link as busy as under the local rules, never over capacity
ba=$(ep_val r.asp.arbiter.1.jsonl link_busy_max) bl=$(ep_val r.asp.local.jsonl link_busy_max)
oa=$(ep_val r.asp.arbiter.1.jsonl link_over_max)
awk -v a="$ba" -v l="$bl" -v o="$oa" 'BEGIN { exit !(l > 0.3 && a > 0.9 * l && o == 0) }' ||
    fail "asp's link counter: busy $ba (arbiter) against $bl (local rules), over capacity $oa"

# ---- --stall-warn 0: the blocking calls' models ----
W=(--clock virtual --ranks-per-node 1 --net-bw 12.5M --net-lat 50e-6 --net-factors smpi
   --strategy allreduce --bucket-mb 0 --stall-warn 0)
for m in local arbiter; do
    mpi 4 train "${C[@]}" "${W[@]}" --p2p-model $m --metrics "w.$m.jsonl" >"w.$m.out" 2>&1 ||
        fail "allreduce --stall-warn 0 --p2p-model $m exited $?: $(tail -3 "w.$m.out")"
done
a=$(ep_val w.arbiter.jsonl epoch_s) l=$(ep_val w.local.jsonl epoch_s)
[ -n "$a" ] && [ "$a" = "$l" ] ||
    fail "allreduce --stall-warn 0: the arbiter's epoch '$a' s, the local rules' '$l' s"
mpi 4 train "${C[@]}" "${V[@]}" --strategy asp --stall-warn 0 >w.asp.out 2>&1 ||
    fail "asp --stall-warn 0 exited $?: $(tail -3 w.asp.out)"
echo "test_cli_arbiter: --stall-warn 0"

# ---- reproducible, bit for bit ----
for s in asp "inhad --inhad-aggregator loop" gpipe daso; do
    n=${s%% *}
    for i in 1 2; do
        mpi 4 train "${C[@]}" "${V[@]}" --strategy $s --metrics "$n.$i.jsonl" \
            --export-safetensors "$n.$i.st" >"$n.$i.out" 2>&1 ||
            fail "$n run $i exited $?: $(tail -3 "$n.$i.out")"
    done
    cmp -s "$n.1.st" "$n.2.st" || fail "$n: the weights differ between two runs"
    [ "$(stable "$n.1.jsonl")" = "$(stable "$n.2.jsonl")" ] || fail "$n: the metrics differ"
done
echo "test_cli_arbiter: asp, inhad, gpipe, daso reproducible"

# ---- work charged to no clock (--eval-every: the clock goes back after it), resume ----
E=(--strategy asp --eval-every 4)
mpi 4 train "${C[@]}" "${V[@]}" "${E[@]}" --epochs 2 --export-safetensors full.st >full.out 2>&1 ||
    fail "asp with --eval-every exited $?: $(tail -3 full.out)"
mpi 4 train "${C[@]}" "${V[@]}" "${E[@]}" --epochs 1 --checkpoint r.bin >r1.out 2>&1 ||
    fail "resume, first part exited $?: $(tail -3 r1.out)"
mpi 4 train "${C[@]}" "${V[@]}" "${E[@]}" --epochs 2 --checkpoint r.bin --resume \
    --export-safetensors res.st >r2.out 2>&1 || fail "resume exited $?: $(tail -3 r2.out)"
cmp -s full.st res.st || fail "asp: resume differs from 2 epochs straight"
echo "test_cli_arbiter: evaluations inside epochs; resume equals an uninterrupted run"

# ---- the arbiter decides: a pipeline's activations and gradients cross one link ----
# gpipe, 4 stages on 2 nodes: the activations forward and the gradients back cross the nodes'
# link at once; with cross-traffic each takes 0.05 of the other's way, which the local rules
# do not see: the arbiter's epoch is longer, by less than the 5 % the messages could lose
cp gpipe.1.jsonl gp.arbiter.jsonl
mpi 4 train "${C[@]}" "${V[@]}" --p2p-model local --strategy gpipe --metrics gp.local.jsonl \
    >gp.local.out 2>&1 || fail "gpipe, local rules, exited $?: $(tail -3 gp.local.out)"
el=$(ep_val gp.local.jsonl epoch_s) ea=$(ep_val gp.arbiter.jsonl epoch_s)
awk -v l="${el:-0}" -v a="${ea:-0}" 'BEGIN { exit !(l > 0 && a > l && a < 1.05 * l) }' ||
    fail "gpipe: epoch $ea s with the arbiter, $el s with the local rules (expected the arbiter's longer, by less than 5 %)"
echo "test_cli_arbiter: gpipe's epoch $el s (local rules), $ea s (arbiter)"
else
    echo "test_cli_arbiter: the multi-rank parts skipped: more ranks than cores ($het_mpi_flavor busy-polls)"
fi
[ $failures -eq 0 ] || exit 1
echo "test_cli_arbiter: passed"

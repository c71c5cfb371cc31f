#!/usr/bin/env bash
# --allreduce-algo on the command line: on 4 ranks in 2 emulated nodes, hier and flat train to
# the same test loss (the sums differ in rounding only), for allreduce (bucketed and one
# bucket) and hgc; the 'ranks:' line names the algorithm, auto picks hier on 2 nodes and flat
# on one; hier sends fewer cross-node bytes (metrics bytes_cross, summed over ranks); with the
# emulated network every rank books the leaders' modeled link as delay; a bad value is a usage error (exit 2,
# one line).
# Skipped (passes) when mpirun is not installed. Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
T=$(mktemp -d /tmp/het_cli_hier_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
mpi() { local P=$1; shift; het_mpirun "$P" "$HETRAIN" "$@"; }
COMMON=(--model mlp --data synthetic --epochs 2 --train-limit 1024 --test-limit 256 --seed 5
        --progress off)

# ---- a bad value: one line, exit 2 (one process, and under mpirun) ----
"$HETRAIN" train "${COMMON[@]}" --allreduce-algo ring >bad.out 2>bad.err
rc=$?
[ $rc -eq 2 ] || fail "--allreduce-algo ring: exit $rc, expected 2"
[ "$(wc -l <bad.err)" -eq 1 ] && grep -q "allreduce-algo: unknown mode 'ring', expected auto, flat or hier" bad.err ||
    fail "--allreduce-algo ring: stderr '$(cat bad.err)'"
[ -s bad.out ] && fail "--allreduce-algo ring wrote to stdout: $(cat bad.out)"

if ! het_mpi_found || ! het_mpi_np_ok 4; then
    echo "test_cli_hier: multi-rank part skipped ($HET_MPIEXEC: not found, or 4 ranks on fewer cores with $het_mpi_flavor)"
    [ $failures -eq 0 ]
    exit
fi
mpi 2 train "${COMMON[@]}" --allreduce-algo ring >bad2.out 2>bad2.err
rc=$? # (mpirun adds its own lines about the exit code)
[ $rc -eq 2 ] && [ "$(grep -c '^hetrain' bad2.err)" -eq 1 ] ||
    fail "2 ranks, --allreduce-algo ring: exit $rc, stderr '$(cat bad2.err)'"

# test_loss of the last epoch in a metrics file, and the sum of its bytes_cross over ranks
loss_of() { sed -n 's/.*"test_loss":\([-0-9.e]*\).*/\1/p' "$1" | tail -1; }
cross_of() {
    sed -n 's/.*"bytes_cross":\[\([0-9,]*\)\].*/\1/p' "$1" | tr ',' '\n' |
        awk '{ s += $1 } END { printf "%.0f\n", s }'
}
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-5 * (a < 0 ? -a : a)) }'; }

# ---- allreduce: hier, flat, auto on 4 ranks in 2 emulated nodes ----
for b in 25 0; do
    for a in hier flat auto; do
        mpi 4 train "${COMMON[@]}" --ranks-per-node 2 --bucket-mb $b --allreduce-algo $a \
            --metrics $a$b.jsonl >$a$b.out 2>$a$b.err || fail "$a, bucket-mb $b: $(cat $a$b.err)"
    done
    grep -q '^ranks: 4 ranks on 2 nodes.*all-reduce hier$' hier$b.out ||
        fail "hier: ranks line $(grep '^ranks' hier$b.out)"
    grep -q '^ranks: .*all-reduce flat$' flat$b.out || fail "flat: $(grep '^ranks' flat$b.out)"
    grep -q '^ranks: .*all-reduce hier$' auto$b.out ||
        fail "auto on 2 nodes: $(grep '^ranks' auto$b.out)"
    lh=$(loss_of hier$b.jsonl) lf=$(loss_of flat$b.jsonl) la=$(loss_of auto$b.jsonl)
    close "$lh" "$lf" || fail "bucket-mb $b: test loss hier $lh vs flat $lf (rel. 1e-5)"
    [ "$lh" = "$la" ] || fail "bucket-mb $b: auto $la vs hier $lh: should be the same run"
    ch=$(cross_of hier$b.jsonl) cf=$(cross_of flat$b.jsonl)
    # flat: every rank sends its gradients across; hier: only the 2 leaders
    awk -v h="$ch" -v f="$cf" 'BEGIN { exit !(h > 0 && h * 1.9 < f) }' ||
        fail "bucket-mb $b: cross-node bytes hier $ch, flat $cf: expected about half"
done

# ---- auto on one node (4 ranks, real node of this machine) is flat ----
mpi 4 train "${COMMON[@]}" --epochs 1 >one.out 2>one.err || fail "one node: $(cat one.err)"
grep -q '^ranks: 4 ranks on 1 node.*all-reduce flat$' one.out ||
    fail "auto on one node: $(grep '^ranks' one.out)"

# ---- hgc goes through the same reducer ----
for a in hier flat; do
    mpi 4 train "${COMMON[@]}" --strategy hgc --speeds 1,2,1,2 --ranks-per-node 2 \
        --allreduce-algo $a --metrics hgc$a.jsonl >hgc$a.out 2>hgc$a.err ||
        fail "hgc $a: $(cat hgc$a.err)"
done
grep -q '^ranks: .*strategy hgc.*all-reduce hier$' hgchier.out ||
    fail "hgc hier: $(grep '^ranks' hgchier.out)"
close "$(loss_of hgchier.jsonl)" "$(loss_of hgcflat.jsonl)" ||
    fail "hgc: test loss hier $(loss_of hgchier.jsonl) vs flat $(loss_of hgcflat.jsonl)"

# ---- daso keeps its own scheme: no algorithm on its ranks line ----
mpi 4 train "${COMMON[@]}" --epochs 1 --strategy daso --ranks-per-node 2 >daso.out 2>daso.err ||
    fail "daso: $(cat daso.err)"
grep -q 'all-reduce' daso.out && fail "daso names an all-reduce algorithm: $(grep '^ranks' daso.out)"

# ---- emulated network: the leaders (ranks 0 and 2) are charged the modeled link; the others
# book their wait for it as delay too (every rank's split shows the network) ----
mpi 4 train "${COMMON[@]}" --epochs 1 --ranks-per-node 2 --allreduce-algo hier \
    --net-bw 125M --net-lat 50e-6 --metrics net.jsonl >net.out 2>net.err || fail "net: $(cat net.err)"
d=$(sed -n 's/.*"delay_s":\[\([0-9.e,-]*\)\].*/\1/p' net.jsonl | tail -1)
# (a timing check: where the real MPI time exceeds the model, as under sanitizers, the
# delay is 0; HET_TEST_NO_TIMING skips it)
if [ -z "${HET_TEST_NO_TIMING:-}" ] || [ "$HET_TEST_NO_TIMING" = 0 ]; then
    echo "$d" | awk -F, '{ exit !($1 > 0 && $2 > 0 && $3 > 0 && $4 > 0) }' ||
        fail "emulated delay per rank '$d': expected > 0 on every rank"
fi

# ---- --placement cyclic: rank r on emulated node r mod 2 (as mpirun --map-by node); the
# same sums as block placement, to float rounding ----
mpi 4 train "${COMMON[@]}" --epochs 1 --ranks-per-node 2 --placement cyclic --metrics cy.jsonl \
    >cy.out 2>cy.err || fail "cyclic placement: $(cat cy.err)"
grep -q '^ranks: 4 ranks on 2 nodes (2 ranks per node, emulated), placed cyclically' cy.out ||
    fail "cyclic placement not in the ranks line: $(grep '^ranks' cy.out)"
mpi 4 train "${COMMON[@]}" --epochs 1 --ranks-per-node 2 --metrics bl.jsonl >bl.out 2>bl.err ||
    fail "block placement: $(cat bl.err)"
lc=$(loss_of cy.jsonl); lb=$(loss_of bl.jsonl)
awk -v a="$lc" -v b="$lb" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 1e-5 * b) }' ||
    fail "cyclic vs block placement: test loss $lc vs $lb"
"$HETRAIN" train "${COMMON[@]}" --placement ring >pr.out 2>pr.err
[ $? -eq 2 ] && grep -q "placement" pr.err || fail "--placement ring: $(cat pr.err)"

[ $failures -eq 0 ] && echo "test_cli_hier: passed"
exit $((failures > 0))

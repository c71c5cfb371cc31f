#!/usr/bin/env bash
# --trace FILE.json: a Chrome trace written by rank 0 for all ranks. Checks with 1 rank (no
# mpirun) and with 3 ranks (mpirun, bucketed gradients): the file is valid JSON (checked by
# test_trace_json, a strict parser in C), no temporary file is left, it has complete events of
# every rank (pid 0..P-1) for forward+backward and optimizer (one rank: the one
# forward+backward+optimizer event of its fused step), bucket all-reduces on tid 1, and
# the metrics carry per-rank time-split arrays; the epoch line names rank 2 (slowdown 2) as
# the slowest on the virtual clock with the shipped costs. Skips the MPI part if mpirun is missing.
# Env: HETRAIN, HET_BUILD_DIR.
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
CHECKER=${HET_BUILD_DIR:?set HET_BUILD_DIR}/test_trace_json
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
T=$(mktemp -d /tmp/het_trace_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ARGS=(train --model mlp --data synthetic --train-limit 300 --test-limit 100 --batch 32
      --epochs 2 --progress off --bucket-mb 0.2)

# check_trace FILE RANKS
check_trace() {
    local f=$1 P=$2
    [ -s "$f" ] || { fail "$f missing"; return; }
    [ -e "$f.tmp" ] && fail "$f.tmp left behind"
    "$CHECKER" "$f" || fail "$f is not valid JSON"
    head -c 16 "$f" | grep -q '^{"traceEvents":\[' || fail "$f does not start with traceEvents"
    local pids
    pids=$(grep -o '"ph":"X","pid":[0-9]*' "$f" | sed 's/.*://' | sort -un | tr '\n' ' ')
    [ "$pids" = "$(seq -s ' ' 0 $((P - 1))) " ] || fail "$f: events of ranks '$pids', expected 0..$((P - 1))"
    local evs="forward+backward optimizer evaluation"
    [ "$P" = 1 ] && evs="forward+backward+optimizer evaluation" # one rank: one event a step
    for ev in $evs; do
        n=$(grep -c "\"name\":\"$ev\",\"ph\":\"X\"" "$f")
        [ "$n" -ge "$P" ] || fail "$f: $n '$ev' events for $P ranks"
    done
    grep -q '"dur":-' "$f" && fail "$f: negative duration"
}

"$HETRAIN" "${ARGS[@]}" --trace one.json >one.out 2>one.err || fail "1 rank: $(cat one.err)"
check_trace one.json 1

if het_mpi_found && het_mpi_np_ok 3; then
    het_mpirun 3 "$HETRAIN" "${ARGS[@]}" --trace three.json \
        --metrics three.jsonl --slowdown 1,1,2 >three.out 2>three.err || fail "3 ranks: $(cat three.err)"
    check_trace three.json 3
    n=$(grep -c '"name":"bucket all-reduce","ph":"X","pid":[0-9]*,"tid":1' three.json)
    [ "$n" -gt 0 ] || fail "no bucket all-reduce events on tid 1"
    grep -q '"name":"slowdown (emulated)","ph":"X","pid":2' three.json ||
        fail "no slowdown events of rank 2"
    grep -q '"name":"slowdown (emulated)","ph":"X","pid":0' three.json &&
        fail "slowdown events on rank 0 (factor 1)"
    # rank 0 waits for the slow rank 2 where the last bucket completes, inside backward: an
    # event of its own on the compute thread (shared FINDINGS D10)
    grep -q '"name":"all-reduce in backward","ph":"X","pid":0,"tid":0' three.json ||
        fail "no 'all-reduce in backward' event of rank 0"
    grep -q '"compute_s":\[[0-9.e-]*,[0-9.e-]*,[0-9.e-]*\],"comm_s":\[.*\],"wait_s":\[.*\],"delay_s":\[' three.jsonl ||
        fail "metrics without per-rank time split: $(head -1 three.jsonl)"
    # which rank is slowest is a timing: on the wall clock of a loaded 2-core host the mlp's
    # compute is a few % of a step and noise picks any rank (seen in CI), so the epoch line's
    # split is checked on the virtual clock with the shipped cost table, where rank 2 computes
    # twice as long on every host
    het_mpirun 3 "$HETRAIN" "${ARGS[@]}" --metrics v.jsonl --slowdown 1,1,2 --clock virtual \
        --compute-cost shipped >v.out 2>v.err || fail "3 ranks, virtual clock: $(cat v.err)"
    n=$(grep -c 'compute [0-9]*% comm [0-9]*% wait [0-9]*% delay [0-9]*%.*slowest rank 2' v.out)
    [ "$n" = 2 ] || fail "epoch lines without the time split and slowest rank 2: $(grep '^epoch' v.out)"
    grep -q 'compute [0-9]*% comm [0-9]*% wait [0-9]*% delay [0-9]*%.*slowest rank [0-2]' three.out ||
        fail "wall clock: epoch line without the time split: $(grep '^epoch' three.out)"
fi
[ $failures -eq 0 ] && echo "test_trace: passed" || exit 1

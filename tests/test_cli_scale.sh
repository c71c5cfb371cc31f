#!/usr/bin/env bash
# Many emulated ranks on one small machine (#22, scale): 16 ranks of lenet5 on 2 emulated
# nodes of 8 (--ranks-per-node 8), a tiny synthetic subset, 1 epoch, under mpirun with more
# ranks than cores (tests/mpi.sh oversubscribes). The run completes, prints once, reads one
# copy of the datasets for the host's 16 ranks and reports the peak RSS over 16 ranks.
# Skipped under MPICH (it busy-polls: ranks <= cores). Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found (the launcher of the MPI this build uses)" >&2; exit 1; }
het_mpi_np_ok 16 || { echo "test_cli_scale: skipped (16 ranks, more than the cores, $het_mpi_flavor)"; exit 77; }
T=$(mktemp -d /tmp/het_cli_scale_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
unset HET_SHARED_DATA
HET_MPI_TIMEOUT=300 het_mpirun 16 "$HETRAIN" train --model lenet5 --data synthetic \
    --train-limit 512 --test-limit 128 --epochs 1 --ranks-per-node 8 --progress off >o.txt 2>e.txt
rc=$?
[ $rc -eq 0 ] || fail "16 ranks exited $rc: $(cat e.txt)"
grep -q '^ranks: 16 ranks on 2 nodes (8 ranks per node, emulated)' o.txt || fail "no topology line: $(cat o.txt)"
[ "$(grep -c '^epoch 1/1 ' o.txt)" -eq 1 ] || fail "expected one epoch line: $(cat o.txt)"
grep -q '^memory: dataset .* held once per host in shared memory: 1 copy for 16 ranks on 1 host' o.txt ||
    fail "start memory line: $(grep '^memory' o.txt)"
grep -Eq '^memory: peak RSS per rank max [0-9.]+ MB, sum [0-9.]+ [MG]B over 16 ranks.*shared per host \(1 copy\)$' o.txt ||
    fail "end memory line: $(grep '^memory' o.txt)"
grep -q '^done: 1 epochs' o.txt || fail "no done line: $(cat o.txt)"
[ $failures -eq 0 ] && echo "test_cli_scale: passed ($(grep '^memory: peak' o.txt))" || exit 1

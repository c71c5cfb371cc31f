#!/usr/bin/env bash
# Runs the test_p2p program (point-to-point messages against hand-derived numbers: the
# emulated delay and counters, the receiver's virtual clock, the virtual-time order of a
# receive from any sender, done messages, chunks, nothing pending, the stall line) under mpirun
# with 2, 3 and 4 ranks (CTest runs it alone as a 1-rank singleton). Every rank checks; the
# program exits non-zero on any rank's failure. Timing is checked only as lower bounds (a
# receive done no earlier than its arrival) and one gross upper bound, skipped with
# HET_TEST_NO_TIMING; the stall case waits 3 s per run.
set -u
HET_BUILD_DIR=${HET_BUILD_DIR:?set HET_BUILD_DIR to the build folder}
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found (the launcher of the MPI this build uses)" >&2; exit 1; }
het_mpi_each test_p2p_mpi "$HET_BUILD_DIR/test_p2p" 2 3 4 || exit 1
echo "test_p2p_mpi: passed"

#!/usr/bin/env bash
# Runs the test_comm program under mpirun with 2, 3 and 4 ranks (CTest runs it alone as a
# 1-rank singleton). Every rank checks; the program exits non-zero on any rank's failure.
# Among its cases: bf16 / fp16 wire all-reduce within the rounding bound and bitwise equal on
# every rank, even/odd groups and their spans on virtual nodes of 2 ranks, the cross-node and
# node-local byte counters (4 ranks: 2 nodes), the rank-order double sum, and requests beyond
# the inline array.
# Skipped (passes) when mpirun is not installed. Env: HET_BUILD_DIR (the build folder).
set -u
HET_BUILD_DIR=${HET_BUILD_DIR:?set HET_BUILD_DIR to the build folder}
BIN="$HET_BUILD_DIR/test_comm"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found (the launcher of the MPI this build uses)" >&2; exit 1; }
het_mpi_each test_comm_mpi "$BIN" 2 3 4 || exit 1
echo "test_comm_mpi: passed"

#!/usr/bin/env bash
# Runs the test_hier program under mpirun with 2, 3 and 4 ranks (CTest runs it alone as a
# 1-rank singleton). Every rank checks; the program exits non-zero on any rank's failure.
# Its cases: two-level vs flat all-reduce and the exact sum on every placement the ranks
# allow (one node, consecutive, interleaved, uneven, one rank per node), bucketed and not,
# byte counters by locality, the emulated delay of the leaders' stage, AUTO.
# Skipped (passes) when mpirun is not installed. Env: HET_BUILD_DIR (the build folder).
set -u
HET_BUILD_DIR=${HET_BUILD_DIR:?set HET_BUILD_DIR to the build folder}
BIN="$HET_BUILD_DIR/test_hier"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found (the launcher of the MPI this build uses)" >&2; exit 1; }
het_mpi_each test_hier_mpi "$BIN" 2 3 4 || exit 1
echo "test_hier_mpi: passed"

#!/usr/bin/env bash
# Runs the test_vclock program (the virtual clock's arithmetic against hand-derived numbers)
# under mpirun with 2 and 3 ranks, one emulated node each (CTest runs it alone as a 1-rank
# singleton). Every rank checks; the program exits non-zero on any rank's failure. Nothing here
# depends on timing: the clock is virtual.
set -u
HET_BUILD_DIR=${HET_BUILD_DIR:?set HET_BUILD_DIR to the build folder}
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found (the launcher of the MPI this build uses)" >&2; exit 1; }
het_mpi_each test_vclock_mpi "$HET_BUILD_DIR/test_vclock" 2 3 || exit 1
echo "test_vclock_mpi: passed"

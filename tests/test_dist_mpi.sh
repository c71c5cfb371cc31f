#!/usr/bin/env bash
# Runs tests/test_dist.c's binary under real mpirun with 1, 2, 3 and 4 ranks (more ranks than
# cores: --oversubscribe). Skipped (passes) when mpirun is not installed.
# Env: HET_BUILD_DIR (the build directory holding test_dist).
set -u
BIN=${HET_BUILD_DIR:?set HET_BUILD_DIR}/test_dist
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found (the launcher of the MPI this build uses)" >&2; exit 1; }
het_mpi_each test_dist_mpi "$BIN" 1 2 3 4 || exit 1
echo "test_dist_mpi: passed"

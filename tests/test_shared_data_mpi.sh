#!/usr/bin/env bash
# Runs tests/test_shared_data.c's binary (the datasets held once per host) under real mpirun
# with 1, 2 and 4 ranks (more ranks than cores: --oversubscribe). Env: HET_BUILD_DIR (the build
# directory holding test_shared_data).
set -u
BIN=${HET_BUILD_DIR:?set HET_BUILD_DIR}/test_shared_data
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found (the launcher of the MPI this build uses)" >&2; exit 1; }
het_mpi_each test_shared_data_mpi "$BIN" 1 2 4 || exit 1
echo "test_shared_data_mpi: passed"

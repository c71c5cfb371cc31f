#!/usr/bin/env bash
# Runs test_step (the step machinery apart from the trainer) under mpirun with 2 and 4 ranks,
# 2 ranks per emulated node, so that node and world reducers differ. Every rank checks; the
# program exits non-zero on any rank's failure. Env: HET_BUILD_DIR (the build folder).
set -u
HET_BUILD_DIR=${HET_BUILD_DIR:?set HET_BUILD_DIR to the build folder}
BIN="$HET_BUILD_DIR/test_step"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found" >&2; exit 1; }
het_mpi_each test_step_mpi "$BIN" 2 4 || exit 1
echo "test_step_mpi: passed"

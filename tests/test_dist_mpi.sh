#!/usr/bin/env bash
# Runs tests/test_dist.c's binary under real mpirun with 1, 2, 3 and 4 ranks (more ranks than
# cores: --oversubscribe). Skipped (passes) when mpirun is not installed.
# Env: HET_BUILD_DIR (the build directory holding test_dist).
set -u
BIN=${HET_BUILD_DIR:?set HET_BUILD_DIR}/test_dist
export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
. "$(dirname "$0")/mpi.sh"
if ! het_mpi_found; then
    echo "test_dist: $HET_MPIEXEC not found, skipped"
    exit 0
fi
het_mpi_each test_dist_mpi "$BIN" 1 2 3 4 || exit 1
echo "test_dist_mpi: passed"

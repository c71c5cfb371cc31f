#!/usr/bin/env bash
# Runs tests/test_dist.c's binary under real mpirun with 1, 2, 3 and 4 ranks (more ranks than
# cores: --oversubscribe). Skipped (passes) when mpirun is not installed.
# Env: HET_BUILD_DIR (the build directory holding test_dist).
set -u
BIN=${HET_BUILD_DIR:?set HET_BUILD_DIR}/test_dist
export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
if ! command -v mpirun >/dev/null 2>&1; then
    echo "test_dist: mpirun not found, skipped"
    exit 0
fi
failures=0
for P in 1 2 3 4; do
    if ! timeout 120 mpirun --oversubscribe -np "$P" "$BIN"; then
        echo "FAIL: test_dist on $P ranks" >&2
        failures=$((failures + 1))
    fi
done
[ $failures -eq 0 ] && echo "test_dist_mpi: passed" || exit 1

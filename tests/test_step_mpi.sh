#!/usr/bin/env bash
# Runs test_step (the step machinery apart from the trainer) under mpirun with 2 and 4 ranks,
# 2 ranks per emulated node, so that node and world reducers differ. Every rank checks; the
# program exits non-zero on any rank's failure. Env: HET_BUILD_DIR (the build folder).
set -u
HET_BUILD_DIR=${HET_BUILD_DIR:?set HET_BUILD_DIR to the build folder}
BIN="$HET_BUILD_DIR/test_step"
export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found" >&2; exit 1; }
[ -x "$BIN" ] || { echo "FAIL: $BIN not built" >&2; exit 1; }
fail=0
for np in 2 4; do
    het_mpi_np_ok "$np" || { echo "test_step_mpi: $np ranks skipped (more than the cores, $het_mpi_flavor)"; continue; }
    if ! het_mpirun "$np" "$BIN"; then
        echo "FAIL: mpirun -np $np test_step" >&2
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "test_step_mpi: passed (2 and 4 ranks)"
exit $fail

#!/usr/bin/env bash
# Runs the test_p2p_arb program (point-to-point messages carried by the arbiter,
# --p2p-model arbiter: a node's ranks sharing its way out, cross-traffic, a receive from any
# sender, against hand-derived arrivals) under mpirun with 4 ranks on 2 nodes. CTest runs it
# alone as a 1-rank singleton.
set -u
HET_BUILD_DIR=${HET_BUILD_DIR:?set HET_BUILD_DIR to the build folder}
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found (the launcher of the MPI this build uses)" >&2; exit 1; }
het_mpi_each test_p2p_arb_mpi "$HET_BUILD_DIR/test_p2p_arb" 4 || exit 1
echo "test_p2p_arb_mpi: passed"

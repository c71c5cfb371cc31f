#!/usr/bin/env bash
# Runs the test_links program (the network model's sanity counter, src/comm/links.c, against
# hand-derived numbers on the virtual clock) under mpirun with 2 ranks (one per node: a stream
# and a lane's message beside it) and 4 (two per node: a node's ranks on one uplink, collectives
# alone and two at once). CTest runs it alone as a 1-rank singleton.
set -u
HET_BUILD_DIR=${HET_BUILD_DIR:?set HET_BUILD_DIR to the build folder}
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found (the launcher of the MPI this build uses)" >&2; exit 1; }
het_mpi_each test_links_mpi "$HET_BUILD_DIR/test_links" 2 4 || exit 1
echo "test_links_mpi: passed"

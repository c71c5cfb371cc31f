#!/usr/bin/env bash
# Runs the test_arb_svc program (the arbiter service, src/comm/arb_svc.c: flows of several ranks
# completed by world rank 0 in virtual-time order, against hand-derived ends) under mpirun with
# 4 ranks: a node's two ranks on one way out, a later sender that reports late in wall time,
# cross-traffic both ways, three senders into one receiver. CTest runs it alone as a 1-rank
# singleton.
set -u
HET_BUILD_DIR=${HET_BUILD_DIR:?set HET_BUILD_DIR to the build folder}
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found (the launcher of the MPI this build uses)" >&2; exit 1; }
het_mpi_each test_arb_svc_mpi "$HET_BUILD_DIR/test_arb_svc" 4 || exit 1
echo "test_arb_svc_mpi: passed"

/* Private helpers of comm/. */
#ifndef HET_COMM_INTERNAL_H
#define HET_COMM_INTERNAL_H

#include "hetrain/comm.h"

/* Records "<what> failed: <MPI's text for err>" and returns HET_EMPI. */
int het_comm_mpi_error(int err, const char *what);

/* Blocking in-place sum all-reduce whose emulated delay is deferred: completes the MPI part now
 * and fills r as a finished request (no MPI requests) that het_comm_wait / het_comm_test hold
 * until the modeled time has passed since now. Statistics as het_comm_iallreduce_sum. */
int het_comm_allreduce_deferred(het_comm *c, het_comm_scope s, float *buf, size_t n, het_req *r);

#endif

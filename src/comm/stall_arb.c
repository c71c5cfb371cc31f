/* The stall inspector's part for the arbiter (--p2p-model arbiter, comm/arb_svc.c): every
 * collective is told to world rank 0's arbiter when posted and when waited for, and every wait
 * serves it, so that a rank inside a collective neither holds the others' messages back (its
 * promise follows its members') nor leaves them without answers (rank 0 answers while it
 * waits). A failure to tell the arbiter ends the job: the rank's promise would stay at its last
 * report and could hold every rank. */
#include <stdio.h>
#include <stdlib.h>

#include "comm/arb_svc.h"
#include "comm/internal.h"
#include "comm/p2p.h"

static het_comm *arb_comm; /* the comm whose arbiter the waits serve, or NULL */

void het_stall_use_arbiter(het_comm *c) { arb_comm = c && c->arb ? c : NULL; }

int het_stall_arb_on(void) { return arb_comm != NULL; }

int het_stall_start_for(MPI_Comm world, double warn_s, double abort_s, int arbiter) {
    return arbiter && warn_s == 0.0 && abort_s == 0.0 ? het_stall_start_silent(world)
                                                       : het_stall_start(world, warn_s, abort_s);
}

long long het_stall_arb_hash(MPI_Comm comm) {
    int size = 0;
    MPI_Comm_size(comm, &size);
    int *mem = size > 0 ? malloc((size_t)size * sizeof *mem) : NULL;
    unsigned long long key = 0;
    if (mem && het_stall_members(comm, size, mem)) {
        key = 1469598103934665603ULL;
        for (int i = 0; i < size; i++) key = (key ^ (unsigned)mem[i]) * 1099511628211ULL;
        key = (key >> 1) | 1; /* never 0 */
    }
    free(mem);
    return (long long)key;
}

static void fail(void) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "hetrain: rank %d: the arbiter cannot follow a collective: %s\n", rank,
            het_error_msg());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

void het_stall_arb_enter(long long key, long long seq) {
    if (!arb_comm) return;
    if (!key || het_arb_svc_enter(arb_comm->arb, het_comm_arbiter_now(arb_comm), key, seq) !=
                    HET_OK)
        fail();
}

void het_stall_arb_wait(long long key, long long seq, MPI_Comm comm) {
    if (!arb_comm) return;
    int size = 0;
    MPI_Comm_size(comm, &size);
    int *mem = size > 0 ? malloc((size_t)size * sizeof *mem) : NULL;
    int ok = mem && key && het_stall_members(comm, size, mem) &&
             het_arb_svc_group(arb_comm->arb, het_comm_arbiter_now(arb_comm), key, seq, size,
                               mem) == HET_OK;
    free(mem);
    if (!ok) fail();
}

void het_stall_arb_serve(void) {
    if (!arb_comm) return;
    het_arb_svc_serve(arb_comm->arb); /* its failures abort */
    het_p2p_arb_progress_all(arb_comm); /* rendezvous: receives' matches told (p2p_arb.c) */
}

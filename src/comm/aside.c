/* Bookkeeping collectives: the traffic that measures or records training rather than being part
 * of it (an epoch's time split, the step logs, per-rank checkpoint sections), and the host
 * helpers (ranks of one machine taking turns at calibration).
 *
 * DESIGN. Strategies and the trainer reach MPI only through comm, so that every call is
 * watched by the stall inspector (a rank that never joins is named, and the run stops) and
 * charged or not by one rule. These calls are deliberately charged to no clock: on the virtual
 * clock a measurement must not move the times it measures (they run between epochs, or after
 * the epoch's figures are taken), and on the wall clock they are a real but constant cost that
 * the epoch's split leaves out. They are posted non-blocking and completed by het_stall_wait
 * like the training's collectives. */
#include <limits.h>
#include <stdlib.h>
#include <time.h>

#include "comm/internal.h"

static MPI_Datatype mpi_type(het_comm_type t) { return t == HET_T_INT ? MPI_INT : MPI_DOUBLE; }

static int scope_comm(het_comm *c, het_comm_scope s, const char *op, MPI_Comm *out) {
    if (!c) return het_error_set(HET_EINVAL, "%s: NULL comm", op);
    *out = het_comm_mpi(c, s);
    if (*out == MPI_COMM_NULL) return het_error_set(HET_EINVAL, "%s: bad scope %d", op, (int)s);
    return HET_OK;
}

int het_comm_allreduce_aside(het_comm *c, het_comm_scope s, void *v, int n, het_comm_type t,
                             het_comm_op op) {
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = scope_comm(c, s, "bookkeeping all-reduce", &comm);
    if (rc != HET_OK || n <= 0) return rc;
    if (!v) return het_error_set(HET_EINVAL, "bookkeeping all-reduce: NULL buffer");
    MPI_Op mop;
    if ((rc = het_comm_mpi_op(op, "bookkeeping all-reduce", &mop)) != HET_OK) return rc;
    MPI_Request q;
    int err = MPI_Iallreduce(MPI_IN_PLACE, v, n, mpi_type(t), mop, comm, &q);
    if (err == MPI_SUCCESS) err = het_stall_collective(comm, "allreduce", &q);
    return err == MPI_SUCCESS ? HET_OK : het_comm_mpi_error(err, "MPI_Iallreduce(bookkeeping)");
}

int het_comm_allgather_aside(het_comm *c, het_comm_scope s, const void *mine, void *all,
                             size_t bytes) {
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = scope_comm(c, s, "bookkeeping all-gather", &comm);
    if (rc != HET_OK) return rc;
    if (bytes > (size_t)INT_MAX || (bytes && (!mine || !all)))
        return het_error_set(HET_EINVAL, "bookkeeping all-gather: %zu bytes", bytes);
    MPI_Request q;
    int err = MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, comm, &q);
    if (err == MPI_SUCCESS) err = het_stall_collective(comm, "allgather", &q);
    return err == MPI_SUCCESS ? HET_OK : het_comm_mpi_error(err, "MPI_Iallgather(bookkeeping)");
}

int het_comm_gather_aside(het_comm *c, het_comm_scope s, const void *mine, void *all,
                          size_t bytes, int root) {
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = scope_comm(c, s, "bookkeeping gather", &comm);
    if (rc != HET_OK) return rc;
    if (bytes > (size_t)INT_MAX || (bytes && !mine))
        return het_error_set(HET_EINVAL, "bookkeeping gather: %zu bytes", bytes);
    MPI_Request q;
    int err = MPI_Igather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, root, comm, &q);
    if (err == MPI_SUCCESS) err = het_stall_collective(comm, "gather", &q);
    return err == MPI_SUCCESS ? HET_OK : het_comm_mpi_error(err, "MPI_Igather(bookkeeping)");
}

int het_comm_gatherv_aside(het_comm *c, het_comm_scope s, const void *mine, size_t bytes,
                           void *all, const int *counts, const int *displs, int root) {
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = scope_comm(c, s, "bookkeeping gather", &comm), rank = -1;
    if (rc != HET_OK) return rc;
    MPI_Comm_rank(comm, &rank);
    if (bytes > (size_t)INT_MAX || (bytes && !mine) || (rank == root && (!counts || !displs)))
        return het_error_set(HET_EINVAL, "bookkeeping gather: %zu bytes%s", bytes,
                             rank == root && (!counts || !displs) ? ", no counts at the root"
                                                                  : "");
    MPI_Request q;
    int err = MPI_Igatherv(mine, (int)bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, root, comm,
                           &q);
    if (err == MPI_SUCCESS) err = het_stall_collective(comm, "gather", &q);
    return err == MPI_SUCCESS ? HET_OK : het_comm_mpi_error(err, "MPI_Igatherv(bookkeeping)");
}

int het_comm_barrier_aside(het_comm *c, het_comm_scope s) {
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = scope_comm(c, s, "bookkeeping barrier", &comm);
    if (rc != HET_OK) return rc;
    MPI_Request q;
    int err = MPI_Ibarrier(comm, &q);
    if (err == MPI_SUCCESS) err = het_stall_collective(comm, "barrier", &q);
    return err == MPI_SUCCESS ? HET_OK : het_comm_mpi_error(err, "MPI_Ibarrier(bookkeeping)");
}

/* The ranks of this machine (MPI_COMM_TYPE_SHARED), made on first use. */
static int host_comm(het_comm *c) {
    if (c->host != MPI_COMM_NULL) return HET_OK;
    int err = MPI_Comm_split_type(c->topo->world, MPI_COMM_TYPE_SHARED, c->topo->rank,
                                  MPI_INFO_NULL, &c->host);
    if (err != MPI_SUCCESS) {
        c->host = MPI_COMM_NULL;
        return het_comm_mpi_error(err, "MPI_Comm_split_type(host)");
    }
    MPI_Comm_set_errhandler(c->host, MPI_ERRORS_RETURN);
    return HET_OK;
}

int het_comm_host(het_comm *c, int *rank, int *size) {
    *rank = 0, *size = 1;
    if (!c) return HET_OK;
    int rc = host_comm(c);
    if (rc != HET_OK) return rc;
    MPI_Comm_rank(c->host, rank);
    MPI_Comm_size(c->host, size);
    return HET_OK;
}

int het_comm_host_barrier(het_comm *c) {
    if (!c || c->host == MPI_COMM_NULL) return HET_OK;
    MPI_Request q;
    int done = 0;
    if (MPI_Ibarrier(c->host, &q) != MPI_SUCCESS)
        return het_error_set(HET_EMPI, "MPI_Ibarrier(host) failed");
    while (!done) { /* real naps, always: the ranks that wait leave the cores to the one busy */
        if (MPI_Test(&q, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return het_error_set(HET_EMPI, "MPI_Test(host barrier) failed");
        const struct timespec ms = {0, 1000000};
        if (!done) nanosleep(&ms, NULL);
    }
    return HET_OK;
}

/* ---- the ping-pong of hetrain calibrate --network ---- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int het_comm_pingpong(het_comm *c, int a, int b, const size_t *sizes, int n, int reps,
                      double *one_way) {
    if (!c || n < 1 || reps < 1 || a == b || a < 0 || b < 0 || a >= c->topo->size ||
        b >= c->topo->size)
        return het_error_set(HET_EINVAL, "ping-pong: ranks %d and %d of %d, %d sizes, %d "
                             "repetitions", a, b, c ? c->topo->size : 0, n, reps);
    MPI_Comm w = c->topo->world;
    const int me = c->topo->rank, peer = me == a ? b : a, in = me == a || me == b;
    size_t most = 0;
    for (int i = 0; i < n; i++) most = sizes[i] > most ? sizes[i] : most;
    if (most > (size_t)INT_MAX) return het_error_set(HET_EINVAL, "ping-pong: %zu bytes", most);
    char *buf = in ? calloc(most ? most : 1, 1) : NULL;
    double *rt = in ? malloc((size_t)reps * sizeof *rt) : NULL;
    int rc = !in || (buf && rt) ? HET_OK : het_error_set(HET_ENOMEM, "ping-pong: out of memory "
                                                          "for %zu bytes", most);
    rc = het_comm_agree(w, rc);
    for (int i = 0; i < n; i++) one_way[i] = 0.0;
    for (int i = 0; !rc && in && i < n; i++) {
        const int cnt = (int)sizes[i];
        for (int r = -2; r < reps && !rc; r++) { /* two rounds to warm up, not timed */
            double t0 = het_now();
            int err = me == a ? MPI_Send(buf, cnt, MPI_BYTE, peer, 7, w) : MPI_SUCCESS;
            if (err == MPI_SUCCESS)
                err = MPI_Recv(buf, cnt, MPI_BYTE, peer, 7, w, MPI_STATUS_IGNORE);
            if (err == MPI_SUCCESS && me == b) err = MPI_Send(buf, cnt, MPI_BYTE, peer, 7, w);
            if (err != MPI_SUCCESS) rc = het_comm_mpi_error(err, "ping-pong");
            else if (r >= 0) rt[r] = het_now() - t0;
        }
        if (!rc && me == a) { /* the median round trip, halved */
            qsort(rt, (size_t)reps, sizeof *rt, cmp_double);
            one_way[i] = (reps % 2 ? rt[reps / 2] : 0.5 * (rt[reps / 2 - 1] + rt[reps / 2])) / 2;
        }
    }
    free(buf);
    free(rt);
    rc = het_comm_agree(w, rc);
    if (!rc) rc = het_comm_allreduce_aside(c, HET_COMM_WORLD, one_way, n, HET_T_DOUBLE,
                                           HET_OP_MAX); /* rank a's figures to everyone */
    return rc;
}

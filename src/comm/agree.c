/* Agreement on a status across ranks, so that a failure on one rank never leaves the others
 * blocked in a later collective: every rank calls het_comm_agree at the points where any rank
 * can fail, and all return together.
 *
 * An MPI_Allreduce(MIN) of (status != 0 ? rank : size) finds the lowest failing rank (size when
 * none failed); that rank broadcasts its status and its error message (a fixed 512-byte
 * buffer, truncated if longer), and every rank records that message and returns that status. */
#include <string.h>

#include "comm/internal.h"

#define AGREE_MSG_BYTES 512

int het_comm_agree(MPI_Comm world, int status) {
    int rank = 0, size = 1, err;
    if (world == MPI_COMM_NULL) return het_error_set(HET_EINVAL, "agree: NULL communicator");
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);
    int first = status != HET_OK ? rank : size;
    MPI_Request req;
    err = MPI_Iallreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, world, &req);
    if (err == MPI_SUCCESS) err = het_stall_collective(world, "agree", &req);
    if (err != MPI_SUCCESS) return het_comm_mpi_error(err, "agree: MPI_Iallreduce");
    if (first >= size) return HET_OK;
    struct { int status; char msg[AGREE_MSG_BYTES]; } w;
    memset(&w, 0, sizeof w);
    if (rank == first) {
        w.status = status;
        const char *m = het_error_msg();
        strncpy(w.msg, m ? m : "", sizeof w.msg - 1);
    }
    err = MPI_Ibcast(&w, (int)sizeof w, MPI_BYTE, first, world, &req);
    if (err == MPI_SUCCESS) err = het_stall_collective(world, "agree", &req);
    if (err != MPI_SUCCESS) return het_comm_mpi_error(err, "agree: MPI_Ibcast");
    w.msg[sizeof w.msg - 1] = '\0';
    if (w.status == HET_OK) w.status = HET_EPEER; /* cannot happen: rank `first` failed */
    if (rank == first) return status; /* its own message is already recorded */
    het_error_set(w.status, "%s", w.msg[0] ? w.msg : het_strerror(w.status));
    return w.status;
}

/* Agreement on values. One all-reduce (MIN) of the values and their complements gives every
 * value's minimum and maximum over the ranks: all agree when they are equal. Only when they do
 * not: rank 0's values are broadcast, every rank finds its first differing index, an
 * all-reduce (MINLOC) finds the lowest such rank, a sum counts them, and that rank broadcasts
 * its value. */
int het_comm_compare(MPI_Comm world, const uint64_t *values, int n, het_comm_diff *d) {
    uint64_t mm[2 * HET_COMPARE_MAX], v0[HET_COMPARE_MAX];
    int rank = 0, size = 1, err;
    memset(d, 0, sizeof *d);
    d->rank = d->index = -1;
    if (n < 1 || n > HET_COMPARE_MAX)
        return het_error_set(HET_EINVAL, "compare: %d values, expected 1..%d", n,
                             HET_COMPARE_MAX);
    if (world == MPI_COMM_NULL) return HET_OK;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);
    for (int i = 0; i < n; i++) mm[i] = values[i], mm[n + i] = ~values[i];
    MPI_Request q;
    err = MPI_Iallreduce(MPI_IN_PLACE, mm, 2 * n, MPI_UINT64_T, MPI_MIN, world, &q);
    if (err == MPI_SUCCESS) err = het_stall_collective(world, "compare", &q);
    if (err != MPI_SUCCESS) return het_comm_mpi_error(err, "compare: MPI_Iallreduce");
    int same = 1;
    for (int i = 0; i < n; i++) same &= mm[i] == ~mm[n + i];
    if (same) return HET_OK; /* the same on every rank: all take this branch or none */
    memcpy(v0, values, (size_t)n * sizeof *v0);
    err = MPI_Ibcast(v0, n, MPI_UINT64_T, 0, world, &q);
    if (err == MPI_SUCCESS) err = het_stall_collective(world, "compare", &q);
    int first = -1;
    for (int i = 0; i < n && first < 0; i++)
        if (values[i] != v0[i]) first = i;
    struct { int key, index; } loc = {first >= 0 ? rank : size, first >= 0 ? first : 0};
    int count = first >= 0;
    if (err == MPI_SUCCESS &&
        (err = MPI_Iallreduce(MPI_IN_PLACE, &loc, 1, MPI_2INT, MPI_MINLOC, world, &q)) ==
            MPI_SUCCESS)
        err = het_stall_collective(world, "compare", &q);
    if (err == MPI_SUCCESS &&
        (err = MPI_Iallreduce(MPI_IN_PLACE, &count, 1, MPI_INT, MPI_SUM, world, &q)) ==
            MPI_SUCCESS)
        err = het_stall_collective(world, "compare", &q);
    if (err != MPI_SUCCESS) return het_comm_mpi_error(err, "compare: MPI_Iallreduce");
    if (loc.key >= size) return HET_OK; /* cannot happen: min != max means someone differs */
    uint64_t theirs = first >= 0 ? values[first] : 0;
    if ((err = MPI_Ibcast(&theirs, 1, MPI_UINT64_T, loc.key, world, &q)) == MPI_SUCCESS)
        err = het_stall_collective(world, "compare", &q);
    if (err != MPI_SUCCESS) return het_comm_mpi_error(err, "compare: MPI_Ibcast");
    *d = (het_comm_diff){loc.key, loc.index, count, v0[loc.index], theirs};
    return HET_OK;
}

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

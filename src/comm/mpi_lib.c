/* What the MPI library gives hetrain: the thread level it runs at (checked once per comm) and,
 * under Open MPI, the choice of libnbc's ring for non-blocking all-reduces. */
#include "comm/internal.h"

/* Open MPI's MPI_Iallreduce (libnbc) uses a binomial reduce + broadcast for fewer than 4
 * ranks or in place, whatever the size: at 4-16 MiB on 2 ranks it gave 64-72 % of the blocking
 * MPI_Allreduce's bandwidth, its ring algorithm 100-107 % (bench/bench_allreduce.c, a quiet
 * 16-core machine). When the MCA variable coll_libnbc_iallreduce_algorithm is at its default
 * (0, "ignore"), select the ring (1) through the MPI tool interface; a value set by the user
 * (mpirun --mca ...) is kept. Other MPI libraries lack the variable: nothing happens.
 * MPI_T_init_thread is asked for the level MPI already runs at: Open MPI before 5.x writes the
 * tool interface's level into the process's own (what MPI_Query_thread reports and which
 * locks are taken), so asking for SINGLE would silently lower a FUNNELED or MULTIPLE process
 * to SINGLE (open-mpi/ompi#14164). */
void het_comm_prefer_nbc_ring(void) {
#ifndef HET_SMPI /* SMPI has no tool interface; its collectives are SimGrid's */
    static int done = 0;
    if (done) return;
    done = 1;
    int level = MPI_THREAD_SINGLE, provided, idx, count;
    if (MPI_Query_thread(&level) != MPI_SUCCESS) return;
    if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS) return;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &idx) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS) {
        int v = -1;
        if (count == 1 && MPI_T_cvar_read(h, &v) == MPI_SUCCESS && v == 0) {
            int ring = 1;
            MPI_T_cvar_write(h, &ring);
        }
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
#endif
}

static const char *thread_level_name(int level) {
    if (level == MPI_THREAD_SINGLE) return "SINGLE";
    if (level == MPI_THREAD_FUNNELED) return "FUNNELED";
    if (level == MPI_THREAD_SERIALIZED) return "SERIALIZED";
    if (level == MPI_THREAD_MULTIPLE) return "MULTIPLE";
    return "unknown";
}

int het_comm_check_thread_level(int required) {
    if (required != MPI_THREAD_SINGLE && required != MPI_THREAD_FUNNELED &&
        required != MPI_THREAD_SERIALIZED && required != MPI_THREAD_MULTIPLE)
        return het_error_set(HET_EINVAL, "MPI thread level %d: not one of MPI_THREAD_SINGLE, "
                             "_FUNNELED, _SERIALIZED, _MULTIPLE", required);
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    if (inited) MPI_Finalized(&finalized);
    if (!inited || finalized)
        return het_error_set(HET_EMPI, "MPI is %s: hetrain needs it initialized with thread "
                             "level %s (MPI_Init_thread)", inited ? "finalized" :
                             "not initialized", thread_level_name(required));
    int provided = MPI_THREAD_SINGLE;
    int err = MPI_Query_thread(&provided);
    if (err != MPI_SUCCESS) return het_comm_mpi_error(err, "MPI_Query_thread");
    /* the MPI standard orders SINGLE < FUNNELED < SERIALIZED < MULTIPLE */
#ifdef HET_SMPI /* SMPI provides SINGLE; under it hetrain calls MPI from one thread per rank */
    required = MPI_THREAD_SINGLE;
#endif
    if (provided < required)
        return het_error_set(HET_EMPI, "MPI provides thread level %s, hetrain needs %s: "
                             "initialize MPI with MPI_Init_thread(&argc, &argv, "
                             "MPI_THREAD_%s, &provided)", thread_level_name(provided),
                             thread_level_name(required), thread_level_name(required));
    return HET_OK;
}

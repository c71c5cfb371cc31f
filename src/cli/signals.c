/* Signals and rank loss for the command line: installs the SIGINT / SIGTERM handler of
 * src/core/interrupt.c and gives it what it needs to name a lost rank: every rank's pid and
 * host (one all-gather at start), and a byte per world rank in memory shared by the host's
 * ranks, where a rank marks that it ends on its own (cli_signals_finish, and
 * MPI_Abort of the stall inspector) so that ranks ending together at the end of a run or on an
 * agreed error are never named as lost when the launcher ends the last of them; and starts the
 * peer watch (watch.c) on those. Anything that fails here only leaves the handler with less
 * to say: the run goes on.
 * compare, which runs without MPI and launches its runs, has its own handler instead
 * (cli_signals_forward): it only records the signal and passes it on to the run's process
 * group; compare.c waits for the run, sweeps what is left of it and says what it stopped. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

/* Every rank's pid and whether it runs on this host, to the handler; the pids, host flags
 * and start times into *pids, *local and *start (owned by the caller; NULL when they could
 * not be gathered). Collective. */
static void gather_peers(int rank, int size, int **pids_out, unsigned char **local_out,
                         unsigned long long **start_out) {
    typedef struct { int pid; unsigned long long start; char host[64]; } who;
    who me;
    memset(&me, 0, sizeof me);
    me.pid = (int)getpid();
    if (cli_watch_stat(me.pid, NULL, &me.start) != 0) me.start = 0;
    gethostname(me.host, sizeof me.host - 1);
    who *all = malloc((size_t)size * sizeof *all);
    int *pids = malloc((size_t)size * sizeof *pids);
    unsigned char *local = malloc((size_t)size);
    unsigned long long *start = malloc((size_t)size * sizeof *start);
    int ok = all && pids && local && start;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok && MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE,
                            MPI_COMM_WORLD) == MPI_SUCCESS) {
        for (int r = 0; r < size; r++) {
            pids[r] = all[r].pid;
            start[r] = all[r].start;
            local[r] = strncmp(all[r].host, me.host, sizeof me.host) == 0;
        }
        het_interrupt_peers(rank, size, pids, local);
    } else {
        free(pids), free(local), free(start);
        pids = NULL, local = NULL, start = NULL;
    }
    free(all);
    *pids_out = pids;
    *local_out = local;
    *start_out = start;
}

/* The host's shared "left" bytes, one per world rank: a POSIX shared-memory object made by the
 * host's first rank, mapped by every rank of the host, and unlinked as soon as all have mapped
 * it, so that nothing is left behind however the job ends. Never unmapped: the handler may
 * read it until the process is gone (MPI's own shared windows are unmapped by MPI_Finalize). */
static volatile unsigned char *share_left(int rank, int size) {
    MPI_Comm host;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host) !=
        MPI_SUCCESS)
        return NULL;
    int host_rank = 0, fd = -1;
    MPI_Comm_rank(host, &host_rank);
    char name[64] = "";
    if (host_rank == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(name, sizeof name, "/hetrain-%ld-%ld", (long)getpid(), (long)ts.tv_nsec);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)size) != 0) name[0] = '\0';
    }
    MPI_Bcast(name, (int)sizeof name, MPI_CHAR, 0, host);
    if (host_rank != 0 && name[0]) fd = shm_open(name, O_RDWR, 0600);
    void *p = fd >= 0 ? mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                      : MAP_FAILED;
    if (fd >= 0) close(fd);
    MPI_Barrier(host); /* everybody has mapped it (or failed to) */
    if (host_rank == 0 && name[0]) shm_unlink(name);
    MPI_Comm_free(&host);
    if (p == MAP_FAILED) return NULL;
    het_interrupt_shared((volatile unsigned char *)p); /* zero-filled */
    return (volatile unsigned char *)p;
}

void cli_signals_setup(int rank, int size) {
    het_interrupt_install(rank);
    if (size < 2) return;
    int *pids;
    unsigned char *local;
    unsigned long long *start;
    gather_peers(rank, size, &pids, &local, &start);
    /* from here on a lost rank of this host ends the job (watch.c): the collectives below
     * and every later one, blocking or not */
    if (pids) cli_watch_start(rank, size, pids, local, start, NULL);
    volatile unsigned char *left = share_left(rank, size);
    if (pids && left) cli_watch_start(rank, size, pids, local, start, left);
    free(pids);
    free(local);
    free(start);
}

void cli_signals_finish(int status) {
    het_interrupt_leaving(status);
    cli_watch_stop();
}

/* ---- compare: the signal passed on to the run in progress ---- */

static volatile sig_atomic_t g_caught, g_job;

static void forward(int sig) {
    int saved = errno;
    if (!g_caught) g_caught = sig;
    if (g_job > 0) kill(-(pid_t)g_job, sig);
    errno = saved;
}

int cli_signals_forward(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward; /* no SA_RESTART: a wait in progress returns EINTR */
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        return het_error_set(HET_EIO, "hetrain compare: cannot install the SIGINT / SIGTERM "
                             "handlers: %s", strerror(errno));
    return HET_OK;
}

void cli_signals_job(int pgid) { g_job = pgid; }

int cli_signals_caught(void) { return g_caught; }

/* The peer watch: a thread of every rank that notices a rank of its host gone (kill -9, a
 * crash, the OOM killer) within WATCH_TICK_S and ends the job naming it, whatever the launcher
 * does about it. Open MPI's mpirun ends a job whose rank died; srun, with Slurm's default
 * KillOnBadExit=0, may leave the others waiting in a collective until the allocation's time
 * limit (and when its PMIx plugin ends the step, it does so with SIGKILL, naming nobody).
 *
 * DESIGN. No MPI on this thread but MPI_Abort: it covers every phase of a run, blocking
 * start-up collectives (topology, group splits, daso's set-up) and compute included, from
 * the first all-gather after MPI_Init (signals.c, which gathers every rank's pid, host and
 * start time) to cli_watch_stop before MPI_Finalize. Every WATCH_TICK_S it checks the next
 * ranks of its host in ring order (rank r the first of the host's ranks above r, wrapping),
 * skipping those marked as ending on their own in the host's shared bytes (the end of a run,
 * an agreed error, a signal, the stall inspector's abort), up to the first one alive; so
 * each rank is watched by one other, at the cost of one kill(pid, 0) and one read of
 * /proc/PID/stat a tick. A rank is gone when its pid no longer exists, is a zombie, or
 * belongs to another process (its start time differs from the one it sent); a peer whose
 * /proc entry did not match at the start (another PID namespace under one hostname) is not
 * watched. The watcher of a gone rank marks it in the shared bytes (so that the SIGTERM a
 * launcher then sends names it no second time), prints
 *     hetrain: rank 1 (pid 1234) is gone; ending the job
 * and calls MPI_Abort (exit status 1), which mpirun and srun (PMIx) both turn into the end
 * of every rank, on every node. MPI_Abort from a second thread of an MPI_THREAD_FUNNELED
 * process: the process ends there, as the stall inspector's does from the main thread.
 * Limits: a rank alone on its host has no watcher (Slurm's PMIx plugin then ends the step
 * when the rank's connection drops, srun naming the task; --stall-abort covers a frozen
 * one). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

#define WATCH_TICK_S 0.1

static struct {
    int rank, size, n_local;
    int *local;                      /* the host's world ranks, ascending (owned) */
    int *pids;                       /* per world rank (owned) */
    unsigned long long *start;       /* per world rank: start time in clock ticks (owned) */
    volatile unsigned char *left;    /* the host's shared bytes, or NULL */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running, stop;
} W = {.mu = PTHREAD_MUTEX_INITIALIZER};

int cli_watch_stat(int pid, char *state, unsigned long long *start) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p) return -1;
    char st = 0;
    unsigned long long v = 0;
    /* after ") ": state (field 3) ... starttime (field 22) */
    if (sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                      "%*d %*d %llu", &st, &v) != 2)
        return -1;
    if (state) *state = st;
    *start = v;
    return 0;
}

/* Whether world rank r (on this host) is gone. */
static int gone(int r) {
    if (kill((pid_t)W.pids[r], 0) != 0 && errno == ESRCH) return 1;
    char st = 0;
    unsigned long long t = 0;
    if (cli_watch_stat(W.pids[r], &st, &t) != 0) /* gone since the kill, or unreadable */
        return kill((pid_t)W.pids[r], 0) != 0 && errno == ESRCH;
    return st == 'Z' || st == 'X' || t != W.start[r];
}

/* One tick: the ranks after this one in the host's ring up to the first alive one; ends the
 * job if any of them is gone. */
static void check(void) {
    int me = 0;
    while (me < W.n_local && W.local[me] != W.rank) me++;
    char line[1024];
    int len = snprintf(line, sizeof line, "hetrain: "), n_gone = 0;
    int lost[8];
    for (int k = 1; k < W.n_local; k++) {
        int r = W.local[(me + k) % W.n_local];
        if (W.left && W.left[r]) continue; /* ended on its own, or named already */
        if (W.start[r] == 0 || !gone(r)) break; /* unwatched, or alive */
        if (n_gone < 8) lost[n_gone] = r;
        n_gone++;
        if (len < (int)sizeof line)
            len += snprintf(line + len, sizeof line - (size_t)len, "%srank %d (pid %d)",
                            n_gone > 1 ? ", " : "", r, W.pids[r]);
    }
    if (n_gone == 0) return;
    for (int i = 0; W.left && i < n_gone && i < 8; i++) W.left[lost[i]] = 1;
    het_interrupt_leaving(1); /* the launcher's SIGTERM then ends this rank quietly */
    fprintf(stderr, "%s %s gone; ending the job\n", line, n_gone > 1 ? "are" : "is");
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void *watch_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&W.mu);
    while (!W.stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(WATCH_TICK_S * 1e9);
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&W.cv, &W.mu, &ts);
        if (W.stop) break;
        pthread_mutex_unlock(&W.mu);
        check();
        pthread_mutex_lock(&W.mu);
    }
    pthread_mutex_unlock(&W.mu);
    return NULL;
}

void cli_watch_start(int rank, int size, const int *pids, const unsigned char *local,
                     const unsigned long long *start, volatile unsigned char *left) {
    cli_watch_stop();
    int n_local = 0;
    for (int r = 0; r < size; r++) n_local += local[r] != 0;
    if (n_local < 2) return; /* no peer on this host */
    W.local = malloc((size_t)n_local * sizeof *W.local);
    W.pids = malloc((size_t)size * sizeof *W.pids);
    W.start = calloc((size_t)size, sizeof *W.start);
    if (!W.local || !W.pids || !W.start) goto fail;
    W.rank = rank;
    W.size = size;
    W.n_local = 0;
    W.left = left;
    memcpy(W.pids, pids, (size_t)size * sizeof *pids);
    for (int r = 0; r < size; r++) {
        if (!local[r]) continue;
        W.local[W.n_local++] = r;
        char st;
        unsigned long long t = 0;
        /* watched only if this host's /proc shows the process that sent it (start 0: not) */
        if (r != rank && cli_watch_stat(pids[r], &st, &t) == 0 && t == start[r] && t != 0)
            W.start[r] = t;
    }
    pthread_cond_init(&W.cv, NULL);
    W.stop = 0;
    /* the thread takes no signal: SIGINT / SIGTERM go to the threads that handle them */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    W.running = pthread_create(&W.thread, NULL, watch_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (W.running) return;
    pthread_cond_destroy(&W.cv);
fail: /* the run goes on unwatched */
    free(W.local);
    free(W.pids);
    free(W.start);
    W.local = NULL, W.pids = NULL, W.start = NULL;
}

void cli_watch_stop(void) {
    if (W.running) {
        pthread_mutex_lock(&W.mu);
        W.stop = 1;
        pthread_cond_signal(&W.cv);
        pthread_mutex_unlock(&W.mu);
        pthread_join(W.thread, NULL);
        pthread_cond_destroy(&W.cv);
        W.running = 0;
    }
    free(W.local);
    free(W.pids);
    free(W.start);
    W.local = NULL, W.pids = NULL, W.start = NULL;
    W.n_local = 0;
}

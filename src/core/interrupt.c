/* SIGINT / SIGTERM: remove the checkpoint's temp file, say what is left, exit 130 / 143.
 *
 * DESIGN. The handler does everything itself, with async-signal-safe calls only (unlink,
 * kill(pid, 0), write, nanosleep, _exit), so that it works wherever the signal lands: in
 * compute, in a checkpoint write, or on a thread of OpenBLAS or of the model's pool while the
 * main thread waits in MPI. What it needs is prepared beforehand, at safe points, by the main
 * thread: the temp file being written (het_interrupt_temp, from the checkpoint writer) and
 * two message slots. The current slot says what the last committed checkpoint holds; the
 * pending one what the checkpoint being written will hold once renamed
 * (het_interrupt_checkpoint). The writer marks the moment of the rename
 * (het_interrupt_renaming) and its success (het_interrupt_committed, which makes the pending
 * slot current). In the handler, during the rename, unlink(temp) tells which side of the
 * rename the process is on: the temp file still there (removed now) = the old checkpoint,
 * ENOENT = the new one. Slots are switched by atomic stores after they are written. Any other
 * file written through a temp file (an export, a cost table, a trace: core/outfile.c) is
 * registered with het_interrupt_output before its temp file is created; the handler removes
 * the temp file and names the output as not written ("hetrain: interrupted (ONNX export FILE
 * not written; checkpoint ...)"), unless, during its rename (het_interrupt_output_renaming),
 * the temp file is gone already: renamed into place, it is written.
 *
 * Ranks. Only rank 0 prints "interrupted"; the others exit quietly. A launcher that lost a
 * rank (kill -9, a crash) sends SIGTERM to the survivors: with the peers' pids registered
 * (het_interrupt_peers), the handler checks the ranks on its own host with kill(pid, 0); if
 * some are gone, the lowest surviving rank of the host prints "hetrain: rank 1 (pid 1234) is
 * gone; job ended by the launcher" (plus how many ranks on other hosts could not be checked)
 * instead. A rank that ends on its own (an error, the end of the run, a signal, MPI_Abort)
 * must not count as lost when the launcher then ends the others: it marks itself in a byte
 * array shared by the host's ranks (het_interrupt_shared, an MPI shared-memory window made by
 * main) before it exits (het_interrupt_leaving), and the handler skips marked ranks; a signal
 * that reaches a rank already ending just ends it, quietly, with its own status. Without
 * the array, quiet ranks wait 0.5 s before they exit instead. A second signal while one is
 * handled waits for the first to finish. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hetrain/core.h"

#define MSG_LEN (HET_PATH_LEN + 128)

static char g_tmp[HET_PATH_LEN + 8];
static char g_out_tmp[HET_PATH_LEN + 8]; /* an output other than a checkpoint being written */
static char g_out_msg[MSG_LEN];          /* "ONNX export PATH" */
static atomic_int g_out_phase;           /* 0 none, 1 its temp file exists */
static atomic_int g_phase;          /* 0 no temp file, 1 writing it, 2 renaming it */
static char g_msg[2][MSG_LEN];
static atomic_int g_cur = -1, g_pending = -1;
static atomic_int g_busy;
static int g_rank;
static int g_n_peers;               /* 0: no peers registered */
static int *g_pids;
static unsigned char *g_local;      /* 1: the rank runs on this host */
static volatile unsigned char *_Atomic g_left; /* shared by the host's ranks: 1 = left */
static atomic_int g_leaving = -1;   /* >= 0: ending on its own, with this exit status */

void het_interrupt_temp(const char *path) {
    atomic_store(&g_phase, 0);
    if (!path) { /* written or abandoned: no checkpoint is pending any more */
        atomic_store(&g_pending, -1);
        return;
    }
    snprintf(g_tmp, sizeof g_tmp, "%s", path);
    atomic_store(&g_phase, 1);
}

void het_interrupt_renaming(void) {
    if (atomic_load(&g_phase)) atomic_store(&g_phase, 2);
}

void het_interrupt_committed(void) {
    int p = atomic_load(&g_pending);
    if (p >= 0) {
        atomic_store(&g_cur, p);
        atomic_store(&g_pending, -1);
    }
    atomic_store(&g_phase, 0);
}

void het_interrupt_checkpoint(const char *path, int epoch, int committed) {
    int cur = atomic_load(&g_cur), slot = cur == 0 ? 1 : 0;
    atomic_store(&g_pending, -1);
    snprintf(g_msg[slot], MSG_LEN, "checkpoint %s: epoch %d", path, epoch);
    atomic_store(committed ? &g_cur : &g_pending, slot);
}

void het_interrupt_output(const char *tmp, const char *what) {
    atomic_store(&g_out_phase, 0);
    if (!tmp) return;
    snprintf(g_out_tmp, sizeof g_out_tmp, "%s", tmp);
    snprintf(g_out_msg, sizeof g_out_msg, "%s", what);
    atomic_store(&g_out_phase, 1);
}

void het_interrupt_output_renaming(void) {
    if (atomic_load(&g_out_phase)) atomic_store(&g_out_phase, 2);
}

int het_interrupt_peers(int rank, int size, const int *pids, const unsigned char *local) {
    int *p = malloc((size_t)size * sizeof *p);
    unsigned char *l = malloc((size_t)size);
    if (!p || !l) {
        free(p);
        free(l);
        return het_error_set(HET_ENOMEM, "out of memory for %d ranks' pids", size);
    }
    memcpy(p, pids, (size_t)size * sizeof *p);
    memcpy(l, local, (size_t)size);
    g_n_peers = 0; /* the handler reads nothing while the arrays change */
    free(g_pids);
    free(g_local);
    g_pids = p;
    g_local = l;
    g_rank = rank;
    g_n_peers = size;
    return HET_OK;
}

void het_interrupt_shared(volatile unsigned char *left) { atomic_store(&g_left, left); }

/* Marks this rank as gone on its own in the shared bytes. */
static void mark_left(void) {
    volatile unsigned char *left = atomic_load(&g_left);
    if (left && g_n_peers > 0) left[g_rank] = 1;
}

void het_interrupt_leaving(int status) {
    atomic_store(&g_leaving, status);
    mark_left();
}

/* ---- in the handler: async-signal-safe only ---- */

static size_t put(char *buf, size_t len, size_t cap, const char *s) {
    while (*s && len + 1 < cap) buf[len++] = *s++;
    return len;
}

static size_t put_int(char *buf, size_t len, size_t cap, long v) {
    char d[24];
    int n = 0;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    do d[n++] = (char)('0' + u % 10); while ((u /= 10) && n < 23);
    if (v < 0 && len + 1 < cap) buf[len++] = '-';
    while (n > 0 && len + 1 < cap) buf[len++] = d[--n];
    return len;
}

static void say(const char *s, size_t n) {
    while (n > 0) {
        ssize_t w = write(2, s, n);
        if (w <= 0 && errno != EINTR) return;
        if (w > 0) {
            s += w;
            n -= (size_t)w;
        }
    }
}

/* A rank other than the one that prints: marks itself as having left and exits 0.5 s later,
 * so that the printing rank exits first (Open MPI's mpirun may drop the output of a rank
 * that is still running when it has seen the others go) and, without the shared marks, does
 * not take it for a lost one. */
static void quiet_exit(int code) {
    mark_left();
    struct timespec ts = {0, 500000000L};
    nanosleep(&ts, NULL);
    _exit(code);
}

/* When ranks of this host are gone: prints the line (lowest surviving rank of the host) and
 * exits; returns when none is gone. */
static void peers_gone(int code) {
    if (g_n_peers < 2 || !g_pids || !g_local) return;
    char line[1024];
    size_t len = put(line, 0, sizeof line, "hetrain: ");
    int n_gone = 0, lowest_alive = -1, remote = 0;
    for (int r = 0; r < g_n_peers; r++) {
        if (!g_local[r]) {
            remote++;
            continue;
        }
        volatile unsigned char *left = atomic_load(&g_left);
        int gone = r != g_rank && kill((pid_t)g_pids[r], 0) != 0 && errno == ESRCH;
        if (gone && left && left[r]) continue; /* it left on its own: not lost */
        if (!gone) {
            if (lowest_alive < 0) lowest_alive = r;
            continue;
        }
        len = put(line, len, sizeof line, n_gone ? ", rank " : "rank ");
        len = put_int(line, len, sizeof line, r);
        len = put(line, len, sizeof line, " (pid ");
        len = put_int(line, len, sizeof line, g_pids[r]);
        len = put(line, len, sizeof line, ")");
        n_gone++;
    }
    if (n_gone == 0) return;
    if (lowest_alive != g_rank) quiet_exit(code);
    len = put(line, len, sizeof line, n_gone > 1 ? " are gone" : " is gone");
    len = put(line, len, sizeof line, "; job ended by the launcher");
    if (remote > 0) {
        len = put(line, len, sizeof line, " (");
        len = put_int(line, len, sizeof line, remote);
        len = put(line, len, sizeof line, remote > 1 ? " ranks on other hosts not checked)" :
                                                       " rank on another host not checked)");
    }
    len = put(line, len, sizeof line, "\n");
    say(line, len);
    _exit(code);
}

static void on_signal(int sig) {
    if (atomic_exchange(&g_busy, 1))
        for (;;) pause(); /* another thread handles the first signal and exits */
    int code = 128 + sig;
    int slot = atomic_load(&g_cur), phase = atomic_load(&g_phase);
    if (phase) {
        int renamed = unlink(g_tmp) != 0 && errno == ENOENT;
        int pending = atomic_load(&g_pending);
        if (phase == 2 && renamed && pending >= 0) slot = pending;
    }
    /* an output's temp file: removed; gone already while it is renamed: it is written */
    int out_phase = atomic_load(&g_out_phase), out_lost = 0;
    if (out_phase) {
        int renamed = unlink(g_out_tmp) != 0 && errno == ENOENT;
        out_lost = !(out_phase == 2 && renamed);
    }
    int leaving = atomic_load(&g_leaving);
    if (leaving >= 0) _exit(leaving); /* it was ending anyway: nothing to say */
    peers_gone(code);
    if (g_rank != 0) quiet_exit(code);
    mark_left();
    char line[2 * MSG_LEN + 64];
    size_t len = put(line, 0, sizeof line, "hetrain: interrupted (");
    if (out_lost) {
        len = put(line, len, sizeof line, g_out_msg);
        len = put(line, len, sizeof line, " not written");
        if (slot >= 0) len = put(line, len, sizeof line, "; ");
    }
    if (slot >= 0) len = put(line, len, sizeof line, g_msg[slot]);
    else if (!out_lost) len = put(line, len, sizeof line, "no checkpoint written");
    len = put(line, len, sizeof line, ")\n");
    say(line, len);
    _exit(code);
}

int het_interrupt_install(int rank) {
    g_rank = rank;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        return het_error_set(HET_EIO, "cannot install the SIGINT / SIGTERM handlers: %s",
                             strerror(errno));
    return HET_OK;
}

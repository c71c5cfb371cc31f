/* The SIGINT / SIGTERM handler (src/core/interrupt.c) at every phase of a checkpoint write,
 * deterministically, and its other cases: a rank other than 0 (silent), a process already
 * ending (silent, its own status), a lost same-host peer (named, remote ranks counted) and a
 * peer that ended on its own (not named), and an export written through core/outfile.c (its
 * temp file removed and the export named as not written, unless renamed already; shared
 * FINDINGS-v4 #7). Each case runs in a child process that sets the
 * state up, raises the signal, and is checked for its exit status, its stderr and the files
 * left. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/outfile.h"
#include "hetrain/ckpt.h"
#include "hetrain/core.h"
#include "test.h"

static char g_dir[64], g_ckpt[128], g_tmp[160], g_err[160];
static char g_out[128], g_out_tmp[160]; /* an output other than a checkpoint: an export */
static int g_dead; /* the pid of a process that has exited and been reaped */

static int exists(const char *p) { return access(p, F_OK) == 0; }

static void touch(const char *p) {
    FILE *f = fopen(p, "w");
    if (f) {
        fputs("partial", f);
        fclose(f);
    }
}

/* Runs setup() in a child with stderr to g_err, then raises sig; returns the exit status
 * (-1 when it did not exit) and the child's stderr in out. */
static int run_child(void (*setup)(void), int sig, int rank, char *out, size_t n) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(g_err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, 2) < 0) _exit(99);
        if (het_interrupt_install(rank) != HET_OK) _exit(98);
        setup();
        raise(sig);
        _exit(97); /* not reached */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    out[0] = '\0';
    FILE *f = fopen(g_err, "r");
    if (f) {
        size_t k = fread(out, 1, n - 1, f);
        out[k] = '\0';
        fclose(f);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void nothing(void) {}

static void writing_first(void) { /* the first checkpoint is being written */
    het_interrupt_checkpoint(g_ckpt, 1, 0);
    het_interrupt_temp(g_tmp);
    touch(g_tmp);
}

static void writing_later(void) { /* epoch 2's checkpoint is in place, epoch 3's is written */
    het_interrupt_checkpoint(g_ckpt, 2, 1);
    het_interrupt_checkpoint(g_ckpt, 3, 0);
    het_interrupt_temp(g_tmp);
    touch(g_tmp);
}

static void renamed(void) { /* the signal lands right after rename() */
    writing_later();
    het_interrupt_renaming();
    rename(g_tmp, g_ckpt);
}

static void before_rename(void) { /* ... or right before it */
    writing_later();
    het_interrupt_renaming();
}

static void committed(void) { /* the writer itself, to the end */
    het_interrupt_checkpoint(g_ckpt, 4, 0);
    het_ckpt_writer *w;
    if (het_ckpt_writer_open(&w, g_ckpt) != HET_OK) _exit(96);
    het_ckpt_put(w, "x", "abc", 3);
    if (het_ckpt_writer_commit(w) != HET_OK) _exit(95);
}

static void aborted(void) { /* a write that failed: the message stays at the last checkpoint */
    het_interrupt_checkpoint(g_ckpt, 2, 1);
    het_interrupt_checkpoint(g_ckpt, 3, 0);
    het_ckpt_writer *w;
    if (het_ckpt_writer_open(&w, g_ckpt) != HET_OK) _exit(96);
    het_ckpt_writer_abort(w);
    het_interrupt_committed(); /* another writer's commit must not promote epoch 3 */
}

/* An export (core/outfile.c) being written, renamed, or written; with a checkpoint or not. */
static het_outfile g_of;
static void export_open(void) {
    if (het_outfile_open(&g_of, g_out, "ONNX export") != HET_OK) _exit(93);
    fputs("partial", g_of.f);
    fflush(g_of.f);
}
static void exporting(void) { export_open(); }
static void exporting_after_ckpt(void) {
    het_interrupt_checkpoint(g_ckpt, 2, 1);
    export_open();
}
static void export_renamed(void) { /* the signal lands right after the rename */
    export_open();
    fclose(g_of.f);
    het_interrupt_output_renaming();
    rename(g_out_tmp, g_out);
}
static void exported(void) {
    export_open();
    if (het_outfile_commit(&g_of) != HET_OK) _exit(92);
}
static void export_given_up(void) {
    export_open();
    het_outfile_abort(&g_of);
}

static void leaving(void) { het_interrupt_leaving(5); } /* ending anyway: quiet, status 5 */

/* Rank 0 of 4: rank 1 is gone, rank 2 alive (this process), rank 3 on another host. */
static void peers(int left1) {
    static unsigned char left[4];
    int pids[4] = {(int)getpid(), g_dead, (int)getpid(), 1};
    unsigned char local[4] = {1, 1, 1, 0};
    left[1] = (unsigned char)left1;
    if (het_interrupt_peers(0, 4, pids, local) != HET_OK) _exit(94);
    het_interrupt_shared(left);
}
static void peer_lost(void) { peers(0); }
static void peer_left(void) { peers(1); } /* it ended on its own: not lost */

typedef struct tcase {
    const char *name;
    void (*setup)(void);
    int sig, rank;
    const char *line; /* expected stderr; NULL: empty */
    int tmp_left, ckpt_left;
    int out_left; /* the export in place (its temp file must be gone in every case) */
} tcase;

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/het_interrupt_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_ckpt, sizeof g_ckpt, "%s/run.ckpt", g_dir);
    snprintf(g_tmp, sizeof g_tmp, "%s.tmp", g_ckpt);
    snprintf(g_err, sizeof g_err, "%s/err", g_dir);
    snprintf(g_out, sizeof g_out, "%s/net.onnx", g_dir);
    snprintf(g_out_tmp, sizeof g_out_tmp, "%s.tmp", g_out);
    char e1[256], e2[512];
    snprintf(e1, sizeof e1, "hetrain: interrupted (ONNX export %s not written)\n", g_out);
    snprintf(e2, sizeof e2, "hetrain: interrupted (ONNX export %s not written; checkpoint %s: "
             "epoch 2)\n", g_out, g_ckpt);
    char l1[256], l2[256], l3[256], l4[256];
    snprintf(l1, sizeof l1, "hetrain: interrupted (checkpoint %s: epoch 1)\n", g_ckpt);
    snprintf(l2, sizeof l2, "hetrain: interrupted (checkpoint %s: epoch 2)\n", g_ckpt);
    snprintf(l3, sizeof l3, "hetrain: interrupted (checkpoint %s: epoch 3)\n", g_ckpt);
    snprintf(l4, sizeof l4, "hetrain: interrupted (checkpoint %s: epoch 4)\n", g_ckpt);
    fflush(NULL);
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    g_dead = (int)dead;
    char lost[256];
    snprintf(lost, sizeof lost, "hetrain: rank 1 (pid %d) is gone; job ended by the launcher "
             "(1 rank on another host not checked)\n", g_dead);
    const tcase cases[] = {
        {"no checkpoint, SIGINT", nothing, SIGINT, 0,
         "hetrain: interrupted (no checkpoint written)\n", 0, 0, 0},
        {"no checkpoint, SIGTERM", nothing, SIGTERM, 0,
         "hetrain: interrupted (no checkpoint written)\n", 0, 0, 0},
        {"first write", writing_first, SIGINT, 0, "hetrain: interrupted (no checkpoint "
         "written)\n", 0, 0, 0},
        {"later write", writing_later, SIGTERM, 0, l2, 0, 0, 0},
        {"after rename", renamed, SIGINT, 0, l3, 0, 1, 0},
        {"before rename", before_rename, SIGTERM, 0, l2, 0, 0, 0},
        {"committed", committed, SIGINT, 0, l4, 0, 1, 0},
        {"aborted", aborted, SIGTERM, 0, l2, 0, 0, 0},
        {"rank 1 says nothing", writing_later, SIGTERM, 1, NULL, 0, 0, 0},
        {"ending anyway", leaving, SIGTERM, 0, NULL, 0, 0, 0},
        {"a rank lost", peer_lost, SIGTERM, 0, lost, 0, 0, 0},
        {"a rank that left", peer_left, SIGTERM, 0, "hetrain: interrupted (no checkpoint "
         "written)\n", 0, 0, 0},
        {"export being written", exporting, SIGTERM, 0, e1, 0, 0, 0},
        {"export after a checkpoint", exporting_after_ckpt, SIGINT, 0, e2, 0, 0, 0},
        {"export renamed", export_renamed, SIGTERM, 0, "hetrain: interrupted (no checkpoint "
         "written)\n", 0, 0, 1},
        {"export written", exported, SIGINT, 0, "hetrain: interrupted (no checkpoint "
         "written)\n", 0, 0, 1},
        {"export given up", export_given_up, SIGTERM, 0, "hetrain: interrupted (no checkpoint "
         "written)\n", 0, 0, 0},
        {"export, rank 1", exporting, SIGTERM, 1, NULL, 0, 0, 0},
    };
    char out[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const tcase *c = &cases[i];
        remove(g_ckpt);
        remove(g_tmp);
        remove(g_out);
        remove(g_out_tmp);
        int code = run_child(c->setup, c->sig, c->rank, out, sizeof out);
        int want_code = c->setup == leaving ? 5 : 128 + c->sig;
        CHECK(code == want_code, "%s: exit status %d, expected %d", c->name, code, want_code);
        const char *want = c->line ? c->line : "";
        CHECK(strcmp(out, want) == 0, "%s: stderr '%s', expected '%s'", c->name, out, want);
        CHECK(exists(g_tmp) == c->tmp_left, "%s: temp file %s", c->name,
              exists(g_tmp) ? "left behind" : "missing");
        CHECK(exists(g_ckpt) == c->ckpt_left, "%s: checkpoint %s", c->name,
              exists(g_ckpt) ? "present" : "missing");
        CHECK(!exists(g_out_tmp), "%s: the export's temp file left behind", c->name);
        CHECK(exists(g_out) == c->out_left, "%s: export %s", c->name,
              exists(g_out) ? "present" : "missing");
    }
    remove(g_ckpt);
    remove(g_tmp);
    remove(g_out);
    remove(g_out_tmp);
    remove(g_err);
    rmdir(g_dir);
    return het_test_finish("test_interrupt");
}

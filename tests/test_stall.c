/* The stall inspector (src/comm/stall.c). One rank (CTest runs it as a singleton): numbering
 * per communicator, the inspector stays off, the poll loop completes a collective. Three ranks
 * (tests/test_stall_mpi.sh runs mpirun -np 3): rank 1 joins all-reduce #2 of world 3 s late
 * while rank 2 waits in all-reduce #1 of another communicator (posted after its world #2, so
 * nothing deadlocks); with --stall-warn 2, rank 0 must print exactly one line at 2 s naming
 * rank 1 as not arrived and rank 2 as waiting elsewhere, and every rank's sum must be right.
 * Then a chain across communicators of 2: rank 0 waits in a sum over {0, 1}, rank 1 first in
 * one over {1, 2}, which rank 2 joins 3 s late: rank 0 never shares a collective with rank 2,
 * and its line must still name rank 2 as not arrived where rank 1 waits. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hetrain/comm.h"
#include "test.h"

static int g_rank, g_size;

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Non-blocking sum of one int on comm: post it, numbered. */
static long long post_sum(MPI_Comm comm, int *v, MPI_Request *req) {
    long long seq = het_stall_post(comm);
    MPI_Iallreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_SUM, comm, req);
    return seq;
}

static void one_rank(void) {
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    long long a1 = het_stall_post(a), b1 = het_stall_post(b), a2 = het_stall_post(a);
    CHECK(a2 == a1 + 1 && b1 == 1, "numbering per communicator: a %lld then %lld, b %lld", a1,
          a2, b1);
    CHECK(het_stall_start(MPI_COMM_WORLD, 60, 0) == HET_OK, "%s", het_error_msg());
    CHECK(!het_stall_on(), "one rank: the inspector is on");
    CHECK(het_stall_start(MPI_COMM_WORLD, -1, 0) == HET_EINVAL, "negative --stall-warn accepted");
    int v = 5;
    MPI_Request req;
    long long seq = post_sum(a, &v, &req);
    CHECK(het_stall_wait(a, seq, "allreduce", 1, &req) == MPI_SUCCESS && v == 5, "sum %d", v);
    het_stall_stop();
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
}

/* Rank 0: its stderr into a new file (its name into path), to read its stall line back;
 * returns the saved stderr (-1 on other ranks). */
static int capture_start(char *path) {
    if (g_rank != 0) return -1;
    int fd = mkstemp(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    close(fd);
    return saved;
}

/* Rank 0: stderr back, what was written since capture_start into text (n bytes), the file
 * removed. */
static void capture_end(int saved, const char *path, char *text, size_t n) {
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(text, 1, n - 1, f) : 0;
    text[got] = '\0';
    if (f) fclose(f);
    remove(path);
}

/* Started silent (--p2p-model arbiter with --stall-warn 0): on, so collectives are polled, but
 * modeled as the blocking calls, and no line however long a rank waits (rank 1 comes 1.5 s late;
 * the warning's own start, below, would have spoken at 1 s). */
static void silent(void) {
    CHECK(het_stall_blocking_model(), "the inspector off: not the blocking calls' models");
    CHECK(het_stall_start_silent(MPI_COMM_WORLD) == HET_OK, "%s", het_error_msg());
    CHECK(het_stall_on() && het_stall_blocking_model(), "silent: on %d, blocking models %d",
          het_stall_on(), het_stall_blocking_model());
    char path[64] = "/tmp/het_stall_XXXXXX";
    int saved = capture_start(path), v = g_rank + 1;
    if (g_rank == 1) sleep_s(1.5);
    MPI_Request req;
    long long seq = post_sum(MPI_COMM_WORLD, &v, &req);
    CHECK(het_stall_wait(MPI_COMM_WORLD, seq, "allreduce", 1, &req) == MPI_SUCCESS && v == 6,
          "silent: sum %d", v);
    if (g_rank == 0) {
        char text[1024];
        capture_end(saved, path, text, sizeof text);
        CHECK(text[0] == '\0', "silent, rank 0 printed '%s'", text);
    }
    het_stall_stop();
    CHECK(het_stall_start(MPI_COMM_WORLD, 1, 0) == HET_OK && !het_stall_blocking_model(),
          "with warnings: the blocking calls' models");
    het_stall_stop();
    CHECK(!het_stall_on() && het_stall_blocking_model(), "stopped: on %d", het_stall_on());
}

static void three_ranks(void) {
    MPI_Comm other;
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    CHECK(het_stall_start(MPI_COMM_WORLD, 2, 0) == HET_OK, "%s", het_error_msg());
    CHECK(het_stall_on(), "the inspector is off");
    het_stall_where("test", 1, 7);
    char path[64] = "/tmp/het_stall_XXXXXX";
    int saved = capture_start(path);
    int w = g_rank + 1, o = 10 * (g_rank + 1), first = 1;
    MPI_Request rw, ro;
    /* world #1: everybody in step */
    long long s1 = post_sum(MPI_COMM_WORLD, &first, &rw);
    CHECK(het_stall_wait(MPI_COMM_WORLD, s1, "allreduce", 1, &rw) == MPI_SUCCESS && first == 3,
          "world #1: %d", first);
    if (g_rank == 1) sleep_s(3.0);
    double t0 = het_now();
    long long sw = post_sum(MPI_COMM_WORLD, &w, &rw);
    CHECK(sw == s1 + 1, "rank %d: world collective #%lld, expected #%lld", g_rank, sw, s1 + 1);
    if (g_rank == 2) { /* waits in the other communicator first */
        long long so = post_sum(other, &o, &ro);
        CHECK(het_stall_wait(other, so, "allreduce", 1, &ro) == MPI_SUCCESS, "other");
        CHECK(het_stall_wait(MPI_COMM_WORLD, sw, "allreduce", 1, &rw) == MPI_SUCCESS, "world");
    } else {
        CHECK(het_stall_wait(MPI_COMM_WORLD, sw, "allreduce", 1, &rw) == MPI_SUCCESS, "world");
        long long so = post_sum(other, &o, &ro);
        CHECK(het_stall_wait(other, so, "allreduce", 1, &ro) == MPI_SUCCESS, "other");
    }
    double waited = het_now() - t0;
    CHECK(w == 6 && o == 60, "rank %d: sums %d and %d, expected 6 and 60", g_rank, w, o);
    if (g_rank == 0) {
        char text[2048];
        capture_end(saved, path, text, sizeof text);
        char want[256];
        snprintf(want, sizeof want, "hetrain: stall: rank 0 has waited 2 s in allreduce #%lld "
                 "(test, epoch 1 step 7); not arrived: rank 1; elsewhere: rank 2 in allreduce "
                 "#1 (test, epoch 1 step 7)\n", sw);
        CHECK(strcmp(text, want) == 0, "stall line:\n  got  '%s'\n  want '%s'", text, want);
        CHECK(waited > 2.5 && waited < 6.0, "rank 0 waited %.2f s for rank 1 (3 s late)",
              waited);
    }
    het_stall_stop();
    CHECK(!het_stall_on(), "stopped, still on");
    MPI_Comm_free(&other);
}

/* A communicator of the two world ranks a and b (MPI_COMM_NULL on the third). Collective. */
static MPI_Comm pair(int a, int b) {
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, g_rank == a || g_rank == b ? 0 : MPI_UNDEFINED, g_rank, &c);
    return c;
}

static void chain(void) {
    MPI_Comm a = pair(0, 1), b = pair(1, 2);
    CHECK(het_stall_start(MPI_COMM_WORLD, 2, 0) == HET_OK, "%s", het_error_msg());
    het_stall_where("test", 1, 8);
    char path[64] = "/tmp/het_stall_XXXXXX";
    int saved = capture_start(path);
    int va = 1, vb = 10;
    MPI_Request req;
    if (g_rank == 2) sleep_s(3.0);
    if (g_rank >= 1) { /* rank 1 and 2: the sum over {1, 2} first */
        long long sb = post_sum(b, &vb, &req);
        CHECK(het_stall_wait(b, sb, "allreduce", 1, &req) == MPI_SUCCESS && vb == 20,
              "rank %d: {1, 2} sum %d, expected 20", g_rank, vb);
    }
    if (g_rank <= 1) {
        long long sa = post_sum(a, &va, &req);
        CHECK(het_stall_wait(a, sa, "allreduce", 1, &req) == MPI_SUCCESS && va == 2,
              "rank %d: {0, 1} sum %d, expected 2", g_rank, va);
    }
    if (g_rank == 0) {
        char text[2048];
        capture_end(saved, path, text, sizeof text);
        const char *want = "hetrain: stall: rank 0 has waited 2 s in allreduce #1 of ranks 0, 1 "
                           "(test, epoch 1 step 8); not arrived: rank 2 (where rank 1 waits); "
                           "elsewhere: rank 1 in allreduce #1 of ranks 1, 2 (test, epoch 1 step "
                           "8)\n";
        CHECK(strcmp(text, want) == 0, "chain: stall line:\n  got  '%s'\n  want '%s'", text,
              want);
    }
    het_stall_stop();
    if (a != MPI_COMM_NULL) MPI_Comm_free(&a);
    if (b != MPI_COMM_NULL) MPI_Comm_free(&b);
}

int main(int argc, char **argv) {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &(int){0});
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (g_size == 1) one_rank();
    else if (g_size == 3) silent(), three_ranks(), chain();
    else CHECK(0, "run with 1 or 3 ranks, not %d", g_size);
    int bad = het_test_failures;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) {
        char name[64];
        snprintf(name, sizeof name, "test_stall (%d rank%s)", g_size, g_size > 1 ? "s" : "");
        het_test_failures = bad;
        het_test_finish(name);
    }
    MPI_Finalize();
    return bad ? 1 : 0;
}

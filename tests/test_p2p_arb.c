/* Point-to-point messages carried by the arbiter (--p2p-model arbiter: comm/p2p_arb.c,
 * comm/arb_svc.c, emul/arbiter.c) under mpirun with 4 ranks on 2 nodes
 * (tests/test_p2p_arb_mpi.sh), virtual clock, hand-derived arrivals, latency L = 1 ms, 1 MB/s
 * between nodes, messages of 100 kB (W = 0.1 s on the wire):
 * - a node's two ranks share its way out: ranks 0 and 1 send to ranks 2 and 3 at 0 s, both
 *   arrive at L + 2 W (the local rules, for contrast: L + W, each sender's own queue);
 * - cross-traffic: rank 0 to rank 2 and rank 3 to rank 1 at once, each takes 0.05 of the
 *   other's way back: L + 1.05 W;
 * - a receive from any sender: rank 2 takes from ranks 0 and 1 (other node, at 0 s: both at
 *   L + 2 W) and rank 3 (its node, at 0.15 s: 0.15 s + the node link's time): rank 3's first,
 *   then rank 0's and rank 1's (the same time: by rank), whatever order they reach MPI in;
 * - a send's wait returns at once (its receiver posts its receive 50 ms later in wall time);
 * - the weights: every payload arrives intact.
 * As a singleton (ctest's own run): no arbiter on one rank. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/internal.h"
#include "emul/emul.h"
#include "test.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }

enum { B = 100000 };
static const double L = 1e-3, BW = 1e6, W = B / 1e6;
static int g_rank, g_size;
static het_lane g_lane;

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b)); }

typedef struct env {
    het_topo t;
    het_comm *c;
} env;

static int env_open(env *e, int arbiter, int cross) {
    het_clock_use(HET_CLOCK_VIRTUAL);
    g_lane = HET_LANE_START;
    het_lane_rewind(&g_lane, 0.0);
    het_netem ne = {.lat_s = L, .bw_bytes_per_s = BW, .node_lat_s = 1e-6,
                    .node_bw_bytes_per_s = 10e9, .crosstraffic = cross, .arbiter = arbiter};
    e->c = NULL;
    if (het_topo_init(&e->t, MPI_COMM_WORLD, 2) != HET_OK) return 0;
    if (het_comm_create(&e->c, &e->t, ne) != HET_OK) {
        het_topo_free(&e->t);
        return 0;
    }
    het_comm_set_lane(e->c, &g_lane);
    return 1;
}

static void env_close(env *e) {
    het_comm_free(e->c);
    het_topo_free(&e->t);
    het_clock_use(HET_CLOCK_WALL);
}

static void fill(unsigned char *b, int seed) {
    for (int i = 0; i < B; i++) b[i] = (unsigned char)(i * 7 + seed);
}

static int intact(const unsigned char *b, int seed) {
    for (int i = 0; i < B; i++)
        if (b[i] != (unsigned char)(i * 7 + seed)) return 0;
    return 1;
}

/* from -> to at 0 s on every rank pair given (to[r] < 0: none); each receiver checks want. */
static void pairs(int arbiter, int cross, const int *to, double want, const char *what) {
    env e;
    if (!env_open(&e, arbiter, cross)) {
        CHECK(0, "%s: open: %s", what, het_error_msg());
        return;
    }
    static unsigned char out[B], in[B];
    fill(out, g_rank);
    het_msg s, r;
    int from = -1;
    for (int k = 0; k < g_size; k++)
        if (to[k] == g_rank) from = k;
    if (to[g_rank] >= 0)
        het_comm_isend(e.c, HET_COMM_WORLD, to[g_rank], 1, out, B, &s);
    if (from >= 0) {
        het_comm_irecv(e.c, HET_COMM_WORLD, from, 1, in, B, &r);
        CHECK(het_comm_msg_wait(e.c, &r) == HET_OK, "%s: wait", what);
        CHECK(near(r.deliver, want) && near(het_lane_now(&g_lane), want) && intact(in, from),
              "%s: rank %d got rank %d's message at %.9g s (clock %.9g), expected %.9g", what,
              g_rank, from, r.deliver, het_lane_now(&g_lane), want);
    }
    if (to[g_rank] >= 0) CHECK(het_comm_msg_wait(e.c, &s) == HET_OK, "%s: send", what);
    env_close(&e);
}

static void any_source(void) {
    env e;
    if (!env_open(&e, 1, 0)) {
        CHECK(0, "any: open: %s", het_error_msg());
        return;
    }
    static unsigned char out[B], in[3][B];
    fill(out, g_rank);
    het_msg s, r[3];
    if (g_rank == 3) het_lane_advance_to(&g_lane, 0.15);
    if (g_rank != 2) {
        het_comm_isend(e.c, HET_COMM_WORLD, 2, 1, out, B, &s);
        double t0 = het_lane_now(&g_lane);
        het_comm_msg_wait(e.c, &s);
        CHECK(het_lane_now(&g_lane) == t0, "rank %d: a send's wait moved the clock", g_rank);
    } else {
        struct timespec ts = {0, 50000000L}; /* the senders' waits return before this */
        nanosleep(&ts, NULL);
        double want[3] = {0.15 + 1e-6 + B / 10e9, L + 2 * W, L + 2 * W};
        int src[3] = {3, 0, 1};
        for (int i = 0; i < 3; i++) {
            het_comm_irecv(e.c, HET_COMM_WORLD, HET_ANY_SOURCE, 1, in[i], B, &r[i]);
            CHECK(het_comm_msg_wait(e.c, &r[i]) == HET_OK, "any: wait %d", i);
            CHECK(r[i].src == src[i] && near(r[i].deliver, want[i]) && intact(in[i], r[i].src),
                  "any: receive %d took rank %d's at %.9g s, expected rank %d's at %.9g s", i,
                  r[i].src, r[i].deliver, src[i], want[i]);
        }
    }
    env_close(&e);
}

int main(int argc, char **argv) {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &(int){0});
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (!het_test_world_size_ok(g_size)) het_test_failures++;
    else if (g_size == 1) {
        env e;
        if (env_open(&e, 1, 0)) {
            CHECK(!het_comm_arbiter(e.c), "an arbiter on one rank");
            env_close(&e);
        }
    } else if (g_size == 4) {
        het_stall_start(MPI_COMM_WORLD, 60.0, 0.0); /* the arbiter follows its collectives */
        const int up[4] = {2, 3, -1, -1}, opposite[4] = {2, -1, -1, 1};
        pairs(1, 0, up, L + 2 * W, "a node's two ranks, arbiter");
        pairs(0, 0, up, L + W, "a node's two ranks, local rules");
        pairs(1, 1, opposite, L + 1.05 * W, "cross-traffic, arbiter");
        any_source();
        het_stall_stop();
    } else {
        CHECK(0, "run on 1 or 4 ranks, not %d", g_size);
    }
    int failed = het_test_failures;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("test_p2p_arb: %d checks, %d failed (%d ranks)\n", het_test_checks, failed,
               g_size);
    MPI_Finalize();
    return failed ? 1 : 0;
}

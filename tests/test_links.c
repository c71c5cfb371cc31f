/* The network model's sanity counter (src/comm/links.c) against hand-derived numbers, on the
 * virtual clock with latency 1 ms and 100 MB/s between nodes (a message of 4000 bytes: 40 us of
 * wire). Cases: a stream of 4 messages from one rank queues on its way out (busy 160 us, no
 * load above capacity) and a lane's stamped message beside it does not (40 us over capacity,
 * out of node 0 and into node 1; the receiver notes both ends of a message); a node's 2 ranks each sending at once to the other node
 * (the model gives each the whole link: 40 us over capacity on node 0's way out and node 1's
 * way in); an all-reduce over the world with 2 ranks per node (the model charges the node's
 * ranks of one collective together: no load above capacity) and two at once on two groups
 * crossing the same links (each charged as if alone: over capacity all the time they are busy);
 * gradient buckets in flight together queue on the link (each k W after the one before: no
 * load above capacity); a broadcast's tree from root 1 crossing twice in a row; span noted inside
 * het_comm_link_mark / rewind forgotten. An MPI program: CTest runs it as a
 * 1-rank singleton (nothing crosses a node: measured, all 0), test_links_mpi.sh under mpirun
 * with 2 ranks (one per node) and 4 (two per node). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>

#include "comm/internal.h"
#include "emul/emul.h"
#include "test.h"

/* The test's main lane: its comms charge it (het_comm_set_lane); het_clock_use below is
 * followed by its reset to time 0. */
static het_lane g_lane;

const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }

static int g_rank, g_size;
static const het_netem NE = {.lat_s = 1e-3, .bw_bytes_per_s = 100e6};
enum { B = 4000 };
#define WIRE (B / 100e6)

typedef struct env {
    het_topo t;
    het_comm *c;
} env;

static int env_open(env *e, int ranks_per_node) {
    het_clock_use(HET_CLOCK_VIRTUAL);
    g_lane = HET_LANE_START;
    het_lane_rewind(&g_lane, 0.0);
    e->c = NULL;
    if (het_topo_init(&e->t, MPI_COMM_WORLD, ranks_per_node) != HET_OK) return 0;
    if (het_comm_create(&e->c, &e->t, NE) != HET_OK) {
        het_topo_free(&e->t);
        return 0;
    }
    het_comm_set_lane(e->c, &g_lane);
    het_comm_links_begin(e->c);
    return 1;
}

static void env_close(env *e) {
    het_comm_free(e->c);
    het_topo_free(&e->t);
    het_clock_use(HET_CLOCK_WALL);
    g_lane = HET_LANE_START;
}

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(b), 1e-12); }

/* The figures every rank of a node gets, then checked against the expected ones. */
static void expect(env *e, const char *what, double busy_out, double busy_in, double over_out,
                   double over_in, double busy_max, double over_max) {
    het_comm_links l;
    CHECK(het_comm_links_epoch(e->c, &l) == HET_OK, "%s: %s", what, het_error_msg());
    CHECK(l.measured, "%s: not measured", what);
    CHECK(near(l.busy_out, busy_out) && near(l.busy_in, busy_in) && near(l.over_out, over_out) &&
              near(l.over_in, over_in),
          "rank %d: %s: busy out %.9g in %.9g over out %.9g in %.9g, expected %.9g %.9g %.9g "
          "%.9g", g_rank, what, l.busy_out, l.busy_in, l.over_out, l.over_in, busy_out, busy_in,
          over_out, over_in);
    CHECK(near(l.busy_max, busy_max) && near(l.over_max, over_max), "%s: worst link busy %.9g "
          "over %.9g, expected %.9g %.9g", what, l.busy_max, l.over_max, busy_max, over_max);
}

/* Rank 0 sends 4 messages at V = 0 (they queue: [0, 40), [40, 80) ... us) and a lane's at
 * V = 0 (no queue: [0, 40) beside the first); rank 1 receives them at 1 ms + 40, 80, 120, 160 us
 * and 1 ms + 40 us. The epoch: [0, 1.16 ms]. */
static void test_stream(void) {
    if (g_size != 2) return;
    env e;
    CHECK(env_open(&e, 1), "%s", het_error_msg());
    enum { M = 4 };
    static char buf[M + 1][B];
    het_msg m[M + 1];
    size_t mark = het_comm_link_mark(e.c);
    for (int i = 0; i < M && g_rank == 0; i++)
        CHECK(het_comm_isend(e.c, HET_COMM_WORLD, 1, HET_TAG_PARAMS, buf[i], B, &m[i]) == HET_OK,
              "%s", het_error_msg());
    if (g_rank == 0)
        CHECK(het_comm_isend_at(e.c, HET_COMM_WORLD, 1, HET_TAG_GRADS, buf[M], B, 0.0, &m[M]) ==
                  HET_OK, "%s", het_error_msg());
    for (int i = 0; i < M && g_rank == 1; i++)
        CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, 0, HET_TAG_PARAMS, buf[i], B, &m[i]) == HET_OK,
              "%s", het_error_msg());
    if (g_rank == 1)
        CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, 0, HET_TAG_GRADS, buf[M], B, &m[M]) == HET_OK,
              "%s", het_error_msg());
    CHECK(het_comm_msg_waitall(e.c, M + 1, m) == HET_OK, "%s", het_error_msg());
    int want = g_rank == 1 ? M + 1 : 0; /* the receiver notes a message, when it knows its
                                          * arrival */
    CHECK(het_comm_link_mark(e.c) == mark + (size_t)want, "rank %d: stream: %zu spans noted, "
          "expected %d", g_rank, het_comm_link_mark(e.c) - mark, want);
    const double len = 1e-3 + M * WIRE, busy = M * WIRE / len, over = WIRE / len;
    if (g_rank == 0) expect(&e, "stream", busy, 0, over, 0, busy, over);
    else expect(&e, "stream", 0, busy, 0, over, busy, over);
    env_close(&e);
}

/* Nodes of 2: ranks 0 and 1 send 4000 bytes at V = 0 to ranks 2 and 3. */
static void test_uplink(void) {
    if (g_size != 4) return;
    env e;
    CHECK(env_open(&e, 2), "%s", het_error_msg());
    static char buf[B];
    het_msg m;
    int rc = g_rank < 2 ? het_comm_isend(e.c, HET_COMM_WORLD, g_rank + 2, HET_TAG_USER, buf, B, &m)
                        : het_comm_irecv(e.c, HET_COMM_WORLD, g_rank - 2, HET_TAG_USER, buf, B, &m);
    CHECK(rc == HET_OK && het_comm_msg_wait(e.c, &m) == HET_OK, "%s", het_error_msg());
    const double len = 1e-3 + WIRE, share = WIRE / len;
    if (g_rank < 2) expect(&e, "uplink", share, 0, share, 0, share, share);
    else expect(&e, "uplink", 0, share, 0, share, share, share);
    env_close(&e);
}

/* An all-reduce over the world (2 ranks per node: one collective, no load above capacity),
 * then one on each of two groups {0, 2} and {1, 3} at once, each across both nodes alone on
 * its group's link: the node's link carries both, each at the whole bandwidth. */
static void test_collectives(void) {
    if (g_size != 4) return;
    env e;
    CHECK(env_open(&e, 2), "%s", het_error_msg());
    enum { N = 100000 };
    static float x[N];
    CHECK(het_comm_allreduce_sum(e.c, HET_COMM_WORLD, x, N) == HET_OK, "%s", het_error_msg());
    het_comm_links l;
    CHECK(het_comm_links_epoch(e.c, &l) == HET_OK && l.measured, "%s", het_error_msg());
    CHECK(l.busy_out > 0.0 && l.busy_out < 1.0 && near(l.busy_in, l.busy_out) &&
              l.over_out == 0.0 && l.over_in == 0.0,
          "world all-reduce: busy %.9g / %.9g, over %.9g / %.9g: expected busy in (0, 1), no "
          "load above capacity", l.busy_out, l.busy_in, l.over_out, l.over_in);
    het_comm_scope g = HET_COMM_NONE;
    CHECK(het_comm_split(e.c, HET_COMM_WORLD, g_rank % 2, g_rank, &g) == HET_OK, "%s",
          het_error_msg());
    het_lane_rewind(&g_lane, 0.0);
    het_comm_links_begin(e.c);
    het_req r;
    CHECK(het_comm_iallreduce_sum(e.c, g, x, N, &r) == HET_OK && het_comm_wait(e.c, &r) == HET_OK,
          "%s", het_error_msg());
    CHECK(het_comm_links_epoch(e.c, &l) == HET_OK && l.measured, "%s", het_error_msg());
    CHECK(l.busy_out > 0.0 && near(l.over_out, l.busy_out) && near(l.over_in, l.busy_in),
          "two group all-reduces at once: busy %.9g, over %.9g: expected over == busy > 0",
          l.busy_out, l.over_out);
    env_close(&e);
}

/* Gradient buckets: 4 non-blocking all-reduces over the world posted at V = 0 share the link
 * in turn (comm.c: coll_behind): bucket k ends at k W + M (W its wire time, M its model), so
 * the link never carries more than its bandwidth; before, all 4 ended at M, each moving at the
 * whole bandwidth (issue #36: 4 lenet5 buckets in 2.65 ms whose bytes need 2.96 ms). After
 * work charged to no clock (the queue and the clock put back) the next bucket ends at V + M. */
static void test_buckets(void) {
    if (g_size < 2) return;
    env e;
    CHECK(env_open(&e, g_size / 2), "%s", het_error_msg());
    enum { K = 4, N = 25000 };
    static float x[K][N];
    double W, share, M = het_comm_allreduce_model(e.c, HET_COMM_WORLD, N * sizeof(float), 0);
    het_comm_link_model(e.c, HET_COMM_WORLD, N * sizeof(float), HET_LINK_NONBLOCKING, &W, &share);
    CHECK(W > 0.0 && M > W, "bucket model %.9g, wire %.9g", M, W);
    het_req r[K];
    for (int k = 0; k < K; k++)
        CHECK(het_comm_iallreduce_sum(e.c, HET_COMM_WORLD, x[k], N, &r[k]) == HET_OK, "%s",
              het_error_msg());
    for (int k = 0; k < K; k++) {
        CHECK(het_comm_wait(e.c, &r[k]) == HET_OK, "%s", het_error_msg());
        CHECK(near(het_lane_now(&g_lane), k * W + M), "rank %d: bucket %d ends at %.9g, expected "
              "%d W + M = %.9g", g_rank, k, het_lane_now(&g_lane), k, k * W + M);
    }
    het_comm_links l;
    CHECK(het_comm_links_epoch(e.c, &l) == HET_OK && l.measured, "%s", het_error_msg());
    CHECK(l.over_out == 0.0 && l.over_in == 0.0 && l.busy_out > 0.0, "buckets: busy %.9g, over "
          "%.9g / %.9g: expected no load above capacity", l.busy_out, l.over_out, l.over_in);
    /* work charged to no clock (het_step_aside): the queue and the clock put back after a
     * bucket, the next bucket ends as if it had not been */
    double v = het_lane_now(&g_lane);
    het_comm_queue q = het_comm_queue_get(e.c);
    CHECK(het_comm_iallreduce_sum(e.c, HET_COMM_WORLD, x[0], N, &r[0]) == HET_OK &&
              het_comm_wait(e.c, &r[0]) == HET_OK, "%s", het_error_msg());
    het_lane_rewind(&g_lane, v);
    het_comm_queue_set(e.c, q);
    CHECK(het_comm_iallreduce_sum(e.c, HET_COMM_WORLD, x[0], N, &r[0]) == HET_OK &&
              het_comm_wait(e.c, &r[0]) == HET_OK, "%s", het_error_msg());
    CHECK(near(het_lane_now(&g_lane), v + M), "rank %d: after an aside a bucket ends at %.9g, "
          "expected %.9g", g_rank, het_lane_now(&g_lane), v + M);
    env_close(&e);
}

/* One rank: nothing crosses a node; the counter is measured and all 0. */
static void test_alone(void) {
    if (g_size != 1) return;
    env e;
    CHECK(env_open(&e, 1), "%s", het_error_msg());
    float x[4] = {1, 2, 3, 4};
    CHECK(het_comm_allreduce_sum(e.c, HET_COMM_WORLD, x, 4) == HET_OK, "%s", het_error_msg());
    het_comm_link_note(e.c, 0, -1, 0.0, 1.0, 1.0); /* noted, then forgotten by a rewind */
    het_comm_link_rewind(e.c, 0);
    expect(&e, "one rank", 0, 0, 0, 0, 0, 0);
    env_close(&e);
}

/* A broadcast over the world follows the tree MPI runs (4 ranks, 2 per node, 4000 bytes: a
 * binomial tree in Open MPI's rules and MPICH's). MPICH's tree: from root 0 one message crosses
 * (L + W); from root 1 the root sends to ranks 3 and 2, both across (eager: at once, sharing its
 * node's way out, L + 2 W), then rank 3 passes it back to rank 0 (L + W). Open MPI's tree (the
 * highest bit's parent, every child's send posted at once): from root 0, 0 -> 2 and 1 -> 3 cross
 * together (L + 2 W); from root 1 the same as MPICH's. The tree over the nodes charged L + W. */
static void test_bcast_root(void) {
    if (g_size != 4) return;
    env e;
    CHECK(env_open(&e, 2), "%s", het_error_msg());
    static char buf[B];
    het_comm_queue q0 = het_comm_queue_get(e.c);
    for (int root = 0; root < 2; root++) {
        het_lane_rewind(&g_lane, 0.0);
        het_comm_queue_set(e.c, q0); /* not behind the first broadcast */
        CHECK(het_comm_bcast(e.c, HET_COMM_WORLD, buf, B, root) == HET_OK, "%s", het_error_msg());
#if defined(OPEN_MPI)
        double root0 = 1e-3 + 2 * WIRE;
#else
        double root0 = 1e-3 + WIRE;
#endif
        double want = root == 0 ? root0 : (1e-3 + 2 * WIRE) + (1e-3 + WIRE);
        CHECK(near(het_lane_now(&g_lane), want), "broadcast from root %d ended at %.9g s, expected "
              "%.9g s", root, het_lane_now(&g_lane), want);
    }
    env_close(&e);
}

int main(int argc, char **argv) {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &(int){0});
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    test_alone();
    test_stream();
    test_uplink();
    test_buckets();
    test_collectives();
    test_bcast_root();
    int failed = het_test_failures;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("test_links: %d checks, %d failed (%d ranks)\n", het_test_checks, failed, g_size);
    MPI_Finalize();
    return failed ? 1 : 0;
}

/* The virtual clock's arithmetic (emul/clock.c, comm/comm.c) against hand-derived numbers, with
 * synthetic compute: each rank advances its clock by fixed costs (het_lane_advance), as a
 * compute piece would, then communicates. Cases: a straggler (every rank ends at the slowest
 * start + the model; waiting and transfer booked apart), an alternating straggler (the sum of
 * the steps' maxima, where each rank's own start would undercount), a non-blocking all-reduce
 * posted mid-backward that overlaps the rest of backward (charged only what the compute did not
 * hide; a test is not done before the clock reaches the end), a sync waited S steps later
 * (daso's global sync), the node link, a pace under a fixed cost hook (slowdown x cost, no
 * sleep) and the wall clock left alone. An MPI program: CTest runs it as a 1-rank singleton;
 * test_vclock_mpi.sh under mpirun with 2 and 3 ranks (one emulated node per rank). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
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

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-12 * (1.0 + fabs(b)))

/* The modeled all-reduce of `bytes` over the world, one rank per node, Open MPI's non-blocking
 * ring by hand: 2(N-1) latencies + 2(N-1)/N bytes / bw. */
static double ring_by_hand(het_netem ne, double bytes, int n) {
    return n <= 1 ? 0.0 : 2.0 * (n - 1) * ne.lat_s + 2.0 * (n - 1) / n * bytes / ne.bw_bytes_per_s;
}

/* What the comm charges for a blocking all-reduce here: the algorithm this MPI runs for it. */
static double model_blocking(het_netem ne, size_t bytes) {
    int *ids = malloc((size_t)g_size * sizeof *ids);
    for (int i = 0; i < g_size; i++) ids[i] = i;
    het_ar_algo a = het_netem_mpi_allreduce_algo(g_size, bytes, !het_stall_on());
    double m = het_netem_cost_s(ne, het_netem_allreduce_cost(ids, g_size, a), bytes);
    free(ids);
    return m;
}

static void test_straggler(het_comm *c, het_netem ne) {
    float v[256] = {0};
    size_t bytes = sizeof v;
    double M = model_blocking(ne, bytes);
    het_clock_use(HET_CLOCK_VIRTUAL);
    g_lane = HET_LANE_START;
    het_comm_reset_stats(c);
    /* rank r computes 10 ms + r x 5 ms: everyone ends at the last start + M */
    het_lane_advance(&g_lane, 0.010 + 0.005 * g_rank);
    CHECK(het_comm_allreduce_sum(c, HET_COMM_WORLD, v, 256) == HET_OK, "%s", het_error_msg());
    double last = 0.010 + 0.005 * (g_size - 1);
    CHECK(NEAR(het_lane_now(&g_lane), last + M), "rank %d: straggler: V %.9f, expected %.9f",
          g_rank, het_lane_now(&g_lane), last + M);
    het_comm_stats st = het_comm_get_stats(c);
    CHECK(NEAR(st.vwait_s, last - (0.010 + 0.005 * g_rank)) && NEAR(st.vnet_s, M),
          "rank %d: straggler booked wait %.9f net %.9f", g_rank, st.vwait_s, st.vnet_s);
    CHECK(st.delay_s == 0.0, "virtual clock slept %.6f s", st.delay_s);

    /* alternating straggler: step k's late rank is k mod P, 3 ms late; each step ends at its
     * own maximum + M, so the total is K (J + M) on every rank */
    het_clock_use(HET_CLOCK_VIRTUAL);
    g_lane = HET_LANE_START;
    const int K = 6;
    const double J = 0.001, late = 0.003;
    for (int k = 0; k < K; k++) {
        het_lane_advance(&g_lane, J + (k % g_size == g_rank && g_size > 1 ? late : 0.0));
        CHECK(het_comm_allreduce_sum(c, HET_COMM_WORLD, v, 256) == HET_OK, "%s",
              het_error_msg());
    }
    double want = K * (J + (g_size > 1 ? late : 0.0) + M);
    CHECK(NEAR(het_lane_now(&g_lane), want), "rank %d: alternating: V %.9f, expected %.9f", g_rank,
          het_lane_now(&g_lane), want);
}

static void test_overlap(het_comm *c, het_netem ne) {
    static float g[65536];
    size_t bytes = sizeof g;
    double M = g_size > 1 ? ring_by_hand(ne, (double)bytes, g_size) : 0.0;
#if defined(OPEN_MPI)
    if (g_size > 1) { /* the model's non-blocking all-reduce is the ring (libnbc) */
        int *ids = malloc((size_t)g_size * sizeof *ids);
        for (int i = 0; i < g_size; i++) ids[i] = i;
        double m = het_netem_cost_s(ne, het_netem_allreduce_cost(ids, g_size, HET_AR_RING), bytes);
        CHECK(NEAR(m, M), "ring cost %.9f, by hand %.9f", m, M);
        free(ids);
    }
#endif
    int *ids = malloc((size_t)g_size * sizeof *ids);
    for (int i = 0; i < g_size; i++) ids[i] = i;
    M = g_size > 1 ? het_netem_cost_s(ne, het_netem_allreduce_cost(ids, g_size,
                     het_netem_mpi_allreduce_algo(g_size, bytes, 0)), bytes) : 0.0;
    free(ids);
    /* a bucket posted at V = 1 s (the last rank posts at 1 s + 1 ms), then the rest of backward:
     * a short rest (M / 2) leaves M / 2 + 1 ms to wait, a long one (2 M) hides it all */
    for (int longer = 0; longer < 2; longer++) {
        het_clock_use(HET_CLOCK_VIRTUAL);
        g_lane = HET_LANE_START;
        het_comm_reset_stats(c);
        het_lane_advance(&g_lane, 1.0 + (g_rank == g_size - 1 ? 0.001 : 0.0));
        het_req r;
        CHECK(het_comm_iallreduce_sum(c, HET_COMM_WORLD, g, 65536, &r) == HET_OK, "%s",
              het_error_msg());
        double last = 1.0 + (g_size > 1 ? 0.001 : 0.0), end = last + M;
        if (g_size > 1) { /* not done before the clock gets there, whatever MPI says */
            int done = 1;
            MPI_Barrier(MPI_COMM_WORLD); /* every rank has posted */
            for (int i = 0; i < 200; i++) CHECK(het_comm_test(c, &r, &done) == HET_OK, "test");
            CHECK(!done, "rank %d: done at V %.6f before the end %.6f", g_rank,
                  het_lane_now(&g_lane), end);
        }
        double rest = longer ? 2.0 * M + 0.002 : M / 2.0;
        het_lane_advance(&g_lane, rest);
        double before = het_lane_now(&g_lane);
        CHECK(het_comm_wait(c, &r) == HET_OK, "%s", het_error_msg());
        double want = before > end ? before : end;
        CHECK(NEAR(het_lane_now(&g_lane), want), "rank %d: overlap (rest %.6f): V %.9f, expected "
              "%.9f", g_rank, rest, het_lane_now(&g_lane), want);
        het_comm_stats st = het_comm_get_stats(c);
        CHECK(NEAR(st.vwait_s + st.vnet_s, want - before), "rank %d: booked %.9f, moved %.9f",
              g_rank, st.vwait_s + st.vnet_s, want - before);
        if (longer) CHECK(st.vnet_s == 0.0 && st.vwait_s == 0.0, "hidden transfer charged");
    }

    /* a sync posted at batch 0 and merged S = 3 batches of 1 ms later (daso's global sync):
     * ends at max(last post + M, 3 ms of compute) */
    het_clock_use(HET_CLOCK_VIRTUAL);
    g_lane = HET_LANE_START;
    het_req r;
    CHECK(het_comm_iallreduce_sum(c, HET_COMM_WORLD, g, 65536, &r) == HET_OK, "%s",
          het_error_msg());
    for (int b = 0; b < 3; b++) {
        het_lane_advance(&g_lane, 0.001);
        int done = 0;
        CHECK(het_comm_test(c, &r, &done) == HET_OK, "test");
        if (done)
            CHECK(het_lane_now(&g_lane) >= M - 1e-12, "done at V %.6f, end %.6f",
                  het_lane_now(&g_lane), M);
    }
    CHECK(het_comm_wait(c, &r) == HET_OK, "%s", het_error_msg());
    double want = M > 0.003 ? M : 0.003;
    CHECK(NEAR(het_lane_now(&g_lane), want), "rank %d: S-later sync: V %.9f, expected %.9f", g_rank,
          het_lane_now(&g_lane), want);
}

/* One node of every rank: the node link's ring, 2(P-1) (lat + bytes / P / bw). */
static void test_node_link(void) {
    het_topo t;
    CHECK(het_topo_init(&t, MPI_COMM_WORLD, g_size) == HET_OK, "%s", het_error_msg());
    het_netem ne = {.node_lat_s = 2e-6, .node_bw_bytes_per_s = 1e9};
    het_clock_use(HET_CLOCK_VIRTUAL);
    g_lane = HET_LANE_START;
    het_comm *c;
    CHECK(het_comm_create(&c, &t, ne) == HET_OK, "%s", het_error_msg());
    het_comm_set_lane(c, &g_lane);
    static float g[65536];
    het_req r;
    CHECK(het_comm_iallreduce_sum(c, HET_COMM_NODE, g, 65536, &r) == HET_OK &&
          het_comm_wait(c, &r) == HET_OK, "%s", het_error_msg());
    double p = g_size, want = g_size > 1 ? 2.0 * (p - 1) * 2e-6 + 2.0 * (p - 1) / p * 262144 / 1e9
                                         : 0.0;
#if defined(OPEN_MPI)
    CHECK(NEAR(het_lane_now(&g_lane), want), "rank %d: node ring V %.9f, by hand %.9f", g_rank,
          het_lane_now(&g_lane), want);
#else
    CHECK(het_lane_now(&g_lane) > 0.0 || g_size == 1, "node link free");
    (void)want;
#endif
    /* the wall clock: no virtual bookings, node links free */
    het_clock_use(HET_CLOCK_WALL);
    g_lane = HET_LANE_START;
    het_comm_reset_stats(c);
    CHECK(het_comm_allreduce_sum(c, HET_COMM_NODE, g, 16) == HET_OK, "%s", het_error_msg());
    het_comm_stats st = het_comm_get_stats(c);
    CHECK(st.vwait_s == 0.0 && st.vnet_s == 0.0 && st.delay_s == 0.0, "wall clock booked "
          "virtual time (%g, %g) or slept %g", st.vwait_s, st.vnet_s, st.delay_s);
    het_comm_free(c);
    het_topo_free(&t);
}

static double fixed_cost(void *user, double measured) {
    (void)measured;
    return *(const double *)user;
}

/* A pace on the virtual clock charges cost x factor and sleeps nothing. */
static void test_pace(void) {
    het_clock_use(HET_CLOCK_VIRTUAL);
    g_lane = HET_LANE_START;
    het_pace p;
    het_pace_init(&p, &g_lane, 3.0);
    double cost = 0.25;
    p.cost = fixed_cost;
    p.cost_user = &cost;
    double w0 = het_now();
    het_pace_begin(&p);
    double s = het_pace_mark(&p);
    CHECK(NEAR(s, 0.75) && NEAR(het_lane_now(&g_lane), 0.75) && NEAR(p.mid, 0.25) &&
          NEAR(p.compute_s, 0.75), "pace: stretched %.6f V %.6f mid %.6f", s, het_lane_now(&g_lane),
          p.mid);
    CHECK(het_now() - w0 < 0.2 && p.slept_s == 0.0, "the virtual pace slept");
    het_pace_skip(&p); /* communication: not charged */
    CHECK(NEAR(het_lane_now(&g_lane), 0.75), "skip moved the clock");
    /* measured: the CPU time of a busy loop, never less than 0, far below a sleep's wall */
    p.cost = NULL;
    het_pace_begin(&p);
    volatile double x = 0;
    for (int i = 0; i < 2000000; i++) x += i * 1e-9;
    double m = het_pace_mark(&p);
    CHECK(m > 0.0 && m < 10.0, "measured cost %.6f", m);
    het_clock_use(HET_CLOCK_WALL);
    g_lane = HET_LANE_START;
}

int main(int argc, char **argv) {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &(int){0});
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (!het_test_world_size_ok(g_size)) MPI_Abort(MPI_COMM_WORLD, 1);
    het_topo t;
    CHECK(het_topo_init(&t, MPI_COMM_WORLD, 1) == HET_OK, "%s", het_error_msg());
    het_netem ne = {.lat_s = 1e-3, .bw_bytes_per_s = 100e6}; /* 1 ms, 100 MB/s between nodes */
    het_clock_use(HET_CLOCK_VIRTUAL); /* before create: it gathers every rank's node */
    g_lane = HET_LANE_START;
    het_comm *c = NULL;
    CHECK(het_comm_create(&c, &t, ne) == HET_OK, "%s", het_error_msg());
    het_comm_set_lane(c, &g_lane);
    if (c) {
        test_straggler(c, ne);
        test_overlap(c, ne);
        het_comm_free(c);
    }
    het_topo_free(&t);
    test_node_link();
    test_pace();
    int failed = het_test_failures;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("test_vclock: %d checks, %d failed (%d ranks)\n", het_test_checks, failed, g_size);
    MPI_Finalize();
    return failed ? 1 : 0;
}

/* The two-level all-reduce (comm/hier.c) against the flat one and against the exact sum, on
 * every placement the ranks allow: one node, nodes of 2 consecutive ranks, 2 interleaved nodes
 * (node = rank % 2, het_topo_init_nodes), uneven nodes (3 ranks as 2 + 1, 4 as 3 + 1), one
 * rank per node; bucketed (ranges marked ready backwards and forwards) and one bucket; small
 * chunks (more requests than the inline ones); the blocking call; byte counters by locality;
 * the emulated delay; the choice of AUTO. An MPI program: CTest runs it as a 1-rank singleton,
 * test_hier_mpi.sh under mpirun with 2, 3 and 4 ranks. The failure count is summed over ranks.
 *
 * Bound: each order of adding P floats is within (P-1) u sum_r |x_r| of the exact sum
 * (u = 2^-24), so every result is checked against the exact (double) sum with that bound, and
 * two-level vs flat with twice it; with 2 ranks (a + b == b + a) they are bitwise equal. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "comm/internal.h"
#include "test.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }

static int g_rank, g_size;

#define N_RANGES 7
/* layer sizes in buffer order; one empty (a layer without parameters) */
static const size_t k_sizes[N_RANGES] = {1500, 37, 0, 2600, 11, 4000, 853};

/* Rank r's data of step `seed`: normal values of mixed scales. */
static void fill(float *x, size_t n, uint64_t seed, int r) {
    het_rng g;
    het_rng_seed2(&g, seed, (uint64_t)r);
    for (size_t i = 0; i < n; i++) x[i] = het_rng_normal(&g) * (float)(1 + (i % 7) * 30);
}

/* The exact sum over ranks and the sum of magnitudes, in double. */
static void exact(double *sum, double *mag, float *tmp, size_t n, uint64_t seed) {
    memset(sum, 0, n * sizeof *sum);
    memset(mag, 0, n * sizeof *mag);
    for (int r = 0; r < g_size; r++) {
        fill(tmp, n, seed, r);
        for (size_t i = 0; i < n; i++) {
            sum[i] += tmp[i];
            mag[i] += fabs((double)tmp[i]);
        }
    }
}

/* got within (P-1) u sum|x| of the exact sum; every rank holds the same bits. */
static void check_sum(const float *got, const double *sum, const double *mag, size_t n,
                      const char *what) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - sum[i]), lim = (g_size - 1) * 0x1p-24 * mag[i];
        if (e > lim && e / (0x1p-24 * mag[i]) > worst) worst = e / (0x1p-24 * mag[i]);
    }
    CHECK(worst == 0.0, "rank %d: %s: error %.3g u sum|x| > %d", g_rank, what, worst,
          g_size - 1);
    unsigned crc = het_crc32(0, got, n * sizeof *got), lo = crc, hi = crc;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UNSIGNED, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UNSIGNED, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lo == hi, "%s: ranks hold different sums", what);
}

/* hier vs flat: bitwise on 2 ranks, else within 2 (P-1) u sum|x|. */
static void check_pair(const float *h, const float *f, const double *mag, size_t n,
                       const char *what) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)h[i] - f[i]);
        if (g_size <= 2 ? memcmp(&h[i], &f[i], sizeof(float)) != 0
                        : d > 2.0 * (g_size - 1) * 0x1p-24 * mag[i])
            bad++;
    }
    CHECK(bad == 0, "rank %d: %s: %zu of %zu elements differ beyond the bound", g_rank, what,
          bad, n);
}

/* Marks every range ready (backwards as backward does, or forwards). */
static int mark_all(het_buckets *b, const size_t *off, int backwards) {
    int rc = HET_OK;
    for (int k = 0; k < N_RANGES && rc == HET_OK; k++) {
        int i = backwards ? N_RANGES - 1 - k : k;
        rc = het_buckets_ready(b, off[i], k_sizes[i]);
    }
    return rc;
}

/* One step of buckets of `bucket_bytes` with algorithm a on rank data of `seed`. */
static void run_buckets(het_comm *c, het_allreduce_algo a, size_t bucket_bytes, float *g,
                        const size_t *off, size_t n, uint64_t seed, int backwards) {
    het_buckets *b = NULL;
    CHECK(het_buckets_create(&b, c, HET_COMM_WORLD, g, n, off, N_RANGES, bucket_bytes, NULL,
                             0) == HET_OK, "create: %s", het_error_msg());
    if (!b) return;
    CHECK(het_buckets_set_algo(b, a) == HET_OK, "set algo: %s", het_error_msg());
    for (int step = 0; step < 2; step++) { /* the second step reuses the buckets */
        fill(g, n, seed, g_rank);
        CHECK(mark_all(b, off, backwards) == HET_OK, "ready: %s", het_error_msg());
        CHECK(het_buckets_wait(b) == HET_OK, "wait: %s", het_error_msg());
    }
    het_buckets_free(b);
}

/* Flat and two-level, bucketed and not, on topology t; `name` says the placement. */
static void test_placement(const het_topo *t, const char *name) {
    het_comm *c = NULL;
    het_netem off_ne = {0};
    CHECK(het_comm_create(&c, t, off_ne) == HET_OK, "create: %s", het_error_msg());
    if (!c) return;
    size_t off[N_RANGES], n = 0;
    for (int i = 0; i < N_RANGES; i++) {
        off[i] = n;
        n += k_sizes[i];
    }
    float *h = malloc(n * sizeof *h), *f = malloc(n * sizeof *f), *tmp = malloc(n * sizeof *f);
    double *sum = malloc(n * sizeof *sum), *mag = malloc(n * sizeof *mag);
    static const size_t buckets[] = {0, 3000 * sizeof(float), 1};
    char what[160];
    for (int chunk = 0; chunk < 2; chunk++) {
        het_comm_set_chunk(c, chunk ? 700 : 0); /* 700: up to 6 requests a stage */
        for (int bi = 0; bi < 3; bi++)
            for (int backwards = 1; backwards >= 0; backwards--) {
                uint64_t seed = 1000 + (uint64_t)(chunk * 10 + bi * 2 + backwards);
                exact(sum, mag, tmp, n, seed);
                run_buckets(c, HET_ALLREDUCE_FLAT, buckets[bi], f, off, n, seed, backwards);
                run_buckets(c, HET_ALLREDUCE_HIER, buckets[bi], h, off, n, seed, backwards);
                snprintf(what, sizeof what, "%s, bucket %zu B, chunk %d, %s", name,
                         buckets[bi], chunk ? 700 : 0, backwards ? "backwards" : "forwards");
                check_sum(h, sum, mag, n, what);
                check_sum(f, sum, mag, n, what);
                check_pair(h, f, mag, n, what);
            }
    }
    /* the blocking call */
    het_comm_set_chunk(c, 0);
    exact(sum, mag, tmp, n, 77);
    fill(h, n, 77, g_rank);
    CHECK(het_comm_allreduce_sum_hier(c, h, n) == HET_OK, "blocking: %s", het_error_msg());
    snprintf(what, sizeof what, "%s, blocking", name);
    check_sum(h, sum, mag, n, what);
    CHECK(het_comm_allreduce_sum_hier(c, NULL, 0) == HET_OK, "n = 0: %s", het_error_msg());
    CHECK(het_comm_allreduce_sum_hier(c, NULL, 3) == HET_EINVAL, "NULL buffer accepted");

    /* bytes by locality: node stages on every rank of a node of several, the leaders' stage
     * on the leaders of several nodes; flat: all cross when several nodes */
    uint64_t B = (uint64_t)n * sizeof(float);
    het_comm_reset_stats(c);
    run_buckets(c, HET_ALLREDUCE_HIER, 0, h, off, n, 5, 1);
    het_comm_stats s = het_comm_get_stats(c);
    uint64_t want_node = t->local_size > 1 ? 2 * 2 * B : 0;
    uint64_t want_cross = t->local_rank == 0 && t->n_nodes > 1 ? 2 * B : 0;
    CHECK(s.bytes_node == want_node && s.bytes_cross == want_cross &&
              s.bytes == want_node + want_cross,
          "rank %d: %s: hier bytes node %llu cross %llu, expected %llu %llu", g_rank, name,
          (unsigned long long)s.bytes_node, (unsigned long long)s.bytes_cross,
          (unsigned long long)want_node, (unsigned long long)want_cross);
    het_comm_reset_stats(c);
    run_buckets(c, HET_ALLREDUCE_FLAT, 0, f, off, n, 5, 1);
    s = het_comm_get_stats(c);
    CHECK(s.bytes == 2 * B && s.bytes_cross == (t->n_nodes > 1 ? 2 * B : 0),
          "rank %d: %s: flat bytes %llu cross %llu", g_rank, name,
          (unsigned long long)s.bytes, (unsigned long long)s.bytes_cross);
    free(h);
    free(f);
    free(tmp);
    free(sum);
    free(mag);
    het_comm_free(c);
}

/* AUTO, refusals, and the emulated delay of the leaders' stage. */
static void test_choice_and_delay(const het_topo *t) {
    het_comm *c = NULL;
    het_netem ne = {.lat_s = 10e-3}; /* 10 ms per message (a 2-node ring is 20 ms): far above the
                                  * real MPI time of 64 floats, even on loaded cores */
    CHECK(het_comm_create(&c, t, ne) == HET_OK, "create: %s", het_error_msg());
    if (!c) return;
    het_allreduce_algo want = t->n_nodes > 1 ? HET_ALLREDUCE_HIER : HET_ALLREDUCE_FLAT;
    CHECK(het_comm_allreduce_algo(c, HET_ALLREDUCE_AUTO) == want, "auto on %d nodes: %s",
          t->n_nodes, het_allreduce_algo_name(het_comm_allreduce_algo(c, HET_ALLREDUCE_AUTO)));
    CHECK(het_comm_allreduce_algo(c, HET_ALLREDUCE_FLAT) == HET_ALLREDUCE_FLAT &&
              het_comm_allreduce_algo(c, HET_ALLREDUCE_HIER) == HET_ALLREDUCE_HIER &&
              het_comm_allreduce_algo(NULL, HET_ALLREDUCE_HIER) == HET_ALLREDUCE_FLAT,
          "explicit choices");
    CHECK(strcmp(het_allreduce_algo_name(HET_ALLREDUCE_HIER), "hier") == 0 &&
              strcmp(het_allreduce_algo_name((het_allreduce_algo)9), "unknown") == 0, "names");
    float g[64];
    size_t zero = 0;
    het_buckets *b = NULL;
    CHECK(het_buckets_create(&b, c, HET_COMM_NODE, g, 64, &zero, 1, 0, NULL, 0) == HET_OK,
          "create: %s", het_error_msg());
    CHECK(het_buckets_set_algo(b, HET_ALLREDUCE_HIER) == HET_EINVAL, "hier on the node scope");
    CHECK(het_buckets_set_algo(b, HET_ALLREDUCE_AUTO) == HET_OK &&
              het_buckets_algo(b) == HET_ALLREDUCE_FLAT, "auto on the node scope is flat");
    CHECK(het_buckets_set_algo(b, (het_allreduce_algo)7) == HET_EINVAL, "bad algorithm");
    het_buckets_free(b);
    /* the delay: only the leaders' stage is modeled, by what MPI runs between N nodes (Open
     * MPI: libnbc's ring; MPICH: recursive doubling at this size); the other ranks book
     * their wait for it in the broadcast as delay too, up to that model */
    for (int i = 0; i < 64; i++) g[i] = 1.0f;
    het_comm_reset_stats(c);
    double t0 = het_now();
    CHECK(het_comm_allreduce_sum_hier(c, g, 64) == HET_OK, "%s", het_error_msg());
    double el = het_now() - t0, model = het_netem_nodes_allreduce_s(ne, sizeof g, t->n_nodes, 0);
    het_comm_stats s = het_comm_get_stats(c);
    CHECK(g[0] == (float)g_size && g[63] == (float)g_size, "sum %g", (double)g[0]);
    CHECK(el >= model * 0.999, "rank %d: %.6f s, the leaders' stage is modeled at %.6f s", g_rank,
          el, model);
    if (t->n_nodes == 1)
        CHECK(s.delay_s == 0.0, "rank %d: delay %g on one node", g_rank, s.delay_s);
    else if (het_test_timing()) /* booked on every rank; at most the model, give or take a
                                   * late wake-up; 0 where the real MPI time exceeds the model
                                   * (as under sanitizers, which skip timing checks) */
        CHECK(s.delay_s > 0.0 && s.delay_s <= model * 1.5 + 10e-3,
              "rank %d (local rank %d): delay %g s, the leaders' stage is modeled at %g s",
              g_rank, t->local_rank, s.delay_s, model);
    het_comm_free(c);
}

static void run(int kind, const char *name) {
    het_topo t;
    int rc;
    if (kind == 0) rc = het_topo_init_nodes(&t, MPI_COMM_WORLD, 0);          /* one node */
    else if (kind == 1) rc = het_topo_init(&t, MPI_COMM_WORLD, 2);           /* 2 + 2 */
    else if (kind == 2) rc = het_topo_init_nodes(&t, MPI_COMM_WORLD, g_rank % 2); /* interleaved */
    else if (kind == 3) rc = het_topo_init(&t, MPI_COMM_WORLD, 3);           /* 3 + 1 */
    else rc = het_topo_init(&t, MPI_COMM_WORLD, 1);                          /* 1 per node */
    CHECK(rc == HET_OK, "%s: topology: %s", name, het_error_msg());
    if (rc != HET_OK) return;
    if (kind == 2 && g_size > 1)
        CHECK(t.n_nodes == 2 && t.node_id == g_rank % 2 && t.local_rank == g_rank / 2,
              "interleaved: rank %d: node %d of %d, local rank %d", g_rank, t.node_id, t.n_nodes,
              t.local_rank);
    test_placement(&t, name);
    test_choice_and_delay(&t);
    het_topo_free(&t);
}

int main(int argc, char **argv) {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &(int){0});
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (!het_test_world_size_ok(g_size)) MPI_Abort(MPI_COMM_WORLD, 1);
    het_log_set_rank(g_rank);
    run(0, "one node");
    run(1, "nodes of 2 consecutive ranks");
    run(2, "2 interleaved nodes");
    run(3, "nodes of 3 + rest");
    run(4, "one rank per node");
    het_topo t;
    CHECK(het_topo_init_nodes(&t, MPI_COMM_WORLD, g_rank == 0 ? -1 : 0) ==
              (g_rank == 0 ? HET_EINVAL : HET_OK), "negative color");
    if (g_rank != 0) het_topo_free(&t);
    int failed = het_test_failures;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("test_hier: %d checks, %d failed (%d ranks)\n", het_test_checks, failed, g_size);
    MPI_Finalize();
    return failed ? 1 : 0;
}

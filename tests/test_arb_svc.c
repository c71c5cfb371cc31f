/* The arbiter service (comm/arb_svc.c) under mpirun with 4 ranks (tests/test_arb_svc_mpi.sh),
 * hand-derived ends, latency L = 1 ms, 1 MB/s between nodes, messages of 1 MB:
 * - 2 nodes of 2 ranks, no cross-traffic: rank 0 sends to rank 2 at 0 s; rank 1 sends to rank 3
 *   at 0.5 s, but only after a wall-clock pause of 100 ms (rank 2 asks for its end long
 *   before): both leave node 0 on one way out, so rank 0's message runs alone for 0.5 s, then at
 *   half: ends at 1.5 s + L (not 1 s + L); rank 1's at 2 s + L; rank 2 answers rank 0 at its
 *   arrival (node 1 to node 0: the other direction, alone): 2.5 s + 2 L;
 * - the same nodes with cross-traffic: rank 0 to rank 2 and rank 3 to rank 1 at once, each
 *   takes 0.05 of the other's way: both end at 1.05 s + L;
 * - 4 nodes of 1 rank: ranks 1, 2, 3 send to rank 0 at once: its way in at a third each, all end
 *   at 3 s + L; rank 0's first wait returns rank 1's (the smallest (end, sender, count)), the
 *   next rank 2's, then rank 3's.
 * As a singleton (ctest's run): the service starts and stops on one rank, a message to its own
 * node is refused, a network without bandwidth is refused. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <time.h>

#include "comm/arb_svc.h"
#include "hetrain/core.h"
#include "test.h"

static const double L = 1e-3, MB = 1e6;

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b)); }

static het_netem net(int cross) {
    het_netem ne = {0};
    ne.lat_s = L, ne.bw_bytes_per_s = MB, ne.crosstraffic = cross;
    return ne;
}

static void nap_ms(int ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static void wait_one(het_arb_svc *s, double t, int src, int seq, double want, const char *what) {
    int which = -1;
    double end = -1;
    int rc = het_arb_svc_wait(s, t, 1, &src, &seq, L, &which, &end);
    CHECK(rc == HET_OK && which == 0 && near(end, want), "%s: rc %d, end %.12g, expected %.12g",
          what, rc, end, want);
}

static void two_nodes(int rank) {
    const int node[4] = {0, 0, 1, 1};
    het_arb_svc *s = het_arb_svc_open(MPI_COMM_WORLD, node, net(0));
    CHECK(s != NULL, "open: %s", het_error_msg());
    if (!s) return;
    int seq = -1;
    double e0 = 1.5 + L;
    if (rank == 0) {
        CHECK(het_arb_svc_post(s, 0.0, (size_t)MB, 2, &seq) == HET_OK && seq == 0, "post");
        wait_one(s, 0.0, 2, 0, 2.5 + 2 * L, "rank 2's answer at rank 0");
    } else if (rank == 1) {
        nap_ms(100);
        het_arb_svc_run(s, 0.4);
        CHECK(het_arb_svc_post(s, 0.5, (size_t)MB, 3, &seq) == HET_OK, "post at 0.5");
    } else if (rank == 2) {
        wait_one(s, 0.0, 0, 0, e0, "rank 0's message at rank 2 (shared way out)");
        CHECK(het_arb_svc_post(s, e0, (size_t)MB, 0, &seq) == HET_OK, "the answer");
    } else if (rank == 3) {
        wait_one(s, 0.0, 1, 0, 2.0 + L, "rank 1's message at rank 3");
    }
    CHECK(het_arb_svc_close(s) == HET_OK, "close: %s", het_error_msg());
}

static void cross_traffic(int rank) {
    const int node[4] = {0, 0, 1, 1};
    het_arb_svc *s = het_arb_svc_open(MPI_COMM_WORLD, node, net(1));
    if (!s) return;
    int seq = -1;
    if (rank == 0) het_arb_svc_post(s, 0.0, (size_t)MB, 2, &seq);
    if (rank == 3) het_arb_svc_post(s, 0.0, (size_t)MB, 1, &seq);
    if (rank == 2) wait_one(s, 0.0, 0, 0, 1.05 + L, "rank 0 to 2 beside 3 to 1");
    if (rank == 1) wait_one(s, 0.0, 3, 0, 1.05 + L, "rank 3 to 1 beside 0 to 2");
    CHECK(het_arb_svc_close(s) == HET_OK, "close: %s", het_error_msg());
}

static void incast(int rank) {
    const int node[4] = {0, 1, 2, 3};
    het_arb_svc *s = het_arb_svc_open(MPI_COMM_WORLD, node, net(0));
    if (!s) return;
    int seq = -1;
    if (rank > 0) het_arb_svc_post(s, 0.0, (size_t)MB, 0, &seq);
    if (rank == 0) {
        int src[3] = {1, 2, 3}, zero[3] = {0, 0, 0};
        for (int k = 0; k < 3; k++) {
            int which = -1;
            double end = -1;
            int rc = het_arb_svc_wait(s, 0.0, 3 - k, src + k, zero, L, &which, &end);
            CHECK(rc == HET_OK && which == 0 && near(end, 3.0 + L),
                  "incast wait %d: rc %d, which %d (expected 0: rank %d), end %.12g", k, rc,
                  which, src[k], end);
        }
    }
    CHECK(het_arb_svc_close(s) == HET_OK, "close: %s", het_error_msg());
}

static void singleton(void) {
    const int node[1] = {0};
    het_arb_svc *s = het_arb_svc_open(MPI_COMM_WORLD, node, net(0));
    CHECK(s != NULL, "open on one rank: %s", het_error_msg());
    if (!s) return;
    int seq = -1;
    CHECK(het_arb_svc_post(s, 0.0, 100, 0, &seq) == HET_EINVAL, "a message to its own node");
    CHECK(het_arb_svc_close(s) == HET_OK, "close");
    het_netem none = net(0);
    none.bw_bytes_per_s = 0.0;
    CHECK(het_arb_svc_open(MPI_COMM_WORLD, node, none) == NULL, "no bandwidth: refused");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (!het_test_world_size_ok(size)) {
        het_test_failures++;
    } else if (size == 1) {
        singleton();
    } else if (size == 4) {
        two_nodes(rank);
        cross_traffic(rank);
        incast(rank);
    } else {
        CHECK(0, "run on 1 or 4 ranks, not %d", size);
    }
    int mine = het_test_failures, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (all && !mine) het_test_failures = 1; /* another rank's failure fails every rank */
    return het_test_finish("test_arb_svc");
}

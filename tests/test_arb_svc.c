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
 *   next rank 2's, then rank 3's;
 * - time limits and a receive from any sender (limits(), any_source(), below);
 * - rendezvous: a message moves from its receive's posting; a receive from any sender takes
 *   the message sent first (rendezvous(), below).
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

static void wait_one(het_arb_svc *s, double t, int src, int k, double want, const char *what) {
    int which = -1;
    double end = -1;
    het_arb_name nm = {src, 0, k};
    int rc = het_arb_svc_wait(s, t, 1, &nm, L, INFINITY, NULL, NULL, &which, &end);
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
        CHECK(het_arb_svc_post(s, 0.0, (size_t)MB, 2, 0, -1.0, &seq) == HET_OK && seq == 0, "post");
        wait_one(s, 0.0, 2, 0, 2.5 + 2 * L, "rank 2's answer at rank 0");
    } else if (rank == 1) {
        nap_ms(100);
        het_arb_svc_run(s, 0.4);
        CHECK(het_arb_svc_post(s, 0.5, (size_t)MB, 3, 0, -1.0, &seq) == HET_OK, "post at 0.5");
    } else if (rank == 2) {
        wait_one(s, 0.0, 0, 0, e0, "rank 0's message at rank 2 (shared way out)");
        CHECK(het_arb_svc_post(s, e0, (size_t)MB, 0, 0, -1.0, &seq) == HET_OK, "the answer");
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
    if (rank == 0) het_arb_svc_post(s, 0.0, (size_t)MB, 2, 0, -1.0, &seq);
    if (rank == 3) het_arb_svc_post(s, 0.0, (size_t)MB, 1, 0, -1.0, &seq);
    if (rank == 2) wait_one(s, 0.0, 0, 0, 1.05 + L, "rank 0 to 2 beside 3 to 1");
    if (rank == 1) wait_one(s, 0.0, 3, 0, 1.05 + L, "rank 3 to 1 beside 0 to 2");
    CHECK(het_arb_svc_close(s) == HET_OK, "close: %s", het_error_msg());
}

static void incast(int rank) {
    const int node[4] = {0, 1, 2, 3};
    het_arb_svc *s = het_arb_svc_open(MPI_COMM_WORLD, node, net(0));
    if (!s) return;
    int seq = -1;
    if (rank > 0) het_arb_svc_post(s, 0.0, (size_t)MB, 0, 0, -1.0, &seq);
    if (rank == 0) {
        het_arb_name nm[3] = {{1, 0, 0}, {2, 0, 0}, {3, 0, 0}};
        for (int k = 0; k < 3; k++) {
            int which = -1;
            double end = -1;
            int rc = het_arb_svc_wait(s, 0.0, 3 - k, nm + k, L, INFINITY, NULL, NULL, &which,
                                      &end);
            CHECK(rc == HET_OK && which == 0 && near(end, 3.0 + L),
                  "incast wait %d: rc %d, which %d (expected 0: rank %d), end %.12g", k, rc,
                  which, nm[k].src, end);
        }
    }
    CHECK(het_arb_svc_close(s) == HET_OK, "close: %s", het_error_msg());
}

/* A receive from any sender names each one's next message before either is sent: rank 0 waits
 * for ranks 2 and 3 (node 1); rank 2 sends 1 MB at 0.3 s at once, rank 3 1 MB at 0 s but
 * reports 100 ms later in wall time. Rank 3's runs alone until 0.3 s + L, then both share node
 * 1's way out: rank 3's ends first (1.7 s + L), rank 2's at 2 s + L. */
static void any_source(int rank) {
    const int node[4] = {0, 0, 1, 1};
    het_arb_svc *s = het_arb_svc_open(MPI_COMM_WORLD, node, net(0));
    if (!s) return;
    int k = -1;
    if (rank == 2) het_arb_svc_post(s, 0.3, (size_t)MB, 0, 3, -1.0, &k);
    if (rank == 3) {
        nap_ms(100);
        het_arb_svc_post(s, 0.0, (size_t)MB, 0, 3, -1.0, &k);
    }
    if (rank == 0) {
        het_arb_name nm[2] = {{2, 3, 0}, {3, 3, 0}};
        int which = -9;
        double end = -1;
        het_arb_svc_wait(s, 0.0, 2, nm, L, INFINITY, NULL, NULL, &which, &end);
        CHECK(which == 1 && near(end, 1.7 + L), "first of any: which %d (expected 1: rank 3), "
              "end %.12g", which, end);
        het_arb_svc_wait(s, end, 1, nm, L, INFINITY, NULL, NULL, &which, &end);
        CHECK(which == 0 && near(end, 2.0 + L), "then rank 2's: which %d, end %.12g", which, end);
    }
    CHECK(het_arb_svc_close(s) == HET_OK, "close: %s", het_error_msg());
}

/* Time limits (a message inside the node would arrive then), 2 nodes of 2 ranks: rank 2 waits
 * for rank 0's 1 MB (ends at 1 s + L) until 0.5 s: the limit (-1, 0.5 s); then until 2 s: the
 * message. Rank 1 waits for rank 3's first message on stream 5, not posted yet, until 0.7 s;
 * rank 3 posts 1 kB there at 0.2 s after a wall-clock pause of 50 ms: the message (0.201 s +
 * L), not the limit. Rank 1 then holds for a message of rank 3 inside the node (k < 0) until
 * 0.9 s; rank 3 runs at 1 s: the limit.
 * A poll that stops the wait: -2. */
static int stop_now(void *arg, int *stop) {
    (void)arg;
    *stop = 1;
    return HET_OK;
}

static void limits(int rank) {
    const int node[4] = {0, 0, 1, 1};
    het_arb_svc *s = het_arb_svc_open(MPI_COMM_WORLD, node, net(0));
    if (!s) return;
    int seq = -1, which = -9;
    het_arb_name from0 = {0, 0, 0}, from3 = {3, 5, 0}, hold3 = {3, 0, -1};
    double end = -1;
    if (rank == 0) het_arb_svc_post(s, 0.0, (size_t)MB, 2, 0, -1.0, &seq);
    if (rank == 2) {
        het_arb_svc_wait(s, 0.0, 1, &from0, L, 0.5, NULL, NULL, &which, &end);
        CHECK(which == -1 && end == 0.5, "limit 0.5 s first: which %d, end %g", which, end);
        het_arb_svc_wait(s, 0.5, 1, &from0, L, 2.0, NULL, NULL, &which, &end);
        CHECK(which == 0 && near(end, 1.0 + L), "then the message: which %d, end %.12g", which,
              end);
    }
    if (rank == 3) {
        nap_ms(50);
        het_arb_svc_post(s, 0.2, 1000, 1, 5, -1.0, &seq);
        het_arb_svc_run(s, 1.0);
    }
    if (rank == 1) {
        int rc = het_arb_svc_wait(s, 0.0, 1, &from3, L, 0.7, stop_now, NULL, &which, &end);
        CHECK(rc == HET_OK && which == -2, "a poll stops the wait: rc %d, which %d", rc, which);
        het_arb_svc_wait(s, 0.0, 1, &from3, L, 0.7, NULL, NULL, &which, &end);
        CHECK(which == 0 && near(end, 0.201 + L), "the message before the limit 0.7 s: which "
              "%d, end %.12g", which, end);
        het_arb_svc_wait(s, end, 1, &hold3, L, 0.9, NULL, NULL, &which, &end);
        CHECK(which == -1 && end == 0.9, "any message of rank 3, limit 0.9 s: which %d, end %g",
              which, end);
    }
    CHECK(het_arb_svc_close(s) == HET_OK, "close: %s", het_error_msg());
}

static void singleton(void) {
    const int node[1] = {0};
    het_arb_svc *s = het_arb_svc_open(MPI_COMM_WORLD, node, net(0));
    CHECK(s != NULL, "open on one rank: %s", het_error_msg());
    if (!s) return;
    int seq = -1;
    CHECK(het_arb_svc_post(s, 0.0, 100, 0, 0, -1.0, &seq) == HET_EINVAL,
          "a message to its own node");
    CHECK(het_arb_svc_close(s) == HET_OK, "close");
    het_netem none = net(0);
    none.bw_bytes_per_s = 0.0;
    CHECK(het_arb_svc_open(MPI_COMM_WORLD, node, none) == NULL, "no bandwidth: refused");
}

/* Rendezvous (messages of 500 bytes and more wait for their receive), 2 nodes of 2 ranks:
 * rank 2 sends 1 MB to rank 0 at 0 s; rank 0 posts its receive at 1 s and tells the match:
 * the bytes move from 1 s, in at 2 s + L (not 1 s + L). Then a receive from any sender at
 * 2 s + L on stream 5, where rank 2 sent 1 MB at 0.3 s and rank 3 1 kB at 0.5 s (reported
 * 100 ms later in wall time): MPI matches the one sent first, rank 2's, though rank 3's
 * would end first: 3 s + 2 L; the next receive takes rank 3's: 3 s + 2 L + 1 ms + L.
 * Envelopes (a header's time: the order of a receive from any sender, and the earliest its bytes
 * move): on stream 6 rank 2 sends 1 kB at 0.3 s (envelope 5 s), rank 3 at 0.5 s (0.05 s): rank
 * 3's header comes first (0.55 s, before the receive: its bytes move from the receive); then
 * rank 2's, whose bytes wait for its header (in at 5.3 s, after the next receive). */
static void rendezvous(int rank) {
    const int node[4] = {0, 0, 1, 1};
    het_netem ne = net(0);
    ne.rndv_bytes = 500;
    het_arb_svc *s = het_arb_svc_open(MPI_COMM_WORLD, node, ne);
    if (!s) return;
    int k = -1, r = -1, which = -9, number = -1;
    double end = -1;
    if (rank == 2) {
        het_arb_svc_post(s, 0.0, (size_t)MB, 0, 4, -1.0, &k);
        het_arb_svc_post(s, 0.3, (size_t)MB, 0, 5, -1.0, &k);
        het_arb_svc_post_env(s, 0.3, 1000, 0, 6, -1.0, 5.0, &k);
    }
    if (rank == 3) {
        nap_ms(100);
        het_arb_svc_post(s, 0.5, 1000, 0, 5, -1.0, &k);
        het_arb_svc_post_env(s, 0.5, 1000, 0, 6, -1.0, 0.05, &k);
    }
    if (rank == 0) {
        het_arb_name a = {2, 4, 0}, nm[2] = {{2, 5, 0}, {3, 5, 0}};
        CHECK(het_arb_svc_recv(s, 1.0, 4, 2, &r) == HET_OK && r == 0, "receive 0: %d", r);
        CHECK(het_arb_svc_match(s, 4, r, &a) == HET_OK, "%s", het_error_msg());
        het_arb_svc_wait(s, 1.0, 1, &a, L, INFINITY, NULL, NULL, &which, &end);
        CHECK(which == 0 && near(end, 2.0 + L), "rendezvous: which %d, end %.12g, expected "
              "%.12g", which, end, 2.0 + L);
        double t = end;
        CHECK(het_arb_svc_recv(s, t, 5, -1, &r) == HET_OK && r == 0 &&
              het_arb_svc_wait_recv(s, t, 2, nm, L, r, INFINITY, &number) == HET_OK, "%s",
              het_error_msg());
        for (which = -9; !het_arb_svc_wait_test(s, 2, nm, INFINITY, number, &which, &end);)
            het_arb_svc_serve(s);
        CHECK(which == 0 && near(end, 3.0 + 2 * L), "any: which %d (expected 0: rank 2, sent "
              "first), end %.12g", which, end);
        t = end;
        CHECK(het_arb_svc_recv(s, t, 5, -1, &r) == HET_OK && r == 1 &&
              het_arb_svc_wait_recv(s, t, 1, nm + 1, L, r, INFINITY, &number) == HET_OK, "%s",
              het_error_msg());
        for (which = -9; !het_arb_svc_wait_test(s, 1, nm + 1, INFINITY, number, &which, &end);)
            het_arb_svc_serve(s);
        CHECK(which == 0 && near(end, t + 1e-3 + L), "then rank 3's: end %.12g, expected %.12g",
              end, t + 1e-3 + L);
        het_arb_name e[2] = {{2, 6, 0}, {3, 6, 0}};
        double want[2] = {-1.0, 5.3 + 1e-3 + L}; /* -1: from the receive */
        for (int i = 0; i < 2; i++) {
            t = end;
            CHECK(het_arb_svc_recv(s, t, 6, -1, &r) == HET_OK && r == i &&
                  het_arb_svc_wait_recv(s, t, 2 - i, e, L, r, INFINITY, &number) == HET_OK,
                  "%s", het_error_msg());
            for (which = -9; !het_arb_svc_wait_test(s, 2 - i, e, INFINITY, number, &which,
                                                    &end);)
                het_arb_svc_serve(s);
            double w = want[i] < 0.0 ? t + 1e-3 + L : want[i];
            CHECK(which == (i ? 0 : 1) && near(end, w), "envelopes %d: which %d, end %.12g, "
                  "expected %.12g", i, which, end, w);
        }
    }
    CHECK(het_arb_svc_close(s) == HET_OK, "close: %s", het_error_msg());
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
        limits(rank);
        any_source(rank);
        rendezvous(rank);
    } else {
        CHECK(0, "run on 1 or 4 ranks, not %d", size);
    }
    int mine = het_test_failures, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (all && !mine) het_test_failures = 1; /* another rank's failure fails every rank */
    return het_test_finish("test_arb_svc");
}

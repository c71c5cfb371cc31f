/* Point-to-point messages (src/comm/p2p.c, p2p_inbox.c) against hand-derived numbers. Cases:
 * the arguments refused, one rank's receive from any sender (every sender done at once); on
 * the wall clock one emulated message (its arrival stamp + lat + bytes / bw, a test not done
 * before it, the wait not back before it, the counters exact at the sender, node-local or
 * cross-node by the receiver's node); on the virtual clock the receiver's V after a receive,
 * max(V, the sender's V + cost) exactly, across nodes and on the node link, booked as
 * waiting and transfer; a stream of 4 messages sent at once arrives one transfer time apart
 * (a lane's stamped message does not queue); the order at a receiver (messages sent at once
 * by several senders share its way in: all in together, taken by rank) from any sender:
 * virtual stamps opposite to
 * the real send order (the earliest sender sends last: it waits for a go from the receiver),
 * nothing delivered while a sender has neither a message there nor said done, taken in V
 * order with ties by rank, every sender done, then a second round; two senders' messages
 * overlapping on the receiver's way in (max-min: the later, shorter one in first); messages
 * of 64 KiB and more waiting for their receive (rendezvous: from one sender, and from any
 * sender taken in the order they were sent); an
 * all-reduce starting behind a rank's message on its way out; waitany in virtual order;
 * a message of many chunks, one too large for its buffer (refused, the next one intact); a
 * header receive left posted at het_comm_free (cancelled: it steals nothing later); nothing
 * pending at the end; the stall line naming the sender a receive waits for. An MPI program:
 * CTest runs it as a 1-rank singleton, test_p2p_mpi.sh under mpirun with 2, 3 and 4 ranks. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/internal.h"
#include "emul/emul.h"
#include "test.h"

/* The test's main lane: its comms charge it (het_comm_set_lane); het_clock_use below is
 * followed by its reset to time 0. */
static het_lane g_lane;

const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }

static int g_rank, g_size;

typedef struct env {
    het_topo t;
    het_comm *c;
} env;

/* A topology of ranks_per_node ranks per emulated node and a comm with model ne, on clock k. */
static int env_open(env *e, int ranks_per_node, het_netem ne, het_clock_kind k) {
    het_clock_use(k);
    g_lane = HET_LANE_START;
    e->c = NULL;
    if (het_topo_init(&e->t, MPI_COMM_WORLD, ranks_per_node) != HET_OK) return 0;
    if (het_comm_create(&e->c, &e->t, ne) != HET_OK) {
        het_topo_free(&e->t);
        return 0;
    }
    het_comm_set_lane(e->c, &g_lane);
    return 1;
}

/* A barrier in the poll loop: waiting ranks (the stall case's, 3 s) leave the cores. */
static void barrier(void) {
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    het_stall_collective(MPI_COMM_WORLD, "barrier", &req);
}

/* Checks that nothing is pending on any rank (after a barrier), then frees. */
static void env_close(env *e, const char *what) {
    barrier();
    int n = het_comm_p2p_pending(e->c);
    CHECK(n == 0, "rank %d: %s: %d messages pending at the end", g_rank, what, n);
    het_comm_free(e->c);
    het_topo_free(&e->t);
    het_clock_use(HET_CLOCK_WALL);
    g_lane = HET_LANE_START;
}

static void test_refusals(void) {
    env e;
    het_netem off = {0};
    CHECK(env_open(&e, 1, off, HET_CLOCK_WALL), "%s", het_error_msg());
    het_msg m;
    int x = 0;
    CHECK(het_comm_isend(e.c, HET_COMM_WORLD, g_rank, 0, &x, 4, &m) == HET_EINVAL &&
          strstr(het_error_msg(), "is this rank"), "send to itself: %s", het_error_msg());
    CHECK(het_comm_isend(e.c, HET_COMM_WORLD, g_size, 0, &x, 4, &m) == HET_EINVAL &&
          strstr(het_error_msg(), "outside [0, "), "dest past the scope: %s", het_error_msg());
    CHECK(het_comm_isend(e.c, HET_COMM_WORLD, 0, HET_P2P_TAGS, &x, 4, &m) == HET_EINVAL &&
          strstr(het_error_msg(), "tag 32 outside [0, 32)"), "bad tag: %s", het_error_msg());
    CHECK(het_comm_irecv(e.c, HET_COMM_NONE, HET_ANY_SOURCE, 0, &x, 4, &m) == HET_EINVAL &&
          strstr(het_error_msg(), "no group"), "scope NONE: %s", het_error_msg());
    CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, -5, 0, &x, 4, &m) == HET_EINVAL &&
          strstr(het_error_msg(), "HET_ANY_SOURCE"), "src -5: %s", het_error_msg());
    CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, HET_ANY_SOURCE, 0, NULL, 4, &m) == HET_EINVAL,
          "NULL buffer accepted");
    CHECK(het_comm_msg_wait(e.c, &m) == HET_OK, "wait on a refused message");
    het_msg zero[2];
    memset(zero, 0, sizeof zero);
    int idx = 7;
    CHECK(het_comm_msg_waitany(e.c, 2, zero, &idx) == HET_OK && idx == -1, "waitany over "
          "inactive messages: index %d", idx);
    if (g_size == 1) { /* no sender: a receive from any sender reports every sender done */
        CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, HET_ANY_SOURCE, 0, &x, 4, &m) == HET_OK &&
              het_comm_msg_wait(e.c, &m) == HET_OK, "%s", het_error_msg());
        CHECK(m.done == 1 && m.src == HET_ANY_SOURCE && m.bytes == 0, "one rank: done %d src "
              "%d bytes %zu", m.done, m.src, m.bytes);
    }
    env_close(&e, "refusals");
}

/* Wall clock, 2 ranks per node: rank r sends every other rank q (100 + q) floats; the
 * receive is not done before stamp + lat + bytes / bw, and the sender counts it by q's node. */
static void test_wall_delay(void) {
    if (g_size < 2) return;
    env e;
    het_netem ne = {.lat_s = 5e-3, .bw_bytes_per_s = 100e6}; /* 5 ms, 100 MB/s */
    CHECK(env_open(&e, 2, ne, HET_CLOCK_WALL), "%s", het_error_msg());
    float *out = calloc(1000, sizeof *out), *in = calloc(1000, sizeof *in);
    uint64_t want_node = 0, want_cross = 0;
    int n_node = 0, n_cross = 0;
    for (int i = 0; i < 1000; i++) out[i] = (float)(g_rank * 1000 + i);
    for (int k = 1; k < g_size; k++) { /* round k: send to r + k, receive from r - k */
        int to = (g_rank + k) % g_size, from = (g_rank - k + g_size) % g_size;
        size_t bytes = (100 + (size_t)to) * sizeof(float);
        int same = to / 2 == g_rank / 2;
        if (same) want_node += bytes, n_node++;
        else want_cross += bytes, n_cross++;
        het_msg s, r;
        CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, from, HET_TAG_TEST, in, 1000 * sizeof *in,
                             &r) == HET_OK, "%s", het_error_msg());
        CHECK(het_comm_isend(e.c, HET_COMM_WORLD, to, HET_TAG_TEST, out, bytes, &s) == HET_OK,
              "%s", het_error_msg());
        double cost = same ? 0.0 : 5e-3 + (double)bytes / 100e6;
        CHECK(s.deliver == s.stamp + cost, "rank %d: send to %d arrives %.9f after it left, "
              "expected %.9f", g_rank, to, s.deliver - s.stamp, cost);
        int done = 0, rc = HET_OK;
        while (!done && rc == HET_OK) {
            rc = het_comm_msg_test(e.c, &r, &done);
            if (!done) het_sleep_s(1e-4); /* leave the core to the sender */
        }
        double t = het_now(); /* test said done: not before its arrival */
        CHECK(rc == HET_OK && t >= r.deliver, "rank %d: message from %d done at %.6f, arrives "
              "%.6f: %s", g_rank, from, t, r.deliver, rc == HET_OK ? "" : het_error_msg());
        size_t rb = (100 + (size_t)g_rank) * sizeof(float);
        double rcost = from / 2 == g_rank / 2 ? 0.0 : 5e-3 + (double)rb / 100e6;
        CHECK(r.src == from && r.bytes == rb && r.done == 0 && r.deliver == r.stamp + rcost,
              "rank %d: from %d: src %d bytes %zu (expected %zu) transit %.9f (expected %.9f)",
              g_rank, from, r.src, r.bytes, rb, r.deliver - r.stamp, rcost);
        CHECK(in[0] == (float)(from * 1000) && in[99 + g_rank] == (float)(from * 1000 + 99 +
              g_rank), "rank %d: payload from %d: %g ...", g_rank, from, (double)in[0]);
        if (het_test_timing()) /* a gross bound only (a wrong clock): the cores are shared */
            CHECK(t - r.deliver < 2.0, "rank %d: done %.3f s after the arrival", g_rank,
                  t - r.deliver);
        CHECK(het_comm_msg_wait(e.c, &s) == HET_OK, "%s", het_error_msg());
    }
    /* the same through a blocking wait, from rank r - 1: back no earlier than the arrival */
    het_msg s, r;
    int to = (g_rank + 1) % g_size, from = (g_rank - 1 + g_size) % g_size;
    CHECK(het_comm_isend(e.c, HET_COMM_WORLD, to, HET_TAG_GRADS, out, 4000, &s) == HET_OK &&
          het_comm_irecv(e.c, HET_COMM_WORLD, from, HET_TAG_GRADS, in, 4000, &r) == HET_OK &&
          het_comm_msg_wait(e.c, &r) == HET_OK && het_comm_msg_wait(e.c, &s) == HET_OK, "%s",
          het_error_msg());
    CHECK(het_now() >= r.deliver, "wait back before the arrival");
    if (to / 2 == g_rank / 2) want_node += 4000, n_node++;
    else want_cross += 4000, n_cross++;
    het_comm_stats st = het_comm_get_stats(e.c);
    CHECK(st.bytes == want_node + want_cross && st.bytes_node == want_node &&
          st.bytes_cross == want_cross && st.calls == (uint64_t)g_size &&
          st.calls_node == (uint64_t)n_node && st.calls_cross == (uint64_t)n_cross,
          "rank %d: bytes %llu node %llu cross %llu calls %llu node %llu cross %llu; expected "
          "node %llu (%d) cross %llu (%d)", g_rank, (unsigned long long)st.bytes,
          (unsigned long long)st.bytes_node, (unsigned long long)st.bytes_cross,
          (unsigned long long)st.calls, (unsigned long long)st.calls_node,
          (unsigned long long)st.calls_cross, (unsigned long long)want_node, n_node,
          (unsigned long long)want_cross, n_cross);
    CHECK(st.vwait_s == 0.0 && st.vnet_s == 0.0, "wall clock booked virtual time");
    /* a receive from any sender on the wall clock: each sender's message once, then done */
    if (g_rank > 0) {
        CHECK(het_comm_isend(e.c, HET_COMM_WORLD, 0, HET_TAG_CTRL, &g_rank, sizeof g_rank, &s) ==
              HET_OK && het_comm_msg_wait(e.c, &s) == HET_OK &&
              het_comm_p2p_done(e.c, HET_COMM_WORLD, 0, HET_TAG_CTRL, &s) == HET_OK &&
              het_comm_msg_wait(e.c, &s) == HET_OK, "%s", het_error_msg());
    } else {
        int seen = 0, v = -1;
        for (int k = 0; k < g_size; k++) {
            CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, HET_ANY_SOURCE, HET_TAG_CTRL, &v, sizeof v,
                                 &r) == HET_OK && het_comm_msg_wait(e.c, &r) == HET_OK, "%s",
                  het_error_msg());
            if (k < g_size - 1) CHECK(!r.done && r.src == v && v > 0, "from %d: %d", r.src, v);
            else CHECK(r.done && r.src == HET_ANY_SOURCE, "not every sender done: %d", r.src);
            if (!r.done && v > 0 && v < 31) seen |= 1 << v;
        }
        CHECK(seen == (1 << g_size) - 2, "senders seen: mask %x", (unsigned)seen);
    }
    free(out);
    free(in);
    env_close(&e, "wall delay");
}

/* Virtual clock: rank r sends r + 1 4000 bytes at V = 10 ms (r + 1) and receives from r - 1:
 * V = max(own V, the sender's V + cost); rank 0 waits for the last rank. */
/* A stream through a sender's way out (virtual clock, every rank its own node): rank 0 sends
 * M = 4 messages of 4000 bytes to rank 1 at once; they leave one after another, so message i
 * arrives at lat + (i + 1) bytes/bw (hand-derived: 1 ms + (i + 1) x 40 us), not all at
 * lat + bytes/bw; two stamped by a lane (het_comm_isend_at, at V = 0) queue on their tag's
 * own queue, not behind the rank's (1 ms + 40 us, 1 ms + 80 us); across the node link nothing
 * queues. */
static void test_stream(void) {
    if (g_size < 2) return;
    env e;
    het_netem ne = {.lat_s = 1e-3, .bw_bytes_per_s = 100e6};
    CHECK(env_open(&e, 1, ne, HET_CLOCK_VIRTUAL), "%s", het_error_msg());
    enum { M = 4, L = 2, B = 4000 };
    static char buf[M + L][B];
    het_msg m[M + L];
    if (g_rank == 0) {
        for (int i = 0; i < M; i++)
            CHECK(het_comm_isend(e.c, HET_COMM_WORLD, 1, HET_TAG_PARAMS, buf[i], B, &m[i]) ==
                      HET_OK, "%s", het_error_msg());
        for (int i = M; i < M + L; i++)
            CHECK(het_comm_isend_at(e.c, HET_COMM_WORLD, 1, HET_TAG_GRADS, buf[i], B, 0.0,
                                    &m[i]) == HET_OK, "%s", het_error_msg());
        for (int i = 0; i < M + L; i++) {
            double want = 1e-3 + (i < M ? i + 1 : i - M + 1) * (B / 100e6);
            CHECK(fabs(m[i].deliver - want) < 1e-15, "stream message %d arrives at %.17g, "
                  "expected %.17g", i, m[i].deliver, want);
        }
        CHECK(het_comm_msg_waitall(e.c, M + L, m) == HET_OK, "%s", het_error_msg());
    } else if (g_rank == 1) {
        for (int i = 0; i < M; i++)
            CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, 0, HET_TAG_PARAMS, buf[i], B, &m[i]) ==
                      HET_OK, "%s", het_error_msg());
        for (int i = M; i < M + L; i++)
            CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, 0, HET_TAG_GRADS, buf[i], B, &m[i]) ==
                      HET_OK, "%s", het_error_msg());
        CHECK(het_comm_msg_waitall(e.c, M + L, m) == HET_OK, "%s", het_error_msg());
        CHECK(fabs(het_lane_now(&g_lane) - (1e-3 + M * (B / 100e6))) < 1e-15,
              "the receiver's clock at the stream's end: %.17g", het_lane_now(&g_lane));
    }
    env_close(&e, "stream");
}

static void test_virtual_receive(int one_node) {
    if (g_size < 2) return;
    env e;
    het_netem ne = {.lat_s = 1e-3, .bw_bytes_per_s = 100e6,
                    .node_lat_s = 2e-6, .node_bw_bytes_per_s = 1e9};
    CHECK(env_open(&e, one_node ? g_size : 1, ne, HET_CLOCK_VIRTUAL), "%s", het_error_msg());
    double cost = one_node ? 2e-6 + 4000.0 / 1e9 : 1e-3 + 4000.0 / 100e6;
    char out[4000], in[4000];
    memset(out, g_rank + 1, sizeof out);
    int to = (g_rank + 1) % g_size, from = (g_rank - 1 + g_size) % g_size;
    double mine = 0.010 * (g_rank + 1), theirs = 0.010 * (from + 1);
    het_lane_advance(&g_lane, mine);
    het_msg s, r;
    CHECK(het_comm_isend(e.c, HET_COMM_WORLD, to, HET_TAG_PARAMS, out, sizeof out, &s) ==
          HET_OK && het_comm_irecv(e.c, HET_COMM_WORLD, from, HET_TAG_PARAMS, in, sizeof in,
                                   &r) == HET_OK, "%s", het_error_msg());
    CHECK(het_comm_msg_wait(e.c, &s) == HET_OK && het_lane_now(&g_lane) == mine,
          "rank %d: the send moved V to %.9f", g_rank, het_lane_now(&g_lane));
    CHECK(het_comm_msg_wait(e.c, &r) == HET_OK, "%s", het_error_msg());
    double want = theirs + cost > mine ? theirs + cost : mine;
    CHECK(het_lane_now(&g_lane) == want && r.deliver == theirs + cost && r.stamp == theirs,
          "rank %d (%s): V %.17g, expected %.17g (deliver %.17g stamp %.17g)", g_rank,
          one_node ? "node link" : "network", het_lane_now(&g_lane), want, r.deliver, r.stamp);
    CHECK(in[0] == from + 1 && in[3999] == from + 1, "payload %d", in[0]);
    het_comm_stats st = het_comm_get_stats(e.c);
    double wait = theirs > mine ? theirs - mine : 0.0, net = want - mine - wait;
    CHECK(st.vwait_s == wait && fabs(st.vnet_s - net) <= 1e-15, "rank %d: booked wait %.17g "
          "net %.17g, expected %.17g and %.17g", g_rank, st.vwait_s, st.vnet_s, wait, net);
    CHECK(st.delay_s == 0.0, "the virtual clock slept");
    CHECK(one_node ? st.bytes_node == 4000 : st.bytes_cross == 4000, "counted by the wrong node");
    env_close(&e, one_node ? "virtual, node link" : "virtual");
}

/* Virtual clock, receiver rank 0, senders 1 .. P-1: A at V = 10 ms (P - r), sent in rank
 * order in real time (sender r > 1 waits for a go, which rank 0 sends once r - 1's A is
 * there): stamps opposite to the send order. Then B at 40 ms (ties: by rank), done, C at 60
 * ms and done again. Rank 0 must deliver nothing while a sender has not sent, and take A in
 * decreasing rank, B and C in increasing rank, every sender done after each round. */
static void test_order(void) {
    if (g_size < 2) return;
    env e;
    het_netem ne = {.lat_s = 1e-3, .bw_bytes_per_s = 100e6};
    CHECK(env_open(&e, 1, ne, HET_CLOCK_VIRTUAL), "%s", het_error_msg());
    const double cost = 1e-3 + 8.0 / 100e6; /* two ints */
    int last = g_size - 1, go = 0;
    het_msg m, g;
    if (g_rank > 0) {
        if (g_rank > 1) /* after rank - 1's A in real time */
            CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, 0, HET_TAG_CTRL, &go, sizeof go, &m) ==
                  HET_OK && het_comm_msg_wait(e.c, &m) == HET_OK && go == g_rank, "go %d", go);
        double at[3] = {0.010 * (g_size - g_rank), 0.040, 0.060};
        for (int k = 0; k < 3; k++) {
            int v[2] = {g_rank, k};
            het_lane_advance_to(&g_lane, at[k]);
            CHECK(het_comm_isend(e.c, HET_COMM_WORLD, 0, HET_TAG_GRADS, v, sizeof v, &m) ==
                  HET_OK && het_comm_msg_wait(e.c, &m) == HET_OK, "%s", het_error_msg());
            if (k == 0) continue; /* B and C each end a round */
            CHECK(het_comm_p2p_done(e.c, HET_COMM_WORLD, 0, HET_TAG_GRADS, &m) == HET_OK &&
                  het_comm_msg_wait(e.c, &m) == HET_OK, "%s", het_error_msg());
        }
        env_close(&e, "order");
        return;
    }
    /* rank 0: sender r's A there, r + 1 .. P-1 not sent: nothing to deliver */
    int flag = 0, src = -9, v[2];
    size_t bytes = 0;
    for (int r = 1; r < last; r++) {
        if (r > 1) {
            go = r;
            CHECK(het_comm_isend(e.c, HET_COMM_WORLD, r, HET_TAG_CTRL, &go, sizeof go, &g) ==
                  HET_OK && het_comm_msg_wait(e.c, &g) == HET_OK, "%s", het_error_msg());
        }
        double t0 = het_now();
        int rc = HET_OK;
        for (flag = 0; rc == HET_OK && !flag && het_now() - t0 < 30.0; het_sleep_s(1e-4))
            rc = het_comm_probe(e.c, HET_COMM_WORLD, r, HET_TAG_GRADS, &flag, &src, &bytes);
        CHECK(rc == HET_OK && flag == 1 && src == r && bytes == sizeof v, "rank %d's A: flag %d "
              "src %d bytes %zu", r, flag, src, bytes);
        CHECK(het_comm_probe(e.c, HET_COMM_WORLD, HET_ANY_SOURCE, HET_TAG_GRADS, &flag, &src,
                             &bytes) == HET_OK && flag == 0, "delivered from rank %d while rank "
              "%d has not sent", src, r + 1);
    }
    CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, HET_ANY_SOURCE, HET_TAG_GRADS, v, sizeof v, &m) ==
          HET_OK, "%s", het_error_msg());
    if (last > 1) { /* the last sender (the earliest stamp) waits for its go: not matched */
        int done = 0, rc = HET_OK;
        for (int i = 0; i < 100 && rc == HET_OK && !done; i++)
            rc = het_comm_msg_test(e.c, &m, &done);
        CHECK(rc == HET_OK && !done && m.state == 1, "a receive matched before rank %d sent",
              last);
        go = last;
        CHECK(het_comm_isend(e.c, HET_COMM_WORLD, last, HET_TAG_CTRL, &go, sizeof go, &g) ==
              HET_OK && het_comm_msg_wait(e.c, &g) == HET_OK, "%s", het_error_msg());
    }
    double v_now = 0.0, wire = 8.0 / 100e6; /* the receiver's way in */
    for (int round = 0; round < 2; round++) {
        /* round 0: A from P-1 down to 1, then B from 1 up; round 1: C from 1 up */
        int n = round == 0 ? 2 * (g_size - 1) : g_size - 1;
        for (int i = 0; i <= n; i++) {
            if (round > 0 || i > 0)
                CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, HET_ANY_SOURCE, HET_TAG_GRADS, v,
                                     sizeof v, &m) == HET_OK, "%s", het_error_msg());
            CHECK(het_comm_msg_wait(e.c, &m) == HET_OK, "%s", het_error_msg());
            int want_src = i == n ? HET_ANY_SOURCE : round == 0 && i < g_size - 1 ? last - i
                         : round == 0 ? i - (g_size - 1) + 1 : i + 1;
            int want_k = round == 1 ? 2 : i < g_size - 1 ? 0 : 1;
            double stamp = want_k == 0 ? 0.010 * (g_size - want_src) : want_k == 1 ? 0.040
                                                                                  : 0.060;
            double deliver = stamp + cost;
            if (i < n && want_k > 0) /* the P-1 sent at once share the way in: each 1/(P-1) of
                                      * it, all in at once, taken by rank */
                deliver += (g_size - 2) * wire;
            if (deliver > v_now) v_now = deliver;
            if (i == n) { /* every sender done: at the latest done (behind its message) */
                CHECK(m.done == 1 && m.src == HET_ANY_SOURCE && m.bytes == 0, "round %d: "
                      "after %d messages: done %d src %d", round, n, m.done, m.src);
                CHECK(m.deliver == (round ? 0.060 : 0.040) + cost, "round %d: all done at "
                      "%.17g", round, m.deliver);
                continue;
            }
            CHECK(m.done == 0 && m.src == want_src && v[0] == want_src && v[1] == want_k,
                  "round %d message %d: from rank %d (%d, %d), expected rank %d message %d",
                  round, i, m.src, v[0], v[1], want_src, want_k);
            CHECK(fabs(m.deliver - deliver) <= 1e-15 * (1 << 10) &&
                  fabs(het_lane_now(&g_lane) - v_now) <= 1e-15 * (1 << 10), "round %d message %d: "
                  "deliver %.17g V %.17g, expected %.17g and %.17g", round, i, m.deliver,
                  het_lane_now(&g_lane), deliver, v_now);
        }
    }
    env_close(&e, "order");
}

/* Virtual clock, senders into one receiver share its way in max-min fairly (hand-derived, 1 ms
 * latency, 100 MB/s): rank 1 sends 200 kB at V = 0 (its bytes move from 1 ms, 2 ms alone),
 * rank 2 sends 50 kB at V = 1 ms (from 2 ms, 0.5 ms alone), the others say done. Rank 1 alone
 * until 2 ms moves half; both at half rate until rank 2's is in at 3 ms (0.5 ms of bytes at half
 * rate), when rank 1 has 0.5 ms left at full rate: in at 3.5 ms. Taken rank 2 first, though
 * it started later (first come first served would give rank 1 at 3 ms, rank 2 at 3.5 ms). */
static void test_way_in(void) {
    if (g_size < 3) return;
    env e;
    het_netem ne = {.lat_s = 1e-3, .bw_bytes_per_s = 100e6};
    CHECK(env_open(&e, 1, ne, HET_CLOCK_VIRTUAL), "%s", het_error_msg());
    static unsigned char buf[200000];
    het_msg m;
    if (g_rank == 1 || g_rank == 2) {
        size_t n = g_rank == 1 ? 200000 : 50000;
        het_lane_advance_to(&g_lane, g_rank == 1 ? 0.0 : 1e-3);
        CHECK(het_comm_isend(e.c, HET_COMM_WORLD, 0, HET_TAG_GRADS, buf, n, &m) == HET_OK &&
              het_comm_msg_wait(e.c, &m) == HET_OK, "%s", het_error_msg());
    }
    if (g_rank > 0) {
        CHECK(het_comm_p2p_done(e.c, HET_COMM_WORLD, 0, HET_TAG_GRADS, &m) == HET_OK &&
              het_comm_msg_wait(e.c, &m) == HET_OK, "%s", het_error_msg());
        env_close(&e, "way in");
        return;
    }
    const int want_src[2] = {2, 1};
    const double want_t[2] = {3e-3, 3.5e-3};
    for (int i = 0; i < 3; i++) {
        CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, HET_ANY_SOURCE, HET_TAG_GRADS, buf, sizeof buf,
                             &m) == HET_OK && het_comm_msg_wait(e.c, &m) == HET_OK, "%s",
              het_error_msg());
        if (i == 2) {
            CHECK(m.done && m.src == HET_ANY_SOURCE, "way in: after both, done from %d", m.src);
            continue;
        }
        CHECK(!m.done && m.src == want_src[i] && fabs(m.deliver - want_t[i]) < 1e-12 &&
              fabs(het_lane_now(&g_lane) - want_t[i]) < 1e-12, "way in: message %d from rank %d in "
              "at %.17g (V %.17g), expected rank %d at %.17g", i, m.src, m.deliver,
              het_lane_now(&g_lane), want_src[i], want_t[i]);
    }
    env_close(&e, "way in");
}

/* Virtual clock, messages of at least 64 KiB wait for their receive (rndv_bytes; hand-derived,
 * 1 ms latency, 100 MB/s, every rank its own node). One sender: rank 1 sends rank 0 50 kB
 * and 100 kB at V = 0 on two tags; rank 0 posts both receives at V = 5 ms: the 100 kB moves
 * from then, in at 5 + 1 + 1 = 7 ms; the 50 kB moved when sent (in at 1.5 ms), V stays 5 ms.
 * From any sender (a parameter server): rank 1 sends 200 kB at V = 0, rank 2 70 kB at
 * V = 0.5 ms; rank 0's receive posted at V = 0 takes rank 1's, sent first (an eager model
 * shares the way in and gives rank 2's first); its bytes wait for its header (H = 1 ms + 48
 * bytes / bandwidth: hetrain's payload follows its header, whose arrival posts the payload's
 * receive) and move alone from H + 1 ms: in at H + 3 ms; the next receive, posted then, moves
 * rank 2's from then: in at H + 3 + 1 + 0.7 ms. */
static void test_rendezvous(void) {
    if (g_size < 3) return;
    env e;
    het_netem ne = {.lat_s = 1e-3, .bw_bytes_per_s = 100e6, .rndv_bytes = 65536};
    CHECK(env_open(&e, 1, ne, HET_CLOCK_VIRTUAL), "%s", het_error_msg());
    static unsigned char buf[200000], small[50000];
    het_msg m[2];
    if (g_rank == 1) { /* the 50 kB first: the 100 kB leaves behind it, at 0.5 ms */
        CHECK(het_comm_isend(e.c, HET_COMM_WORLD, 0, HET_TAG_USER, small, sizeof small, &m[1]) ==
              HET_OK && het_comm_isend(e.c, HET_COMM_WORLD, 0, HET_TAG_PARAMS, buf, 100000,
                                       &m[0]) == HET_OK &&
              het_comm_msg_waitall(e.c, 2, m) == HET_OK, "%s", het_error_msg());
    } else if (g_rank == 0) {
        het_lane_advance_to(&g_lane, 5e-3);
        CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, 1, HET_TAG_PARAMS, buf, sizeof buf, &m[0]) ==
              HET_OK && het_comm_irecv(e.c, HET_COMM_WORLD, 1, HET_TAG_USER, small,
                                       sizeof small, &m[1]) == HET_OK &&
              het_comm_msg_wait(e.c, &m[1]) == HET_OK, "%s", het_error_msg());
        CHECK(fabs(m[1].deliver - 1.5e-3) < 1e-12 && fabs(het_lane_now(&g_lane) - 5e-3) < 1e-12,
              "rendezvous: 50 kB in at %.17g (V %.17g), expected 1.5 ms (V 5 ms)", m[1].deliver,
              het_lane_now(&g_lane));
        CHECK(het_comm_msg_wait(e.c, &m[0]) == HET_OK, "%s", het_error_msg());
        CHECK(fabs(m[0].deliver - 7e-3) < 1e-12 && fabs(het_lane_now(&g_lane) - 7e-3) < 1e-12,
              "rendezvous: 100 kB in at %.17g (V %.17g), expected 7 ms", m[0].deliver,
              het_lane_now(&g_lane));
    }
    env_close(&e, "rendezvous, one sender");
    CHECK(env_open(&e, 1, ne, HET_CLOCK_VIRTUAL), "%s", het_error_msg()); /* queues empty */
    if (g_rank == 1 || g_rank == 2) {
        het_lane_advance_to(&g_lane, g_rank == 1 ? 0.0 : 0.5e-3);
        CHECK(het_comm_isend(e.c, HET_COMM_WORLD, 0, HET_TAG_GRADS, buf,
                             g_rank == 1 ? 200000 : 70000, &m[0]) == HET_OK &&
              het_comm_msg_wait(e.c, &m[0]) == HET_OK, "%s", het_error_msg());
    }
    if (g_rank > 0) {
        CHECK(het_comm_p2p_done(e.c, HET_COMM_WORLD, 0, HET_TAG_GRADS, &m[0]) == HET_OK &&
              het_comm_msg_wait(e.c, &m[0]) == HET_OK, "%s", het_error_msg());
        env_close(&e, "rendezvous");
        return;
    }
    const int want_src[2] = {1, 2};
    const double H = 1e-3 + (double)sizeof(het_msg_hdr) / 100e6;
    const double want_t[2] = {H + 3e-3, H + 4.7e-3};
    for (int i = 0; i < 3; i++) {
        CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, HET_ANY_SOURCE, HET_TAG_GRADS, buf, sizeof buf,
                             &m[0]) == HET_OK && het_comm_msg_wait(e.c, &m[0]) == HET_OK, "%s",
              het_error_msg());
        if (i == 2) {
            CHECK(m[0].done, "rendezvous: after both, done from %d", m[0].src);
            continue;
        }
        CHECK(!m[0].done && m[0].src == want_src[i] && fabs(m[0].deliver - want_t[i]) < 1e-12,
              "rendezvous: message %d from rank %d in at %.17g, expected rank %d at %.17g", i,
              m[0].src, m[0].deliver, want_src[i], want_t[i]);
    }
    env_close(&e, "rendezvous");
}

/* Virtual clock, a collective beside messages: rank 0 sends rank 1 (another node) 1 MB at V = 0
 * (its way out busy until 10 ms at 100 MB/s), then every rank all-reduces 4 floats: the
 * all-reduce starts behind rank 0's message, at 10 ms, and ends 10 ms + its model for all;
 * rank 1 then takes the message, in at 11 ms. */
static void test_collective_behind(void) {
    if (g_size < 2) return;
    env e;
    het_netem ne = {.lat_s = 1e-3, .bw_bytes_per_s = 100e6};
    CHECK(env_open(&e, 1, ne, HET_CLOCK_VIRTUAL), "%s", het_error_msg());
    static unsigned char big[1000000];
    het_msg m;
    if (g_rank == 0)
        CHECK(het_comm_isend(e.c, HET_COMM_WORLD, 1, HET_TAG_PARAMS, big, sizeof big, &m) ==
              HET_OK, "%s", het_error_msg());
    float x[4] = {1, 2, 3, 4};
    const double model = het_comm_allreduce_model(e.c, HET_COMM_WORLD, sizeof x, !het_stall_on());
    CHECK(het_comm_allreduce_sum(e.c, HET_COMM_WORLD, x, 4) == HET_OK, "%s", het_error_msg());
    CHECK(model > 0.0 && fabs(het_lane_now(&g_lane) - (0.010 + model)) < 1e-12, "rank %d: the "
          "all-reduce ended at %.17g, expected 10 ms + %.17g (behind rank 0's message)", g_rank,
          het_lane_now(&g_lane), model);
    if (g_rank == 0) CHECK(het_comm_msg_wait(e.c, &m) == HET_OK, "%s", het_error_msg());
    if (g_rank == 1) {
        CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, 0, HET_TAG_PARAMS, big, sizeof big, &m) ==
              HET_OK && het_comm_msg_wait(e.c, &m) == HET_OK, "%s", het_error_msg());
        CHECK(fabs(m.deliver - 0.011) < 1e-12, "the message in at %.17g", m.deliver);
    }
    env_close(&e, "collective behind");
}

/* Virtual clock: one receive per sender, rank r sending at 10 ms (P - r): waitany gives them
 * in virtual order (P-1 first), whatever order they reach MPI in. */
static void test_waitany(void) {
    if (g_size < 2) return;
    env e;
    het_netem ne = {.lat_s = 1e-3, .bw_bytes_per_s = 100e6};
    CHECK(env_open(&e, 1, ne, HET_CLOCK_VIRTUAL), "%s", het_error_msg());
    if (g_rank > 0) {
        het_msg m;
        int v = g_rank;
        het_sleep_s(0.02 * (g_size - g_rank)); /* the latest stamp first in real time */
        het_lane_advance(&g_lane, 0.010 * (g_size - g_rank));
        CHECK(het_comm_isend(e.c, HET_COMM_WORLD, 0, HET_TAG_COUNT, &v, sizeof v, &m) ==
              HET_OK && het_comm_msg_wait(e.c, &m) == HET_OK, "%s", het_error_msg());
    } else {
        het_msg m[3];
        int v[3] = {0, 0, 0}, n = g_size - 1;
        for (int i = 0; i < n; i++)
            CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, i + 1, HET_TAG_COUNT, &v[i], sizeof v[i],
                                 &m[i]) == HET_OK, "%s", het_error_msg());
        for (int k = 0; k < n; k++) {
            int idx = -1;
            CHECK(het_comm_msg_waitany(e.c, n, m, &idx) == HET_OK, "%s", het_error_msg());
            CHECK(idx == n - 1 - k && v[idx] == idx + 1, "waitany %d: index %d, expected %d",
                  k, idx, n - 1 - k);
        }
        CHECK(het_lane_now(&g_lane) == 0.010 * (g_size - 1) + (1e-3 + 4.0 / 100e6), "V %.17g",
              het_lane_now(&g_lane));
    }
    env_close(&e, "waitany");
}

/* Chunks: 64-byte chunks, 4000 floats in 250 MPI messages; then one too large for its
 * buffer (refused, drained) and one after it that must arrive intact. */
static void test_chunks(void) {
    if (g_size < 2) return;
    env e;
    het_netem off = {0};
    CHECK(env_open(&e, 1, off, HET_CLOCK_WALL), "%s", het_error_msg());
    het_comm_set_chunk(e.c, 16);
    enum { N = 4000 };
    float *a = malloc(N * sizeof *a), *b = calloc(N, sizeof *b);
    for (int i = 0; i < N; i++) a[i] = (float)(g_rank * N + i) * 0.5f;
    int to = (g_rank + 1) % g_size, from = (g_rank - 1 + g_size) % g_size;
    het_msg s[3], r[3];
    CHECK(het_comm_isend(e.c, HET_COMM_WORLD, to, 5, a, N * sizeof *a, &s[0]) == HET_OK &&
          het_comm_isend(e.c, HET_COMM_WORLD, to, 5, a, 100 * sizeof *a, &s[1]) == HET_OK &&
          het_comm_isend(e.c, HET_COMM_WORLD, to, 5, a + 7, 3 * sizeof *a, &s[2]) == HET_OK,
          "%s", het_error_msg());
    CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, from, 5, b, N * sizeof *b, &r[0]) == HET_OK &&
          het_comm_msg_wait(e.c, &r[0]) == HET_OK, "%s", het_error_msg());
    int bad = 0;
    for (int i = 0; i < N; i++) bad += b[i] != (float)(from * N + i) * 0.5f;
    CHECK(bad == 0 && r[0].bytes == N * sizeof *b, "rank %d: %d of %d floats wrong", g_rank,
          bad, N);
    float small[8];
    CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, from, 5, small, sizeof small, &r[1]) == HET_OK &&
          het_comm_msg_wait(e.c, &r[1]) == HET_EINVAL && strstr(het_error_msg(),
          "400 bytes from rank") && strstr(het_error_msg(), "buffer of 32 bytes"),
          "too large: %s", het_error_msg());
    CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, from, 5, small, sizeof small, &r[2]) == HET_OK &&
          het_comm_msg_wait(e.c, &r[2]) == HET_OK && r[2].bytes == 12 &&
          small[0] == (float)(from * N + 7) * 0.5f && small[2] == (float)(from * N + 9) * 0.5f,
          "after the refused one: %zu bytes, %g", r[2].bytes, (double)small[0]);
    CHECK(het_comm_msg_waitall(e.c, 3, s) == HET_OK, "%s", het_error_msg());
    het_comm_stats st = het_comm_get_stats(e.c);
    CHECK(st.bytes == (N + 103) * sizeof(float) && st.calls == 3, "counted %llu bytes, %llu "
          "calls", (unsigned long long)st.bytes, (unsigned long long)st.calls);
    free(a);
    free(b);
    env_close(&e, "chunks");
}

/* Rank 0 leaves header receives posted for every sender (a probe from any sender) and frees
 * its comm: they are cancelled, so a message sent later on the same topology's communicator
 * reaches a new comm's receive. */
static void test_cancel(void) {
    if (g_size < 2) return;
    het_topo t;
    het_netem off = {0};
    CHECK(het_topo_init(&t, MPI_COMM_WORLD, 1) == HET_OK, "%s", het_error_msg());
    het_comm *c = NULL;
    CHECK(het_comm_create(&c, &t, off) == HET_OK, "%s", het_error_msg());
    het_comm_set_lane(c, &g_lane);
    int flag = 1;
    if (g_rank == 0)
        CHECK(het_comm_probe(c, HET_COMM_WORLD, HET_ANY_SOURCE, 9, &flag, NULL, NULL) ==
              HET_OK && flag == 0, "probe found %d", flag);
    het_comm_free(c); /* rank 0: its posted receives cancelled */
    barrier();
    CHECK(het_comm_create(&c, &t, off) == HET_OK, "%s", het_error_msg());
    het_comm_set_lane(c, &g_lane);
    het_msg m;
    int v = -1;
    if (g_rank > 0) {
        v = 100 + g_rank;
        CHECK(het_comm_isend(c, HET_COMM_WORLD, 0, 9, &v, sizeof v, &m) == HET_OK &&
              het_comm_msg_wait(c, &m) == HET_OK, "%s", het_error_msg());
    } else {
        for (int r = 1; r < g_size; r++) {
            CHECK(het_comm_irecv(c, HET_COMM_WORLD, r, 9, &v, sizeof v, &m) == HET_OK &&
                  het_comm_msg_wait(c, &m) == HET_OK && v == 100 + r, "from rank %d: %d", r, v);
        }
    }
    barrier();
    CHECK(het_comm_p2p_pending(c) == 0, "pending after cancel");
    het_comm_free(c);
    het_topo_free(&t);
}

/* A group (het_comm_split: even and odd world ranks) on the virtual clock, 2 ranks per node:
 * ranks are the group's, costs and counters by the receiver's world node. */
static void test_group(void) {
    env e;
    het_netem ne = {.lat_s = 1e-3, .bw_bytes_per_s = 100e6,
                    .node_lat_s = 2e-6, .node_bw_bytes_per_s = 1e9};
    CHECK(env_open(&e, 2, ne, HET_CLOCK_VIRTUAL), "%s", het_error_msg());
    het_comm_scope g = HET_COMM_NONE;
    CHECK(het_comm_split(e.c, HET_COMM_WORLD, g_rank % 2, g_rank, &g) == HET_OK, "%s",
          het_error_msg());
    int n = het_comm_scope_size(e.c, g), me = het_comm_scope_rank(e.c, g);
    if (n >= 2) { /* group rank k is world rank 2k + color: nodes of 2 put them apart */
        int to = (me + 1) % n, from = (me - 1 + n) % n, v = me, got = -1;
        het_msg s, r;
        CHECK(het_comm_isend(e.c, g, to, HET_TAG_USER, &v, sizeof v, &s) == HET_OK &&
              het_comm_irecv(e.c, g, from, HET_TAG_USER, &got, sizeof got, &r) == HET_OK &&
              het_comm_msg_wait(e.c, &s) == HET_OK && het_comm_msg_wait(e.c, &r) == HET_OK,
              "%s", het_error_msg());
        CHECK(got == from && r.src == from, "group: got %d from %d, expected %d", got, r.src,
              from);
        double cost = 1e-3 + 4.0 / 100e6;
        CHECK(het_lane_now(&g_lane) == cost && r.deliver == cost, "group: V %.17g, expected %.17g",
              het_lane_now(&g_lane), cost);
        het_comm_stats st = het_comm_get_stats(e.c);
        CHECK(st.bytes_cross == 4 && st.calls_cross == 1 && st.bytes_node == 0, "group: cross "
              "%llu node %llu", (unsigned long long)st.bytes_cross,
              (unsigned long long)st.bytes_node);
    }
    env_close(&e, "group");
}

/* Rank 0: its stderr into a new file (its name into path); returns the saved stderr. */
static int capture_start(char *path) {
    if (g_rank != 0) return -1;
    int fd = mkstemp(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    close(fd);
    return saved;
}

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

/* --stall-warn 2 on the virtual clock: rank 0 receives from any sender; every sender but rank
 * 1 sends at once, rank 1 after 3 s, all at V = 0. Rank 0's stall line names rank 1 alone,
 * and it takes rank 1's message first (the same time: by rank). */
static void test_stall(void) {
    if (g_size < 2) return;
    env e;
    het_netem ne = {.lat_s = 1e-3, .bw_bytes_per_s = 100e6};
    CHECK(env_open(&e, 1, ne, HET_CLOCK_VIRTUAL), "%s", het_error_msg());
    CHECK(het_stall_start(MPI_COMM_WORLD, 2, 0) == HET_OK, "%s", het_error_msg());
    het_stall_where("test", 1, 7);
    char path[64] = "/tmp/het_p2p_XXXXXX";
    int saved = capture_start(path), v = g_rank;
    het_msg m;
    if (g_rank > 0) {
        if (g_rank == 1) het_sleep_s(3.0);
        CHECK(het_comm_isend(e.c, HET_COMM_WORLD, 0, HET_TAG_TEST, &v, sizeof v, &m) == HET_OK &&
              het_comm_msg_wait(e.c, &m) == HET_OK, "%s", het_error_msg());
        CHECK(het_comm_p2p_done(e.c, HET_COMM_WORLD, 0, HET_TAG_TEST, &m) == HET_OK &&
              het_comm_msg_wait(e.c, &m) == HET_OK, "%s", het_error_msg());
    } else {
        for (int k = 1; k <= g_size; k++) /* then every sender done */
            CHECK(het_comm_irecv(e.c, HET_COMM_WORLD, HET_ANY_SOURCE, HET_TAG_TEST, &v,
                                 sizeof v, &m) == HET_OK && het_comm_msg_wait(e.c, &m) ==
                  HET_OK && m.src == (k < g_size ? k : HET_ANY_SOURCE) && m.done == (k ==
                  g_size), "receive %d: from %d (done %d)", k, m.src, m.done);
        char text[2048];
        capture_end(saved, path, text, sizeof text);
        const char *want = "hetrain: stall: rank 0 has waited 2 s in recv from rank 1 (test, "
                           "epoch 1 step 7); not arrived: rank 1\n";
        CHECK(strcmp(text, want) == 0, "stall line:\n  got  '%s'\n  want '%s'", text, want);
    }
    het_stall_stop();
    env_close(&e, "stall");
}

int main(int argc, char **argv) {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &(int){0});
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (!het_test_world_size_ok(g_size)) MPI_Abort(MPI_COMM_WORLD, 1);
    test_refusals();
    test_wall_delay();
    test_virtual_receive(0);
    test_virtual_receive(1);
    test_stream();
    test_order();
    test_way_in();
    test_rendezvous();
    test_collective_behind();
    test_waitany();
    test_chunks();
    test_cancel();
    test_group();
    test_stall();
    int failed = het_test_failures;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("test_p2p: %d checks, %d failed (%d ranks)\n", het_test_checks, failed, g_size);
    MPI_Finalize();
    return failed ? 1 : 0;
}

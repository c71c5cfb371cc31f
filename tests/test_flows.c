/* Flows that share links (emul/flows.c) against hand-derived times, capacities in bytes/s:
 * - one flow: start + latency + bytes / bandwidth;
 * - two flows on one link get half each; a stream of M messages sent at once through a link
 *   takes M bytes / bw + latency;
 * - 4 senders into one receiver share its NIC: each at a quarter;
 * - a node's 2 ranks on one uplink: their own NICs are faster, the uplink halves them;
 * - max-min, not equal shares: a flow held to 2 by a slow second link leaves 8 of a 10 link to
 *   the other; a rate bound the same way;
 * - a later flow: the first runs alone until the second starts, then both share;
 * - SimGrid's refinements: a bandwidth factor (bytes move at rate x factor), a weighted back
 *   route (cross-traffic at 0.05) that the reverse flow shares;
 * - online: advancing in small steps gives the same times as running offline, bit for bit;
 * - the counters: bytes each resource carried, and its busy time; no resource carried more
 *   than capacity x busy time;
 * - refusals: a bad route, a negative size, a start before the network's time;
 * - the rate a flow takes now (0 in its latency, half a link beside another, 0 once done), and
 *   setting the time back: refused while a flow is live, then a flow starts at the earlier
 *   time and completed flows keep theirs;
 * - never stuck: with cross-traffic weights (0.05) a resource's sum of weights keeps a rounding
 *   residue once all its flows are fixed, which made later rounds of the max-min see a share of
 *   0 there and leave live flows at rate 0 until the next event (a broadcast's scatter +
 *   all-gather 32 % late); random exchanges between 4 nodes, every live flow past its latency
 *   has a rate > 0 at every event, and every flow ends. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "emul/flows.h"
#include "hetrain/core.h"
#include "test.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * (fabs(b) > 1 ? fabs(b) : 1); }

#define EXPECT_T(f, id, want)                                                                  \
    CHECK(near(het_flows_done(f, id), (want)), "flow %d done at %.15g s, expected %.15g s",  \
          (id), het_flows_done(f, id), (double)(want))

static void test_one_and_two(void) {
    double cap[1] = {100.0};
    int r0[1] = {0};
    het_flows *f = het_flows_new(1, cap);
    int a = het_flows_add(f, 1.0, 50.0, 0.25, 0, r0, 1);
    het_flows_run(f);
    EXPECT_T(f, a, 1.0 + 0.25 + 0.5);
    het_flows_free(f);

    f = het_flows_new(1, cap);
    a = het_flows_add(f, 0.0, 100.0, 0.1, 0, r0, 1);
    int b = het_flows_add(f, 0.0, 100.0, 0.1, 0, r0, 1);
    het_flows_run(f);
    EXPECT_T(f, a, 0.1 + 2.0); /* each at 50 */
    EXPECT_T(f, b, 0.1 + 2.0);
    het_flows_free(f);

    /* a stream of M messages sent at once: M bytes / bw + latency, never faster than the link */
    enum { M = 10 };
    f = het_flows_new(1, cap);
    int id[M];
    for (int i = 0; i < M; i++) id[i] = het_flows_add(f, 0.0, 30.0, 0.05, 0, r0, 1);
    het_flows_run(f);
    for (int i = 0; i < M; i++) EXPECT_T(f, id[i], 0.05 + M * 30.0 / 100.0);
    CHECK(near(het_flows_resource_bytes(f, 0), M * 30.0), "link carried %g bytes",
          het_flows_resource_bytes(f, 0));
    CHECK(near(het_flows_resource_busy_s(f, 0), M * 30.0 / 100.0), "link busy %g s",
          het_flows_resource_busy_s(f, 0));
    het_flows_free(f);
}

static void test_incast_and_uplink(void) {
    /* 4 senders (NIC out 0..3, 100 each) into one receiver (NIC in 4, 100) */
    double cap[5] = {100, 100, 100, 100, 100};
    het_flows *f = het_flows_new(5, cap);
    int id[4];
    for (int s = 0; s < 4; s++) {
        int route[2] = {s, 4};
        id[s] = het_flows_add(f, 0.0, 25.0, 0.0, 0, route, 2);
    }
    het_flows_run(f);
    for (int s = 0; s < 4; s++) EXPECT_T(f, id[s], 4 * 25.0 / 100.0); /* 25 each */
    het_flows_free(f);

    /* a node's 2 ranks: NICs 0, 1 at 1000, their uplink 2 at 100, the far side 3 at 1000 */
    double cap2[4] = {1000, 1000, 100, 1000};
    f = het_flows_new(4, cap2);
    int ra[3] = {0, 2, 3}, rb[3] = {1, 2, 3};
    int a = het_flows_add(f, 0.0, 50.0, 0.001, 0, ra, 3);
    int b = het_flows_add(f, 0.0, 50.0, 0.001, 0, rb, 3);
    het_flows_run(f);
    EXPECT_T(f, a, 0.001 + 1.0); /* 50 each through the uplink */
    EXPECT_T(f, b, 0.001 + 1.0);
    het_flows_free(f);
}

static void test_maxmin(void) {
    /* link 0 at 10 carries A and B; B also crosses link 1 at 2: B at 2, A at 8 */
    double cap[2] = {10, 2};
    het_flows *f = het_flows_new(2, cap);
    int ra[1] = {0}, rb[2] = {0, 1};
    int a = het_flows_add(f, 0.0, 16.0, 0.0, 0, ra, 1);
    int b = het_flows_add(f, 0.0, 4.0, 0.0, 0, rb, 2);
    het_flows_run(f);
    EXPECT_T(f, a, 2.0); /* 16 at 8 */
    EXPECT_T(f, b, 2.0); /* 4 at 2 */
    het_flows_free(f);

    /* B done first: A alone then. A 20 bytes: 8/s for 1 s (B's 2 bytes), then 10/s: 1.2 s */
    f = het_flows_new(2, cap);
    a = het_flows_add(f, 0.0, 20.0, 0.0, 0, ra, 1);
    b = het_flows_add(f, 0.0, 2.0, 0.0, 0, rb, 2);
    het_flows_run(f);
    EXPECT_T(f, b, 1.0);
    EXPECT_T(f, a, 1.0 + 12.0 / 10.0);
    het_flows_free(f);

    /* a rate bound as a second link: B bound at 3 on link 0 alone */
    double one[1] = {10};
    f = het_flows_new(1, one);
    a = het_flows_add(f, 0.0, 14.0, 0.0, 0, ra, 1);
    b = het_flows_add(f, 0.0, 6.0, 0.0, 3.0, ra, 1);
    het_flows_run(f);
    EXPECT_T(f, b, 2.0);  /* 6 at 3 */
    EXPECT_T(f, a, 2.0);  /* 14 at 7 */
    het_flows_free(f);
}

static void test_weighted(void) {
    double cap[2] = {100, 100};
    int r0[1] = {0};
    het_flows *f = het_flows_new(2, cap);
    int a = het_flows_add_weighted(f, 0.0, 100.0, 0.0, 0, 0.5, r0, NULL, 1);
    het_flows_run(f);
    EXPECT_T(f, a, 2.0); /* rate 100, 50 bytes/s moved */
    CHECK(near(het_flows_resource_bytes(f, 0), 200.0), "the link gave %g bytes of capacity",
          het_flows_resource_bytes(f, 0));
    het_flows_free(f);

    /* A on link 0 with its acknowledgements on link 1 (0.05), B on link 1: link 1 limits both
     * to 100 / 1.05 */
    f = het_flows_new(2, cap);
    int ra[2] = {0, 1}, rb[1] = {1};
    double wa[2] = {1.0, 0.05};
    a = het_flows_add_weighted(f, 0.0, 100.0, 0.0, 0, 1.0, ra, wa, 2);
    int b = het_flows_add_weighted(f, 0.0, 100.0, 0.0, 0, 1.0, rb, NULL, 1);
    het_flows_run(f);
    EXPECT_T(f, a, 1.05);
    EXPECT_T(f, b, 1.05);
    CHECK(het_flows_add_weighted(f, 2.0, 1.0, 0.0, 0, 0.0, rb, NULL, 1) < 0, "factor 0 accepted");
    double w0[1] = {0.0};
    CHECK(het_flows_add_weighted(f, 2.0, 1.0, 0.0, 0, 1.0, rb, w0, 1) < 0, "weight 0 accepted");
    het_flows_free(f);
}

static void test_later_flow(void) {
    double cap[1] = {10};
    int r0[1] = {0};
    het_flows *f = het_flows_new(1, cap);
    int a = het_flows_add(f, 0.0, 10.0, 0.0, 0, r0, 1);
    int b = het_flows_add(f, 0.5, 10.0, 0.0, 0, r0, 1);
    het_flows_run(f);
    /* A alone 0.5 s (5 bytes), both at 5 until A's last 5: 1.5 s; B's last 5 alone: 2.0 s */
    EXPECT_T(f, a, 1.5);
    EXPECT_T(f, b, 2.0);
    CHECK(near(het_flows_resource_busy_s(f, 0), 2.0), "busy %g", het_flows_resource_busy_s(f, 0));
    het_flows_free(f);
}

/* Many flows on a small network, offline against online (advance in steps of `dt`, adding each
 * flow once the network reached its start): the same times bit for bit, and no resource over
 * its capacity. */
static void test_online(void) {
    double cap[6] = {125e6, 125e6, 125e6, 125e6, 12.5e6, 1e9};
    enum { N = 200 };
    double start[N], bytes[N];
    int route[N][3], n[N];
    uint64_t x = 42;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        start[i] = (double)(i / 4) * 1e-4;
        bytes[i] = 1000.0 + (double)((x >> 33) % 100000);
        int s = (int)((x >> 20) % 4), d = (s + 1 + (int)((x >> 10) % 3)) % 4;
        route[i][0] = s;
        route[i][1] = 4; /* the backbone */
        route[i][2] = d;
        n[i] = (x >> 5) & 1 ? 3 : 2;
    }
    het_flows *off = het_flows_new(6, cap), *on = het_flows_new(6, cap);
    for (int i = 0; i < N; i++) het_flows_add(off, start[i], bytes[i], 50e-6, 0, route[i], n[i]);
    het_flows_run(off);
    int next = 0;
    for (double t = 0.0; next < N || isfinite(het_flows_next(on)); t += 3.7e-5) {
        while (next < N && start[next] <= t) {
            het_flows_advance(on, start[next]);
            het_flows_add(on, start[next], bytes[next], 50e-6, 0, route[next], n[next]);
            next++;
        }
        het_flows_advance(on, t);
        if (t > 100.0) break;
    }
    het_flows_run(on);
    int same = 0, all_done = 0;
    for (int i = 0; i < N; i++) {
        same += het_flows_done(off, i) == het_flows_done(on, i);
        all_done += het_flows_done(off, i) >= start[i] + 50e-6 + bytes[i] / 1e9;
    }
    CHECK(all_done == N, "%d of %d flows done no sooner than latency + bytes / fastest", all_done,
          N);
    /* online advancing splits the spans between events, so the bytes moved are summed in
     * other pieces: equal to rounding, not bit for bit */
    int close = 0;
    for (int i = 0; i < N; i++) close += near(het_flows_done(off, i), het_flows_done(on, i)) ||
                                         fabs(het_flows_done(off, i) - het_flows_done(on, i)) < 1e-12;
    CHECK(close == N, "%d of %d flows (%d bit for bit) done at the offline time", close, N, same);
    for (int r = 0; r < 6; r++) {
        double b = het_flows_resource_bytes(off, r), busy = het_flows_resource_busy_s(off, r);
        CHECK(b <= cap[r] * busy * (1 + 1e-9), "resource %d carried %g bytes in %g s busy at %g "
              "bytes/s", r, b, busy, cap[r]);
    }
    /* the same flows again: bit for bit */
    het_flows *again = het_flows_new(6, cap);
    for (int i = 0; i < N; i++) het_flows_add(again, start[i], bytes[i], 50e-6, 0, route[i], n[i]);
    het_flows_run(again);
    int bits = 0;
    for (int i = 0; i < N; i++) bits += het_flows_done(off, i) == het_flows_done(again, i);
    CHECK(bits == N, "a second run: %d of %d flows at the same time bit for bit", bits, N);
    het_flows_free(off);
    het_flows_free(on);
    het_flows_free(again);
}

static void test_refusals(void) {
    double cap[2] = {10, 10};
    CHECK(het_flows_new(0, cap) == NULL, "no resources accepted");
    double bad[1] = {0};
    CHECK(het_flows_new(1, bad) == NULL && strstr(het_error_msg(), "capacity 0"),
          "capacity 0: %s", het_error_msg());
    het_flows *f = het_flows_new(2, cap);
    int r[2] = {0, 2};
    CHECK(het_flows_add(f, 0, 1, 0, 0, r, 2) < 0 && strstr(het_error_msg(), "resource 2"),
          "resource out of range: %s", het_error_msg());
    CHECK(het_flows_add(f, 0, 1, 0, 0, r, 0) < 0, "empty route accepted");
    int ok[1] = {0};
    CHECK(het_flows_add(f, 0, -1, 0, 0, ok, 1) < 0, "negative bytes accepted");
    CHECK(het_flows_add(f, 0, NAN, 0, 0, ok, 1) < 0, "NaN bytes accepted");
    het_flows_advance(f, 5.0);
    CHECK(het_flows_add(f, 4.0, 1, 0, 0, ok, 1) < 0 && strstr(het_error_msg(), "before"),
          "a start in the past: %s", het_error_msg());
    int z = het_flows_add(f, 5.0, 0.0, 0.5, 0, ok, 1);
    het_flows_run(f);
    EXPECT_T(f, z, 5.5); /* no bytes: the latency alone */
    het_flows_free(f);
}

static void test_rate_and_rewind(void) {
    double cap[1] = {100.0};
    int r0[1] = {0};
    het_flows *f = het_flows_new(1, cap);
    int a = het_flows_add(f, 0.0, 100.0, 0.5, 0, r0, 1);
    int b = het_flows_add(f, 0.0, 100.0, 0.0, 0, r0, 1);
    CHECK(het_flows_rate(f, a) == 0.0 && het_flows_rate(f, b) == 0.0, "rates before any event: "
          "%g %g", het_flows_rate(f, a), het_flows_rate(f, b));
    het_flows_advance(f, 0.25); /* b alone, a in its latency */
    CHECK(near(het_flows_rate(f, b), 100.0) && het_flows_rate(f, a) == 0.0, "b alone at %g, a "
          "at %g", het_flows_rate(f, b), het_flows_rate(f, a));
    het_flows_advance(f, 0.5); /* both active: b moved 50 of 100 */
    CHECK(near(het_flows_rate(f, a), 50.0) && near(het_flows_rate(f, b), 50.0), "shares %g %g",
          het_flows_rate(f, a), het_flows_rate(f, b));
    CHECK(het_flows_rewind(f, 0.0) == HET_EINVAL && strstr(het_error_msg(), "live"),
          "rewind with flows live: %s", het_error_msg());
    het_flows_run(f);
    EXPECT_T(f, b, 1.5); /* 50 more at 50 */
    EXPECT_T(f, a, 2.0); /* 50 by 1.5 at 50, 50 at 100 */
    CHECK(het_flows_rate(f, a) == 0.0, "a done, rate %g", het_flows_rate(f, a));
    CHECK(het_flows_rewind(f, 0.5) == HET_OK && het_flows_now(f) == 0.5, "rewind: now %g",
          het_flows_now(f));
    int c = het_flows_add(f, 0.5, 10.0, 0.0, 0, r0, 1);
    het_flows_run(f);
    EXPECT_T(f, c, 0.6);
    EXPECT_T(f, a, 2.0); /* kept */
    het_flows_free(f);
}

static void test_never_stuck(void) {
    double caps[8];
    for (int r = 0; r < 8; r++) caps[r] = 12.5e6;
    uint64_t seed = 12345;
    int stuck = 0, n_flows = 0, unfinished = 0;
    for (int round = 0; round < 200; round++) {
        het_flows *f = het_flows_new(8, caps);
        if (!f) { CHECK(0, "het_flows_new"); return; }
        double t = 0.0, start[40];
        int n = 0;
        for (int k = 0; k < 40; k++) { /* node a's uplink 2a, downlink 2a + 1 */
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            int a = (int)(seed >> 33) % 4, b = (a + 1 + (int)(seed >> 40) % 3) % 4;
            t += (double)((seed >> 50) % 4) * 0.004;
            het_flows_advance(f, t);
            const int route[4] = {2 * a, 2 * b + 1, 2 * b, 2 * a + 1};
            const double w[4] = {1.0, 1.0, 0.05, 0.05};
            double bytes = 67435.0 * (double)(1 + (seed >> 45) % 8);
            for (int i = 0; i < n; i++) /* those past their start (a new one is active at the
                                         * next event) */
                if (start[i] < t && het_flows_done(f, i) < 0.0 && het_flows_next(f) < INFINITY &&
                    !(het_flows_rate(f, i) > 0.0))
                    stuck++;
            if (het_flows_add_weighted(f, t, bytes, 0.0, 0.0, 0.94, route, w, 4) >= 0)
                start[n++] = t;
        }
        while (het_flows_next(f) < INFINITY) {
            het_flows_advance(f, het_flows_next(f));
            for (int i = 0; i < n; i++)
                if (het_flows_done(f, i) < 0.0 && !(het_flows_rate(f, i) > 0.0)) stuck++;
        }
        for (int i = 0; i < n; i++) unfinished += het_flows_done(f, i) < 0.0;
        n_flows += n;
        het_flows_free(f);
    }
    CHECK(n_flows == 200 * 40, "every flow added: %d", n_flows);
    CHECK(stuck == 0, "live flows at rate 0: %d times", stuck);
    CHECK(unfinished == 0, "flows never done: %d", unfinished);
}

int main(void) {
    test_never_stuck();
    test_one_and_two();
    test_incast_and_uplink();
    test_maxmin();
    test_later_flow();
    test_weighted();
    test_online();
    test_refusals();
    test_rate_and_rewind();
    return het_test_finish("test_flows");
}

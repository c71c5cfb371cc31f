/* The arbiter (emul/arbiter.c): flows posted by lanes at their own times, completed under a
 * conservative rule; hand-derived times, capacities in bytes/s:
 * - held back: a flow is not final while another lane runs at an earlier clock (it could still
 *   start a flow that shares the link); a later flow from that lane then shares the link and
 *   both end together (A: 10 bytes from 0, B: 5 from 0.5 at 10 bytes/s: 1.5 s each), the same
 *   bits as the two added offline;
 * - a wait for a message not posted yet holds back what could change after its sender's promise
 *   plus the lookahead, and no earlier; promises along a chain of waits add lookaheads;
 * - lanes that wait for each other with nothing posted (a deadlock of the program) hold nothing
 *   back;
 * - a lane inside a collective promises no less than the latest entry of its members, nor than
 *   the promise of a member not in yet (one that waits for a flow does not hold that flow
 *   back), but a member that entered and runs on counts with its entry; a flow found by its
 *   lane and count;
 * - a wait with a time limit: a flow that ends past it is not final and its least end shows it;
 *   one that ends before it is final;
 * - 4 senders into one receiver's NIC each get a quarter (4 s for 10 bytes each at 10 bytes/s);
 * - flows of one start enter the network in lane order whatever the order of their posts (the
 *   sum of weights 0.1, 0.2, 0.3 rounds differently the other way);
 * - reproducible: a neighbour exchange over 4 lanes with background flows on a shared backbone
 *   and cross-traffic (weights 0.05, whose sums round in the order they are taken),
 *   run under three random interleavings of the lanes' reports and settles: every flow's end the
 *   same bits in all three, and the same bits as adding every flow offline in (start, lane,
 *   count) order;
 * - rendezvous: a flow waiting for its receive holds back what could start after the receive's
 *   posting (or the receiver's promise) and starts at the later of its send and that posting;
 * - refusals: a post or a run before the lane's promise, a lane out of range or left, a wait
 *   for a flow not posted or for itself, a bad route. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "emul/arbiter.h"
#include "hetrain/core.h"
#include "test.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * (fabs(b) > 1 ? fabs(b) : 1); }

static void test_hold_and_share(void) {
    double cap[1] = {10.0};
    int r0[1] = {0};
    het_arbiter *a = het_arbiter_new(2, 1, cap);
    int A = het_arbiter_post(a, 0, 0.0, 10.0, 0.0, 1.0, r0, NULL, 1);
    CHECK(A == 0, "first flow id %d", A);
    CHECK(het_arbiter_wait(a, 0, 0.0, &A, 1, NULL, NULL, 0) == HET_OK, "wait");
    het_arbiter_settle(a);
    CHECK(het_arbiter_done(a, A) < 0, "A final at %g while lane 1 runs at 0",
          het_arbiter_done(a, A));
    het_arbiter_run(a, 1, 0.5);
    het_arbiter_settle(a);
    CHECK(het_arbiter_done(a, A) < 0, "A (alone: 1.0 s) final at %g while lane 1 runs at 0.5",
          het_arbiter_done(a, A));
    int B = het_arbiter_post(a, 1, 0.5, 5.0, 0.0, 1.0, r0, NULL, 1);
    het_arbiter_wait(a, 1, 0.5, &B, 1, NULL, NULL, 0);
    het_arbiter_settle(a);
    CHECK(near(het_arbiter_done(a, A), 1.5), "A done at %.17g, expected 1.5",
          het_arbiter_done(a, A));
    CHECK(near(het_arbiter_done(a, B), 1.5), "B done at %.17g, expected 1.5",
          het_arbiter_done(a, B));
    het_flows *off = het_flows_new(1, cap);
    int oa = het_flows_add(off, 0.0, 10.0, 0.0, 0, r0, 1);
    int ob = het_flows_add(off, 0.5, 5.0, 0.0, 0, r0, 1);
    het_flows_run(off);
    CHECK(het_flows_done(off, oa) == het_arbiter_done(a, A) &&
          het_flows_done(off, ob) == het_arbiter_done(a, B),
          "offline %.17g %.17g, arbiter %.17g %.17g", het_flows_done(off, oa),
          het_flows_done(off, ob), het_arbiter_done(a, A), het_arbiter_done(a, B));
    het_flows_free(off);
    het_arbiter_free(a);
}

static void test_lookahead(void) {
    double cap[1] = {10.0};
    int r0[1] = {0}, from0 = 0, from2 = 2;
    double look5 = 0.5, look1 = 0.1;
    het_arbiter *a = het_arbiter_new(3, 1, cap);
    int C = het_arbiter_post(a, 2, 0.0, 6.0, 0.0, 1.0, r0, NULL, 1);
    het_arbiter_wait(a, 2, 0.0, &C, 1, NULL, NULL, 0);
    het_arbiter_wait(a, 1, 0.0, NULL, 0, &from0, &look5, 1);
    het_arbiter_run(a, 0, 0.2);
    het_arbiter_settle(a);
    CHECK(het_arbiter_done(a, C) < 0, "C final at %g with lane 0 at 0.2",
          het_arbiter_done(a, C));
    CHECK(near(het_arbiter_promise(a, 1), 0.7), "lane 1 promises %.17g, expected 0.2 + 0.5",
          het_arbiter_promise(a, 1));
    het_arbiter_run(a, 0, 0.55);
    het_arbiter_settle(a);
    CHECK(het_arbiter_done(a, C) < 0, "C (0.6) final with lane 0 at 0.55");
    het_arbiter_run(a, 0, 0.6);
    het_arbiter_settle(a);
    CHECK(near(het_arbiter_done(a, C), 0.6), "C done at %.17g, expected 0.6",
          het_arbiter_done(a, C));
    /* a chain: lane 1 waits for lane 0, which waits for lane 2, which runs at 0.6 */
    het_arbiter_wait(a, 0, 0.6, NULL, 0, &from2, &look1, 1);
    het_arbiter_run(a, 2, 0.6);
    het_arbiter_settle(a);
    CHECK(near(het_arbiter_promise(a, 0), 0.7) && near(het_arbiter_promise(a, 1), 1.2),
          "promises %.17g %.17g, expected 0.7 and 1.2", het_arbiter_promise(a, 0),
          het_arbiter_promise(a, 1));
    het_arbiter_free(a);
}

static void test_cycle(void) {
    double cap[1] = {10.0}, look = 0.1;
    int r0[1] = {0}, l0 = 0, l1 = 1;
    het_arbiter *a = het_arbiter_new(3, 1, cap);
    het_arbiter_wait(a, 0, 0.0, NULL, 0, &l1, &look, 1);
    het_arbiter_wait(a, 1, 0.0, NULL, 0, &l0, &look, 1);
    int D = het_arbiter_post(a, 2, 0.0, 20.0, 0.0, 1.0, r0, NULL, 1);
    het_arbiter_wait(a, 2, 0.0, &D, 1, NULL, NULL, 0);
    het_arbiter_settle(a);
    CHECK(near(het_arbiter_done(a, D), 2.0), "D done at %g beside a cycle, expected 2",
          het_arbiter_done(a, D));
    CHECK(isinf(het_arbiter_promise(a, 0)) && isinf(het_arbiter_promise(a, 1)),
          "a cycle promises %g %g, expected never", het_arbiter_promise(a, 0),
          het_arbiter_promise(a, 1));
    het_arbiter_free(a);
}

/* Collectives: lane 0 waits in one with lane 1 from 5 s; lane 1, not in yet, waits for a flow
 * that ends at 7 s: lane 0 resumes no earlier than lane 1's promise, so the flow is final
 * (were lane 0 taken as running at 5 s, it would wait for lane 1 forever); once both are in,
 * both promise 7 s. A member in another collective (of the other communicator) gives its own
 * promise (9 s: the member it waits for runs there). A member that entered (posted) at 5 s and
 * runs on at 20 s counts with its entry: 6 s, its own clock, not 20; one past the collective by
 * more than the entries kept counts as in (its entry unknown): the waiting lane's clock. */
static void test_group(void) {
    double cap[1] = {10.0};
    int r0[1] = {0}, g01[2] = {0, 1}, g12[2] = {1, 2};
    het_arbiter *a = het_arbiter_new(3, 1, cap);
    CHECK(het_arbiter_wait_group(a, 0, 5.0, 100, 1, g01, 2) == HET_OK, "wait in a group");
    int F = het_arbiter_post(a, 2, 0.0, 70.0, 0.0, 1.0, r0, NULL, 1);
    CHECK(het_arbiter_find(a, 2, 0) == F && het_arbiter_find(a, 2, 1) == -1 &&
          het_arbiter_find(a, 1, 0) == -1, "find: %d %d %d", het_arbiter_find(a, 2, 0),
          het_arbiter_find(a, 2, 1), het_arbiter_find(a, 1, 0));
    het_arbiter_leave(a, 2);
    het_arbiter_wait(a, 1, 0.0, &F, 1, NULL, NULL, 0);
    het_arbiter_settle(a);
    CHECK(near(het_arbiter_done(a, F), 7.0), "F done at %g, expected 7", het_arbiter_done(a, F));
    het_arbiter_wait_group(a, 1, 7.0, 100, 1, g01, 2);
    het_arbiter_settle(a);
    CHECK(near(het_arbiter_promise(a, 0), 7.0) && near(het_arbiter_promise(a, 1), 7.0),
          "both inside: promises %g %g, expected 7", het_arbiter_promise(a, 0),
          het_arbiter_promise(a, 1));
    het_arbiter_free(a);

    a = het_arbiter_new(3, 1, cap);
    het_arbiter_wait_group(a, 0, 5.0, 100, 1, g01, 2);
    het_arbiter_wait_group(a, 1, 6.0, 200, 1, g12, 2);
    het_arbiter_run(a, 2, 9.0);
    het_arbiter_settle(a);
    CHECK(near(het_arbiter_promise(a, 1), 9.0) && near(het_arbiter_promise(a, 0), 9.0),
          "another collective: promises %g %g, expected 9", het_arbiter_promise(a, 0),
          het_arbiter_promise(a, 1));
    het_arbiter_free(a);

    a = het_arbiter_new(2, 1, cap);
    CHECK(het_arbiter_enter(a, 1, 5.0, 100, 1) == HET_OK, "enter");
    het_arbiter_run(a, 1, 20.0);
    het_arbiter_wait_group(a, 0, 6.0, 100, 1, g01, 2);
    het_arbiter_settle(a);
    CHECK(near(het_arbiter_promise(a, 0), 6.0), "a member in and on: promise %g, expected 6",
          het_arbiter_promise(a, 0));
    for (int k = 2; k <= 100; k++) het_arbiter_enter(a, 1, 20.0 + k, 100, k);
    het_arbiter_wait_group(a, 0, 6.5, 100, 2, g01, 2);
    het_arbiter_settle(a);
    CHECK(near(het_arbiter_promise(a, 0), 6.5), "a member long past: promise %g, expected 6.5",
          het_arbiter_promise(a, 0));
    het_arbiter_free(a);
}

/* A wait with a time limit (a message inside the node arrives then): a flow that ends after it
 * is not final while the lane may resume first, and its least end (2 s) is past the limit
 * (1.5 s), so the limit wins; a flow that ends before it (1 s) is final. */
static void test_until(void) {
    double cap[1] = {10.0};
    int r0[1] = {0};
    for (int k = 0; k < 2; k++) {
        double bytes = k ? 10.0 : 20.0;
        het_arbiter *a = het_arbiter_new(2, 1, cap);
        int F = het_arbiter_post(a, 1, 0.0, bytes, 0.0, 1.0, r0, NULL, 1);
        het_arbiter_leave(a, 1);
        CHECK(het_arbiter_wait_until(a, 0, 0.0, 1.5, &F, 1, NULL, NULL, 0) == HET_OK, "wait");
        het_arbiter_settle(a);
        double d = het_arbiter_done(a, F), b = het_arbiter_wait_bound(a, 0);
        if (k == 0) {
            CHECK(d < 0 && near(b, 2.0), "ends at 2 s, limit 1.5 s: done %g, bound %g", d, b);
            het_arbiter_run(a, 0, 1.5);
            het_arbiter_wait(a, 0, 1.5, &F, 1, NULL, NULL, 0);
            het_arbiter_settle(a);
            CHECK(near(het_arbiter_done(a, F), 2.0), "then done at %g", het_arbiter_done(a, F));
        } else {
            CHECK(near(d, 1.0) && isinf(b), "ends at 1 s, limit 1.5 s: done %g, bound %g", d, b);
        }
        het_arbiter_free(a);
    }
    het_arbiter *a = het_arbiter_new(1, 1, cap);
    CHECK(het_arbiter_wait_until(a, 0, 1.0, 0.5, NULL, 0, NULL, NULL, 0) == HET_EINVAL,
          "a limit before the clock");
    het_arbiter_free(a);
}

static void test_incast(void) {
    double cap[5] = {10, 10, 10, 10, 10}; /* NICs out 0-3, the receiver's way in 4 */
    het_arbiter *a = het_arbiter_new(5, 5, cap);
    int id[4];
    het_arbiter_run(a, 4, 0.0);
    for (int i = 0; i < 4; i++) {
        int route[2] = {i, 4};
        id[i] = het_arbiter_post(a, i, 0.0, 10.0, 0.0, 1.0, route, NULL, 2);
        het_arbiter_wait(a, i, 0.0, &id[i], 1, NULL, NULL, 0);
    }
    het_arbiter_wait(a, 4, 0.0, id, 4, NULL, NULL, 0);
    het_arbiter_settle(a);
    for (int i = 0; i < 4; i++)
        CHECK(near(het_arbiter_done(a, id[i]), 4.0), "sender %d done at %g, expected 4", i,
              het_arbiter_done(a, id[i]));
    het_arbiter_free(a);
}

/* Flows of one start enter in lane order whatever the order of the posts: weights 0.1, 0.2, 0.3
 * on one link sum to 0.6000000000000001 in that order and to 0.6 the other way, so the three
 * flows' ends (bytes x the sum, at capacity 1) show the order. Lane 1 posts before lane 2, lane
 * 0 last, after a settle in which it still ran at 0. */
static void test_order(void) {
    double cap[1] = {1.0}, wt[3] = {0.1, 0.2, 0.3}, sum_fwd = -1, sum_rev = -1;
    int r0[1] = {0}, id[3];
    for (int rev = 0; rev < 2; rev++) {
        het_flows *off = het_flows_new(1, cap);
        for (int k = 0; k < 3; k++) {
            int i = rev ? 2 - k : k;
            het_flows_add_weighted(off, 0.0, 1.0, 0.0, 0, 1.0, r0, &wt[i], 1);
        }
        het_flows_run(off);
        *(rev ? &sum_rev : &sum_fwd) = het_flows_done(off, 0);
        het_flows_free(off);
    }
    CHECK(sum_fwd != sum_rev, "the sums round alike in both orders (%.17g): the test shows nothing",
          sum_fwd);
    het_arbiter *a = het_arbiter_new(3, 1, cap);
    int order[3] = {1, 2, 0};
    for (int k = 0; k < 3; k++) {
        int i = order[k];
        id[i] = het_arbiter_post(a, i, 0.0, 1.0, 0.0, 1.0, r0, &wt[i], 1);
        het_arbiter_wait(a, i, 0.0, &id[i], 1, NULL, NULL, 0);
        het_arbiter_settle(a);
    }
    for (int i = 0; i < 3; i++)
        CHECK(het_arbiter_done(a, id[i]) == sum_fwd, "lane %d's flow ends at %.17g, expected "
              "%.17g (lane order; the posting order gives %.17g)", i, het_arbiter_done(a, id[i]),
              sum_fwd, sum_rev);
    het_arbiter_free(a);
}

/* ---- reproducible under any interleaving ---- */

enum { NL = 4, ROUNDS = 6, PER_ROUND = 3, NF = NL * ROUNDS * PER_ROUND };
static const double LAT = 0.001;

typedef struct rec { double start, bytes; int route[5], lane, seq; } rec;

/* SimGrid's cross-traffic: the back route at 0.05 (sums of weights that round). */
static const double WEIGHT[5] = {1.0, 1.0, 1.0, 0.05, 0.05};

typedef struct world {
    het_arbiter *a;
    int msg[ROUNDS][NL][2];  /* round, receiver, from the left / right neighbour: flow id */
    int round[NL], left[NL], seq[NL];
    double clock[NL];
    double end[NL][ROUNDS * PER_ROUND]; /* by lane and its own count */
    int arb_id[NL][ROUNDS * PER_ROUND];
    rec log[NF];
    int n_log;
} world;

static uint64_t rnd(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* Resources: 0-3 NIC out, 4-7 NIC in, 8 a backbone; the back route: the receiver's NIC out and
 * the sender's NIC in. */
static int post(world *w, int lane, int to, double t, double bytes) {
    int route[5] = {lane, 4 + to, 8, to, 4 + lane};
    int id = het_arbiter_post(w->a, lane, t, bytes, LAT, 1.0, route, WEIGHT, 5);
    rec *r = &w->log[w->n_log++];
    *r = (rec){t, bytes, {route[0], route[1], route[2], route[3], route[4]}, lane, w->seq[lane]};
    w->arb_id[lane][w->seq[lane]++] = id;
    return id;
}

/* One report of lane i: posts its round's messages, or waits, or resumes. 1 if it did a thing. */
static int step(world *w, int i) {
    if (w->left[i]) return 0;
    int k = w->round[i], l = (i + NL - 1) % NL, r = (i + 1) % NL;
    if (k > 0) { /* round k - 1's messages from both neighbours must have ended */
        int *m = w->msg[k - 1][i];
        double d0 = m[0] >= 0 ? het_arbiter_done(w->a, m[0]) : -1,
               d1 = m[1] >= 0 ? het_arbiter_done(w->a, m[1]) : -1;
        if (d0 < 0 || d1 < 0) {
            int flows[2], n = 0, from[2], nf = 0;
            double look[2] = {LAT, LAT};
            if (m[0] >= 0 && d0 < 0) flows[n++] = m[0];
            if (m[0] < 0) from[nf++] = l;
            if (m[1] >= 0 && d1 < 0) flows[n++] = m[1];
            if (m[1] < 0) from[nf++] = r;
            het_arbiter_wait(w->a, i, w->clock[i], flows, n, from, look, nf);
            return 0;
        }
        double t = fmax(w->clock[i], fmax(d0, d1));
        w->clock[i] = t + 0.002 * (i + 1); /* compute, then the next round */
    }
    if (k == ROUNDS) {
        het_arbiter_leave(w->a, i);
        w->left[i] = 1;
        return 1;
    }
    double t = w->clock[i];
    w->msg[k][r][0] = post(w, i, r, t, 400.0 + 50.0 * i);
    w->msg[k][l][1] = post(w, i, l, t, 300.0);
    post(w, i, (i + 2) % NL, t, 1000.0); /* background: nobody waits for it */
    w->round[i]++;
    return 1;
}

static void run_world(world *w, uint64_t seed) {
    memset(w, 0, sizeof *w);
    memset(w->msg, -1, sizeof w->msg);
    double cap[9] = {1e5, 1e5, 1e5, 1e5, 1e5, 1e5, 1e5, 1e5, 1.5e5};
    w->a = het_arbiter_new(NL, 9, cap);
    int idle = 0;
    for (int it = 0; it < 200000 && idle < 1000; it++) {
        int i = (int)(rnd(&seed) % NL), did = step(w, i);
        if (rnd(&seed) % 3 == 0) het_arbiter_settle(w->a);
        int all = 1;
        for (int j = 0; j < NL; j++) all &= w->left[j];
        if (all) break;
        idle = did ? 0 : idle + 1;
    }
    het_arbiter_settle(w->a);
    for (int i = 0; i < NL; i++)
        for (int j = 0; j < w->seq[i]; j++) w->end[i][j] = het_arbiter_done(w->a, w->arb_id[i][j]);
    het_arbiter_free(w->a);
    w->a = NULL;
}

static int rec_cmp(const void *pa, const void *pb) {
    const rec *x = pa, *y = pb;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->lane != y->lane) return x->lane - y->lane;
    return x->seq - y->seq;
}

static void test_reproducible(void) {
    static world w[3];
    uint64_t seeds[3] = {0x9e3779b97f4a7c15u, 12345u, 0xdeadbeefu};
    for (int s = 0; s < 3; s++) run_world(&w[s], seeds[s]);
    int complete = w[0].n_log == NF;
    for (int i = 0; i < NL; i++)
        for (int j = 0; j < w[0].seq[i]; j++) complete &= w[0].end[i][j] > 0.0;
    CHECK(complete, "the exchange did not run to its end: %d of %d flows", w[0].n_log, NF);
    for (int s = 1; s < 3; s++)
        CHECK(memcmp(w[0].end, w[s].end, sizeof w[0].end) == 0 && w[s].n_log == NF,
              "interleaving %d gives other ends than interleaving 0", s);
    /* offline: every flow of interleaving 0, added in (start, lane, count) order */
    qsort(w[0].log, (size_t)w[0].n_log, sizeof *w[0].log, rec_cmp);
    double cap[9] = {1e5, 1e5, 1e5, 1e5, 1e5, 1e5, 1e5, 1e5, 1.5e5};
    het_flows *off = het_flows_new(9, cap);
    int ids[NF];
    for (int k = 0; k < w[0].n_log; k++)
        ids[k] = het_flows_add_weighted(off, w[0].log[k].start, w[0].log[k].bytes, LAT, 0, 1.0,
                                        w[0].log[k].route, WEIGHT, 5);
    het_flows_run(off);
    int same = 1;
    for (int k = 0; k < w[0].n_log; k++)
        same &= het_flows_done(off, ids[k]) == w[0].end[w[0].log[k].lane][w[0].log[k].seq];
    CHECK(same, "the arbiter's ends differ from the same flows added offline");
    het_flows_free(off);
}

static void test_refusals(void) {
    double cap[1] = {10.0};
    int r0[1] = {0}, bad[1] = {3}, self = 1;
    double look = 0.1;
    het_arbiter *a = het_arbiter_new(2, 1, cap);
    het_arbiter_run(a, 0, 1.0);
    CHECK(het_arbiter_post(a, 0, 0.5, 1.0, 0.0, 1.0, r0, NULL, 1) == HET_EINVAL,
          "post before the promise");
    CHECK(het_arbiter_run(a, 0, 0.9) == HET_EINVAL, "run back");
    CHECK(het_arbiter_run(a, 2, 1.0) == HET_EINVAL, "lane out of range");
    CHECK(het_arbiter_post(a, 1, 0.0, 1.0, 0.0, 1.0, bad, NULL, 1) == HET_EINVAL, "bad route");
    CHECK(het_arbiter_wait(a, 1, 0.0, r0, 1, NULL, NULL, 0) == HET_EINVAL,
          "wait for flow 0 not posted");
    CHECK(het_arbiter_wait(a, 1, 0.0, NULL, 0, &self, &look, 1) == HET_EINVAL, "wait for itself");
    het_arbiter_leave(a, 1);
    CHECK(het_arbiter_run(a, 1, 2.0) == HET_EINVAL, "a lane that left");
    CHECK(het_arbiter_new(0, 1, cap) == NULL, "no lanes");
    het_arbiter_free(a);
}

/* Rendezvous, 10 bytes/s, one link. (1) Lane 0 sends X (10 bytes) at 0 to lane 1, whose
 * receive is posted at 2; lane 2 sends E (20 bytes) at 1. Lane 1 then waits for another
 * message from lane 0 (lookahead 10: its promise far away): without the pending X, E would be
 * final at 3; X holds it back from 2 (its receive), and once matched both share the link from
 * 2 and end at 4 (the same bits as offline). (2) No receive posted: the receiver's promise
 * bounds X (E ends at 2.5 before lane 1 posts at 3); matched, X runs 3..4. (3) A message of 0
 * bytes (inside a node) ends at the later of the receive and its send + its lag (its header's
 * time) + its latency. (4) Refusals: a second match of one
 * receive, a flow to another lane. */
static void test_rendezvous(void) {
    double cap[1] = {10.0}, look = 10.0;
    int r0[1] = {0}, from0 = 0;
    het_arbiter *a = het_arbiter_new(3, 1, cap);
    int X = het_arbiter_post_rdv(a, 0, 0.0, 1, 7, 0.0, 10.0, 0.0, 1.0, r0, NULL, 1);
    het_arbiter_run(a, 0, 5.0);
    int E = het_arbiter_post(a, 2, 1.0, 20.0, 0.0, 1.0, r0, NULL, 1);
    het_arbiter_wait(a, 2, 1.0, &E, 1, NULL, NULL, 0);
    CHECK(het_arbiter_pending(a, X) && het_arbiter_recv(a, 1, 2.0, 7, -1) == 0,
          "X pending, receive 0");
    het_arbiter_wait(a, 1, 2.0, NULL, 0, &from0, &look, 1);
    het_arbiter_settle(a);
    CHECK(het_arbiter_done(a, E) < 0 && het_arbiter_done(a, X) < 0, "before X's match: E done "
          "at %g, X at %g", het_arbiter_done(a, E), het_arbiter_done(a, X));
    CHECK(het_arbiter_match(a, 1, 7, 0, X) == HET_OK, "%s", het_error_msg());
    het_arbiter_wait(a, 1, 2.0, &X, 1, NULL, NULL, 0);
    het_arbiter_settle(a);
    CHECK(near(het_arbiter_done(a, E), 4.0) && near(het_arbiter_done(a, X), 4.0) &&
          het_arbiter_start(a, X) == 2.0, "E done at %.17g, X at %.17g from %g, expected 4, 4 "
          "from 2", het_arbiter_done(a, E), het_arbiter_done(a, X), het_arbiter_start(a, X));
    het_flows *off = het_flows_new(1, cap);
    int oe = het_flows_add(off, 1.0, 20.0, 0.0, 0, r0, 1);
    int ox = het_flows_add(off, 2.0, 10.0, 0.0, 0, r0, 1);
    het_flows_run(off);
    CHECK(het_flows_done(off, oe) == het_arbiter_done(a, E) &&
          het_flows_done(off, ox) == het_arbiter_done(a, X), "offline %.17g %.17g",
          het_flows_done(off, oe), het_flows_done(off, ox));
    het_flows_free(off);
    CHECK(het_arbiter_match(a, 1, 7, 0, X) == HET_EINVAL, "receive 0 matched twice");
    het_arbiter_free(a);

    a = het_arbiter_new(3, 1, cap);
    X = het_arbiter_post_rdv(a, 0, 0.0, 1, 7, 0.0, 10.0, 0.0, 1.0, r0, NULL, 1);
    E = het_arbiter_post(a, 2, 0.5, 20.0, 0.0, 1.0, r0, NULL, 1);
    het_arbiter_wait(a, 2, 0.5, &E, 1, NULL, NULL, 0);
    het_arbiter_leave(a, 0);
    het_arbiter_run(a, 1, 3.0);
    het_arbiter_settle(a);
    CHECK(near(het_arbiter_done(a, E), 2.5), "E done at %.17g, expected 2.5 (lane 1 at 3)",
          het_arbiter_done(a, E));
    int r = het_arbiter_recv(a, 1, 3.0, 7, 0);
    CHECK(r == 0 && het_arbiter_match(a, 2, 7, 0, X) == HET_EINVAL, "X matched by lane 2");
    CHECK(het_arbiter_match(a, 1, 7, r, X) == HET_OK, "%s", het_error_msg());
    int Z = het_arbiter_post_rdv(a, 2, 3.5, 1, 9, 0.5, 0.0, 0.25, 1.0, r0, NULL, 1);
    CHECK(het_arbiter_done(a, Z) < 0, "a message of 0 bytes done before its receive");
    int W = het_arbiter_post_rdv(a, 2, 6.0, 1, 9, 0.5, 0.0, 0.25, 1.0, r0, NULL, 1);
    het_arbiter_wait(a, 1, 3.0, &X, 1, NULL, NULL, 0);
    het_arbiter_leave(a, 2);
    het_arbiter_settle(a);
    CHECK(near(het_arbiter_done(a, X), 4.0), "X done at %.17g, expected 4",
          het_arbiter_done(a, X));
    CHECK(het_arbiter_match(a, 1, 9, het_arbiter_recv(a, 1, 5.0, 9, 2), Z) == HET_OK &&
          het_arbiter_done(a, Z) == 5.25, "Z done at %g, expected 5.25 (its header in at 4)",
          het_arbiter_done(a, Z));
    CHECK(het_arbiter_match(a, 1, 9, het_arbiter_recv(a, 1, 5.5, 9, 2), W) == HET_OK &&
          het_arbiter_done(a, W) == 6.75, "W done at %g, expected 6.75 (its header in at 6.5, "
          "after the receive)", het_arbiter_done(a, W));
    het_arbiter_free(a);
}

int main(void) {
    test_hold_and_share();
    test_lookahead();
    test_cycle();
    test_group();
    test_until();
    test_incast();
    test_order();
    test_reproducible();
    test_refusals();
    test_rendezvous();
    return het_test_finish("test_arbiter");
}

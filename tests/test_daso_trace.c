/* daso's per-batch control flow against a reference written from HeAT's DASO.step /
 * _global_sync / _gs_rcv_update_params_last_batch (tests/daso_ref.h):
 *  - the reference reproduces the HeAT traces of the review (DASO-VS-HEAT.md: (2,1,1) over 6
 *    batches, (8,2,2) over 11, (4,1,1) over 10, G = 2);
 *  - het_daso_ctl_step, which the strategy runs batch by batch, gives the reference's events
 *    (node averaging, sends with group, clamped wait and wire, merges with their weight, node
 *    broadcasts, blocking averages) for every schedule state the cycle reaches with
 *    max_global_skips 1..40 and the reduction factors 2/4, 3/2, 4/4, in warm-up and cycling
 *    epochs, G = 2 and 4 ranks per node, epoch lengths 3..59; the reference carries its state
 *    across epochs as HeAT does, het_daso_ctl restarts every epoch. */
#include <stdio.h>
#include <string.h>

#include "daso_ref.h"
#include "test.h"

/* the reference's lines for batches of one epoch (from ref_init), checked against `want` */
static void check_ref_trace(int gs, int ls, int S, int64_t L, const char *const *want,
                            const int *at, int n_want, const char *name) {
    ref_daso r;
    ref_init(&r, 2, HET_WIRE_BF16);
    ref_epoch(&r, gs, ls, S, L - 1);
    int k = 0;
    for (int64_t b = 0; b < L; b++) {
        ref_batch(&r);
        char line[512];
        ref_line(line, sizeof line, b, r.ev, r.n_ev);
        for (; k < n_want && at[k] == b; k++)
            CHECK(strcmp(line, want[k]) == 0, "%s: reference\n  %s\nexpected (DASO-VS-HEAT.md)\n"
                  "  %s", name, line, want[k]);
    }
    CHECK(k == n_want && !r.broken, "%s: %d of %d lines checked, broken %d", name, k, n_want,
          r.broken);
}

static void test_review_traces(void) {
    static const char *const w211[] = {
        "b  0 local=Y send(g0,S'1,fp32)",
        "b  1 local=Y",
        "b  2 local=Y send(g1,S'1,fp32) merge(g0,from b0,w2*1) bcast(g0)",
        "b  5 local=Y send(g1,S'0,fp32) merge(g0,from b4,w2*1) bcast(g0) AVG(g1,fp32) bcast(g1)",
    };
    static const int a211[] = {0, 1, 2, 5};
    check_ref_trace(2, 1, 1, 6, w211, a211, 4, "(2,1,1), 6 batches");
    static const char *const w822[] = {
        "b  0 local=Y send(g0,S'2,fp32)", "b  1 local=Y",
        "b  2 local=Y merge(g0,from b0,w2*2) bcast(g0)", "b  3 local=n", "b  4 local=Y",
        "b  5 local=n", "b  6 local=Y", "b  7 local=n",
        "b  8 local=Y send(g1,S'2,fp32) bcast(g0)",
        "b  9 local=Y merge(g1,from b8,w2*2) bcast(g1)",
        "b 10 local=Y send(g0,S'0,fp32) bcast(g1) AVG(g0,fp32) bcast(g0)",
    };
    static const int a822[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    check_ref_trace(8, 2, 2, 11, w822, a822, 11, "(8,2,2), 11 batches");
    static const char *const w411[] = {
        "b  9 local=Y send(g1,S'0,fp32) merge(g0,from b8,w2*1) bcast(g0) AVG(g1,fp32) bcast(g1)",
    };
    static const int a411[] = {9};
    check_ref_trace(4, 1, 1, 10, w411, a411, 1, "(4,1,1), 10 batches");
}

/* The states the schedule reaches from (4,1,1) on plateaus (het_daso_sched_next, patience 0,
 * a constant loss), up to 64 distinct ones; returns their count. */
static int cycle_states(int max_gs, int skip, int local, het_daso_sched *out) {
    het_daso_params p = {1, 0, 1000, max_gs, 0.05, 0, skip, local};
    het_daso_sched s = het_daso_sched_init(&p);
    int n = 0;
    for (int e = 1; e < 200 && n < 64; e++) {
        s = het_daso_sched_next(&p, s, e, 1.0);
        int k = 0;
        while (k < n && !(out[k].gs == s.gs && out[k].ls == s.ls && out[k].S == s.S)) k++;
        if (k == n) out[n++] = s;
    }
    return n;
}

/* Epochs [warm-up (0,0,0), state, state, warm-up] of L batches: the reference carries HeAT's
 * state through them, het_daso_ctl restarts each; returns the batches that differ. */
static int sweep_one(const het_daso_sched *st, int G, int64_t L, int wire, int *shown) {
    ref_daso r;
    ref_init(&r, G, wire);
    het_daso_ctl_opts o = {wire, 0};
    const het_daso_sched blocking = {0, 0, 0, 0, 1.0, 0, 0};
    const het_daso_sched *ep[4] = {&blocking, st, st, &blocking};
    int bad = 0;
    for (int e = 0; e < 4; e++) {
        ref_epoch(&r, ep[e]->gs, ep[e]->ls, ep[e]->S, L - 1);
        het_daso_ctl c = het_daso_ctl_epoch(G);
        for (int64_t b = 0; b < L; b++) {
            ref_batch(&r);
            het_daso_event ev[HET_DASO_CTL_EVENTS + 1];
            memset(ev, 0, sizeof ev);
            ev[0].kind = HET_DASO_EV_LOCAL, ev[0].group = c.flag, ev[0].batch = b;
            int n = het_daso_ctl_step(&c, ep[e], b, L - 1, &o, ev + 1) + 1;
            int same = n == r.n_ev;
            for (int k = 0; same && k < n; k++) same = ref_same(&ev[k], &r.ev[k]);
            if (!same && (*shown)++ < 8) {
                char h[512], x[512];
                ref_line(h, sizeof h, b, r.ev, r.n_ev);
                ref_line(x, sizeof x, b, ev, n);
                fprintf(stderr, "(%d,%d,%d) G %d L %lld epoch %d:\n  HeAT    %s\n  hetrain %s\n",
                        ep[e]->gs, ep[e]->ls, ep[e]->S, G, (long long)L, e + 1, h, x);
            }
            bad += !same;
        }
        if (c.n != 0) bad++; /* nothing in flight after an epoch */
    }
    if (r.broken) bad++;
    return bad;
}

static void test_sweep(void) {
    static const int factors[][2] = {{2, 4}, {3, 2}, {4, 4}};
    int states = 0, runs = 0, bad = 0, shown = 0, seen_s_ge = 0, seen_s0 = 0;
    for (int f = 0; f < 3; f++)
        for (int max_gs = 1; max_gs <= 40; max_gs++) {
            het_daso_sched st[64];
            int n = cycle_states(max_gs, factors[f][0], factors[f][1], st);
            states += n;
            for (int k = 0; k < n; k++) {
                seen_s_ge |= st[k].gs > 1 && st[k].S >= st[k].gs - 1;
                seen_s0 |= st[k].gs > 0 && st[k].S == 0;
                for (int G = 2; G <= 4; G += 2)
                    for (int64_t L = 3; L <= 59; L++) {
                        int wire = (int)(L % 3); /* fp32, fp16, bf16 */
                        bad += sweep_one(&st[k], G, L, wire, &shown) != 0;
                        runs++;
                    }
            }
        }
    CHECK(bad == 0, "%d of %d (state, G, L) runs differ from HeAT's control flow", bad, runs);
    CHECK(seen_s_ge && seen_s0, "the sweep lacks S >= gs - 1 (%d) or S = 0 (%d) states",
          seen_s_ge, seen_s0);
    printf("sweep: %d schedule states (with repeats over max global skips 1..40, 3 factor "
           "pairs), %d runs of G 2, 4 x L 3..59, %d differ\n", states, runs, bad);
}

/* --daso-merge-last: the last batch merges the pending sync, then sends and averages. */
static void test_merge_last(void) {
    het_daso_sched s = {4, 1, 1, 0, 1.0, 0, 0};
    het_daso_ctl c = het_daso_ctl_epoch(2);
    het_daso_ctl_opts o = {HET_WIRE_BF16, 1};
    het_daso_event ev[HET_DASO_CTL_EVENTS];
    int n = 0;
    for (int64_t b = 0; b <= 9; b++) n = het_daso_ctl_step(&c, &s, b, 9, &o, ev);
    char line[512];
    ref_line(line, sizeof line, 9, ev, n);
    CHECK(strcmp(line, "b  9 merge(g0,from b8,w2*1) bcast(g0) send(g1,S'0,fp32) AVG(g1,fp32) "
                 "bcast(g1)") == 0, "--daso-merge-last, (4,1,1) last batch 9: %s", line);
}

int main(void) {
    test_review_traces();
    test_sweep();
    test_merge_last();
    return het_test_finish("test_daso_trace");
}

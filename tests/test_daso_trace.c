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

int main(void) {
    test_review_traces();
    return het_test_finish("test_daso_trace");
}

/* daso's schedule (src/strategy/daso_schedule.c) against tables derived by hand from HeAT's
 * DASO.epoch_loss_logic and DetectMetricPlateau (threshold 0.05 relative, patience 2):
 * warm-up, the entry into cycling at (4,1,1), the cycle (4,1,1) -> (2,1,1) -> (1,1,1) ->
 * (8,2,2) -> (4,1,1), patience counted in bad epochs, cool-down (blocking; the detector
 * runs on), a warm-up of 0 epochs, patience 0, a negative loss, and which batches average
 * gradients inside the node. */
#include <math.h>
#include <stdio.h>

#include "hetrain/comm.h"
#include "strategy/daso.h"
#include "test.h"

typedef struct row {
    int epochs_done;
    double loss;
    int gs, ls, S; /* expected schedule of the next epoch */
    int bad;       /* expected bad-epoch count after it */
} row;

/* Runs the rows in order from het_daso_sched_init, checking every one. */
static het_daso_sched run_table(const het_daso_params *p, const row *rows, int n,
                                const char *name) {
    het_daso_sched s = het_daso_sched_init(p);
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        s = het_daso_sched_next(p, s, r->epochs_done, r->loss);
        het_daso_sched e = het_daso_sched_epoch(p, &s, r->epochs_done);
        CHECK(e.gs == r->gs && e.ls == r->ls && e.S == r->S && s.bad == r->bad,
              "%s: after epoch %d (loss %g): (gs %d, ls %d, S %d, bad %d), expected (%d, %d, "
              "%d, %d)", name, r->epochs_done, r->loss, e.gs, e.ls, e.S, s.bad, r->gs, r->ls,
              r->S, r->bad);
    }
    return s;
}

static void test_cycle(void) {
    het_daso_params p = {4, 4, 30, 8, 0.05, 2, 2, 4};
    het_daso_sched i0 = het_daso_sched_init(&p), s0 = het_daso_sched_epoch(&p, &i0, 0);
    CHECK(s0.gs == 0 && s0.ls == 0 && s0.S == 0, "epoch 1 in warm-up: (%d, %d, %d), expected "
          "(0, 0, 0)", s0.gs, s0.ls, s0.S);
    static const row rows[] = {
        {1, 2.0, 0, 0, 0, 0},   {2, 1.5, 0, 0, 0, 0},   {3, 1.2, 0, 0, 0, 0}, /* warm-up */
        {4, 1.0, 4, 1, 1, 0},   /* warm-up over: (4,1,1); first loss: best 1.0 */
        {5, 0.9, 4, 1, 1, 0},   /* 0.9 < 0.95: improvement, best 0.9 */
        {6, 0.88, 4, 1, 1, 1},  /* 0.88 >= 0.855: bad 1 */
        {7, 0.87, 4, 1, 1, 2},  /* bad 2 = patience: no plateau yet */
        {8, 0.86, 2, 1, 1, 0},  /* bad 3 > 2: plateau, halve: (2, 0->1, 0->1) */
        {9, 0.86, 2, 1, 1, 1},  {10, 0.86, 2, 1, 1, 2},
        {11, 0.86, 1, 1, 1, 0}, /* plateau: (1, 1, 1) */
        {12, 0.87, 1, 1, 1, 1}, /* 0.87 >= 0.855: bad */
        {13, 0.86, 1, 1, 1, 2},
        {14, 0.86, 8, 2, 2, 0}, /* plateau at gs 1: reset to (8, 8/4, 8/4) */
        {15, 0.5, 8, 2, 2, 0},  /* improvement, best 0.5 */
        {16, 0.49, 8, 2, 2, 1}, {17, 0.48, 8, 2, 2, 2},
        {18, 0.48, 4, 1, 1, 0}, /* plateau: (8/2, 2/2, 2-1) */
        {19, 0.4, 4, 1, 1, 0},  {20, 0.39, 4, 1, 1, 1}, {25, 0.39, 4, 1, 1, 2},
        {26, 0.1, 0, 0, 0, 0},  /* 30 - 4: cool-down, blocking; the detector runs on */
        {27, 0.1, 0, 0, 0, 1},  {29, 0.1, 0, 0, 0, 2},
    };
    het_daso_sched s = run_table(&p, rows, (int)(sizeof rows / sizeof rows[0]), "cycle");
    CHECK(s.plateaus == 4, "plateaus %d, expected 4", s.plateaus);
    CHECK(s.best == 0.1 && s.gs == 4, "best %.17g gs %d, expected 0.1 (epoch 26) and 4",
          s.best, s.gs);
}

static void test_edges(void) {
    /* no warm-up: cycling from epoch 1 (HeAT would stay blocking) */
    het_daso_params p0 = {0, 0, 10, 8, 0.05, 2, 2, 4};
    het_daso_sched s = het_daso_sched_init(&p0);
    s = het_daso_sched_epoch(&p0, &s, 0);
    CHECK(s.gs == 4 && s.ls == 1 && s.S == 1, "warm-up 0: epoch 1 (%d, %d, %d), expected "
          "(4, 1, 1)", s.gs, s.ls, s.S);
    /* patience 0: every epoch without improvement is a plateau */
    het_daso_params p1 = {1, 1, 10, 8, 0.05, 0, 2, 4};
    static const row r1[] = {
        {1, 1.0, 4, 1, 1, 0}, {2, 1.0, 2, 1, 1, 0}, {3, 1.0, 1, 1, 1, 0},
        {4, 1.0, 8, 2, 2, 0}, {5, 0.5, 8, 2, 2, 0}, {9, 0.5, 0, 0, 0, 0},
    };
    run_table(&p1, r1, (int)(sizeof r1 / sizeof r1[0]), "patience 0");
    /* a negative loss: the bar is best (1 + threshold) */
    het_daso_params p2 = {1, 0, 10, 16, 0.05, 0, 2, 4};
    static const row r2[] = {
        {1, -1.0, 4, 1, 1, 0},  /* best -1 */
        {2, -1.04, 2, 1, 1, 0}, /* -1.04 is not < -1.05: plateau */
        {3, -1.2, 2, 1, 1, 0},  /* improvement */
        {4, -1.2, 1, 1, 1, 0}, {5, -1.2, 16, 4, 4, 0}, /* reset with max 16: (16, 4, 4) */
        {6, -1.2, 8, 2, 3, 0},  /* (16/2, 4/2, 4-1) */
    };
    run_table(&p2, r2, (int)(sizeof r2 / sizeof r2[0]), "negative loss");
    /* cool-down overlapping warm-up: blocking throughout */
    het_daso_params p3 = {2, 3, 4, 8, 0.05, 2, 2, 4};
    s = het_daso_sched_init(&p3);
    for (int e = 1; e < 4; e++) {
        s = het_daso_sched_next(&p3, s, e, 1.0 / e);
        int gs = het_daso_sched_epoch(&p3, &s, e).gs;
        CHECK(gs == 0, "warm-up 2, cool-down 3 of 4 epochs: gs %d after epoch %d, expected 0",
              gs, e);
    }
}

/* Node-local gradient averaging (DDP's flag, set after each step for the next batch): with
 * ls = 1 every batch; in (8,2,2) batches b % 8 in {0, 1, 2, 4, 6} (HeAT's pattern, not only the
 * even ones); ls = 0 (a reset with max global skips 3: (3,0,0)) switches it off after
 * b % 3 == 1. */
static void flags(const het_daso_sched *s, int64_t last, int *got) {
    het_daso_ctl c = het_daso_ctl_epoch(2);
    het_daso_ctl_opts o = {HET_WIRE_BF16, 0};
    het_daso_event ev[HET_DASO_CTL_EVENTS];
    for (int64_t b = 0; b <= last; b++) {
        got[b] = c.flag;
        het_daso_ctl_step(&c, s, b, last, &o, ev);
    }
}

static void test_local_sync(void) {
    het_daso_sched s = {8, 2, 2, 0, 1.0, 0, 0};
    static const int want[21] = {1, 1, 1, 0, 1, 0, 1, 0, 1, 1, 1, 0, 1, 0, 1, 0, 1, 1, 1, 0, 1};
    int got[21];
    flags(&s, 20, got);
    for (int i = 0; i < 21; i++)
        CHECK(got[i] == want[i], "(8,2,2) batch %d: local sync %d, expected %d", i, got[i],
              want[i]);
    het_daso_sched u = {4, 1, 1, 0, 1.0, 0, 0}, w = {0, 0, 0, 0, 1.0, 0, 0};
    int gu[9], gw[9];
    flags(&u, 8, gu);
    flags(&w, 8, gw);
    for (int i = 0; i < 9; i++)
        CHECK(gu[i] && gw[i], "ls 1 / ls 0: batch %d must sync locally", i);
    het_daso_sched t = {3, 0, 0, 0, 1.0, 0, 0};
    static const int wt[10] = {1, 1, 0, 1, 1, 0, 1, 1, 0, 1};
    int gt[10];
    flags(&t, 9, gt);
    for (int i = 0; i < 10; i++)
        CHECK(gt[i] == wt[i], "(3,0,0) batch %d: local sync %d, expected %d", i, gt[i], wt[i]);
}

/* The reduction factors (HeAT's skip_reduction_factor, local_skip_factor): 3 and 2. */
static void test_factors(void) {
    het_daso_params p = {1, 0, 20, 8, 0.05, 0, 3, 2};
    static const row r[] = {
        {1, 1.0, 4, 1, 1, 0}, {2, 1.0, 1, 1, 1, 0}, /* 4/3 = 1, ls 1/3 = 0 -> 1, S 0 -> 1 */
        {3, 1.0, 8, 4, 4, 0},                       /* reset: 8/2 */
        {4, 1.0, 2, 1, 3, 0},                       /* 8/3, 4/3, 4-1 */
        {5, 1.0, 0, 0, 2, 0},                       /* 2/3 = 0: gs 0, not clamped */
        {6, 1.0, 0, 0, 2, 0},                       /* gs 0: neither branch, for ever */
    };
    run_table(&p, r, (int)(sizeof r / sizeof r[0]), "factors 3, 2");
}

int main(void) {
    test_cycle();
    test_edges();
    test_local_sync();
    test_factors();
    return het_test_finish("test_daso_schedule");
}

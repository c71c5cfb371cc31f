/* The daso strategy in-process, run under mpirun by tests/test_daso_mpi.sh (4 ranks with 2 per
 * emulated node, and 5 ranks: unequal nodes) and alone, as one rank, by CTest:
 *  - the strategy's per-batch event trace (het_daso_set_trace) equals the reference of HeAT's
 *    control flow (tests/daso_ref.h) in every epoch, on 4 ranks: 2 nodes of 2 and one node of
 *    4, through the default cycle, max global skips 16 (S >= gs - 1) and 3 (S = 0);
 *  - one node (ranks-per-node = P) in warm-up equals allreduce plus bf16 rounding with the bf16
 *    wire (HeAT casts), allreduce to float rounding with --daso-one-node-fp32 or fp32; in
 *    cycling epochs it is not allreduce;
 *  - with 2 ranks per node, through warm-up, the skipping phase and cool-down, every rank
 *    holds bitwise the same parameters at every epoch's end (CRC over ranks), for each wire
 *    type; the loss goes down;
 *  - the wire type matters: bf16 and fp32 give different parameters once there are 2 nodes.
 * Synthetic data, lenet5 and mlp, a few steps: about a second per run. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "daso_ref.h"
#include "hetrain.h"
#include "strategy/strategy.h"
#include "test.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }

static int g_rank, g_size;

static het_train_config base(const char *strategy, const char *rpn) {
    het_train_config c = het_train_config_defaults();
    het_train_config_set(&c, "model", "lenet5");
    het_train_config_set(&c, "data", "synthetic");
    het_train_config_set(&c, "batch", "32");
    het_train_config_set(&c, "train-limit", "330"); /* 11 steps, the last of 10 samples */
    het_train_config_set(&c, "test-limit", "64");
    het_train_config_set(&c, "epochs", "2");
    het_train_config_set(&c, "seed", "3");
    het_train_config_set(&c, "momentum", "0.9");
    het_train_config_set(&c, "lr", "0.02");
    het_train_config_set(&c, "strategy", strategy);
    het_train_config_set(&c, "ranks-per-node", rpn);
    het_train_config_set(&c, "progress", "off");
    het_train_config_set(&c, "quiet", NULL);
    het_log_set_level(HET_LOG_QUIET);
    return c;
}

static void check_same_everywhere(const float *p, size_t n, const char *what) {
    unsigned crc = het_crc32(0, p, n * sizeof *p), lo = crc, hi = crc;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UNSIGNED, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UNSIGNED, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lo == hi, "%s: parameters differ between ranks (crc %08x vs %08x)", what, lo, hi);
}

/* Trains cfg epoch by epoch, checking after each that all ranks agree; returns the final
 * parameters (copy) and the last epoch's loss. */
static float *train(const het_train_config *cfg, size_t *n, double *loss, const char *what,
                    double *first) {
    het_trainer *t;
    int st = het_trainer_create(&t, cfg);
    CHECK(st == HET_OK, "%s: create: %s", what, het_error_msg());
    if (st) return NULL;
    for (int e = 0; e < cfg->epochs && !st; e++) {
        st = het_trainer_run_epoch(t);
        CHECK(st == HET_OK, "%s: epoch %d: %s", what, e + 1, het_error_msg());
        char w[128];
        snprintf(w, sizeof w, "%s, epoch %d", what, e + 1);
        check_same_everywhere(het_model_params(het_trainer_model(t)),
                              het_model_n_params(het_trainer_model(t)), w);
    }
    int nh;
    const het_epoch_stats *h = het_trainer_history(t, &nh);
    *loss = nh > 0 ? h[nh - 1].loss : NAN;
    if (first) *first = nh > 0 ? h[0].loss : NAN;
    het_model *m = het_trainer_model(t);
    *n = het_model_n_params(m);
    float *p = malloc(*n * sizeof *p);
    memcpy(p, het_model_params(m), *n * sizeof *p);
    het_trainer_free(t);
    return p;
}

static double max_rel(const float *a, const float *b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / fmax(1.0, fabs((double)a[i]));
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

/* One node. Warm-up (blocking epochs): HeAT still casts the parameters to the wire type
 * (bf16: allreduce plus bf16 rounding every batch); with --daso-one-node-fp32 or the fp32 wire
 * it is allreduce to float rounding. Cycling epochs are not allreduce: a merge mixes in the
 * rank's own stale copy, (2S' theta + theta_stale) / (2S' + 1). */
static void test_one_node(void) {
    char rpn[16];
    snprintf(rpn, sizeof rpn, "%d", g_size);
    het_train_config ar = base("allreduce", rpn), da = base("daso", rpn);
    het_train_config_set(&da, "daso-warmup-epochs", "2");
    size_t n1 = 0, n2 = 0, n3 = 0, n4 = 0, n5 = 0;
    double l1, l2, l3, l4, l5;
    float *a = train(&ar, &n1, &l1, "allreduce, one node", NULL);
    float *d = train(&da, &n2, &l2, "daso bf16, one node", NULL);
    het_train_config_set(&da, "daso-one-node-fp32", NULL);
    float *x = train(&da, &n4, &l4, "daso bf16 --daso-one-node-fp32, one node", NULL);
    het_train_config_set(&da, "daso-wire", "fp32");
    float *f = train(&da, &n3, &l3, "daso fp32, one node", NULL);
    het_train_config cy = base("daso", rpn);
    het_train_config_set(&cy, "daso-warmup-epochs", "0");
    het_train_config_set(&cy, "daso-cooldown-epochs", "0");
    float *c = train(&cy, &n5, &l5, "daso cycling, one node", NULL);
    if (a && d && f && x && c && n1 == n2 && n1 == n3 && n1 == n4 && n1 == n5) {
        double e1 = max_rel(a, d, n1), e2 = max_rel(a, f, n1), e3 = max_rel(a, x, n1),
               e4 = max_rel(a, c, n1);
        CHECK(e1 > 1e-5 && e1 <= 0.05, "one node, bf16 wire (HeAT casts): daso vs allreduce max "
              "rel diff %.3g, expected bf16 rounding (1e-5, 0.05]", e1);
        CHECK(e3 <= 1e-5, "one node, bf16 wire, --daso-one-node-fp32: daso vs allreduce max rel "
              "diff %.3g (bound 1e-5)", e3);
        CHECK(e2 <= 1e-5, "one node, fp32 wire: daso vs allreduce max rel diff %.3g", e2);
        CHECK(fabs(l1 - l4) <= 1e-5 * fmax(1.0, fabs(l1)), "one node, --daso-one-node-fp32: "
              "loss %.9g vs allreduce %.9g", l4, l1);
        CHECK(e4 > 1e-4 && isfinite(l5), "one node, cycling epochs: daso vs allreduce max rel "
              "diff %.3g (expected > 1e-4: merges mix in stale copies), loss %g", e4, l5);
        if (g_rank == 0)
            printf("one node, warm-up: daso vs allreduce max rel diff %.3g (bf16) %.3g (bf16, "
                   "--daso-one-node-fp32) %.3g (fp32); cycling %.3g\n", e1, e3, e2, e4);
    }
    free(a);
    free(d);
    free(f);
    free(x);
    free(c);
}

/* Two ranks per node: warm-up, skipping, cool-down; all ranks agree after every epoch. */
static void test_phases(void) {
    const char *wires[] = {"bf16", "fp16", "fp32"};
    float *p[3] = {NULL, NULL, NULL};
    size_t n[3] = {0, 0, 0};
    for (int w = 0; w < 3; w++) {
        het_train_config c = base("daso", "2");
        het_train_config_set(&c, "epochs", "4");
        het_train_config_set(&c, "daso-warmup-epochs", "1");
        het_train_config_set(&c, "daso-cooldown-epochs", "1");
        het_train_config_set(&c, "daso-chunk", "10000"); /* lenet5: 7 chunks */
        het_train_config_set(&c, "daso-wire", wires[w]);
        char what[64];
        snprintf(what, sizeof what, "daso 2 per node, %s", wires[w]);
        double loss, first;
        p[w] = train(&c, &n[w], &loss, what, &first);
        CHECK(isfinite(loss) && loss < first - 0.01, "%s: final loss %g, expected below the "
              "first epoch's %g", what, loss, first);
        if (g_rank == 0) printf("%s: training loss %.6f -> %.6f\n", what, first, loss);
    }
    if (g_size >= 4 && p[0] && p[2] && n[0] == n[2]) { /* 2 nodes: the wire type counts */
        double e = max_rel(p[0], p[2], n[0]);
        CHECK(e > 0, "2 nodes: bf16 and fp32 wires gave the same parameters (diff %g)", e);
        if (g_rank == 0) printf("2 nodes: bf16 vs fp32 wire max rel diff %.3g\n", e);
    }
    for (int w = 0; w < 3; w++) free(p[w]);
}

/* ---- the strategy's event trace (het_daso_set_trace) against tests/daso_ref.h ---- */
static het_daso_event *g_ev;
static int g_nev, g_cap;

static void record(void *user, int rank, const het_daso_event *e) {
    (void)user, (void)rank;
    if (g_nev == g_cap) {
        g_cap = g_cap ? 2 * g_cap : 1024;
        g_ev = realloc(g_ev, sizeof *g_ev * (size_t)g_cap);
        if (!g_ev) abort();
    }
    g_ev[g_nev++] = *e;
}

/* Compares this rank's recorded events, epoch by epoch, with the reference for G groups
 * (HeAT's state carried across the epochs); returns the number of batches that differ and
 * marks the schedule states seen in `seen` (gs * 100 + ls * 10 + S, up to 3 digits each). */
static int compare_trace(const char *what, int G, int wire, int *epochs, char seen[][16],
                         int *n_seen) {
    ref_daso r;
    ref_init(&r, G, wire);
    int bad = 0, shown = 0, i = 0;
    *epochs = 0;
    while (i < g_nev) {
        const het_daso_event *e = &g_ev[i++];
        CHECK(e->kind == HET_DASO_EV_EPOCH, "%s: event %d is not an epoch's start", what, i - 1);
        if (e->kind != HET_DASO_EV_EPOCH) return bad + 1;
        (*epochs)++;
        char tag[16];
        snprintf(tag, sizeof tag, "(%d,%d,%d)", e->gs, e->ls, e->S);
        int k = 0;
        while (k < *n_seen && strcmp(seen[k], tag)) k++;
        if (k == *n_seen && k < 16) snprintf(seen[(*n_seen)++], 16, "%s", tag);
        ref_epoch(&r, e->gs, e->ls, e->S, e->last);
        for (int64_t b = 0; b <= e->last; b++) {
            ref_batch(&r);
            int j = i;
            while (j < g_nev && g_ev[j].kind != HET_DASO_EV_EPOCH &&
                   (j == i || g_ev[j].kind != HET_DASO_EV_LOCAL))
                j++;
            int same = j - i == r.n_ev;
            for (int q = 0; same && q < r.n_ev; q++) same = ref_same(&g_ev[i + q], &r.ev[q]);
            if (!same) {
                bad++;
                if (g_rank == 0 && shown++ < 6) {
                    char h[512], x[512];
                    ref_line(h, sizeof h, b, r.ev, r.n_ev);
                    ref_line(x, sizeof x, b, g_ev + i, j - i);
                    fprintf(stderr, "%s, epoch %d %s of %lld batches:\n  HeAT   %s\n  "
                            "hetrain %s\n", what, *epochs, tag, (long long)e->last + 1, h, x);
                }
            }
            i = j;
        }
    }
    CHECK(!r.broken, "%s: the reference saw a state HeAT raises on", what);
    return bad;
}

/* Trains with the schedule moving every epoch (patience 0, threshold 0.9: every cycling
 * epoch is a plateau) and checks the trace against the reference on every rank. */
static void trace_run(const char *rpn, int G, const char *max_gs, const char *limit,
                      const char *epochs, const char *const *want, int n_want) {
    het_train_config c = base("daso", rpn);
    het_train_config_set(&c, "epochs", epochs);
    het_train_config_set(&c, "train-limit", limit);
    het_train_config_set(&c, "daso-warmup-epochs", "1");
    het_train_config_set(&c, "daso-cooldown-epochs", "1");
    het_train_config_set(&c, "daso-patience", "0");
    het_train_config_set(&c, "daso-plateau-threshold", "0.9");
    het_train_config_set(&c, "daso-max-global-skips", max_gs);
    het_train_config_set(&c, "daso-chunk", "10000");
    char what[96];
    snprintf(what, sizeof what, "trace, %s per node, max global skips %s, %s samples", rpn,
             max_gs, limit);
    g_nev = 0;
    het_daso_set_trace(record, NULL);
    size_t n = 0;
    double loss;
    free(train(&c, &n, &loss, what, NULL));
    het_daso_set_trace(NULL, NULL);
    int ep = 0, n_seen = 0;
    char seen[16][16];
    int bad = compare_trace(what, G, (int)het_strategy_opt_value(&c, "daso-wire"), &ep, seen,
                            &n_seen);
    CHECK(bad == 0, "%s (rank %d): %d batches differ from HeAT's control flow", what, g_rank,
          bad);
    CHECK(ep == c.epochs, "%s: %d epochs traced, expected %d", what, ep, c.epochs);
    for (int k = 0; k < n_want; k++) {
        int found = 0;
        for (int q = 0; q < n_seen; q++) found |= strcmp(seen[q], want[k]) == 0;
        CHECK(found, "%s: schedule state %s not reached", what, want[k]);
    }
    if (g_rank == 0) {
        printf("%s: %d epochs, states", what, ep);
        for (int q = 0; q < n_seen; q++) printf(" %s", seen[q]);
        printf(", %d batches differ\n", bad);
    }
}

/* 2 nodes of 2 (G = 2) and one node of 4 (G = 4); the default cycle, max 16 (S >= gs - 1)
 * and max 3 (S = 0 while cycling). G = 1 (one rank per node) is not HeAT's: not compared. */
static void test_trace(void) {
    if (g_size != 4) return;
    static const char *const c8[] = {"(0,0,0)", "(4,1,1)", "(2,1,1)", "(1,1,1)", "(8,2,2)"};
    static const char *const c16[] = {"(16,4,4)", "(8,2,3)", "(4,1,2)"};
    static const char *const c3[] = {"(3,0,0)"};
    trace_run("2", 2, "8", "330", "7", c8, 5);
    trace_run("2", 2, "16", "608", "9", c16, 3);
    trace_run("2", 2, "3", "416", "6", c3, 1);
    trace_run("4", 4, "8", "330", "7", c8, 5);
}

int main(int argc, char **argv) {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &(int){0});
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (!het_test_world_size_ok(g_size)) MPI_Abort(MPI_COMM_WORLD, 1);
    het_log_set_rank(g_rank);
    test_trace();
    test_one_node();
    test_phases();
    int failed = het_test_failures;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    char name[64];
    snprintf(name, sizeof name, "test_daso (rank %d of %d)", g_rank, g_size);
    int rc = het_test_finish(name);
    MPI_Finalize();
    return rc || failed;
}

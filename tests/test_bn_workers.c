/* Batch norm with several workers (nn/team.c, bn_math.h, the executor's teams): statistics
 * over the whole batch, combined in worker order.
 *
 * 1. The pool's barrier and the team's exchange: parts of every active worker, many meetings
 *    in a row, the active count changing between runs.
 * 2. Models with batch norm first (no input gradient: backward needs no meeting), conv + BN,
 *    residual blocks, and the whole resnet20 on 16x16 inputs, with 2 and 3 workers against 1:
 *    training loss, every parameter gradient, the running statistics after a training step,
 *    logits of a training-mode forward and the running statistics after it, evaluation logits.
 *    Batches of 7 and 5 (not divisible by 2 or 3), 4 (3 workers: 2 + 2 + 0, one without
 *    samples), 2 and 1.
 *    Tolerances (float rounding of sums taken in another order; the statistics themselves are
 *    combined in double): loss relative 1e-5; logits, gradients and running statistics per
 *    group (one layer's parameters, its state, the logits) |a - b| <= 1e-4 * (|b| + max|b| of
 *    the group), as tests/test_reference.c holds hetrain to PyTorch. Measured max printed.
 *    A batch of 1 runs on worker 0 alone, exactly as one worker: bitwise equal.
 * 3. The same worker count twice gives the same bits.
 * 4. Finite differences of the training loss of conv + BN + ReLU (+ dense) with 2 workers,
 *    every parameter, the step h shrunk at ReLU kinks as in test_layers_norm.c. */
#include <stdatomic.h>
#include <string.h>

#include "hetrain/netfile.h"
#include "hetrain/nn.h"
#include "nn/pool.h"
#include "nn/team.h"
#include "test.h"

#define MAXB 7

static void fill(float *x, size_t n, float lo, float hi, uint64_t seed) {
    het_rng r;
    het_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * het_rng_uniform(&r);
}

/* ================================ 1. barrier and team ================================ */
typedef struct team_job {
    het_team *team;
    int active, run;
    atomic_int bad;
} team_job;

static void team_task(void *user, int widx) {
    team_job *j = user;
    if (widx >= j->active) return; /* no samples: not at the meetings */
    for (int k = 0; k < 50; k++) {
        double *part = het_team_part(j->team, widx);
        part[0] = widx * 1000.0 + j->run * 7.0 + k;
        part[1] = -part[0];
        size_t stride;
        const double *all = het_team_exchange(j->team, widx, &stride);
        for (int w = 0; w < j->active; w++) {
            double want = w * 1000.0 + j->run * 7.0 + k;
            if (all[(size_t)w * stride] != want || all[(size_t)w * stride + 1] != -want)
                atomic_fetch_add(&j->bad, 1);
        }
    }
}

static void test_team(void) {
    const int W = 4;
    het_pool *p = NULL;
    het_team *t = NULL;
    CHECK(het_pool_create(&p, W) == HET_OK && het_team_create(&t, W, 2) == HET_OK, "%s",
          het_error_msg());
    if (!p || !t) {
        het_pool_free(p);
        het_team_free(t);
        return;
    }
    team_job j;
    memset(&j, 0, sizeof j);
    j.team = t;
    atomic_init(&j.bad, 0);
    for (int run = 0; run < 200; run++) {
        j.run = run;
        j.active = 1 + run % W;
        het_team_begin(t, j.active);
        CHECK(het_team_size(t) == j.active, "team size %d, expected %d", het_team_size(t),
              j.active);
        het_pool_run(p, team_task, &j);
    }
    CHECK(atomic_load(&j.bad) == 0, "team exchange: %d parts read wrong", atomic_load(&j.bad));
    het_team_free(t);
    het_pool_free(p);
}

/* ================================ 2, 3. models ================================ */
typedef struct spec {
    const char *name;
    het_shape in;
    float offset; /* added to the inputs: batch norm on values far from 0 */
} spec;

static int make_layers(const char *name, het_layer **L) {
    int n = 0;
    if (strcmp(name, "bn-first") == 0) {
        L[n++] = het_batchnorm_new(0.1f, 1e-5f);
        L[n++] = het_relu_new();
        L[n++] = het_flatten_new();
        L[n++] = het_dense_new(10);
    } else if (strcmp(name, "conv-bn") == 0) {
        L[n++] = het_conv2d_new(6, 3, 1, 1);
        L[n++] = het_batchnorm_new(0.1f, 1e-5f);
        L[n++] = het_relu_new();
        L[n++] = het_flatten_new();
        L[n++] = het_dense_new(10);
    } else if (strcmp(name, "resblocks") == 0) {
        L[n++] = het_conv2d_new(8, 3, 1, 1);
        L[n++] = het_batchnorm_new(0.1f, 1e-5f);
        L[n++] = het_relu_new();
        L[n++] = het_resblock_new(8, 1);
        L[n++] = het_resblock_new(16, 2);
        L[n++] = het_avgpool_new(0, 0);
        L[n++] = het_dense_new(10);
    } else if (strcmp(name, "gradcheck") == 0) {
        L[n++] = het_conv2d_new(4, 3, 1, 1);
        L[n++] = het_batchnorm_new(0.1f, 1e-5f);
        L[n++] = het_relu_new();
        L[n++] = het_flatten_new();
        L[n++] = het_dense_new(5);
    }
    return n;
}

static het_model *build(const char *name, het_shape in, int workers) {
    het_model *m = NULL;
    int st;
    if (strcmp(name, "resnet20") == 0) {
        st = het_zoo_build(&m, name, in, 10, MAXB, workers);
    } else {
        het_layer *L[16];
        st = het_model_create(&m, in, L, make_layers(name, L), MAXB, workers);
    }
    CHECK(st == HET_OK, "%s, %d workers: %s", name, workers, het_error_msg());
    if (m) CHECK(het_model_workers(m) == workers, "%s: %d workers, asked for %d", name,
                 het_model_workers(m), workers);
    return m;
}

/* What one model computes on one batch. */
typedef struct outcome {
    double loss;
    int correct;
    float *grads, *state1, *logits1, *state2, *logits2;
} outcome;

static void outcome_run(outcome *o, het_model *m, const float *x, const uint8_t *y, int batch) {
    const size_t np = het_model_n_params(m), ns = het_model_n_state(m), nl = (size_t)batch * 10;
    o->grads = malloc(sizeof(float) * np);
    o->state1 = malloc(sizeof(float) * ns);
    o->state2 = malloc(sizeof(float) * ns);
    o->logits1 = malloc(sizeof(float) * nl);
    o->logits2 = malloc(sizeof(float) * nl);
    het_model_init_params(m, 5); /* also resets the running statistics */
    het_model_zero_grads(m);
    het_batch_result r;
    CHECK(het_model_train_batch(m, x, y, batch, 1.0f / (float)batch, 3, &r) == HET_OK, "%s",
          het_error_msg());
    o->loss = r.loss_sum;
    o->correct = r.correct;
    memcpy(o->grads, het_model_grads(m), sizeof(float) * np);
    memcpy(o->state1, het_model_state(m), sizeof(float) * ns);
    const float *lg = het_model_forward(m, x, batch, 1, 3);
    CHECK(lg != NULL, "forward: %s", het_error_msg());
    if (lg) memcpy(o->logits1, lg, sizeof(float) * nl);
    memcpy(o->state2, het_model_state(m), sizeof(float) * ns);
    lg = het_model_forward(m, x, batch, 0, 0);
    if (lg) memcpy(o->logits2, lg, sizeof(float) * nl);
}

static void outcome_free(outcome *o) {
    free(o->grads);
    free(o->state1);
    free(o->state2);
    free(o->logits1);
    free(o->logits2);
}

/* Checks a against the reference b as a group (see the top); returns max |a - b| / max|b|. */
static double group_check(const char *what, const float *a, const float *b, size_t n) {
    double maxb = 0, maxd = 0;
    for (size_t i = 0; i < n; i++) maxb = fmax(maxb, fabs((double)b[i]));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= 1e-4 * (fabs((double)b[i]) + maxb))) {
            if (!bad) first = i;
            bad++;
        }
        maxd = fmax(maxd, d);
    }
    CHECK(bad == 0, "%s: %zu of %zu off (first [%zu]: %.9g vs %.9g, group max %.3g)", what, bad,
          n, first, bad ? (double)a[first] : 0.0, bad ? (double)b[first] : 0.0, maxb);
    return maxb > 0 ? maxd / maxb : maxd;
}

/* Per layer: its parameters' gradients and its state (the model's flat buffers). */
static double compare_layers(const char *what, het_model *m, const float *a, const float *b,
                             int state) {
    double worst = 0;
    char msg[160];
    for (int i = 0; i < het_model_n_layers(m); i++) {
        size_t off, cnt;
        if (state)
            het_model_layer_state(m, i, &off, &cnt);
        else
            het_model_layer_params(m, i, &off, &cnt);
        if (cnt == 0) continue;
        snprintf(msg, sizeof msg, "%s layer %d (%s)", what, i, het_model_layer(m, i)->ops->name);
        worst = fmax(worst, group_check(msg, a + off, b + off, cnt));
    }
    return worst;
}

static int outcome_same(const outcome *a, const outcome *b, het_model *m, int batch) {
    const size_t np = het_model_n_params(m), ns = het_model_n_state(m), nl = (size_t)batch * 10;
    return a->loss == b->loss && a->correct == b->correct &&
           memcmp(a->grads, b->grads, sizeof(float) * np) == 0 &&
           memcmp(a->state1, b->state1, sizeof(float) * ns) == 0 &&
           memcmp(a->state2, b->state2, sizeof(float) * ns) == 0 &&
           memcmp(a->logits1, b->logits1, sizeof(float) * nl) == 0 &&
           memcmp(a->logits2, b->logits2, sizeof(float) * nl) == 0;
}

static void test_model_workers(const spec *s) {
    static const int batches[] = {7, 5, 4, 2, 1};
    het_model *m1 = build(s->name, s->in, 1), *mw[2] = {build(s->name, s->in, 2),
                                                         build(s->name, s->in, 3)};
    const size_t in_sz = het_shape_size(s->in);
    float *x = malloc(sizeof(float) * in_sz * MAXB);
    uint8_t y[MAXB];
    fill(x, in_sz * MAXB, s->offset - 1.0f, s->offset + 1.0f, 17);
    for (int i = 0; i < MAXB; i++) y[i] = (uint8_t)(i * 3 % 10);
    char what[128];
    for (size_t bi = 0; m1 && mw[0] && mw[1] && bi < sizeof batches / sizeof *batches; bi++) {
        const int batch = batches[bi];
        outcome ref;
        outcome_run(&ref, m1, x, y, batch);
        for (int k = 0; k < 2; k++) {
            het_model *m = mw[k];
            const int W = k + 2;
            outcome o, again;
            outcome_run(&o, m, x, y, batch);
            snprintf(what, sizeof what, "%s batch %d, %d workers", s->name, batch, W);
            CHECK_CLOSE(o.loss, ref.loss, 1e-5, what);
            double e = compare_layers(what, m, o.grads, ref.grads, 0);
            e = fmax(e, compare_layers(what, m, o.state1, ref.state1, 1));
            e = fmax(e, compare_layers(what, m, o.state2, ref.state2, 1));
            e = fmax(e, group_check(what, o.logits1, ref.logits1, (size_t)batch * 10));
            e = fmax(e, group_check(what, o.logits2, ref.logits2, (size_t)batch * 10));
            if (batch == 1) /* worker 0 alone computes as one worker does */
                CHECK(outcome_same(&o, &ref, m, batch), "%s: must equal 1 worker bitwise", what);
            outcome_run(&again, m, x, y, batch);
            CHECK(outcome_same(&o, &again, m, batch), "%s: two runs must give the same bits",
                  what);
            printf("%s: loss %.9g vs %.9g, max |diff| / group max %.2g, repeat bitwise\n", what,
                   o.loss, ref.loss, e);
            outcome_free(&o);
            outcome_free(&again);
        }
        outcome_free(&ref);
    }
    free(x);
    het_model_free(m1);
    het_model_free(mw[0]);
    het_model_free(mw[1]);
}

/* ================================ 4. finite differences ================================ */
static double train_loss(het_model *m, const float *x, const uint8_t *y, int batch) {
    het_batch_result r;
    het_model_zero_grads(m);
    het_model_train_batch(m, x, y, batch, 1.0f, 3, &r);
    return r.loss_sum;
}

static void test_gradcheck(void) {
    static const double hs[] = {1e-2, 2e-3, 5e-4};
    enum { NH = sizeof hs / sizeof hs[0] };
    const het_shape in = {2, 5, 5};
    const int batch = 5; /* 3 + 2 */
    het_model *m = build("gradcheck", in, 2);
    if (!m) return;
    het_model_init_params(m, 8);
    const size_t np = het_model_n_params(m), nx = het_shape_size(in) * (size_t)batch;
    float *p = het_model_params(m), *x = malloc(sizeof(float) * nx);
    float *g = malloc(sizeof(float) * np);
    het_rng r;
    het_rng_seed(&r, 4);
    for (size_t i = 0; i < np; i++) p[i] += 0.1f * (het_rng_uniform(&r) - 0.5f);
    fill(x, nx, -1.0f, 1.0f, 9);
    uint8_t y[5] = {0, 3, 1, 4, 2};
    train_loss(m, x, y, batch);
    memcpy(g, het_model_grads(m), sizeof(float) * np);
    size_t used[NH + 1] = {0};
    for (size_t i = 0; i < np; i++) {
        const float keep = p[i];
        double num = 0;
        int k = 0;
        for (; k < NH; k++) {
            p[i] = keep + (float)hs[k];
            const double vp = p[i], lp = train_loss(m, x, y, batch);
            p[i] = keep - (float)hs[k];
            const double vm = p[i], lm = train_loss(m, x, y, batch);
            num = (lp - lm) / (vp - vm);
            if (fabs(num - g[i]) <= 2e-2 * fmax(1.0, fmax(fabs(num), fabs((double)g[i])))) break;
        }
        p[i] = keep;
        used[k]++;
        CHECK(k < NH, "conv+BN+ReLU, 2 workers: dparam[%zu] analytic %.6g numeric %.6g", i,
              (double)g[i], num);
    }
    printf("conv+BN+ReLU+dense, 2 workers, gradcheck of %zu parameters: %zu pass at h=1e-2, %zu "
           "at 2e-3, %zu at 5e-4, %zu fail\n", np, used[0], used[1], used[2], used[3]);
    free(x);
    free(g);
    het_model_free(m);
}

int main(void) {
    test_team();
    static const spec specs[] = {
        {"bn-first", {3, 4, 4}, 50.0f}, /* mean 50, spread 1: no cancellation allowed */
        {"conv-bn", {2, 6, 6}, 0.0f},
        {"resblocks", {3, 8, 8}, 0.0f},
        {"resnet20", {3, 16, 16}, 0.0f},
    };
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) test_model_workers(&specs[i]);
    test_gradcheck();
    return het_test_finish("test_bn_workers");
}

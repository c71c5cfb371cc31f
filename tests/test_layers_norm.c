/* Tests of the stateful and composite layers: dropout, batch norm (1d and 2d), the ResNet-20
 * residual block. Finite-difference gradient checks in train and eval mode, plus the
 * statistics and state updates each layer promises (PyTorch semantics). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "hetrain/nn.h"
#include "test.h"

/* ---- a layer with its buffers, for the direct tests ---- */
typedef struct lt {
    het_layer *l;
    het_layer_plan p;
    int batch;
    size_t nin, nout;
    float *params, *grads, *state, *cache, *work, *in, *out, *dout, *din;
} lt;

static int lt_make(lt *t, het_layer *l, het_shape in, int batch, uint64_t init_seed) {
    memset(t, 0, sizeof *t);
    t->l = l;
    t->batch = batch;
    int st = l->ops->plan(l, in, &t->p);
    CHECK(st == HET_OK, "plan %s: %s", l->ops->name, het_error_msg());
    if (st != HET_OK) return st;
    l->in = in;
    l->out = t->p.out;
    t->nin = het_shape_size(in) * (size_t)batch;
    t->nout = het_shape_size(t->p.out) * (size_t)batch;
    t->params = het_alloc(sizeof(float) * (t->p.n_params + 1));
    t->grads = het_alloc(sizeof(float) * (t->p.n_params + 1));
    t->state = het_alloc(sizeof(float) * (t->p.n_state + 1));
    t->cache = het_alloc(sizeof(float) * (t->p.cache_per_sample * (size_t)batch + 1));
    t->work = het_alloc(sizeof(float) * (t->p.work_per_sample * (size_t)batch + t->p.work_fixed + 1));
    t->in = het_alloc(sizeof(float) * t->nin);
    t->din = het_alloc(sizeof(float) * t->nin);
    t->out = het_alloc(sizeof(float) * t->nout);
    t->dout = het_alloc(sizeof(float) * t->nout);
    het_rng rng;
    het_rng_seed(&rng, init_seed);
    l->ops->init(l, t->params, t->state, &rng);
    return HET_OK;
}

static void lt_forward(lt *t, int train, het_rng *rng) {
    het_exec ex = {t->params, t->grads, t->state, t->cache, t->work, rng, train, NULL, 0, 0, NULL, NULL};
    t->l->ops->forward(t->l, &ex, t->in, t->out, t->batch);
}

static void lt_backward(lt *t, int train, het_rng *rng) {
    het_exec ex = {t->params, t->grads, t->state, t->cache, t->work, rng, train, NULL, 0, 0, NULL, NULL};
    t->l->ops->backward(t->l, &ex, t->in, t->out, t->dout, t->din, t->batch);
}

static void lt_free(lt *t) {
    het_free(t->params); het_free(t->grads); het_free(t->state); het_free(t->cache);
    het_free(t->work); het_free(t->in); het_free(t->din); het_free(t->out); het_free(t->dout);
    if (t->l) t->l->ops->destroy(t->l);
}

static void fill_uniform(float *v, size_t n, float lo, float hi, uint64_t seed) {
    het_rng r;
    het_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * het_rng_uniform(&r);
}

static int plan_status(het_layer *l, het_shape in) {
    het_layer_plan p;
    int st = l->ops->plan(l, in, &p);
    l->ops->destroy(l);
    return st;
}

/* ================================ dropout ================================ */
static void test_dropout(void) {
    CHECK(plan_status(het_dropout_new(-0.1f), (het_shape){3, 1, 1}) == HET_EINVAL, "p < 0");
    CHECK(plan_status(het_dropout_new(1.5f), (het_shape){3, 1, 1}) == HET_EINVAL, "p > 1");
    CHECK(plan_status(het_dropout_new(NAN), (het_shape){3, 1, 1}) == HET_EINVAL, "p NaN");

    gradcheck_layer("dropout train", het_dropout_new(0.3f), (het_shape){3, 5, 7}, 4, NULL, 1, 2e-2);
    gradcheck_layer("dropout eval", het_dropout_new(0.3f), (het_shape){3, 5, 7}, 4, NULL, 0, 2e-2);

    /* statistics on 10^5 units: kept count and mean, 5 sigma */
    const float p = 0.3f;
    const double q = 1.0 - p, scale = 1.0 / q;
    lt t;
    if (lt_make(&t, het_dropout_new(p), (het_shape){1000, 10, 10}, 1, 1) != HET_OK) return;
    const size_t n = t.nin;
    fill_uniform(t.in, n, 0.0f, 2.0f, 5);
    het_rng rng;
    het_rng_seed(&rng, 42);
    lt_forward(&t, 1, &rng);
    size_t kept = 0, bad = 0;
    double sum_in = 0, sum_out = 0, sum_in2 = 0;
    for (size_t i = 0; i < n; i++) {
        if (t.out[i] != 0.0f) {
            kept++;
            if (t.out[i] != t.in[i] * (float)scale) bad++;
        }
        sum_in += t.in[i];
        sum_in2 += (double)t.in[i] * t.in[i];
        sum_out += t.out[i];
    }
    const double sigma_k = sqrt((double)n * p * q);
    CHECK(fabs((double)kept - (double)n * q) <= 5 * sigma_k, "kept %zu of %zu, expected %.0f +- %.0f",
          kept, n, (double)n * q, 5 * sigma_k);
    CHECK(bad == 0, "%zu kept units not scaled by exactly 1/(1-p)", bad);
    /* out_i - in_i has mean 0 and variance in_i^2 p / (1 - p) */
    const double sigma_m = sqrt(sum_in2 * p / q) / (double)n;
    CHECK(fabs(sum_out / n - sum_in / n) <= 5 * sigma_m, "mean out %.6f vs in %.6f (5 sigma %.6f)",
          sum_out / n, sum_in / n, 5 * sigma_m);
    printf("dropout p=%.1f: kept %.5f (expect %.5f), mean out %.5f in %.5f\n", (double)p,
           (double)kept / n, q, sum_out / n, sum_in / n);

    /* backward applies the same mask and scale */
    fill_uniform(t.dout, n, -1.0f, 1.0f, 6);
    lt_backward(&t, 1, &rng);
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = t.out[i] != 0.0f ? t.dout[i] * (float)scale : 0.0f;
        if (t.din[i] != want) bad++;
    }
    CHECK(bad == 0, "dropout backward: %zu units differ from dout * mask", bad);

    /* same seed, same mask; another seed, another mask */
    float *first = malloc(sizeof(float) * n);
    memcpy(first, t.out, sizeof(float) * n);
    het_rng_seed(&rng, 42);
    lt_forward(&t, 1, &rng);
    CHECK(memcmp(first, t.out, sizeof(float) * n) == 0, "same seed must give the same mask");
    het_rng_seed(&rng, 43);
    lt_forward(&t, 1, &rng);
    CHECK(memcmp(first, t.out, sizeof(float) * n) != 0, "another seed must give another mask");

    /* eval: identity, no RNG draws; backward passes dout through */
    het_rng_seed(&rng, 42);
    het_rng before = rng;
    lt_forward(&t, 0, &rng);
    CHECK(memcmp(t.in, t.out, sizeof(float) * n) == 0, "eval dropout must be the identity");
    CHECK(memcmp(&before, &rng, sizeof rng) == 0, "eval dropout must not draw from the RNG");
    lt_backward(&t, 0, &rng);
    CHECK(memcmp(t.din, t.dout, sizeof(float) * n) == 0, "eval dropout backward: din == dout");
    free(first);
    lt_free(&t);

    /* p = 1 zeroes everything; p = 0 is the identity in train mode */
    if (lt_make(&t, het_dropout_new(1.0f), (het_shape){4, 2, 2}, 3, 1) != HET_OK) return;
    fill_uniform(t.in, t.nin, 0.5f, 1.0f, 7);
    lt_forward(&t, 1, &rng);
    size_t nz = 0;
    for (size_t i = 0; i < t.nout; i++) nz += t.out[i] != 0.0f;
    CHECK(nz == 0, "p = 1: %zu non-zero outputs", nz);
    lt_free(&t);
    if (lt_make(&t, het_dropout_new(0.0f), (het_shape){4, 2, 2}, 3, 1) != HET_OK) return;
    fill_uniform(t.in, t.nin, -1.0f, 1.0f, 8);
    lt_forward(&t, 1, &rng);
    CHECK(memcmp(t.in, t.out, sizeof(float) * t.nin) == 0, "p = 0 must be the identity");
    lt_free(&t);
}

/* ================================ batchnorm ================================ */
/* Per-channel batch mean and biased variance of x (N x C x HW), in double. */
static void channel_stats(const float *x, int N, int C, int HW, int c, double *mean, double *var) {
    double s = 0, ss = 0;
    for (int n = 0; n < N; n++)
        for (int i = 0; i < HW; i++) s += x[((size_t)n * C + c) * HW + i];
    const double m = s / ((double)N * HW);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < HW; i++) {
            double d = x[((size_t)n * C + c) * HW + i] - m;
            ss += d * d;
        }
    *mean = m;
    *var = ss / ((double)N * HW);
}

static void test_batchnorm_case(het_shape in, int N) {
    const float momentum = 0.1f, eps = 1e-5f;
    const int C = in.c, HW = in.h * in.w;
    char what[64];
    snprintf(what, sizeof what, "batchnorm %dx%dx%d N=%d", in.c, in.h, in.w, N);
    lt t;
    if (lt_make(&t, het_batchnorm_new(momentum, eps), in, N, 3) != HET_OK) return;
    CHECK(t.l->batch_coupled == 1, "%s: must be batch coupled", what);
    CHECK(t.p.n_params == 2 * (size_t)C && t.p.n_state == 2 * (size_t)C,
          "%s: n_params %zu n_state %zu", what, t.p.n_params, t.p.n_state);
    int init_ok = 1;
    for (int c = 0; c < C; c++)
        init_ok &= t.params[c] == 1.0f && t.params[C + c] == 0.0f && t.state[c] == 0.0f &&
                   t.state[C + c] == 1.0f;
    CHECK(init_ok, "%s: init must be gamma 1, beta 0, mean 0, var 1", what);

    /* train: output per channel has mean 0 and biased variance ~1 (gamma 1, beta 0) */
    fill_uniform(t.in, t.nin, -1.5f, 2.5f, 11); /* mean 0.5, var 4/3 */
    for (int c = 0; c < C; c++) { /* non-trivial running stats before the step */
        t.state[c] = 0.25f * (float)c - 0.3f;
        t.state[C + c] = 0.5f + 0.3f * (float)c;
    }
    float *st0 = malloc(sizeof(float) * 2 * C);
    memcpy(st0, t.state, sizeof(float) * 2 * C);
    lt_forward(&t, 1, NULL);
    for (int c = 0; c < C; c++) {
        double m, v, om, ov;
        channel_stats(t.in, N, C, HW, c, &m, &v);
        channel_stats(t.out, N, C, HW, c, &om, &ov);
        CHECK(fabs(om) < 1e-5, "%s: channel %d train output mean %.3g", what, c, om);
        CHECK(fabs(ov - v / (v + eps)) < 1e-4, "%s: channel %d train output var %.7f, want %.7f",
              what, c, ov, v / (v + eps));
        const double M = (double)N * HW;
        const double unbiased = M > 1 ? v * M / (M - 1) : v;
        CHECK_CLOSE(t.state[c], (1 - momentum) * st0[c] + momentum * m, 1e-5, "running_mean");
        CHECK_CLOSE(t.state[C + c], (1 - momentum) * st0[C + c] + momentum * unbiased, 1e-5,
                    "running_var");
    }

    /* eval: uses the running stats (and gamma, beta), leaves them alone */
    for (int c = 0; c < C; c++) {
        t.params[c] = 0.5f + 0.2f * (float)c;
        t.params[C + c] = -0.1f * (float)c;
    }
    memcpy(st0, t.state, sizeof(float) * 2 * C);
    lt_forward(&t, 0, NULL);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int i = 0; i < HW; i++) {
                size_t k = ((size_t)n * C + c) * HW + i;
                double want = (t.in[k] - (double)t.state[c]) / sqrt((double)t.state[C + c] + eps) *
                                  t.params[c] + t.params[C + c];
                CHECK_CLOSE(t.out[k], want, 1e-5, "eval output");
            }
    CHECK(memcmp(st0, t.state, sizeof(float) * 2 * C) == 0, "%s: eval must not touch state", what);
    free(st0);
    lt_free(&t);

    snprintf(what, sizeof what, "batchnorm %dx%dx%d train", in.c, in.h, in.w);
    gradcheck_layer(what, het_batchnorm_new(momentum, eps), in, N, NULL, 1, 2e-2);
    snprintf(what, sizeof what, "batchnorm %dx%dx%d eval", in.c, in.h, in.w);
    gradcheck_layer(what, het_batchnorm_new(momentum, eps), in, N, NULL, 0, 2e-2);
}

static void test_batchnorm(void) {
    CHECK(plan_status(het_batchnorm_new(1.5f, 1e-5f), (het_shape){3, 1, 1}) == HET_EINVAL,
          "momentum > 1");
    CHECK(plan_status(het_batchnorm_new(0.1f, 0.0f), (het_shape){3, 1, 1}) == HET_EINVAL, "eps 0");
    test_batchnorm_case((het_shape){3, 5, 3}, 4); /* BatchNorm2d */
    test_batchnorm_case((het_shape){7, 1, 1}, 4); /* BatchNorm1d */
    test_batchnorm_case((het_shape){5, 1, 1}, 9);

    /* a batch of one (1d): variance 0, output beta, no NaN anywhere */
    lt t;
    if (lt_make(&t, het_batchnorm_new(0.1f, 1e-5f), (het_shape){4, 1, 1}, 1, 3) != HET_OK) return;
    fill_uniform(t.in, t.nin, -1.0f, 1.0f, 12);
    lt_forward(&t, 1, NULL);
    int finite = 1;
    for (size_t i = 0; i < t.nout; i++) finite &= t.out[i] == 0.0f;
    for (int i = 0; i < 8; i++) finite &= isfinite(t.state[i]);
    CHECK(finite, "batch of one: output must be beta (0) and state finite");
    lt_free(&t);
}

/* ================================ resblock ================================ */
/* Double-precision reference: 3x3 conv, pad 1, no bias. x: N x ci x H x W, y: N x co x oh x ow */
static void ref_conv(double *y, const double *x, const float *w, int N, int ci, int H, int W,
                     int co, int s, int oh, int ow) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < co; o++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    double acc = 0;
                    for (int c = 0; c < ci; c++)
                        for (int ki = 0; ki < 3; ki++)
                            for (int kj = 0; kj < 3; kj++) {
                                int iy = oy * s - 1 + ki, ix = ox * s - 1 + kj;
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                acc += (double)w[((o * ci + c) * 3 + ki) * 3 + kj] *
                                       x[(((size_t)n * ci + c) * H + iy) * W + ix];
                            }
                    y[(((size_t)n * co + o) * oh + oy) * ow + ox] = acc;
                }
}

/* In place train-mode batch norm in double; updates the running stats like PyTorch. */
static void ref_bn_train(double *x, int N, int C, int HW, const float *g, const float *b,
                         double *rm, double *rv) {
    for (int c = 0; c < C; c++) {
        double s = 0, ss = 0, M = (double)N * HW;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) s += x[((size_t)n * C + c) * HW + i];
        double m = s / M;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) {
                double d = x[((size_t)n * C + c) * HW + i] - m;
                ss += d * d;
            }
        double v = ss / M;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) {
                double *p = &x[((size_t)n * C + c) * HW + i];
                *p = (*p - m) / sqrt(v + 1e-5) * g[c] + b[c];
            }
        rm[c] = 0.9 * rm[c] + 0.1 * m;
        rv[c] = 0.9 * rv[c] + 0.1 * ss / (M - 1);
    }
}

static void test_resblock_forward(int ci, int co, int s, int H, int N) {
    char what[64];
    snprintf(what, sizeof what, "resblock %d->%d s%d", ci, co, s);
    lt t;
    if (lt_make(&t, het_resblock_new(co, s), (het_shape){ci, H, H}, N, 9) != HET_OK) return;
    const int oh = (H - 1) / s + 1, P = oh * oh;
    const size_t w1n = (size_t)co * ci * 9, w2n = (size_t)co * co * 9;
    CHECK(t.l->batch_coupled == 1, "%s: must be batch coupled", what);
    CHECK(t.p.out.c == co && t.p.out.h == oh && t.p.out.w == oh, "%s: out %dx%dx%d", what,
          t.p.out.c, t.p.out.h, t.p.out.w);
    CHECK(t.p.n_params == w1n + w2n + 4 * (size_t)co, "%s: n_params %zu", what, t.p.n_params);
    CHECK(t.p.n_state == 4 * (size_t)co, "%s: n_state %zu", what, t.p.n_state);
    /* init: conv weights U(-1/sqrt(fan_in), 1/sqrt(fan_in)), BN 1, 0 and 0, 1 */
    float *w1 = t.params, *g1 = w1 + w1n, *b1 = g1 + co, *w2 = b1 + co, *g2 = w2 + w2n, *b2 = g2 + co;
    double b1nd = 1 / sqrt(ci * 9.0), b2nd = 1 / sqrt(co * 9.0), mx1 = 0, mx2 = 0;
    for (size_t i = 0; i < w1n; i++) mx1 = fmax(mx1, fabs(w1[i]));
    for (size_t i = 0; i < w2n; i++) mx2 = fmax(mx2, fabs(w2[i]));
    CHECK(mx1 <= b1nd && mx1 > 0.5 * b1nd, "%s: conv1 init max %.4f bound %.4f", what, mx1, b1nd);
    CHECK(mx2 <= b2nd && mx2 > 0.5 * b2nd, "%s: conv2 init max %.4f bound %.4f", what, mx2, b2nd);
    int bn_ok = 1;
    for (int c = 0; c < co; c++)
        bn_ok &= g1[c] == 1 && b1[c] == 0 && g2[c] == 1 && b2[c] == 0 && t.state[c] == 0 &&
                 t.state[co + c] == 1 && t.state[2 * co + c] == 0 && t.state[3 * co + c] == 1;
    CHECK(bn_ok, "%s: batch-norm init", what);
    /* non-trivial BN affine params so that the test sees them */
    for (int c = 0; c < co; c++) {
        g1[c] = 0.8f + 0.05f * c;
        b1[c] = 0.1f - 0.03f * c;
        g2[c] = 1.2f - 0.04f * c;
        b2[c] = -0.05f + 0.02f * c;
    }
    fill_uniform(t.in, t.nin, -1.0f, 1.0f, 21);
    lt_forward(&t, 1, NULL);

    /* reference */
    double *x = malloc(sizeof(double) * t.nin), *a = malloc(sizeof(double) * t.nout),
           *y = malloc(sizeof(double) * t.nout), rs[4 * 64];
    for (size_t i = 0; i < t.nin; i++) x[i] = t.in[i];
    for (int c = 0; c < co; c++) rs[c] = rs[2 * co + c] = 0, rs[co + c] = rs[3 * co + c] = 1;
    ref_conv(a, x, w1, N, ci, H, H, co, s, oh, oh);
    ref_bn_train(a, N, co, P, g1, b1, rs, rs + co);
    for (size_t i = 0; i < t.nout; i++) a[i] = a[i] > 0 ? a[i] : 0;
    ref_conv(y, a, w2, N, co, oh, oh, co, 1, oh, oh);
    ref_bn_train(y, N, co, P, g2, b2, rs + 2 * co, rs + 3 * co);
    const int pad_lo = (co - ci) / 2;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < ci; c++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < oh; ox++)
                    y[(((size_t)n * co + c + pad_lo) * oh + oy) * oh + ox] +=
                        x[(((size_t)n * ci + c) * H + oy * s) * H + ox * s];
    double maxerr = 0;
    for (size_t i = 0; i < t.nout; i++) {
        double want = y[i] > 0 ? y[i] : 0;
        maxerr = fmax(maxerr, fabs(t.out[i] - want));
        CHECK_CLOSE(t.out[i], want, 1e-4, "resblock output vs reference");
    }
    for (int i = 0; i < 4 * co; i++) CHECK_CLOSE(t.state[i], rs[i], 1e-5, "resblock running stats");
    printf("%s: forward max |err| vs double reference %.2g\n", what, maxerr);
    free(x);
    free(a);
    free(y);
    lt_free(&t);
}

/* Finite differences for a layer with ReLUs INSIDE it (the residual block). gradcheck_layer's
 * fixed step h = 1e-2 moves the internal pre-activations across ReLU kinks that the caller cannot
 * keep away (batch norm puts every channel around 0): at this size 5-30% of its components fail
 * for that reason alone, and the error shrinks with h (measured: max relative error 2.8 at 1e-2,
 * 0.12 at 1e-3, 0.01 at 1e-4 on the stride-1 block in train mode). So each component is tried
 * with h = 1e-2, 2e-3, 5e-4, 1e-4 in turn and passes at the first h that agrees within tol; a
 * wrong gradient disagrees at every h. Checks every input and parameter component, the
 * accumulation of parameter gradients, and prints how many components needed a smaller h. */
static int gradcheck_kinks(const char *what, het_layer *l, het_shape in, int batch, int train,
                           double tol) {
    static const double hs[] = {1e-2, 2e-3, 5e-4, 1e-4};
    enum { NH = sizeof hs / sizeof hs[0] };
    int fails_before = het_test_failures;
    gc_bufs b;
    memset(&b, 0, sizeof b);
    int st = l->ops->plan(l, in, &b.p);
    CHECK(st == HET_OK, "%s: plan failed: %s", what, het_error_msg());
    if (st != HET_OK) return 1;
    l->in = in;
    l->out = b.p.out;
    const size_t nin = het_shape_size(in) * (size_t)batch;
    const size_t nout = het_shape_size(b.p.out) * (size_t)batch, np = b.p.n_params;
    b.params = het_alloc(sizeof(float) * (np + 1));
    b.grads = het_alloc(sizeof(float) * (np + 1));
    b.state = het_alloc(sizeof(float) * (b.p.n_state + 1));
    b.cache = het_alloc(sizeof(float) * (b.p.cache_per_sample * (size_t)batch + 1));
    b.work = het_alloc(sizeof(float) * (b.p.work_per_sample * (size_t)batch + b.p.work_fixed + 1));
    float *x = het_alloc(sizeof(float) * nin), *din = het_alloc(sizeof(float) * nin);
    float *out = het_alloc(sizeof(float) * nout), *R = het_alloc(sizeof(float) * nout);
    float *state0 = het_alloc(sizeof(float) * (b.p.n_state + 1));
    het_rng rng;
    het_rng_seed(&rng, 1234);
    l->ops->init(l, b.params, b.state, &rng);
    for (size_t i = 0; i < np; i++) b.params[i] += 0.1f * (het_rng_uniform(&rng) - 0.5f);
    for (size_t i = 0; i < nin; i++) x[i] = 2.0f * het_rng_uniform(&rng) - 1.0f;
    for (size_t i = 0; i < nout; i++) R[i] = 2.0f * het_rng_uniform(&rng) - 1.0f;
    memcpy(state0, b.state, sizeof(float) * b.p.n_state);

    const uint64_t seed = 77;
    gc_loss(l, &b, x, R, out, batch, train, seed);
    het_exec ex = {b.params, b.grads, b.state, b.cache, b.work, &rng, train, NULL, 0, 0, NULL, NULL};
    l->ops->backward(l, &ex, x, out, R, din, batch);
    float *g1 = het_alloc(sizeof(float) * (np + 1));
    memcpy(g1, b.grads, sizeof(float) * np);

    size_t used[NH + 1] = {0};
    for (size_t i = 0; i < nin + np; i++) {
        float *v = i < nin ? &x[i] : &b.params[i - nin];
        const double a = i < nin ? din[i] : g1[i - nin];
        const float keep = *v;
        double num = 0;
        int k = 0;
        for (; k < NH; k++) {
            *v = keep + (float)hs[k];
            const double vp = *v;
            memcpy(b.state, state0, sizeof(float) * b.p.n_state);
            double lp = gc_loss(l, &b, x, R, out, batch, train, seed);
            *v = keep - (float)hs[k];
            const double vm = *v;
            memcpy(b.state, state0, sizeof(float) * b.p.n_state);
            double lm = gc_loss(l, &b, x, R, out, batch, train, seed);
            num = (lp - lm) / (vp - vm); /* the float step actually taken */
            if (fabs(num - a) <= tol * fmax(1.0, fmax(fabs(num), fabs(a)))) break;
        }
        *v = keep;
        used[k]++;
        CHECK(k < NH, "%s: %s[%zu] analytic %.6g numeric %.6g at every h", what,
              i < nin ? "dinput" : "dparam", i < nin ? i : i - nin, a, num);
    }
    printf("%s: %zu components pass at h=1e-2, %zu at 2e-3, %zu at 5e-4, %zu at 1e-4, %zu fail\n",
           what, used[0], used[1], used[2], used[3], used[4]);
    /* backward accumulates: a second backward doubles the parameter gradients */
    memcpy(b.state, state0, sizeof(float) * b.p.n_state);
    gc_loss(l, &b, x, R, out, batch, train, seed);
    l->ops->backward(l, &ex, x, out, R, din, batch);
    size_t bad = 0;
    for (size_t i = 0; i < np; i++) bad += fabsf(b.grads[i] - 2 * g1[i]) > 1e-5f * fmaxf(1, fabsf(g1[i]));
    CHECK(bad == 0, "%s: %zu parameter gradients did not accumulate", what, bad);

    het_free(b.params); het_free(b.grads); het_free(b.state); het_free(b.cache); het_free(b.work);
    het_free(x); het_free(din); het_free(out); het_free(R); het_free(state0); het_free(g1);
    l->ops->destroy(l);
    return het_test_failures - fails_before;
}

static void test_resblock(void) {
    CHECK(plan_status(het_resblock_new(4, 1), (het_shape){8, 6, 6}) == HET_ESHAPE,
          "out_channels < in_channels");
    CHECK(plan_status(het_resblock_new(4, 0), (het_shape){4, 6, 6}) == HET_EINVAL, "stride 0");
    test_resblock_forward(4, 4, 1, 6, 2);
    test_resblock_forward(4, 8, 2, 6, 2);
    test_resblock_forward(3, 8, 2, 7, 3); /* odd size, odd channel padding (2 before, 3 after) */

    gradcheck_kinks("resblock 4->4 s1 train", het_resblock_new(4, 1), (het_shape){4, 6, 6}, 2, 1,
                    2e-2);
    gradcheck_kinks("resblock 4->8 s2 train", het_resblock_new(8, 2), (het_shape){4, 6, 6}, 2, 1,
                    2e-2);
    gradcheck_kinks("resblock 4->8 s2 eval", het_resblock_new(8, 2), (het_shape){4, 6, 6}, 2, 0,
                    2e-2);
    gradcheck_kinks("resblock 3->8 s2 train", het_resblock_new(8, 2), (het_shape){3, 7, 7}, 3, 1,
                    2e-2);
}

int main(void) {
    test_dropout();
    test_batchnorm();
    test_resblock();
    return het_test_finish("test_layers_norm");
}

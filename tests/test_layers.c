/* Core layers: finite-difference gradient checks (tests/gradcheck.h) for dense, conv2d (wide
 * stride-1 path with column chunks and both weight-gradient forms, strided path, padding, odd
 * sizes, batch 1 to 3), maxpool (inputs without ties), avgpool (also global), relu (inputs away
 * from 0) and flatten; conv2d forward against a direct convolution in double; maxpool against
 * naive loops on inputs full of ties (first maximum takes the gradient) and NaN propagation;
 * the backward contract (din written, parameter gradients accumulated, din == NULL gives the
 * same parameter gradients); PyTorch-default init bounds; softmax cross-entropy against a double
 * reference, its gradient against finite differences, in place, and at logits of +-1000.
 * Tolerances: gradcheck's documented 2e-2 relative (h = 1e-2, float forwards); forward against
 * the double direct convolution 1e-5 relative to sum |w x|; the loss to 1e-6 relative to the
 * double reference; its gradient to 1e-3 (central differences in double, h = 1e-3, error
 * O(h^2)); maxpool against the naive loops and the din == NULL path exactly (same operations). */
#include <math.h>
#include <string.h>

#include "gradcheck.h"
#include "hetrain/nn.h"
#include "hetrain/tensor.h"
#include "test.h"

#define GC_TOL 2e-2

static het_rng rng;

static float *rand_buf(size_t n, float lo, float hi) {
    float *p = het_alloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * het_rng_uniform(&rng);
    return p;
}

/* ---- a layer with its own buffers, for direct forward / backward calls ---- */
typedef struct rig {
    het_layer *l;
    het_layer_plan p;
    int batch;
    float *params, *grads, *cache, *work, *out;
    het_exec ex;
} rig;

static int rig_make(rig *r, het_layer *l, het_shape in, int batch) {
    memset(r, 0, sizeof *r);
    r->l = l;
    r->batch = batch;
    int st = l->ops->plan(l, in, &r->p);
    CHECK(st == HET_OK, "plan %s: %s", l->ops->name, het_error_msg());
    if (st != HET_OK) return st;
    l->in = in;
    l->out = r->p.out;
    r->params = het_alloc(sizeof(float) * (r->p.n_params + 1));
    r->grads = het_alloc(sizeof(float) * (r->p.n_params + 1));
    r->cache = het_alloc(sizeof(float) * (r->p.cache_per_sample * batch + 1));
    r->work = het_alloc(sizeof(float) * (r->p.work_per_sample * batch + r->p.work_fixed + 1));
    r->out = het_alloc(sizeof(float) * (het_shape_size(r->p.out) * batch + 1));
    het_rng ir;
    het_rng_seed(&ir, 99);
    if (l->ops->init) l->ops->init(l, r->params, NULL, &ir);
    r->ex = (het_exec){r->params, r->grads, NULL, r->cache, r->work, &ir, 1, NULL, 0, 0, NULL, NULL};
    return HET_OK;
}

static void rig_free(rig *r) {
    het_free(r->params); het_free(r->grads); het_free(r->cache); het_free(r->work); het_free(r->out);
    if (r->l->ops->destroy) r->l->ops->destroy(r->l);
}

/* ---- conv2d ---- */
typedef struct conv_cfg {
    int C, H, W, oc, k, stride, pad, batch;
} conv_cfg;

static const conv_cfg conv_cfgs[] = {
    {1, 8, 8, 2, 3, 1, 1, 1},  /* wide path, pad 1, batch 1 */
    {3, 7, 9, 4, 3, 2, 1, 3},  /* strided, odd sizes */
    {2, 6, 5, 3, 5, 1, 2, 3},  /* wide path, LeNet conv1-like padding */
    {2, 9, 9, 3, 3, 2, 0, 1},  /* strided, no pad, batch 1 */
    {3, 10, 10, 4, 5, 1, 0, 3}, /* wide path, no pad (LeNet conv2-like) */
    {2, 11, 7, 3, 4, 3, 2, 2}, /* stride 3, even kernel */
    {4, 5, 6, 2, 1, 1, 0, 3},  /* 1x1 kernel */
    {1, 20, 20, 2, 3, 1, 2, 2}, /* wide path in 3 column chunks */
    {4, 9, 8, 16, 5, 1, 1, 2}, /* weight gradient through the transposed dout */
    {16, 18, 17, 20, 3, 1, 1, 1}, /* both: transposed dW and 2 chunks */
    {6, 14, 14, 16, 5, 1, 0, 2}, /* LeNet conv2 */
};

/* Forward against a direct convolution in double. */
static void check_conv_forward(conv_cfg c) {
    rig r;
    het_layer *l = het_conv2d_new(c.oc, c.k, c.stride, c.pad);
    if (rig_make(&r, l, (het_shape){c.C, c.H, c.W}, c.batch) != HET_OK) return;
    size_t in_sz = (size_t)c.C * c.H * c.W;
    float *x = rand_buf(in_sz * c.batch, -1, 1);
    /* poison the output: every element must be written */
    for (size_t i = 0; i < het_shape_size(r.p.out) * c.batch; i++) r.out[i] = NAN;
    l->ops->forward(l, &r.ex, x, r.out, c.batch);
    int oh = r.p.out.h, ow = r.p.out.w, bad = 0;
    const float *Wt = r.params, *b = r.params + (size_t)c.oc * c.C * c.k * c.k;
    for (int s = 0; s < c.batch; s++)
        for (int o = 0; o < c.oc; o++)
            for (int y = 0; y < oh; y++)
                for (int xx = 0; xx < ow; xx++) {
                    double acc = b[o], mag = fabs(b[o]);
                    for (int ch = 0; ch < c.C; ch++)
                        for (int ki = 0; ki < c.k; ki++)
                            for (int kj = 0; kj < c.k; kj++) {
                                int iy = y * c.stride - c.pad + ki, ix = xx * c.stride - c.pad + kj;
                                if (iy < 0 || iy >= c.H || ix < 0 || ix >= c.W) continue;
                                double v = (double)Wt[((o * c.C + ch) * c.k + ki) * c.k + kj] *
                                           x[s * in_sz + ((size_t)ch * c.H + iy) * c.W + ix];
                                acc += v;
                                mag += fabs(v);
                            }
                    float got = r.out[(((size_t)s * c.oc + o) * oh + y) * ow + xx];
                    if (!(fabs(got - acc) <= 1e-5 * (1 + mag)) && bad++ < 3)
                        CHECK(0, "conv forward C%d %dx%d k%d s%d p%d: out[%d][%d][%d][%d] %.8g vs %.8g",
                              c.C, c.H, c.W, c.k, c.stride, c.pad, s, o, y, xx, (double)got, acc);
                }
    CHECK(bad == 0, "conv forward C%d %dx%d k%d s%d p%d: %d outputs wrong", c.C, c.H, c.W, c.k,
          c.stride, c.pad, bad);
    het_free(x);
    rig_free(&r);
}

/* The backward contract: din is WRITTEN (garbage already in it must not matter), parameter
 * gradients ACCUMULATE (a second backward doubles every one of them), and din == NULL gives the
 * same parameter gradients. */
static void check_backward_contract(const char *what, het_layer *l1, het_layer *l2, het_shape in,
                                    int batch) {
    rig a, b;
    if (rig_make(&a, l1, in, batch) != HET_OK) return;
    if (rig_make(&b, l2, in, batch) != HET_OK) { rig_free(&a); return; }
    size_t nin = het_shape_size(in) * batch, nout = het_shape_size(a.p.out) * batch;
    float *x = rand_buf(nin, -1, 1), *dout = rand_buf(nout, -1, 1);
    float *din1 = rand_buf(nin, -9, 9), *din2 = rand_buf(nin, -9, 9);
    float *g1 = het_alloc(sizeof(float) * (a.p.n_params + 1));
    l1->ops->forward(l1, &a.ex, x, a.out, batch);
    l1->ops->backward(l1, &a.ex, x, a.out, dout, din1, batch);
    memcpy(g1, a.grads, sizeof(float) * a.p.n_params);
    l1->ops->backward(l1, &a.ex, x, a.out, dout, din2, batch);
    CHECK(memcmp(din1, din2, sizeof(float) * nin) == 0, "%s: din must be written, not accumulated",
          what);
    int bad = 0;
    for (size_t i = 0; i < a.p.n_params; i++)
        bad += !(fabs(a.grads[i] - 2.0 * g1[i]) <= 1e-5 * (1 + fabs(g1[i])));
    CHECK(bad == 0, "%s: %d parameter gradients did not accumulate", what, bad);
    l2->ops->forward(l2, &b.ex, x, b.out, batch);
    l2->ops->backward(l2, &b.ex, x, b.out, dout, NULL, batch);
    CHECK(a.p.n_params > 0 && memcmp(g1, b.grads, sizeof(float) * a.p.n_params) == 0,
          "%s: parameter gradients differ between din and din == NULL", what);
    het_free(x); het_free(dout); het_free(din1); het_free(din2); het_free(g1);
    rig_free(&a);
    rig_free(&b);
}

/* PyTorch defaults: weight and bias uniform in +-1/sqrt(fan_in). */
static void check_init(const char *what, het_layer *l, het_shape in, int fan_in) {
    rig r;
    if (rig_make(&r, l, in, 1) != HET_OK) return;
    double bound = 1.0 / sqrt((double)fan_in), mx = 0;
    for (size_t i = 0; i < r.p.n_params; i++) mx = fmax(mx, fabs(r.params[i]));
    CHECK(mx <= bound && mx > 0.9 * bound, "%s init: max |param| %.6g, bound %.6g", what, mx, bound);
    rig_free(&r);
}

static void test_conv(void) {
    char what[96];
    for (size_t i = 0; i < sizeof conv_cfgs / sizeof conv_cfgs[0]; i++) {
        conv_cfg c = conv_cfgs[i];
        snprintf(what, sizeof what, "conv2d C%d %dx%d oc%d k%d s%d p%d b%d", c.C, c.H, c.W, c.oc,
                 c.k, c.stride, c.pad, c.batch);
        gradcheck_layer(what, het_conv2d_new(c.oc, c.k, c.stride, c.pad), (het_shape){c.C, c.H, c.W},
                        c.batch, NULL, 1, GC_TOL);
        check_conv_forward(c);
        check_backward_contract(what, het_conv2d_new(c.oc, c.k, c.stride, c.pad),
                     het_conv2d_new(c.oc, c.k, c.stride, c.pad), (het_shape){c.C, c.H, c.W}, c.batch);
    }
    check_conv_forward((conv_cfg){1, 28, 28, 6, 5, 1, 2, 2}); /* LeNet conv1 */
    check_init("conv2d", het_conv2d_new(16, 5, 1, 0), (het_shape){6, 14, 14}, 6 * 25);
    /* bad configurations are refused with a message */
    het_layer_plan p;
    het_layer *l = het_conv2d_new(4, 7, 1, 0);
    CHECK(l->ops->plan(l, (het_shape){1, 5, 5}, &p) == HET_ESHAPE, "conv2d: kernel > input");
    l->ops->destroy(l);
    l = het_conv2d_new(4, 3, 0, 0);
    CHECK(l->ops->plan(l, (het_shape){1, 5, 5}, &p) == HET_EINVAL, "conv2d: stride 0");
    l->ops->destroy(l);
}

static void test_dense(void) {
    gradcheck_layer("dense 5->3 b1", het_dense_new(3), (het_shape){5, 1, 1}, 1, NULL, 1, GC_TOL);
    gradcheck_layer("dense 5->3 b3", het_dense_new(3), (het_shape){5, 1, 1}, 3, NULL, 1, GC_TOL);
    gradcheck_layer("dense 2x3x4->7 b3", het_dense_new(7), (het_shape){2, 3, 4}, 3, NULL, 1, GC_TOL);
    gradcheck_layer("dense 33->17 b5", het_dense_new(17), (het_shape){33, 1, 1}, 5, NULL, 1, GC_TOL);
    check_backward_contract("dense", het_dense_new(7), het_dense_new(7), (het_shape){2, 3, 4}, 3);
    check_init("dense", het_dense_new(120), (het_shape){16, 5, 5}, 400);
    /* forward against a direct double computation */
    rig r;
    het_layer *l = het_dense_new(5);
    if (rig_make(&r, l, (het_shape){3, 2, 2}, 4) != HET_OK) return;
    float *x = rand_buf(48, -1, 1);
    l->ops->forward(l, &r.ex, x, r.out, 4);
    CHECK(r.p.out.c == 5 && r.p.out.h == 1 && r.p.out.w == 1, "dense out shape");
    for (int s = 0; s < 4; s++)
        for (int o = 0; o < 5; o++) {
            double acc = r.params[60 + o];
            for (int i = 0; i < 12; i++) acc += (double)r.params[o * 12 + i] * x[s * 12 + i];
            CHECK_CLOSE(r.out[s * 5 + o], acc, 1e-5, "dense forward");
        }
    het_free(x);
    rig_free(&r);
}

/* Distinct values spaced 0.1 apart in random order: no ties, and a perturbation of 1e-2 never
 * changes the argmax. */
static float *no_tie_input(size_t n) {
    float *x = het_alloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) x[i] = 0.1f * (float)((double)i - 0.5 * (double)n);
    for (size_t i = n; i > 1; i--) {
        size_t j = het_rng_below(&rng, (uint32_t)i);
        float t = x[i - 1];
        x[i - 1] = x[j];
        x[j] = t;
    }
    return x;
}

/* Max pooling against the obvious loops: forward max (NaN propagates), backward sends dout to
 * the first maximum of each window. Inputs take few distinct values, so ties are everywhere. */
static void check_maxpool_ref(int k, int stride, het_shape in, int batch) {
    rig r;
    het_layer *l = het_maxpool_new(k, stride);
    if (rig_make(&r, l, in, batch) != HET_OK) return;
    int oh = r.p.out.h, ow = r.p.out.w, s_ = stride > 0 ? stride : k;
    size_t nin = het_shape_size(in) * batch, nout = het_shape_size(r.p.out) * batch;
    float *x = het_alloc(sizeof(float) * nin), *g = rand_buf(nout, -1, 1);
    float *din = rand_buf(nin, -9, 9), *want = het_alloc(sizeof(float) * nin);
    for (size_t i = 0; i < nin; i++) x[i] = (float)het_rng_below(&rng, 4) - 1.5f;
    l->ops->forward(l, &r.ex, x, r.out, batch);
    l->ops->backward(l, &r.ex, x, r.out, g, din, batch);
    int bad_f = 0, bad_b = 0;
    for (int sc = 0; sc < batch * in.c; sc++) {
        const float *xp = x + (size_t)sc * in.h * in.w;
        float *wp = want + (size_t)sc * in.h * in.w;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                int best = oy * s_ * in.w + ox * s_;
                for (int ki = 0; ki < k; ki++)
                    for (int kj = 0; kj < k; kj++) {
                        int q = (oy * s_ + ki) * in.w + ox * s_ + kj;
                        if (xp[q] > xp[best]) best = q;
                    }
                size_t o = (size_t)sc * oh * ow + (size_t)oy * ow + ox;
                bad_f += r.out[o] != xp[best];
                wp[best] += g[o];
            }
    }
    for (size_t i = 0; i < nin; i++) bad_b += din[i] != want[i];
    CHECK(bad_f == 0 && bad_b == 0, "maxpool k%d s%d %dx%dx%d b%d vs reference: %d outputs, %d "
          "input gradients differ", k, stride, in.c, in.h, in.w, batch, bad_f, bad_b);
    /* a NaN anywhere in a window makes that output NaN: try the window's first element and
     * the element (1, 1), which take opposite sides in every pairwise max */
    for (int t = 0; t < 2; t++) {
        size_t q = t == 0 ? 0 : (size_t)in.w + 1;
        float keep = x[q];
        x[q] = NAN;
        l->ops->forward(l, &r.ex, x, r.out, batch);
        size_t o = t == 0 ? 0 : (size_t)(1 / s_) * ow + (size_t)(1 / s_); /* a window holding q */
        CHECK(isnan(r.out[o]), "maxpool k%d s%d: NaN at %zu must propagate", k, stride, q);
        x[q] = keep;
    }
    het_free(x); het_free(g); het_free(din); het_free(want);
    rig_free(&r);
}

static void test_pool(void) {
    check_maxpool_ref(2, 2, (het_shape){3, 8, 8}, 2);   /* 2x2 fast path, SIMD only */
    check_maxpool_ref(2, 2, (het_shape){2, 7, 11}, 3);  /* odd sizes: SIMD + scalar tail, last row/col */
    check_maxpool_ref(2, 2, (het_shape){1, 28, 28}, 1); /* LeNet pool1 */
    check_maxpool_ref(2, 0, (het_shape){2, 3, 2}, 2);   /* stride 0 = kernel; scalar only */
    check_maxpool_ref(3, 2, (het_shape){2, 9, 7}, 2);   /* generic, overlapping windows */
    check_maxpool_ref(2, 1, (het_shape){1, 5, 6}, 1);
    check_maxpool_ref(3, 3, (het_shape){2, 10, 8}, 1);
    float *x = no_tie_input(3 * 8 * 8 * 3);
    gradcheck_layer("maxpool k2 s2 3x8x8 b3", het_maxpool_new(2, 2), (het_shape){3, 8, 8}, 3, x, 1, GC_TOL);
    het_free(x);
    x = no_tie_input(2 * 7 * 9 * 2);
    gradcheck_layer("maxpool k3 s2 2x7x9 b2", het_maxpool_new(3, 2), (het_shape){2, 7, 9}, 2, x, 1, GC_TOL);
    het_free(x);
    x = no_tie_input(1 * 5 * 5 * 1);
    gradcheck_layer("maxpool k2 s1 1x5x5 b1", het_maxpool_new(2, 1), (het_shape){1, 5, 5}, 1, x, 1, GC_TOL);
    het_free(x);
    x = no_tie_input(2 * 7 * 11 * 3);
    gradcheck_layer("maxpool k2 s2 2x7x11 b3", het_maxpool_new(2, 2), (het_shape){2, 7, 11}, 3, x, 1, GC_TOL);
    het_free(x);
    /* ties go to the first maximum (row-major window order), as in PyTorch */
    {
        rig r;
        het_layer *l = het_maxpool_new(2, 0);
        if (rig_make(&r, l, (het_shape){1, 2, 4}, 1) == HET_OK) {
            float in[8] = {1, 5, 2, 2, 5, 3, 2, 2}, dout[2] = {10, 20}, din[8];
            l->ops->forward(l, &r.ex, in, r.out, 1);
            CHECK(r.p.out.h == 1 && r.p.out.w == 2, "maxpool stride 0 means stride = kernel");
            CHECK(r.out[0] == 5 && r.out[1] == 2, "maxpool values %g %g", (double)r.out[0], (double)r.out[1]);
            l->ops->backward(l, &r.ex, in, r.out, dout, din, 1);
            CHECK(din[1] == 10 && din[4] == 0 && din[2] == 20 && din[3] == 0 && din[6] == 0,
                  "maxpool ties must go to the first max: %g %g %g %g", (double)din[1],
                  (double)din[4], (double)din[2], (double)din[3]);
            rig_free(&r);
        }
    }
    gradcheck_layer("avgpool k2 s2 3x6x6 b3", het_avgpool_new(2, 2), (het_shape){3, 6, 6}, 3, NULL, 1, GC_TOL);
    gradcheck_layer("avgpool k3 s2 2x7x7 b2", het_avgpool_new(3, 2), (het_shape){2, 7, 7}, 2, NULL, 1, GC_TOL);
    gradcheck_layer("avgpool global 4x5x3 b3", het_avgpool_new(0, 0), (het_shape){4, 5, 3}, 3, NULL, 1, GC_TOL);
    {
        rig r;
        het_layer *l = het_avgpool_new(0, 0);
        if (rig_make(&r, l, (het_shape){2, 2, 3}, 1) == HET_OK) {
            float in[12] = {1, 2, 3, 4, 5, 6, -1, -1, -1, -1, -1, 5};
            l->ops->forward(l, &r.ex, in, r.out, 1);
            CHECK(r.p.out.c == 2 && r.p.out.h == 1 && r.p.out.w == 1, "global avgpool shape");
            CHECK_CLOSE(r.out[0], 3.5, 1e-6, "global avgpool ch0");
            CHECK_CLOSE(r.out[1], 0.0, 1e-6, "global avgpool ch1");
            rig_free(&r);
        }
    }
}

static void test_relu_flatten(void) {
    size_t n = 3 * 4 * 5 * 3;
    float *x = het_alloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) { /* |x| in [0.05, 1]: no kink within h */
        float m = 0.05f + 0.95f * het_rng_uniform(&rng);
        x[i] = het_rng_uniform(&rng) < 0.5f ? -m : m;
    }
    gradcheck_layer("relu 3x4x5 b3", het_relu_new(), (het_shape){3, 4, 5}, 3, x, 1, GC_TOL);
    gradcheck_layer("flatten 3x4x5 b3", het_flatten_new(), (het_shape){3, 4, 5}, 3, NULL, 1, GC_TOL);
    het_free(x);
    rig r;
    het_layer *l = het_flatten_new();
    if (rig_make(&r, l, (het_shape){3, 4, 5}, 1) == HET_OK) {
        CHECK(r.p.out.c == 60 && r.p.out.h == 1 && r.p.out.w == 1, "flatten shape %dx%dx%d",
              r.p.out.c, r.p.out.h, r.p.out.w);
        rig_free(&r);
    }
}

/* ---- softmax cross-entropy ---- */
static double ce_ref(const float *z, int y, int classes, double *p) {
    double m = z[0], s = 0;
    for (int j = 1; j < classes; j++) m = fmax(m, z[j]);
    for (int j = 0; j < classes; j++) s += exp((double)z[j] - m);
    for (int j = 0; j < classes; j++) p[j] = exp((double)z[j] - m) / s;
    return log(s) + m - z[y];
}

static void test_softmax_ce(void) {
    enum { B = 6, K = 10 };
    float *z = rand_buf(B * K, -4, 4), probs[B * K], dz[B * K], tmp_probs[K];
    uint8_t y[B] = {0, 9, 3, 3, 7, 1};
    int correct = -1, want_correct = 0;
    double loss = het_softmax_ce_forward(z, y, B, K, probs, &correct), want = 0, p[K];
    for (int s = 0; s < B; s++) {
        want += ce_ref(z + s * K, y[s], K, p);
        int arg = 0;
        for (int j = 0; j < K; j++) {
            CHECK_CLOSE(probs[s * K + j], p[j], 1e-6, "softmax probability");
            if (z[s * K + j] > z[s * K + arg]) arg = j;
        }
        want_correct += arg == y[s];
    }
    CHECK(fabs(loss - want) <= 1e-6 * fabs(want), "CE loss %.12g vs double ref %.12g", loss, want);
    CHECK(correct == want_correct, "CE correct %d vs %d", correct, want_correct);
    /* probs may alias the logits; a label >= classes gives a NaN loss, not a wild read */
    float zz[B * K];
    memcpy(zz, z, sizeof zz);
    double loss2 = het_softmax_ce_forward(zz, y, B, K, zz, NULL);
    CHECK(loss2 == loss && memcmp(zz, probs, sizeof zz) == 0, "CE in place differs: %.12g vs %.12g",
          loss2, loss);
    uint8_t bad[1] = {K};
    CHECK(isnan(het_softmax_ce_forward(z, bad, 1, K, tmp_probs, NULL)), "CE: bad label must give NaN");
    /* gradient of scale * sum of losses against central differences */
    const float scale = 1.0f / B;
    het_softmax_ce_backward(dz, probs, y, B, K, scale);
    float tmp[B * K];
    for (int i = 0; i < B * K; i++) {
        const double h = 1e-3;
        float keep = z[i];
        z[i] = keep + (float)h;
        double hp = (double)z[i] - keep;
        double lp = het_softmax_ce_forward(z, y, B, K, tmp, NULL);
        z[i] = keep - (float)h;
        double hm = keep - (double)z[i];
        double lm = het_softmax_ce_forward(z, y, B, K, tmp, NULL);
        z[i] = keep;
        double num = scale * (lp - lm) / (hp + hm); /* the float steps actually taken */
        CHECK_CLOSE(dz[i], num, 1e-3, "CE gradient vs finite difference");
    }
    /* stability: logits of +-1000 */
    float big[2 * 4] = {1000, -1000, 0, 999, -1000, -1000, 1000, 1000};
    uint8_t yb[2] = {1, 3};
    float pb[8], db[8];
    double lb = het_softmax_ce_forward(big, yb, 2, 4, pb, &correct);
    double l0 = log(1 + exp(-1.0)) + 2000, l1 = log(2.0); /* exact up to e^-1000 terms */
    CHECK(isfinite(lb) && fabs(lb - (l0 + l1)) <= 1e-9 * (l0 + l1), "CE at +-1000: %.15g vs %.15g",
          lb, l0 + l1);
    CHECK(correct == 0, "CE at +-1000: ties go to the first max, so 0 correct, got %d", correct);
    het_softmax_ce_backward(db, pb, yb, 2, 4, 1.0f);
    double sum0 = 0, sum1 = 0;
    for (int j = 0; j < 4; j++) {
        CHECK(isfinite(pb[j]) && isfinite(pb[4 + j]) && isfinite(db[j]), "CE at +-1000: non-finite");
        sum0 += pb[j];
        sum1 += pb[4 + j];
    }
    CHECK_CLOSE(sum0, 1.0, 1e-6, "CE probabilities sum to 1");
    CHECK_CLOSE(sum1, 1.0, 1e-6, "CE probabilities sum to 1");
    CHECK_CLOSE(db[1], -1.0, 1e-6, "CE gradient at the true class with p = 0");
    CHECK_CLOSE(pb[6], 0.5, 1e-6, "CE two equal maxima share the mass");
    het_free(z);
}

int main(void) {
    het_rng_seed(&rng, 424242);
    printf("seed 424242\n");
    het_blas_set_threads(1);
    test_dense();
    test_conv();
    test_pool();
    test_relu_flatten();
    test_softmax_ce();
    return het_test_finish("test_layers");
}

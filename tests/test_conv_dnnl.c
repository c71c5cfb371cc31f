/* Convolution through oneDNN (tensor/conv_dnnl.c) against its naive double-precision twin
 * (het_conv2d_ref / het_conv2d_backward_ref), and the layers that use it against their own
 * kernels (het_dnnl_disable):
 *  - odd shapes: channels not a multiple of 16 (1, 3, 5, 20, 24), batch 1 and ragged batches,
 *    maps smaller than the kernel's blocks (1x1, 2x3, 5x5), strides 1 and 2, kernels 1, 3, 5,
 *    padding 0-2, with and without bias; the same handle called with several batch sizes
 *    (20 on one handle)
 *  - backward adds onto non-zero dw and db, writes dx (dx_add 0) or adds onto it (dx_add 1),
 *    and skips dx when NULL
 *  - every call again with channel-blocked (nChw16c) activations on each side that allows
 *    them, the results reordered back and checked the same way
 *  - conv2d and resblock layers (forward, din, parameter gradients) equal their own-kernel
 *    path, several workers sharing one handle included (test_bn_workers, test_model and
 *    test_layers cover gradients and workers on whichever path is built)
 *  - the layers that take blocked activations (conv2d, resblock, batchnorm, maxpool, global
 *    avgpool, flatten, relu) give, run blocked, what they give run plain
 *  - whole models (cifar-cnn, resnet20) with their edges blocked and cifar-cnn's four ReLUs
 *    fused into its convolutions equal HET_LAYOUT=plain: loss, gradients, running statistics
 *    and eval logits, 1 and 2 workers
 *  - refusals and failures of oneDNN (through the test hook het_dnnl_inject): statuses,
 *    messages, fallbacks, NaN outputs and the fault record (check_failures)
 * Tolerance: 1e-5 relative to the sum of absolute terms (float rounding of a sum).
 * Skips (exit 77) when hetrain is built without oneDNN. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain.h"
#include "hetrain/core.h"
#include "hetrain/nn.h"
#include "hetrain/tensor.h"
#include "tensor/internal.h"
#include "dnnl_fault.h"
#include "test.h"

static het_rng rng;

static float *rnd(size_t n) {
    float *p = het_alloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * het_rng_uniform(&rng) - 1.0f;
    return p;
}

static float *copy(const float *a, size_t n) {
    float *p = het_alloc(sizeof(float) * (n ? n : 1));
    memcpy(p, a, sizeof(float) * n);
    return p;
}

/* max |a - b| / (1 + scale) over n, where scale is the magnitude of the operands' sums */
static double err(const float *a, const float *b, size_t n, double scale) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / (1.0 + scale);
        if (d > m || d != d) m = d != d ? INFINITY : d;
    }
    return m;
}

/* Plain NCHW <-> channel-blocked nChw16c (nn.h) of n samples of C x hw, C a multiple of 16. */
static float *to_blk(const float *a, int n, int C, size_t hw) {
    float *b = het_alloc(sizeof(float) * (size_t)n * C * hw + 1);
    for (int s = 0; s < n; s++)
        for (int c = 0; c < C; c++)
            for (size_t p = 0; p < hw; p++)
                b[(size_t)s * C * hw + (size_t)(c / 16) * hw * 16 + p * 16 + c % 16] =
                    a[((size_t)s * C + c) * hw + p];
    return b;
}

static void from_blk(float *a, const float *b, int n, int C, size_t hw) {
    for (int s = 0; s < n; s++)
        for (int c = 0; c < C; c++)
            for (size_t p = 0; p < hw; p++)
                a[((size_t)s * C + c) * hw + p] =
                    b[(size_t)s * C * hw + (size_t)(c / 16) * hw * 16 + p * 16 + c % 16];
}

typedef struct shape {
    int C, H, W, O, k, stride, pad, bias;
} shape;

/* Calls of handle h with the layouts of blk: the plain operands reordered in, the results out. */
typedef struct blk_call {
    het_dnnl_conv *h;
    shape s;
    int blk, n;
    size_t hw, ohw;
} blk_call;

static int fwd(const blk_call *c, const float *x, const float *w, const float *b, float *y,
               float *work) {
    const int xb = c->blk & HET_DNNL_X_BLK, yb = c->blk & HET_DNNL_Y_BLK;
    float *xx = xb ? to_blk(x, c->n, c->s.C, c->hw) : NULL;
    float *yy = yb ? het_alloc(sizeof(float) * (size_t)c->n * c->s.O * c->ohw) : NULL;
    int rc = het_dnnl_conv_forward(c->h, c->n, xb ? xx : x, w, b, yb ? yy : y, work, c->blk);
    if (yb) from_blk(y, yy, c->n, c->s.O, c->ohw);
    het_free(xx), het_free(yy);
    return rc;
}

static int bwd(const blk_call *c, const float *x, const float *w, const float *dy, float *dx,
               int dx_add, float *dw, float *db, float *work) {
    const int xb = c->blk & HET_DNNL_X_BLK, yb = c->blk & HET_DNNL_Y_BLK;
    float *xx = xb ? to_blk(x, c->n, c->s.C, c->hw) : NULL;
    float *dxx = xb && dx ? to_blk(dx, c->n, c->s.C, c->hw) : NULL;
    float *dyy = yb ? to_blk(dy, c->n, c->s.O, c->ohw) : NULL;
    int rc = het_dnnl_conv_backward(c->h, c->n, xb ? xx : x, w, yb ? dyy : dy, xb ? dxx : dx,
                                    dx_add, dw, db, work, c->blk);
    if (dxx) from_blk(dx, dxx, c->n, c->s.C, c->hw);
    het_free(xx), het_free(dxx), het_free(dyy);
    return rc;
}

static void check_shape_blk(shape s, const int *batches, int nb, int blk) {
    het_dnnl_conv *h = NULL;
    int st = het_dnnl_conv_create(&h, s.C, s.H, s.W, s.O, s.k, s.stride, s.pad, s.bias);
    char what[160];
    snprintf(what, sizeof what, "C%d %dx%d O%d k%d s%d p%d bias%d blk%d", s.C, s.H, s.W, s.O,
             s.k, s.stride, s.pad, s.bias, blk);
    CHECK(st == HET_OK && h != NULL, "%s: oneDNN refused the shape: %s", what, het_error_msg());
    if (!h) return;
    int oh = (s.H + 2 * s.pad - s.k) / s.stride + 1, ow = (s.W + 2 * s.pad - s.k) / s.stride + 1;
    size_t ps, fixed, xs = (size_t)s.C * s.H * s.W, ys = (size_t)s.O * oh * ow;
    size_t ws = (size_t)s.O * s.C * s.k * s.k;
    het_dnnl_conv_work(h, &ps, &fixed);
    double scale = (double)s.C * s.k * s.k; /* terms of one output, each |.| <= 1 */
    for (int bi = 0; bi < nb; bi++) {
        int n = batches[bi];
        float *x = rnd(xs * n), *w = rnd(ws), *b = rnd((size_t)s.O), *dy = rnd(ys * n);
        float *y = rnd(ys * n), *yr = rnd(ys * n), *work = rnd(ps * n + fixed);
        blk_call c = {h, s, blk, n, (size_t)s.H * s.W, (size_t)oh * ow};
        CHECK(fwd(&c, x, w, s.bias ? b : NULL, y, work) == HET_OK, "%s", what);
        het_conv2d_ref(yr, x, w, s.bias ? b : NULL, n, s.C, s.H, s.W, s.O, s.k, s.stride, s.pad);
        double e = err(y, yr, ys * n, scale);
        CHECK(e <= 1e-5, "%s n%d forward: error %g", what, n, e);

        /* backward: dw, db start non-zero (accumulation); dx written, then added */
        float *dw0 = rnd(ws), *db0 = rnd((size_t)s.O), *dx0 = rnd(xs * n);
        float *dw = copy(dw0, ws), *db = copy(db0, s.O), *dx = copy(dx0, xs * n);
        float *dwr = copy(dw0, ws), *dbr = copy(db0, s.O), *dxr = rnd(xs * n);
        memset(dxr, 0, sizeof(float) * xs * n);
        CHECK(bwd(&c, x, w, dy, dx, 0, dw, s.bias ? db : NULL, work) == HET_OK, "%s", what);
        het_conv2d_backward_ref(dxr, dwr, s.bias ? dbr : NULL, x, w, dy, n, s.C, s.H, s.W, s.O,
                                s.k, s.stride, s.pad);
        double sw = (double)n * oh * ow, sx = (double)s.O * s.k * s.k;
        e = err(dw, dwr, ws, sw);
        CHECK(e <= 1e-5, "%s n%d weight gradient: error %g", what, n, e);
        e = err(db, dbr, s.O, sw);
        CHECK(e <= 1e-5, "%s n%d bias gradient: error %g", what, n, e);
        e = err(dx, dxr, xs * n, sx);
        CHECK(e <= 1e-5, "%s n%d input gradient: error %g", what, n, e);
        if (!s.bias) CHECK(memcmp(db, db0, sizeof(float) * s.O) == 0, "%s: db touched", what);

        /* dx_add = 1 adds onto dx0; dx NULL leaves everything but dw alone */
        memcpy(dx, dx0, sizeof(float) * xs * n);
        CHECK(bwd(&c, x, w, dy, dx, 1, dw, NULL, work) == HET_OK, "%s", what);
        for (size_t i = 0; i < xs * n; i++) dxr[i] += dx0[i];
        e = err(dx, dxr, xs * n, sx);
        CHECK(e <= 1e-5, "%s n%d input gradient added: error %g", what, n, e);
        memcpy(dx, dx0, sizeof(float) * xs * n);
        CHECK(bwd(&c, x, w, dy, NULL, 0, dw, NULL, work) == HET_OK, "%s", what);
        CHECK(memcmp(dx, dx0, sizeof(float) * xs * n) == 0, "%s: dx touched", what);

        float *bufs[] = {x, w, b, dy, y, yr, work, dw0, db0, dx0, dw, db, dx, dwr, dbr, dxr};
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) het_free(bufs[i]);
    }
    het_dnnl_conv_free(h);
}

/* Every layout the shape allows: plain, and each side blocked where its channels allow. */
static void check_shape(shape s, const int *batches, int nb) {
    for (int blk = 0; blk < 4; blk++) {
        if (((blk & HET_DNNL_X_BLK) && s.C % 16) || ((blk & HET_DNNL_Y_BLK) && s.O % 16)) continue;
        check_shape_blk(s, batches, nb, blk);
    }
}

/* One layer on the oneDNN path and its twin on its own kernels: same output, din, gradients. */
static void check_layer(const char *what, het_layer *a, het_layer *ref, het_shape in, int n,
                        int planned_dn) {
    het_layer_plan pa, pr;
    het_dnnl_disable(!planned_dn);
    CHECK(a->ops->plan(a, in, &pa) == HET_OK, "%s plan: %s", what, het_error_msg());
    het_dnnl_disable(1);
    CHECK(ref->ops->plan(ref, in, &pr) == HET_OK, "%s plan ref: %s", what, het_error_msg());
    het_dnnl_disable(0);
    a->in = ref->in = in;
    a->out = pa.out;
    ref->out = pr.out;
    size_t xs = het_shape_size(in) * n, ys = het_shape_size(pa.out) * n;
    float *params = rnd(pa.n_params), *state = rnd(pa.n_state + 1), *state2;
    a->ops->init(a, params, state, &rng);
    state2 = copy(state, pa.n_state + 1);
    float *x = rnd(xs), *dy = rnd(ys), *y = rnd(ys), *y2 = rnd(ys), *dx = rnd(xs), *dx2 = rnd(xs);
    float *g = rnd(pa.n_params), *g2 = copy(g, pa.n_params);
    float *ca = rnd(pa.cache_per_sample * n + 1), *cr = rnd(pr.cache_per_sample * n + 1);
    float *wa = rnd(pa.work_per_sample * n + pa.work_fixed), *wr = rnd(pr.work_per_sample * n + pr.work_fixed);
    het_exec ea = {params, g, state, ca, wa, &rng, 1, NULL, 0, 0, NULL, NULL};
    het_exec er = {params, g2, state2, cr, wr, &rng, 1, NULL, 0, 0, NULL, NULL};
    a->ops->forward(a, &ea, x, y, n);
    ref->ops->forward(ref, &er, x, y2, n);
    CHECK(err(y, y2, ys, 100) <= 1e-5, "%s forward: error %g", what, err(y, y2, ys, 100));
    a->ops->backward(a, &ea, x, y, dy, dx, n);
    ref->ops->backward(ref, &er, x, y2, dy, dx2, n);
    CHECK(err(dx, dx2, xs, 100) <= 1e-5, "%s din: error %g", what, err(dx, dx2, xs, 100));
    CHECK(err(g, g2, pa.n_params, 1000) <= 1e-5, "%s gradients: error %g", what,
          err(g, g2, pa.n_params, 1000));
    float *bufs[] = {params, state, state2, x, dy, y, y2, dx, dx2, g, g2, ca, cr, wa, wr};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) het_free(bufs[i]);
    a->ops->destroy(a);
    ref->ops->destroy(ref);
}

/* Layer l run plain and run with the layouts in_blk / out_blk (train or eval mode, one worker):
 * the same output, din, parameter gradients and state, the blocked ones reordered back. */
static void check_blk_layer(const char *what, het_layer *l, het_shape in, int n, int in_blk,
                            int out_blk, int train) {
    het_layer_plan p;
    CHECK(l->ops->plan(l, in, &p) == HET_OK, "%s plan: %s", what, het_error_msg());
    CHECK(!in_blk || (p.blk & HET_BLK_TAKE), "%s: does not take a blocked input", what);
    CHECK(!out_blk || (p.blk & (HET_BLK_KEEP | HET_BLK_EMIT)), "%s: cannot write blocked", what);
    l->in = in;
    l->out = p.out;
    const size_t hw = (size_t)in.h * in.w, ohw = (size_t)p.out.h * p.out.w;
    const size_t xs = het_shape_size(in) * n, ys = het_shape_size(p.out) * n;
    float *params = rnd(p.n_params + 1), *state = rnd(p.n_state + 1);
    if (l->ops->init) l->ops->init(l, params, state, &rng);
    float *state2 = copy(state, p.n_state + 1);
    float *x = rnd(xs), *dy = rnd(ys);
    float *xb = in_blk ? to_blk(x, n, in.c, hw) : copy(x, xs);
    float *dyb = out_blk ? to_blk(dy, n, p.out.c, ohw) : copy(dy, ys);
    float *y = rnd(ys), *yb = rnd(ys), *y2 = rnd(ys), *dx = rnd(xs), *dxb = rnd(xs), *dx2 = rnd(xs);
    float *g = rnd(p.n_params + 1), *g2 = copy(g, p.n_params + 1);
    float *ca = rnd(p.cache_per_sample * n + 1), *cb = rnd(p.cache_per_sample * n + 1);
    float *wa = rnd(p.work_per_sample * n + p.work_fixed + 1);
    float *wb = rnd(p.work_per_sample * n + p.work_fixed + 1);
    het_exec ea = {params, g, state, ca, wa, &rng, train, NULL, 0, 0, NULL, NULL};
    het_exec eb = {params, g2, state2, cb, wb, &rng, train, NULL, 0, 0, NULL, NULL};
    l->in_blk = l->out_blk = 0;
    l->ops->forward(l, &ea, x, y, n);
    l->ops->backward(l, &ea, x, y, dy, dx, n);
    l->in_blk = in_blk;
    l->out_blk = out_blk;
    l->ops->forward(l, &eb, xb, yb, n);
    l->ops->backward(l, &eb, xb, yb, dyb, dxb, n);
    if (out_blk) from_blk(y2, yb, n, p.out.c, ohw);
    else memcpy(y2, yb, sizeof(float) * ys);
    if (in_blk) from_blk(dx2, dxb, n, in.c, hw);
    else memcpy(dx2, dxb, sizeof(float) * xs);
    CHECK(err(y, y2, ys, 100) <= 1e-5, "%s forward: error %g", what, err(y, y2, ys, 100));
    CHECK(err(dx, dx2, xs, 100) <= 1e-5, "%s din: error %g", what, err(dx, dx2, xs, 100));
    CHECK(err(g, g2, p.n_params, 1000) <= 1e-5, "%s gradients: error %g", what,
          err(g, g2, p.n_params, 1000));
    CHECK(err(state, state2, p.n_state, 100) <= 1e-5, "%s state: error %g", what,
          err(state, state2, p.n_state, 100));
    float *bufs[] = {params, state, state2, x, dy, xb, dyb, y, yb, y2, dx, dxb, dx2,
                     g, g2, ca, cb, wa, wb};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) het_free(bufs[i]);
    l->ops->destroy(l);
}

/* A zoo model with its edges blocked and its ReLUs fused against HET_LAYOUT=plain: loss,
 * gradients and running statistics of one training batch, then eval logits; *blocked: how many
 * edges were blocked, *fused: how many ReLUs the layer before applied. */
static void check_model(const char *name, int workers, int *blocked, int *fused) {
    const int n = 6;
    het_shape in = {1, 28, 28};
    het_model *m[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        if (k == 0) setenv("HET_LAYOUT", "plain", 1);
        int st = het_zoo_build(&m[k], name, in, 10, n, workers);
        unsetenv("HET_LAYOUT");
        CHECK(st == HET_OK, "%s: %s", name, het_error_msg());
        if (st != HET_OK) return;
        het_model_init_params(m[k], 7);
    }
    *blocked = *fused = 0;
    for (int i = 0; i < het_model_n_layers(m[1]); i++) {
        const het_layer *a = het_model_layer(m[0], i), *b = het_model_layer(m[1], i);
        *blocked += b->out_blk;
        *fused += b->fused_away;
        CHECK(b->fused_away == (i > 0 && het_model_layer(m[1], i - 1)->relu_out),
              "%s: layer %d fused on one side only", name, i);
        CHECK(a->in_blk == 0 && a->out_blk == 0 && a->fused_away == 0 && a->relu_out == 0,
              "%s: HET_LAYOUT=plain left layer %d blocked or fused", name, i);
    }
    float *x = rnd((size_t)n * 28 * 28);
    uint8_t y[6] = {1, 2, 3, 4, 5, 6};
    het_batch_result r[2];
    for (int k = 0; k < 2; k++) {
        het_model_zero_grads(m[k]);
        CHECK(het_model_train_batch(m[k], x, y, n, 1.0f / n, 11, &r[k]) == HET_OK, "%s", name);
    }
    char what[64];
    snprintf(what, sizeof what, "%s, %d workers", name, workers);
    CHECK(fabs(r[0].loss_sum - r[1].loss_sum) <= 1e-5 * n, "%s: loss %.9g vs %.9g", what,
          r[0].loss_sum, r[1].loss_sum);
    size_t np = het_model_n_params(m[0]), ns = het_model_n_state(m[0]);
    double e = err(het_model_grads(m[0]), het_model_grads(m[1]), np, 100);
    CHECK(e <= 1e-5, "%s gradients: error %g", what, e);
    if (ns) {
        e = err(het_model_state(m[0]), het_model_state(m[1]), ns, 100);
        CHECK(e <= 1e-5, "%s running statistics: error %g", what, e);
    }
    float *lg = copy(het_model_forward(m[0], x, n, 0, 1), (size_t)n * 10);
    e = err(lg, het_model_forward(m[1], x, n, 0, 1), (size_t)n * 10, 100);
    CHECK(e <= 1e-5, "%s eval logits: error %g", what, e);
    het_free(lg);
    het_free(x);
    het_model_free(m[0]);
    het_model_free(m[1]);
}

/* Two threads running one handle at once, each with its own batch size and buffers. */
typedef struct job {
    het_dnnl_conv *h;
    int n, ok;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    het_rng r;
    het_rng_seed(&r, (uint64_t)j->n);
    size_t ps, fixed, xs = 16 * 9 * 9, ws = 16 * 16 * 9;
    het_dnnl_conv_work(j->h, &ps, &fixed);
    float *x = het_alloc(4 * xs * j->n), *y = het_alloc(4 * xs * j->n), *yr = het_alloc(4 * xs * j->n);
    float *w = het_alloc(4 * ws), *work = het_alloc(4 * (ps * j->n + fixed));
    for (size_t i = 0; i < xs * j->n; i++) x[i] = het_rng_uniform(&r) - 0.5f;
    for (size_t i = 0; i < ws; i++) w[i] = het_rng_uniform(&r) - 0.5f;
    het_conv2d_ref(yr, x, w, NULL, j->n, 16, 9, 9, 16, 3, 1, 1);
    j->ok = 1;
    for (int rep = 0; rep < 20; rep++) {
        j->ok &= het_dnnl_conv_forward(j->h, j->n, x, w, NULL, y, work, 0) == HET_OK;
        j->ok &= err(y, yr, xs * j->n, 144) <= 1e-5;
    }
    het_free(x), het_free(y), het_free(yr), het_free(w), het_free(work);
    return NULL;
}

/* Every element of p[0..n) NaN. */
/* The fault record holds status st and a message containing want; then clears it. */
/* Refusals and failures of oneDNN end as statuses, never the process (tensor.h), provoked
 * through the test hook het_dnnl_inject (tensor/internal.h): oneDNN refuses no sane shape and
 * does not fail while running on this machine.
 *  - het_dnnl_conv_create: a shape with no output is HET_EINVAL; a refused shape HET_ENOTSUP,
 *    no handle, the message "conv2d: oneDNN refused <shape>: ...: unimplemented"; the layers
 *    then plan on their own kernels and compute what they compute with oneDNN disabled
 *  - a refused new batch size: plain operands get HET_ENOTSUP with nothing written and no
 *    fault; blocked ones get NaN outputs and the fault
 *  - a failure while running: the status, NaN outputs (forward y; backward dw, db, dx) and the
 *    fault "conv2d: oneDNN forward failed on <shape>: ...: runtime_error"
 *  - a whole model (cifar-cnn, blocked) on failing oneDNN: train_batch returns, the loss is not
 *    finite, the fault names the convolution. */
static void check_failures(void) {
    het_dnnl_fault_clear();
    CHECK(het_dnnl_fault(NULL, 0) == HET_OK, "a fault before any failure");
    het_dnnl_conv *h = (het_dnnl_conv *)&rng;
    CHECK(het_dnnl_conv_create(&h, 16, 2, 2, 16, 5, 1, 0, 0) == HET_EINVAL && h == NULL,
          "kernel 5 on 2x2 without padding: %s", het_error_msg());
    CHECK(strstr(het_error_msg(), "conv2d: oneDNN") != NULL, "message '%s'", het_error_msg());

    /* refused at creation */
    het_dnnl_inject(HET_DNNL_INJECT_REFUSE);
    h = (het_dnnl_conv *)&rng;
    CHECK(het_dnnl_conv_create(&h, 16, 8, 8, 16, 3, 1, 1, 0) == HET_ENOTSUP && h == NULL,
          "injected refusal at creation: %s", het_error_msg());
    CHECK(strstr(het_error_msg(), "conv2d: oneDNN refused 16->16 channels, kernel 3") &&
              strstr(het_error_msg(), "unimplemented"),
          "refusal message '%s'", het_error_msg());
    /* the layers fall back to their own kernels: the same as oneDNN disabled */
    check_layer("conv2d refused", het_conv2d_new(32, 3, 1, 1), het_conv2d_new(32, 3, 1, 1),
                (het_shape){16, 6, 6}, 3, 1);
    check_layer("resblock refused", het_resblock_new(32, 2), het_resblock_new(32, 2),
                (het_shape){16, 7, 7}, 2, 1);
    het_model *m = NULL;
    CHECK(het_zoo_build(&m, "resnet20", (het_shape){3, 8, 8}, 10, 4, 1) == HET_OK,
          "resnet20 with oneDNN refusing: %s", het_error_msg());
    het_model_free(m);
    het_dnnl_inject(0);
    check_fault("refusals at plan", HET_OK, NULL);

    /* refused for a new batch size, and failing while running */
    const int C = 16, HW = 6, O = 32;
    const size_t xs = (size_t)C * HW * HW, ys = (size_t)O * HW * HW, ws = (size_t)O * C * 9;
    CHECK(het_dnnl_conv_create(&h, C, HW, HW, O, 3, 1, 1, 1) == HET_OK && h, "handle: %s",
          het_error_msg());
    if (!h) return;
    size_t ps, fixed;
    het_dnnl_conv_work(h, &ps, &fixed);
    const int n = 3;
    float *x = rnd(xs * n), *w = rnd(ws), *b = rnd(O), *y = rnd(ys * n), *y0 = copy(y, ys * n);
    float *dy = rnd(ys * n), *dx = rnd(xs * n), *dw = rnd(ws), *db = rnd(O);
    float *work = rnd(ps * n + fixed);
    het_dnnl_inject(HET_DNNL_INJECT_REFUSE);
    CHECK(het_dnnl_conv_forward(h, n, x, w, b, y, work, 0) == HET_ENOTSUP, "plain refusal: %s",
          het_error_msg());
    CHECK(memcmp(y, y0, sizeof(float) * ys * n) == 0, "a plain refusal wrote y");
    CHECK(strstr(het_error_msg(), "conv2d: oneDNN refused") && strstr(het_error_msg(), "batch 3"),
          "message '%s'", het_error_msg());
    check_fault("plain refusal", HET_OK, NULL);
    { /* blocked operands (16 | C, O: with reorders where oneDNN picked another layout) */
        CHECK(het_dnnl_conv_forward(h, n, x, w, b, y, work, HET_DNNL_X_BLK | HET_DNNL_Y_BLK) ==
                  HET_ENOTSUP, "blocked refusal: %s", het_error_msg());
        CHECK(all_nan(y, ys * n), "a blocked refusal left y not NaN");
        check_fault("blocked refusal", HET_ENOTSUP, "conv2d: oneDNN refused 16->32 channels");
        CHECK(het_dnnl_conv_backward(h, n, x, w, dy, dx, 0, dw, db, work,
                                     HET_DNNL_X_BLK | HET_DNNL_Y_BLK) == HET_ENOTSUP,
              "blocked backward refusal");
        CHECK(all_nan(dw, ws) && all_nan(db, O) && all_nan(dx, xs * n),
              "a blocked backward refusal left dw, db or dx not NaN");
        check_fault("blocked backward refusal", HET_ENOTSUP, "conv2d: oneDNN refused 16->32");
    }
    het_dnnl_inject(HET_DNNL_INJECT_RUN);
    for (int blk = 0; blk <= 3; blk += 3) {
        memcpy(y, y0, sizeof(float) * ys * n);
        int st = het_dnnl_conv_forward(h, 1, x, w, b, y, work, blk);
        CHECK(st == HET_EINVAL, "blk %d: failure while running: %d %s", blk, st, het_error_msg());
        CHECK(all_nan(y, ys), "blk %d: a failed forward left y not NaN", blk);
        check_fault("failed forward", HET_EINVAL,
                    "conv2d: oneDNN forward failed on 16->32 channels, kernel 3, stride 1, pad 1, "
                    "on 6x6, batch 1: convolution (a test's injected failure): runtime_error");
        memset(dw, 0, sizeof(float) * ws);
        st = het_dnnl_conv_backward(h, 1, x, w, dy, dx, 1, dw, db, work, blk);
        CHECK(st == HET_EINVAL, "blk %d: failed backward: %d", blk, st);
        CHECK(all_nan(dw, ws) && all_nan(db, O) && all_nan(dx, xs),
              "blk %d: a failed backward left dw, db or dx not NaN", blk);
        check_fault("failed backward", HET_EINVAL, "conv2d: oneDNN backward failed on 16->32");
    }
    /* a whole model: the step returns, its loss is not finite, the fault says why */
    m = NULL;
    CHECK(het_zoo_build(&m, "cifar-cnn", (het_shape){1, 12, 12}, 10, 4, 1) == HET_OK,
          "cifar-cnn: %s", het_error_msg());
    if (m) {
        het_model_init_params(m, 3);
        float *in = rnd(4 * 144);
        uint8_t lab[4] = {1, 2, 3, 4};
        het_batch_result r;
        het_model_zero_grads(m);
        CHECK(het_model_train_batch(m, in, lab, 4, 0.25f, 1, &r) == HET_OK, "train_batch");
        CHECK(!isfinite(r.loss_sum), "loss %g finite on a failing oneDNN", r.loss_sum);
        check_fault("cifar-cnn", HET_EINVAL, "conv2d: oneDNN forward failed on 1->32 channels");
        het_free(in);
        het_model_free(m);
    }
    /* a training run: it stops on the non-finite loss and names the oneDNN failure as the
     * cause, not the learning rate */
    het_train_config c = het_train_config_defaults();
    const char *kv[][2] = {{"model", "cifar-cnn"}, {"data", "synthetic"}, {"batch", "8"},
                           {"train-limit", "16"}, {"test-limit", "8"}, {"progress", "off"}, {"quiet", "true"},
                           {"synthetic-shape", "3x12x12"}};
    for (size_t i = 0; i < sizeof kv / sizeof *kv; i++)
        CHECK(het_train_config_set(&c, kv[i][0], kv[i][1]) == HET_OK, "%s", het_error_msg());
    het_trainer *t = NULL;
    CHECK(het_trainer_create(&t, &c) == HET_OK, "trainer: %s", het_error_msg());
    if (t) {
        CHECK(het_trainer_run_epoch(t) == HET_EINVAL, "an epoch on a failing oneDNN went on");
        CHECK(strstr(het_error_msg(), "non-finite") &&
                  strstr(het_error_msg(), "a oneDNN convolution failed first: conv2d: oneDNN "),
              "the stop does not name the oneDNN failure: %s", het_error_msg());
        het_trainer_free(t);
    }
    het_dnnl_fault_clear();
    het_dnnl_inject(0);
    /* the handle works again */
    CHECK(het_dnnl_conv_forward(h, n, x, w, b, y, work, 0) == HET_OK, "after the failures: %s",
          het_error_msg());
    CHECK(het_dnnl_fault(NULL, 0) == HET_OK, "a fault after the failures ended");
    float *bufs[] = {x, w, b, y, y0, dy, dx, dw, db, work};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) het_free(bufs[i]);
    het_dnnl_conv_free(h);
}

int main(void) {
    if (!het_dnnl_available()) {
        printf("test_conv_dnnl: SKIP: hetrain was built without oneDNN (libdnnl-dev)\n");
        return 77;
    }
    het_rng_seed(&rng, 20261130);
    het_blas_set_threads(1);
    const shape shapes[] = {
        {1, 28, 28, 32, 3, 1, 1, 1},  /* cifar-cnn's first layer */
        {32, 14, 14, 64, 3, 1, 1, 1}, /* and its third */
        {16, 9, 9, 32, 3, 2, 1, 0},   /* ResNet's stride-2 convolution, odd map */
        {3, 5, 5, 16, 3, 1, 1, 1},    {5, 2, 3, 16, 3, 1, 1, 0},  {20, 7, 6, 24, 3, 2, 1, 1},
        {24, 1, 1, 16, 3, 1, 1, 0},   {16, 6, 6, 48, 1, 1, 0, 1}, {4, 11, 9, 32, 5, 1, 2, 1},
        {17, 8, 8, 16, 5, 2, 0, 0},
    };
    const int batches[] = {1, 3, 16, 5};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) check_shape(shapes[i], batches, 4);

    /* layers: conv2d of cifar-cnn's shapes, resblocks of ResNet-20 (stride 1 and 2) */
    check_layer("conv2d 1->32", het_conv2d_new(32, 3, 1, 1), het_conv2d_new(32, 3, 1, 1),
                (het_shape){1, 12, 12}, 5, 1);
    check_layer("conv2d 32->64", het_conv2d_new(64, 3, 1, 1), het_conv2d_new(64, 3, 1, 1),
                (het_shape){32, 7, 7}, 3, 1);
    check_layer("resblock 16", het_resblock_new(16, 1), het_resblock_new(16, 1),
                (het_shape){16, 8, 8}, 4, 1);
    check_layer("resblock 16->32 s2", het_resblock_new(32, 2), het_resblock_new(32, 2),
                (het_shape){16, 9, 9}, 3, 1);
    /* the twin's path itself, so the comparison above is between two paths */
    check_layer("resblock both own", het_resblock_new(16, 1), het_resblock_new(16, 1),
                (het_shape){16, 5, 5}, 2, 0);

    /* channel-blocked layers against themselves run plain */
    het_dnnl_conv *probe = NULL;
    CHECK(het_dnnl_conv_create(&probe, 16, 8, 8, 16, 3, 1, 1, 0) == HET_OK, "probe: %s",
          het_error_msg());
    int x_ok = 0, y_ok = 0;
    if (probe) het_dnnl_conv_blocked(probe, &x_ok, &y_ok);
    het_dnnl_conv_free(probe);
    if (x_ok && y_ok) {
        check_blk_layer("conv2d 32->64 blocked", het_conv2d_new(64, 3, 1, 1), (het_shape){32, 7, 7}, 3, 1, 1, 1);
        check_blk_layer("conv2d 1->32 emits", het_conv2d_new(32, 3, 1, 1), (het_shape){1, 9, 9}, 2, 0, 1, 1);
        check_blk_layer("conv2d 16->32 s2 takes", het_conv2d_new(32, 3, 2, 1), (het_shape){16, 9, 9}, 2, 1, 0, 1);
        for (int train = 0; train < 2; train++) {
            check_blk_layer("resblock 16", het_resblock_new(16, 1), (het_shape){16, 8, 8}, 4, 1, 1, train);
            check_blk_layer("resblock 16->32 s2", het_resblock_new(32, 2), (het_shape){16, 9, 9}, 3, 1, 1, train);
            check_blk_layer("resblock 32->64 s2", het_resblock_new(64, 2), (het_shape){32, 6, 6}, 2, 1, 1, train);
            check_blk_layer("batchnorm 32", het_batchnorm_new(0.1f, 1e-5f), (het_shape){32, 5, 3}, 3, 1, 1, train);
        }
        check_blk_layer("maxpool 2 (32)", het_maxpool_new(2, 2), (het_shape){32, 6, 7}, 2, 1, 1, 1);
        check_blk_layer("maxpool 3 s2 (16)", het_maxpool_new(3, 2), (het_shape){16, 7, 7}, 2, 1, 1, 1);
        het_simd_force(HET_SIMD_PORTABLE); /* the loops that run without AVX-512 */
        check_blk_layer("maxpool 2 portable", het_maxpool_new(2, 2), (het_shape){16, 4, 6}, 2, 1, 1, 1);
        het_simd_force(-1);
        check_blk_layer("avgpool global", het_avgpool_new(0, 0), (het_shape){48, 5, 4}, 3, 1, 0, 1);
        check_blk_layer("flatten", het_flatten_new(), (het_shape){32, 3, 2}, 2, 1, 0, 1);
        check_blk_layer("relu", het_relu_new(), (het_shape){16, 4, 4}, 2, 1, 1, 1);
        /* whole models: edges blocked, results those of plain */
        for (int workers = 1; workers <= 2; workers++) {
            int b = 0, f = 0;
            check_model("resnet20", workers, &b, &f);
            CHECK(b >= 11, "resnet20: %d edges blocked, expected the stem's to the pool's", b);
            check_model("cifar-cnn", workers, &b, &f);
            CHECK(b >= 8, "cifar-cnn: %d edges blocked, expected the convolutions' to flatten", b);
            CHECK(f == 4, "cifar-cnn: %d ReLUs fused into their convolutions, expected 4", f);
        }
    } else {
        printf("test_conv_dnnl: oneDNN does not run on nChw16c here: blocked layers not checked\n");
    }

    /* concurrent calls on one handle with different batch sizes */
    het_dnnl_conv *h = NULL;
    CHECK(het_dnnl_conv_create(&h, 16, 9, 9, 16, 3, 1, 1, 0) == HET_OK && h, "handle: %s",
          het_error_msg());
    if (h) {
        job jobs[3] = {{h, 2, 0}, {h, 7, 0}, {h, 2, 0}};
        pthread_t t[3];
        for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, run_job, &jobs[i]);
        for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
        for (int i = 0; i < 3; i++) CHECK(jobs[i].ok, "thread %d (batch %d) wrong", i, jobs[i].n);
        het_dnnl_conv_free(h);
    }

    /* many batch sizes on one handle (each keeps its own primitives) */
    const int many[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    check_shape((shape){16, 3, 3, 16, 3, 1, 1, 1}, many, 20);

    /* disabled: no handle, and no failure */
    het_dnnl_disable(1);
    het_dnnl_conv *off = (het_dnnl_conv *)&rng;
    CHECK(het_dnnl_conv_create(&off, 16, 8, 8, 16, 3, 1, 1, 0) == HET_OK && off == NULL,
          "disabled but made a handle");
    het_dnnl_disable(0);

    check_failures();
    return het_test_finish("test_conv_dnnl");
}

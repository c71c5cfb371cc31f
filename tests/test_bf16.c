/* --precision bf16 (nn.h: het_model_set_precision; tensor/bf16.c):
 *  - the rounding: het_bf16_round is round to nearest even (ties, the largest finite values,
 *    NaN, inf, subnormals) and gives the bits of comm/wire.c's het_wire_bf16_from_float and of
 *    het_vround_bf16 on every value tried;
 *  - each layer that computes in bf16 (conv2d on every kernel path: direct, wide, im2col with
 *    stride 2, oneDNN; the dense layer in test_dense_bf16.c, with the same helpers,
 *    bf16_layer.h), forward and backward, against the definition: the naive
 *    double-precision reference (het_conv2d_ref, het_gemm_ref) on the operands rounded to
 *    bf16. Bounds, per element, with S = the sum of |products| (the same reference on |x| and
 *    |w|) and K the products summed: against the definition (K + 2) 2^-24 S (fp32 sums of exact
 *    bf16 products), against the fp32 reference on unrounded operands (2^-7 + 2^-16 +
 *    (K + 2) 2^-24) S (each operand's rounding is at most 2^-8 relative). That the rounding
 *    happens is checked too: the fp32 path is off the definition by more than 4x the bf16
 *    path's error (so a layer that forgot to round fails);
 *  - whole models (cifar-cnn, resnet20 on 3x32x32, mlp, lenet5): a bf16 step's loss within 2 %
 *    of the fp32 step's, its gradient within 30 % (relative L2; measured 4-20 %: at
 *    initialization on random data a model's gradient is a small difference of large terms,
 *    batch norm's backward subtracts means, so the operands' 2^-8 relative rounding grows
 *    there) and not equal to it; eval logits within 5 % (measured 0.1-0.3 %); the master
 *    weights untouched by a bf16 batch (no rounding in place); two bf16 runs of 3 steps with one seed and worker count bitwise
 *    equal (1 and 2 workers); the master weights stay fp32 (updated values off the bf16 grid);
 *    the dense stack is not used in bf16; channel-blocked edges and fused ReLUs (where this
 *    CPU's oneDNN runs nChw16c) against HET_LAYOUT=plain in bf16; activations that stay bf16
 *    between convolutions (two edges of cifar-cnn on oneDNN's bf16 kernels, none on the
 *    portable path or in ResNet-20) against HET_BF16_ACTS=fp32: three steps and eval bitwise
 *    equal, 1 and 2 workers (on AMX, not yet run there, within test_layouts' bounds); the
 *    ReLU's backward on bf16 outputs (NaN, +-0, subnormals, a tail) on the AVX-512 kernel and
 *    the portable loop;
 *  - which kernels ran: the portable path everywhere (oneDNN's bf16 kernels turned off by
 *    het_dnnl_bf16_disable); where the CPU has AMX or AVX512-BF16 (het_dnnl_bf16_enabled) the
 *    whole test again on oneDNN's bf16 kernels, which must meet the same bounds, and each
 *    convolution oneDNN runs computed both ways: the two agree within twice the bound against
 *    the definition, and differ (else the bf16 kernels did not run). Elsewhere that half is
 *    skipped, saying why. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hetrain.h"
#include "hetrain/comm.h"
#include "hetrain/nn.h"
#include "hetrain/tensor.h"
#include "bf16_layer.h"
#include "tensor/internal.h"
#include "test.h"

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---------------------------------------------------------------- rounding */

static void test_rounding(void) {
    /* ties to even: 1 + 2^-8 is half an ulp above 1 (even): 1; 1 + 3 2^-8 is half an ulp
     * above 1 + 2^-7 (odd): 1 + 2^-6 */
    CHECK(het_bf16_round(1.0f + 0x1p-8f) == 1.0f, "%a", (double)het_bf16_round(1.0f + 0x1p-8f));
    CHECK(het_bf16_round(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f, "%a",
          (double)het_bf16_round(1.0f + 3 * 0x1p-8f));
    CHECK(het_bf16_round(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f, "above the tie rounds up");
    CHECK(het_bf16_round(-1.0f - 0x1p-8f - 0x1p-20f) == -1.0f - 0x1p-7f, "negative");
    CHECK(bits(het_bf16_round(3.0e38f)) == 0x7f800000u || het_bf16_round(3.0e38f) > 0,
          "large values stay finite or become inf");
    CHECK(het_bf16_round(from_bits(0x7f7fffffu)) == INFINITY, "FLT_MAX rounds to inf");
    CHECK(bits(het_bf16_round(from_bits(0x7f7f7fffu))) == 0x7f7f0000u, "largest bf16 stays");
    CHECK(het_bf16_round(INFINITY) == INFINITY && het_bf16_round(-INFINITY) == -INFINITY, "inf");
    float nan_low = from_bits(0x7f800001u); /* payload only in the dropped half */
    CHECK(isnan(het_bf16_round(nan_low)), "a NaN stays NaN, %08x", bits(het_bf16_round(nan_low)));
    CHECK(bits(het_bf16_round(from_bits(0x00000001u))) == 0, "the smallest subnormal rounds to 0");
    CHECK(bits(het_bf16_round(from_bits(0x00008000u))) == 0, "a subnormal tie to even 0");
    CHECK(bits(het_bf16_round(from_bits(0x00018000u))) == 0x00020000u, "a subnormal tie to even");
    CHECK(bits(het_bf16_round(-0.0f)) == 0x80000000u, "-0 keeps its sign");
    /* the same bits as the wire's conversion, and the vector loop's, on many values */
    enum { N = 1 << 16 };
    float *v = het_alloc(sizeof(float) * N), *w = het_alloc(sizeof(float) * N);
    het_rng r;
    het_rng_seed(&r, 5);
    for (int i = 0; i < N; i++) {
        uint32_t u = (uint32_t)(het_rng_u64(&r) >> 32);
        if (i % 4 == 1) u = (u & 0xffff0000u) | 0x8000u; /* exact ties */
        if (i % 4 == 2) u &= 0x807fffffu;                /* subnormals */
        v[i] = from_bits(u);
    }
    het_vround_bf16(w, v, N);
    int wire_bad = 0, vec_bad = 0;
    for (int i = 0; i < N; i++) {
        uint32_t a = bits(het_bf16_round(v[i]));
        uint32_t b = (uint32_t)het_wire_bf16_from_float(v[i]) << 16;
        wire_bad += a != b;
        vec_bad += a != bits(w[i]);
        if (a != b && wire_bad < 4) fprintf(stderr, "  %08x: %08x vs wire %08x\n", bits(v[i]), a, b);
    }
    CHECK(wire_bad == 0, "%d of %d values round otherwise than het_wire_bf16_from_float",
          wire_bad, N);
    CHECK(vec_bad == 0, "%d of %d values round otherwise in het_vround_bf16", vec_bad, N);
    het_vround_bf16(v, v, N); /* in place */
    CHECK(memcmp(v, w, sizeof(float) * N) == 0, "in place");
    het_free(v);
    het_free(w);
}

typedef struct cshape {
    int C, H, W, O, k, stride, pad, batch;
    const char *path;
} cshape;

static void test_conv(const cshape *s) {
    het_shape in = {s->C, s->H, s->W};
    lay t;
    if (lay_make(&t, het_conv2d_new(s->O, s->k, s->stride, s->pad), in, s->batch)) {
        CHECK(0, "conv plan failed");
        return;
    }
    const size_t nx = het_shape_size(in) * (size_t)s->batch;
    const size_t ny = het_shape_size(t.p.out) * (size_t)s->batch;
    const size_t nw = (size_t)s->O * (size_t)s->C * (size_t)s->k * (size_t)s->k;
    const int oh = t.p.out.h, ow = t.p.out.w;
    float *x = rnd(nx), *dy = rnd(ny);
    float *y16 = zeros(ny), *dx16 = zeros(nx), *y32 = zeros(ny), *dx32 = zeros(nx);
    lay_run(&t, 1, x, dy, y16, dx16, s->batch);
    float *g16 = het_alloc(sizeof(float) * t.p.n_params);
    memcpy(g16, t.grads, sizeof(float) * t.p.n_params);
    lay_run(&t, 0, x, dy, y32, dx32, s->batch);
    /* the definition and the fp32 reference, and S from the absolute values */
    float *xr = rounded(x, nx), *wr = rounded(t.params, nw), *dyr = rounded(dy, ny);
    const float *b = t.params + nw;
    float *ydef = zeros(ny), *yref = zeros(ny), *ys = zeros(ny);
    het_conv2d_ref(ydef, xr, wr, b, s->batch, s->C, s->H, s->W, s->O, s->k, s->stride, s->pad);
    het_conv2d_ref(yref, x, t.params, b, s->batch, s->C, s->H, s->W, s->O, s->k, s->stride, s->pad);
    float *xa = absv(x, nx), *wa = absv(t.params, t.p.n_params), *dya = absv(dy, ny);
    het_conv2d_ref(ys, xa, wa, wa + nw, s->batch, s->C, s->H, s->W, s->O, s->k, s->stride, s->pad);
    float *dxdef = zeros(nx), *dwdef = zeros(nw + s->O), *dxref = zeros(nx), *dwref = zeros(nw + s->O);
    float *dxs = zeros(nx), *dws = zeros(nw + s->O);
    het_conv2d_backward_ref(dxdef, dwdef, dwdef + nw, xr, wr, dyr, s->batch, s->C, s->H, s->W,
                            s->O, s->k, s->stride, s->pad);
    het_conv2d_backward_ref(dxref, dwref, dwref + nw, x, t.params, dy, s->batch, s->C, s->H, s->W,
                            s->O, s->k, s->stride, s->pad);
    het_conv2d_backward_ref(dxs, dws, dws + nw, xa, wa, dya, s->batch, s->C, s->H, s->W, s->O,
                            s->k, s->stride, s->pad);
    char what[160];
    errs ef = {0}, ed = {0}, ew = {0};
    fold(&ef, y16, y32, ydef, yref, ys, ny, (double)s->C * s->k * s->k);
    fold(&ed, dx16, dx32, dxdef, dxref, dxs, nx, (double)s->O * s->k * s->k);
    fold(&ew, g16, t.grads, dwdef, dwref, dws, nw, (double)s->batch * oh * ow);
    snprintf(what, sizeof what, "conv %dx%dx%d->%d k%d s%d p%d (%s) forward", s->C, s->H, s->W,
             s->O, s->k, s->stride, s->pad, s->path);
    report(what, &ef);
    snprintf(what, sizeof what, "conv %dx%dx%d->%d (%s) input gradient", s->C, s->H, s->W, s->O, s->path);
    report(what, &ed);
    snprintf(what, sizeof what, "conv %dx%dx%d->%d (%s) weight gradient", s->C, s->H, s->W, s->O, s->path);
    report(what, &ew);
    /* the bias gradient: the sum of the rounded dy in fp32, within fp32 rounding */
    double bw = 0;
    for (int o = 0; o < s->O; o++) {
        double e = fabs((double)g16[nw + o] - dwdef[nw + o]) / (1e-30 + dws[nw + o]);
        if (e > bw) bw = e;
    }
    CHECK(bw <= (double)(s->batch * oh * ow + 2) * 0x1p-24, "conv bias gradient off the "
          "definition by %g S", bw);
    /* oneDNN's bf16 kernels against the portable path on the same layer: within twice the
     * bound each has against the definition, and not the same bits */
    if (het_dnnl_bf16_enabled() && strstr(s->path, "oneDNN")) { /* the shapes oneDNN runs */
        const float *got[3] = {y16, dx16, g16}, *sc[3] = {ys, dxs, dws};
        const size_t n[3] = {ny, nx, nw};
        const double K[3] = {(double)s->C * s->k * s->k, (double)s->O * s->k * s->k,
                             (double)s->batch * oh * ow};
        snprintf(what, sizeof what, "conv %dx%dx%d->%d (%s) y, dx, dw", s->C, s->H, s->W, s->O,
                 s->path);
        compare_paths(what, &t, x, dy, s->batch, got, sc, n, K);
    }
    float *all[] = {x, dy, y16, dx16, y32, dx32, g16, xr, wr, dyr, ydef, yref, ys, xa, wa, dya,
                    dxdef, dwdef, dxref, dwref, dxs, dws};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) het_free(all[i]);
    lay_free(&t);
}

/* ---------------------------------------------------------------- whole models */

static het_model *build(const char *name, het_shape in, int batch, int workers, het_precision p) {
    het_model *m = NULL;
    if (het_zoo_build(&m, name, in, 10, batch, workers) != HET_OK) {
        CHECK(0, "%s: %s", name, het_error_msg());
        return NULL;
    }
    CHECK(het_model_set_precision(m, p) == HET_OK, "%s", het_error_msg());
    CHECK(het_model_precision(m) == p, "precision set");
    het_model_init_params(m, 11);
    return m;
}

static double rel_l2(const float *a, const float *b, size_t n, int *differ) {
    double num = 0, den = 0;
    *differ = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
        *differ |= a[i] != b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* A bf16 step against the fp32 step of the same model: loss, gradients, eval logits. */
static void test_model_step(const char *name, het_shape in, int batch, int workers) {
    het_model *a = build(name, in, batch, workers, HET_PREC_FP32);
    het_model *b = build(name, in, batch, workers, HET_PREC_BF16);
    if (!a || !b) return;
    size_t nx = het_shape_size(in) * (size_t)batch, np = het_model_n_params(a);
    het_rng_seed(&rng, 3);
    float *x = rnd(nx);
    uint8_t y[64];
    for (int i = 0; i < batch; i++) y[i] = (uint8_t)(i * 3 % 10);
    het_batch_result ra, rb;
    het_model_zero_grads(a);
    het_model_zero_grads(b);
    CHECK(het_model_train_batch(a, x, y, batch, 1.0f / batch, 1, &ra) == HET_OK, "%s", het_error_msg());
    CHECK(het_model_train_batch(b, x, y, batch, 1.0f / batch, 1, &rb) == HET_OK, "%s", het_error_msg());
    CHECK(memcmp(het_model_params(a), het_model_params(b), np * sizeof(float)) == 0,
          "%s: the bf16 batch changed the master weights (rounded in place?)", name);
    int differ;
    double gl = rel_l2(het_model_grads(b), het_model_grads(a), np, &differ);
    double dl = fabs(rb.loss_sum - ra.loss_sum) / fabs(ra.loss_sum);
    const float *la = het_model_forward(a, x, batch, 0, 0);
    size_t nl = (size_t)batch * 10;
    float *lac = het_alloc(sizeof(float) * nl);
    memcpy(lac, la, sizeof(float) * nl);
    const float *lb = het_model_forward(b, x, batch, 0, 0);
    int ldiffer;
    double ll = rel_l2(lb, lac, nl, &ldiffer);
    printf("  %-10s %d worker%s: loss fp32 %.6f bf16 %.6f (%.2e rel), gradient rel L2 %.2e, "
           "eval logits rel L2 %.2e\n", name, workers, workers > 1 ? "s" : "", ra.loss_sum / batch,
           rb.loss_sum / batch, dl, gl, ll);
    CHECK(dl <= 0.02, "%s: bf16 loss off fp32 by %.3g (bound 2 %%)", name, dl);
    CHECK(gl <= 0.3, "%s: bf16 gradient off fp32 by %.3g relative L2 (bound 30 %%)", name, gl);
    CHECK(ll <= 0.05, "%s: bf16 eval logits off fp32 by %.3g relative L2", name, ll);
    CHECK(differ && ldiffer, "%s: the bf16 gradients and logits equal fp32's: nothing rounded?", name);
    het_free(lac);
    het_free(x);
    het_model_free(a);
    het_model_free(b);
}

/* Three training steps of m (train_step: zero, gradients, update; SGD with momentum) on random
 * batches drawn from `seed`; returns the summed loss. */
static double three_steps(het_model *m, het_shape in, int batch, uint64_t seed) {
    size_t nx = het_shape_size(in) * (size_t)batch, np = het_model_n_params(m);
    het_optim_config oc = het_optim_defaults();
    float *st = zeros(het_optim_state_floats(&oc, np));
    double loss = 0;
    het_rng_seed(&rng, seed);
    for (int s = 0; s < 3; s++) {
        float *x = rnd(nx);
        uint8_t y[64];
        for (int i = 0; i < batch; i++) y[i] = (uint8_t)((i + s) % 10);
        het_update u = {&oc, 0.05f, st, s + 1, NULL};
        het_batch_result r;
        CHECK(het_model_train_step(m, x, y, batch, 1.0f / batch, (uint64_t)s, &u, &r) == HET_OK,
              "%s", het_error_msg());
        loss += r.loss_sum;
        het_free(x);
    }
    het_free(st);
    return loss;
}

/* Three bf16 steps (train_step: zero, gradients, update), twice from the same seed: bitwise
 * equal; the master weights keep fp32 values. */
static void test_reproducible(const char *name, het_shape in, int batch, int workers) {
    het_model *m[2] = {build(name, in, batch, workers, HET_PREC_BF16),
                       build(name, in, batch, workers, HET_PREC_BF16)};
    if (!m[0] || !m[1]) return;
    CHECK(strncmp(het_model_executor(m[0]), "dense stack", 11) != 0,
          "%s: the dense stack runs fp32 only, yet it is the executor in bf16", name);
    size_t np = het_model_n_params(m[0]);
    double loss[2] = {three_steps(m[0], in, batch, 21), three_steps(m[1], in, batch, 21)};
    CHECK(loss[0] == loss[1], "%s: losses %.17g vs %.17g", name, loss[0], loss[1]);
    CHECK(memcmp(het_model_params(m[0]), het_model_params(m[1]), np * sizeof(float)) == 0,
          "%s, %d workers: two bf16 runs with one seed differ", name, workers);
    size_t off_grid = 0;
    const float *p = het_model_params(m[0]);
    for (size_t i = 0; i < np; i++) off_grid += (bits(p[i]) & 0xffffu) != 0;
    CHECK(off_grid > np / 2, "%s: only %zu of %zu weights are off the bf16 grid: are the "
          "master weights fp32?", name, off_grid, np);
    printf("  %-10s %d worker%s: 3 bf16 steps bitwise reproducible, %zu of %zu master weights "
           "off the bf16 grid\n", name, workers, workers > 1 ? "s" : "", off_grid, np);
    for (int k = 0; k < 2; k++) het_model_free(m[k]);
}

/* The same model twice in bf16: m[0] built with environment variable `var` set to `value`,
 * m[1] without it. */
static int build_pair(het_model *m[2], const char *name, het_shape in, int batch, int workers,
                      const char *var, const char *value) {
    setenv(var, value, 1);
    m[0] = build(name, in, batch, workers, HET_PREC_BF16);
    unsetenv(var);
    m[1] = build(name, in, batch, workers, HET_PREC_BF16);
    return m[0] && m[1];
}

/* bf16 with the edges channel-blocked and ReLUs fused (where this CPU's oneDNN picks nChw16c)
 * against HET_LAYOUT=plain: the same definition, so equal up to fp32 summation order, which
 * can move a value across a bf16 rounding boundary now and then (a 2^-8 step in that one
 * operand): loss within 1e-4 relative, gradients within 1 % relative L2. */
static void test_layouts(const char *name, het_shape in, int batch, int workers) {
    het_model *m[2];
    if (!build_pair(m, name, in, batch, workers, "HET_LAYOUT", "plain")) return;
    int blocked = 0, fused = 0;
    for (int i = 0; i < het_model_n_layers(m[1]); i++) {
        blocked += het_model_layer(m[1], i)->out_blk;
        fused += het_model_layer(m[1], i)->fused_away;
    }
    size_t nx = het_shape_size(in) * (size_t)batch, np = het_model_n_params(m[0]);
    het_rng_seed(&rng, 9);
    float *x = rnd(nx);
    uint8_t y[64];
    for (int i = 0; i < batch; i++) y[i] = (uint8_t)(i % 10);
    het_batch_result r[2];
    for (int k = 0; k < 2; k++) {
        het_model_zero_grads(m[k]);
        CHECK(het_model_train_batch(m[k], x, y, batch, 1.0f / batch, 2, &r[k]) == HET_OK, "%s",
              het_error_msg());
    }
    int differ;
    double g = rel_l2(het_model_grads(m[1]), het_model_grads(m[0]), np, &differ);
    double l = fabs(r[1].loss_sum - r[0].loss_sum) / fabs(r[0].loss_sum);
    printf("  %-10s bf16 blocked (%d edges blocked, %d ReLUs fused) vs plain: loss %.2e rel, "
           "gradient rel L2 %.2e\n", name, blocked, fused, l, g);
    CHECK(l <= 1e-4, "%s: bf16 blocked vs plain loss %.3g", name, l);
    CHECK(g <= 1e-2, "%s: bf16 blocked vs plain gradients %.3g relative L2", name, g);
    het_free(x);
    het_model_free(m[0]);
    het_model_free(m[1]);
}

/* Activations that stay bf16 between convolutions (nn.h: het_model_lp_edges) against
 * HET_BF16_ACTS=fp32: the producer rounds once what the consumer's reorder would have rounded
 * (a ReLU commutes with rounding), so three training steps give the same losses, weights and
 * eval logits bit for bit. On oneDNN's bf16 kernels cifar-cnn has two such edges (conv -> ReLU
 * -> conv, twice); on the portable path none. */
static void test_lp_edges(const char *name, het_shape in, int batch, int workers, int want) {
    het_model *m[2];
    if (!build_pair(m, name, in, batch, workers, "HET_BF16_ACTS", "fp32")) return;
    CHECK(het_model_lp_edges(m[0]) == 0 && het_model_lp_edges(m[1]) == want,
          "%s: %d and %d bf16 edges, expected 0 and %d", name, het_model_lp_edges(m[0]),
          het_model_lp_edges(m[1]), want);
    size_t nx = het_shape_size(in) * (size_t)batch, np = het_model_n_params(m[0]);
    double loss[2] = {three_steps(m[0], in, batch, 33), three_steps(m[1], in, batch, 33)};
    float *x = rnd(nx);
    size_t nl = (size_t)batch * 10;
    float *l0 = het_alloc(sizeof(float) * nl);
    memcpy(l0, het_model_forward(m[0], x, batch, 0, 0), sizeof(float) * nl);
    const float *l1 = het_model_forward(m[1], x, batch, 0, 0);
    if (het_bf16_cpu() != HET_BF16_ISA_AMX) { /* jit_bf16 kernels: checked bitwise */
        CHECK(loss[0] == loss[1], "%s: losses %.17g (fp32 edges) vs %.17g (bf16 edges)", name,
              loss[0], loss[1]);
        CHECK(memcmp(het_model_params(m[0]), het_model_params(m[1]), np * sizeof(float)) == 0,
              "%s, %d workers: bf16 edges trained other weights than fp32 edges", name, workers);
        CHECK(memcmp(l0, l1, sizeof(float) * nl) == 0, "%s: eval logits differ", name);
    } else { /* AMX: oneDNN may pick another kernel for a bf16 output (not yet seen there):
              * the same definition, so test_layouts' bounds */
        int d;
        double l = fabs(loss[1] - loss[0]) / fabs(loss[0]);
        double w = rel_l2(het_model_params(m[1]), het_model_params(m[0]), np, &d);
        double e = rel_l2(l1, l0, nl, &d);
        CHECK(l <= 1e-4 && w <= 1e-3 && e <= 1e-3, "%s: bf16 vs fp32 edges: loss %.3g, weights "
              "%.3g, logits %.3g relative", name, l, w, e);
    }
    printf("  %-10s %d worker%s: %d edges bf16, 3 steps and eval %s those of fp32 edges\n",
           name, workers, workers > 1 ? "s" : "", want,
           het_bf16_cpu() != HET_BF16_ISA_AMX ? "bitwise" : "within bounds of");
    het_free(l0);
    het_free(x);
    for (int k = 0; k < 2; k++) het_model_free(m[k]);
}

/* A ReLU's backward whose output is bf16 bits (fused into a convolution that writes bf16):
 * din = dout where the widened value > 0 (not for NaN, -0, +0), on the AVX-512 kernel and the
 * portable loop, with a tail shorter than a vector. */
static void test_relu_lp(void) {
    enum { N = 16 * 3 + 5 };
    uint16_t y[N];
    float dout[N], want[N], got[N];
    const uint16_t special[] = {0x0000, 0x8000, 0x7fc0, 0xffc0, 0x7f80, 0xff80, 0x0001, 0x8001,
                                0x3f80, 0xbf80};
    for (int i = 0; i < N; i++) {
        y[i] = i < 10 ? special[i] : (uint16_t)(het_rng_u64(&rng) >> 48);
        dout[i] = (float)(i + 1);
        float v = from_bits((uint32_t)y[i] << 16);
        want[i] = v > 0.0f ? dout[i] : 0.0f;
    }
    het_layer *l = het_relu_new();
    het_layer_plan p;
    CHECK(l && l->ops->plan(l, (het_shape){N, 1, 1}, &p) == HET_OK, "relu plan");
    if (!l) return;
    l->in = l->out = p.out;
    l->in_lp = l->out_lp = 1;
    het_exec ex = {0};
    float yf[N / 2 + 1];
    memcpy(yf, y, sizeof y);
    const int levels[2] = {HET_SIMD_AVX512, HET_SIMD_PORTABLE};
    for (int k = 0; k < 2; k++) {
        if (levels[k] == HET_SIMD_AVX512 && !__builtin_cpu_supports("avx512f")) continue;
        het_simd_force(levels[k]);
        memset(got, 0xff, sizeof got);
        l->ops->backward(l, &ex, yf, yf, dout, got, 1);
        CHECK(memcmp(got, want, sizeof got) == 0, "relu backward on bf16 outputs (%s) is off",
              k == 0 ? "AVX-512" : "portable");
    }
    het_simd_force(-1);
    l->ops->destroy(l);
}

/* Every layer and model check, on the kernels het_dnnl_bf16_enabled selects now. */
static void test_all(void) {
    const cshape shapes[] = {
        {1, 12, 12, 6, 5, 1, 0, 5, "direct (LeNet conv1)"},
        {6, 8, 8, 16, 5, 1, 2, 3, "direct, padded"},
        {3, 9, 9, 20, 3, 1, 1, 3, "wide im2col"},
        {5, 9, 9, 8, 3, 2, 1, 3, "im2col, stride 2"},
        {16, 8, 8, 32, 3, 1, 1, 4, "oneDNN if built in"},
        {32, 7, 7, 16, 3, 2, 1, 2, "oneDNN, stride 2"},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) test_conv(&shapes[i]);
    const het_shape mn = {1, 28, 28}, cf = {3, 32, 32};
    test_model_step("mlp", mn, 16, 1);
    test_model_step("lenet5", mn, 16, 1);
    test_model_step("cifar-cnn", cf, 8, 1);
    test_model_step("resnet20", cf, 8, 1);
    test_model_step("resnet20", cf, 8, 2);
    test_reproducible("mlp", mn, 16, 1);
    test_reproducible("lenet5", mn, 16, 2);
    test_reproducible("cifar-cnn", cf, 8, 1);
    test_reproducible("resnet20", cf, 8, 2);
    test_layouts("cifar-cnn", cf, 8, 1);
    test_layouts("resnet20", cf, 8, 2);
    const int lp = het_dnnl_bf16_enabled() && !getenv("HET_LAYOUT") ? 2 : 0;
    test_lp_edges("cifar-cnn", cf, 8, 1, lp);
    test_lp_edges("cifar-cnn", cf, 8, 2, lp);
    test_lp_edges("resnet20", cf, 8, 1, 0); /* batch norm after every convolution */
}

/* --bf16-kernels: auto takes oneDNN's kernels where the bf16 dot product reaches 0.75x the fp32
 * multiply rate (HET_BF16_RATIO stands for the measurement), onednn and portable whatever it is;
 * the measurement itself is a positive figure on a CPU with AVX512-BF16. */
static void test_kernel_choice(void) {
    char why[200];
    const int has = het_bf16_cpu() != HET_BF16_ISA_NONE && het_dnnl_available() &&
                    het_dnnl_bf16_probe(why, sizeof why);
    const char *old = getenv("HET_BF16_RATIO");
    if (het_bf16_cpu() == HET_BF16_ISA_AVX512 && !old) {
        double r = het_bf16_mac_ratio();
        printf("this CPU's bf16 dot product: %.2fx the fp32 multiply rate\n", r);
        CHECK(r > 0.05 && r < 20, "the measured rate ratio %g", r);
    }
    het_dnnl_bf16_choose(HET_BF16_KERNELS_PORTABLE);
    CHECK(!het_dnnl_bf16_enabled(), "--bf16-kernels portable ran oneDNN's");
    CHECK(!het_dnnl_bf16_why(why, sizeof why) && (!has || strstr(why, "--bf16-kernels portable")),
          "portable's reason: '%s'", why);
    het_dnnl_bf16_choose(HET_BF16_KERNELS_ONEDNN);
    CHECK(het_dnnl_bf16_enabled() == has, "--bf16-kernels onednn: %d, the CPU's kernels %d",
          het_dnnl_bf16_enabled(), has);
    if (has && het_bf16_cpu() == HET_BF16_ISA_AVX512 && !old) {
        /* auto decides once per process: its threshold is checked by test_cli_bf16 with
         * HET_BF16_RATIO; here the reason names the figure and the threshold */
        het_dnnl_bf16_choose(HET_BF16_KERNELS_AUTO);
        int on = het_dnnl_bf16_why(why, sizeof why);
        CHECK(strstr(why, "--bf16-kernels auto: this CPU's bf16 dot product runs at") &&
              strstr(why, on ? "at least 0.75x" : "below 0.75x"), "auto's reason: '%s'", why);
        /* the figure the choice was made on (measured once per process), not a new one */
        const char *at = strstr(why, "runs at ");
        double r = -1;
        CHECK(at && sscanf(at, "runs at %lfx", &r) == 1 && on == (r >= HET_BF16_MIN_RATIO),
              "auto: %d for %s", on, why);
    }
    het_dnnl_bf16_choose(HET_BF16_KERNELS_ONEDNN); /* the tests below run both paths */
}

int main(void) {
    het_rng_seed(&rng, 1);
    test_rounding();
    test_relu_lp();
    test_kernel_choice();
    het_bf16_isa isa = het_bf16_cpu();
    char dn[160];
    int dn_ok = het_dnnl_bf16_probe(dn, sizeof dn);
    const int both = het_dnnl_bf16_enabled();
    printf("kernels: portable path (rounded operands into the fp32 kernels): run; oneDNN's bf16 "
           "primitives: %s (this CPU's bf16 instructions: %s; %s)\n",
           both ? "run" : isa == HET_BF16_ISA_NONE ? "skipped: the CPU has no bf16 instructions"
                                                   : "skipped: oneDNN offers none here",
           het_bf16_isa_name(isa), dn);
    /* where the CPU has bf16 instructions, the oneDNN built in must offer bf16 convolutions */
    if (isa != HET_BF16_ISA_NONE && het_dnnl_available() && !getenv("HET_BF16_CPU"))
        CHECK(dn_ok && both, "the CPU has %s but oneDNN offers no bf16 convolution: %s",
              het_bf16_isa_name(isa), dn);
    printf("portable path (oneDNN's fp32 kernels on bf16-rounded operands where it runs: %s)\n",
           het_dnnl_describe());
    het_dnnl_bf16_disable(1);
    test_all();
    het_dnnl_bf16_disable(0);
    if (both) {
        printf("oneDNN's bf16 kernels (%s)\n", dn);
        test_all();
    }
    /* an unknown precision is refused */
    const het_shape mn = {1, 28, 28};
    het_model *m = NULL;
    CHECK(het_zoo_build(&m, "mlp", mn, 10, 4, 1) == HET_OK, "%s", het_error_msg());
    if (m) {
        CHECK(het_model_set_precision(m, (het_precision)7) == HET_EINVAL, "precision 7 accepted");
        CHECK(strstr(het_error_msg(), "expected fp32 or bf16") != NULL, "%s", het_error_msg());
        het_model_free(m);
    }
    CHECK(strcmp(het_precision_name(HET_PREC_BF16), "bf16") == 0, "name");
    return het_test_finish("test_bf16");
}

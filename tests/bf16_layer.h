/* Helpers of the bf16 layer tests (test_bf16.c, test_dense_bf16.c): random and derived
 * arrays, one layer planned with the bf16 context as the model makes it (its rounded weights,
 * as floats and as bf16 bits, and the lp scratch), run forward and backward in fp32 or bf16,
 * the error against the definition folded and checked, and oneDNN's bf16 kernels compared with
 * the portable path. Bounds: test_bf16.c's opening comment. */
#ifndef HET_TEST_BF16_LAYER_H
#define HET_TEST_BF16_LAYER_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hetrain.h"
#include "hetrain/nn.h"
#include "hetrain/tensor.h"
#include "test.h"

static het_rng rng;

static float *rnd(size_t n) {
    float *p = het_alloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * het_rng_uniform(&rng) - 1.0f;
    return p;
}

static float *zeros(size_t n) {
    float *p = het_alloc(sizeof(float) * (n ? n : 1));
    memset(p, 0, sizeof(float) * (n ? n : 1));
    return p;
}

static float *rounded(const float *a, size_t n) {
    float *p = het_alloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = het_bf16_round(a[i]);
    return p;
}

static float *absv(const float *a, size_t n) {
    float *p = het_alloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = fabsf(a[i]);
    return p;
}
/* ---------------------------------------------------------------- layers */

typedef struct lay {
    het_layer *l;
    het_layer_plan p;
    float *params, *params_lp, *grads, *cache, *work, *lp;
    uint16_t *bits; /* the plan's lp_bits: params_lp as bf16 bits (het_exec.wbits) */
    het_exec ex;
} lay;

/* Plans l on `in` for `batch` samples, random parameters, and the bf16 context as the model
 * makes it (the lp ranges of the plan rounded into params_lp). */
static int lay_make(lay *t, het_layer *l, het_shape in, int batch) {
    memset(t, 0, sizeof *t);
    t->l = l;
    if (l->ops->plan(l, in, &t->p) != HET_OK) {
        fprintf(stderr, "plan: %s\n", het_error_msg());
        return -1;
    }
    l->in = in;
    l->out = t->p.out;
    size_t io = het_shape_size(in) > het_shape_size(t->p.out) ? het_shape_size(in)
                                                              : het_shape_size(t->p.out);
    t->params = rnd(t->p.n_params);
    t->params_lp = het_alloc(sizeof(float) * (t->p.n_params + 1));
    memcpy(t->params_lp, t->params, sizeof(float) * t->p.n_params);
    for (int r = 0; r < 2; r++)
        het_vround_bf16(t->params_lp + t->p.lp_off[r], t->params_lp + t->p.lp_off[r], t->p.lp_len[r]);
    if (t->p.lp_bits) {
        t->bits = het_alloc(sizeof(uint16_t) * (t->p.n_params + 1));
        het_bf16_bits(t->bits, t->params_lp, t->p.n_params);
    }
    t->grads = zeros(t->p.n_params);
    t->cache = zeros(t->p.cache_per_sample * (size_t)batch);
    t->work = zeros(t->p.work_per_sample * (size_t)batch + t->p.work_fixed);
    t->lp = zeros(HET_LP_PER_SAMPLE(io) * (size_t)batch);
    t->ex = (het_exec){t->params, t->grads, NULL, t->cache, t->work, NULL, 1, NULL, 0, 0, NULL, NULL};
    return 0;
}

static void lay_free(lay *t) {
    t->l->ops->destroy(t->l);
    het_free(t->params);
    het_free(t->params_lp);
    het_free(t->bits);
    het_free(t->grads);
    het_free(t->cache);
    het_free(t->work);
    het_free(t->lp);
}

/* forward and backward of t in fp32 (bf16 = 0) or bf16; outputs into y, dx, and t->grads
 * (zeroed first) */
static void lay_run(lay *t, int bf16, const float *x, const float *dy, float *y, float *dx,
                    int batch) {
    het_exec ex = t->ex;
    ex.bf16 = bf16;
    ex.lp = bf16 ? t->lp : NULL;
    ex.params = bf16 ? t->params_lp : t->params;
    ex.wbits = bf16 ? t->bits : NULL;
    memset(t->grads, 0, sizeof(float) * t->p.n_params);
    t->l->ops->forward(t->l, &ex, x, y, batch);
    t->l->ops->backward(t->l, &ex, x, y, dy, dx, batch);
}

typedef struct errs {
    double def, fp32; /* worst error / bound against the definition and against fp32 */
    double off;       /* worst |fp32 path - definition| / S: what rounding changes */
    double got;       /* worst |bf16 path - definition| / S */
} errs;

/* Folds n outputs into e: got (bf16 path), f32 (fp32 path), def (definition, rounded
 * operands), ref (fp32 reference, unrounded operands), S (sum of |products|), K products. */
static void fold(errs *e, const float *got, const float *f32, const float *def, const float *ref,
                 const float *S, size_t n, double K) {
    const double u32 = 0x1p-24, bdef = (K + 2) * u32, bref = 0x1p-7 + 0x1p-16 + (K + 2) * u32;
    for (size_t i = 0; i < n; i++) {
        double s = (double)S[i] > 1e-30 ? (double)S[i] : 1e-30;
        double d = fabs((double)got[i] - def[i]) / s, r = fabs((double)got[i] - ref[i]) / s;
        double o = fabs((double)f32[i] - def[i]) / s;
        if (d / bdef > e->def || d != d) e->def = d != d ? INFINITY : d / bdef;
        if (r / bref > e->fp32 || r != r) e->fp32 = r != r ? INFINITY : r / bref;
        if (o > e->off) e->off = o;
        if (d > e->got) e->got = d;
    }
}

static void report(const char *what, const errs *e) {
    printf("  %-44s def %.3f of bound, fp32 %.3f of bound, bf16 err %.2e, fp32 path off %.2e\n",
           what, e->def, e->fp32, e->got, e->off);
    CHECK(e->def <= 1.0, "%s: off the bf16 definition by %.3f of the bound (K + 2) 2^-24 S",
          what, e->def);
    CHECK(e->fp32 <= 1.0, "%s: off fp32 by %.3f of the bf16 bound", what, e->fp32);
    CHECK(e->off > 4 * e->got, "%s: the fp32 path (%.3g) is not clearly farther from the bf16 "
          "definition than the bf16 path (%.3g): are the operands rounded?", what, e->off, e->got);
}

/* oneDNN's bf16 kernels against the portable path on one layer: the outputs got[] of a bf16 run
 * on oneDNN's kernels (y, dx, the parameter gradients), with S[] their sums of |products| and
 * K[] their products summed, against a run with oneDNN's bf16 kernels off: within twice the
 * bound each has against the definition, and not the same bits (else they did not run). */
static void compare_paths(const char *what, lay *t, const float *x, const float *dy, int batch,
                          const float *const got[3], const float *const S[3], const size_t n[3],
                          const double K[3]) {
    float *yp = zeros(n[0]), *dxp = zeros(n[1]), *gp = zeros(t->p.n_params);
    het_dnnl_bf16_disable(1);
    lay_run(t, 1, x, dy, yp, dxp, batch);
    het_dnnl_bf16_disable(0);
    memcpy(gp, t->grads, sizeof(float) * t->p.n_params);
    const float *pb[3] = {yp, dxp, gp};
    double worst = 0;
    int differ = 0;
    for (int q = 0; q < 3; q++)
        for (size_t i = 0; i < n[q]; i++) {
            double d = fabs((double)got[q][i] - pb[q][i]) /
                       ((S[q][i] > 1e-30f ? S[q][i] : 1e-30) * 2 * (K[q] + 2) * 0x1p-24);
            if (d > worst || d != d) worst = d != d ? INFINITY : d;
            differ |= got[q][i] != pb[q][i];
        }
    printf("  %-44s oneDNN bf16 vs portable: %.3f of twice the bound%s\n", what, worst,
           differ ? "" : " (the same bits)");
    CHECK(worst <= 1.0, "%s: oneDNN's bf16 kernels and the portable path differ by %.3f of "
          "twice the bound", what, worst);
    CHECK(differ, "%s: oneDNN's bf16 kernels gave the portable path's bits: did they run?", what);
    het_free(yp), het_free(dxp), het_free(gp);
}
#endif

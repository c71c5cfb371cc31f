/* Direct convolution kernels and the SIMD paths of conv2d, relu and maxpool, at every SIMD level
 * this CPU runs (het_simd_force caps the level; the portable level is always tested):
 *  - het_conv_direct and het_conv_direct_dw against their naive double-precision _ref twins on
 *    random odd shapes: every register-block width (1-16 output channels, rows narrower and
 *    wider than 16 and 32 pixels, an odd row count for the row pairs, kernels 1-7 so that the
 *    weight gradient splits its kernel columns), several samples with strides larger than a
 *    sample, zero padding rows (skipped by the forward), the channel-vectorized forms (8 < O <=
 *    16), db NULL or not, and accumulation (+=) into non-zero gradients. Tolerance: per
 *    element 1e-5 * (1 + the same sum over absolute values), a float rounding bound.
 *  - the conv2d layer on the direct path against the im2col + GEMM path (forced portable):
 *    output, din, dW and db, LeNet shapes and odd ones, din == NULL; same tolerance on the
 *    scale of the values.
 *  - het_conv_direct_dx (input gradient vectorized along the output channels) against a naive
 *    double-precision sum written from PyTorch's weight layout: every row width it takes
 *    (1..12 pixels), 9..16 channels (masked lanes), one-row outputs; and which shapes it takes.
 *  - relu and 2x2 maxpool AVX-512 code against the portable code: bitwise equal, with NaN,
 *    -0, ties and odd plane sizes. */
#include <math.h>
#include <string.h>

#include "hetrain/core.h"
#include "hetrain/nn.h"
#include "tensor/internal.h"
#include "test.h"

static het_rng rng;

static float *rand_buf(size_t n) {
    float *p = het_alloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * het_rng_uniform(&rng) - 1.0f;
    return p;
}

static float *abs_copy(const float *x, size_t n) {
    float *p = het_alloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = fabsf(x[i]);
    return p;
}

typedef struct geom {
    int O, C, Hp, Wp, k, n;
} geom;

static const geom geoms[] = {
    {6, 1, 32, 32, 5, 2},   /* LeNet conv1 (padded input) */
    {16, 6, 14, 14, 5, 3},  /* LeNet conv2: channel-vectorized weight gradient */
    {6, 16, 18, 18, 5, 1},  /* LeNet conv2 input gradient */
    {1, 1, 5, 5, 1, 1},     /* 1x1 kernel, one channel */
    {3, 2, 7, 9, 3, 2},     /* odd row count: last row pair half empty */
    {13, 3, 9, 40, 3, 2},   /* rows of 38: three stretches, the last masked */
    {16, 2, 6, 50, 4, 1},   /* 16 channels on wide rows */
    {5, 2, 11, 12, 7, 2},   /* kernel 7: weight gradient in column blocks of 5 + 2 */
    {12, 4, 8, 8, 2, 3},    /* 12 channels: channel-vectorized, masked lanes */
    {9, 1, 20, 6, 5, 2},    /* 9 channels, 2-pixel rows */
    {2, 3, 17, 33, 5, 1},   /* 29-pixel rows */
    {4, 2, 3, 9, 3, 2},     /* one output row of 7: the second row of the pair masked off */
    {3, 2, 3, 20, 3, 1},    /* one output row of 18 */
};

static void check_close_arr(const float *got, const float *want, const float *bound, size_t n,
                            const char *what, geom g, int level) {
    int bad = 0;
    for (size_t i = 0; i < n && bad < 3; i++)
        if (!(fabsf(got[i] - want[i]) <= 1e-5f * (1.0f + bound[i]))) {
            CHECK(0, "%s level %d O%d C%d %dx%d k%d n%d: [%zu] %.9g vs %.9g", what, level, g.O,
                  g.C, g.Hp, g.Wp, g.k, g.n, i, got[i], want[i]);
            bad++;
        }
    if (!bad) CHECK(1, "ok");
}

static void test_kernels_at(int level) {
    for (size_t t = 0; t < sizeof geoms / sizeof geoms[0]; t++) {
        geom g = geoms[t];
        int oh = g.Hp - g.k + 1, ow = g.Wp - g.k + 1;
        size_t xs = (size_t)g.C * (size_t)g.Hp * (size_t)g.Wp + 7; /* sample strides with a gap */
        size_t P = (size_t)oh * (size_t)ow, ds = (size_t)g.O * P + 5;
        size_t nw = (size_t)g.O * (size_t)g.C * (size_t)g.k * (size_t)g.k;
        float *x = rand_buf(xs * (size_t)g.n), *w = rand_buf(nw), *b = rand_buf((size_t)g.O);
        float *d = rand_buf(ds * (size_t)g.n);
        /* zero padding rows at top and bottom, which the forward kernel may skip */
        int zpad = (int)(t % 3) < (g.Hp - 1) / 2 ? (int)(t % 3) : 0;
        for (int s = 0; s < g.n; s++)
            for (int c = 0; c < g.C; c++)
                for (int r = 0; r < g.Hp; r++)
                    if (r < zpad || r >= g.Hp - zpad)
                        memset(x + (size_t)s * xs + ((size_t)c * (size_t)g.Hp + (size_t)r) * (size_t)g.Wp, 0,
                               sizeof(float) * (size_t)g.Wp);
        float *xa = abs_copy(x, xs * (size_t)g.n), *wa = abs_copy(w, nw), *ba = abs_copy(b, (size_t)g.O);
        float *da = abs_copy(d, ds * (size_t)g.n);

        /* forward, one sample */
        size_t no = (size_t)g.O * P;
        float *out = rand_buf(no), *ref = rand_buf(no), *bound = rand_buf(no);
        het_simd_force(level);
        het_conv_direct(out, x, w, b, g.O, g.C, g.Hp, g.Wp, g.k, zpad);
        het_simd_force(-1);
        het_conv_direct_ref(ref, x, w, b, g.O, g.C, g.Hp, g.Wp, g.k);
        het_conv_direct_ref(bound, xa, wa, ba, g.O, g.C, g.Hp, g.Wp, g.k);
        check_close_arr(out, ref, bound, no, "conv_direct", g, level);
        het_simd_force(level);
        het_conv_direct(out, x, w, NULL, g.O, g.C, g.Hp, g.Wp, g.k, zpad);
        het_simd_force(-1);
        het_conv_direct_ref(ref, x, w, NULL, g.O, g.C, g.Hp, g.Wp, g.k);
        check_close_arr(out, ref, bound, no, "conv_direct no bias", g, level);

        /* weight gradient over n samples, accumulated onto non-zero values */
        for (int with_db = 0; with_db < 2; with_db++) {
            float *gw = rand_buf(nw + (size_t)g.O), *rw = het_alloc(sizeof(float) * (nw + (size_t)g.O));
            float *bw = het_alloc(sizeof(float) * (nw + (size_t)g.O));
            memcpy(rw, gw, sizeof(float) * (nw + (size_t)g.O));
            for (size_t i = 0; i < nw + (size_t)g.O; i++) bw[i] = fabsf(gw[i]);
            float *scratch = het_alloc(sizeof(float) * het_conv_direct_dw_scratch(g.O, g.C, g.Hp, g.Wp, g.k));
            het_simd_force(level);
            het_conv_direct_dw(gw, with_db ? gw + nw : NULL, x, xs, d, ds, g.n, g.O, g.C, g.Hp,
                               g.Wp, g.k, scratch);
            het_simd_force(-1);
            het_conv_direct_dw_ref(rw, with_db ? rw + nw : NULL, x, xs, d, ds, g.n, g.O, g.C, g.Hp,
                                   g.Wp, g.k);
            het_conv_direct_dw_ref(bw, with_db ? bw + nw : NULL, xa, xs, da, ds, g.n, g.O, g.C,
                                   g.Hp, g.Wp, g.k);
            check_close_arr(gw, rw, bw, nw + (size_t)g.O, with_db ? "conv_direct_dw+db" : "conv_direct_dw", g, level);
            het_free(gw); het_free(rw); het_free(bw); het_free(scratch);
        }
        het_free(x); het_free(w); het_free(b); het_free(d); het_free(xa); het_free(wa);
        het_free(ba); het_free(da); het_free(out); het_free(ref); het_free(bound);
    }
}

/* ---- layers: run forward + backward at a SIMD level ---- */
typedef struct run_out {
    float *out, *din, *grads;
} run_out;

static run_out run_layer(het_layer *l, het_shape in, int batch, const float *x, const float *dout,
                         const float *params, size_t np, int level, int want_din) {
    het_layer_plan p;
    int st = l->ops->plan(l, in, &p);
    CHECK(st == HET_OK, "plan %s", l->ops->name);
    l->in = in;
    l->out = p.out;
    run_out r;
    size_t no = het_shape_size(p.out) * (size_t)batch, ni = het_shape_size(in) * (size_t)batch;
    r.out = het_alloc(sizeof(float) * (no + 1));
    r.din = want_din ? het_alloc(sizeof(float) * (ni + 1)) : NULL;
    r.grads = het_alloc(sizeof(float) * (np + 1));
    for (size_t i = 0; i < np; i++) r.grads[i] = 0.5f; /* accumulation onto non-zero gradients */
    float *work = het_alloc(sizeof(float) * (p.work_per_sample * (size_t)batch + p.work_fixed + 1));
    het_exec ex = {(float *)params, r.grads, NULL, NULL, work, NULL, 1, NULL, 0, 0, NULL, NULL};
    het_simd_force(level);
    l->ops->forward(l, &ex, x, r.out, batch);
    l->ops->backward(l, &ex, x, r.out, dout, r.din, batch);
    het_simd_force(-1);
    het_free(work);
    return r;
}

static void free_run(run_out *r) { het_free(r->out); het_free(r->din); het_free(r->grads); }

static void check_conv_layer(int C, int H, int W, int oc, int k, int pad, int batch, int want_din) {
    het_shape in = {C, H, W};
    het_layer *l = het_conv2d_new(oc, k, 1, pad);
    het_layer_plan p;
    l->ops->plan(l, in, &p);
    size_t ni = het_shape_size(in) * (size_t)batch, no = het_shape_size(p.out) * (size_t)batch;
    float *x = rand_buf(ni), *d = rand_buf(no), *params = rand_buf(p.n_params);
    run_out a = run_layer(l, in, batch, x, d, params, p.n_params, HET_SIMD_AVX512, want_din);
    run_out b = run_layer(l, in, batch, x, d, params, p.n_params, HET_SIMD_PORTABLE, want_din);
    /* values are sums of up to C*k*k (forward, din) or batch*oh*ow (dW) products of numbers in
     * [-1, 1]: compare on the scale of that count */
    double tol_f = 1e-5 * C * k * k, tol_g = 1e-5 * batch * (double)het_shape_size(p.out) / oc;
    char what[96];
    snprintf(what, sizeof what, "conv %dx%dx%d oc%d k%d pad%d b%d", C, H, W, oc, k, pad, batch);
    int bad = 0;
    for (size_t i = 0; i < no && bad < 3; i++)
        if (fabsf(a.out[i] - b.out[i]) > tol_f) {
            bad++;
            CHECK(0, "%s out[%zu] %g vs %g", what, i, a.out[i], b.out[i]);
        }
    for (size_t i = 0; want_din && i < ni && bad < 3; i++)
        if (fabsf(a.din[i] - b.din[i]) > tol_f * oc / C + 1e-5) {
            bad++;
            CHECK(0, "%s din[%zu] %g vs %g", what, i, a.din[i], b.din[i]);
        }
    for (size_t i = 0; i < p.n_params && bad < 3; i++)
        if (fabsf(a.grads[i] - b.grads[i]) > tol_g) {
            bad++;
            CHECK(0, "%s grad[%zu] %g vs %g", what, i, a.grads[i], b.grads[i]);
        }
    CHECK(bad == 0, "%s", what);
    free_run(&a); free_run(&b);
    het_free(x); het_free(d); het_free(params);
    l->ops->destroy(l);
}

static int bits_equal(const float *a, const float *b, size_t n) {
    return memcmp(a, b, sizeof(float) * n) == 0;
}

static void check_relu_pool(int C, int H, int W, int batch) {
    het_shape in = {C, H, W};
    size_t ni = het_shape_size(in) * (size_t)batch;
    float *x = rand_buf(ni);
    for (size_t i = 0; i < ni; i++) { /* ties, -0 and a few NaN */
        if (i % 7 == 0) x[i] = 0.25f;
        if (i % 11 == 0) x[i] = -0.0f;
        if (i % 97 == 5) x[i] = NAN;
    }
    het_layer *ls[2] = {het_relu_new(), het_maxpool_new(2, 2)};
    for (int li = 0; li < 2; li++) {
        het_layer_plan p;
        ls[li]->ops->plan(ls[li], in, &p);
        size_t no = het_shape_size(p.out) * (size_t)batch;
        float *d = rand_buf(no);
        run_out a = run_layer(ls[li], in, batch, x, d, NULL, 0, HET_SIMD_AVX512, 1);
        run_out b = run_layer(ls[li], in, batch, x, d, NULL, 0, HET_SIMD_PORTABLE, 1);
        CHECK(bits_equal(a.out, b.out, no) && bits_equal(a.din, b.din, ni),
              "%s %dx%dx%d batch %d: AVX-512 and portable differ", ls[li]->ops->name, C, H, W, batch);
        free_run(&a); free_run(&b);
        het_free(d);
        ls[li]->ops->destroy(ls[li]);
    }
    het_free(x);
}

/* din[c][Y][X] = sum_{o,i,j} w[o][c][i][j] dout[o][Y-i][X-j] straight from the definition. */
static void check_dx(int O, int C, int oh, int ow) {
    const int k = 5, H = oh + k - 1, W = ow + k - 1;
    size_t nw = (size_t)O * (size_t)C * 25, nd = (size_t)O * (size_t)oh * (size_t)ow;
    size_t ni = (size_t)C * (size_t)H * (size_t)W;
    float *w = rand_buf(nw), *d = rand_buf(nd), *got = rand_buf(ni);
    float *wcl = het_alloc(sizeof(float) * (size_t)C * 25 * 16);
    float *dcl = het_alloc(sizeof(float) * (size_t)oh * (size_t)ow * 16);
    CHECK(het_conv_direct_dx_ok(O, k, 0, ow), "dx must take O %d ow %d", O, ow);
    het_conv_direct_dx_weights(wcl, w, O, C, k);
    het_conv_direct_dx(got, d, wcl, O, C, oh, ow, k, dcl);
    int bad = 0;
    for (int c = 0; c < C; c++)
        for (int Y = 0; Y < H; Y++)
            for (int X = 0; X < W; X++) {
                double s = 0, a = 0;
                for (int o = 0; o < O; o++)
                    for (int i = 0; i < k; i++)
                        for (int j = 0; j < k; j++) {
                            int y = Y - i, x = X - j;
                            if (y < 0 || y >= oh || x < 0 || x >= ow) continue;
                            double t = (double)w[(((size_t)o * C + c) * k + i) * k + j] *
                                       (double)d[((size_t)o * oh + y) * ow + x];
                            s += t;
                            a += fabs(t);
                        }
                float g = got[((size_t)c * H + Y) * W + X];
                if (!(fabs(g - s) <= 1e-5 * (1 + a)) && bad++ < 3)
                    CHECK(0, "dx O %d C %d %dx%d: din[%d][%d][%d] %.9g vs %.9g", O, C, oh, ow, c,
                          Y, X, g, s);
            }
    CHECK(bad == 0, "dx O %d C %d %dx%d: %d elements off", O, C, oh, ow, bad);
    het_free(w);
    het_free(d);
    het_free(got);
    het_free(wcl);
    het_free(dcl);
}

static void test_dx(void) {
    check_dx(16, 6, 10, 10); /* LeNet conv2 */
    for (int ow = 1; ow <= 12; ow++) check_dx(9 + ow % 8, 1 + ow % 3, 1 + ow % 4, ow);
    check_dx(16, 2, 1, 12);
    /* shapes it leaves to the generic path */
    CHECK(!het_conv_direct_dx_ok(8, 5, 0, 10), "8 channels: direct forward form is better");
    CHECK(!het_conv_direct_dx_ok(17, 5, 0, 10), "17 channels exceed a vector");
    CHECK(!het_conv_direct_dx_ok(16, 3, 0, 10), "only 5x5 kernels are instantiated");
    CHECK(!het_conv_direct_dx_ok(16, 5, 1, 10), "padding");
    CHECK(!het_conv_direct_dx_ok(16, 5, 0, 13), "13-pixel rows need 17 sums");
}

int main(void) {
    het_rng_seed(&rng, 2024);
    int cpu = het_simd_level();
    printf("cpu simd level %d\n", cpu);
    test_kernels_at(HET_SIMD_PORTABLE);
    if (cpu >= HET_SIMD_AVX512) {
        test_kernels_at(HET_SIMD_AVX512);
        check_conv_layer(1, 28, 28, 6, 5, 2, 3, 0);   /* LeNet conv1, din NULL */
        check_conv_layer(6, 14, 14, 16, 5, 0, 4, 1);  /* LeNet conv2 */
        check_conv_layer(3, 9, 20, 5, 3, 1, 2, 1);    /* odd */
        check_conv_layer(2, 7, 7, 12, 4, 3, 2, 1);    /* pad = k - 1: no dout padding */
        check_conv_layer(4, 11, 35, 10, 5, 2, 3, 1);  /* wide rows, 10 channels */
        check_conv_layer(3, 8, 16, 9, 5, 0, 2, 1);    /* input gradient along 9 channels */
        check_conv_layer(2, 5, 5, 12, 5, 0, 3, 1);    /* one output pixel */
        test_dx();
        check_relu_pool(6, 28, 28, 3);                /* LeNet pool1 */
        check_relu_pool(16, 10, 10, 2);               /* LeNet pool2 (portable below 8) */
        check_relu_pool(3, 17, 37, 2);                /* odd planes, 18 outputs per row */
        check_relu_pool(2, 5, 16, 1);                 /* rows of exactly 8 outputs */
    } else {
        printf("no AVX-512 on this CPU: only the portable level tested\n");
    }
    return het_test_finish("test_conv_direct");
}

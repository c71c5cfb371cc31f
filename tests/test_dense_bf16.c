/* The dense layer in bf16 (nn/dense.c; tensor/dense_dnnl.c):
 *  - forward and backward against the definition (het_gemm_ref on the operands rounded to
 *    bf16; the bounds of test_bf16.c) on the portable path everywhere and, where the CPU has
 *    AMX or AVX512-BF16 (het_dnnl_bf16_enabled), on oneDNN's bf16 matmul: the same bounds,
 *    within twice the bound of the portable path and not its bits; the bias gradient is the
 *    fp32 sum of the rounded output gradient. Shapes: odd (100 -> 30, 7 samples), the MLP's
 *    first layer (784 -> 256, 16), cifar-cnn's (3136 -> 256, 16);
 *  - a backward without the input gradient (a first layer) gives the same weight gradient;
 *  - a model (mlp: dense layers only; 2 workers, so two threads run one handle): its bf16
 *    logits with oneDNN's matmul differ from the portable path's (the model hands the layers
 *    the weights' bits, het_exec.wbits) and agree within 1e-3 relative L2;
 *  - failures (the test hook het_dnnl_inject): a refused batch size is HET_ENOTSUP with nothing
 *    written, and the layer then computes the portable path's bits; a failure while running
 *    fills y, or dw and dx, with NaN and keeps the fault "dense: oneDNN bf16 matmul: ...";
 *  - elsewhere: no handle (het_dnnl_dense_create gives none, the plan asks for no bits), and
 *    the test says that half is skipped and why. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hetrain.h"
#include "hetrain/netfile.h"
#include "hetrain/nn.h"
#include "hetrain/tensor.h"
#include "bf16_layer.h"
#include "tensor/internal.h"
#include "dnnl_fault.h"
#include "test.h"

static void test_dense(int I, int O, int batch) {
    het_shape in = {I, 1, 1};
    lay t;
    if (lay_make(&t, het_dense_new(O), in, batch)) {
        CHECK(0, "dense plan failed");
        return;
    }
    const size_t nx = (size_t)I * batch, ny = (size_t)O * batch, nw = (size_t)O * I;
    float *x = rnd(nx), *dy = rnd(ny);
    float *y16 = zeros(ny), *dx16 = zeros(nx), *y32 = zeros(ny), *dx32 = zeros(nx);
    lay_run(&t, 1, x, dy, y16, dx16, batch);
    float *g16 = het_alloc(sizeof(float) * t.p.n_params);
    memcpy(g16, t.grads, sizeof(float) * t.p.n_params);
    lay_run(&t, 0, x, dy, y32, dx32, batch);
    float *xr = rounded(x, nx), *wr = rounded(t.params, nw), *dyr = rounded(dy, ny);
    float *xa = absv(x, nx), *wa = absv(t.params, nw), *dya = absv(dy, ny);
    const float *b = t.params + nw;
    /* y = x W^T + b; dx = dy W; dW = dy^T x, by het_gemm_ref (double sums) */
    float *ydef = zeros(ny), *yref = zeros(ny), *ys = zeros(ny);
    for (int s = 0; s < batch; s++)
        for (int o = 0; o < O; o++) {
            ydef[(size_t)s * O + o] = b[o];
            yref[(size_t)s * O + o] = b[o];
            ys[(size_t)s * O + o] = fabsf(b[o]);
        }
    het_gemm_ref(0, 1, batch, O, I, 1.0f, xr, I, wr, I, 1.0f, ydef, O);
    het_gemm_ref(0, 1, batch, O, I, 1.0f, x, I, t.params, I, 1.0f, yref, O);
    het_gemm_ref(0, 1, batch, O, I, 1.0f, xa, I, wa, I, 1.0f, ys, O);
    float *dxdef = zeros(nx), *dxref = zeros(nx), *dxs = zeros(nx);
    het_gemm_ref(0, 0, batch, I, O, 1.0f, dyr, O, wr, I, 0.0f, dxdef, I);
    het_gemm_ref(0, 0, batch, I, O, 1.0f, dy, O, t.params, I, 0.0f, dxref, I);
    het_gemm_ref(0, 0, batch, I, O, 1.0f, dya, O, wa, I, 0.0f, dxs, I);
    float *dwdef = zeros(nw), *dwref = zeros(nw), *dws = zeros(nw);
    het_gemm_ref(1, 0, O, I, batch, 1.0f, dyr, O, xr, I, 0.0f, dwdef, I);
    het_gemm_ref(1, 0, O, I, batch, 1.0f, dy, O, x, I, 0.0f, dwref, I);
    het_gemm_ref(1, 0, O, I, batch, 1.0f, dya, O, xa, I, 0.0f, dws, I);
    char what[128];
    errs ef = {0}, ed = {0}, ew = {0};
    fold(&ef, y16, y32, ydef, yref, ys, ny, I);
    fold(&ed, dx16, dx32, dxdef, dxref, dxs, nx, O);
    fold(&ew, g16, t.grads, dwdef, dwref, dws, nw, batch);
    const char *path = t.p.lp_bits && het_dnnl_bf16_enabled() ? "oneDNN matmul" : "portable";
    snprintf(what, sizeof what, "dense %d->%d batch %d (%s) forward", I, O, batch, path);
    report(what, &ef);
    snprintf(what, sizeof what, "dense %d->%d (%s) input gradient", I, O, path);
    report(what, &ed);
    snprintf(what, sizeof what, "dense %d->%d (%s) weight gradient", I, O, path);
    report(what, &ew);
    /* the bias gradient: the sum of the rounded dy in fp32 */
    double bw = 0;
    for (int o = 0; o < O; o++) {
        double def = 0, sa = 1e-30;
        for (int q = 0; q < batch; q++) def += dyr[(size_t)q * O + o], sa += dya[(size_t)q * O + o];
        double e = fabs((double)g16[nw + o] - def) / sa;
        if (e > bw) bw = e;
    }
    CHECK(bw <= (double)(batch + 2) * 0x1p-24, "dense (%s) bias gradient off the definition by "
          "%g S", path, bw);
    if (t.p.lp_bits && het_dnnl_bf16_enabled()) { /* oneDNN's matmuls against the portable path */
        const float *got[3] = {y16, dx16, g16}, *sc[3] = {ys, dxs, dws};
        const size_t n[3] = {ny, nx, nw};
        const double K[3] = {I, O, batch};
        snprintf(what, sizeof what, "dense %d->%d batch %d y, dx, dw", I, O, batch);
        compare_paths(what, &t, x, dy, batch, got, sc, n, K);
    }
    float *all[] = {x, dy, y16, dx16, y32, dx32, g16, xr, wr, dyr, xa, wa, dya, ydef, yref, ys,
                    dxdef, dxref, dxs, dwdef, dwref, dws};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) het_free(all[i]);
    lay_free(&t);
}

/* Backward with din NULL gives the weight gradient of backward with din. */
static void test_no_din(int I, int O, int batch) {
    lay t;
    if (lay_make(&t, het_dense_new(O), (het_shape){I, 1, 1}, batch)) {
        CHECK(0, "dense plan failed");
        return;
    }
    float *x = rnd((size_t)I * batch), *dy = rnd((size_t)O * batch), *y = zeros((size_t)O * batch);
    float *dx = zeros((size_t)I * batch), *g = zeros(t.p.n_params);
    lay_run(&t, 1, x, dy, y, dx, batch);
    memcpy(g, t.grads, sizeof(float) * t.p.n_params);
    het_exec ex = t.ex;
    ex.bf16 = 1, ex.lp = t.lp, ex.params = t.params_lp, ex.wbits = t.bits;
    memset(t.grads, 0, sizeof(float) * t.p.n_params);
    t.l->ops->backward(t.l, &ex, x, y, dy, NULL, batch);
    CHECK(memcmp(g, t.grads, sizeof(float) * t.p.n_params) == 0,
          "dense %d->%d: the weight gradient without din differs", I, O);
    het_free(x), het_free(dy), het_free(y), het_free(dx), het_free(g);
    lay_free(&t);
}

/* mlp in bf16 on 2 workers: eval logits with oneDNN's matmul against the portable path. */
static void test_model(void) {
    het_model *m = NULL;
    const int batch = 32;
    if (het_zoo_build(&m, "mlp", (het_shape){1, 28, 28}, 10, batch, 2) != HET_OK ||
        het_model_set_precision(m, HET_PREC_BF16) != HET_OK) {
        CHECK(0, "mlp: %s", het_error_msg());
        het_model_free(m);
        return;
    }
    het_model_init_params(m, 7);
    float *x = rnd((size_t)784 * batch), *a = zeros(10 * batch);
    memcpy(a, het_model_forward(m, x, batch, 0, 0), sizeof(float) * 10 * batch);
    het_dnnl_bf16_disable(1);
    const float *b = het_model_forward(m, x, batch, 0, 0);
    het_dnnl_bf16_disable(0);
    double d = 0, n = 0;
    int differ = 0;
    for (int i = 0; i < 10 * batch; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), n += (double)b[i] * b[i];
        differ |= a[i] != b[i];
    }
    printf("  mlp, 2 workers: eval logits, oneDNN bf16 matmul vs portable: %.2e relative L2\n",
           sqrt(d / n));
    CHECK(differ, "mlp: the logits with oneDNN's matmul are the portable path's bits: did it run?");
    CHECK(sqrt(d / n) <= 1e-3, "mlp: oneDNN's matmul and the portable path differ by %.3g",
          sqrt(d / n));
    het_free(x), het_free(a);
    het_model_free(m);
}

/* A refused batch size falls back to the portable path; a failure while running is NaN and
 * the fault. */
static void test_failures(void) {
    const int I = 40, O = 24, batch = 5;
    lay t;
    if (lay_make(&t, het_dense_new(O), (het_shape){I, 1, 1}, batch)) {
        CHECK(0, "dense plan failed");
        return;
    }
    const size_t nx = (size_t)I * batch, ny = (size_t)O * batch;
    float *x = rnd(nx), *dy = rnd(ny), *y = zeros(ny), *dx = zeros(nx), *yp = zeros(ny);
    float *dxp = zeros(nx), *gp = zeros(t.p.n_params);
    het_dnnl_bf16_disable(1); /* the portable path's bits */
    lay_run(&t, 1, x, dy, yp, dxp, batch);
    het_dnnl_bf16_disable(0);
    memcpy(gp, t.grads, sizeof(float) * t.p.n_params);
    het_dnnl_fault_clear();
    het_dnnl_inject(HET_DNNL_INJECT_REFUSE); /* batch 5 is new to the handle */
    lay_run(&t, 1, x, dy, y, dx, batch);
    CHECK(memcmp(y, yp, sizeof(float) * ny) == 0 && memcmp(dx, dxp, sizeof(float) * nx) == 0 &&
              memcmp(t.grads, gp, sizeof(float) * t.p.n_params) == 0,
          "a refused batch size did not give the portable path's bits");
    check_fault("refusal", HET_OK, NULL);
    het_dnnl_inject(0);
    lay_run(&t, 1, x, dy, y, dx, batch); /* made now */
    CHECK(memcmp(y, yp, sizeof(float) * ny) != 0, "after the refusal oneDNN did not run");
    het_dnnl_inject(HET_DNNL_INJECT_RUN);
    lay_run(&t, 1, x, dy, y, dx, batch);
    CHECK(all_nan(y, ny), "a failed forward left y not NaN");
    CHECK(all_nan(dx, nx) && all_nan(t.grads, (size_t)O * I), "a failed backward left dw or dx not NaN");
    check_fault("failure while running", HET_EINVAL, "dense: oneDNN bf16 matmul: runtime_error");
    het_dnnl_inject(0);
    lay_run(&t, 1, x, dy, y, dx, batch);
    CHECK(!all_nan(y, ny) && isfinite(y[0]) && isfinite(dx[0]), "the handle does not work again");
    het_free(x), het_free(dy), het_free(y), het_free(dx), het_free(yp), het_free(dxp), het_free(gp);
    lay_free(&t);
}

static void test_layers(void) {
    test_dense(100, 30, 7);
    test_dense(784, 256, 16);
    test_dense(3136, 256, 16);
    test_no_din(100, 30, 7);
}

int main(void) {
    het_rng_seed(&rng, 1);
    het_blas_set_threads(1);
    het_dnnl_bf16_choose(HET_BF16_KERNELS_ONEDNN); /* both paths wherever the CPU has them */
    const int on = het_dnnl_bf16_enabled();
    printf("portable path\n");
    het_dnnl_bf16_disable(1);
    test_layers();
    het_dnnl_bf16_disable(0);
    if (!on) {
        het_dnnl_dense *h = (het_dnnl_dense *)&rng;
        CHECK(het_dnnl_dense_create(&h, 10, 10) == HET_OK && h == NULL,
              "a oneDNN matmul handle without oneDNN's bf16 kernels");
        printf("oneDNN's bf16 matmul: skipped (%s)\n",
               het_bf16_cpu() == HET_BF16_ISA_NONE ? "the CPU has neither AMX nor AVX512-BF16"
                                                   : "oneDNN's bf16 kernels are not available");
        return het_test_finish("test_dense_bf16");
    }
    printf("oneDNN's bf16 matmul (this CPU has %s)\n", het_bf16_isa_name(het_bf16_cpu()));
    test_layers();
    test_model();
    test_failures();
    return het_test_finish("test_dense_bf16");
}

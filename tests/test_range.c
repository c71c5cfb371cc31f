/* The range executor (nn/range.c): every zoo model cut into two ranges at each edge a range
 * may start at, and into three, computes the bits of the whole model (loss, gradients,
 * batch-norm running statistics); micro-batches in flight on tapes of their own at once give
 * the bits of running them one after the other; the input gradient of a range that starts at
 * layer 0 matches finite differences; cuts on blocked edges and bad ranges are refused. */
#include <string.h>

#include "hetrain/netfile.h"
#include "hetrain/nn.h"
#include "hetrain/tensor.h"
#include "test.h"

static void fill(float *x, size_t n, uint64_t seed) {
    het_rng r;
    het_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * het_rng_uniform(&r) - 1.0f;
}

/* The model's loss sum over the batch by ranges cut at cuts[0..nc) (0 < cuts ascending < n):
 * forward range by range, the loss, backward range by range into the model's gradients. */
static double run_ranges(het_model *m, const int *cuts, int nc, const float *x, const uint8_t *y,
                         int batch, uint64_t seed, int sample0, float *probs, float *dlogits) {
    const int n = het_model_n_layers(m);
    het_tape *t[4] = {0};
    int b[5];
    b[0] = 0;
    for (int i = 0; i < nc; i++) b[i + 1] = cuts[i];
    b[nc + 1] = n;
    het_model_refresh_lp(m); /* bf16: the weights as the ranges read them (nothing in fp32) */
    for (int r = 0; r <= nc; r++)
        CHECK(het_tape_create(&t[r], m, b[r], b[r + 1], batch) == HET_OK, "[%d, %d): %s", b[r],
              b[r + 1], het_error_msg());
    double loss = NAN;
    const float *a = x;
    for (int r = 0; r <= nc && a; r++)
        if (t[r]) a = het_range_forward(m, t[r], a, batch, 1, seed, sample0);
    const int classes = het_model_n_classes(m);
    if (a) {
        loss = het_softmax_ce_forward(a, y, batch, classes, probs, NULL);
        het_softmax_ce_backward(dlogits, probs, y, batch, classes, 1.0f / 64);
        const float *d = dlogits;
        for (int r = nc; r >= 0 && d && t[r]; r--)
            d = het_range_backward(m, t[r], d, het_model_grads(m), r > 0);
    }
    for (int r = 0; r <= nc; r++) het_tape_free(t[r]);
    return loss;
}

static int same(const float *a, const float *b, size_t n) {
    return n == 0 || memcmp(a, b, n * sizeof(float)) == 0;
}

/* The whole model on one chunk against ranges at every cut, and at a pair of cuts, in
 * precision prec (both run it: in bf16 the ranges read the rounded weights of
 * het_model_refresh_lp, the whole model its own). */
static void test_cuts(const char *name, het_shape in, int batch, het_precision prec) {
    het_model *whole = NULL, *m = NULL;
    CHECK(het_zoo_build(&whole, name, in, 10, batch, 1) == HET_OK, "%s", het_error_msg());
    CHECK(het_zoo_build(&m, name, in, 10, batch, 1) == HET_OK, "%s", het_error_msg());
    if (!whole || !m) return;
    CHECK(het_model_set_precision(whole, prec) == HET_OK && het_model_set_precision(m, prec) == HET_OK,
          "%s", het_error_msg());
    const size_t np = het_model_n_params(m), ns = het_model_n_state(m);
    const size_t in_sz = het_shape_size(in) * (size_t)batch;
    float *x = het_alloc(in_sz * sizeof(float));
    float *probs = het_alloc(sizeof(float) * 10 * (size_t)batch);
    float *dl = het_alloc(sizeof(float) * 10 * (size_t)batch);
    uint8_t y[64];
    fill(x, in_sz, 11);
    for (int i = 0; i < batch; i++) y[i] = (uint8_t)(i * 3 % 10);
    het_model_init_params(whole, 5);
    het_model_zero_grads(whole);
    het_batch_result r;
    CHECK(het_model_train_batch(whole, x, y, batch, 1.0f / 64, 9, &r) == HET_OK, "%s",
          het_error_msg());
    const int n = het_model_n_layers(m);
    int tried = 0, refused = 0;
    for (int c = 1; c < n; c++) {
        if (!het_model_cut_ok(m, c)) {
            het_tape *t = NULL;
            CHECK(het_tape_create(&t, m, 0, c, batch) == HET_EINVAL && !t,
                  "%s: a range ending at layer %d (refused by cut_ok) was made", name, c);
            refused++;
            continue;
        }
        het_model_init_params(m, 5);
        het_model_zero_grads(m);
        double loss = run_ranges(m, &c, 1, x, y, batch, 9, 0, probs, dl);
        CHECK(loss == r.loss_sum, "%s cut %d: loss %.17g vs whole %.17g", name, c, loss, r.loss_sum);
        CHECK(same(het_model_grads(m), het_model_grads(whole), np),
              "%s cut %d: gradients differ from the whole model's", name, c);
        CHECK(same(het_model_state(m), het_model_state(whole), ns),
              "%s cut %d: running statistics differ from the whole model's", name, c);
        tried++;
    }
    CHECK(tried > 0, "%s: no cut allowed", name);
    /* three ranges: the first allowed cut and the last */
    int cuts[2] = {0, 0};
    for (int c = 1; c < n; c++)
        if (het_model_cut_ok(m, c)) {
            if (!cuts[0]) cuts[0] = c;
            cuts[1] = c;
        }
    if (cuts[1] > cuts[0]) {
        het_model_init_params(m, 5);
        het_model_zero_grads(m);
        double loss = run_ranges(m, cuts, 2, x, y, batch, 9, 0, probs, dl);
        CHECK(loss == r.loss_sum, "%s cuts %d,%d: loss %.17g vs %.17g", name, cuts[0], cuts[1],
              loss, r.loss_sum);
        CHECK(same(het_model_grads(m), het_model_grads(whole), np),
              "%s cuts %d,%d: gradients differ", name, cuts[0], cuts[1]);
    }
    printf("test_range: %s %s: %d cuts bitwise equal to the whole model, %d refused\n", name,
           het_precision_name(prec), tried, refused);
    het_free(x);
    het_free(probs);
    het_free(dl);
    het_model_free(whole);
    het_model_free(m);
}

/* M micro-batches: all forwards on M tapes first, then the backwards in order, equals forward
 * and backward of each in turn on one tape (each tape holds its own micro-batch). */
static void test_in_flight(const char *name, het_shape in, int mb, int M) {
    het_model *m = NULL;
    CHECK(het_zoo_build(&m, name, in, 10, mb, 1) == HET_OK, "%s", het_error_msg());
    if (!m) return;
    const int n = het_model_n_layers(m);
    int cut = 0;
    for (int c = n / 2; c < n && !cut; c++)
        if (het_model_cut_ok(m, c)) cut = c;
    CHECK(cut > 0, "%s: no cut in the second half", name);
    if (!cut) cut = n;
    const size_t np = het_model_n_params(m), in_sz = het_shape_size(in) * (size_t)mb;
    float *x = het_alloc(in_sz * (size_t)M * sizeof(float));
    float *probs = het_alloc(sizeof(float) * 10 * (size_t)mb);
    float *dl = het_alloc(sizeof(float) * 10 * (size_t)mb);
    float *g_seq = het_alloc(sizeof(float) * np);
    uint8_t y[256];
    fill(x, in_sz * (size_t)M, 3);
    for (int i = 0; i < mb * M; i++) y[i] = (uint8_t)(i * 7 % 10);
    /* one after the other, one pair of tapes */
    het_model_init_params(m, 8);
    het_model_zero_grads(m);
    het_tape *a = NULL, *b = NULL;
    CHECK(het_tape_create(&a, m, 0, cut, mb) == HET_OK, "%s", het_error_msg());
    CHECK(cut == n || het_tape_create(&b, m, cut, n, mb) == HET_OK, "%s", het_error_msg());
    double loss_seq = 0;
    for (int i = 0; i < M && a && (b || cut == n); i++) {
        const float *h = het_range_forward(m, a, x + in_sz * (size_t)i, mb, 1, 4, i * mb);
        const float *o = b ? het_range_forward(m, b, h, mb, 1, 4, i * mb) : h;
        loss_seq += het_softmax_ce_forward(o, y + i * mb, mb, 10, probs, NULL);
        het_softmax_ce_backward(dl, probs, y + i * mb, mb, 10, 1.0f / (float)(mb * M));
        const float *d = b ? het_range_backward(m, b, dl, het_model_grads(m), 1) : dl;
        het_range_backward(m, a, d, het_model_grads(m), 0);
    }
    memcpy(g_seq, het_model_grads(m), sizeof(float) * np);
    het_tape_free(a);
    het_tape_free(b);
    /* all forwards in flight, then the backwards */
    het_model_init_params(m, 8);
    het_model_zero_grads(m);
    het_tape *ta[8] = {0}, *tb[8] = {0};
    float *dls = het_alloc(sizeof(float) * 10 * (size_t)mb * (size_t)M);
    double loss_fl = 0;
    for (int i = 0; i < M; i++) {
        CHECK(het_tape_create(&ta[i], m, 0, cut, mb) == HET_OK, "%s", het_error_msg());
        CHECK(cut == n || het_tape_create(&tb[i], m, cut, n, mb) == HET_OK, "%s", het_error_msg());
        if (!ta[i] || (cut < n && !tb[i])) continue;
        const float *h = het_range_forward(m, ta[i], x + in_sz * (size_t)i, mb, 1, 4, i * mb);
        const float *o = tb[i] ? het_range_forward(m, tb[i], h, mb, 1, 4, i * mb) : h;
        loss_fl += het_softmax_ce_forward(o, y + i * mb, mb, 10, probs, NULL);
        het_softmax_ce_backward(dls + (size_t)i * 10 * (size_t)mb, probs, y + i * mb, mb, 10,
                                1.0f / (float)(mb * M));
    }
    for (int i = 0; i < M; i++) {
        if (!ta[i] || (cut < n && !tb[i])) continue;
        const float *dd = dls + (size_t)i * 10 * (size_t)mb;
        const float *d = tb[i] ? het_range_backward(m, tb[i], dd, het_model_grads(m), 1) : dd;
        het_range_backward(m, ta[i], d, het_model_grads(m), 0);
        het_tape_free(ta[i]);
        het_tape_free(tb[i]);
    }
    CHECK(loss_fl == loss_seq, "%s: loss in flight %.17g vs one after the other %.17g", name,
          loss_fl, loss_seq);
    CHECK(same(het_model_grads(m), g_seq, np),
          "%s: %d micro-batches in flight give other gradients than one after the other", name, M);
    het_free(x);
    het_free(probs);
    het_free(dl);
    het_free(dls);
    het_free(g_seq);
    het_model_free(m);
}

/* The input gradient of the range [0, n) against central differences of the loss. */
static void test_input_grad(void) {
    het_shape in = {1, 28, 28};
    const int batch = 2;
    het_model *m = NULL;
    CHECK(het_zoo_build(&m, "lenet5", in, 10, batch, 1) == HET_OK, "%s", het_error_msg());
    if (!m) return;
    het_model_init_params(m, 2);
    const size_t in_sz = het_shape_size(in) * batch;
    float *x = het_alloc(sizeof(float) * in_sz), probs[20], dl[20];
    uint8_t y[2] = {3, 7};
    fill(x, in_sz, 21);
    het_tape *t = NULL;
    CHECK(het_tape_create(&t, m, 0, het_model_n_layers(m), batch) == HET_OK, "%s", het_error_msg());
    if (!t) return;
    float *din = het_alloc(sizeof(float) * in_sz);
    const float *o = het_range_forward(m, t, x, batch, 1, 1, 0);
    het_softmax_ce_forward(o, y, batch, 10, probs, NULL);
    het_softmax_ce_backward(dl, probs, y, batch, 10, 1.0f);
    het_model_zero_grads(m);
    const float *d = het_range_backward(m, t, dl, het_model_grads(m), 1);
    CHECK(d != NULL, "need_din gave no input gradient");
    if (d) memcpy(din, d, sizeof(float) * in_sz);
    const float eps = 1e-2f;
    int bad = 0;
    for (size_t k = 0; d && k < in_sz; k += 97) {
        const float keep = x[k];
        double l[2];
        for (int s = 0; s < 2; s++) {
            x[k] = keep + (s ? -eps : eps);
            o = het_range_forward(m, t, x, batch, 0, 1, 0);
            l[s] = het_softmax_ce_forward(o, y, batch, 10, probs, NULL);
        }
        x[k] = keep;
        const double fd = (l[0] - l[1]) / (2 * eps);
        if (fabs(fd - din[k]) > 2e-3 + 2e-2 * fabs(fd)) {
            if (bad++ < 3) fprintf(stderr, "input %zu: analytic %g, numeric %g\n", k, din[k], fd);
        }
    }
    CHECK(bad == 0, "lenet5: %d input gradients differ from central differences", bad);
    het_tape_free(t);
    het_free(x);
    het_free(din);
    het_model_free(m);
}

static void test_refusals(void) {
    het_shape in = {1, 28, 28};
    het_model *m = NULL;
    CHECK(het_zoo_build(&m, "lenet5", in, 10, 4, 1) == HET_OK, "%s", het_error_msg());
    if (!m) return;
    const int n = het_model_n_layers(m);
    het_tape *t = NULL;
    CHECK(het_tape_create(&t, m, 2, 2, 4) == HET_EINVAL && !t, "an empty range was made");
    CHECK(het_tape_create(&t, m, 0, n + 1, 4) == HET_EINVAL && !t, "a range past the end was made");
    CHECK(het_tape_create(&t, m, -1, 2, 4) == HET_EINVAL && !t, "a range before 0 was made");
    CHECK(het_tape_create(&t, m, 0, n, 0) == HET_EINVAL && !t, "a tape of 0 samples was made");
    CHECK(het_tape_create(&t, m, 0, n, 4) == HET_OK && t, "%s", het_error_msg());
    float x[4 * 784] = {0};
    CHECK(t && het_range_forward(m, t, x, 5, 1, 0, 0) == NULL, "a micro-batch above the tape's ran");
    CHECK(t && het_range_forward(m, t, x, 0, 1, 0, 0) == NULL, "an empty micro-batch ran");
    CHECK(t && het_tape_bytes(t) > 0, "tape bytes");
    het_tape_free(t);
    het_model_free(m);
}

int main(void) {
    het_dnnl_bf16_choose(HET_BF16_KERNELS_ONEDNN); /* bf16 on oneDNN's kernels where the CPU has them */
    het_shape gray = {1, 28, 28}, rgb = {3, 32, 32};
    for (int p = HET_PREC_FP32; p <= HET_PREC_BF16; p++) {
        test_cuts("mlp", gray, 16, (het_precision)p);
        test_cuts("lenet5", gray, 16, (het_precision)p);
        test_cuts("cifar-cnn", rgb, 8, (het_precision)p);
        test_cuts("resnet20", rgb, 4, (het_precision)p);
    }
    test_in_flight("lenet5", gray, 8, 4);
    test_in_flight("cifar-cnn", rgb, 4, 3);
    test_input_grad();
    test_refusals();
    return het_test_finish("test_range");
}

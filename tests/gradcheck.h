/* Finite-difference gradient check for one layer, shared by the layer tests.
 *
 * Loss L = sum_i out_i * R_i with a fixed random R, so dL/dout = R. The analytic input and
 * parameter gradients from backward() are compared with central differences
 * (L(x + h) - L(x - h)) / 2h evaluated in double from float forwards. A component passes when
 * |analytic - numeric| <= tol * max(1, |analytic|, |numeric|); with h = 1e-2 and float
 * forwards, smooth layers reach ~1e-3, so the documented bound is tol = 2e-2 (relative). Inputs
 * should be kept away from kinks (ReLU at 0, max-pool ties) by the caller. */
#ifndef HET_GRADCHECK_H
#define HET_GRADCHECK_H
#include <string.h>

#include "hetrain/nn.h"
#include "test.h"

typedef struct gc_bufs {
    het_layer_plan p;
    float *params, *grads, *state, *cache, *work;
    het_rng rng;
} gc_bufs;

static double gc_loss(het_layer *l, gc_bufs *b, const float *x, const float *R, float *out,
                      int batch, int train, uint64_t seed) {
    het_rng rng;
    het_rng_seed(&rng, seed);
    het_exec ex = {b->params, b->grads, b->state, b->cache, b->work, &rng, train, NULL, 0, 0, NULL, NULL};
    l->ops->forward(l, &ex, x, out, batch);
    double s = 0;
    size_t n = het_shape_size(l->out) * (size_t)batch;
    for (size_t i = 0; i < n; i++) s += (double)out[i] * R[i];
    return s;
}

/* Checks layer `l` (freshly constructed) on input shape `in` with `batch` samples. Inputs are
 * uniform in [-1, 1] unless `x_init` is given (batch * size floats). Returns failures found. */
static int gradcheck_layer(const char *what, het_layer *l, het_shape in, int batch,
                           const float *x_init, int train, double tol) {
    int fails_before = het_test_failures;
    gc_bufs b;
    memset(&b, 0, sizeof b);
    int st = l->ops->plan(l, in, &b.p);
    CHECK(st == HET_OK, "%s: plan failed: %s", what, het_error_msg());
    if (st != HET_OK) return 1;
    l->in = in;
    l->out = b.p.out;
    size_t nin = het_shape_size(in) * (size_t)batch, nout = het_shape_size(b.p.out) * (size_t)batch;
    b.params = het_alloc(sizeof(float) * (b.p.n_params + 1));
    b.grads = het_alloc(sizeof(float) * (b.p.n_params + 1));
    b.state = het_alloc(sizeof(float) * (b.p.n_state + 1));
    b.cache = het_alloc(sizeof(float) * (b.p.cache_per_sample * (size_t)batch + 1));
    b.work = het_alloc(sizeof(float) * (b.p.work_per_sample * (size_t)batch + b.p.work_fixed + 1));
    float *x = het_alloc(sizeof(float) * nin), *din = het_alloc(sizeof(float) * nin);
    float *out = het_alloc(sizeof(float) * nout), *R = het_alloc(sizeof(float) * nout);
    het_rng rng;
    het_rng_seed(&rng, 1234);
    if (l->ops->init) l->ops->init(l, b.params, b.state, &rng);
    /* make parameters O(1) so that their gradients are not drowned by rounding */
    for (size_t i = 0; i < b.p.n_params; i++) b.params[i] += 0.1f * (het_rng_uniform(&rng) - 0.5f);
    for (size_t i = 0; i < nin; i++) x[i] = x_init ? x_init[i] : 2.0f * het_rng_uniform(&rng) - 1.0f;
    for (size_t i = 0; i < nout; i++) R[i] = 2.0f * het_rng_uniform(&rng) - 1.0f;
    float *state0 = het_alloc(sizeof(float) * (b.p.n_state + 1));
    memcpy(state0, b.state, sizeof(float) * b.p.n_state);

    const uint64_t seed = 77;
    gc_loss(l, &b, x, R, out, batch, train, seed);
    het_rng r2;
    het_rng_seed(&r2, seed);
    het_exec ex = {b.params, b.grads, b.state, b.cache, b.work, &r2, train, NULL, 0, 0, NULL, NULL};
    l->ops->backward(l, &ex, x, out, R, din, batch);
    const double h = 1e-2;
    /* input gradient: check up to 64 components spread over the tensor */
    size_t step_in = nin > 64 ? nin / 64 : 1;
    for (size_t i = 0; i < nin; i += step_in) {
        float keep = x[i];
        x[i] = keep + (float)h;
        memcpy(b.state, state0, sizeof(float) * b.p.n_state);
        double lp = gc_loss(l, &b, x, R, out, batch, train, seed);
        x[i] = keep - (float)h;
        memcpy(b.state, state0, sizeof(float) * b.p.n_state);
        double lm = gc_loss(l, &b, x, R, out, batch, train, seed);
        x[i] = keep;
        double num = (lp - lm) / (2 * h);
        double m = fmax(1.0, fmax(fabs(num), fabs((double)din[i])));
        CHECK(fabs(num - din[i]) <= tol * m, "%s: dinput[%zu] analytic %.6g numeric %.6g", what, i,
              (double)din[i], num);
    }
    size_t step_p = b.p.n_params > 64 ? b.p.n_params / 64 : 1;
    for (size_t i = 0; i < b.p.n_params; i += step_p) {
        float keep = b.params[i];
        b.params[i] = keep + (float)h;
        memcpy(b.state, state0, sizeof(float) * b.p.n_state);
        double lp = gc_loss(l, &b, x, R, out, batch, train, seed);
        b.params[i] = keep - (float)h;
        memcpy(b.state, state0, sizeof(float) * b.p.n_state);
        double lm = gc_loss(l, &b, x, R, out, batch, train, seed);
        b.params[i] = keep;
        double num = (lp - lm) / (2 * h);
        double m = fmax(1.0, fmax(fabs(num), fabs((double)b.grads[i])));
        CHECK(fabs(num - b.grads[i]) <= tol * m, "%s: dparam[%zu] analytic %.6g numeric %.6g",
              what, i, (double)b.grads[i], num);
    }
    /* backward accumulates: a second backward doubles the parameter gradients */
    if (b.p.n_params > 0) {
        float g0 = b.grads[0];
        memcpy(b.state, state0, sizeof(float) * b.p.n_state);
        gc_loss(l, &b, x, R, out, batch, train, seed);
        het_rng_seed(&r2, seed);
        l->ops->backward(l, &ex, x, out, R, din, batch);
        CHECK(fabs(b.grads[0] - 2 * g0) <= 1e-4 * fmax(1.0, fabs(g0)),
              "%s: backward must accumulate: %.7g then %.7g", what, (double)g0, (double)b.grads[0]);
    }
    het_free(b.params); het_free(b.grads); het_free(b.state); het_free(b.cache); het_free(b.work);
    het_free(x); het_free(din); het_free(out); het_free(R); het_free(state0);
    if (l->ops->destroy) l->ops->destroy(l);
    return het_test_failures - fails_before;
}
#endif

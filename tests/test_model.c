/* Model-level tests: planning, initialization determinism, worker split equivalence, gradient
 * accumulation, the gradient hook (more in test_hooks.c), a whole-model finite-difference check,
 * the zoo's layer lists and errors. */
#include <string.h>

#include "hetrain/netfile.h"
#include "hetrain/nn.h"
#include "test.h"

static void fill(float *x, size_t n, uint64_t seed) {
    het_rng r;
    het_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * het_rng_uniform(&r) - 1.0f;
}

typedef struct { int calls, last_layer; size_t covered, next_end; int order_ok; } hook_log;

static void hook(void *user, int layer, size_t offset, size_t count) {
    hook_log *h = user;
    if (h->calls > 0 && layer >= h->last_layer) h->order_ok = 0;
    if (h->calls > 0 && offset + count != h->next_end) h->order_ok = 0;
    h->next_end = offset;
    h->last_layer = layer;
    h->covered += count;
    h->calls++;
}

static void test_workers_equal(const char *name, het_shape in, int batch) {
    het_model *a = NULL, *b = NULL;
    CHECK(het_zoo_build(&a, name, in, 10, batch, 1) == HET_OK, "%s", het_error_msg());
    CHECK(het_zoo_build(&b, name, in, 10, batch, 2) == HET_OK, "%s", het_error_msg());
    if (!a || !b) return;
    CHECK(het_model_workers(b) == 2, "%s: expected 2 workers", name);
    het_model_init_params(a, 42);
    het_model_init_params(b, 42);
    size_t n = het_model_n_params(a);
    CHECK(memcmp(het_model_params(a), het_model_params(b), n * sizeof(float)) == 0,
          "%s: same seed must give bitwise equal parameters", name);
    size_t in_sz = het_shape_size(in) * (size_t)batch;
    float *x = het_alloc(in_sz * sizeof(float));
    uint8_t *y = het_alloc((size_t)batch);
    fill(x, in_sz, 7);
    for (int i = 0; i < batch; i++) y[i] = (uint8_t)(i * 7 % 10);
    het_batch_result ra, rb;
    het_model_zero_grads(a);
    het_model_zero_grads(b);
    hook_log ha = {0, 0, 0, 0, 1}, hb = {0, 0, 0, 0, 1};
    CHECK(het_model_add_hook(a, &(het_model_hook){hook, NULL, &ha}) == HET_OK, "%s", het_error_msg());
    CHECK(het_model_add_hook(b, &(het_model_hook){hook, NULL, &hb}) == HET_OK, "%s", het_error_msg());
    CHECK(het_model_train_batch(a, x, y, batch, 1.0f / batch, 1, &ra) == HET_OK, "%s", het_error_msg());
    CHECK(het_model_train_batch(b, x, y, batch, 1.0f / batch, 1, &rb) == HET_OK, "%s", het_error_msg());
    CHECK_CLOSE(ra.loss_sum, rb.loss_sum, 1e-5, "loss 1 vs 2 workers");
    CHECK(ra.correct == rb.correct && ra.count == batch && rb.count == batch, "%s: counts", name);
    double maxd = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)het_model_grads(a)[i] - het_model_grads(b)[i]);
        if (d > maxd) maxd = d;
    }
    /* only the order of the per-sample sums differs */
    CHECK(maxd < 1e-5, "%s: max |grad(1 worker) - grad(2 workers)| = %g", name, maxd);
    CHECK(ha.covered == n && hb.covered == n, "%s: hook covered %zu / %zu of %zu", name,
          ha.covered, hb.covered, n);
    CHECK(ha.order_ok && hb.order_ok && ha.next_end == 0, "%s: hook order must be reverse and contiguous", name);
    /* accumulation: a second identical step doubles the gradients */
    float g0 = het_model_grads(a)[0];
    het_model_train_batch(a, x, y, batch, 1.0f / batch, 1, &ra);
    CHECK_CLOSE(het_model_grads(a)[0], 2.0 * g0, 1e-5, "gradients accumulate");
    /* eval matches the training forward's loss for models without dropout/BN */
    het_batch_result re;
    CHECK(het_model_eval_batch(b, x, y, batch, &re) == HET_OK, "%s", het_error_msg());
    CHECK_CLOSE(re.loss_sum, rb.loss_sum, 1e-5, "eval loss vs train loss");
    het_free(x);
    het_free(y);
    het_model_free(a);
    het_model_free(b);
}

/* Whole-model finite differences on a few parameters of a small lenet5 batch. */
static void test_model_fd(void) {
    het_model *m = NULL;
    het_shape in = {1, 28, 28};
    int batch = 2;
    CHECK(het_zoo_build(&m, "lenet5", in, 10, batch, 1) == HET_OK, "%s", het_error_msg());
    if (!m) return;
    het_model_init_params(m, 3);
    size_t in_sz = het_shape_size(in) * (size_t)batch, n = het_model_n_params(m);
    float *x = het_alloc(in_sz * sizeof(float));
    uint8_t y[2] = {3, 8};
    fill(x, in_sz, 11);
    het_batch_result r;
    het_model_zero_grads(m);
    het_model_train_batch(m, x, y, batch, 1.0f, 5, &r);
    float *g = het_alloc(n * sizeof(float));
    memcpy(g, het_model_grads(m), n * sizeof(float));
    float *p = het_model_params(m);
    const double h = 1e-2;
    for (size_t i = 0; i < n; i += n / 40) {
        float keep = p[i];
        het_batch_result rp, rm;
        p[i] = keep + (float)h;
        het_model_eval_batch(m, x, y, batch, &rp);
        p[i] = keep - (float)h;
        het_model_eval_batch(m, x, y, batch, &rm);
        p[i] = keep;
        double num = (rp.loss_sum - rm.loss_sum) / (2 * h);
        CHECK(fabs(num - g[i]) <= 2e-2 * fmax(1.0, fmax(fabs(num), fabs(g[i]))),
              "lenet5 dparam[%zu]: analytic %.6g numeric %.6g", i, (double)g[i], num);
    }
    het_free(g);
    het_free(x);
    het_model_free(m);
}

/* het_zoo_layers: the list het_zoo_build uses (same model, same bits), caller-owned; errors. */
static void test_zoo_layers(void) {
    het_shape in = {1, 28, 28};
    het_layer **L = NULL;
    int n = 0;
    CHECK(het_zoo_layers("lenet5", in, 10, &L, &n) == HET_OK, "%s", het_error_msg());
    CHECK(n == 12, "lenet5: %d layers, expected 12", n);
    static const char *want[12] = {"conv2d", "maxpool", "relu", "conv2d", "maxpool", "relu",
                                   "flatten", "dense", "relu", "dense", "relu", "dense"};
    for (int i = 0; i < n && i < 12; i++)
        CHECK(strcmp(L[i]->ops->name, want[i]) == 0, "lenet5 layer %d: %s, expected %s", i,
              L[i]->ops->name, want[i]);
    het_model *a = NULL, *b = NULL;
    CHECK(het_model_create(&a, in, L, n, 4, 1) == HET_OK, "%s", het_error_msg());
    free(L);
    CHECK(het_zoo_build(&b, "lenet5", in, 10, 4, 1) == HET_OK, "%s", het_error_msg());
    if (a && b) {
        het_model_init_params(a, 9);
        het_model_init_params(b, 9);
        CHECK(het_model_n_params(a) == het_model_n_params(b) &&
                  memcmp(het_model_params(a), het_model_params(b),
                         het_model_n_params(a) * sizeof(float)) == 0,
              "het_zoo_layers + het_model_create must equal het_zoo_build (%zu vs %zu params)",
              het_model_n_params(a), het_model_n_params(b));
    }
    het_model_free(a);
    het_model_free(b);
    for (const char *const *z = het_zoo_names(); *z; z++) {
        CHECK(het_zoo_layers(*z, in, 7, &L, &n) == HET_OK && n > 0, "%s: %s", *z, het_error_msg());
        for (int i = 0; i < n; i++) L[i]->ops->destroy(L[i]);
        free(L);
    }
    L = (het_layer **)&n;
    CHECK(het_zoo_layers("nope", in, 10, &L, &n) == HET_EINVAL && !L && n == 0,
          "unknown name: must fail with no list (n %d)", n);
    CHECK(het_zoo_layers("mlp", in, 0, &L, &n) == HET_EINVAL && !L && n == 0,
          "0 classes must fail");
}

int main(void) {
    test_workers_equal("mlp", (het_shape){1, 28, 28}, 13);
    test_workers_equal("lenet5", (het_shape){1, 28, 28}, 9);
    /* cifar-cnn has dropout: worker split changes the masks, so check it trains finitely */
    het_model *c = NULL;
    CHECK(het_zoo_build(&c, "cifar-cnn", (het_shape){3, 32, 32}, 10, 4, 2) == HET_OK, "%s", het_error_msg());
    if (c) {
        het_model_init_params(c, 1);
        float *x = het_alloc(4 * 3 * 32 * 32 * sizeof(float));
        fill(x, 4 * 3 * 32 * 32, 3);
        uint8_t y[4] = {1, 2, 3, 4};
        het_batch_result r;
        CHECK(het_model_train_batch(c, x, y, 4, 0.25f, 9, &r) == HET_OK && isfinite(r.loss_sum) &&
                  r.loss_sum > 0, "cifar-cnn trains: loss %g", r.loss_sum);
        het_free(x);
        het_model_free(c);
    }
    test_model_fd();
    test_zoo_layers();
    het_model *m = NULL;
    CHECK(het_zoo_build(&m, "nope", (het_shape){1, 28, 28}, 10, 4, 1) == HET_EINVAL && !m,
          "unknown model must fail");
    CHECK(strstr(het_error_msg(), "lenet5") != NULL, "message lists known models: %s", het_error_msg());
    CHECK(het_zoo_build(&m, "resnet20", (het_shape){3, 32, 32}, 10, 4, 2) == HET_OK, "%s", het_error_msg());
    if (m) {
        CHECK(het_model_workers(m) == 2, "resnet20 runs 2 workers (batch norm meets over them)");
        CHECK(het_model_n_params(m) > 260000 && het_model_n_params(m) < 290000,
              "resnet20 has about 0.27M parameters, got %zu", het_model_n_params(m));
        het_model_free(m);
    }
    CHECK(het_zoo_build(&m, "lenet5", (het_shape){1, 28, 28}, 10, 4, 1) == HET_OK, "%s", het_error_msg());
    if (m) {
        CHECK(het_model_n_params(m) == 61706, "lenet5 has 61706 parameters, got %zu", het_model_n_params(m));
        het_model_free(m);
    }
    CHECK(het_zoo_build(&m, "mlp", (het_shape){1, 28, 28}, 10, 4, 1) == HET_OK, "%s", het_error_msg());
    if (m) {
        CHECK(het_model_n_params(m) == 235146, "mlp has 235146 parameters, got %zu", het_model_n_params(m));
        het_model_free(m);
    }
    return het_test_finish("test_model");
}

/* The dense-stack executor (nn/dense_stack.c) behind het_model_train_step: which models take
 * it (by the layers' ops tables: a user layer named "dense" does not qualify), and that its
 * steps equal the generic sequence (zero, train_batch, optimizer) up to float rounding, for
 * odd layer sizes, workers that own no rows of a layer, ragged batches, every optimizer; that
 * it is deterministic; that gradients are left in the buffer; errors. */
#include <string.h>

#include "hetrain/netfile.h"
#include "hetrain/nn.h"
#include "test.h"

static void fill(float *x, size_t n, uint64_t seed) {
    het_rng r;
    het_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * het_rng_uniform(&r) - 1.0f;
}

/* A user layer that calls itself "dense" but is out = 2 * in, without parameters. */
static int twice_plan(het_layer *l, het_shape in, het_layer_plan *p) {
    (void)l;
    *p = (het_layer_plan){.out = in};
    return HET_OK;
}
static void twice_forward(het_layer *l, const het_exec *x, const float *in, float *out, int batch) {
    (void)x;
    for (size_t i = 0; i < het_shape_size(l->in) * (size_t)batch; i++) out[i] = 2.0f * in[i];
}
static void twice_backward(het_layer *l, const het_exec *x, const float *in, const float *out,
                           const float *dout, float *din, int batch) {
    (void)x, (void)in, (void)out;
    if (din)
        for (size_t i = 0; i < het_shape_size(l->in) * (size_t)batch; i++) din[i] = 2.0f * dout[i];
}
static void twice_destroy(het_layer *l) { free(l); }
static const het_layer_ops twice_ops = {"dense", twice_plan, NULL, twice_forward, twice_backward,
                                        twice_destroy};
static het_layer *twice_new(void) {
    het_layer *l = calloc(1, sizeof *l);
    if (l) l->ops = &twice_ops;
    return l;
}

static int stacked(const het_model *m) {
    return strncmp(het_model_executor(m), "dense stack", 11) == 0;
}

/* Layer lists by name; `relu_last` puts a ReLU after the last dense too; `named_dense` has
 * a user layer named "dense" between two real ones. */
static int build(het_model **m, const char *kind, het_shape in, int batch, int workers) {
    het_layer *l[8];
    int n = 0;
    if (!strcmp(kind, "odd")) { /* 35 -> 23 relu -> 17 -> 3 (no ReLU between 17 and 3) */
        l[n++] = het_flatten_new();
        l[n++] = het_dense_new(23);
        l[n++] = het_relu_new();
        l[n++] = het_dense_new(17);
        l[n++] = het_dense_new(3);
    } else if (!strcmp(kind, "relu_last")) {
        l[n++] = het_dense_new(40);
        l[n++] = het_relu_new();
        l[n++] = het_dense_new(5);
        l[n++] = het_relu_new();
    } else if (!strcmp(kind, "one")) { /* softmax regression */
        l[n++] = het_dense_new(4);
    } else if (!strcmp(kind, "dropout")) {
        l[n++] = het_dense_new(20);
        l[n++] = het_relu_new();
        l[n++] = het_dropout_new(0.5f);
        l[n++] = het_dense_new(4);
    } else if (!strcmp(kind, "named_dense")) {
        l[n++] = het_dense_new(6);
        l[n++] = het_relu_new();
        l[n++] = twice_new();
        l[n++] = het_dense_new(4);
    } else if (!strcmp(kind, "relu_first")) {
        l[n++] = het_relu_new();
        l[n++] = het_dense_new(4);
    } else {
        return het_zoo_build(m, kind, in, 10, batch, workers);
    }
    return het_model_create(m, in, l, n, batch, workers);
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - (double)b[i]));
    return d;
}

/* `steps` steps of het_model_train_step on model S (workers) against the generic sequence on
 * model R (1 worker), same data; parameters, gradients and losses must agree within tol. */
static void compare(const char *kind, het_shape in, int max_batch, int batch, int workers,
                    het_optim_config oc, float lr, int steps, double tol) {
    het_model *S = NULL, *R = NULL;
    CHECK(build(&S, kind, in, max_batch, workers) == HET_OK, "%s", het_error_msg());
    CHECK(build(&R, kind, in, max_batch, 1) == HET_OK, "%s", het_error_msg());
    if (!S || !R) {
        het_model_free(S);
        het_model_free(R);
        return;
    }
    CHECK(stacked(S), "%s: must run the dense-stack executor, runs %s", kind,
          het_model_executor(S));
    int classes = het_model_n_classes(S);
    het_model_init_params(S, 5);
    het_model_init_params(R, 5);
    size_t n = het_model_n_params(S), ns = het_optim_state_floats(&oc, n);
    float *st_s = het_alloc((ns + 1) * sizeof(float)), *st_r = het_alloc((ns + 1) * sizeof(float));
    memset(st_s, 0, (ns + 1) * sizeof(float));
    memset(st_r, 0, (ns + 1) * sizeof(float));
    size_t in_sz = het_shape_size(in) * (size_t)batch;
    float *x = het_alloc(in_sz * sizeof(float));
    uint8_t *y = het_alloc((size_t)batch);
    double dp = 0, dg = 0, dl = 0;
    for (int t = 1; t <= steps; t++) {
        fill(x, in_sz, (uint64_t)t);
        for (int i = 0; i < batch; i++) y[i] = (uint8_t)((i * 7 + t) % classes);
        het_update us = {&oc, lr, st_s, t, NULL};
        het_batch_result rs, rr;
        int rc = het_model_train_step(S, x, y, batch, 1.0f / (float)batch, 9, &us, &rs);
        CHECK(rc == HET_OK, "%s: train_step: %s", kind, het_error_msg());
        het_model_zero_grads(R);
        CHECK(het_model_train_batch(R, x, y, batch, 1.0f / (float)batch, 9, &rr) == HET_OK, "%s",
              het_error_msg());
        het_optim_step(&oc, lr, het_model_params(R), het_model_grads(R), st_r, n, t);
        CHECK(rs.count == batch && rr.count == batch, "%s: counts %d %d", kind, rs.count,
              rr.count);
        CHECK(rs.correct == rr.correct, "%s step %d: correct %d vs %d", kind, t, rs.correct,
              rr.correct);
        dl = fmax(dl, fabs(rs.loss_sum - rr.loss_sum) / batch);
        dg = fmax(dg, max_abs_diff(het_model_grads(S), het_model_grads(R), n));
        dp = fmax(dp, max_abs_diff(het_model_params(S), het_model_params(R), n));
    }
    printf("%-10s workers %d batch %2d/%2d opt %s%s%s: max |d| params %.2e grads %.2e loss %.2e\n",
           kind, workers, batch, max_batch, oc.kind == HET_OPT_ADAM ? "adam" : "sgd",
           oc.nesterov ? "+nesterov" : "", oc.weight_decay > 0 ? "+wd" : "", dp, dg, dl);
    CHECK(dp <= tol && dg <= tol && dl <= tol, "%s, %d workers, batch %d: params %g grads %g "
          "loss %g (tol %g)", kind, workers, batch, dp, dg, dl, tol);
    het_free(st_s);
    het_free(st_r);
    het_free(x);
    het_free(y);
    het_model_free(S);
    het_model_free(R);
}

static void test_equivalence(void) {
    het_optim_config sgd = het_optim_defaults(); /* SGD momentum 0.9 */
    het_optim_config plain = sgd, nest = sgd, adam = het_optim_defaults();
    plain.momentum = 0.0f;
    nest.nesterov = 1;
    nest.weight_decay = 1e-3f;
    adam.kind = HET_OPT_ADAM;
    het_shape img = {1, 28, 28}, odd = {1, 5, 7}, flat = {9, 1, 1};
    compare("mlp", img, 64, 64, 2, sgd, 0.05f, 5, 1e-5);
    compare("mlp", img, 64, 13, 2, nest, 0.05f, 4, 1e-5); /* ragged last batch */
    compare("mlp", img, 64, 1, 2, sgd, 0.05f, 3, 1e-5);   /* one sample: worker 1 has none */
    compare("mlp", img, 32, 32, 1, adam, 1e-3f, 4, 1e-5);
    compare("odd", odd, 19, 19, 3, sgd, 0.1f, 5, 1e-5); /* 3 workers: some own no rows */
    compare("odd", odd, 19, 7, 2, plain, 0.1f, 5, 1e-5);
    compare("odd", odd, 19, 19, 4, adam, 1e-2f, 4, 1e-5);
    compare("relu_last", flat, 8, 8, 2, sgd, 0.1f, 5, 1e-5);
    compare("one", flat, 6, 6, 2, nest, 0.1f, 5, 1e-5);
}

static void test_eligibility(void) {
    struct { const char *kind; het_shape in; int stacked; } c[] = {
        {"mlp", {1, 28, 28}, 1},        {"odd", {1, 5, 7}, 1},     {"one", {9, 1, 1}, 1},
        {"relu_last", {9, 1, 1}, 1},    {"lenet5", {1, 28, 28}, 0}, {"dropout", {9, 1, 1}, 0},
        {"relu_first", {9, 1, 1}, 0},   {"named_dense", {9, 1, 1}, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        het_model *m = NULL;
        CHECK(build(&m, c[i].kind, c[i].in, 4, 2) == HET_OK, "%s: %s", c[i].kind, het_error_msg());
        if (!m) continue;
        CHECK(stacked(m) == c[i].stacked, "%s: executor '%s', expected the %s", c[i].kind,
              het_model_executor(m), c[i].stacked ? "dense stack" : "generic one");
        het_model_free(m);
    }
}

/* A model the executor does not take: train_step is exactly zero + train_batch + update. */
static void test_fallback_bitwise(const char *kind, het_shape in) {
    het_model *a = NULL, *b = NULL;
    size_t in_sz = het_shape_size(in);
    CHECK(build(&a, kind, in, 8, 2) == HET_OK, "%s", het_error_msg());
    CHECK(build(&b, kind, in, 8, 2) == HET_OK, "%s", het_error_msg());
    if (!a || !b) goto out;
    het_model_init_params(a, 3);
    het_model_init_params(b, 3);
    het_optim_config oc = het_optim_defaults();
    size_t n = het_model_n_params(a);
    float *sa = het_alloc(n * sizeof(float)), *sb = het_alloc(n * sizeof(float));
    float *x = het_alloc(8 * in_sz * sizeof(float));
    uint8_t y[8];
    fill(x, 8 * in_sz, 11);
    for (int i = 0; i < 8; i++) y[i] = (uint8_t)(i % het_model_n_classes(a));
    for (int t = 1; t <= 2; t++) {
        het_update u = {&oc, 0.05f, sa, t, NULL};
        het_batch_result r;
        CHECK(het_model_train_step(a, x, y, 8, 0.125f, 1, &u, &r) == HET_OK, "%s",
              het_error_msg());
        het_model_zero_grads(b);
        CHECK(het_model_train_batch(b, x, y, 8, 0.125f, 1, &r) == HET_OK, "%s", het_error_msg());
        het_update ub = {&oc, 0.05f, sb, t, NULL};
        het_model_update(b, &ub);
    }
    CHECK(memcmp(het_model_params(a), het_model_params(b), n * sizeof(float)) == 0,
          "%s: train_step must equal zero + train_batch + update bitwise", kind);
    het_free(sa);
    het_free(sb);
    het_free(x);
out:
    het_model_free(a);
    het_model_free(b);
}

/* Same seed and data twice: bitwise equal parameters (barriers fix every order). */
static void test_deterministic(void) {
    het_shape in = {1, 28, 28};
    float *p[2] = {NULL, NULL};
    size_t n = 0;
    het_optim_config oc = het_optim_defaults();
    float *x = het_alloc(64 * 784 * sizeof(float));
    uint8_t y[64];
    for (int run = 0; run < 2; run++) {
        het_model *m = NULL;
        CHECK(build(&m, "mlp", in, 64, 2) == HET_OK, "%s", het_error_msg());
        if (!m) break;
        het_model_init_params(m, 1);
        n = het_model_n_params(m);
        float *st = het_alloc(n * sizeof(float));
        memset(st, 0, n * sizeof(float));
        for (int t = 1; t <= 5; t++) {
            fill(x, 64 * 784, (uint64_t)t);
            for (int i = 0; i < 64; i++) y[i] = (uint8_t)((i + t) % 10);
            het_update u = {&oc, 0.05f, st, t, NULL};
            het_batch_result r;
            CHECK(het_model_train_step(m, x, y, 64, 1.0f / 64, 0, &u, &r) == HET_OK, "%s",
                  het_error_msg());
        }
        p[run] = malloc(n * sizeof(float));
        memcpy(p[run], het_model_params(m), n * sizeof(float));
        het_free(st);
        het_model_free(m);
    }
    CHECK(p[0] && p[1] && memcmp(p[0], p[1], n * sizeof(float)) == 0,
          "mlp: two identical runs must give bitwise equal parameters");
    free(p[0]);
    free(p[1]);
    het_free(x);
}

static void hook(void *user, int layer, size_t off, size_t count) {
    (void)user, (void)layer, (void)off, (void)count;
}

static void progress(void *user, int layer) {
    (void)layer;
    (*(int *)user)++;
}

static void test_errors(void) {
    het_model *m = NULL;
    het_shape in = {9, 1, 1};
    CHECK(build(&m, "odd", in, 4, 2) == HET_OK, "%s", het_error_msg());
    if (!m) return;
    het_model_init_params(m, 1);
    size_t n = het_model_n_params(m);
    float *before = malloc(n * sizeof(float)), *st = het_alloc(n * sizeof(float));
    memcpy(before, het_model_params(m), n * sizeof(float));
    memset(st, 0, n * sizeof(float));
    float x[4 * 9];
    fill(x, 4 * 9, 2);
    uint8_t y[4] = {0, 1, 3, 2}; /* 3 classes: label 3 is out of range */
    het_optim_config oc = het_optim_defaults();
    het_update u = {&oc, 0.1f, st, 1, NULL};
    het_batch_result r;
    CHECK(het_model_train_step(m, x, y, 4, 0.25f, 0, &u, &r) == HET_EINVAL, "bad label accepted");
    CHECK(strstr(het_error_msg(), "label 3 of sample 2") != NULL, "message: %s", het_error_msg());
    CHECK(het_model_train_step(m, x, y, 5, 0.2f, 0, &u, &r) == HET_EINVAL, "batch 5 > max 4");
    CHECK(het_model_train_step(m, x, y, 0, 1.0f, 0, &u, &r) == HET_EINVAL, "batch 0 accepted");
    int calls = 0;
    CHECK(het_model_add_hook(m, &(het_model_hook){hook, NULL, &u}) == HET_OK, "%s", het_error_msg());
    y[2] = 2;
    CHECK(het_model_train_step(m, x, y, 4, 0.25f, 0, &u, &r) == HET_EINVAL,
          "a gradient hook must be refused");
    CHECK(memcmp(before, het_model_params(m), n * sizeof(float)) == 0,
          "failed steps must leave the parameters alone");
    het_model_remove_hook(m, &u);
    CHECK(het_model_add_hook(m, &(het_model_hook){NULL, progress, &calls}) == HET_OK, "%s",
          het_error_msg());
    CHECK(het_model_train_step(m, x, y, 4, 0.25f, 0, &u, &r) == HET_OK, "%s", het_error_msg());
    CHECK(calls == 6, "progress-only hook: %d calls, expected 6 (3 dense layers, twice)", calls);
    CHECK(memcmp(before, het_model_params(m), n * sizeof(float)) != 0, "a step must update");
    free(before);
    het_free(st);
    het_model_free(m);
}

int main(void) {
    test_eligibility();
    test_equivalence();
    test_fallback_bitwise("lenet5", (het_shape){1, 28, 28});
    test_fallback_bitwise("named_dense", (het_shape){9, 1, 1});
    test_deterministic();
    test_errors();
    return het_test_finish("test_stack");
}

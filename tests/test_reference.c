/* Reference test against PyTorch (the llm.c test_gpt2.c idea): for "mlp", "lenet5" and
 * "resblock" (two ResNet basic blocks with batch norm, see build()), load the
 * parameters, batch, logits, loss, gradients and 10 SGD-momentum losses that
 * tools/make_fixtures.py computed with torch (float64 math from float32 parameters and inputs),
 * run hetrain on the same numbers and compare.
 *
 * Tolerances (hetrain computes in float32, the reference is exact to float32 rounding):
 *   logits, gradients  per tensor group (one layer's weights and bias): every element satisfies
 *                      |a - b| <= 1e-4 * (|b| + max|b| of the group), i.e. 1e-4 relative to the
 *                      group's scale (elements near zero cannot be held to an element-wise
 *                      relative bound). Also reported: max abs diff and ||a-b|| / ||b||.
 *   loss               relative 1e-5.
 *   10-step losses     relative 1e-4 * (1 + t) at step t = 0..9: float32 differences in the
 *                      parameters are amplified by each step (momentum 0.9, lr 0.05).
 * Measured (OpenBLAS, 1 worker): logits and gradients within 3e-7 of the group scale, losses
 * within 1e-6 over all 10 steps, so the tolerances leave a margin of ~300x for other GEMM
 * kernels and reduction orders; a wrong index or a dropped term shows up as >= 1e-3.
 * A missing or malformed fixture is a failure, never a skip. */
#include <math.h>
#include <string.h>

#include "hetrain/netfile.h"
#include "hetrain/nn.h"
#include "hetrain/optim.h"
#include "fixtures/fixture.h"
#include "test.h"

#define B 8
#define CLASSES 10
#define STEPS 10
#define SEED 1234u

/* Compares a[0..n) with the reference b; returns the normwise relative error and checks the
 * group tolerance described above. */
static double compare(const char *model, const char *what, const float *a, const float *b,
                      size_t n, double tol, double *max_abs_out) {
    double maxb = 0.0, maxd = 0.0, num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) maxb = fmax(maxb, fabs((double)b[i]));
    size_t bad = 0, first_bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= tol * (fabs((double)b[i]) + maxb))) { /* NaN fails too */
            if (!bad) first_bad = i;
            bad++;
        }
        if (!(d <= maxd)) maxd = d;
        num += d * d;
        den += (double)b[i] * b[i];
    }
    CHECK(bad == 0, "%s %s: %zu of %zu elements off (first [%zu]: %.9g vs torch %.9g, group max "
          "|ref| %.3g, tol %g)", model, what, bad, n, first_bad, bad ? (double)a[first_bad] : 0.0,
          bad ? (double)b[first_bad] : 0.0, maxb, tol);
    if (max_abs_out) *max_abs_out = maxd;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void fused_steps(const char *name, const float *params, size_t n, const float *x,
                        const uint8_t *y, const float *grads_ref, const float *losses_ref,
                        const float *sgd);

/* The zoo model `name`, or "resblock": tools/make_fixtures.py's stem (conv 16 with bias, batch
 * norm, ReLU) and two ResNet basic blocks (16 channels stride 1; 32 channels stride 2 with the
 * option-A shortcut), global average pool, fc 10. */
static int build(het_model **m, const char *name, int workers) {
    if (strcmp(name, "resblock") != 0)
        return het_zoo_build(m, name, (het_shape){1, 28, 28}, CLASSES, B, workers);
    het_layer *L[8] = {het_conv2d_new(16, 3, 1, 1), het_batchnorm_new(0.1f, 1e-5f),
                       het_relu_new(),               het_resblock_new(16, 1),
                       het_resblock_new(32, 2),      het_avgpool_new(0, 0),
                       het_dense_new(CLASSES)};
    int rc = het_model_create(m, (het_shape){1, 28, 28}, L, 7, B, workers);
    if (rc == HET_OK) het_model_init_params(*m, 1);
    return rc;
}

static void run_model(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/ref_%s.bin", HET_SOURCE_DIR, name);
    het_fixture f;
    int ok = het_fixture_load(&f, path) == 0;
    CHECK(ok, "%s: fixture %s must load", name, path);
    if (!ok) return;

    size_t np = 0;
    const float *params = het_fixture_f32(&f, "params", 0, &np);
    const float *x = het_fixture_f32(&f, "x", (size_t)B * 784, NULL);
    const int32_t *y32 = het_fixture_i32(&f, "y", B);
    const float *logits_ref = het_fixture_f32(&f, "logits", (size_t)B * CLASSES, NULL);
    const float *loss_ref = het_fixture_f32(&f, "loss", 1, NULL);
    const float *grads_ref = params ? het_fixture_f32(&f, "grads", np, NULL) : NULL;
    const float *losses_ref = het_fixture_f32(&f, "losses", STEPS, NULL);
    const float *sgd = het_fixture_f32(&f, "sgd", 2, NULL);
    ok = params && x && y32 && logits_ref && loss_ref && grads_ref && losses_ref && sgd;
    CHECK(ok, "%s: fixture entries missing or of the wrong size", name);
    uint8_t y[B];
    for (int i = 0; ok && i < B; i++) {
        CHECK(y32[i] >= 0 && y32[i] < CLASSES, "%s: label %d out of range", name, (int)y32[i]);
        if (y32[i] < 0 || y32[i] >= CLASSES) ok = 0;
        else y[i] = (uint8_t)y32[i];
    }
    het_model *m = NULL;
    if (ok) {
        int rc = build(&m, name, 1);
        CHECK(rc == HET_OK && m, "%s: het_zoo_build: %s", name, het_error_msg());
        if (rc != HET_OK) m = NULL;
    }
    if (!m) {
        het_fixture_free(&f);
        return;
    }
    size_t n = het_model_n_params(m);
    CHECK(n == np, "%s: model has %zu parameters, fixture %zu", name, n, np);
    if (n != np) goto done;
    float *P = het_model_params(m);
    memcpy(P, params, n * sizeof *P);

    /* logits (train mode: no model here has dropout; batch norm uses the batch's statistics) */
    const float *logits = het_model_forward(m, x, B, 1, SEED);
    CHECK(logits != NULL, "%s: forward: %s", name, het_error_msg());
    if (!logits) goto done;
    double lmax = 0.0, lrel = compare(name, "logits", logits, logits_ref, B * CLASSES, 1e-4, &lmax);
    int correct_ref = 0;
    for (int i = 0; i < B; i++) {
        int arg = 0;
        for (int k = 1; k < CLASSES; k++)
            if (logits_ref[i * CLASSES + k] > logits_ref[i * CLASSES + arg]) arg = k;
        correct_ref += arg == y[i];
    }

    /* loss and gradients of the batch mean */
    het_model_zero_grads(m);
    het_batch_result res = {0};
    int rc = het_model_train_batch(m, x, y, B, 1.0f / B, SEED, &res);
    CHECK(rc == HET_OK, "%s: train_batch: %s", name, het_error_msg());
    if (rc != HET_OK) goto done;
    CHECK(res.count == B, "%s: count %d", name, res.count);
    CHECK(res.correct == correct_ref, "%s: correct %d, torch logits give %d", name, res.correct,
          correct_ref);
    double loss = res.loss_sum / B;
    CHECK(fabs(loss - loss_ref[0]) <= 1e-5 * fabs((double)loss_ref[0]), "%s: loss %.9g vs torch "
          "%.9g", name, loss, (double)loss_ref[0]);
    const float *G = het_model_grads(m);
    double gmax = 0.0, grel = 0.0;
    for (int l = 0; l < het_model_n_layers(m); l++) {
        size_t off = 0, cnt = 0;
        het_model_layer_params(m, l, &off, &cnt);
        if (!cnt) continue;
        CHECK(off + cnt <= n, "%s: layer %d params [%zu, +%zu) beyond %zu", name, l, off, cnt, n);
        if (off + cnt > n) continue;
        char what[64];
        snprintf(what, sizeof what, "grads of layer %d (%s)", l, het_model_layer(m, l)->ops->name);
        double d = 0.0, r = compare(name, what, G + off, grads_ref + off, cnt, 1e-4, &d);
        gmax = fmax(gmax, d);
        grel = fmax(grel, r);
    }
    printf("%-6s %zu params: loss %.7f (torch %.7f), logits max abs diff %.2e rel %.2e, grads "
           "max abs diff %.2e, worst layer rel %.2e\n", name, n, loss, (double)loss_ref[0], lmax,
           lrel, gmax, grel);

    /* 10 steps of SGD with momentum on the same batch, from the fixture's parameters */
    het_optim_config oc = het_optim_defaults();
    oc.kind = HET_OPT_SGD;
    oc.momentum = sgd[1];
    CHECK(het_optim_check(&oc) == HET_OK, "%s", het_error_msg());
    float *state = het_alloc(het_optim_state_floats(&oc, n) * sizeof(float));
    CHECK(state != NULL, "%s: state allocation", name);
    if (!state) goto done;
    memcpy(P, params, n * sizeof *P);
    double worst = 0.0;
    printf("%-6s step losses (hetrain / torch):", name);
    for (int t = 0; t < STEPS; t++) {
        het_model_zero_grads(m);
        rc = het_model_train_batch(m, x, y, B, 1.0f / B, SEED + (uint64_t)t, &res);
        CHECK(rc == HET_OK, "%s: step %d: %s", name, t, het_error_msg());
        if (rc != HET_OK) break;
        het_optim_step(&oc, sgd[0], P, het_model_grads(m), state, n, t + 1);
        double l = res.loss_sum / B, r = losses_ref[t];
        double rel = fabs(l - r) / fabs(r);
        worst = fmax(worst, rel);
        printf(" %.6g/%.6g", l, r);
        CHECK(rel <= 1e-4 * (1 + t), "%s: step %d loss %.9g vs torch %.9g (rel %.3g)", name, t, l,
              r, rel);
    }
    printf("\n%-6s 10-step losses: worst rel diff %.2e\n", name, worst);
    het_free(state);
    fused_steps(name, params, n, x, y, grads_ref, losses_ref, sgd);
done:
    het_model_free(m);
    het_fixture_free(&f);
}

/* The same 10 steps as `hetrain train` runs them on one process: het_model_train_step on 2
 * workers (for mlp the dense-stack executor, update folded in); the gradients it leaves after
 * step 1 are those of the fixture's parameters. */
static void fused_steps(const char *name, const float *params, size_t n, const float *x,
                        const uint8_t *y, const float *grads_ref, const float *losses_ref,
                        const float *sgd) {
    het_model *m = NULL;
    int rc = build(&m, name, 2);
    CHECK(rc == HET_OK && m, "%s: het_zoo_build: %s", name, het_error_msg());
    if (!m) return;
    het_optim_config oc = het_optim_defaults();
    oc.momentum = sgd[1];
    float *state = het_alloc(het_optim_state_floats(&oc, n) * sizeof(float));
    memset(state, 0, het_optim_state_floats(&oc, n) * sizeof(float));
    memcpy(het_model_params(m), params, n * sizeof(float));
    double worst = 0.0, gmax = 0.0;
    for (int t = 0; t < STEPS; t++) {
        het_update u = {&oc, sgd[0], state, t + 1, NULL};
        het_batch_result res;
        rc = het_model_train_step(m, x, y, B, 1.0f / B, SEED + (uint64_t)t, &u, &res);
        CHECK(rc == HET_OK, "%s: fused step %d: %s", name, t, het_error_msg());
        if (rc != HET_OK) break;
        if (t == 0) /* the whole buffer as one group: a looser bound than per layer above */
            gmax = compare(name, "fused-step grads", het_model_grads(m), grads_ref, n, 1e-4, NULL);
        double l = res.loss_sum / B, r = losses_ref[t], rel = fabs(l - r) / fabs(r);
        worst = fmax(worst, rel);
        CHECK(rel <= 1e-4 * (1 + t), "%s: fused step %d loss %.9g vs torch %.9g (rel %.3g)", name,
              t, l, r, rel);
    }
    printf("%-6s het_model_train_step (%s, 2 workers): step-1 grads rel %.2e, 10-step "
           "losses worst rel %.2e\n", name, het_model_executor(m),
           gmax, worst);
    het_free(state);
    het_model_free(m);
}

int main(void) {
    run_model("mlp");
    run_model("lenet5");
    run_model("resblock");
    return het_test_finish("test_reference");
}

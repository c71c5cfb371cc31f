/* Optimizers and learning-rate schedules: argument checks, closed-form single steps computed by
 * hand, and agreement with torch.optim / torch.optim.lr_scheduler on numbers stored in
 * tests/fixtures/optim_ref.bin by tools/make_fixtures.py (torch 1.13, float32 tensors). */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "hetrain/optim.h"
#include "fixtures/fixture.h"
#include "test.h"

static int msg_has(const char *word) { return strstr(het_error_msg(), word) != NULL; }

/* Expects het_optim_check to fail with a message naming `field`. */
static void expect_optim_bad(het_optim_config c, const char *field) {
    het_error_clear();
    int rc = het_optim_check(&c);
    CHECK(rc == HET_EINVAL, "%s: rc %d", field, rc);
    CHECK(msg_has(field), "message '%s' should name %s", het_error_msg(), field);
}

static void expect_sched_bad(het_schedule s, const char *field) {
    het_error_clear();
    int rc = het_schedule_check(&s);
    CHECK(rc == HET_EINVAL, "%s: rc %d", field, rc);
    CHECK(msg_has(field), "message '%s' should name %s", het_error_msg(), field);
}

static void test_checks(void) {
    het_optim_config d = het_optim_defaults(), c;
    CHECK(het_optim_check(&d) == HET_OK, "defaults: %s", het_error_msg());
    CHECK(d.kind == HET_OPT_SGD && d.momentum == 0.9f && !d.nesterov && d.weight_decay == 0.0f &&
          d.beta1 == 0.9f && d.beta2 == 0.999f && d.eps == 1e-8f, "defaults differ from the header");
    c = d; c.momentum = 1.0f;  expect_optim_bad(c, "momentum");
    c = d; c.momentum = -0.1f; expect_optim_bad(c, "momentum");
    c = d; c.momentum = NAN;   expect_optim_bad(c, "momentum");
    c = d; c.dampening = 1.5f; expect_optim_bad(c, "dampening");
    c = d; c.momentum = 0.0f; c.nesterov = 1; expect_optim_bad(c, "nesterov");
    c = d; c.nesterov = 1; c.dampening = 0.1f; expect_optim_bad(c, "nesterov");
    c = d; c.weight_decay = -1e-4f; expect_optim_bad(c, "weight_decay");
    c = d; c.weight_decay = INFINITY; expect_optim_bad(c, "weight_decay");
    c = d; c.kind = (het_opt_kind)7; expect_optim_bad(c, "kind");
    c = d; c.kind = HET_OPT_ADAM;
    CHECK(het_optim_check(&c) == HET_OK, "Adam defaults: %s", het_error_msg());
    c.momentum = 5.0f; /* ignored by Adam */
    CHECK(het_optim_check(&c) == HET_OK, "Adam ignores momentum: %s", het_error_msg());
    c = d; c.kind = HET_OPT_ADAM; c.beta1 = 1.0f;  expect_optim_bad(c, "beta1");
    c = d; c.kind = HET_OPT_ADAM; c.beta2 = -0.1f; expect_optim_bad(c, "beta2");
    c = d; c.kind = HET_OPT_ADAM; c.eps = 0.0f;    expect_optim_bad(c, "eps");

    c = d;
    CHECK(het_optim_state_floats(&c, 10) == 10, "SGD momentum state");
    c.momentum = 0.0f;
    CHECK(het_optim_state_floats(&c, 10) == 0, "plain SGD has no state");
    c.kind = HET_OPT_ADAM;
    CHECK(het_optim_state_floats(&c, 10) == 20, "Adam state is 2n");

    het_schedule s0 = het_schedule_defaults(0.1f), s;
    CHECK(het_schedule_check(&s0) == HET_OK, "schedule defaults: %s", het_error_msg());
    CHECK(s0.scale == 1.0f && s0.bad_epochs == 0 && s0.best > 1e30f, "plateau state defaults");
    s = s0; s.base_lr = 0.0f; expect_sched_bad(s, "lr");
    s = s0; s.base_lr = NAN;  expect_sched_bad(s, "lr");
    s = s0; s.warmup_epochs = -1.0f; expect_sched_bad(s, "warmup_epochs");
    s = s0; s.kind = HET_SCHED_STEP; s.step_epochs = 0; expect_sched_bad(s, "step_epochs");
    s = s0; s.kind = HET_SCHED_STEP; s.gamma = 0.0f;    expect_sched_bad(s, "gamma");
    s = s0; s.kind = HET_SCHED_STEP; s.gamma = 1.5f;    expect_sched_bad(s, "gamma");
    s = s0; s.kind = HET_SCHED_STEP; s.gamma = 1.0f;
    CHECK(het_schedule_check(&s) == HET_OK, "gamma 1 is allowed: %s", het_error_msg());
    s = s0; s.kind = HET_SCHED_COSINE; s.total_epochs = 0; expect_sched_bad(s, "total_epochs");
    s = s0; s.kind = HET_SCHED_COSINE; s.min_lr = 0.2f;    expect_sched_bad(s, "min_lr");
    s = s0; s.kind = HET_SCHED_PLATEAU; s.patience = -1;   expect_sched_bad(s, "patience");
    s = s0; s.kind = HET_SCHED_PLATEAU; s.factor = 1.0f;   expect_sched_bad(s, "factor");
    s = s0; s.kind = HET_SCHED_PLATEAU; s.threshold = 1.0f; expect_sched_bad(s, "threshold");
    s = s0; s.kind = (het_sched_kind)9; expect_sched_bad(s, "kind");

    het_sched_kind k = HET_SCHED_CONSTANT;
    CHECK(het_schedule_parse_kind("cosine", &k) == HET_OK && k == HET_SCHED_COSINE, "cosine");
    CHECK(het_schedule_parse_kind("plateau", &k) == HET_OK && k == HET_SCHED_PLATEAU, "plateau");
    CHECK(het_schedule_parse_kind("step", &k) == HET_OK && k == HET_SCHED_STEP, "step");
    CHECK(het_schedule_parse_kind("constant", &k) == HET_OK && k == HET_SCHED_CONSTANT, "const");
    het_error_clear();
    CHECK(het_schedule_parse_kind("cosin", &k) == HET_EINVAL && msg_has("cosin"),
          "unknown name: '%s'", het_error_msg());
}

/* Hand-computed SGD steps (values derived in the comments). */
static void test_sgd_closed_form(void) {
    het_optim_config c = het_optim_defaults();
    float p, g, buf;
    /* plain: p = 1 - 0.1 * 0.5 */
    c.momentum = 0.0f;
    p = 1.0f; g = 0.5f;
    het_optim_step(&c, 0.1f, &p, &g, NULL, 1, 1);
    CHECK_CLOSE(p, 0.95, 1e-7, "plain SGD");
    /* weight decay 0.1: g = 0.5 + 0.1 * 1 = 0.6, p = 1 - 0.06 */
    c.weight_decay = 0.1f;
    p = 1.0f;
    het_optim_step(&c, 0.1f, &p, &g, NULL, 1, 1);
    CHECK_CLOSE(p, 0.94, 1e-7, "SGD weight decay");

    /* momentum 0.9, lr 0.1, grads 1, 2, -1: buf 1, 2.9, 1.61; p 0.9, 0.61, 0.449 */
    c = het_optim_defaults();
    const float gs[3] = {1.0f, 2.0f, -1.0f};
    const double want_p[3] = {0.9, 0.61, 0.449}, want_buf[3] = {1.0, 2.9, 1.61};
    p = 1.0f; buf = 123.0f; /* t == 1 must overwrite, not read, the buffer */
    for (int t = 1; t <= 3; t++) {
        het_optim_step(&c, 0.1f, &p, &gs[t - 1], &buf, 1, t);
        CHECK_CLOSE(p, want_p[t - 1], 1e-6, "momentum p");
        CHECK_CLOSE(buf, want_buf[t - 1], 1e-6, "momentum buffer");
    }
    /* dampening 0.5: the first step copies g (torch), then buf = 0.9 * 1 + 0.5 * 2 = 1.9 */
    c.dampening = 0.5f;
    p = 1.0f; buf = 0.0f;
    het_optim_step(&c, 0.1f, &p, &gs[0], &buf, 1, 1);
    het_optim_step(&c, 0.1f, &p, &gs[1], &buf, 1, 2);
    CHECK_CLOSE(buf, 1.9, 1e-6, "dampened buffer");
    CHECK_CLOSE(p, 0.71, 1e-6, "dampened p");
    /* Nesterov: g1 = 1: buf 1, step 1 + 0.9 = 1.9, p 0.81; g2 = 2: buf 2.9, step 2 + 2.61 =
     * 4.61, p 0.349 */
    c = het_optim_defaults();
    c.nesterov = 1;
    p = 1.0f; buf = 0.0f;
    het_optim_step(&c, 0.1f, &p, &gs[0], &buf, 1, 1);
    CHECK_CLOSE(p, 0.81, 1e-6, "Nesterov step 1");
    het_optim_step(&c, 0.1f, &p, &gs[1], &buf, 1, 2);
    CHECK_CLOSE(p, 0.349, 1e-6, "Nesterov step 2");
    /* momentum + weight decay 0.5 on p = 2, g = 1: g' = 2, buf = 2, p = 2 - 0.2 = 1.8 */
    c = het_optim_defaults();
    c.weight_decay = 0.5f;
    p = 2.0f; buf = 0.0f;
    het_optim_step(&c, 0.1f, &p, &gs[0], &buf, 1, 1);
    CHECK_CLOSE(p, 1.8, 1e-6, "momentum + weight decay");
}

static void test_adam_closed_form(void) {
    het_optim_config c = het_optim_defaults();
    c.kind = HET_OPT_ADAM;
    /* First step: m_hat = g, v_hat = g^2, so p moves by lr * g / (|g| + eps) ~ lr * sign(g),
     * whatever the gradient's magnitude. */
    const float g[5] = {1e-3f, -0.5f, 3.0f, -100.0f, 0.0f};
    float p[5] = {0.0f, 1.0f, -1.0f, 2.0f, 5.0f}, p0[5], st[10] = {0};
    memcpy(p0, p, sizeof p);
    het_optim_step(&c, 1e-3f, p, g, st, 5, 1);
    for (int i = 0; i < 5; i++) {
        double sgn = g[i] > 0 ? 1.0 : g[i] < 0 ? -1.0 : 0.0;
        double want = (double)p0[i] - 1e-3 * sgn * fabs((double)g[i]) / (fabs((double)g[i]) + 1e-8);
        CHECK(fabs(p[i] - want) <= 1e-6 * fmax(1.0, fabs(want)), "Adam step 1 [%d]: %.9g vs %.9g",
              i, (double)p[i], want);
        CHECK(fabs((p0[i] - p[i]) - 1e-3 * sgn) < 2e-7, "Adam step 1 ~ lr sign(g) [%d]", i);
    }
    /* Second step by hand, in double: beta (0.9, 0.999), lr 0.01, wd 0.1, p = 1, g = 2, then 1. */
    c.weight_decay = 0.1f;
    float q = 1.0f, s2[2] = {0};
    const float ga = 2.0f, gb = 1.0f;
    het_optim_step(&c, 0.01f, &q, &ga, s2, 1, 1);
    het_optim_step(&c, 0.01f, &q, &gb, s2, 1, 2);
    double b1 = 0.9f, b2 = 0.999f, pd = 1.0, m = 0, v = 0;
    for (int t = 1; t <= 2; t++) {
        double gg = (t == 1 ? 2.0 : 1.0) + (double)0.1f * pd;
        m = b1 * m + (1 - b1) * gg;
        v = b2 * v + (1 - b2) * gg * gg;
        double mh = m / (1 - pow(b1, t)), vh = v / (1 - pow(b2, t));
        pd -= (double)0.01f * mh / (sqrt(vh) + 1e-8);
    }
    CHECK_CLOSE(q, pd, 1e-6, "Adam two steps with weight decay");
    CHECK_CLOSE(s2[0], m, 1e-6, "Adam m");
    CHECK_CLOSE(s2[1], v, 1e-6, "Adam v");
}

/* Runs each optimizer case from the fixture and compares every parameter after every step. */
static void test_optim_vs_torch(const het_fixture *f) {
    static const char *cases[] = {"sgd", "sgd_mom", "sgd_nesterov", "adam", "adam_wd"};
    char name[64];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t n = 0, tn = 0;
        snprintf(name, sizeof name, "%s.cfg", cases[k]);
        const float *cfg = het_fixture_f32(f, name, 9, NULL);
        snprintf(name, sizeof name, "%s.p0", cases[k]);
        const float *p0 = het_fixture_f32(f, name, 0, &n);
        snprintf(name, sizeof name, "%s.g", cases[k]);
        const float *g = het_fixture_f32(f, name, 0, &tn);
        snprintf(name, sizeof name, "%s.p", cases[k]);
        const float *pw = p0 && g ? het_fixture_f32(f, name, tn, NULL) : NULL;
        CHECK(cfg && p0 && g && pw && n > 0 && tn % n == 0, "fixture case %s incomplete",
              cases[k]);
        if (!(cfg && p0 && g && pw && n > 0 && tn % n == 0)) continue;
        het_optim_config c = het_optim_defaults();
        c.kind = cfg[0] == 1.0f ? HET_OPT_ADAM : HET_OPT_SGD;
        float lr = cfg[1];
        c.momentum = cfg[2];
        c.dampening = cfg[3];
        c.nesterov = cfg[4] != 0.0f;
        c.weight_decay = cfg[5];
        c.beta1 = cfg[6];
        c.beta2 = cfg[7];
        c.eps = cfg[8];
        CHECK(het_optim_check(&c) == HET_OK, "%s: %s", cases[k], het_error_msg());
        float p[64], st[128] = {0};
        CHECK(n <= 64, "case %s too large", cases[k]);
        if (n > 64) continue;
        memcpy(p, p0, n * sizeof *p);
        double maxd = 0.0;
        size_t steps = tn / n;
        for (size_t t = 0; t < steps; t++) {
            het_optim_step(&c, lr, p, g + t * n, st, n, (int64_t)t + 1);
            for (size_t i = 0; i < n; i++) {
                double d = fabs((double)p[i] - pw[t * n + i]) / fmax(1.0, fabs(pw[t * n + i]));
                if (d > maxd) maxd = d;
            }
        }
        /* Same float32 operations as torch's single-tensor path; torch's vectorized CPU kernels
         * fuse some multiply-adds (FMA), so ~1 ulp differences remain (measured <= 2e-7). */
        CHECK(maxd <= 1e-6, "%s: max rel diff %.3g vs torch", cases[k], maxd);
        printf("optim %-13s %zu params x %zu steps: max rel diff vs torch %.3g\n", cases[k], n,
               steps, maxd);
    }
}

static void test_schedules(const het_fixture *f) {
    het_schedule s = het_schedule_defaults(0.1f);
    /* constant, with and without warm-up over 2 epochs of 5 steps (W = 10) */
    CHECK_CLOSE(het_schedule_lr(&s, 7, 123, 5), 0.1, 1e-7, "constant");
    s.warmup_epochs = 2.0f;
    CHECK_CLOSE(het_schedule_lr(&s, 0, 0, 5), 0.01, 1e-7, "warm-up step 0 = lr / W");
    CHECK_CLOSE(het_schedule_lr(&s, 0, 4, 5), 0.05, 1e-7, "warm-up step 4 = lr / 2");
    CHECK_CLOSE(het_schedule_lr(&s, 1, 9, 5), 0.1, 1e-7, "warm-up last step = lr");
    CHECK_CLOSE(het_schedule_lr(&s, 2, 10, 5), 0.1, 1e-7, "after warm-up");
    s.warmup_epochs = 0.5f; /* 2.5 steps round to W = 3 */
    CHECK_CLOSE(het_schedule_lr(&s, 0, 0, 5), 0.1 / 3, 1e-7, "fractional warm-up");
    CHECK_CLOSE(het_schedule_lr(&s, 0, 3, 5), 0.1, 1e-7, "fractional warm-up end");

    /* step: 0.1 * 0.5^floor(e / 3), against StepLR */
    s = het_schedule_defaults(0.1f);
    s.kind = HET_SCHED_STEP;
    s.step_epochs = 3;
    s.gamma = 0.5f;
    CHECK(het_schedule_check(&s) == HET_OK, "step: %s", het_error_msg());
    CHECK_CLOSE(het_schedule_lr(&s, 2, 0, 1), 0.1, 1e-7, "step epoch 2");
    CHECK_CLOSE(het_schedule_lr(&s, 3, 0, 1), 0.05, 1e-7, "step epoch 3");
    CHECK_CLOSE(het_schedule_lr(&s, 9, 0, 1), 0.0125, 1e-7, "step epoch 9");
    size_t ne = 0;
    const float *lr_step = het_fixture_f32(f, "step.lr", 0, &ne);
    CHECK(lr_step != NULL, "step.lr");
    for (size_t e = 0; lr_step && e < ne; e++)
        CHECK_CLOSE(het_schedule_lr(&s, (int)e, (int64_t)e * 5, 5), lr_step[e], 1e-6, "StepLR");
    /* warm-up composes by multiplication: epoch 0 of 5 steps, W = 5 */
    s.warmup_epochs = 1.0f;
    CHECK_CLOSE(het_schedule_lr(&s, 0, 1, 5), 0.1 * 2 / 5, 1e-7, "step + warm-up");

    /* cosine over 4 epochs x 5 steps, min 0.001, against CosineAnnealingLR */
    s = het_schedule_defaults(0.1f);
    s.kind = HET_SCHED_COSINE;
    s.total_epochs = 4;
    s.min_lr = 0.001f;
    CHECK(het_schedule_check(&s) == HET_OK, "cosine: %s", het_error_msg());
    CHECK_CLOSE(het_schedule_lr(&s, 0, 0, 5), 0.1, 1e-7, "cosine start");
    CHECK_CLOSE(het_schedule_lr(&s, 2, 10, 5), (0.1 + 0.001) / 2, 1e-7, "cosine middle");
    CHECK_CLOSE(het_schedule_lr(&s, 4, 20, 5), 0.001, 1e-7, "cosine end = min_lr");
    CHECK_CLOSE(het_schedule_lr(&s, 9, 45, 5), 0.001, 1e-7, "cosine stays at min_lr");
    size_t ns = 0;
    const float *lr_cos = het_fixture_f32(f, "cosine.lr", 0, &ns);
    CHECK(lr_cos != NULL && ns == 20, "cosine.lr");
    for (size_t t = 0; lr_cos && t < ns; t++)
        CHECK_CLOSE(het_schedule_lr(&s, (int)(t / 5), (int64_t)t, 5), lr_cos[t], 1e-6,
                    "CosineAnnealingLR");
    s.warmup_epochs = 1.0f; /* W = 5 */
    double c2 = 0.001 + (0.1 - 0.001) * (1 + cos(3.14159265358979323846 * 2 / 20)) / 2;
    CHECK_CLOSE(het_schedule_lr(&s, 0, 2, 5), c2 * 3 / 5, 1e-6, "cosine + warm-up");

    /* plateau against ReduceLROnPlateau(factor 0.5, patience 2, threshold 0.01) */
    s = het_schedule_defaults(0.1f);
    s.kind = HET_SCHED_PLATEAU;
    s.factor = 0.5f;
    s.patience = 2;
    s.threshold = 0.01f;
    CHECK(het_schedule_check(&s) == HET_OK, "plateau: %s", het_error_msg());
    size_t nm = 0;
    const float *pm = het_fixture_f32(f, "plateau.m", 0, &nm);
    const float *plr = pm ? het_fixture_f32(f, "plateau.lr", nm, NULL) : NULL;
    CHECK(pm && plr, "plateau entries");
    int reductions = 0;
    for (size_t e = 0; pm && plr && e < nm; e++) {
        float before = s.scale;
        het_schedule_epoch_end(&s, pm[e]);
        reductions += s.scale < before;
        float lr = het_schedule_lr(&s, (int)e + 1, 0, 1);
        CHECK(fabs(lr - plr[e]) <= 1e-6 * plr[e], "plateau epoch %zu (metric %g): lr %.9g vs "
              "torch %.9g", e, (double)pm[e], (double)lr, (double)plr[e]);
    }
    CHECK(reductions >= 2, "the fixture's metrics should trigger reductions (got %d)", reductions);
    /* patience 0: the first bad epoch reduces; NaN is never an improvement; a 0.5% drop is not
     * a 1% improvement */
    s = het_schedule_defaults(1.0f);
    s.kind = HET_SCHED_PLATEAU;
    s.patience = 0;
    s.factor = 0.5f;
    s.threshold = 0.01f;
    het_schedule_epoch_end(&s, 1.0f);
    CHECK(s.scale == 1.0f && s.best == 1.0f && s.bad_epochs == 0, "first metric is the best");
    het_schedule_epoch_end(&s, 0.995f);
    CHECK(s.scale == 0.5f && s.best == 1.0f, "0.5%% is not an improvement at threshold 1%%");
    het_schedule_epoch_end(&s, NAN);
    CHECK(s.scale == 0.25f, "NaN metric counts as a bad epoch");
    het_schedule_epoch_end(&s, 0.5f);
    CHECK(s.scale == 0.25f && s.best == 0.5f, "improvement resets");
    CHECK_CLOSE(het_schedule_lr(&s, 3, 0, 1), 0.25, 1e-7, "plateau lr = base * scale");
    s.min_lr = 0.3f;
    CHECK_CLOSE(het_schedule_lr(&s, 3, 0, 1), 0.3, 1e-7, "plateau lr floored at min_lr");
    /* epoch_end leaves other schedules alone */
    het_schedule k = het_schedule_defaults(0.1f);
    het_schedule_epoch_end(&k, 5.0f);
    CHECK(k.scale == 1.0f && k.bad_epochs == 0, "constant ignores epoch_end");
}

/* The fixture reader must reject damaged files: a missing file, a flipped byte (crc), a
 * truncated file. Copies are written to a mkstemp() file and removed. */
static void test_fixture_reader(const het_fixture *good) {
    het_fixture f;
    CHECK(het_fixture_load(&f, HET_SOURCE_DIR "/tests/fixtures/no_such_file.bin") != 0,
          "missing fixture must fail");
    char path[] = "/tmp/het_fixture_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    close(fd);
    unsigned char *copy = malloc(good->size);
    CHECK(copy != NULL, "malloc");
    for (int k = 0; copy && k < 4; k++) {
        memcpy(copy, good->bytes, good->size);
        size_t size = good->size;
        if (k == 0) copy[good->size / 2] ^= 0x10;   /* a data byte: crc mismatch */
        if (k == 1) size -= 7;                      /* truncated */
        if (k == 2) size = 10;                      /* shorter than a header */
        if (k == 3) {                               /* valid crc, first count too large */
            copy[12 + 32 + 4 + 3] = 0x7f;
            uint32_t crc = het_crc32(0, copy, size - 4);
            for (int b = 0; b < 4; b++) copy[size - 4 + b] = (unsigned char)(crc >> (8 * b));
        }
        FILE *fp = fopen(path, "wb");
        CHECK(fp && fwrite(copy, 1, size, fp) == size, "write %s", path);
        if (fp) fclose(fp);
        CHECK(het_fixture_load(&f, path) != 0, "damaged fixture (case %d) must be rejected", k);
    }
    free(copy);
    remove(path);
}

/* het_optim_step_range reports non-finite weights it wrote: a NaN or inf gradient, or an update
 * that overflows; every optimizer variant; finite updates report 1. */
static void test_nonfinite_report(void) {
    enum { N = 300 };
    static float p[N], g[N], st[2 * N];
    const char *name[] = {"sgd", "sgd momentum", "sgd nesterov", "adam"};
    for (int v = 0; v < 4; v++)
        for (int t = 1; t <= 2; t++) {
            het_optim_config c = het_optim_defaults();
            c.kind = v == 3 ? HET_OPT_ADAM : HET_OPT_SGD;
            c.momentum = v == 0 || v == 3 ? 0.0f : 0.9f;
            c.nesterov = v == 2;
            for (int i = 0; i < N; i++) p[i] = 1.0f, g[i] = 0.5f;
            memset(st, 0, sizeof st);
            CHECK(het_optim_step_range(&c, 0.1f, p, g, st, N, t, 0, N) == 1,
                  "%s t %d: finite update reported non-finite", name[v], t);
            g[N - 7] = NAN;
            CHECK(het_optim_step_range(&c, 0.1f, p, g, st, N, t, 0, N) == 0,
                  "%s t %d: NaN gradient not reported", name[v], t);
            CHECK(het_optim_step_range(&c, 0.1f, p, g, st, N, t, 0, N - 7) == 1,
                  "%s t %d: NaN outside the range reported", name[v], t);
            for (int i = 0; i < N; i++) p[i] = 1.0f, g[i] = 0.5f;
            memset(st, 0, sizeof st);
            if (v != 3) {
                g[3] = 3e38f;
                CHECK(het_optim_step_range(&c, 1e10f, p, g, st, N, t, 0, N) == 0,
                      "%s t %d: overflowing update not reported", name[v], t);
            }
        }
}

int main(void) {
    test_checks();
    test_nonfinite_report();
    test_sgd_closed_form();
    test_adam_closed_form();
    het_fixture f;
    int ok = het_fixture_load(&f, HET_SOURCE_DIR "/tests/fixtures/optim_ref.bin") == 0;
    CHECK(ok, "tests/fixtures/optim_ref.bin must load");
    if (ok) {
        test_optim_vs_torch(&f);
        test_schedules(&f);
        test_fixture_reader(&f);
        het_fixture_free(&f);
    }
    return het_test_finish("test_optim");
}

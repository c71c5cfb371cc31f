/* Invariants of the distributed runtime and the `allreduce` strategy, run under mpirun with 1..4
 * ranks by tests/test_dist.sh (and alone, as one rank, by CTest):
 *  - P ranks with global batch B end with the parameters of 1 rank with batch B on the same
 *    sample order: every rank computes that reference itself, in-process, with its own model
 *    and the single-process step helpers. Bound: max |diff| <= 1e-5 * max(1, |w|) after 22
 *    steps of SGD with momentum (float rounding of the sum over ranks; measured ~1e-7). With
 *    one rank the match is bitwise.
 *  - every rank holds bitwise the same parameters;
 *  - bucketed (several buckets) equals flat: bitwise with 1 or 2 ranks, within the same bound
 *    with more (MPI's summation order depends on the message size);
 *  - the shards of an epoch cover every sample exactly once (indices gathered from all ranks),
 *    including a last step smaller than P, where some ranks get no sample;
 *  - resume on P ranks is bitwise identical to the uninterrupted run;
 *  - a checkpoint missing on one rank only: every rank fails with that rank's message;
 *  - hgc with unequal local batches: sample weighting == the 1-rank reference (same bound),
 *    rank weighting differs measurably.
 * Synthetic data, mlp and lenet5, a few steps: each run takes about a second. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hetrain.h"
#include "hetero/hetero.h"
#include "strategy/strategy.h"
#include "test.h"

/* Open MPI leaks at exit (its MCA plugins), which LeakSanitizer would report in the sanitizer
 * build; the library's own leaks are covered by the tests that do not start MPI. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }

static int g_rank, g_size;
static char g_dir[256];

static het_train_config base(const char *model, int batch, int limit) {
    het_train_config c = het_train_config_defaults();
    char b[32], l[32];
    snprintf(b, sizeof b, "%d", batch);
    snprintf(l, sizeof l, "%d", limit);
    het_train_config_set(&c, "model", model);
    het_train_config_set(&c, "data", "synthetic");
    het_train_config_set(&c, "batch", b);
    het_train_config_set(&c, "train-limit", l);
    het_train_config_set(&c, "test-limit", "64");
    het_train_config_set(&c, "epochs", "2");
    het_train_config_set(&c, "seed", "11");
    het_train_config_set(&c, "progress", "off");
    het_train_config_set(&c, "quiet", NULL);
    het_log_set_level(HET_LOG_QUIET);
    return c;
}

/* Trains cfg (collectively) and returns a copy of the final parameters. */
static float *train(const het_train_config *cfg, size_t *n) {
    het_trainer *t;
    int st = het_trainer_create(&t, cfg);
    CHECK(st == HET_OK, "create: %s", het_error_msg());
    if (st) return NULL;
    st = het_trainer_run(t);
    CHECK(st == HET_OK, "run: %s", het_error_msg());
    het_model *m = het_trainer_model(t);
    *n = het_model_n_params(m);
    float *p = malloc(*n * sizeof *p);
    memcpy(p, het_model_params(m), *n * sizeof *p);
    het_trainer_free(t);
    return p;
}

/* The single-process reference: the step loop of one rank with batch B, written with the
 * public step helpers only. */
static float *reference(const het_train_config *cfg, size_t *n) {
    het_dataset tr, te;
    CHECK(het_dataset_load_named(&tr, &te, "synthetic", NULL) == HET_OK, "%s", het_error_msg());
    het_model *m;
    CHECK(het_zoo_build(&m, cfg->model, tr.shape, tr.n_classes, cfg->batch, 1) == HET_OK, "%s",
          het_error_msg());
    het_model_init_params(m, cfg->seed);
    *n = het_model_n_params(m);
    float *opt = het_alloc(het_optim_state_floats(&cfg->optim, *n) * sizeof(float) + 4);
    float *x = het_alloc((size_t)cfg->batch * het_shape_size(tr.shape) * sizeof(float));
    uint8_t *y = het_alloc((size_t)cfg->batch);
    het_sampler s;
    int64_t N = cfg->train_limit, B = cfg->batch, step = 0;
    het_sampler_init(&s, N, cfg->seed, 1);
    het_schedule sched = cfg->sched;
    sched.total_epochs = cfg->epochs;
    for (int e = 0; e < cfg->epochs; e++) {
        het_sampler_set_epoch(&s, e);
        double loss = 0;
        for (int64_t pos = 0; pos < N; pos += B) {
            int count = (int)(N - pos < B ? N - pos : B);
            float lr = het_schedule_lr(&sched, e, step, (N + B - 1) / B);
            het_batch_result r;
            het_update u = {&cfg->optim, lr, opt, step + 1, NULL};
            het_batch_step(m, &(het_batch){&tr, s.perm + pos, count, x, y}, 1.0f / (float)count,
                           het_batch_seed(cfg->seed, step), &u, &r);
            loss += r.loss_sum;
            step++;
        }
        het_schedule_epoch_end(&sched, (float)(loss / (double)N));
    }
    float *p = malloc(*n * sizeof *p);
    memcpy(p, het_model_params(m), *n * sizeof *p);
    het_sampler_free(&s);
    het_free(opt);
    het_free(x);
    het_free(y);
    het_model_free(m);
    het_dataset_free(&tr);
    het_dataset_free(&te);
    return p;
}

/* max |a - b| / max(1, |a|) */
static double max_rel(const float *a, const float *b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / fmax(1.0, fabs((double)a[i]));
        if (!(d <= worst)) worst = d; /* NaN wins */
    }
    return worst;
}

/* Every rank holds the same bytes: compare CRCs. */
static void check_same_everywhere(const float *p, size_t n, const char *what) {
    unsigned crc = het_crc32(0, p, n * sizeof *p), lo = crc, hi = crc;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UNSIGNED, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UNSIGNED, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lo == hi, "%s: parameters differ between ranks (crc %08x vs %08x)", what, lo, hi);
}

static void test_invariance(const char *model, int batch, int limit) {
    het_train_config flat = base(model, batch, limit);
    het_train_config_set(&flat, "momentum", "0.9");
    het_train_config_set(&flat, "bucket-mb", "0");
    het_train_config bk = flat;
    het_train_config_set(&bk, "bucket-mb", "0.02"); /* several buckets */
    size_t n1 = 0, n2 = 0, n3 = 0;
    float *ref = reference(&flat, &n1);
    float *pf = train(&flat, &n2);
    float *pb = train(&bk, &n3);
    if (!pf || !pb || n1 != n2 || n1 != n3) {
        CHECK(0, "%s: runs failed", model);
    } else {
        double df = max_rel(ref, pf, n1), db = max_rel(pf, pb, n1);
        if (g_rank == 0)
            printf("%s, %d ranks, batch %d, %d samples: flat vs 1-rank reference %.3g, "
                   "bucketed vs flat %.3g\n", model, g_size, batch, limit, df, db);
        if (g_size == 1) CHECK(df == 0.0, "%s: one rank differs from the reference by %g", model, df);
        CHECK(df <= 1e-5, "%s: %d ranks vs 1-rank reference: %g", model, g_size, df);
        if (g_size <= 2) CHECK(db == 0.0, "%s: bucketed vs flat on %d ranks: %g", model, g_size, db);
        CHECK(db <= 1e-5, "%s: bucketed vs flat: %g", model, db);
        check_same_everywhere(pf, n1, "flat");
        check_same_everywhere(pb, n1, "bucketed");
    }
    free(ref);
    free(pf);
    free(pb);
}

/* hgc with unequal local batches (speeds 1:2:3:4): sample weighting gives the update of one
 * process on the same global batch; rank weighting (the unweighted 2020 scheme) measurably
 * does not. The ragged last step (3 samples) is split evenly. */
static void test_hgc(const char *model, int batch, int limit) {
    het_train_config c = base(model, batch, limit);
    het_train_config_set(&c, "momentum", "0.9");
    het_train_config_set(&c, "strategy", "hgc");
    char speeds[64] = "";
    for (int r = 0; r < g_size; r++)
        snprintf(speeds + strlen(speeds), sizeof speeds - strlen(speeds), "%s%d", r ? "," : "",
                 r + 1);
    het_train_config_set(&c, "speeds", speeds);
    het_train_config rank = c;
    het_train_config_set(&rank, "weighting", "rank");
    size_t n1 = 0, n2 = 0, n3 = 0;
    float *ref = reference(&c, &n1);
    float *ps = train(&c, &n2);
    float *pr = train(&rank, &n3);
    if (!ps || !pr || n1 != n2 || n1 != n3) {
        CHECK(0, "hgc %s: runs failed", model);
    } else {
        double ds = max_rel(ref, ps, n1), dr = max_rel(ref, pr, n1);
        if (g_rank == 0)
            printf("hgc %s, %d ranks, speeds %s: sample weighting vs 1-rank reference %.3g, "
                   "rank weighting %.3g\n", model, g_size, speeds, ds, dr);
        CHECK(ds <= 1e-5, "hgc sample weighting on %d ranks vs 1-rank reference: %g", g_size,
              ds);
        if (g_size > 1)
            CHECK(dr > 1e-4, "hgc rank weighting on %d unequal ranks is as the reference (%g)",
                  g_size, dr);
        check_same_everywhere(ps, n1, "hgc");
    }
    free(ref);
    free(ps);
    free(pr);
}

/* The shards of one epoch, as the allreduce strategy cuts them, cover every sample once. */
static void test_coverage(void) {
    const int64_t N = 203, B = 20; /* last step: 3 samples, fewer than 4 ranks */
    het_sampler s;
    het_sampler_init(&s, N, 5, 1);
    het_sampler_set_epoch(&s, 3);
    int64_t *mine = malloc(N * sizeof *mine), n_mine = 0;
    for (int64_t pos = 0; pos < N; pos += B) {
        int64_t Bs = N - pos < B ? N - pos : B, lo, len;
        het_partition_even(Bs, g_size, g_rank, &lo, &len);
        CHECK(len >= Bs / g_size && len <= Bs / g_size + 1, "uneven part %lld of %lld",
              (long long)len, (long long)Bs);
        for (int64_t i = 0; i < len; i++) mine[n_mine++] = s.perm[pos + lo + i];
    }
    int cnt = (int)n_mine, *counts = malloc(g_size * sizeof *counts), *displs = malloc(g_size * sizeof *displs);
    MPI_Allgather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int q = 0; q < g_size; q++) displs[q] = total, total += counts[q];
    CHECK(total == N, "shards hold %d samples, expected %lld", total, (long long)N);
    int64_t *all = malloc((size_t)(total > 0 ? total : 1) * sizeof *all);
    MPI_Allgatherv(mine, cnt, MPI_INT64_T, all, counts, displs, MPI_INT64_T, MPI_COMM_WORLD);
    int *seen = calloc(N, sizeof *seen), bad = 0;
    for (int i = 0; i < total; i++)
        if (all[i] < 0 || all[i] >= N || seen[all[i]]++) bad++;
    CHECK(bad == 0, "%d samples out of range or seen twice", bad);
    free(seen);
    free(all);
    free(counts);
    free(displs);
    free(mine);
    het_sampler_free(&s);
}

static const char *path(const char *name) {
    static char buf[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", g_dir, name);
    return buf[i];
}

static void test_resume_and_errors(void) {
    het_train_config c = base("mlp", 20, 203);
    het_train_config_set(&c, "momentum", "0.9");
    het_train_config_set(&c, "bucket-mb", "0.02");
    het_train_config a = c;
    het_train_config_set(&a, "epochs", "3");
    het_train_config_set(&a, "checkpoint", path("straight.ckpt"));
    size_t n1 = 0, n2 = 0;
    float *straight = train(&a, &n1);
    het_train_config b = c;
    het_train_config_set(&b, "epochs", "1");
    het_train_config_set(&b, "checkpoint", path("split.ckpt"));
    free(train(&b, &n2));
    het_train_config_set(&b, "epochs", "3");
    het_train_config_set(&b, "resume", NULL);
    float *resumed = train(&b, &n2);
    CHECK(straight && resumed && n1 == n2 &&
          memcmp(straight, resumed, n1 * sizeof(float)) == 0,
          "resume on %d ranks differs from the straight run", g_size);
    free(straight);
    free(resumed);

    /* a checkpoint only the highest rank cannot find: all ranks fail with its message */
    het_train_config e = c;
    het_train_config_set(&e, "resume", NULL);
    het_train_config_set(&e, "checkpoint", g_rank == g_size - 1 && g_size > 1 ?
                         path("missing.ckpt") : path("split.ckpt"));
    if (g_size == 1) het_train_config_set(&e, "checkpoint", path("missing.ckpt"));
    het_trainer *t;
    int st = het_trainer_create(&t, &e);
    CHECK(st == HET_OK, "%s", het_error_msg());
    if (!st) {
        st = het_trainer_run(t);
        CHECK(st != HET_OK, "rank %d: resume from a missing file succeeded", g_rank);
        CHECK(strstr(het_error_msg(), "missing.ckpt") != NULL, "rank %d: message '%s'", g_rank,
              het_error_msg());
        het_trainer_free(t);
    }
    /* a slowdown list of the wrong length fails on every rank alike */
    het_train_config w = c;
    het_train_config_set(&w, "slowdown", g_size == 1 ? "1,2" : "1");
    st = het_trainer_create(&t, &w);
    CHECK(st == HET_EINVAL && strstr(het_error_msg(), "one per rank"), "slowdown: %d %s", st,
          het_error_msg());
    if (!st) het_trainer_free(t);
}

int main(int argc, char **argv) {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &(int){0}); /* hetrain needs FUNNELED */
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (!het_test_world_size_ok(g_size)) MPI_Abort(MPI_COMM_WORLD, 1);
    het_log_set_rank(g_rank);
    het_blas_set_threads(1); /* as the trainer does: the reference must use the same kernels */
    if (g_rank == 0) {
        snprintf(g_dir, sizeof g_dir, "/tmp/het_dist_XXXXXX");
        if (!mkdtemp(g_dir)) g_dir[0] = '\0';
    }
    MPI_Bcast(g_dir, sizeof g_dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    test_coverage();
    test_invariance("mlp", 20, 203);   /* ragged last step: 3 samples */
    test_invariance("lenet5", 16, 50); /* 3 steps of 16 + one of 2 */
    test_hgc("mlp", 20, 203);
    if (g_dir[0]) test_resume_and_errors();
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0 && g_dir[0]) {
        const char *files[] = {"straight.ckpt", "split.ckpt"};
        for (int i = 0; i < 2; i++) remove(path(files[i]));
        rmdir(g_dir);
    }
    int failed = het_test_failures;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    char name[64];
    snprintf(name, sizeof name, "test_dist (rank %d of %d)", g_rank, g_size);
    int rc = het_test_finish(name);
    MPI_Finalize();
    return rc || failed;
}

/* The datasets held once per host (src/train/shared_data.c), run under mpirun with 1, 2 and 4
 * ranks by tests/test_shared_data_mpi.sh (and alone, as one rank, by CTest). All ranks of a
 * test run share one machine, so with P > 1 the host is the world:
 *  - P > 1: every rank's train and test sets are borrowed (the host's window), their bytes and
 *    descriptions equal to a private het_dataset_load_named of the same data; one rank: private
 *    (the old path);
 *  - a write into the shared images faults (the pages are read-only) and changes nothing;
 *  - trained parameters bitwise equal with the shared and the private copies (HET_SHARED_DATA=0
 *    set on every rank), for mlp and lenet5;
 *  - the epoch record counts the copies: 1 (the host's) shared, P private; peak RSS max > 0 and
 *    sum >= max, data_bytes that of one copy;
 *  - ranks of a host naming different data directories keep private copies and still train;
 *  - a loader failing on the host's leader (a bad magic in the IDX file): every rank fails
 *    with the leader's line, none hangs;
 *  - create and free several times (the window is freed with the trainer).
 * Synthetic data, a few steps: a second or two per rank count. */
#include <mpi.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hetrain.h"
#include "test.h"

/* Open MPI leaks at exit (its MCA plugins), which LeakSanitizer would report in the sanitizer
 * build; the library's own leaks are covered by the tests that do not start MPI. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }

static int g_rank, g_size;
static char g_dir[256];

static het_train_config base(const char *model) {
    het_train_config c = het_train_config_defaults();
    het_train_config_set(&c, "model", model);
    het_train_config_set(&c, "data", "synthetic");
    het_train_config_set(&c, "batch", "32");
    het_train_config_set(&c, "train-limit", "160");
    het_train_config_set(&c, "test-limit", "64");
    het_train_config_set(&c, "epochs", "1");
    het_train_config_set(&c, "seed", "5");
    het_train_config_set(&c, "progress", "off");
    het_train_config_set(&c, "quiet", NULL);
    het_log_set_level(HET_LOG_QUIET);
    return c;
}

static sigjmp_buf g_jump;
static void on_segv(int sig) {
    (void)sig;
    siglongjmp(g_jump, 1);
}

/* Whether writing byte i of p faults (the same value: nothing changes if it does not). */
static int write_faults(uint8_t *p, size_t i) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old);
    int faulted = 1;
    if (sigsetjmp(g_jump, 1) == 0) {
        volatile uint8_t *v = p;
        v[i] = v[i];
        faulted = 0;
    }
    sigaction(SIGSEGV, &old, NULL);
    return faulted;
}

static void same_as_private(const het_dataset *d, const het_dataset *ref, const char *what) {
    size_t f = het_shape_size(ref->shape);
    CHECK(d->n == ref->n && het_shape_size(d->shape) == f && d->n_classes == ref->n_classes &&
          strcmp(d->name, ref->name) == 0, "rank %d: %s: %lld samples of %zu in %d classes (%s), "
          "expected %lld of %zu in %d (%s)", g_rank, what, (long long)d->n,
          het_shape_size(d->shape), d->n_classes, d->name, (long long)ref->n, f, ref->n_classes,
          ref->name);
    if (d->n != ref->n || het_shape_size(d->shape) != f) return;
    CHECK(memcmp(d->images, ref->images, (size_t)d->n * f) == 0 &&
          memcmp(d->labels, ref->labels, (size_t)d->n) == 0 &&
          memcmp(d->mean, ref->mean, sizeof d->mean) == 0 &&
          memcmp(d->std, ref->std, sizeof d->std) == 0,
          "rank %d: %s: the shared bytes differ from a private load", g_rank, what);
}

/* Trains cfg one epoch; a copy of the parameters and the epoch record. */
static float *train(const het_train_config *cfg, size_t *n, het_epoch_stats *rec, int *borrowed) {
    het_trainer *t;
    int st = het_trainer_create(&t, cfg);
    CHECK(st == HET_OK, "rank %d: create: %s", g_rank, het_error_msg());
    if (st) return NULL;
    *borrowed = het_trainer_train_set(t)->borrowed + 2 * het_trainer_test_set(t)->borrowed;
    st = het_trainer_run(t);
    CHECK(st == HET_OK, "rank %d: run: %s", g_rank, het_error_msg());
    int nh = 0;
    const het_epoch_stats *h = het_trainer_history(t, &nh);
    if (nh > 0) *rec = h[nh - 1];
    het_model *m = het_trainer_model(t);
    *n = het_model_n_params(m);
    float *p = malloc(*n * sizeof *p);
    if (p) memcpy(p, het_model_params(m), *n * sizeof *p);
    het_trainer_free(t);
    return p;
}

static void test_shared(void) {
    het_dataset rtr, rte;
    CHECK(het_dataset_load_named(&rtr, &rte, "synthetic", NULL) == HET_OK, "%s", het_error_msg());
    het_train_config c = base("mlp");
    het_trainer *t;
    int st = het_trainer_create(&t, &c);
    CHECK(st == HET_OK, "rank %d: create: %s", g_rank, het_error_msg());
    if (!st) {
        const het_dataset *tr = het_trainer_train_set(t), *te = het_trainer_test_set(t);
        int want = g_size > 1;
        CHECK(tr->borrowed == want && te->borrowed == want, "rank %d of %d: borrowed %d / %d, "
              "expected %d", g_rank, g_size, tr->borrowed, te->borrowed, want);
        same_as_private(tr, &rtr, "train");
        same_as_private(te, &rte, "test");
        if (want) { /* a byte on a whole page inside the window: read-only */
            size_t page = (size_t)sysconf(_SC_PAGESIZE);
            size_t i = (page - (uintptr_t)tr->images % page) % page;
            uint8_t before = tr->images[i];
            CHECK(write_faults(tr->images, i), "rank %d: a write into the shared images at %zu "
                  "did not fault", g_rank, i);
            CHECK(tr->images[i] == before, "rank %d: the shared byte changed", g_rank);
        }
        het_trainer_free(t);
    }
    het_dataset_free(&rtr);
    het_dataset_free(&rte);
}

static void test_bitwise(const char *model) {
    het_train_config c = base(model);
    size_t n1 = 0, n2 = 0;
    het_epoch_stats e1, e2;
    memset(&e1, 0, sizeof e1);
    memset(&e2, 0, sizeof e2);
    int b1 = -1, b2 = -1;
    float *shared = train(&c, &n1, &e1, &b1);
    setenv("HET_SHARED_DATA", "0", 1);
    float *priv = train(&c, &n2, &e2, &b2);
    unsetenv("HET_SHARED_DATA");
    CHECK(b1 == (g_size > 1 ? 3 : 0) && b2 == 0, "rank %d: %s: borrowed %d shared, %d private",
          g_rank, model, b1, b2);
    CHECK(shared && priv && n1 == n2 && memcmp(shared, priv, n1 * sizeof(float)) == 0,
          "rank %d: %s: parameters differ between the shared and the private datasets", g_rank,
          model);
    CHECK(e1.test_loss == e2.test_loss, "rank %d: %s: test_loss %.9g shared, %.9g private",
          g_rank, model, e1.test_loss, e2.test_loss);
    CHECK(e1.data_copies == 1 && e2.data_copies == g_size, "rank %d: %s: %d copies shared, %d "
          "private, expected 1 and %d", g_rank, model, e1.data_copies, e2.data_copies, g_size);
    int64_t one = (2048 + 512) * (28 * 28 + 1); /* synthetic: train + test, images + labels */
    CHECK(e1.data_bytes == one && e2.data_bytes == one, "rank %d: data_bytes %lld / %lld, "
          "expected %lld", g_rank, (long long)e1.data_bytes, (long long)e2.data_bytes,
          (long long)one);
    CHECK(e1.peak_rss_max > 0 && e1.peak_rss_sum >= e1.peak_rss_max &&
          e1.peak_rss_sum <= (int64_t)g_size * e1.peak_rss_max, "rank %d: peak RSS max %lld, "
          "sum %lld over %d ranks", g_rank, (long long)e1.peak_rss_max,
          (long long)e1.peak_rss_sum, g_size);
    free(shared);
    free(priv);
}

/* Data directories that differ between the host's ranks (node-local paths): private copies. */
static void test_other_dirs(void) {
    het_train_config c = base("mlp");
    if (g_rank == 0) het_train_config_set(&c, "data-dir", "/tmp");
    size_t n = 0;
    het_epoch_stats e;
    memset(&e, 0, sizeof e);
    int b = -1;
    free(train(&c, &n, &e, &b));
    CHECK(b == 0 && e.data_copies == g_size, "rank %d: other data dirs: borrowed %d, %d copies, "
          "expected 0 and %d", g_rank, b, e.data_copies, g_size);
}

/* IDX files whose training images have a bad magic: the leader fails, every rank with it. */
static void test_bad_file(void) {
    static const char *const names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    char p[512];
    if (g_rank == 0)
        for (int i = 0; i < 4; i++) {
            snprintf(p, sizeof p, "%s/%s", g_dir, names[i]);
            FILE *f = fopen(p, "wb");
            if (f) {
                fwrite("\0\0\x08\x01\0\0\0\1\0\0\0\x1c\0\0\0\x1c", 1, 16, f);
                fclose(f);
            }
        }
    MPI_Barrier(MPI_COMM_WORLD);
    het_train_config c = base("mlp");
    het_train_config_set(&c, "data", "mnist");
    het_train_config_set(&c, "data-dir", g_dir);
    het_trainer *t;
    int st = het_trainer_create(&t, &c);
    CHECK(st == HET_EFORMAT && strstr(het_error_msg(), "train-images-idx3-ubyte: offset 0: bad "
          "magic 0x00000801, expected 0x00000803"), "rank %d: a bad file: status %d, '%s'",
          g_rank, st, het_error_msg());
    if (!st) het_trainer_free(t);
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0)
        for (int i = 0; i < 4; i++) {
            snprintf(p, sizeof p, "%s/%s", g_dir, names[i]);
            remove(p);
        }
}

int main(int argc, char **argv) {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &(int){0}); /* hetrain needs FUNNELED */
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (!het_test_world_size_ok(g_size)) MPI_Abort(MPI_COMM_WORLD, 1);
    het_log_set_rank(g_rank);
    unsetenv("HET_SHARED_DATA");
    if (g_rank == 0) {
        snprintf(g_dir, sizeof g_dir, "/tmp/het_shared_XXXXXX");
        if (!mkdtemp(g_dir)) g_dir[0] = '\0';
    }
    MPI_Bcast(g_dir, sizeof g_dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    test_shared();
    test_bitwise("mlp");
    test_bitwise("lenet5");
    test_other_dirs();
    if (g_dir[0]) test_bad_file();
    test_shared(); /* again after several trainers came and went */
    if (g_rank == 0 && g_dir[0]) rmdir(g_dir);
    int failed = het_test_failures;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    char name[64];
    snprintf(name, sizeof name, "test_shared_data (rank %d of %d)", g_rank, g_size);
    int rc = het_test_finish(name);
    MPI_Finalize();
    return rc || failed;
}

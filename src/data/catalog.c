/* The dataset catalog: datasets by name (fashion-mnist, mnist, cifar10, idx, synthetic), where
 * their files lie, what to install when they are missing, their shapes, class counts and
 * normalization (docs/DATA.md).
 *
 * DESIGN. The catalog sits above the format readers (idx.c, cifar.c, synthetic.c, on reader.c)
 * and the generic helpers (dataset.c: free, statistics, gather): it calls them, they never call
 * it. het_dataset_describe answers "what shape, how many classes" without loading the images,
 * for building a model before the data (the command line's info, the configuration check); for
 * idx it reads the image files' headers and the label files (one byte a sample, so that the
 * class count is the one loading gives), and het_dataset_load of idx starts with the same
 * answer, so the two cannot disagree. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "data/reader.h"

#define CAT_PATH_MAX 4096
#define FASHION_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define NAMES "fashion-mnist, mnist, cifar10, idx, synthetic"
enum { SYNTH_TRAIN = 2048, SYNTH_TEST = 512, SYNTH_MAX_VALUES = 1 << 20 };
#define SYNTH_MAX_TOTAL (1LL << 28) /* values (bytes) of both splits together: 256 MiB */

typedef unsigned long long ull;

static const char *const idx_base[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

/* The datasets read from four IDX files. */
typedef struct idx_set {
    const char *name;
    const char *dir;    /* default directory, or NULL */
    const char *nodir;  /* the message without a directory */
    const char *hint;   /* what to do about a missing file */
    float mean, std;    /* published normalization; idx: 0, 0 = the training split's */
} idx_set;

static const idx_set idx_sets[] = {
    {"fashion-mnist", FASHION_DEFAULT_DIR, NULL,
     "install dataset-fashion-mnist or pass --data-dir", 0.2860f, 0.3530f},
    {"mnist", NULL,
     "mnist has no default directory: pass --data-dir DIR holding train-images-idx3-ubyte.gz "
     "and the other MNIST IDX files",
     "pass --data-dir DIR holding the MNIST IDX files", 0.1307f, 0.3081f},
    {"idx", NULL,
     "idx has no default directory: pass --data-dir DIR holding train-images-idx3-ubyte, "
     "train-labels-idx1-ubyte, t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (each raw or "
     ".gz)",
     "--data idx reads DIR/train-images-idx3-ubyte, train-labels-idx1-ubyte, "
     "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each NAME.gz or NAME", 0.0f, 0.0f},
};

static const idx_set *find_idx_set(const char *name) {
    for (size_t i = 0; i < sizeof idx_sets / sizeof idx_sets[0]; i++)
        if (strcmp(idx_sets[i].name, name) == 0) return &idx_sets[i];
    return NULL;
}

/* dir/name into buf; HET_EINVAL if it does not fit. */
static int join(char *buf, const char *dir, const char *name) {
    int k = snprintf(buf, CAT_PATH_MAX, "%s/%s", dir, name);
    if (k < 0 || k >= CAT_PATH_MAX)
        return het_error_set(HET_EINVAL, "%s/%s: path too long", dir, name);
    return HET_OK;
}

/* Finds dir/base.gz or else dir/base (an unpacked copy); if neither is readable, names the .gz
 * path with the reason and `hint`. */
static int find_idx(char *buf, const char *dir, const char *base, const char *hint) {
    char name[128];
    snprintf(name, sizeof name, "%s.gz", base);
    int st = join(buf, dir, name);
    if (st || access(buf, R_OK) == 0) return st;
    int err = errno;
    if ((st = join(buf, dir, base))) return st;
    if (access(buf, R_OK) == 0) return HET_OK;
    join(buf, dir, name);
    return het_error_set(HET_EIO, "%s: %s (%s)", buf, strerror(err), hint);
}

static int need(const char *path, const char *hint) {
    if (access(path, R_OK) == 0) return HET_OK;
    return het_error_set(HET_EIO, "%s: %s (%s)", path, strerror(errno), hint);
}

/* The four files of an IDX set: train images, train labels, test images, test labels. */
static int idx_paths(char p[4][CAT_PATH_MAX], const idx_set *set, const char *dir) {
    if (!dir) dir = set->dir;
    if (!dir) return het_error_set(HET_EINVAL, "%s", set->nodir);
    for (int i = 0; i < 4; i++) {
        int st = find_idx(p[i], dir, idx_base[i], set->hint);
        if (st) return st;
    }
    return HET_OK;
}

/* The test images' size against the expected one (the training images', or 28 x 28). */
static int same_size(const char *path, het_shape got, het_shape want, const char *as_in) {
    if (got.h == want.h && got.w == want.w) return HET_OK;
    return het_error_set(HET_EFORMAT, "%s: offset 8: images of %d x %d, expected %d x %d %s",
                         path, got.h, got.w, want.h, want.w, as_in);
}

/* idx: shape and class count from the files' headers and labels. */
static int idx_describe(char p[4][CAT_PATH_MAX], int want_classes, het_shape *shape,
                        int *n_classes) {
    het_shape s[2];
    int64_t n[4];
    int max[2], st;
    for (int k = 0; k < 2; k++) {
        if ((st = het_idx_image_shape(p[2 * k], &n[2 * k], &s[k]))) return st;
        /* the label count against the images' from its header, before the labels */
        if ((st = het_idx_labels(p[2 * k + 1], want_classes ? want_classes : 256, n[2 * k],
                                 p[2 * k], &n[2 * k + 1], &max[k])))
            return st;
    }
    char as_in[CAT_PATH_MAX + 8];
    snprintf(as_in, sizeof as_in, "as in %s", p[0]);
    if ((st = same_size(p[2], s[1], s[0], as_in))) return st;
    int classes = want_classes ? want_classes : (max[0] > max[1] ? max[0] : max[1]) + 1;
    if (classes < 2)
        return het_error_set(HET_EFORMAT, "%s and %s: every label is 0, expected labels of at "
                             "least 2 classes (0 .. K-1)", p[1], p[3]);
    *shape = s[0];
    *n_classes = classes;
    return HET_OK;
}

static int load_idx_set(het_dataset *train, het_dataset *test, const idx_set *set,
                        const char *dir, int want_classes) {
    char p[4][CAT_PATH_MAX];
    int st = idx_paths(p, set, dir);
    if (st) return st;
    het_shape shape = {1, 28, 28};
    int classes = 10;
    const int generic = set->mean == 0.0f;
    if (generic && (st = idx_describe(p, want_classes, &shape, &classes))) return st;
    if ((st = het_dataset_load_idx(train, p[0], p[1], classes))) return st;
    if ((st = het_dataset_load_idx(test, p[2], p[3], classes))) return st;
    /* the named sets are 28 x 28 (models and het_dataset_describe are sized so), and the test
     * images must have the training images' size: evaluation gathers them into buffers sized
     * from the training set (idx: checked by idx_describe; the files may have changed since) */
    char as_in[CAT_PATH_MAX + 40];
    snprintf(as_in, sizeof as_in, "(%s)", set->name);
    if ((st = same_size(p[0], train->shape, shape, as_in))) return st;
    snprintf(as_in, sizeof as_in, "(%s) as in %s", set->name, p[0]);
    if ((st = same_size(p[2], test->shape, shape, as_in))) return st;
    het_dataset *both[2] = {train, test};
    for (int k = 0; k < 2; k++) {
        snprintf(both[k]->name, sizeof both[k]->name, "%s", set->name);
        for (int c = 0; c < 3; c++) {
            /* idx: both splits normalized with the training split's statistics */
            both[k]->mean[c] = generic ? train->mean[c] : set->mean;
            both[k]->std[c] = generic ? train->std[c] : set->std;
        }
    }
    return HET_OK;
}

static int load_cifar(het_dataset *train, het_dataset *test, const char *dir) {
    static const char hint[] = "download the CIFAR-10 binary version and pass --data-dir";
    static const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, std[3] = {0.2470f, 0.2435f,
                                                                          0.2616f};
    if (!dir)
        return het_error_set(HET_EINVAL, "cifar10 has no default directory: pass --data-dir DIR "
                             "holding data_batch_1.bin .. data_batch_5.bin and test_batch.bin");
    char root[CAT_PATH_MAX], p[6][CAT_PATH_MAX];
    int st = join(p[0], dir, "data_batch_1.bin");
    if (st) return st;
    /* accept the directory the archive unpacks into, or its parent */
    if (access(p[0], R_OK) != 0 && (st = join(root, dir, "cifar-10-batches-bin")) == HET_OK &&
        (st = join(p[0], root, "data_batch_1.bin")) == HET_OK && access(p[0], R_OK) == 0)
        dir = root;
    if (st) return st;
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "data_batch_%d.bin", i + 1);
        if ((st = join(p[i], dir, name)) || (st = need(p[i], hint))) return st;
    }
    if ((st = join(p[5], dir, "test_batch.bin")) || (st = need(p[5], hint))) return st;
    const char *train_paths[5] = {p[0], p[1], p[2], p[3], p[4]};
    const char *test_paths[1] = {p[5]};
    if ((st = het_dataset_load_cifar(train, train_paths, 5))) return st;
    if ((st = het_dataset_load_cifar(test, test_paths, 1))) return st;
    memcpy(train->mean, mean, sizeof mean);
    memcpy(train->std, std, sizeof std);
    memcpy(test->mean, mean, sizeof mean);
    memcpy(test->std, std, sizeof std);
    return HET_OK;
}

/* The spec's options against its dataset: the shape and class count of synthetic (defaults
 * filled in), --classes of idx; a name the catalog does not know. */
static int check_spec(const het_dataset_spec *s, het_shape *shape, int *classes) {
    if (!s || !s->name)
        return het_error_set(HET_EINVAL, "no dataset name, expected one of: " NAMES);
    const int synth = strcmp(s->name, "synthetic") == 0, idx = strcmp(s->name, "idx") == 0;
    if (!synth && !find_idx_set(s->name) && strcmp(s->name, "cifar10") != 0)
        return het_error_set(HET_EINVAL, "unknown dataset '%s', expected one of: " NAMES,
                             s->name);
    const het_shape sh = s->shape;
    const int given = sh.c || sh.h || sh.w;
    if (given && !synth)
        return het_error_set(HET_EINVAL, "synthetic-shape: applies to --data synthetic, not "
                             "%s (its files give the shape)", s->name);
    if (s->n_classes && !synth && !idx)
        return het_error_set(HET_EINVAL, "classes: applies to --data synthetic and idx, not %s "
                             "(it has its own classes)", s->name);
    if (s->n_classes && (s->n_classes < 2 || s->n_classes > 256))
        return het_error_set(HET_EINVAL, "classes: %d, expected 2..256 (labels are bytes)",
                             s->n_classes);
    *shape = given ? sh : (het_shape){1, 28, 28};
    *classes = s->n_classes ? s->n_classes : 10;
    if (given && (sh.c < 1 || sh.c > 3 || sh.h < 1 || sh.w < 1))
        return het_error_set(HET_EINVAL, "synthetic-shape: %dx%dx%d, expected 1..3 channels "
                             "(the per-channel normalization has 3) and height and width >= 1", sh.c, sh.h, sh.w);
    if (s->n_train && !synth)
        return het_error_set(HET_EINVAL, "synthetic-samples: applies to --data synthetic, not "
                             "%s (its files give the samples; --train-limit takes fewer)", s->name);
    if (s->n_train < 0 || s->n_train > (1 << 24))
        return het_error_set(HET_EINVAL, "synthetic-samples: %lld, expected 1..%d",
                             (long long)s->n_train, 1 << 24);
    if (given && het_shape_size(sh) > SYNTH_MAX_VALUES)
        return het_error_set(HET_EINVAL, "synthetic-shape: %dx%dx%d is %zu values a sample, "
                             "expected at most %d (the %d samples are made in memory)", sh.c,
                             sh.h, sh.w, het_shape_size(sh), SYNTH_MAX_VALUES,
                             SYNTH_TRAIN + SYNTH_TEST);
    const int64_t n = (s->n_train ? s->n_train : SYNTH_TRAIN) + SYNTH_TEST;
    if (synth && (int64_t)het_shape_size(*shape) * n > SYNTH_MAX_TOTAL)
        return het_error_set(HET_EINVAL, "synthetic-samples: %lld samples of %dx%dx%d (and the "
                             "%d test samples) are %lld values, expected at most %lld (they are "
                             "made in memory)", (long long)(n - SYNTH_TEST), shape->c, shape->h,
                             shape->w, SYNTH_TEST, (long long)het_shape_size(*shape) * n,
                             SYNTH_MAX_TOTAL);
    return HET_OK;
}

int het_dataset_describe(const het_dataset_spec *spec, het_shape *shape, int *n_classes) {
    het_shape s;
    int k, st = check_spec(spec, &s, &k);
    if (st) return st;
    const idx_set *set = find_idx_set(spec->name);
    if (set && set->mean == 0.0f) {
        char p[4][CAT_PATH_MAX];
        if ((st = idx_paths(p, set, spec->dir))) return st;
        return idx_describe(p, spec->n_classes, shape, n_classes);
    }
    if (strcmp(spec->name, "cifar10") == 0) s = (het_shape){3, 32, 32};
    *shape = s;
    *n_classes = k;
    return HET_OK;
}

static int load(het_dataset *train, het_dataset *test, const het_dataset_spec *spec) {
    het_shape shape;
    int classes, st = check_spec(spec, &shape, &classes);
    if (st) return st;
    const idx_set *set = find_idx_set(spec->name);
    if (set) return load_idx_set(train, test, set, spec->dir, spec->n_classes);
    if (strcmp(spec->name, "cifar10") == 0) return load_cifar(train, test, spec->dir);
    /* synthetic: one task (the class prototypes of shape and classes), two seeds */
    if ((st = het_dataset_synthetic(train, spec->n_train ? spec->n_train : SYNTH_TRAIN, shape,
                                    classes, 1)))
        return st;
    if ((st = het_dataset_synthetic(test, SYNTH_TEST, shape, classes, 2))) return st;
    /* normalize both splits with the training statistics */
    memcpy(test->mean, train->mean, sizeof test->mean);
    memcpy(test->std, train->std, sizeof test->std);
    return HET_OK;
}

int het_dataset_load(het_dataset *train, het_dataset *test, const het_dataset_spec *spec) {
    if (!train || !test) return het_error_set(HET_EINVAL, "het_dataset_load: NULL dataset");
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    int st = load(train, test, spec);
    if (st) {
        het_dataset_free(train);
        het_dataset_free(test);
    }
    return st;
}

int het_dataset_load_named(het_dataset *train, het_dataset *test, const char *name,
                           const char *dir) {
    het_dataset_spec spec = {name, dir, {0, 0, 0}, 0, 0};
    return het_dataset_load(train, test, &spec);
}

int het_dataset_files(const char *name, const char *dir, char (*paths)[HET_PATH_LEN], int cap) {
    static const char *const cifar[6] = {"data_batch_1.bin", "data_batch_2.bin",
                                         "data_batch_3.bin", "data_batch_4.bin",
                                         "data_batch_5.bin", "test_batch.bin"};
    int n = 0;
    if (!name) return 0;
    const idx_set *set = find_idx_set(name);
    if (set && (dir || set->dir)) {
        if (!dir) dir = set->dir;
        for (int i = 0; i < 8; i++, n++)
            if (n < cap) snprintf(paths[n], HET_PATH_LEN, "%s/%s%s", dir, idx_base[i / 2],
                                  i % 2 ? "" : ".gz");
    } else if (strcmp(name, "cifar10") == 0 && dir) {
        for (int i = 0; i < 12; i++, n++)
            if (n < cap) snprintf(paths[n], HET_PATH_LEN, "%s/%s%s", dir,
                                  i < 6 ? "" : "cifar-10-batches-bin/", cifar[i % 6]);
    }
    return n;
}

/* Datasets: named loading (with defaults and install hints), statistics, batch gathering. */
#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/reader.h"

#define HET_PATH_MAX 4096
#define FASHION_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"

void het_dataset_free(het_dataset *d) {
    if (!d) return;
    if (!d->borrowed) {
        free(d->images);
        free(d->labels);
    }
    memset(d, 0, sizeof *d);
}

void het_dataset_compute_stats(het_dataset *d) {
    size_t hw = (size_t)d->shape.h * (size_t)d->shape.w;
    for (int c = 0; c < 3; c++) {
        d->mean[c] = 0.5f;
        d->std[c] = 0.5f;
    }
    for (int c = 0; c < d->shape.c && c < 3; c++) {
        /* exact integer sums: the result does not depend on any summation order */
        uint64_t s = 0, ss = 0;
        for (int64_t i = 0; i < d->n; i++) {
            const uint8_t *p = d->images + (size_t)i * (size_t)d->shape.c * hw + (size_t)c * hw;
            for (size_t k = 0; k < hw; k++) {
                s += p[k];
                ss += (uint64_t)p[k] * p[k];
            }
        }
        double cnt = (double)d->n * (double)hw;
        double mean = (double)s / cnt / 255.0;
        double var = (double)ss / cnt / (255.0 * 255.0) - mean * mean;
        d->mean[c] = (float)mean;
        d->std[c] = var > 1e-12 ? (float)sqrt(var) : 1.0f;
    }
}

void het_dataset_gather(const het_dataset *d, const int64_t *idx, int count, float *x,
                        uint8_t *y) {
    int C = d->shape.c;
    size_t hw = (size_t)d->shape.h * (size_t)d->shape.w, f = (size_t)C * hw;
    float lut[3][256];
    for (int c = 0; c < C && c < 3; c++)
        for (int b = 0; b < 256; b++)
            lut[c][b] = (float)(((double)b / 255.0 - (double)d->mean[c]) / (double)d->std[c]);
    for (int i = 0; i < count; i++) {
        int64_t s = idx[i];
        if (y) y[i] = d->labels[s];
        if (!x) continue;
        const uint8_t *src = d->images + (size_t)s * f;
        float *dst = x + (size_t)i * f;
        for (int c = 0; c < C; c++) {
            const float *t = lut[c < 3 ? c : 2];
            const uint8_t *sp = src + (size_t)c * hw;
            float *dp = dst + (size_t)c * hw;
            for (size_t k = 0; k < hw; k++) dp[k] = t[sp[k]];
        }
    }
}

/* dir/name into buf; HET_EINVAL if it does not fit. */
static int join(char *buf, const char *dir, const char *name) {
    int k = snprintf(buf, HET_PATH_MAX, "%s/%s", dir, name);
    if (k < 0 || k >= HET_PATH_MAX)
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

static int load_idx_named(het_dataset *train, het_dataset *test, const char *name,
                          const char *dir, const char *hint, float mean, float std) {
    static const char *const base[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    char p[4][HET_PATH_MAX];
    for (int i = 0; i < 4; i++) {
        int st = find_idx(p[i], dir, base[i], hint);
        if (st) return st;
    }
    int st = het_dataset_load_idx(train, p[0], p[1], 10);
    if (st) return st;
    if ((st = het_dataset_load_idx(test, p[2], p[3], 10))) return st;
    /* the named sets are 28 x 28 (models and het_train_data_shape are sized so), and the test
     * images must have the training images' size: evaluation gathers them into buffers sized
     * from the training set */
    het_dataset *both[2] = {train, test};
    for (int k = 0; k < 2; k++)
        if (both[k]->shape.h != 28 || both[k]->shape.w != 28)
            return het_error_set(HET_EFORMAT, "%s: offset 8: images of %d x %d, expected 28 x 28 "
                                 "(%s)%s%s", p[2 * k], both[k]->shape.h, both[k]->shape.w, name,
                                 k ? " as in " : "", k ? p[0] : "");
    for (int k = 0; k < 2; k++) {
        snprintf(both[k]->name, sizeof both[k]->name, "%s", name);
        for (int c = 0; c < 3; c++) {
            both[k]->mean[c] = mean;
            both[k]->std[c] = std;
        }
    }
    return HET_OK;
}

static int load_cifar_named(het_dataset *train, het_dataset *test, const char *dir) {
    static const char hint[] = "download the CIFAR-10 binary version and pass --data-dir";
    static const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, std[3] = {0.2470f, 0.2435f,
                                                                          0.2616f};
    char root[HET_PATH_MAX], p[6][HET_PATH_MAX];
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

static int load_named(het_dataset *train, het_dataset *test, const char *name,
                      const char *dir) {
    if (strcmp(name, "fashion-mnist") == 0)
        return load_idx_named(train, test, name, dir ? dir : FASHION_DEFAULT_DIR,
                              "install dataset-fashion-mnist or pass --data-dir", 0.2860f,
                              0.3530f);
    if (strcmp(name, "mnist") == 0) {
        if (!dir)
            return het_error_set(HET_EINVAL, "mnist has no default directory: pass --data-dir "
                                 "DIR holding train-images-idx3-ubyte.gz and the other MNIST "
                                 "IDX files");
        return load_idx_named(train, test, name, dir,
                              "pass --data-dir DIR holding the MNIST IDX files", 0.1307f,
                              0.3081f);
    }
    if (strcmp(name, "cifar10") == 0) {
        if (!dir)
            return het_error_set(HET_EINVAL, "cifar10 has no default directory: pass "
                                 "--data-dir DIR holding data_batch_1.bin .. data_batch_5.bin "
                                 "and test_batch.bin");
        return load_cifar_named(train, test, dir);
    }
    if (strcmp(name, "synthetic") == 0) {
        het_shape s = {1, 28, 28};
        int st = het_dataset_synthetic(train, 2048, s, 10, 1);
        if (st) return st;
        if ((st = het_dataset_synthetic(test, 512, s, 10, 2))) return st;
        /* normalize both splits with the training statistics */
        memcpy(test->mean, train->mean, sizeof test->mean);
        memcpy(test->std, train->std, sizeof test->std);
        return HET_OK;
    }
    return het_error_set(HET_EINVAL, "unknown dataset '%s', expected one of: fashion-mnist, "
                         "mnist, cifar10, synthetic", name);
}

int het_dataset_files(const char *name, const char *dir, char (*paths)[HET_PATH_LEN], int cap) {
    static const char *const idx[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                       "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    static const char *const cifar[6] = {"data_batch_1.bin", "data_batch_2.bin",
                                         "data_batch_3.bin", "data_batch_4.bin",
                                         "data_batch_5.bin", "test_batch.bin"};
    int n = 0;
    if (!name) return 0;
    if (strcmp(name, "fashion-mnist") == 0 || (strcmp(name, "mnist") == 0 && dir)) {
        if (!dir) dir = FASHION_DEFAULT_DIR;
        for (int i = 0; i < 8; i++, n++)
            if (n < cap) snprintf(paths[n], HET_PATH_LEN, "%s/%s%s", dir, idx[i / 2],
                                  i % 2 ? "" : ".gz");
    } else if (strcmp(name, "cifar10") == 0 && dir) {
        for (int i = 0; i < 12; i++, n++)
            if (n < cap) snprintf(paths[n], HET_PATH_LEN, "%s/%s%s", dir,
                                  i < 6 ? "" : "cifar-10-batches-bin/", cifar[i % 6]);
    }
    return n;
}

int het_dataset_load_named(het_dataset *train, het_dataset *test, const char *name,
                           const char *dir) {
    if (!train || !test) return het_error_set(HET_EINVAL, "het_dataset_load_named: NULL dataset");
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (!name)
        return het_error_set(HET_EINVAL, "no dataset name, expected one of: fashion-mnist, "
                             "mnist, cifar10, synthetic");
    int st = load_named(train, test, name, dir);
    if (st) {
        het_dataset_free(train);
        het_dataset_free(test);
    }
    return st;
}

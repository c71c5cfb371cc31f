/* Data layer on valid input: the real Fashion-MNIST (gzip and gunzipped), concatenated gzip
 * members, CIFAR-10 layout, the synthetic generator, gather normalization, named loading; the
 * catalog's idx (any IDX directory) and synthetic shapes, and the configuration keys that pick
 * them (data, data-dir, synthetic-shape, classes). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "hetrain/data.h"
#include "hetrain/train.h"
#include "test.h"

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

static char tmpdir[] = "/tmp/het_test_data_XXXXXX";

static void path_in(char *buf, size_t n, const char *dir, const char *name) {
    snprintf(buf, n, "%s/%s", dir, name);
}

/* gunzips src into dst with zlib; returns the number of bytes written or -1. */
static long gunzip_file(const char *src, const char *dst) {
    gzFile in = gzopen(src, "rb");
    FILE *out = fopen(dst, "wb");
    long total = -1;
    if (in && out) {
        static unsigned char buf[1 << 16];
        int k;
        total = 0;
        while ((k = gzread(in, buf, sizeof buf)) > 0) {
            if (fwrite(buf, 1, (size_t)k, out) != (size_t)k) { total = -1; break; }
            total += k;
        }
        if (k < 0) total = -1;
    }
    if (in) gzclose(in);
    if (out && fclose(out) != 0) total = -1;
    return total;
}

static int write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static void test_fashion_mnist(void) {
    het_dataset tr, te;
    double t0 = het_now();
    int st = het_dataset_load_named(&tr, &te, "fashion-mnist", NULL);
    double t_gz = het_now() - t0;
    CHECK(st == HET_OK, "load fashion-mnist from %s: %s", FMNIST_DIR, het_error_msg());
    if (st) return;
    printf("fashion-mnist (gzip) loaded in %.3f s\n", t_gz);
    CHECK(strcmp(tr.name, "fashion-mnist") == 0, "name %s", tr.name);
    CHECK(tr.n == 60000 && te.n == 10000, "n %lld / %lld", (long long)tr.n, (long long)te.n);
    CHECK(tr.shape.c == 1 && tr.shape.h == 28 && tr.shape.w == 28, "shape %dx%dx%d",
          tr.shape.c, tr.shape.h, tr.shape.w);
    CHECK(te.shape.c == 1 && te.shape.h == 28 && te.shape.w == 28, "test shape");
    CHECK(tr.n_classes == 10 && te.n_classes == 10, "classes %d", tr.n_classes);
    CHECK_CLOSE(tr.mean[0], 0.2860, 1e-6, "mean");
    CHECK_CLOSE(tr.std[0], 0.3530, 1e-6, "std");
    int count[10] = {0}, bad = 0;
    for (int64_t i = 0; i < tr.n; i++) {
        if (tr.labels[i] < 10) count[tr.labels[i]]++;
        else bad++;
    }
    CHECK(bad == 0, "%d labels out of range", bad);
    for (int k = 0; k < 10; k++) CHECK(count[k] == 6000, "class %d has %d samples", k, count[k]);

    /* first training label against the file itself (byte 8 of the uncompressed labels) */
    gzFile g = gzopen(FMNIST_DIR "/train-labels-idx1-ubyte.gz", "rb");
    unsigned char head[9] = {0};
    CHECK(g && gzread(g, head, 9) == 9, "read labels head");
    if (g) gzclose(g);
    CHECK(tr.labels[0] == head[8] && head[8] == 9, "first label %u, file %u, expected 9",
          tr.labels[0], head[8]);

    /* the same files gunzipped into a temp dir read identically (raw path of the reader) */
    static const char *const names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    char src[512], dst[512];
    for (int i = 0; i < 4; i++) {
        snprintf(src, sizeof src, "%s/%s.gz", FMNIST_DIR, names[i]);
        path_in(dst, sizeof dst, tmpdir, names[i]);
        CHECK(gunzip_file(src, dst) > 0, "gunzip %s", src);
    }
    het_dataset rtr, rte;
    t0 = het_now();
    st = het_dataset_load_named(&rtr, &rte, "fashion-mnist", tmpdir);
    printf("fashion-mnist (raw) loaded in %.3f s\n", het_now() - t0);
    CHECK(st == HET_OK, "raw load: %s", het_error_msg());
    if (st == HET_OK) {
        CHECK(rtr.n == tr.n && rte.n == te.n, "raw n");
        CHECK(memcmp(rtr.images, tr.images, (size_t)tr.n * 784) == 0, "raw train images");
        CHECK(memcmp(rtr.labels, tr.labels, (size_t)tr.n) == 0, "raw train labels");
        CHECK(memcmp(rte.images, te.images, (size_t)te.n * 784) == 0, "raw test images");
        CHECK(memcmp(rte.labels, te.labels, (size_t)te.n) == 0, "raw test labels");
    }
    het_dataset_free(&rtr);
    het_dataset_free(&rte);

    /* test images of another size than the training images (both files valid IDX): refused
     * with the file, the offset and the expected size, not a buffer overrun in evaluation */
    {
        unsigned char img[16 + 4 * 56 * 56] = {0, 0, 8, 3, 0, 0, 0, 4, 0, 0, 0, 56, 0, 0, 0, 56};
        unsigned char lab[8 + 4] = {0, 0, 8, 1, 0, 0, 0, 4, 1, 2, 3, 4};
        char pi[512], pl[512];
        path_in(pi, sizeof pi, tmpdir, names[2]);
        path_in(pl, sizeof pl, tmpdir, names[3]);
        FILE *fi = fopen(pi, "wb"), *fl = fopen(pl, "wb");
        CHECK(fi && fl && fwrite(img, 1, sizeof img, fi) == sizeof img &&
              fwrite(lab, 1, sizeof lab, fl) == sizeof lab, "write the 56x56 test set");
        if (fi) fclose(fi);
        if (fl) fclose(fl);
        het_dataset a, b;
        st = het_dataset_load_named(&a, &b, "fashion-mnist", tmpdir);
        CHECK(st == HET_EFORMAT && strstr(het_error_msg(), "t10k-images-idx3-ubyte: offset 8: "
                                          "images of 56 x 56, expected 28 x 28"),
              "56x56 test images: %d %s", st, het_error_msg());
        if (st == HET_OK) {
            het_dataset_free(&a);
            het_dataset_free(&b);
        }
    }

    /* load_idx computes statistics from the data: they match the published constants */
    het_dataset d;
    char pi[512], pl[512];
    path_in(pi, sizeof pi, tmpdir, names[0]);
    path_in(pl, sizeof pl, tmpdir, names[1]);
    st = het_dataset_load_idx(&d, pi, pl, 10);
    CHECK(st == HET_OK, "load_idx raw: %s", het_error_msg());
    if (st == HET_OK) {
        CHECK(fabs(d.mean[0] - 0.2860) < 5e-4, "computed mean %.5f", d.mean[0]);
        CHECK(fabs(d.std[0] - 0.3530) < 5e-4, "computed std %.5f", d.std[0]);
    }
    het_dataset_free(&d);
    for (int i = 0; i < 4; i++) {
        path_in(dst, sizeof dst, tmpdir, names[i]);
        unlink(dst);
    }
    het_dataset_free(&tr);
    het_dataset_free(&te);
}

/* A .gz made of two gzip members (gzip -c a b) reads as one stream. */
static void test_gzip_members(void) {
    unsigned char img[16 + 3 * 4], lab[8 + 3] = {0, 0, 8, 1, 0, 0, 0, 3, 2, 0, 7};
    memset(img, 0, sizeof img);
    img[2] = 8; img[3] = 3; img[7] = 3; img[11] = 2; img[15] = 2;
    for (int i = 0; i < 12; i++) img[16 + i] = (unsigned char)(i * 20);
    char pi[512], pl[512];
    path_in(pi, sizeof pi, tmpdir, "multi-images.gz");
    path_in(pl, sizeof pl, tmpdir, "multi-labels");
    gzFile g = gzopen(pi, "wb");
    CHECK(g != NULL, "gzopen");
    if (!g) return;
    gzwrite(g, img, 10);
    gzclose(g);
    g = gzopen(pi, "ab"); /* appends a second member */
    gzwrite(g, img + 10, sizeof img - 10);
    gzclose(g);
    CHECK(write_bytes(pl, lab, sizeof lab) == 0, "write labels");
    het_dataset d;
    int st = het_dataset_load_idx(&d, pi, pl, 10);
    CHECK(st == HET_OK, "two gzip members: %s", het_error_msg());
    if (st == HET_OK) {
        CHECK(d.n == 3 && d.shape.h == 2 && d.shape.w == 2, "n %lld", (long long)d.n);
        CHECK(memcmp(d.images, img + 16, 12) == 0, "pixels");
        CHECK(d.labels[0] == 2 && d.labels[2] == 7, "labels");
    }
    het_dataset_free(&d);
    unlink(pi);
    unlink(pl);
}

/* cifar10 by name: 5 train batches and a test batch, found in dir/cifar-10-batches-bin. */
static void test_cifar_named(void) {
    char sub[512], p[600];
    path_in(sub, sizeof sub, tmpdir, "cifar-10-batches-bin");
    CHECK(mkdir(sub, 0700) == 0, "mkdir %s", sub);
    static unsigned char rec[2 * 3073];
    for (int f = 0; f < 6; f++) {
        for (int r = 0; r < 2; r++) {
            rec[r * 3073] = (unsigned char)((f + r) % 10);
            for (int k = 0; k < 3072; k++)
                rec[r * 3073 + 1 + k] = (unsigned char)(k / 1024 * 100 + f);
        }
        char name[32];
        if (f < 5) snprintf(name, sizeof name, "data_batch_%d.bin", f + 1);
        else snprintf(name, sizeof name, "test_batch.bin");
        path_in(p, sizeof p, sub, name);
        CHECK(write_bytes(p, rec, sizeof rec) == 0, "write %s", p);
    }
    het_dataset tr, te;
    int st = het_dataset_load_named(&tr, &te, "cifar10", tmpdir);
    CHECK(st == HET_OK, "cifar10: %s", het_error_msg());
    if (st == HET_OK) {
        CHECK(tr.n == 10 && te.n == 2, "n %lld / %lld", (long long)tr.n, (long long)te.n);
        CHECK(tr.shape.c == 3 && tr.shape.h == 32 && tr.shape.w == 32, "shape");
        CHECK(tr.labels[2] == 1 && tr.labels[3] == 2 && te.labels[1] == 6, "labels");
        CHECK(tr.images[3 * 3072 + 2048] == 201, "pixel of record 3, blue plane: %u",
              tr.images[3 * 3072 + 2048]);
        CHECK_CLOSE(tr.mean[2], 0.4465, 1e-6, "cifar mean");
        CHECK_CLOSE(te.std[1], 0.2435, 1e-6, "cifar std");
    }
    het_dataset_free(&tr);
    het_dataset_free(&te);
    for (int f = 0; f < 6; f++) {
        char name[32];
        if (f < 5) snprintf(name, sizeof name, "data_batch_%d.bin", f + 1);
        else snprintf(name, sizeof name, "test_batch.bin");
        path_in(p, sizeof p, sub, name);
        unlink(p);
    }
    rmdir(sub);
}

static void test_synthetic(void) {
    het_shape s = {1, 28, 28};
    het_dataset a, b, c;
    CHECK(het_dataset_synthetic(&a, 300, s, 10, 7) == HET_OK, "synthetic a");
    CHECK(het_dataset_synthetic(&b, 300, s, 10, 7) == HET_OK, "synthetic b");
    CHECK(het_dataset_synthetic(&c, 300, s, 10, 8) == HET_OK, "synthetic c");
    CHECK(memcmp(a.images, b.images, 300 * 784) == 0 && memcmp(a.labels, b.labels, 300) == 0,
          "same seed, same data");
    CHECK(memcmp(a.images, c.images, 300 * 784) != 0, "different seed, different data");
    CHECK(a.mean[0] == b.mean[0] && a.std[0] == b.std[0], "stats deterministic");
    het_dataset_free(&a);
    het_dataset_free(&b);
    het_dataset_free(&c);

    /* learnable: a nearest-class-mean classifier fit on train scores well on test */
    het_dataset tr, te;
    int st = het_dataset_load_named(&tr, &te, "synthetic", NULL);
    CHECK(st == HET_OK, "synthetic named: %s", het_error_msg());
    if (st) return;
    CHECK(tr.n == 2048 && te.n == 512 && tr.shape.h == 28 && tr.n_classes == 10, "sizes");
    CHECK(te.mean[0] == tr.mean[0] && te.std[0] == tr.std[0], "test uses train statistics");
    CHECK(tr.mean[0] > 0.3f && tr.mean[0] < 0.7f && tr.std[0] > 0.1f, "stats %.3f %.3f",
          tr.mean[0], tr.std[0]);
    static double centroid[10][784];
    int cnt[10] = {0};
    for (int64_t i = 0; i < tr.n; i++) {
        cnt[tr.labels[i]]++;
        for (int k = 0; k < 784; k++) centroid[tr.labels[i]][k] += tr.images[i * 784 + k];
    }
    for (int c2 = 0; c2 < 10; c2++) {
        CHECK(cnt[c2] > 120, "class %d has %d samples", c2, cnt[c2]);
        for (int k = 0; k < 784; k++) centroid[c2][k] /= cnt[c2] ? cnt[c2] : 1;
    }
    int correct = 0;
    for (int64_t i = 0; i < te.n; i++) {
        int best = 0;
        double bd = 1e300;
        for (int c2 = 0; c2 < 10; c2++) {
            double dd = 0;
            for (int k = 0; k < 784; k++) {
                double e = te.images[i * 784 + k] - centroid[c2][k];
                dd += e * e;
            }
            if (dd < bd) { bd = dd; best = c2; }
        }
        correct += best == te.labels[i];
    }
    printf("synthetic: nearest-centroid test accuracy %.4f\n", (double)correct / (double)te.n);
    CHECK(correct > 0.95 * (double)te.n, "nearest-centroid accuracy %d / %lld", correct,
          (long long)te.n);
    het_dataset_free(&tr);
    het_dataset_free(&te);
}

static void test_gather(void) {
    het_shape s = {3, 4, 5};
    het_dataset d;
    CHECK(het_dataset_synthetic(&d, 40, s, 4, 3) == HET_OK, "synthetic 3ch");
    d.mean[0] = 0.1f; d.mean[1] = 0.5f; d.mean[2] = 0.9f;
    d.std[0] = 0.2f; d.std[1] = 0.3f; d.std[2] = 0.4f;
    int64_t idx[3] = {17, 0, 39};
    float x[3 * 60];
    uint8_t y[3];
    het_dataset_gather(&d, idx, 3, x, y);
    double maxerr = 0;
    for (int i = 0; i < 3; i++) {
        CHECK(y[i] == d.labels[idx[i]], "label %d", i);
        for (int c = 0; c < 3; c++)
            for (int p = 0; p < 20; p++) {
                double b = d.images[idx[i] * 60 + c * 20 + p];
                double want = (b / 255.0 - d.mean[c]) / d.std[c];
                double e = fabs(x[i * 60 + c * 20 + p] - want);
                if (e > maxerr) maxerr = e;
            }
    }
    CHECK(maxerr < 1e-6, "gather max error %g", maxerr);
    het_dataset_free(&d);
}

/* Writes an IDX file of unsigned bytes (dims[0..nd), then the payload) as dir/name, through
 * zlib when gz; returns 0 or -1. */
static int write_idx(const char *dir, const char *name, int gz, int nd, const uint32_t *dims,
                     const uint8_t *payload) {
    unsigned char hdr[16] = {0, 0, 8, (unsigned char)nd};
    size_t n = 1;
    for (int i = 0; i < nd; i++) {
        for (int b = 0; b < 4; b++) hdr[4 + 4 * i + b] = (unsigned char)(dims[i] >> (24 - 8 * b));
        n *= dims[i];
    }
    char p[600];
    path_in(p, sizeof p, dir, name);
    if (!gz) {
        FILE *f = fopen(p, "wb");
        if (!f) return -1;
        size_t w = fwrite(hdr, 1, 4 + 4 * (size_t)nd, f) + fwrite(payload, 1, n, f);
        return fclose(f) == 0 && w == 4 + 4 * (size_t)nd + n ? 0 : -1;
    }
    gzFile g = gzopen(p, "wb");
    if (!g) return -1;
    int ok = gzwrite(g, hdr, 4 + 4 * (unsigned)nd) == 4 + 4 * nd && gzwrite(g, payload,
                                                                            (unsigned)n) == (int)n;
    return gzclose(g) == Z_OK && ok ? 0 : -1;
}

/* Removes the four IDX files (raw and .gz) of dir, and dir. */
static void remove_idx_dir(const char *dir) {
    static const char *const base[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    char p[600], name[64];
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "%s%s", base[i / 2], i % 2 ? ".gz" : "");
        path_in(p, sizeof p, dir, name);
        unlink(p);
    }
    rmdir(dir);
}

/* --data idx: a directory of small IDX files of 5 x 7 images, some gzip-compressed and some
 * raw; the shape from the headers, the class count from the labels of both splits, the
 * training split's normalization; --classes; a test shape that differs, a missing file, no
 * directory, labels that are all 0. */
static void test_idx_dir(void) {
    char dir[512];
    path_in(dir, sizeof dir, tmpdir, "idx");
    CHECK(mkdir(dir, 0700) == 0, "mkdir %s", dir);
    uint8_t img[6 * 35], lab_tr[6] = {0, 1, 2, 3, 4, 1}, lab_te[3] = {0, 5, 2};
    for (int i = 0; i < 6 * 35; i++) img[i] = (uint8_t)(i * 7 % 251);
    uint32_t dtr[3] = {6, 5, 7}, dte[3] = {3, 5, 7}, ltr[1] = {6}, lte[1] = {3};
    CHECK(write_idx(dir, "train-images-idx3-ubyte", 0, 3, dtr, img) == 0, "write train images");
    CHECK(write_idx(dir, "train-labels-idx1-ubyte.gz", 1, 1, ltr, lab_tr) == 0, "write labels");
    CHECK(write_idx(dir, "t10k-images-idx3-ubyte.gz", 1, 3, dte, img + 35) == 0, "write test");
    CHECK(write_idx(dir, "t10k-labels-idx1-ubyte", 0, 1, lte, lab_te) == 0, "write labels");

    het_dataset_spec spec = {"idx", dir, {0, 0, 0}, 0, 0};
    het_dataset tr, te;
    het_shape sh = {0, 0, 0};
    int k = 0, st = het_dataset_describe(&spec, &sh, &k);
    CHECK(st == HET_OK && sh.c == 1 && sh.h == 5 && sh.w == 7 && k == 6,
          "describe idx: %d, %dx%dx%d, %d classes: %s", st, sh.c, sh.h, sh.w, k,
          st ? het_error_msg() : "");
    st = het_dataset_load(&tr, &te, &spec);
    CHECK(st == HET_OK, "load idx: %s", het_error_msg());
    if (st == HET_OK) {
        CHECK(strcmp(tr.name, "idx") == 0 && strcmp(te.name, "idx") == 0, "name %s", tr.name);
        CHECK(tr.n == 6 && te.n == 3, "n %lld / %lld", (long long)tr.n, (long long)te.n);
        CHECK(tr.shape.c == 1 && tr.shape.h == 5 && tr.shape.w == 7 && te.shape.h == 5 &&
              te.shape.w == 7, "shape %dx%dx%d", tr.shape.c, tr.shape.h, tr.shape.w);
        CHECK(tr.n_classes == 6 && te.n_classes == 6, "classes %d / %d (max label 5 + 1)",
              tr.n_classes, te.n_classes);
        CHECK(memcmp(tr.images, img, 6 * 35) == 0 && memcmp(te.images, img + 35, 3 * 35) == 0,
              "pixels");
        CHECK(te.labels[1] == 5 && tr.labels[4] == 4, "labels");
        double sum = 0;
        for (int i = 0; i < 6 * 35; i++) sum += img[i];
        CHECK_CLOSE(tr.mean[0], sum / (6 * 35) / 255.0, 1e-6, "idx mean of the training bytes");
        CHECK(te.mean[0] == tr.mean[0] && te.std[0] == tr.std[0], "test uses train statistics");
    }
    het_dataset_free(&tr);
    het_dataset_free(&te);

    /* the same through the configuration keys */
    het_train_config c = het_train_config_defaults();
    CHECK(het_train_config_set(&c, "data", "idx") == HET_OK && het_train_config_set(&c,
          "data-dir", dir) == HET_OK, "set data idx: %s", het_error_msg());
    st = het_train_data_shape(&c, &sh, &k);
    CHECK(st == HET_OK && sh.h == 5 && sh.w == 7 && k == 6, "config idx shape: %s",
          het_error_msg());
    CHECK(het_train_config_check(&c) == HET_OK, "config check idx: %s", het_error_msg());
    char files[HET_DATASET_MAX_FILES][HET_PATH_LEN], want[600];
    int nf = het_dataset_files("idx", dir, files, HET_DATASET_MAX_FILES);
    path_in(want, sizeof want, dir, "t10k-labels-idx1-ubyte");
    CHECK(nf == 8 && strcmp(files[7], want) == 0, "idx files: %d, last %s", nf,
          nf ? files[nf - 1] : "");
    CHECK(het_dataset_files("idx", NULL, files, HET_DATASET_MAX_FILES) == 0, "idx without dir");

    /* --classes: more classes than labels, or too few for them */
    spec.n_classes = 9;
    st = het_dataset_describe(&spec, &sh, &k);
    CHECK(st == HET_OK && k == 9, "idx with 9 classes: %d: %s", k, het_error_msg());
    spec.n_classes = 5;
    st = het_dataset_load(&tr, &te, &spec);
    CHECK(st == HET_EFORMAT && strstr(het_error_msg(), "t10k-labels-idx1-ubyte: offset 9: "
                                      "label 5 out of range, expected < 5"),
          "idx with 5 classes: %d: %s", st, het_error_msg());
    spec.n_classes = 0;

    /* test images of another size than the training images */
    uint32_t dbad[3] = {3, 4, 7};
    CHECK(write_idx(dir, "t10k-images-idx3-ubyte.gz", 1, 3, dbad, img) == 0, "write 4x7");
    char msg[1400];
    snprintf(msg, sizeof msg, "%s/t10k-images-idx3-ubyte.gz: offset 8: images of 4 x 7, "
             "expected 5 x 7 as in %s/train-images-idx3-ubyte", dir, dir);
    st = het_dataset_load(&tr, &te, &spec);
    CHECK(st == HET_EFORMAT && strstr(het_error_msg(), msg), "shape mismatch: %d: %s", st,
          het_error_msg());
    CHECK(tr.images == NULL && te.images == NULL, "outputs cleared on failure");
    st = het_train_config_check(&c);
    CHECK(st == HET_EINVAL && strstr(het_error_msg(), msg), "config check mismatch: %s",
          het_error_msg());
    CHECK(write_idx(dir, "t10k-images-idx3-ubyte.gz", 1, 3, dte, img) == 0, "rewrite test");

    /* labels all 0: one class */
    uint8_t zeros[6] = {0};
    CHECK(write_idx(dir, "t10k-labels-idx1-ubyte", 0, 1, lte, zeros) == 0, "zero labels");
    CHECK(write_idx(dir, "train-labels-idx1-ubyte.gz", 1, 1, ltr, zeros) == 0, "zero labels");
    st = het_dataset_describe(&spec, &sh, &k);
    CHECK(st == HET_EFORMAT && strstr(het_error_msg(), "every label is 0"), "one class: %s",
          het_error_msg());

    /* a missing file: named with the reason and what idx reads */
    char gone[600];
    path_in(gone, sizeof gone, dir, "train-labels-idx1-ubyte.gz");
    unlink(gone);
    st = het_dataset_load(&tr, &te, &spec);
    snprintf(msg, sizeof msg, "%s: No such file or directory", gone);
    CHECK(st == HET_EIO && strstr(het_error_msg(), msg) &&
              strstr(het_error_msg(), "--data idx reads"),
          "missing file: %d: %s", st, het_error_msg());
    st = het_train_data_shape(&c, &sh, &k);
    CHECK(st == HET_EIO && strstr(het_error_msg(), msg), "missing file (shape): %s",
          het_error_msg());

    spec.dir = NULL;
    st = het_dataset_load(&tr, &te, &spec);
    CHECK(st == HET_EINVAL && strstr(het_error_msg(), "idx has no default directory: pass "
                                     "--data-dir"), "idx without dir: %s", het_error_msg());
    remove_idx_dir(dir);
}

/* --data synthetic with --synthetic-shape 3x8x8 --classes 4, by spec and by configuration. */
static void test_synthetic_shape(void) {
    het_dataset_spec spec = {"synthetic", NULL, {3, 8, 8}, 4, 0};
    het_dataset tr, te;
    het_shape sh;
    int k = 0, st = het_dataset_load(&tr, &te, &spec);
    CHECK(st == HET_OK, "synthetic 3x8x8: %s", het_error_msg());
    if (st == HET_OK) {
        CHECK(tr.n == 2048 && te.n == 512, "n %lld / %lld", (long long)tr.n, (long long)te.n);
        CHECK(tr.shape.c == 3 && tr.shape.h == 8 && tr.shape.w == 8 && te.shape.c == 3,
              "shape %dx%dx%d", tr.shape.c, tr.shape.h, tr.shape.w);
        CHECK(tr.n_classes == 4 && te.n_classes == 4, "classes %d", tr.n_classes);
        int seen[256] = {0}, bad = 0;
        for (int64_t i = 0; i < tr.n; i++) bad += tr.labels[i] >= 4, seen[tr.labels[i]] = 1;
        CHECK(bad == 0 && seen[0] && seen[1] && seen[2] && seen[3], "labels: %d >= 4", bad);
        for (int ch = 0; ch < 3; ch++)
            CHECK(tr.std[ch] > 0.1f && te.mean[ch] == tr.mean[ch], "channel %d stats", ch);
    }
    het_dataset_free(&tr);
    het_dataset_free(&te);

    het_train_config c = het_train_config_defaults();
    CHECK(het_train_config_set(&c, "data", "synthetic") == HET_OK &&
              het_train_config_set(&c, "synthetic-shape", "3x8x8") == HET_OK &&
              het_train_config_set(&c, "classes", "4") == HET_OK,
          "set synthetic keys: %s", het_error_msg());
    st = het_train_data_shape(&c, &sh, &k);
    CHECK(st == HET_OK && sh.c == 3 && sh.h == 8 && sh.w == 8 && k == 4,
          "config synthetic shape %dx%dx%d, %d classes: %s", sh.c, sh.h, sh.w, k,
          het_error_msg());
    CHECK(het_train_config_check(&c) == HET_OK, "config check: %s", het_error_msg());
    st = het_train_data_load(&c, &tr, &te);
    CHECK(st == HET_OK && tr.shape.c == 3 && tr.n_classes == 4, "config load: %s",
          het_error_msg());
    het_dataset_free(&tr);
    het_dataset_free(&te);
    /* --synthetic-samples: the training split's size (the test split keeps 512) */
    het_train_config n = c;
    CHECK(het_train_config_set(&n, "synthetic-samples", "300") == HET_OK, "set samples: %s",
          het_error_msg());
    st = het_train_data_load(&n, &tr, &te);
    CHECK(st == HET_OK && tr.n == 300 && te.n == 512 && tr.shape.c == 3,
          "300 samples: n %lld / %lld: %s", (long long)tr.n, (long long)te.n, het_error_msg());
    if (st == HET_OK) { /* the same task: the first samples as in the default 2048 */
        het_dataset tr2, te2;
        CHECK(het_train_data_load(&c, &tr2, &te2) == HET_OK, "%s", het_error_msg());
        CHECK(memcmp(tr.labels, tr2.labels, 300) == 0, "labels differ from the 2048's");
        het_dataset_free(&tr2);
        het_dataset_free(&te2);
    }
    het_dataset_free(&tr);
    het_dataset_free(&te);

    /* refused with one line naming the key */
    static const struct { const char *key, *value, *msg; } bad[] = {
        {"synthetic-shape", "3x8", "synthetic-shape: '3x8', expected CxHxW"},
        {"synthetic-shape", "0x8x8", "synthetic-shape: '0x8x8', expected CxHxW"},
        {"synthetic-shape", "3x8x8x1", "expected CxHxW, three whole numbers >= 1"},
        {"synthetic-shape", "3 x8x8", "expected CxHxW"},
        {"synthetic-shape", "3x-8x8", "expected CxHxW"},
        {"synthetic-shape", "3x99999999999x8", "expected CxHxW"},
        {"synthetic-shape", "4x8x8", "synthetic-shape: 4x8x8, expected 1..3 channels"},
        {"synthetic-shape", "3x1024x1024", "synthetic-shape: 3x1024x1024 is 3145728 values"},
        {"classes", "1", "classes: 1, expected 2..256"},
        {"synthetic-samples", "2000000", "synthetic-samples: 2000000 samples of 3x8x8"},
        {"synthetic-samples", "-1", "synthetic-samples"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        het_train_config b = c;
        st = het_train_config_set(&b, bad[i].key, bad[i].value);
        if (st == HET_OK) st = het_train_config_check(&b);
        CHECK(st == HET_EINVAL && strstr(het_error_msg(), bad[i].msg), "%s %s: %d: '%s', "
              "expected '%s'", bad[i].key, bad[i].value, st, het_error_msg(), bad[i].msg);
    }
    /* the keys of synthetic on other datasets */
    het_train_config o = het_train_config_defaults();
    het_train_config_set(&o, "synthetic-shape", "1x28x28");
    st = het_train_config_check(&o);
    CHECK(st == HET_EINVAL && strstr(het_error_msg(), "synthetic-shape: applies to --data "
                                     "synthetic, not fashion-mnist"), "%s", het_error_msg());
    o = het_train_config_defaults();
    het_train_config_set(&o, "data", "cifar10");
    het_train_config_set(&o, "classes", "10");
    st = het_train_config_check(&o);
    CHECK(st == HET_EINVAL && strstr(het_error_msg(), "classes: applies to --data synthetic "
                                     "and idx, not cifar10"), "%s", het_error_msg());
    o = het_train_config_defaults();
    het_train_config_set(&o, "synthetic-samples", "100");
    st = het_train_config_check(&o);
    CHECK(st == HET_EINVAL && strstr(het_error_msg(), "synthetic-samples: applies to --data "
                                     "synthetic, not fashion-mnist"), "%s", het_error_msg());
}

static void test_names(void) {
    het_dataset tr, te;
    int st = het_dataset_load_named(&tr, &te, "imagenet", NULL);
    CHECK(st == HET_EINVAL, "unknown name status %d", st);
    CHECK(strstr(het_error_msg(), "imagenet") && strstr(het_error_msg(), "fashion-mnist") &&
              strstr(het_error_msg(), "cifar10") && strstr(het_error_msg(), "synthetic"),
          "message: %s", het_error_msg());
    st = het_dataset_load_named(&tr, &te, "mnist", NULL);
    CHECK(st == HET_EINVAL && strstr(het_error_msg(), "--data-dir"), "mnist without dir: %s",
          het_error_msg());
    CHECK(tr.images == NULL && te.images == NULL, "outputs cleared on failure");
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_fashion_mnist();
    test_gzip_members();
    test_cifar_named();
    test_synthetic();
    test_gather();
    test_names();
    test_idx_dir();
    test_synthetic_shape();
    rmdir(tmpdir);
    return het_test_finish("test_data");
}

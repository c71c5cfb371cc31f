/* CIFAR-10 binary reader: each file is a sequence of records, 1 label byte (< 10) then 3072
 * pixel bytes (CHW: 1024 red, 1024 green, 1024 blue, rows of 32). A file must hold at least
 * one record and a whole number of them. Files may be gzip-compressed (detected by content). */
#include <stdlib.h>
#include <string.h>

#include "data/reader.h"

typedef unsigned long long ull;

enum { CIFAR_PIXELS = 3 * 32 * 32, CIFAR_RECORD = 1 + CIFAR_PIXELS, CIFAR_CLASSES = 10 };
/* Records a file may hold: CIFAR-10's hold 10000; ten times that bounds what a small .gz that
 * inflates to gigabytes can make the reader allocate. */
enum { CIFAR_MAX_RECORDS = 100000 };

/* Makes room for one more record. */
static int grow(het_dataset *d, int64_t *cap, const char *path) {
    if (d->n < *cap) return HET_OK;
    int64_t ncap = *cap ? 2 * *cap : 10000;
    uint8_t *im = realloc(d->images, (size_t)ncap * CIFAR_PIXELS);
    if (!im) return het_error_set(HET_ENOMEM, "%s: out of memory for %lld records", path,
                                  (long long)ncap);
    d->images = im;
    uint8_t *lb = realloc(d->labels, (size_t)ncap);
    if (!lb) return het_error_set(HET_ENOMEM, "%s: out of memory for %lld records", path,
                                  (long long)ncap);
    d->labels = lb;
    *cap = ncap;
    return HET_OK;
}

static int read_file(het_dataset *d, int64_t *cap, const char *path) {
    het_reader r;
    int st = het_reader_open(&r, path);
    unsigned char rec[CIFAR_RECORD];
    for (uint64_t k = 0; st == HET_OK; k++) {
        size_t got;
        if ((st = het_reader_read(&r, rec, sizeof rec, &got))) break;
        if (got == 0 && k > 0) break;
        if (got == 0) {
            st = het_error_set(HET_EFORMAT, "%s: offset 0: empty file, expected records of %d "
                               "bytes (1 label + %d pixels)", path, CIFAR_RECORD, CIFAR_PIXELS);
        } else if (got < sizeof rec) {
            st = het_error_set(HET_EFORMAT, "%s: offset %llu: file ends after %zu of %d bytes "
                               "of record %llu (size %llu), expected a multiple of %d bytes",
                               path, (ull)(k * CIFAR_RECORD), got, CIFAR_RECORD, (ull)k,
                               (ull)(k * CIFAR_RECORD + got), CIFAR_RECORD);
        } else if (k >= CIFAR_MAX_RECORDS) {
            st = het_error_set(HET_EFORMAT, "%s: offset %llu: record %llu, expected at most %d "
                               "records a file (CIFAR-10's hold 10000)", path,
                               (ull)(k * CIFAR_RECORD), (ull)k + 1, CIFAR_MAX_RECORDS);
        } else if (rec[0] >= CIFAR_CLASSES) {
            st = het_error_set(HET_EFORMAT, "%s: offset %llu: label %u out of range, expected "
                               "< %d", path, (ull)(k * CIFAR_RECORD), rec[0], CIFAR_CLASSES);
        } else if ((st = grow(d, cap, path)) == HET_OK) {
            d->labels[d->n] = rec[0];
            memcpy(d->images + (size_t)d->n * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
            d->n++;
        }
    }
    het_reader_close(&r);
    return st;
}

int het_dataset_load_cifar(het_dataset *d, const char *const *paths, int n_paths) {
    if (!d) return het_error_set(HET_EINVAL, "het_dataset_load_cifar: NULL dataset");
    memset(d, 0, sizeof *d);
    if (!paths || n_paths < 1)
        return het_error_set(HET_EINVAL, "het_dataset_load_cifar: %d paths, expected >= 1",
                             n_paths);
    int64_t cap = 0;
    for (int i = 0; i < n_paths; i++) {
        int st = paths[i] ? read_file(d, &cap, paths[i])
                          : het_error_set(HET_EINVAL, "het_dataset_load_cifar: NULL path %d", i);
        if (st) {
            het_dataset_free(d);
            return st;
        }
    }
    /* give back the over-allocation of the doubling growth */
    uint8_t *im = realloc(d->images, (size_t)d->n * CIFAR_PIXELS);
    if (im) d->images = im;
    uint8_t *lb = realloc(d->labels, (size_t)d->n);
    if (lb) d->labels = lb;
    snprintf(d->name, sizeof d->name, "cifar10");
    d->shape = (het_shape){3, 32, 32};
    d->n_classes = CIFAR_CLASSES;
    het_dataset_compute_stats(d);
    return HET_OK;
}

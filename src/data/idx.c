/* IDX reader (MNIST, Fashion-MNIST): gzip or raw, every header field and length validated.
 *
 * Format: magic 00 00 08 <ndims> (type 0x08 = unsigned byte), then ndims big-endian uint32
 * dimensions, then exactly their product of payload bytes. Images: 3 dims (n, rows, cols);
 * labels: 1 dim (n). Offsets in messages are in the uncompressed stream. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/infile.h"
#include "data/reader.h"

typedef unsigned long long ull;

typedef struct idx_file {
    uint64_t dims[3];
    uint64_t header;   /* bytes */
    uint64_t payload;  /* bytes = product of dims */
    uint8_t *data;     /* payload, malloc'd */
} idx_file;

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Reads n header bytes at the reader's offset; a short read is a truncated header. */
static int read_header(het_reader *r, unsigned char *buf, size_t n, uint64_t header) {
    size_t got;
    uint64_t at = r->off;
    int st = het_reader_read(r, buf, n, &got);
    if (st) return st;
    if (got == n) return HET_OK;
    if (at + got == 0)
        return het_error_set(HET_EFORMAT, "%s: offset 0: empty file, expected a %llu-byte IDX "
                             "header", r->path, (ull)header);
    return het_error_set(HET_EFORMAT, "%s: offset %llu: file ends after %llu of %llu header "
                         "bytes, expected a %llu-byte IDX header", r->path, (ull)(at + got),
                         (ull)(at + got), (ull)header, (ull)header);
}

/* Reads and checks the magic and the dimensions; sets f->header, f->dims, f->payload. */
static int idx_header(het_reader *r, const char *path, int ndims, idx_file *f) {
    f->header = 4 + 4 * (uint64_t)ndims;
    unsigned char hdr[16];
    int st = read_header(r, hdr, 4, f->header);
    if (st) return st;
    uint32_t magic = be32(hdr), want = 0x00000800u | (uint32_t)ndims;
    if (hdr[0] != 0 || hdr[1] != 0 || ((hdr[3] == 1 || hdr[3] == 3) && hdr[3] != ndims))
        return het_error_set(HET_EFORMAT, "%s: offset 0: bad magic 0x%08x, expected 0x%08x%s",
                             path, magic, want,
                             hdr[0] || hdr[1] ? ""
                             : hdr[3] == 1    ? " (this is an IDX label file)"
                                              : " (this is an IDX image file)");
    if (hdr[2] != 0x08)
        return het_error_set(HET_EFORMAT, "%s: offset 2: data type 0x%02x in magic 0x%08x, "
                             "expected 0x08 (unsigned byte)", path, hdr[2], magic);
    if (hdr[3] != ndims)
        return het_error_set(HET_EFORMAT, "%s: offset 3: %d dimensions in magic 0x%08x, "
                             "expected %d", path, hdr[3], magic, ndims);
    if ((st = read_header(r, hdr + 4, 4 * (size_t)ndims, f->header))) return st;
    uint64_t prod = 1;
    for (int i = 0; i < ndims; i++) {
        f->dims[i] = be32(hdr + 4 + 4 * i);
        if (f->dims[i] == 0)
            return het_error_set(HET_EFORMAT, "%s: offset %d: dimension %d is 0, expected > 0",
                                 path, 4 + 4 * i, i);
        if (prod > (uint64_t)INT64_MAX / f->dims[i] || prod * f->dims[i] > (uint64_t)SIZE_MAX) {
            char dims[64];
            snprintf(dims, sizeof dims, "%llu", (ull)f->dims[0]);
            for (int k = 1; k <= i; k++)
                snprintf(dims + strlen(dims), sizeof dims - strlen(dims), " x %llu",
                         (ull)f->dims[k]);
            return het_error_set(HET_EFORMAT, "%s: offset 4: dimensions %s overflow the size "
                                 "product, expected a product below 2^63 bytes", path, dims);
        }
        prod *= f->dims[i];
    }
    if (ndims == 3 && (f->dims[1] > INT_MAX || f->dims[2] > INT_MAX ||
                       f->dims[1] * f->dims[2] > INT_MAX))
        return het_error_set(HET_EFORMAT, "%s: offset 8: images of %llu x %llu pixels, expected "
                             "at most %d pixels", path, (ull)f->dims[1], (ull)f->dims[2],
                             INT_MAX);
    f->payload = prod;
    return HET_OK;
}

/* Reads the f->payload bytes after the header, growing the buffer as bytes arrive, so that a
 * huge header on a short file reports the truncation instead of failing to allocate; then
 * checks that nothing follows (looking at most HET_READER_TAIL bytes further). */
static int idx_payload(het_reader *r, const char *path, idx_file *f) {
    const uint64_t step = (uint64_t)1 << 20, prod = f->payload;
    uint64_t cap = 0, have = 0;
    int st;
    while (have < prod) {
        if (have == cap) {
            uint64_t ncap = cap ? 2 * cap : step;
            if (ncap > prod) ncap = prod;
            /* a .gz may really inflate to what a huge header announces: not past memory */
            if ((double)ncap > het_infile_memory())
                return het_error_set(HET_EFORMAT, "%s: offset %llu: a payload of %llu bytes "
                                     "(%llu read so far), expected at most the %.0f bytes of "
                                     "memory here", path, (ull)(f->header + have), (ull)prod,
                                     (ull)have, het_infile_memory());
            uint8_t *p = realloc(f->data, (size_t)ncap);
            if (!p)
                return het_error_set(HET_ENOMEM, "%s: out of memory for %llu payload bytes",
                                     path, (ull)ncap);
            f->data = p;
            cap = ncap;
        }
        size_t got, ask = (size_t)(cap - have);
        if ((st = het_reader_read(r, f->data + have, ask, &got))) return st;
        have += got;
        if (got < ask)
            return het_error_set(HET_EFORMAT, "%s: offset %llu: file ends after %llu of %llu "
                                 "payload bytes, expected %llu bytes in all", path,
                                 (ull)f->header, (ull)have, (ull)prod,
                                 (ull)(f->header + prod));
    }
    /* A few KiB past the end, no more: the rest may inflate to any size. Corrupt gzip data
     * that inflates beyond the payload is still reported as corrupt when it shows there. */
    uint64_t extra;
    if ((st = het_reader_drain(r, HET_READER_TAIL, &extra))) return st;
    if (extra)
        return het_error_set(HET_EFORMAT, "%s: offset %llu: trailing data after the payload, "
                             "expected end of file", path, (ull)(f->header + prod));
    return HET_OK;
}

/* Opens one IDX file of `ndims` dimensions and reads its header into f; the payload is not
 * read yet, so that headers can be compared before any payload is (a small .gz can inflate to
 * gigabytes). A raw file whose size is not header + payload is refused here too. */
static int idx_open(het_reader *r, const char *path, int ndims, idx_file *f) {
    memset(f, 0, sizeof *f);
    int st = het_reader_open(r, path);
    if (!st) st = idx_header(r, path, ndims, f);
    if (!st && !r->gz && r->size < f->header + f->payload)
        st = het_error_set(HET_EFORMAT, "%s: offset %llu: file ends after %llu of %llu payload "
                           "bytes, expected %llu bytes in all", path, (ull)f->header,
                           (ull)(r->size - f->header), (ull)f->payload,
                           (ull)(f->header + f->payload));
    return st;
}

/* The payload of a file idx_open opened, then the reader closed; f->data owned by the caller
 * on success, freed here on failure. */
static int idx_finish(het_reader *r, const char *path, idx_file *f) {
    int st = idx_payload(r, path, f);
    het_reader_close(r);
    if (st) {
        free(f->data);
        f->data = NULL;
    }
    return st;
}

/* The label count against the images' (want >= 0), from the headers alone. */
static int same_count(const char *labels, const idx_file *lab, int64_t want,
                      const char *images) {
    if (want < 0 || lab->dims[0] == (uint64_t)want) return HET_OK;
    return het_error_set(HET_EFORMAT, "%s: offset 4: %llu labels, expected %llu to match the "
                         "images in %s", labels, (ull)lab->dims[0], (ull)want, images);
}

int het_idx_image_shape(const char *path, int64_t *n, het_shape *shape) {
    idx_file f;
    memset(&f, 0, sizeof f);
    het_reader r;
    int st = idx_open(&r, path, 3, &f);
    het_reader_close(&r);
    if (st) return st;
    *n = (int64_t)f.dims[0];
    *shape = (het_shape){1, (int)f.dims[1], (int)f.dims[2]};
    return HET_OK;
}

/* The first label >= n_classes: its message, as the loader and the catalog give it. */
static int label_range(const char *path, const idx_file *f, int n_classes) {
    for (uint64_t i = 0; i < f->dims[0]; i++)
        if (f->data[i] >= n_classes)
            return het_error_set(HET_EFORMAT, "%s: offset %llu: label %u out of range, "
                                 "expected < %d", path, (ull)(f->header + i), f->data[i],
                                 n_classes);
    return HET_OK;
}

int het_idx_labels(const char *path, int n_classes, int64_t want, const char *images,
                   int64_t *n, int *max) {
    idx_file f;
    het_reader r;
    int st = idx_open(&r, path, 1, &f);
    if (!st) st = same_count(path, &f, want, images);
    if (st) {
        het_reader_close(&r);
        return st;
    }
    st = idx_finish(&r, path, &f);
    if (!st) st = label_range(path, &f, n_classes);
    int m = 0;
    for (uint64_t i = 0; !st && i < f.dims[0]; i++)
        if (f.data[i] > m) m = f.data[i];
    free(f.data);
    if (st) return st;
    *n = (int64_t)f.dims[0];
    *max = m;
    return HET_OK;
}

int het_dataset_load_idx(het_dataset *d, const char *images_path, const char *labels_path,
                         int n_classes) {
    if (!d) return het_error_set(HET_EINVAL, "het_dataset_load_idx: NULL dataset");
    memset(d, 0, sizeof *d);
    if (!images_path || !labels_path)
        return het_error_set(HET_EINVAL, "het_dataset_load_idx: NULL path");
    if (n_classes < 1 || n_classes > 256)
        return het_error_set(HET_EINVAL, "het_dataset_load_idx: %d classes, expected 1..256",
                             n_classes);
    /* both headers first, then the payloads */
    idx_file img, lab;
    het_reader ri, rl;
    int st = idx_open(&ri, images_path, 3, &img);
    if (st) {
        het_reader_close(&ri);
        return st;
    }
    st = idx_open(&rl, labels_path, 1, &lab);
    if (!st) st = same_count(labels_path, &lab, (int64_t)img.dims[0], images_path);
    if (st) {
        het_reader_close(&ri);
        het_reader_close(&rl);
        return st;
    }
    if ((st = idx_finish(&ri, images_path, &img))) {
        het_reader_close(&rl);
        return st;
    }
    if ((st = idx_finish(&rl, labels_path, &lab))) goto fail;
    if ((st = label_range(labels_path, &lab, n_classes))) goto fail;
    snprintf(d->name, sizeof d->name, "idx");
    d->n = (int64_t)img.dims[0];
    d->shape = (het_shape){1, (int)img.dims[1], (int)img.dims[2]};
    d->n_classes = n_classes;
    d->images = img.data;
    d->labels = lab.data;
    het_dataset_compute_stats(d);
    return HET_OK;
fail:
    free(img.data);
    free(lab.data);
    return st;
}

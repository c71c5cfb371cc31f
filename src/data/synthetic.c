/* Synthetic labelled images for tests and demos without data files.
 *
 * DESIGN. The task is fixed: class k has a prototype image whose pixels are each 48 or 208,
 * drawn from a constant seed (the same for every call with the same shape and class count), so
 * that a train set and a test set made with different seeds are samples of one task. The seed
 * picks the samples: label uniform in [0, n_classes), pixel = prototype + 80 * N(0, 1),
 * rounded and clipped to [0, 255]. Prototypes differ in about half their pixels, so an MLP
 * separates the classes to near 100% within an epoch or two, while the noise keeps a single
 * pixel uninformative. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/reader.h"

#define SYNTH_TASK_SEED 0x6865747261696eULL /* "hetrain" */

int het_dataset_synthetic(het_dataset *d, int64_t n, het_shape shape, int n_classes,
                          uint64_t seed) {
    if (!d) return het_error_set(HET_EINVAL, "het_dataset_synthetic: NULL dataset");
    memset(d, 0, sizeof *d);
    if (n < 1 || shape.c < 1 || shape.c > 3 || shape.h < 1 || shape.w < 1 || n_classes < 1 ||
        n_classes > 256)
        return het_error_set(HET_EINVAL, "het_dataset_synthetic: n %lld, shape %dx%dx%d, %d "
                             "classes; expected n >= 1, 1..3 channels, h, w >= 1, 1..256 "
                             "classes", (long long)n, shape.c, shape.h, shape.w, n_classes);
    size_t f = het_shape_size(shape);
    if (f > ((size_t)1 << 28) || (uint64_t)n > (uint64_t)SIZE_MAX / f / 2)
        return het_error_set(HET_EINVAL, "het_dataset_synthetic: %lld samples of %zu bytes is "
                             "too large", (long long)n, f);
    uint8_t *proto = malloc((size_t)n_classes * f);
    d->images = malloc((size_t)n * f);
    d->labels = malloc((size_t)n);
    if (!proto || !d->images || !d->labels) {
        free(proto);
        het_dataset_free(d);
        return het_error_set(HET_ENOMEM, "het_dataset_synthetic: out of memory for %lld "
                             "samples", (long long)n);
    }
    het_rng r;
    het_rng_seed2(&r, SYNTH_TASK_SEED, (uint64_t)n_classes);
    for (size_t i = 0; i < (size_t)n_classes * f; i++)
        proto[i] = (het_rng_u64(&r) >> 63) ? 208 : 48;

    het_rng_seed(&r, seed);
    for (int64_t s = 0; s < n; s++) {
        uint8_t y = (uint8_t)het_rng_below(&r, (uint32_t)n_classes);
        const uint8_t *p = proto + (size_t)y * f;
        uint8_t *img = d->images + (size_t)s * f;
        for (size_t i = 0; i < f; i++) {
            float v = floorf((float)p[i] + 80.0f * het_rng_normal(&r) + 0.5f);
            img[i] = (uint8_t)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);
        }
        d->labels[s] = y;
    }
    free(proto);
    snprintf(d->name, sizeof d->name, "synthetic");
    d->n = n;
    d->shape = shape;
    d->n_classes = n_classes;
    het_dataset_compute_stats(d);
    return HET_OK;
}

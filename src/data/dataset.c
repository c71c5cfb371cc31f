/* Datasets: the generic helpers under the readers and the catalog (catalog.c): freeing,
 * normalization statistics, batch gathering. Nothing here calls a reader. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/reader.h"

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

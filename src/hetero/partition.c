/* Partitions of a count (a global batch, a dataset) over ranks: even, or in proportion to
 * weights (relative speeds). Pure functions; every rank computes the same partition. */
#include <math.h>

#include "hetero/hetero.h"

void het_partition_even(int64_t n, int parts, int r, int64_t *lo, int64_t *len) {
    int64_t q = n / parts, rem = n % parts;
    *lo = (int64_t)r * q + (r < rem ? r : rem);
    *len = q + (r < rem ? 1 : 0);
}

int het_partition_weighted(int64_t n, const double *w, int parts, int64_t *sizes) {
    if (parts < 1) return het_error_set(HET_EINVAL, "partition: %d parts", parts);
    double sum = 0.0;
    int largest = 0;
    for (int r = 0; r < parts; r++) {
        if (!(w[r] > 0.0) || !isfinite(w[r]))
            return het_error_set(HET_EINVAL, "partition: weight %d is %g, expected a finite "
                                 "value > 0", r, w[r]);
        sum += w[r];
        if (w[r] > w[largest]) largest = r;
    }
    if (n < parts)
        return het_error_set(HET_EINVAL, "partition: %lld items cannot give each of %d ranks at "
                             "least one", (long long)n, parts);
    int64_t total = 0;
    for (int r = 0; r < parts; r++) {
        sizes[r] = (int64_t)llround((double)n * w[r] / sum);
        if (sizes[r] < 1) sizes[r] = 1;
        total += sizes[r];
    }
    /* the residue goes to the largest part; if that would empty it, take from the others */
    sizes[largest] += n - total;
    for (int r = 0; sizes[largest] < 1 && r < parts; r++) {
        while (r != largest && sizes[r] > 1 && sizes[largest] < 1) {
            sizes[r]--;
            sizes[largest]++;
        }
    }
    return HET_OK;
}

void het_partition_offsets(const int64_t *sizes, int r, int64_t *lo, int64_t *len) {
    int64_t off = 0;
    for (int q = 0; q < r; q++) off += sizes[q];
    *lo = off;
    *len = sizes[r];
}

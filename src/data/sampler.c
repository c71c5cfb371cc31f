/* Epoch sampler: the permutation of epoch e is a pure function of (seed, e), so every rank
 * computes the same one without communication, and a resumed run replays it exactly. */
#include <string.h>

#include "hetrain/data.h"

int het_sampler_init(het_sampler *s, int64_t n, uint64_t seed, int shuffle) {
    if (!s) return het_error_set(HET_EINVAL, "het_sampler_init: NULL sampler");
    memset(s, 0, sizeof *s);
    if (n < 1 || (uint64_t)n > UINT32_MAX)
        return het_error_set(HET_EINVAL, "het_sampler_init: %lld samples, expected 1..%lu",
                             (long long)n, (unsigned long)UINT32_MAX);
    s->perm = het_alloc((size_t)n * sizeof *s->perm);
    if (!s->perm) return HET_ENOMEM;
    s->n = n;
    s->seed = seed;
    s->shuffle = shuffle != 0;
    s->epoch = -1;
    for (int64_t i = 0; i < n; i++) s->perm[i] = i;
    return HET_OK;
}

void het_sampler_free(het_sampler *s) {
    if (!s) return;
    het_free(s->perm);
    memset(s, 0, sizeof *s);
}

void het_sampler_set_epoch(het_sampler *s, int epoch) {
    if (epoch == s->epoch) return;
    s->epoch = epoch;
    for (int64_t i = 0; i < s->n; i++) s->perm[i] = i;
    if (!s->shuffle) return;
    het_rng r;
    het_rng_seed2(&r, s->seed, (uint64_t)epoch);
    for (int64_t i = s->n - 1; i > 0; i--) {
        int64_t j = het_rng_below(&r, (uint32_t)(i + 1));
        int64_t t = s->perm[i];
        s->perm[i] = s->perm[j];
        s->perm[j] = t;
    }
}

int het_sampler_shard(const het_sampler *s, const int64_t *sizes, int n_shards, int r,
                      const int64_t **begin, int64_t *len) {
    if (!s || !sizes || !begin || !len || n_shards < 1 || r < 0 || r >= n_shards)
        return het_error_set(HET_EINVAL, "het_sampler_shard: shard %d of %d, expected "
                             "0 <= shard < shards", r, n_shards);
    int64_t start = 0, total = 0;
    for (int i = 0; i < n_shards; i++) {
        if (sizes[i] < 0 || sizes[i] > s->n - total)
            return het_error_set(HET_EINVAL, "het_sampler_shard: shard sizes exceed the %lld "
                                 "samples (shard %d of size %lld after %lld), expected a sum "
                                 "<= %lld", (long long)s->n, i, (long long)sizes[i],
                                 (long long)total, (long long)s->n);
        if (i == r) start = total;
        total += sizes[i];
    }
    *begin = s->perm + start;
    *len = sizes[r];
    return HET_OK;
}

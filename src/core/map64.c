/* A map from 64-bit keys to ints (map64.h). */
#include <stdlib.h>

#include "core/map64.h"
#include "hetrain/core.h"

static size_t slot(uint64_t key, size_t cap) {
    key ^= key >> 33, key *= 0xff51afd7ed558ccdULL, key ^= key >> 33; /* murmur3's finalizer */
    return (size_t)key & (cap - 1);
}

int het_map64_get(const het_map64 *m, uint64_t key, int missing) {
    if (!m->cap) return missing;
    for (size_t i = slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (!m->used[i]) return missing;
        if (m->key[i] == key) return m->val[i];
    }
}

static void put_in(uint64_t *keys, int *vals, unsigned char *used, size_t cap, uint64_t key,
                   int val, size_t *n) {
    size_t i = slot(key, cap);
    while (used[i] && keys[i] != key) i = (i + 1) & (cap - 1);
    if (!used[i]) used[i] = 1, keys[i] = key, (*n)++;
    vals[i] = val;
}

int het_map64_put(het_map64 *m, uint64_t key, int val) {
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64, n = 0;
        uint64_t *k = malloc(cap * sizeof *k);
        int *v = malloc(cap * sizeof *v);
        unsigned char *u = calloc(cap, 1);
        if (!k || !v || !u) {
            free(k), free(v), free(u);
            return het_error_set(HET_ENOMEM, "map: out of memory for %zu entries", cap);
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->used[i]) put_in(k, v, u, cap, m->key[i], m->val[i], &n);
        het_map64_free(m);
        m->key = k, m->val = v, m->used = u, m->cap = cap, m->n = n;
    }
    put_in(m->key, m->val, m->used, m->cap, key, val, &m->n);
    return HET_OK;
}

void het_map64_free(het_map64 *m) {
    free(m->key), free(m->val), free(m->used);
    m->key = NULL, m->val = NULL, m->used = NULL, m->cap = m->n = 0;
}

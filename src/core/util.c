/* RNG (xoshiro256** seeded by splitmix64), monotonic timer, aligned allocation, CRC-32. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <zlib.h>

#include "hetrain/core.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void het_rng_seed(het_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

void het_rng_seed2(het_rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = seed;
    uint64_t a = splitmix64(&x);
    x = stream ^ 0x5851f42d4c957f2dULL;
    het_rng_seed(r, a ^ splitmix64(&x));
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t het_rng_u64(het_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint32_t het_rng_below(het_rng *r, uint32_t n) {
    /* Lemire's multiply-shift with rejection: unbiased. */
    uint64_t m = (uint64_t)(uint32_t)(het_rng_u64(r) >> 32) * n;
    uint32_t lo = (uint32_t)m;
    if (lo < n) {
        uint32_t t = (uint32_t)(-n) % n;
        while (lo < t) {
            m = (uint64_t)(uint32_t)(het_rng_u64(r) >> 32) * n;
            lo = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

float het_rng_uniform(het_rng *r) { return (float)(het_rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

float het_rng_normal(het_rng *r) {
    double u1 = ((double)(het_rng_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (double)(het_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

double het_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* het_alloc keeps a 64-byte header before each block: its size and whether it was mapped.
 * Blocks of HET_ALLOC_MAP bytes and more are anonymous mappings, whose pages are zero without a
 * write and resident only once touched: a model's activations are sized for the largest batch it
 * may run (the global batch), a rank touches the rows of its own. Under a sanitizer every block
 * comes from the C allocator, so that its leak check sees it (ASan's run of the suite does). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HET_ALLOC_MAP ((size_t)-1)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define HET_ALLOC_MAP ((size_t)-1)
#endif
#endif
#ifndef HET_ALLOC_MAP
#define HET_ALLOC_MAP ((size_t)1 << 20)
#endif
enum { ALLOC_HEAD = 64 };
typedef struct {
    size_t total; /* bytes from the block's start, header included */
    int mapped;
} alloc_head;

void *het_alloc(size_t bytes) {
    if (bytes == 0) bytes = 64;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes || rounded > SIZE_MAX - 2 * 4096) {
        het_error_set(HET_ENOMEM, "allocation of %zu bytes overflows", bytes);
        return NULL;
    }
    size_t total = rounded + ALLOC_HEAD;
    char *base;
    int mapped = total >= HET_ALLOC_MAP;
    if (mapped) {
        void *q = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        base = q == MAP_FAILED ? NULL : q;
    } else {
        base = aligned_alloc(64, total);
        if (base) memset(base, 0, total);
    }
    if (!base) {
        het_error_set(HET_ENOMEM, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    alloc_head *h = (alloc_head *)(void *)base;
    h->total = total;
    h->mapped = mapped;
    return base + ALLOC_HEAD;
}

void het_free(void *p) {
    if (!p) return;
    char *base = (char *)p - ALLOC_HEAD;
    const alloc_head *h = (const alloc_head *)(void *)base;
    if (h->mapped)
        munmap(base, h->total);
    else
        free(base);
}

uint32_t het_crc32(uint32_t crc, const void *buf, size_t n) {
    const unsigned char *p = buf;
    while (n > 0) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return crc;
}

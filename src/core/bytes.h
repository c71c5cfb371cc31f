/* Little-endian encoding of integers and floats into byte buffers, for checkpoint sections and
 * the safetensors header. Internal to the library. */
#ifndef HET_CORE_BYTES_H
#define HET_CORE_BYTES_H

#include <stdint.h>
#include <string.h>

static inline void het_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void het_put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t het_get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static inline uint64_t het_get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A write cursor over a fixed buffer; `n` counts what was (or would have been) written. */
typedef struct het_wbuf {
    uint8_t *p;
    size_t cap, n;
} het_wbuf;

static inline void het_w_bytes(het_wbuf *b, const void *src, size_t k) {
    if (b->n + k <= b->cap) memcpy(b->p + b->n, src, k);
    b->n += k;
}
static inline void het_w_u32(het_wbuf *b, uint32_t v) {
    uint8_t t[4];
    het_put_u32(t, v);
    het_w_bytes(b, t, 4);
}
static inline void het_w_u64(het_wbuf *b, uint64_t v) {
    uint8_t t[8];
    het_put_u64(t, v);
    het_w_bytes(b, t, 8);
}
static inline void het_w_f32(het_wbuf *b, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    het_w_u32(b, u);
}
static inline void het_w_f64(het_wbuf *b, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    het_w_u64(b, u);
}
/* A fixed-width, NUL-padded string field. */
static inline void het_w_str(het_wbuf *b, const char *s, size_t width) {
    uint8_t t[64] = {0};
    size_t k = strlen(s);
    if (k > width) k = width;
    if (width > sizeof t) width = sizeof t;
    memcpy(t, s, k);
    het_w_bytes(b, t, width);
}

/* A read cursor; the caller has checked the total length, so reads never run past the end. */
typedef struct het_rbuf {
    const uint8_t *p;
    size_t n;
} het_rbuf;

static inline uint32_t het_r_u32(het_rbuf *b) {
    uint32_t v = het_get_u32(b->p + b->n);
    b->n += 4;
    return v;
}
static inline uint64_t het_r_u64(het_rbuf *b) {
    uint64_t v = het_get_u64(b->p + b->n);
    b->n += 8;
    return v;
}
static inline float het_r_f32(het_rbuf *b) {
    uint32_t u = het_r_u32(b);
    float v;
    memcpy(&v, &u, 4);
    return v;
}
static inline double het_r_f64(het_rbuf *b) {
    uint64_t u = het_r_u64(b);
    double v;
    memcpy(&v, &u, 8);
    return v;
}
/* Copies a fixed-width string field into dst (dst_len >= width + 1), NUL-terminated. */
static inline void het_r_str(het_rbuf *b, char *dst, size_t width) {
    memcpy(dst, b->p + b->n, width);
    dst[width] = '\0';
    b->n += width;
}

#endif

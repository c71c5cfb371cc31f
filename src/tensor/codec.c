/* The codecs of the Q-FB pipeline (hetrain/codec.h): activations as affine uint8, gradients as
 * "2-Step GC" (sparsify, then quantize) with error feedback.
 *
 * DESIGN
 * - q8 keeps min as a float rather than an integer zero point: code 0 is exactly min, a
 *   constant tensor decodes exactly, and no rounding of a zero point adds to the error. The
 *   scale is rounded up to a float (nextafterf) when rounding to nearest made it smaller than
 *   (max - min) / 255, so every code lies in 0..255 without clamping off more than half a step.
 *   Encode and decode work in double: max - min and min + 255 * scale may exceed FLT_MAX
 *   (values near +-3e38) although every input and output is a float.
 * - gc runs in three passes over n: (A) v = g + r checked finite, max |v| and the count of
 *   threshold mode, |v| into `work` for top-k, nothing of the caller's written, so a failure
 *   leaves r as it was; (B) top-k only: a radix select over the bits of |v| (kth_largest)
 *   finds T, the k-th largest |v|, and how many are > T; (C) one pass in index order
 *   keeps |v| > T and the first k - count(> T) of |v| == T (ties to lower indices), writes
 *   indices and codes, and sets r. The indices come out ascending without a sort.
 * - The largest kept |v| is the largest |v| of all whenever anything is kept (top-k keeps it,
 *   the threshold keeps it if it keeps anything), so pass A already knows the scale.
 * - The dequantized value is (float)code * scale in the encoder's residual and in the decoder:
 *   one function, the same float product, so decoded + residual == v to the rounding of one
 *   subtraction per element. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "core/bytes.h"
#include "hetrain/codec.h"
#include "hetrain/core.h"

#define Q8_VERSION 1

/* ---- activations ---- */

size_t het_q8_bytes(size_t n) { return HET_CODEC_HEADER + n; }

int het_q8_encode(uint8_t *codes, het_q8_params *p, const float *x, size_t n) {
    p->min = p->scale = 0.0f;
    if (n == 0) return HET_OK;
    float lo = x[0], hi = x[0];
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            return het_error_set(HET_EINVAL, "het_q8_encode: x[%zu] = %g is not finite", i,
                                 (double)x[i]);
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    double range = (double)hi - (double)lo;
    float scale = (float)(range / 255.0);
    if ((double)scale * 255.0 < range) scale = nextafterf(scale, INFINITY);
    p->min = lo;
    p->scale = scale;
    if (scale == 0.0f) {
        memset(codes, 0, n);
        return HET_OK;
    }
    /* t = (x - min) / scale lies in [0, 255] (scale was rounded up); + 0.5 and truncation is
     * round to nearest for t >= 0 (cvttsd2si, no libm call); the clamp only guards the
     * reciprocal's last bit */
    double inv = 1.0 / (double)scale, dlo = (double)lo;
    for (size_t i = 0; i < n; i++) {
        int q = (int)(((double)x[i] - dlo) * inv + 0.5);
        codes[i] = (uint8_t)(q > 255 ? 255 : q);
    }
    return HET_OK;
}

void het_q8_decode(float *x, const uint8_t *codes, size_t n, het_q8_params p) {
    double lo = (double)p.min, s = (double)p.scale;
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (double)codes[i] * s);
}

int het_q8_pack(uint8_t *buf, size_t cap, const float *x, size_t n) {
    if (n > UINT32_MAX)
        return het_error_set(HET_EINVAL, "het_q8_pack: %zu elements, at most %u", n,
                             (unsigned)UINT32_MAX);
    if (cap < het_q8_bytes(n))
        return het_error_set(HET_EINVAL, "het_q8_pack: buffer of %zu bytes, %zu needed", cap,
                             het_q8_bytes(n));
    het_q8_params p;
    int st = het_q8_encode(buf + HET_CODEC_HEADER, &p, x, n);
    if (st) return st;
    het_wbuf w = {buf, cap, 0};
    uint8_t kind[4] = {HET_Q8_KIND, Q8_VERSION, 0, 0};
    het_w_bytes(&w, kind, 4);
    het_w_u32(&w, (uint32_t)n);
    het_w_f32(&w, p.min);
    het_w_f32(&w, p.scale);
    return HET_OK;
}

/* A bad header byte: the message names the field, the value and the expected value. */
static int bad_byte(const char *who, const char *what, unsigned got, unsigned want) {
    return het_error_set(HET_EFORMAT, "%s: %s 0x%02x, expected 0x%02x", who, what, got, want);
}

int het_q8_unpack(float *x, size_t n, const uint8_t *buf, size_t len) {
    const char *who = "het_q8_unpack";
    if (len < HET_CODEC_HEADER)
        return het_error_set(HET_EFORMAT, "%s: %zu bytes, shorter than the %d-byte header", who,
                             len, HET_CODEC_HEADER);
    if (buf[0] != HET_Q8_KIND) return bad_byte(who, "kind", buf[0], HET_Q8_KIND);
    if (buf[1] != Q8_VERSION) return bad_byte(who, "version", buf[1], Q8_VERSION);
    if (buf[2] || buf[3]) return bad_byte(who, "reserved byte", buf[2] | buf[3], 0);
    het_rbuf r = {buf, 4};
    uint32_t hn = het_r_u32(&r);
    het_q8_params p;
    p.min = het_r_f32(&r);
    p.scale = het_r_f32(&r);
    if ((size_t)hn != n)
        return het_error_set(HET_EFORMAT, "%s: header says %u elements, expected %zu", who,
                             (unsigned)hn, n);
    if (len != het_q8_bytes(n))
        return het_error_set(HET_EFORMAT, "%s: %zu bytes, expected %zu (16 + %zu codes)", who,
                             len, het_q8_bytes(n), n);
    if (!isfinite(p.min) || !isfinite(p.scale) || p.scale < 0.0f ||
        fabs((double)p.min + 255.0 * (double)p.scale) > (double)FLT_MAX)
        return het_error_set(HET_EFORMAT, "%s: min %g, scale %g: expected finite, scale >= 0 "
                             "and min + 255 scale a float", who, (double)p.min,
                             (double)p.scale);
    het_q8_decode(x, buf + HET_CODEC_HEADER, n, p);
    return HET_OK;
}

/* ---- gradients ---- */

size_t het_gradc_k_of_ratio(double ratio, size_t n) {
    if (n == 0) return 0;
    if (!(ratio > 0.0)) return 1;
    if (ratio >= 1.0) return n;
    double x = ratio * (double)n, near = nearbyint(x);
    double k = fabs(x - near) <= 1e-9 * x ? near : ceil(x);
    if (k < 1.0) return 1;
    return k >= (double)n ? n : (size_t)k;
}

/* Value width w and whether the form is sparse (an index list): see codec.h. */
static size_t gc_width(int quantize) { return quantize ? 1 : 4; }
static int gc_sparse(size_t n, size_t k, size_t w) { return k * (4 + w) < n * w; }

size_t het_gradc_bytes(size_t n, size_t k, int quantize) {
    size_t w = gc_width(quantize);
    return HET_CODEC_HEADER + (gc_sparse(n, k, w) ? k * (4 + w) : n * w);
}

/* The value a code stands for, the same float product in encoder and decoder. */
static inline float gc_dequant(int q, float scale) { return (float)q * scale; }

/* Symmetric int8 code of v, scale > 0: nearest, ties away from zero, within -127..127. */
static inline int gc_quant(float v, float inv) {
    float t = fabsf(v) * inv;
    int q = t >= 127.0f ? 127 : (int)(t + 0.5f);
    return v < 0.0f ? -q : q;
}

/* The k-th largest (k in 1..n) of a[n] (every a[i] >= 0 and finite, so that their bits order
 * them as unsigned integers), which it overwrites: a radix select, three passes of 11, 11 and
 * 10 bits, each a histogram of the candidates left, the bucket that holds the k-th largest,
 * and the candidates of that bucket moved to the front. O(n) with branch-free loops. */
static inline uint32_t f_bits(const float *a, size_t i) {
    uint32_t v;
    memcpy(&v, a + i, sizeof v);
    return v;
}

static float kth_largest(float *a, size_t n, size_t k, size_t *above) {
    static const int shift[3] = {21, 10, 0}, width[3] = {11, 11, 10};
    *above = 0;
    uint32_t prefix = 0, mask = 0;
    size_t m = n, want = k; /* candidates a[0, m); the want-th largest of them */
    for (int pass = 0; pass < 3; pass++) {
        size_t hist[2048] = {0};
        const uint32_t sh = (uint32_t)shift[pass], wm = (1u << width[pass]) - 1u;
        for (size_t i = 0; i < m; i++) hist[(f_bits(a, i) >> sh) & wm]++;
        uint32_t b = wm;
        for (;; b--) { /* from the top: the bucket where the count reaches want */
            if (hist[b] >= want) break;
            want -= hist[b];
            *above += hist[b]; /* all of them larger than the k-th */
        }
        prefix |= b << sh;
        mask |= wm << sh;
        size_t w = 0;
        for (size_t i = 0; i < m; i++) {
            const float v = a[i];
            a[w] = v;
            w += (f_bits(a, i) & mask) == prefix;
        }
        m = w;
    }
    float t;
    memcpy(&t, &prefix, sizeof t);
    return t;
}

/* Step 1's rule for one |v| in index order: a copy per pass, since top-k counts the ties. */
typedef struct gc_sel {
    int mode;
    float t;     /* top-k: T, the k-th largest |v|; threshold: the threshold */
    size_t ties; /* top-k: how many |v| == T are still kept */
} gc_sel;

static inline int gc_take(gc_sel *s, float a) {
    if (s->mode == HET_GRADC_NONE) return 1;
    if (s->mode == HET_GRADC_THRESHOLD) return a >= s->t;
    if (a > s->t) return 1;
    if (a == s->t && s->ties) {
        s->ties--;
        return 1;
    }
    return 0;
}

static int gc_check_config(const het_gradc_config *c, size_t n) {
    const char *who = "het_gradc_encode";
    if (n > UINT32_MAX)
        return het_error_set(HET_EINVAL, "%s: %zu elements, at most %u", who, n,
                             (unsigned)UINT32_MAX);
    switch (c->mode) {
    case HET_GRADC_NONE:
        return HET_OK;
    case HET_GRADC_TOPK:
        if (c->k < 1 || c->k > n)
            return het_error_set(HET_EINVAL, "%s: top-k with k = %zu of %zu elements, expected "
                                 "1..%zu", who, c->k, n, n);
        return HET_OK;
    case HET_GRADC_THRESHOLD:
        if (!(c->threshold >= 0.0f) || isinf(c->threshold))
            return het_error_set(HET_EINVAL, "%s: threshold %g, expected finite and >= 0", who,
                                 (double)c->threshold);
        return HET_OK;
    default:
        return het_error_set(HET_EINVAL, "%s: mode %d, expected HET_GRADC_NONE, HET_GRADC_TOPK or "
                             "HET_GRADC_THRESHOLD", who, c->mode);
    }
}

int het_gradc_encode(uint8_t *buf, size_t cap, size_t *len, float *r, const float *g, size_t n,
                     const het_gradc_config *cfg, float *work) {
    int st = gc_check_config(cfg, n);
    if (st) return st;
    int topk = cfg->mode == HET_GRADC_TOPK;
    float *own = NULL;
    if (topk && !work) {
        own = het_alloc(sizeof(float) * n);
        if (!own) return HET_ENOMEM;
        work = own;
    }
    /* pass A: v checked, max |v|, |v| for the selection; nothing of the caller's written */
    float amax = 0.0f;
    size_t k = cfg->mode == HET_GRADC_TOPK ? cfg->k : cfg->mode == HET_GRADC_NONE ? n : 0;
    for (size_t i = 0; i < n; i++) {
        float v = g[i] + r[i];
        if (!isfinite(v)) {
            het_free(own);
            return het_error_set(HET_EINVAL, "het_gradc_encode: g[%zu] + r[%zu] = %g + %g is not "
                                 "finite", i, i, (double)g[i], (double)r[i]);
        }
        float a = fabsf(v);
        amax = a > amax ? a : amax;
        if (topk) work[i] = a;
        else if (cfg->mode == HET_GRADC_THRESHOLD) k += a >= cfg->threshold;
    }
    gc_sel sel = {cfg->mode, cfg->threshold, 0};
    if (topk) { /* pass B */
        size_t above;
        sel.t = kth_largest(work, n, k, &above);
        sel.ties = k - above;
    }
    het_free(own);
    size_t w = gc_width(cfg->quantize), need = het_gradc_bytes(n, k, cfg->quantize);
    if (cap < need)
        return het_error_set(HET_EINVAL, "het_gradc_encode: buffer of %zu bytes, %zu needed "
                             "(n %zu, k %zu)", cap, need, n, k);
    float scale = cfg->quantize && k ? amax / 127.0f : 0.0f;
    float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    if (!isfinite(inv)) inv = 0.0f, scale = 0.0f; /* scale subnormal: send zeros, r keeps v */
    het_wbuf hw = {buf, cap, 0};
    uint8_t kind[4] = {HET_GRADC_KIND, (uint8_t)w, 0, 0};
    het_w_bytes(&hw, kind, 4);
    het_w_u32(&hw, (uint32_t)n);
    het_w_u32(&hw, (uint32_t)k);
    het_w_f32(&hw, scale);
    /* pass C: in index order; sparse: indices at idx, values at val; dense: values at val[i] */
    int sparse = gc_sparse(n, k, w);
    uint8_t *idx = buf + HET_CODEC_HEADER, *val = idx + (sparse ? 4 * k : 0);
    if (!sparse) memset(val, 0, n * w);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        float v = g[i] + r[i];
        if (!gc_take(&sel, fabsf(v))) {
            r[i] = v;
            continue;
        }
        size_t at = sparse ? j : i;
        if (sparse) het_put_u32(idx + 4 * j, (uint32_t)i);
        j++;
        if (cfg->quantize) {
            int q = inv > 0.0f ? gc_quant(v, inv) : 0;
            val[at] = (uint8_t)(int8_t)q;
            r[i] = v - gc_dequant(q, scale);
        } else {
            uint32_t u;
            memcpy(&u, &v, 4);
            het_put_u32(val + 4 * at, u);
            r[i] = 0.0f;
        }
    }
    *len = need;
    return HET_OK;
}

int het_gradc_decode(float *out, size_t n, const uint8_t *buf, size_t len, int add) {
    const char *who = "het_gradc_decode";
    if (len < HET_CODEC_HEADER)
        return het_error_set(HET_EFORMAT, "%s: %zu bytes, shorter than the %d-byte header", who,
                             len, HET_CODEC_HEADER);
    if (buf[0] != HET_GRADC_KIND) return bad_byte(who, "kind", buf[0], HET_GRADC_KIND);
    if (buf[1] != 1 && buf[1] != 4)
        return het_error_set(HET_EFORMAT, "%s: value width %u, expected 1 (int8) or 4 (fp32)",
                             who, buf[1]);
    if (buf[2] || buf[3]) return bad_byte(who, "reserved byte", buf[2] | buf[3], 0);
    size_t w = buf[1];
    het_rbuf rb = {buf, 4};
    size_t hn = het_r_u32(&rb), k = het_r_u32(&rb);
    float scale = het_r_f32(&rb);
    if (hn != n)
        return het_error_set(HET_EFORMAT, "%s: header says %zu elements, expected %zu", who, hn,
                             n);
    if (k > n)
        return het_error_set(HET_EFORMAT, "%s: %zu elements kept of %zu, expected at most %zu",
                             who, k, n, n);
    size_t need = het_gradc_bytes(n, k, w == 1);
    if (len != need)
        return het_error_set(HET_EFORMAT, "%s: %zu bytes, expected %zu (n %zu, k %zu, %s)", who,
                             len, need, n, k, w == 1 ? "int8" : "fp32");
    if (w == 1 ? (!isfinite(scale) || scale < 0.0f || 127.0 * (double)scale > (double)FLT_MAX)
               : (scale != 0.0f))
        return het_error_set(HET_EFORMAT, "%s: scale %g, expected %s", who, (double)scale,
                             w == 1 ? "finite, >= 0, 127 scale a float" : "0 (fp32 values)");
    int sparse = gc_sparse(n, k, w);
    size_t nv = sparse ? k : n;
    const uint8_t *idx = buf + HET_CODEC_HEADER, *val = idx + (sparse ? 4 * k : 0);
    for (size_t j = 0; sparse && j < k; j++) {
        uint32_t i = het_get_u32(idx + 4 * j);
        if (i >= n || (j && i <= het_get_u32(idx + 4 * (j - 1))))
            return het_error_set(HET_EFORMAT, "%s: index %zu is %u, expected ascending and < %zu",
                                 who, j, (unsigned)i, n);
    }
    for (size_t j = 0; j < nv; j++) {
        if (w == 1 && val[j] == 0x80)
            return het_error_set(HET_EFORMAT, "%s: value %zu is code -128, expected -127..127",
                                 who, j);
        if (w == 4) {
            uint32_t u = het_get_u32(val + 4 * j);
            float f;
            memcpy(&f, &u, 4);
            if (!isfinite(f))
                return het_error_set(HET_EFORMAT, "%s: value %zu is %g, expected finite", who, j,
                                     (double)f);
        }
    }
    if (!add) memset(out, 0, sizeof(float) * n);
    for (size_t j = 0; j < nv; j++) {
        size_t i = sparse ? het_get_u32(idx + 4 * j) : j;
        float f;
        if (w == 1) {
            f = gc_dequant((int8_t)val[j], scale);
        } else {
            uint32_t u = het_get_u32(val + 4 * j);
            memcpy(&f, &u, 4);
        }
        if (!add) out[i] = f;
        else if (f != 0.0f) out[i] += f; /* the zeros of a dense form leave out as it was */
    }
    return HET_OK;
}

/* Max pooling, square window, no padding (PyTorch MaxPool2d with ceil_mode off; stride <= 0
 * means stride = kernel, PyTorch's default). A NaN in a window makes the output NaN, as in
 * PyTorch.
 *
 * No cache: backward finds each window's argmax again, as the first element (row-major window
 * order) equal to the output, or the first NaN. That is the first maximum, which is where
 * PyTorch sends the gradient on ties (with a NaN in the window we send it to the first
 * element). Recomputing costs less than storing and re-reading an index per output, and it
 * lets forward be a plain max that the compiler vectorizes. The 2x2 stride-2 case (LeNet,
 * VGG-style nets) has its own loops: a vertical max of two input rows (contiguous, vectorized)
 * then a horizontal max of pairs; its backward writes every din element once (SSE2 on x86-64,
 * where the compiler's scalar code measured 7x slower) instead of clearing then scattering.
 * On CPUs with AVX-512 (tensor/internal.h: het_simd_level) the 2x2 forward runs 16 outputs per
 * step instead, even / odd columns split by two-source permutes, the row end masked (for rows
 * of at least POOL_AVX512_MIN_OW outputs): 2.2x faster on LeNet's first pool (17 -> 7.8 us per
 * 16 samples). An AVX-512 backward measured no faster than the SSE2 one (16.5 vs 18.7 us: it
 * is bound by the writes of din, not by instructions), so there is none.
 *
 * A channel-blocked input (nn.h) runs the same rules 16 channels at a time: each window
 * position is a vector of 16 channels, so forward is a max of whole vectors and backward a
 * masked pass, with no shuffles (pool_blk_forward / pool_blk_backward). */
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/clones.h"
#include "core/vectors.h"
#include "hetrain/nn.h"
#include "hetrain/tensor.h"
#include "tensor/internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define POOL_AVX512 1
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f")))
/* Narrower rows (LeNet's second pool: 5 outputs) measured faster on the SSE2 code. */
#define POOL_AVX512_MIN_OW 8

AVX512 static inline __mmask16 lanes16(int n) {
    return n <= 0 ? 0 : n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* max_nan of tensor lanes: max_ps gives b when either is NaN; then a's NaN wins. */
AVX512 static inline __m512 max_nan16(__m512 a, __m512 b) {
    return _mm512_mask_mov_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
}

/* Even and odd columns of the 32 floats lo:hi. */
AVX512 static inline __m512 evens(__m512 lo, __m512 hi) {
    const __m512i idx = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    return _mm512_permutex2var_ps(lo, idx, hi);
}
AVX512 static inline __m512 odds(__m512 lo, __m512 hi) {
    const __m512i idx = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    return _mm512_permutex2var_ps(lo, idx, hi);
}

AVX512 static void pool2_row_avx512(float *o, const float *r0, const float *r1, int ow) {
    for (int x = 0; x < ow; x += 16) {
        __mmask16 m0 = lanes16(2 * (ow - x)), m1 = lanes16(2 * (ow - x) - 16);
        const int i = 2 * x;
        __m512 lo = max_nan16(_mm512_maskz_loadu_ps(m0, r0 + i), _mm512_maskz_loadu_ps(m0, r1 + i));
        __m512 hi = max_nan16(_mm512_maskz_loadu_ps(m1, r0 + i + 16), _mm512_maskz_loadu_ps(m1, r1 + i + 16));
        _mm512_mask_storeu_ps(o + x, lanes16(ow - x), max_nan16(evens(lo, hi), odds(lo, hi)));
    }
}

#endif

typedef struct maxpool {
    het_layer base;
    int k, stride;
    int C, H, W, oh, ow; /* from plan() */
} maxpool;

static int maxpool_plan(het_layer *l, het_shape in, het_layer_plan *p) {
    maxpool *m = (maxpool *)l;
    if (m->k < 1) return het_error_set(HET_EINVAL, "maxpool: kernel %d < 1", m->k);
    if (m->stride <= 0) m->stride = m->k;
    if (in.c < 1 || in.h < m->k || in.w < m->k)
        return het_error_set(HET_ESHAPE, "maxpool: input %dx%dx%d smaller than kernel %d", in.c,
                             in.h, in.w, m->k);
    m->C = in.c;
    m->H = in.h;
    m->W = in.w;
    m->oh = (in.h - m->k) / m->stride + 1;
    m->ow = (in.w - m->k) / m->stride + 1;
    memset(p, 0, sizeof *p);
    p->out = (het_shape){in.c, m->oh, m->ow};
    p->work_fixed = (size_t)in.w; /* one row for the 2x2 path */
    p->blk = HET_BLK_TAKE | HET_BLK_KEEP;
    return HET_OK;
}

/* max(a, b) that propagates NaN; branch-free selects so that loops over it vectorize. */
static inline float max_nan(float a, float b) {
    float m = a > b ? a : b; /* b when b is NaN */
    return a != a ? a : m;
}

/* v is the window's maximum m (v <= m holds for every v when m is not NaN); when m is NaN every
 * element counts, so the first one takes the gradient. */
static inline int is_max(float v, float m) { return !(v < m); }

/* 2x2 stride 2 backward, one output row: the first element of each window equal to the output
 * takes dout, the three others get 0. */
static void pool2_back_row(float *restrict d0, float *restrict d1, const float *restrict r0,
                           const float *restrict r1, const float *restrict o,
                           const float *restrict g, int ow) {
    int x = 0;
#if defined(__SSE2__)
    for (; x + 4 <= ow; x += 4) {
        int i = 2 * x;
        __m128 p0 = _mm_loadu_ps(r0 + i), p1 = _mm_loadu_ps(r0 + i + 4);
        __m128 q0 = _mm_loadu_ps(r1 + i), q1 = _mm_loadu_ps(r1 + i + 4);
        __m128 a = _mm_shuffle_ps(p0, p1, _MM_SHUFFLE(2, 0, 2, 0)); /* even columns */
        __m128 b = _mm_shuffle_ps(p0, p1, _MM_SHUFFLE(3, 1, 3, 1)); /* odd columns */
        __m128 c = _mm_shuffle_ps(q0, q1, _MM_SHUFFLE(2, 0, 2, 0));
        __m128 m = _mm_loadu_ps(o + x), gv = _mm_loadu_ps(g + x);
        __m128 ea = _mm_cmpnlt_ps(a, m);
        __m128 eb = _mm_andnot_ps(ea, _mm_cmpnlt_ps(b, m));
        __m128 eab = _mm_or_ps(ea, eb);
        __m128 ec = _mm_andnot_ps(eab, _mm_cmpnlt_ps(c, m));
        __m128 ta = _mm_and_ps(ea, gv), tb = _mm_and_ps(eb, gv), tc = _mm_and_ps(ec, gv);
        __m128 td = _mm_andnot_ps(_mm_or_ps(eab, ec), gv);
        _mm_storeu_ps(d0 + i, _mm_unpacklo_ps(ta, tb));
        _mm_storeu_ps(d0 + i + 4, _mm_unpackhi_ps(ta, tb));
        _mm_storeu_ps(d1 + i, _mm_unpacklo_ps(tc, td));
        _mm_storeu_ps(d1 + i + 4, _mm_unpackhi_ps(tc, td));
    }
#endif
    for (; x < ow; x++) {
        int i = 2 * x;
        float mv = o[x], gv = g[x];
        int ea = is_max(r0[i], mv), eb = !ea && is_max(r0[i + 1], mv);
        int ec = !ea && !eb && is_max(r1[i], mv);
        d0[i] = ea ? gv : 0.0f;
        d0[i + 1] = eb ? gv : 0.0f;
        d1[i] = ec ? gv : 0.0f;
        d1[i + 1] = !ea && !eb && !ec ? gv : 0.0f;
    }
}

#if defined(__SSE2__)
static inline __m128 max_nan4(__m128 a, __m128 b) {
    __m128 m = _mm_max_ps(a, b), nan = _mm_cmpunord_ps(a, a); /* max_ps gives b on NaN */
    return _mm_or_ps(_mm_and_ps(nan, a), _mm_andnot_ps(nan, m));
}
#endif

/* 2x2 stride 2, one output row: t = rows r0, r1 maxed vertically, then pairs. */
static void pool2_row(float *restrict o, float *restrict t, const float *restrict r0,
                      const float *restrict r1, int ow) {
    int x = 0;
#if defined(__SSE2__)
    for (; x + 4 <= ow; x += 4) {
        int i = 2 * x;
        __m128 v0 = max_nan4(_mm_loadu_ps(r0 + i), _mm_loadu_ps(r1 + i));
        __m128 v1 = max_nan4(_mm_loadu_ps(r0 + i + 4), _mm_loadu_ps(r1 + i + 4));
        _mm_storeu_ps(o + x, max_nan4(_mm_shuffle_ps(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)),
                                      _mm_shuffle_ps(v0, v1, _MM_SHUFFLE(3, 1, 3, 1))));
    }
#endif
    int n = 2 * ow, i = 2 * x;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) t[i + j] = max_nan(r0[i + j], r1[i + j]);
    for (; i < n; i++) t[i] = max_nan(r0[i], r1[i]);
    for (; x + 8 <= ow; x += 8)
        for (int j = 0; j < 8; j++) o[x + j] = max_nan(t[2 * (x + j)], t[2 * (x + j) + 1]);
    for (; x < ow; x++) o[x] = max_nan(t[2 * x], t[2 * x + 1]);
}

/* Channel-blocked forward: every sample's blocks of 16 channels, window elements in row-major
 * order (the first is taken again: harmless for a max); the 16 lanes of a position as one
 * AVX-512 vector where the CPU has it (GCC's generic vectors compiled max_nan's NaN test to
 * scalar code in a target_clones function), else a loop over them. */
#define POOL_BLK_WINDOWS(...)                                                                    \
    const size_t W = (size_t)m->W, hw = (size_t)m->H * W, ohw = (size_t)m->oh * (size_t)m->ow; \
    for (size_t b = 0; b < (size_t)batch * (size_t)(m->C / HET_BLK); b++)                      \
        for (int oy = 0; oy < m->oh; oy++)                                                     \
            for (int ox = 0; ox < m->ow; ox++) {                                               \
                const float *w = in + b * hw * HET_BLK +                                       \
                                 ((size_t)(oy * m->stride) * W + (size_t)(ox * m->stride)) * HET_BLK; \
                float *o = out + (b * ohw + (size_t)oy * (size_t)m->ow + (size_t)ox) * HET_BLK; \
                __VA_ARGS__                                                                    \
            }

#ifdef POOL_AVX512
AVX512 static void pool_blk_forward_avx512(const maxpool *m, const float *in, float *out,
                                           int batch) {
    POOL_BLK_WINDOWS({
        __m512 best = _mm512_loadu_ps(w);
        for (int ki = 0; ki < m->k; ki++)
            for (int kj = 0; kj < m->k; kj++)
                best = max_nan16(best, _mm512_loadu_ps(w + ((size_t)ki * W + (size_t)kj) * HET_BLK));
        _mm512_storeu_ps(o, best);
    })
}
#endif

static void pool_blk_forward(const maxpool *m, const float *in, float *out, int batch) {
#ifdef POOL_AVX512
    if (het_simd_level() >= HET_SIMD_AVX512) {
        pool_blk_forward_avx512(m, in, out, batch);
        return;
    }
#endif
    POOL_BLK_WINDOWS({
        for (int j = 0; j < HET_BLK; j++) o[j] = w[j];
        for (int ki = 0; ki < m->k; ki++)
            for (int kj = 0; kj < m->k; kj++)
                for (int j = 0; j < HET_BLK; j++)
                    o[j] = max_nan(o[j], w[((size_t)ki * W + (size_t)kj) * HET_BLK + (size_t)j]);
    })
}

/* Channel-blocked backward: din is cleared, then each window's first maximum per channel gets
 * the output's gradient (added: windows may overlap). */
HET_CLONES
static void pool_blk_backward(const maxpool *m, const float *in, const float *out,
                              const float *dout, float *din, int batch) {
    const size_t W = (size_t)m->W, hw = (size_t)m->H * W, ohw = (size_t)m->oh * (size_t)m->ow;
    const het_v16f z = {0};
    memset(din, 0, sizeof(float) * hw * (size_t)m->C * (size_t)batch);
    for (size_t b = 0; b < (size_t)batch * (size_t)(m->C / HET_BLK); b++) {
        const float *xb = in + b * hw * HET_BLK;
        float *db = din + b * hw * HET_BLK;
        for (int oy = 0; oy < m->oh; oy++)
            for (int ox = 0; ox < m->ow; ox++) {
                const size_t o = (b * ohw + (size_t)oy * (size_t)m->ow + (size_t)ox) * HET_BLK;
                const size_t base = ((size_t)(oy * m->stride) * W + (size_t)(ox * m->stride)) * HET_BLK;
                const het_v16f mv = HET_LD16(out + o);
                het_v16f gv = HET_LD16(dout + o);
                for (int ki = 0; ki < m->k; ki++)
                    for (int kj = 0; kj < m->k; kj++) {
                        float *d = db + base + ((size_t)ki * W + (size_t)kj) * HET_BLK;
                        const het_v16f v = HET_LD16(xb + (d - db));
                        const het_v16i e = ~(v < mv); /* is_max; taken: later maxima get 0 */
                        HET_ST16(d, HET_LD16(d) + HET_SEL16(e, gv, z));
                        gv = HET_SEL16(e, z, gv);
                    }
            }
    }
}

static void maxpool_forward(het_layer *l, const het_exec *x, const float *in, float *out, int batch) {
    maxpool *m = (maxpool *)l;
    if (l->in_blk) {
        pool_blk_forward(m, in, out, batch);
        return;
    }
    const size_t plane = (size_t)m->H * (size_t)m->W, oplane = (size_t)m->oh * (size_t)m->ow;
    for (int sc = 0; sc < batch * m->C; sc++) { /* every (sample, channel) plane */
        const float *xp = in + (size_t)sc * plane;
        float *op = out + (size_t)sc * oplane;
        if (m->k == 2 && m->stride == 2) {
#ifdef POOL_AVX512
            if (m->ow >= POOL_AVX512_MIN_OW && het_simd_level() >= HET_SIMD_AVX512) {
                for (int oy = 0; oy < m->oh; oy++)
                    pool2_row_avx512(op + (size_t)oy * (size_t)m->ow, xp + (size_t)(2 * oy) * (size_t)m->W,
                                     xp + (size_t)(2 * oy + 1) * (size_t)m->W, m->ow);
                continue;
            }
#endif
            for (int oy = 0; oy < m->oh; oy++)
                pool2_row(op + (size_t)oy * (size_t)m->ow, x->work, xp + (size_t)(2 * oy) * (size_t)m->W,
                          xp + (size_t)(2 * oy + 1) * (size_t)m->W, m->ow);
            continue;
        }
        for (int oy = 0; oy < m->oh; oy++)
            for (int ox = 0; ox < m->ow; ox++) {
                const float *w = xp + (size_t)(oy * m->stride) * (size_t)m->W + (size_t)(ox * m->stride);
                float best = w[0];
                for (int ki = 0; ki < m->k; ki++)
                    for (int kj = 0; kj < m->k; kj++) best = max_nan(best, w[(size_t)ki * (size_t)m->W + (size_t)kj]);
                op[(size_t)oy * (size_t)m->ow + (size_t)ox] = best;
            }
    }
}

static void maxpool_backward(het_layer *l, const het_exec *x, const float *in, const float *out,
                             const float *dout, float *din, int batch) {
    (void)x;
    if (!din) return;
    maxpool *m = (maxpool *)l;
    if (l->in_blk) {
        pool_blk_backward(m, in, out, dout, din, batch);
        return;
    }
    const size_t W = (size_t)m->W, plane = (size_t)m->H * W, oplane = (size_t)m->oh * (size_t)m->ow;
    for (int sc = 0; sc < batch * m->C; sc++) {
        const float *xp = in + (size_t)sc * plane, *op = out + (size_t)sc * oplane;
        const float *gp = dout + (size_t)sc * oplane;
        float *dp = din + (size_t)sc * plane;
        if (m->k == 2 && m->stride == 2) {
            /* windows tile the plane: write each din element once; a last odd row / column
             * belongs to no window */
            for (int oy = 0; oy < m->oh; oy++) {
                const float *r0 = xp + (size_t)(2 * oy) * W, *r1 = r0 + W;
                float *d0 = dp + (size_t)(2 * oy) * W, *d1 = d0 + W;
                pool2_back_row(d0, d1, r0, r1, op + (size_t)oy * (size_t)m->ow,
                               gp + (size_t)oy * (size_t)m->ow, m->ow);
                if (m->W & 1) d0[W - 1] = d1[W - 1] = 0.0f;
            }
            if (m->H & 1) memset(dp + (plane - W), 0, sizeof(float) * W);
            continue;
        }
        memset(dp, 0, sizeof(float) * plane);
        for (int oy = 0; oy < m->oh; oy++)
            for (int ox = 0; ox < m->ow; ox++) {
                size_t base = (size_t)(oy * m->stride) * W + (size_t)(ox * m->stride), arg = base;
                float mv = op[(size_t)oy * (size_t)m->ow + (size_t)ox];
                int found = 0;
                for (int ki = 0; ki < m->k && !found; ki++)
                    for (int kj = 0; kj < m->k && !found; kj++) {
                        size_t q = base + (size_t)ki * W + (size_t)kj;
                        if (is_max(xp[q], mv)) {
                            arg = q;
                            found = 1;
                        }
                    }
                dp[arg] += gp[(size_t)oy * (size_t)m->ow + (size_t)ox];
            }
    }
}

static void maxpool_destroy(het_layer *l) { free(l); }

static const het_layer_ops maxpool_ops = {
    .name = "maxpool",
    .plan = maxpool_plan,
    .init = NULL,
    .forward = maxpool_forward,
    .backward = maxpool_backward,
    .destroy = maxpool_destroy,
};

het_layer *het_maxpool_new(int kernel, int stride) {
    maxpool *m = calloc(1, sizeof *m);
    if (!m) {
        het_error_set(HET_ENOMEM, "maxpool: out of memory");
        return NULL;
    }
    m->base.ops = &maxpool_ops;
    m->k = kernel;
    m->stride = stride;
    return &m->base;
}

/* Direct stride-1 convolution kernels (AVX-512), for layers with few channels (LeNet-5).
 *
 * DESIGN. At LeNet shapes im2col + GEMM spends most of its time outside the multiply: building
 * the column matrix (a copy of 25x the input), and OpenBLAS's small-matrix kernels on matrices
 * of 6 or 16 rows. These kernels read the zero-padded input in place instead and keep every
 * accumulator in registers:
 *  - forward (het_conv_direct): vectorized along the output row (16 pixels per zmm, masked at
 *    the row end), one block of OB output channels x NV vectors of the row accumulated in
 *    OB*NV registers over all (c, i, j); each weight is broadcast from memory into its FMA,
 *    from a transposed copy of the weights (wt[c][i][j][o]: one pointer for the OB taps).
 *    Rows of 16 pixels or fewer go NV rows per block instead. With 9-16 output channels on
 *    narrow rows (LeNet's conv2: 16 channels, 10-pixel rows) the vectors run along the
 *    channels instead (fwdoc_block), which uses every lane. Taps on all-zero padding rows are
 *    skipped. The input gradient is the same kernel on the dout padded by k-1-pad with the
 *    weights flipped and their channel axes swapped (the caller prepares both); half of its
 *    taps fall on padding, the rows of which are skipped.
 *    Measured per 16 LeNet samples (us, shared 2-core machine, best of 300): conv1 forward 37,
 *    conv2 forward 66 (x-vectorized: 92), conv2 input gradient 105, conv2 weight gradient 76-94
 *    (x-vectorized: 150), conv1 weight gradient 47-53.
 *  - input gradient with 9-16 output channels, 5x5, no padding (het_conv_direct_dx, LeNet's
 *    conv2): vectorized along the output channels instead, on channels-last copies of dout and
 *    the weights, so that no multiply-add falls on padding (half of them above): each input row
 *    sums W = ow + 4 vectors in registers, reduced by one transposing reduction (dx_block).
 *    conv2 backward (weight + input gradient) per 16 samples, side by side: 195 -> 153 us.
 *  - weight gradient (het_conv_direct_dw): dW[o][c][i][j] = sum dout[o][y][x] xp[c][y+i][x+j]
 *    over samples and pixels. For one sample, a block of OB output channels and KJ kernel
 *    columns, the OB*KJ sums stay in registers (lanes = pixels of a row) through every row
 *    (OB + KJ loads for OB*KJ FMAs), then go to vector partial sums in the scratch, reduced
 *    once after the batch. Sample by sample, its dout and input stay in L1 (1.2x faster for
 *    LeNet's conv1 than keeping the sums in registers over the whole batch). With 9-16 output
 *    channels the sums are vectorized along the channels instead (dwoc_block below).
 * Register blocks are compile-time constants (OB, NV, KJ), instantiated by macros and picked
 * from tables at run time. Everything runs in a fixed order: results are deterministic (they
 * differ from the GEMM path's only by rounding).
 * Only x86-64 with AVX-512F gets these kernels (het_simd_level() >= HET_SIMD_AVX512); elsewhere
 * het_conv_direct_ok() says no and conv2d keeps im2col + GEMM. The naive twins are in ref.c. */
#include <string.h>

#include "tensor/internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define HET_HAVE_AVX512_KERNELS 1
#include <immintrin.h>
#endif

int het_conv_direct_ok(int k, int pad) {
    return het_simd_level() >= HET_SIMD_AVX512 && k >= 1 && pad >= 0 && pad <= k - 1;
}

#ifdef HET_HAVE_AVX512_KERNELS

#define AVX512 __attribute__((target("avx512f")))
#define INLINE_AVX512 __attribute__((target("avx512f"), always_inline)) static inline

/* Splits n into blocks of at most `max`, as even as possible (e.g. 6 by 4 -> 3 + 3). */
static int block_size(int n, int max) {
    int blocks = (n + max - 1) / max;
    return (n + blocks - 1) / blocks;
}

typedef struct fwd_args {
    float *out;
    const float *xp, *wt, *bias;
    int O, C, Hp, Wp, k, oh, ow, o0;
    int zlo, zhi; /* input rows outside [zlo, zhi) are zero padding: their taps are skipped */
} fwd_args;

/* Lanes [0, n) of a 16-lane mask, n clamped to [0, 16]. */
INLINE_AVX512 __mmask16 lanes(int n) {
    return n <= 0 ? 0 : n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* Output channels [o0, o0 + OB) in blocks of NV vectors: NV stretches of 16 pixels along a row
 * when rows are wider than 16, else NV rows of one vector each (so that a narrow row still
 * shares each weight broadcast between NV FMAs). The weights are transposed
 * (wt[(c*k + i)*k + j][o]) so that the OB broadcasts of one tap share a pointer. */
INLINE_AVX512 void fwd_block(const fwd_args *a, const int OB, const int NV) {
    const size_t P = (size_t)a->oh * (size_t)a->ow, O = (size_t)a->O;
    const int narrow = a->ow <= 16;
    const int ystep = narrow ? NV : 1, xstep = narrow ? 16 : 16 * NV;
    const size_t xoff = narrow ? (size_t)a->Wp : 16, ooff = narrow ? (size_t)a->ow : 16;
    for (int y = 0; y < a->oh; y += ystep)
        for (int x0 = 0; x0 < a->ow; x0 += xstep) {
            __mmask16 m[2];
            __m512 acc[16][2];
#pragma GCC unroll 2
            for (int v = 0; v < NV; v++)
                m[v] = narrow ? (y + v < a->oh ? lanes(a->ow) : 0) : lanes(a->ow - x0 - 16 * v);
#pragma GCC unroll 16
            for (int o = 0; o < OB; o++) {
                __m512 b = _mm512_set1_ps(a->bias ? a->bias[a->o0 + o] : 0.0f);
#pragma GCC unroll 2
                for (int v = 0; v < NV; v++) acc[o][v] = b;
            }
            const float *wr = a->wt + a->o0;
            for (int c = 0; c < a->C; c++)
                for (int i = 0; i < a->k; i++) {
                    if (y + i + ystep - 1 < a->zlo || y + i >= a->zhi) { /* zero rows only */
                        wr += (size_t)a->k * O;
                        continue;
                    }
                    const float *row = a->xp + ((size_t)c * (size_t)a->Hp + (size_t)(y + i)) * (size_t)a->Wp + (size_t)x0;
                    for (int j = 0; j < a->k; j++, wr += O) {
                        __m512 xv[2];
#pragma GCC unroll 2
                        for (int v = 0; v < NV; v++) xv[v] = _mm512_maskz_loadu_ps(m[v], row + j + xoff * (size_t)v);
#pragma GCC unroll 16
                        for (int o = 0; o < OB; o++) {
                            __m512 wv = _mm512_set1_ps(wr[o]);
#pragma GCC unroll 2
                            for (int v = 0; v < NV; v++) acc[o][v] = _mm512_fmadd_ps(wv, xv[v], acc[o][v]);
                        }
                    }
                }
            float *dst = a->out + (size_t)a->o0 * P + (size_t)y * (size_t)a->ow + (size_t)x0;
#pragma GCC unroll 16
            for (int o = 0; o < OB; o++)
#pragma GCC unroll 2
                for (int v = 0; v < NV; v++) _mm512_mask_storeu_ps(dst + (size_t)o * P + ooff * (size_t)v, m[v], acc[o][v]);
        }
}

/* NV = 2 always (a single-row output leaves the second row masked off) */
#define FWD(OB) AVX512 static void fwd_##OB(const fwd_args *a) { fwd_block(a, OB, 2); }
FWD(1) FWD(2) FWD(3) FWD(4) FWD(5) FWD(6) FWD(7) FWD(8) FWD(9) FWD(10) FWD(11) FWD(12)

typedef void (*fwd_fn)(const fwd_args *);
#define FWD_OB 12 /* most output channels per block: 24 accumulators */
static const fwd_fn fwd_tab[FWD_OB] = {fwd_1, fwd_2, fwd_3, fwd_4, fwd_5, fwd_6,
                                       fwd_7, fwd_8, fwd_9, fwd_10, fwd_11, fwd_12};

/* Forward vectorized along the output channels (O <= 16 lanes, masked), for rows narrower than
 * a vector (LeNet's conv2: 10 pixels, 16 channels), XB pixels of a row at a time:
 * acc[x] += xp[c][y+i][x0+x+j] (broadcast) * wt[c][i][j][0..O). The XB channel vectors are
 * staged on the stack and transposed into the NCHW output. */
INLINE_AVX512 void fwdoc_block(const fwd_args *a, int y, int x0, const int XB) {
    const size_t P = (size_t)a->oh * (size_t)a->ow, O = (size_t)a->O;
    const __mmask16 mo = lanes(a->O);
    __m512 acc[16];
    __m512 b = a->bias ? _mm512_maskz_loadu_ps(mo, a->bias) : _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int x = 0; x < XB; x++) acc[x] = b;
    const float *wr = a->wt;
    for (int c = 0; c < a->C; c++)
        for (int i = 0; i < a->k; i++) {
            if (y + i < a->zlo || y + i >= a->zhi) {
                wr += (size_t)a->k * O;
                continue;
            }
            const float *row = a->xp + ((size_t)c * (size_t)a->Hp + (size_t)(y + i)) * (size_t)a->Wp + (size_t)x0;
            for (int j = 0; j < a->k; j++, wr += O) {
                __m512 wv = _mm512_maskz_loadu_ps(mo, wr);
#pragma GCC unroll 16
                for (int x = 0; x < XB; x++) acc[x] = _mm512_fmadd_ps(_mm512_set1_ps(row[x + j]), wv, acc[x]);
            }
        }
    float t[16][16];
#pragma GCC unroll 16
    for (int x = 0; x < XB; x++) _mm512_storeu_ps(t[x], acc[x]);
    float *dst = a->out + (size_t)y * (size_t)a->ow + (size_t)x0;
    for (size_t o = 0; o < O; o++)
#pragma GCC unroll 16
        for (int x = 0; x < XB; x++) dst[o * P + (size_t)x] = t[x][o];
}

#define FWDOC(XB)                                                                             \
    AVX512 static void fwdoc_##XB(const fwd_args *a, int y, int x0) { fwdoc_block(a, y, x0, XB); }
FWDOC(1) FWDOC(2) FWDOC(3) FWDOC(4) FWDOC(5) FWDOC(6) FWDOC(7) FWDOC(8)
FWDOC(9) FWDOC(10) FWDOC(11) FWDOC(12) FWDOC(13) FWDOC(14) FWDOC(15) FWDOC(16)
#define FWDOC_XB 16
static void (*const fwdoc_tab[FWDOC_XB])(const fwd_args *, int, int) = {
    fwdoc_1, fwdoc_2, fwdoc_3, fwdoc_4, fwdoc_5, fwdoc_6, fwdoc_7, fwdoc_8,
    fwdoc_9, fwdoc_10, fwdoc_11, fwdoc_12, fwdoc_13, fwdoc_14, fwdoc_15, fwdoc_16};

typedef struct dw_args {
    float *vacc; /* [O x C x k x k] vectors of 16 partial sums (lanes: pixels of a row) */
    const float *xp, *dout;
    size_t xstride, dstride;
    int s, O, C, Hp, Wp, k, oh, ow, o0, j0;
} dw_args;

/* One sample's dW for output channels [o0, o0 + OB), kernel columns [j0, j0 + KJ), every
 * (c, i), added to the vector partial sums (one sample's data stays in L1; the vectors are
 * reduced once, after the batch). */
INLINE_AVX512 void dw_block(const dw_args *a, const int OB, const int KJ) {
    const size_t kk = (size_t)a->k * (size_t)a->k, ckk = (size_t)a->C * kk;
    const size_t P = (size_t)a->oh * (size_t)a->ow;
    const float *dsp = a->dout + (size_t)a->s * a->dstride + (size_t)a->o0 * P;
    for (int c = 0; c < a->C; c++)
        for (int i = 0; i < a->k; i++) {
            float *g = a->vacc + ((size_t)a->o0 * ckk + (size_t)c * kk + (size_t)i * (size_t)a->k + (size_t)a->j0) * 16;
            __m512 acc[16][5];
#pragma GCC unroll 16
            for (int o = 0; o < OB; o++)
#pragma GCC unroll 5
                for (int j = 0; j < KJ; j++) acc[o][j] = _mm512_loadu_ps(g + ((size_t)o * ckk + (size_t)j) * 16);
            const float *xs = a->xp + (size_t)a->s * a->xstride +
                              ((size_t)c * (size_t)a->Hp + (size_t)i) * (size_t)a->Wp + (size_t)a->j0;
            for (int y = 0; y < a->oh; y++)
                for (int x0 = 0; x0 < a->ow; x0 += 16) {
                    __mmask16 m = lanes(a->ow - x0);
                    const float *row = xs + (size_t)y * (size_t)a->Wp + (size_t)x0;
                    const float *drow = dsp + (size_t)y * (size_t)a->ow + (size_t)x0;
                    __m512 d[16];
#pragma GCC unroll 16
                    for (int o = 0; o < OB; o++) d[o] = _mm512_maskz_loadu_ps(m, drow + (size_t)o * P);
#pragma GCC unroll 5
                    for (int j = 0; j < KJ; j++) {
                        __m512 xv = _mm512_maskz_loadu_ps(m, row + j);
#pragma GCC unroll 16
                        for (int o = 0; o < OB; o++) acc[o][j] = _mm512_fmadd_ps(d[o], xv, acc[o][j]);
                    }
                }
#pragma GCC unroll 16
            for (int o = 0; o < OB; o++)
#pragma GCC unroll 5
                for (int j = 0; j < KJ; j++) _mm512_storeu_ps(g + ((size_t)o * ckk + (size_t)j) * 16, acc[o][j]);
        }
}

#define DW(OB, KJ) AVX512 static void dw_##OB##_##KJ(const dw_args *a) { dw_block(a, OB, KJ); }
/* blocks of at most 20 accumulators: KJ = 5 takes 4 channels, KJ = 4 five, ... KJ = 1 sixteen */
DW(1, 5) DW(2, 5) DW(3, 5) DW(4, 5)
DW(1, 4) DW(2, 4) DW(3, 4) DW(4, 4) DW(5, 4)
DW(1, 3) DW(2, 3) DW(3, 3) DW(4, 3) DW(5, 3) DW(6, 3)
DW(1, 2) DW(2, 2) DW(3, 2) DW(4, 2) DW(5, 2) DW(6, 2) DW(7, 2) DW(8, 2) DW(9, 2) DW(10, 2)
DW(1, 1) DW(2, 1) DW(3, 1) DW(4, 1) DW(5, 1) DW(6, 1) DW(7, 1) DW(8, 1)
DW(9, 1) DW(10, 1) DW(11, 1) DW(12, 1) DW(13, 1) DW(14, 1) DW(15, 1) DW(16, 1)

typedef void (*dw_fn)(const dw_args *);
static const int dw_obmax[6] = {0, 16, 10, 6, 5, 4}; /* by KJ */
static const dw_fn dw_tab[6][16] = {
    {0},
    {dw_1_1, dw_2_1, dw_3_1, dw_4_1, dw_5_1, dw_6_1, dw_7_1, dw_8_1, dw_9_1, dw_10_1, dw_11_1,
     dw_12_1, dw_13_1, dw_14_1, dw_15_1, dw_16_1},
    {dw_1_2, dw_2_2, dw_3_2, dw_4_2, dw_5_2, dw_6_2, dw_7_2, dw_8_2, dw_9_2, dw_10_2},
    {dw_1_3, dw_2_3, dw_3_3, dw_4_3, dw_5_3, dw_6_3},
    {dw_1_4, dw_2_4, dw_3_4, dw_4_4, dw_5_4},
    {dw_1_5, dw_2_5, dw_3_5, dw_4_5},
};

/* Weight gradient vectorized along the output channels (8 < O <= 16, k <= 5), per sample: the
 * sample's dout is transposed to dT[p][16] (zero lanes past O), then for each input channel c
 * and kernel row i the k gradient vectors dwt[c][i][j][0..16) stay in registers over all
 * pixels: acc[j] += xp[c][y+i][x+j] (broadcast) * dT[y][x]. Every lane works, and broadcasts
 * never split a cache line, unlike row vectors of a 10-pixel row. */
typedef struct dwoc_args {
    float *dwt, *dT;
    const float *xp, *dout;
    size_t xstride, dstride;
    int n, O, C, Hp, Wp, oh, ow;
} dwoc_args;

INLINE_AVX512 void dwoc_block(const dwoc_args *a, const int K) {
    const size_t P = (size_t)a->oh * (size_t)a->ow, Wp = (size_t)a->Wp;
    for (int s = 0; s < a->n; s++) {
        const float *ds = a->dout + (size_t)s * a->dstride;
        for (size_t p = 0; p < P; p++)
            for (int o = 0; o < 16; o++) a->dT[p * 16 + (size_t)o] = o < a->O ? ds[(size_t)o * P + p] : 0.0f;
        for (int c = 0; c < a->C; c++)
            for (int i = 0; i < K; i++) {
                /* the K vectors dwt[c][i][0..K) in registers; 4 pixels per step share each
                 * input broadcast between up to 4 FMAs (pixel x + t meets tap j at x + t + j) */
                float *g = a->dwt + ((size_t)c * (size_t)K + (size_t)i) * (size_t)K * 16;
                __m512 acc[5];
#pragma GCC unroll 5
                for (int j = 0; j < K; j++) acc[j] = _mm512_loadu_ps(g + (size_t)j * 16);
                const float *xc = a->xp + (size_t)s * a->xstride + ((size_t)c * (size_t)a->Hp + (size_t)i) * Wp;
                for (int y = 0; y < a->oh; y++) {
                    const float *r = xc + (size_t)y * Wp;
                    const float *dv = a->dT + (size_t)y * (size_t)a->ow * 16;
                    int x = 0;
                    for (; x + 4 <= a->ow; x += 4) {
                        __m512 d[4];
#pragma GCC unroll 4
                        for (int t = 0; t < 4; t++) d[t] = _mm512_loadu_ps(dv + (size_t)(x + t) * 16);
#pragma GCC unroll 8
                        for (int u = 0; u < K + 3; u++) {
                            __m512 b = _mm512_set1_ps(r[x + u]);
#pragma GCC unroll 4
                            for (int t = 0; t < 4; t++)
                                if (u - t >= 0 && u - t < K) acc[u - t] = _mm512_fmadd_ps(b, d[t], acc[u - t]);
                        }
                    }
                    for (; x < a->ow; x++) {
                        __m512 d0 = _mm512_loadu_ps(dv + (size_t)x * 16);
#pragma GCC unroll 5
                        for (int j = 0; j < K; j++) acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(r[x + j]), d0, acc[j]);
                    }
                }
#pragma GCC unroll 5
                for (int j = 0; j < K; j++) _mm512_storeu_ps(g + (size_t)j * 16, acc[j]);
            }
    }
}

#define DWOC(K) AVX512 static void dwoc_##K(const dwoc_args *a) { dwoc_block(a, K); }
DWOC(1) DWOC(2) DWOC(3) DWOC(4) DWOC(5)
static void (*const dwoc_tab[5])(const dwoc_args *) = {dwoc_1, dwoc_2, dwoc_3, dwoc_4, dwoc_5};

static int dwoc_fits(int O, int k) { return O > 8 && O <= 16 && k <= 5; }

AVX512 static float hsum16(const float *v) { return _mm512_reduce_add_ps(_mm512_loadu_ps(v)); }

AVX512 static void db_sums(float *db, const float *dout, size_t dstride, int n, int O, size_t P) {
    for (int o = 0; o < O; o++) {
        __m512 acc = _mm512_setzero_ps();
        for (int s = 0; s < n; s++) {
            const float *d = dout + (size_t)s * dstride + (size_t)o * P;
            for (size_t p = 0; p < P; p += 16) {
                int left = (int)(P - p < 16 ? P - p : 16);
                acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(lanes(left), d + p));
            }
        }
        db[o] += _mm512_reduce_add_ps(acc);
    }
}

/* lane X = sum of the 16 lanes of v[X]: a transposing reduction, 4 levels of shuffles + adds
 * (instead of 16 separate horizontal sums). */
INLINE_AVX512 __m512 hsum16x16(const __m512 *v) {
    __m512 w[8], u[4], z[2];
#pragma GCC unroll 8
    for (int m = 0; m < 8; m++)
        w[m] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * m], v[2 * m + 1]),
                             _mm512_unpackhi_ps(v[2 * m], v[2 * m + 1]));
#pragma GCC unroll 4
    for (int m = 0; m < 4; m++)
        u[m] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * m], w[2 * m + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(w[2 * m], w[2 * m + 1], _MM_SHUFFLE(3, 2, 3, 2)));
#pragma GCC unroll 2
    for (int m = 0; m < 2; m++)
        z[m] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * m], u[2 * m + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(u[2 * m], u[2 * m + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

typedef struct dx_args {
    float *din;
    const float *dcl, *wcl;
    int C, oh;
} dx_args;

/* Input gradient vectorized along the (up to 16) output channels, for an unpadded
 * convolution with K x K kernels and OW-pixel output rows: for each input row (c, Y), the
 * W = OW + K - 1 sums acc[X] (lanes: output channels) run over the valid kernel rows i and,
 * for each dout pixel x of row Y - i, the K taps acc[x + j] += w[c][i][j] * dout[Y-i][x]:
 * every multiply-add is useful (no padding taps) and each dout vector serves K of them. One
 * transposing reduction per row then sums the lanes. */
INLINE_AVX512 void dx_block(const dx_args *a, const int K, const int OW) {
    const int W = OW + K - 1, H = a->oh + K - 1;
    for (int c = 0; c < a->C; c++) {
        const float *wc = a->wcl + (size_t)c * (size_t)(K * K) * 16;
        for (int Y = 0; Y < H; Y++) {
            __m512 acc[16];
#pragma GCC unroll 16
            for (int X = 0; X < 16; X++) acc[X] = _mm512_setzero_ps();
            int i0 = Y - a->oh + 1 > 0 ? Y - a->oh + 1 : 0, i1 = Y < K - 1 ? Y : K - 1;
            for (int i = i0; i <= i1; i++) {
                const float *wr = wc + (size_t)(i * K) * 16;
                const float *dr = a->dcl + (size_t)(Y - i) * (size_t)OW * 16;
                __m512 w[8];
#pragma GCC unroll 8
                for (int j = 0; j < K; j++) w[j] = _mm512_loadu_ps(wr + j * 16);
#pragma GCC unroll 16
                for (int x = 0; x < OW; x++) {
                    __m512 d = _mm512_loadu_ps(dr + x * 16);
#pragma GCC unroll 8
                    for (int j = 0; j < K; j++) acc[x + j] = _mm512_fmadd_ps(w[j], d, acc[x + j]);
                }
            }
            _mm512_mask_storeu_ps(a->din + ((size_t)c * (size_t)H + (size_t)Y) * (size_t)W,
                                  lanes(W), hsum16x16(acc));
        }
    }
}

#define DX5(OW) AVX512 static void dx5_##OW(const dx_args *a) { dx_block(a, 5, OW); }
DX5(1) DX5(2) DX5(3) DX5(4) DX5(5) DX5(6) DX5(7) DX5(8) DX5(9) DX5(10) DX5(11) DX5(12)
#define DX_OWMAX 12 /* W = OW + 4 <= 16 sums in registers */
static void (*const dx5_tab[DX_OWMAX])(const dx_args *) = {
    dx5_1, dx5_2, dx5_3, dx5_4, dx5_5, dx5_6, dx5_7, dx5_8, dx5_9, dx5_10, dx5_11, dx5_12};

#endif /* HET_HAVE_AVX512_KERNELS */

int het_conv_direct_dx_ok(int O, int k, int pad, int ow) {
#ifdef HET_HAVE_AVX512_KERNELS
    return het_simd_level() >= HET_SIMD_AVX512 && O > 8 && O <= 16 && k == 5 && pad == 0 &&
           ow >= 1 && ow <= DX_OWMAX;
#else
    (void)O, (void)k, (void)pad, (void)ow;
    return 0;
#endif
}

void het_conv_direct_dx_weights(float *wcl, const float *w, int O, int C, int k) {
    const size_t kk = (size_t)k * (size_t)k, n = (size_t)C * kk;
    memset(wcl, 0, sizeof(float) * n * 16);
    for (int o = 0; o < O; o++)
        for (size_t r = 0; r < n; r++) wcl[r * 16 + (size_t)o] = w[(size_t)o * n + r];
}

void het_conv_direct_dx(float *din, const float *dout, const float *wcl, int O, int C, int oh,
                        int ow, int k, float *dcl) {
    const size_t P = (size_t)oh * (size_t)ow;
    if (O < 16) memset(dcl, 0, sizeof(float) * P * 16); /* the unused lanes */
    for (int o = 0; o < O; o++)
        for (size_t p = 0; p < P; p++) dcl[p * 16 + (size_t)o] = dout[(size_t)o * P + p];
#ifdef HET_HAVE_AVX512_KERNELS
    if (het_conv_direct_dx_ok(O, k, 0, ow)) {
        dx_args a = {din, dcl, wcl, C, oh};
        dx5_tab[ow - 1](&a);
        return;
    }
#endif
    het_conv_direct_dx_ref(din, dcl, wcl, C, oh, ow, k);
}

void het_conv_direct(float *out, const float *xp, const float *wt, const float *bias, int O,
                     int C, int Hp, int Wp, int k, int zpad) {
#ifdef HET_HAVE_AVX512_KERNELS
    if (het_simd_level() >= HET_SIMD_AVX512) {
        fwd_args a = {out, xp, wt, bias, O, C, Hp, Wp, k, Hp - k + 1, Wp - k + 1, 0, zpad, Hp - zpad};
        /* lanes used: O of 16 along the channels, ow of 16 * ceil(ow / 16) along a row */
        if (O > 8 && O <= 16 && O * ((a.ow + 15) / 16) > a.ow) {
            int xb = block_size(a.ow, FWDOC_XB);
            for (int y = 0; y < a.oh; y++)
                for (int x0 = 0; x0 < a.ow; x0 += xb)
                    fwdoc_tab[(a.ow - x0 < xb ? a.ow - x0 : xb) - 1](&a, y, x0);
            return;
        }
        int ob = block_size(O, FWD_OB);
        for (a.o0 = 0; a.o0 < O; a.o0 += ob) {
            int n = O - a.o0 < ob ? O - a.o0 : ob;
            fwd_tab[n - 1](&a);
        }
        return;
    }
#endif
    (void)zpad;
    het_conv_direct_ref(out, xp, wt, bias, O, C, Hp, Wp, k);
}

size_t het_conv_direct_dw_scratch(int O, int C, int Hp, int Wp, int k) {
    size_t oc = ((size_t)C * (size_t)k * (size_t)k + (size_t)(Hp - k + 1) * (size_t)(Wp - k + 1)) * 16;
    size_t rows = (size_t)O * (size_t)C * (size_t)k * (size_t)k * 16;
    return oc > rows ? oc : rows;
}

void het_conv_direct_dw(float *dw, float *db, const float *xp, size_t xstride, const float *dout,
                        size_t dstride, int n, int O, int C, int Hp, int Wp, int k, float *scratch) {
#ifdef HET_HAVE_AVX512_KERNELS
    if (het_simd_level() >= HET_SIMD_AVX512 && dwoc_fits(O, k)) {
        const size_t kk = (size_t)k * (size_t)k, ckk = (size_t)C * kk;
        dwoc_args a = {scratch, scratch + ckk * 16, xp, dout, xstride, dstride, n, O, C, Hp, Wp,
                       Hp - k + 1, Wp - k + 1};
        memset(a.dwt, 0, sizeof(float) * ckk * 16);
        dwoc_tab[k - 1](&a);
        for (size_t r = 0; r < ckk; r++)
            for (int o = 0; o < O; o++) dw[(size_t)o * ckk + r] += a.dwt[r * 16 + (size_t)o];
        if (db) db_sums(db, dout, dstride, n, O, (size_t)a.oh * (size_t)a.ow);
        return;
    }
    if (het_simd_level() >= HET_SIMD_AVX512) {
        const size_t nw = (size_t)O * (size_t)C * (size_t)k * (size_t)k;
        dw_args a = {scratch, xp, dout, xstride, dstride, 0, O, C, Hp, Wp, k, Hp - k + 1, Wp - k + 1, 0, 0};
        memset(scratch, 0, sizeof(float) * nw * 16);
        for (a.s = 0; a.s < n; a.s++)
            for (a.j0 = 0; a.j0 < k; a.j0 += 5) {
                int kj = k - a.j0 < 5 ? k - a.j0 : 5;
                int ob = block_size(O, dw_obmax[kj]);
                for (a.o0 = 0; a.o0 < O; a.o0 += ob) {
                    int m = O - a.o0 < ob ? O - a.o0 : ob;
                    dw_tab[kj][m - 1](&a);
                }
            }
        for (size_t r = 0; r < nw; r++) dw[r] += hsum16(scratch + r * 16);
        if (db) db_sums(db, dout, dstride, n, O, (size_t)a.oh * (size_t)a.ow);
        return;
    }
#endif
    (void)scratch;
    het_conv_direct_dw_ref(dw, db, xp, xstride, dout, dstride, n, O, C, Hp, Wp, k);
}

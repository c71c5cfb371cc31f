/* Optimized tensor kernels: GEMM through OpenBLAS's CBLAS, im2col / col2im with row-wise fast
 * paths. Each has a naive twin in ref.c (suffix _ref) that tests/test_kernels.c compares with.
 *
 * im2col / col2im work row by row of the column matrix: for one (channel, ki, kj) row and one
 * output row oy, the input pixels that fall inside the image form one contiguous output range
 * [xlo, xhi) (computed once per row, no per-pixel bounds test); everything outside is padding.
 * With stride 1 that range is a straight copy of input pixels. The wide variant (internal.h)
 * goes further for stride 1: one memcpy / one axpy per row of the column matrix. */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clones.h"
#include "hetrain/tensor.h"
#include "tensor/internal.h"

void het_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) { /* C = beta * C; BLAS semantics: beta 0 never reads C */
        for (int i = 0; i < M; i++) {
            float *c = C + (size_t)i * (size_t)ldc;
            if (beta == 0.0f)
                memset(c, 0, sizeof(float) * (size_t)N);
            else if (beta != 1.0f)
                for (int j = 0; j < N; j++) c[j] *= beta;
        }
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
                N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* Output positions o in [0, n_out) whose input coordinate o * stride + off lies in [0, n_in):
 * the range [*lo, *hi). */
static inline void valid_range(int n_in, int n_out, int off, int stride, int *lo, int *hi) {
    int l = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int h = n_in - 1 - off < 0 ? 0 : (n_in - 1 - off) / stride + 1;
    if (h > n_out) h = n_out;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* im2col with a row stride: row r of the column matrix starts at col + r * ldc (ldc >= oh*ow),
 * so that several images can fill side-by-side column blocks of one matrix. */
static void im2col_ld(float *col, size_t ldc, const float *img, int C, int H, int W, int k,
                      int stride, int pad, int oh, int ow) {
    const size_t P = ldc;
    for (int c = 0; c < C; c++) {
        const float *plane = img + (size_t)c * (size_t)H * (size_t)W;
        for (int ki = 0; ki < k; ki++) {
            int ylo, yhi;
            valid_range(H, oh, ki - pad, stride, &ylo, &yhi);
            for (int kj = 0; kj < k; kj++) {
                float *row = col + ((size_t)(c * k + ki) * (size_t)k + (size_t)kj) * P;
                int xlo, xhi;
                valid_range(W, ow, kj - pad, stride, &xlo, &xhi);
                memset(row, 0, sizeof(float) * (size_t)ylo * (size_t)ow);
                memset(row + (size_t)yhi * (size_t)ow, 0,
                       sizeof(float) * (size_t)(oh - yhi) * (size_t)ow);
                for (int oy = ylo; oy < yhi; oy++) {
                    float *dst = row + (size_t)oy * (size_t)ow;
                    const float *src = plane + (size_t)(oy * stride - pad + ki) * (size_t)W +
                                       (xlo * stride - pad + kj);
                    for (int ox = 0; ox < xlo; ox++) dst[ox] = 0.0f;
                    if (stride == 1) {
                        memcpy(dst + xlo, src, sizeof(float) * (size_t)(xhi - xlo));
                    } else {
                        for (int ox = xlo; ox < xhi; ox++) dst[ox] = src[(ox - xlo) * stride];
                    }
                    for (int ox = xhi; ox < ow; ox++) dst[ox] = 0.0f;
                }
            }
        }
    }
}

static void col2im_ld(float *img, const float *col, size_t ldc, int C, int H, int W, int k,
                      int stride, int pad, int oh, int ow) {
    const size_t P = ldc;
    for (int c = 0; c < C; c++) {
        float *plane = img + (size_t)c * (size_t)H * (size_t)W;
        for (int ki = 0; ki < k; ki++) {
            int ylo, yhi;
            valid_range(H, oh, ki - pad, stride, &ylo, &yhi);
            for (int kj = 0; kj < k; kj++) {
                const float *row = col + ((size_t)(c * k + ki) * (size_t)k + (size_t)kj) * P;
                int xlo, xhi;
                valid_range(W, ow, kj - pad, stride, &xlo, &xhi);
                for (int oy = ylo; oy < yhi; oy++) {
                    const float *src = row + (size_t)oy * (size_t)ow;
                    float *dst = plane + (size_t)(oy * stride - pad + ki) * (size_t)W +
                                 (xlo * stride - pad + kj);
                    if (stride == 1) {
                        for (int ox = xlo; ox < xhi; ox++) dst[ox - xlo] += src[ox];
                    } else {
                        for (int ox = xlo; ox < xhi; ox++) dst[(ox - xlo) * stride] += src[ox];
                    }
                }
            }
        }
    }
}

void het_im2col(float *col, const float *img, int C, int H, int W, int k, int stride, int pad,
                int oh, int ow) {
    im2col_ld(col, (size_t)oh * (size_t)ow, img, C, H, W, k, stride, pad, oh, ow);
}

void het_col2im(float *img, const float *col, int C, int H, int W, int k, int stride, int pad,
                int oh, int ow) {
    col2im_ld(img, col, (size_t)oh * (size_t)ow, C, H, W, k, stride, pad, oh, ow);
}

void het_im2col_wide(float *col, size_t ldc, const float *xp, int C, int Hp, int Wp, int k,
                     size_t j0, size_t n) {
    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                size_t r = (size_t)(c * k + ki) * (size_t)k + (size_t)kj;
                memcpy(col + r * ldc,
                       xp + ((size_t)c * (size_t)Hp + (size_t)ki) * (size_t)Wp + (size_t)kj + j0,
                       sizeof(float) * n);
            }
}

void het_col2im_wide(float *xp, const float *col, size_t ldc, int C, int Hp, int Wp, int k,
                     size_t j0, size_t n) {
    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                size_t r = (size_t)(c * k + ki) * (size_t)k + (size_t)kj;
                het_vec_add(xp + ((size_t)c * (size_t)Hp + (size_t)ki) * (size_t)Wp + (size_t)kj + j0,
                            col + r * ldc, n);
            }
}

void het_vec_add(float *y, const float *x, size_t n) {
    while (n > 0) { /* OpenBLAS's saxpy is vectorized for the CPU at hand; chunk below INT_MAX */
        int m = n > (size_t)1 << 30 ? 1 << 30 : (int)n;
        cblas_saxpy(m, 1.0f, x, 1, y, 1);
        x += m;
        y += m;
        n -= (size_t)m;
    }
}

int het_blas_set_threads(int n) {
    int prev = openblas_get_num_threads();
    openblas_set_num_threads(n < 1 ? 1 : n);
    het_dnnl_set_threads(n);
    return prev;
}

/* The reference kernel of the cost tables: single-thread SGEMM, C = A B with 512 x 512
 * operands (268 Mflop a call), the fastest of 15 timed calls after 2 warm-ups, in CPU time of
 * the calling thread (another process on the core does not count; the fastest call is the
 * steadiest figure: on a 2-core VM the median moved by 30 % with a build on the other core,
 * the fastest by 2 %). */
double het_blas_reference_flops(void) {
    enum { N = 512, REPS = 15 };
    float *a = malloc(3 * sizeof(float) * N * N);
    if (!a) return 0.0;
    float *b = a + N * N, *c = b + N * N;
    for (int i = 0; i < N * N; i++) {
        a[i] = (float)(i % 7) * 0.25f - 0.75f;
        b[i] = (float)(i % 5) * 0.5f - 1.0f;
    }
    int prev = openblas_get_num_threads();
    openblas_set_num_threads(1);
    double best = 0.0;
    for (int r = -2; r < REPS; r++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f,
                    c, N);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
        double t = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (r >= 0 && t > 0.0 && (best == 0.0 || t < best)) best = t;
    }
    openblas_set_num_threads(prev);
    free(a);
    return best > 0.0 ? 2.0 * N * N * (double)N / best : 0.0;
}

/* ---- SIMD level, with a test override ---- */

static int simd_forced = -1; /* tests only: set before any thread runs */

void het_simd_force(int level) { simd_forced = level; }

int het_simd_level(void) {
    if (simd_forced >= 0) return simd_forced;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512f")) return HET_SIMD_AVX512;
#endif
    return HET_SIMD_PORTABLE;
}

/* |x| <= FLT_MAX is false for NaN and +-inf. Blocks of 256: the inner loop vectorizes (an OR of
 * comparisons) and a bad block ends the scan. Compiled for AVX-512 / AVX2 / baseline. */
HET_CLONES
int het_all_finite(const float *a, size_t n) {
    for (size_t i = 0; i < n; i += 256) {
        size_t e = n - i < 256 ? n - i : 256;
        int bad = 0;
        for (size_t j = 0; j < e; j++) bad |= !(fabsf(a[i + j]) <= FLT_MAX);
        if (bad) return 0;
    }
    return 1;
}

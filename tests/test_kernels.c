/* Optimized tensor kernels against their naive _ref twins on random data of odd shapes:
 * het_gemm in all four transpose combinations (with padded leading dimensions, alpha/beta,
 * beta = 0 over NaN, K = 0), im2col / col2im (stride 1-3, pad 0-2, kernel larger than the image),
 * the adjoint identity <col2im(y), x> = <y, im2col(x)>, the wide stride-1 im2col against the
 * classic one, the vector add, the finiteness scan, and het_alloc (aligned, zeroed, a large
 * block resident only where written).
 * Tolerances: copies and scatters are exact (same values, same addition order per element), so
 * they must match bitwise; GEMM is compared per element with |a - b| <= 1e-5 * (1 + sum_k
 * |A_ik B_kj| + |beta C_ij|), a bound on float rounding for K <= 100; the adjoint identity
 * (two double sums of the same products in different orders) to 1e-6 relative. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "hetrain/core.h"
#include "hetrain/tensor.h"
#include "tensor/internal.h"
#include "test.h"

static het_rng rng;

static float *rand_buf(size_t n) {
    float *p = het_alloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * het_rng_uniform(&rng) - 1.0f;
    return p;
}

static void test_gemm_case(int ta, int tb, int M, int N, int K, float alpha, float beta, int pad) {
    /* stored shapes: A is M x K (K x M if ta), B is K x N (N x K if tb); ld = columns + pad */
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int lda = ac + pad, ldb = bc + pad, ldc = N + pad;
    float *A = rand_buf((size_t)ar * (size_t)lda), *B = rand_buf((size_t)br * (size_t)ldb);
    float *C0 = rand_buf((size_t)M * (size_t)ldc);
    if (beta == 0.0f) /* BLAS semantics: C is not read when beta is 0, NaN must not leak */
        for (size_t i = 0; i < (size_t)M * (size_t)ldc; i++) C0[i] = NAN;
    float *C1 = het_alloc(sizeof(float) * ((size_t)M * (size_t)ldc + 1));
    float *C2 = het_alloc(sizeof(float) * ((size_t)M * (size_t)ldc + 1));
    memcpy(C1, C0, sizeof(float) * (size_t)M * (size_t)ldc);
    memcpy(C2, C0, sizeof(float) * (size_t)M * (size_t)ldc);
    het_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C1, ldc);
    het_gemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C2, ldc);
    int bad = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double mag = 1.0;
            for (int p = 0; p < K; p++) {
                float a = ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
                float b = tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
                mag += fabs((double)a * b) * fabs(alpha);
            }
            if (beta != 0.0f) mag += fabs((double)beta * C0[(size_t)i * ldc + j]);
            double d = fabs((double)C1[(size_t)i * ldc + j] - C2[(size_t)i * ldc + j]);
            if (!(d <= 1e-5 * mag) && bad++ < 3)
                CHECK(0, "gemm ta%d tb%d %dx%dx%d: C[%d][%d] %.9g vs ref %.9g", ta, tb, M, N, K, i, j,
                      (double)C1[(size_t)i * ldc + j], (double)C2[(size_t)i * ldc + j]);
        }
    CHECK(bad == 0, "gemm ta%d tb%d %dx%dx%d alpha %g beta %g: %d elements differ", ta, tb, M, N,
          K, (double)alpha, (double)beta, bad);
    /* padding columns of C are never touched */
    for (int i = 0; i < M; i++)
        for (int j = N; j < ldc; j++) {
            size_t q = (size_t)i * ldc + j;
            CHECK(memcmp(&C1[q], &C0[q], sizeof(float)) == 0, "gemm wrote C padding [%d][%d]", i, j);
        }
    het_free(A); het_free(B); het_free(C0); het_free(C1); het_free(C2);
}

static void test_gemm(void) {
    static const int shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {33, 17, 65}, {64, 10, 84},
                                    {6, 25, 97}, {16, 151, 3}, {3, 2, 100}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            test_gemm_case(t >> 1, t & 1, M, N, K, 1.0f, 0.0f, 0);
            test_gemm_case(t >> 1, t & 1, M, N, K, 0.5f, 1.5f, 3);
            test_gemm_case(t >> 1, t & 1, M, N, K, -1.0f, 1.0f, 1);
        }
    /* K = 0: C = beta * C; M = 0 / N = 0: nothing happens */
    float C[6] = {1, 2, 3, 4, 5, 6}, A[1] = {0}, B[1] = {0};
    het_gemm(0, 0, 2, 3, 0, 1.0f, A, 1, B, 3, 2.0f, C, 3);
    CHECK(C[0] == 2.0f && C[5] == 12.0f, "gemm K=0 must scale C by beta: %g %g", (double)C[0],
          (double)C[5]);
    het_gemm(0, 0, 2, 3, 0, 1.0f, A, 1, B, 3, 0.0f, C, 3);
    CHECK(C[0] == 0.0f && C[5] == 0.0f, "gemm K=0 beta=0 must zero C");
    C[0] = 7.0f;
    het_gemm(0, 0, 0, 3, 4, 1.0f, A, 4, B, 3, 0.0f, C, 3);
    CHECK(C[0] == 7.0f, "gemm M=0 must not touch C");
}

typedef struct conv_geom {
    int C, H, W, k, stride, pad;
} conv_geom;

static void test_im2col_case(conv_geom g) {
    int oh = (g.H + 2 * g.pad - g.k) / g.stride + 1, ow = (g.W + 2 * g.pad - g.k) / g.stride + 1;
    size_t nimg = (size_t)g.C * g.H * g.W, ncol = (size_t)g.C * g.k * g.k * oh * ow;
    float *img = rand_buf(nimg), *c1 = rand_buf(ncol), *c2 = rand_buf(ncol);
    het_im2col(c1, img, g.C, g.H, g.W, g.k, g.stride, g.pad, oh, ow);
    het_im2col_ref(c2, img, g.C, g.H, g.W, g.k, g.stride, g.pad, oh, ow);
    CHECK(memcmp(c1, c2, sizeof(float) * ncol) == 0, "im2col C%d %dx%d k%d s%d p%d differs from ref",
          g.C, g.H, g.W, g.k, g.stride, g.pad);
    /* col2im accumulates into a non-zero image */
    float *y = rand_buf(ncol), *i1 = rand_buf(nimg), *i2 = het_alloc(sizeof(float) * nimg);
    memcpy(i2, i1, sizeof(float) * nimg);
    het_col2im(i1, y, g.C, g.H, g.W, g.k, g.stride, g.pad, oh, ow);
    het_col2im_ref(i2, y, g.C, g.H, g.W, g.k, g.stride, g.pad, oh, ow);
    CHECK(memcmp(i1, i2, sizeof(float) * nimg) == 0, "col2im C%d %dx%d k%d s%d p%d differs from ref",
          g.C, g.H, g.W, g.k, g.stride, g.pad);
    /* adjoint: <col2im(y), x> == <y, im2col(x)> */
    memset(i1, 0, sizeof(float) * nimg);
    het_col2im(i1, y, g.C, g.H, g.W, g.k, g.stride, g.pad, oh, ow);
    double lhs = 0, rhs = 0, mag = 0;
    for (size_t i = 0; i < nimg; i++) lhs += (double)i1[i] * img[i];
    for (size_t i = 0; i < ncol; i++) {
        rhs += (double)y[i] * c1[i];
        mag += fabs((double)y[i] * c1[i]);
    }
    CHECK(fabs(lhs - rhs) <= 1e-6 * (1 + mag), "adjoint C%d %dx%d k%d s%d p%d: %.12g vs %.12g", g.C,
          g.H, g.W, g.k, g.stride, g.pad, lhs, rhs);
    het_free(img); het_free(c1); het_free(c2); het_free(y); het_free(i1); het_free(i2);
}

/* Wide im2col on the padded image against its ref, against the classic im2col (the columns
 * that are not wrap columns), and col2im_wide against its ref. */
static void test_wide_case(conv_geom g) {
    int Hp = g.H + 2 * g.pad, Wp = g.W + 2 * g.pad, oh = Hp - g.k + 1, ow = Wp - g.k + 1;
    size_t nw = het_wide_cols(Hp, Wp, g.k), rows = (size_t)g.C * g.k * g.k;
    CHECK(nw == (size_t)(oh - 1) * Wp + ow, "wide columns %zu", nw);
    float *img = rand_buf((size_t)g.C * g.H * g.W), *xp = het_alloc(sizeof(float) * g.C * Hp * Wp);
    for (int c = 0; c < g.C; c++)
        for (int y = 0; y < g.H; y++)
            for (int x = 0; x < g.W; x++)
                xp[((size_t)c * Hp + y + g.pad) * Wp + x + g.pad] = img[((size_t)c * g.H + y) * g.W + x];
    float *w1 = rand_buf(rows * nw), *w2 = rand_buf(rows * nw), *cl = rand_buf(rows * oh * ow);
    het_im2col_wide(w1, nw, xp, g.C, Hp, Wp, g.k, 0, nw);
    het_im2col_wide_ref(w2, nw, xp, g.C, Hp, Wp, g.k, 0, nw);
    CHECK(memcmp(w1, w2, sizeof(float) * rows * nw) == 0, "im2col_wide C%d %dx%d k%d p%d vs ref",
          g.C, g.H, g.W, g.k, g.pad);
    het_im2col(cl, img, g.C, g.H, g.W, g.k, 1, g.pad, oh, ow);
    int bad = 0;
    for (size_t r = 0; r < rows; r++)
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++)
                bad += w1[r * nw + (size_t)y * Wp + x] != cl[(r * oh + y) * ow + x];
    CHECK(bad == 0, "im2col_wide C%d %dx%d k%d p%d: %d columns differ from im2col", g.C, g.H, g.W,
          g.k, g.pad, bad);
    /* a chunk [j0, j0 + n) with a row stride wider than n equals those columns of the whole */
    size_t j0 = nw / 3, n = nw - j0 > 5 ? 5 : nw - j0, ld = n + 3;
    float *ch = rand_buf(rows * ld);
    het_im2col_wide(ch, ld, xp, g.C, Hp, Wp, g.k, j0, n);
    bad = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < n; j++) bad += ch[r * ld + j] != w1[r * nw + j0 + j];
    CHECK(bad == 0, "im2col_wide chunk [%zu, %zu) differs from the whole matrix", j0, j0 + n);
    /* col2im_wide against its ref, whole and chunked */
    float *p1 = rand_buf((size_t)g.C * Hp * Wp), *p2 = het_alloc(sizeof(float) * g.C * Hp * Wp);
    memcpy(p2, p1, sizeof(float) * g.C * Hp * Wp);
    het_col2im_wide(p1, w2, nw, g.C, Hp, Wp, g.k, 0, nw);
    het_col2im_wide_ref(p2, w2, nw, g.C, Hp, Wp, g.k, 0, nw);
    CHECK(memcmp(p1, p2, sizeof(float) * g.C * Hp * Wp) == 0, "col2im_wide C%d %dx%d k%d vs ref",
          g.C, g.H, g.W, g.k);
    het_col2im_wide(p1, ch, ld, g.C, Hp, Wp, g.k, j0, n);
    het_col2im_wide_ref(p2, ch, ld, g.C, Hp, Wp, g.k, j0, n);
    CHECK(memcmp(p1, p2, sizeof(float) * g.C * Hp * Wp) == 0, "col2im_wide chunk C%d %dx%d k%d vs ref",
          g.C, g.H, g.W, g.k);
    het_free(ch);
    het_free(img); het_free(xp); het_free(w1); het_free(w2); het_free(cl); het_free(p1); het_free(p2);
}

static void test_im2col(void) {
    static const conv_geom geoms[] = {
        {1, 28, 28, 5, 1, 2}, {6, 14, 14, 5, 1, 0}, {3, 7, 9, 3, 2, 1}, {2, 8, 5, 3, 2, 0},
        {4, 11, 13, 5, 2, 2}, {2, 6, 7, 1, 1, 0},   {3, 9, 8, 4, 3, 1}, {1, 3, 3, 5, 1, 2},
        {2, 5, 6, 2, 1, 1},   {1, 1, 1, 1, 1, 0},   {3, 10, 7, 3, 1, 2}, {2, 9, 11, 3, 2, 2}};
    for (size_t i = 0; i < sizeof geoms / sizeof geoms[0]; i++) {
        test_im2col_case(geoms[i]);
        if (geoms[i].stride == 1) test_wide_case(geoms[i]);
    }
}

static void test_vec_add(void) {
    static const size_t ns[] = {0, 1, 7, 16, 137, 1000};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        size_t n = ns[t];
        float *x = rand_buf(n), *y1 = rand_buf(n), *y2 = het_alloc(sizeof(float) * (n + 1));
        memcpy(y2, y1, sizeof(float) * n);
        het_vec_add(y1, x, n);
        het_vec_add_ref(y2, x, n);
        CHECK(memcmp(y1, y2, sizeof(float) * n) == 0, "vec_add n=%zu differs from ref", n);
        het_free(x); het_free(y1); het_free(y2);
    }
}

/* het_all_finite: every length up to past two blocks, a NaN / inf / -inf at every position
 * class (first, inside a block, a block's last, the very last), FLT_MAX and denormals finite. */
static void test_all_finite(void) {
    enum { N = 600 };
    static float a[N];
    for (int i = 0; i < N; i++) a[i] = (i % 3 == 0) ? FLT_MAX : (i % 3 == 1) ? -1e-42f : 1.0f;
    CHECK(het_all_finite(a, 0) == 1, "empty buffer");
    for (size_t n = 1; n <= N; n += 37) CHECK(het_all_finite(a, n) == 1, "finite, n %zu", n);
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    const size_t at[] = {0, 100, 255, 256, 511, N - 1};
    for (int b = 0; b < 3; b++)
        for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
            float keep = a[at[k]];
            a[at[k]] = bad[b];
            CHECK(het_all_finite(a, N) == 0, "%g at %zu not found", (double)bad[b], at[k]);
            CHECK(het_all_finite(a, at[k]) == 1, "%g at %zu found in the %zu before it",
                  (double)bad[b], at[k], at[k]);
            a[at[k]] = keep;
        }
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
/* Resident set of this process in bytes (/proc/self/statm's second field), 0 if unknown. */
static size_t resident_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, res = 0;
    if (!f) return 0;
    if (fscanf(f, "%lu %lu", &size, &res) != 2) res = 0;
    fclose(f);
    return (size_t)res * 4096;
}
#endif

static void test_alloc(void) {
    /* small (C allocator) and large (mapped) blocks: 64-byte aligned and zero, written and
     * freed over and over, so that a reused block is still handed out zeroed */
    const size_t sizes[] = {1, 63, 64, 1000, (1 << 20) - 64, 1 << 20, (3 << 20) + 5};
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            unsigned char *p = het_alloc(sizes[i]);
            CHECK(p && ((uintptr_t)p & 63) == 0, "het_alloc(%zu): %p", sizes[i], (void *)p);
            if (!p) continue;
            size_t nonzero = 0;
            for (size_t k = 0; k < sizes[i]; k++) nonzero += p[k] != 0;
            CHECK(nonzero == 0, "het_alloc(%zu), round %d: %zu bytes not zero", sizes[i], round,
                  nonzero);
            memset(p, 0xab, sizes[i]);
            het_free(p);
        }
    het_free(NULL);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* 256 MiB of which 1 MiB is written: resident grows by the written part only */
    size_t before = resident_bytes();
    char *big = het_alloc((size_t)256 << 20);
    CHECK(big != NULL, "256 MiB: %s", het_error_msg());
    if (big && before) {
        memset(big, 1, (size_t)1 << 20);
        size_t grown = resident_bytes() - before;
        CHECK(grown < ((size_t)32 << 20), "256 MiB allocated, 1 MiB written: resident grew by "
              "%zu MiB, expected the written MiB (and little more)", grown >> 20);
    }
    het_free(big);
#endif
}

int main(void) {
    het_rng_seed(&rng, 20261129);
    printf("seed 20261129\n");
    int prev = het_blas_set_threads(1);
    CHECK(prev >= 1, "het_blas_set_threads returned %d", prev);
    CHECK(het_blas_set_threads(1) == 1, "BLAS threads must read back as 1");
    test_gemm();
    test_im2col();
    test_vec_add();
    test_all_finite();
    test_alloc();
    return het_test_finish("test_kernels");
}

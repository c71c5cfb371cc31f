/* hetrain tensor: kernels on plain float arrays, each optimized one with a naive reference twin
 * (suffix _ref) that tests compare against. Outputs first, gradients d-prefixed, shapes in the
 * comment. Row-major throughout. */
#ifndef HETRAIN_TENSOR_H
#define HETRAIN_TENSOR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C[M x N] = alpha * op(A) op(B) + beta * C, op = transpose when ta/tb. OpenBLAS sgemm. */
void het_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);
void het_gemm_ref(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc);

/* im2col for one image: col[(c*kh*kw) x (oh*ow)] from img[C x H x W], zero padding. */
void het_im2col(float *col, const float *img, int C, int H, int W, int k, int stride, int pad,
                int oh, int ow);
void het_im2col_ref(float *col, const float *img, int C, int H, int W, int k, int stride,
                    int pad, int oh, int ow);
/* col2im: img[C x H x W] += scatter of col (the adjoint of im2col). */
void het_col2im(float *img, const float *col, int C, int H, int W, int k, int stride, int pad,
                int oh, int ow);
void het_col2im_ref(float *img, const float *col, int C, int H, int W, int k, int stride,
                    int pad, int oh, int ow);

/* 1 when every a[0..n) is finite (no NaN, no +-inf), else 0: the per-step check of a gradient
 * or parameter buffer (vectorized, a few microseconds for 60k floats). */
int het_all_finite(const float *a, size_t n);

/* Re-executes the program (argv as given to main) with OPENBLAS_CORETYPE set when OpenBLAS
 * fell back to its generic kernels on a CPU with AVX-512 or AVX2 (see blas_select.c). Call it
 * first thing in main, before any thread or MPI start. Returns only when nothing was done (0)
 * or the exec failed (-1). */
int het_blas_select_kernels(char **argv);
/* The kernel set OpenBLAS is using (e.g. "SkylakeX", "Haswell", "Prescott"). */
const char *het_blas_corename(void);

/* Sets the BLAS thread count (OpenBLAS); returns the previous value or -1 if unknown. */
int het_blas_set_threads(int n);

#ifdef __cplusplus
}
#endif
#endif

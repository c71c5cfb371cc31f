/* Kernels used inside the library but not (yet) part of the public tensor.h: the "wide" im2col
 * for stride-1 convolutions, and a vector add. Same conventions as tensor.h; each optimized
 * kernel has a naive _ref twin (ref.c) that tests/test_kernels.c compares with.
 *
 * Wide im2col. For stride 1 on an already zero-padded image xp[C x Hp x Wp], output pixel
 * (oy, ox) reads xp[c][oy + ki][ox + kj]. Numbering output columns j = oy * Wp + ox (the padded
 * row pitch instead of ow = Wp - k + 1) makes every row r = (c, ki, kj) of the column matrix
 * one contiguous run of xp, starting at c*Hp*Wp + ki*Wp + kj: a single memcpy per row instead of
 * one short copy per output row. The price is Wp - ow "wrap" columns per output row whose
 * windows straddle a row end: a GEMM over wide columns computes them too and the caller drops
 * them (and feeds zeros for them backward). Nw = (oh - 1) * Wp + ow columns (the last row has
 * no wrap columns), so no read goes past xp's C*Hp*Wp floats. */
#ifndef HET_TENSOR_INTERNAL_H
#define HET_TENSOR_INTERNAL_H

#include <stddef.h>

/* Columns of the wide matrix for a k x k window on a padded Hp x Wp image. */
static inline size_t het_wide_cols(int Hp, int Wp, int k) {
    return (size_t)(Hp - k) * (size_t)Wp + (size_t)(Wp - k + 1);
}

/* Columns [j0, j0 + n) of the wide matrix (row r = (c*k + ki)*k + kj) of xp[C x Hp x Wp] into
 * col[(C*k*k) x n] with row stride ldc >= n. Building the matrix in column chunks keeps each
 * chunk in L1 for the GEMM that consumes it. */
void het_im2col_wide(float *col, size_t ldc, const float *xp, int C, int Hp, int Wp, int k,
                     size_t j0, size_t n);
void het_im2col_wide_ref(float *col, size_t ldc, const float *xp, int C, int Hp, int Wp, int k,
                         size_t j0, size_t n);
/* The adjoint: xp[C x Hp x Wp] += scatter of columns [j0, j0 + n) given in col (row stride
 * ldc), every column included; callers zero the wrap columns of col first. */
void het_col2im_wide(float *xp, const float *col, size_t ldc, int C, int Hp, int Wp, int k,
                     size_t j0, size_t n);
void het_col2im_wide_ref(float *xp, const float *col, size_t ldc, int C, int Hp, int Wp, int k,
                         size_t j0, size_t n);

/* y[0..n) += x[0..n). */
void het_vec_add(float *y, const float *x, size_t n);
void het_vec_add_ref(float *y, const float *x, size_t n);

#endif

/* Kernels used inside the library but not (yet) part of the public tensor.h: the "wide" im2col
 * for stride-1 convolutions, a vector add, the SIMD level that layers dispatch on, and the
 * direct convolution kernels (conv_direct.c), oneDNN's fault record and its test hook
 * (conv_dnnl.c). Same conventions as tensor.h; each optimized
 * kernel has a naive _ref twin (ref.c) that tests/test_kernels.c (tests/test_conv_direct.c for
 * the direct convolution) compares with.
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

/* ---- SIMD dispatch ---- */
#define HET_SIMD_PORTABLE 0 /* C only (x86-64 baseline SSE2 after the compiler) */
#define HET_SIMD_AVX512 2   /* AVX-512F kernels */
/* The best level this CPU runs, or the one forced by het_simd_force. */
int het_simd_level(void);
/* Tests only, before any worker thread starts: cap the level (-1 restores the CPU's), so that
 * each dispatch path available on this CPU can be compared with the reference. */
void het_simd_force(int level);

/* ---- direct stride-1 convolution (conv_direct.c) ----
 * xp is an already zero-padded input [C x Hp x Wp]; outputs are oh = Hp - k + 1 by
 * ow = Wp - k + 1. Weights w[o][c][i][j] are [O x C x k x k] (PyTorch's layout) for the weight
 * gradient, and transposed, wt[((c*k + i)*k + j)*O + o], for the forward. */
/* 1 when the direct kernels run on this CPU (AVX-512) and suit padding `pad` (0 <= pad <= k-1:
 * the input gradient then runs as a forward over the dout padded by k - 1 - pad). */
int het_conv_direct_ok(int k, int pad);
/* out[o][y][x] = bias[o] (0 when bias is NULL) + sum_{c,i,j} w[o][c][i][j] xp[c][y+i][x+j],
 * given wt, the transposed weights. The first and last zpad rows of each xp channel must be
 * zero (padding): the kernel skips them. */
void het_conv_direct(float *out, const float *xp, const float *wt, const float *bias, int O,
                     int C, int Hp, int Wp, int k, int zpad);
void het_conv_direct_ref(float *out, const float *xp, const float *wt, const float *bias, int O,
                         int C, int Hp, int Wp, int k);
/* Over n samples (xp_s = xp + s*xstride, dout_s = dout + s*dstride, dout_s [O x oh x ow]):
 * dw[o][c][i][j] += sum_{s,y,x} dout_s[o][y][x] xp_s[c][y+i][x+j], and db[o] += sum of dout_s[o]
 * unless db is NULL. scratch: het_conv_direct_dw_scratch() floats. */
void het_conv_direct_dw(float *dw, float *db, const float *xp, size_t xstride, const float *dout,
                        size_t dstride, int n, int O, int C, int Hp, int Wp, int k, float *scratch);
size_t het_conv_direct_dw_scratch(int O, int C, int Hp, int Wp, int k);
/* Input gradient of an unpadded stride-1 convolution for one sample:
 * din[c][Y][X] = sum_{o,i,j} w[o][c][i][j] dout[o][Y-i][X-j] over the valid terms, din
 * [C x (oh+k-1) x (ow+k-1)], dout [O x oh x ow]. Vectorized along the O <= 16 output channels
 * (het_conv_direct_dx_ok: AVX-512, 9..16 channels, k 5, pad 0, ow <= 12; LeNet's conv2).
 * wcl: the weights channels-last, from het_conv_direct_dx_weights (C*k*k*16 floats); dcl:
 * scratch of oh*ow*16 floats (dout channels-last). */
int het_conv_direct_dx_ok(int O, int k, int pad, int ow);
void het_conv_direct_dx_weights(float *wcl, const float *w, int O, int C, int k);
void het_conv_direct_dx(float *din, const float *dout, const float *wcl, int O, int C, int oh,
                        int ow, int k, float *dcl);
/* The naive twin, on the channels-last operands (16 lanes) that het_conv_direct_dx prepares. */
void het_conv_direct_dx_ref(float *din, const float *dcl, const float *wcl, int C, int oh, int ow,
                            int k);
void het_conv_direct_dw_ref(float *dw, float *db, const float *xp, size_t xstride,
                            const float *dout, size_t dstride, int n, int O, int C, int Hp, int Wp,
                            int k);

/* ---- oneDNN's failures (conv_dnnl.c) ----
 * The first failure of a oneDNN call that left a convolution's outputs NaN (tensor.h: a
 * failure while running, or any failure on channel-blocked operands), kept for the process:
 * its status (HET_OK: none so far) and, when msg is not NULL, its message (n bytes at most).
 * Sticky until het_dnnl_fault_clear. A layer's forward and backward return nothing, so this is
 * where an executor (or a test) learns why a step's values turned NaN; the first fault is also
 * printed once on stderr. */
int  het_dnnl_fault(char *msg, size_t n);
void het_dnnl_fault_clear(void);
/* A layer that runs its own kernels because oneDNN refused it (HET_ENOTSUP): prints the
 * refusal (het_error_msg()) once per process on stderr, as a note. */
void het_dnnl_note_fallback(void);
/* Tests only: what oneDNN refuses from now on (a bit set; 0 ends it). REFUSE: every set of
 * primitives made afterwards (a new handle, a new batch size) fails as oneDNN's
 * "unimplemented"; RUN: every execution of a convolution or of the dense layer's bf16 matmul
 * (dense_dnnl.c) fails as its "runtime_error". */
#define HET_DNNL_INJECT_REFUSE 1
#define HET_DNNL_INJECT_RUN 2
void het_dnnl_inject(int what);

#endif

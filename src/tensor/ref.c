/* Naive reference kernels: the obvious loops, written for clarity, not speed. The optimized
 * kernels in kernels.c are tested against these (tests/test_kernels.c). */
#include "hetrain/tensor.h"
#include "tensor/internal.h"

void het_gemm_ref(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc) {
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double s = 0.0; /* double accumulation: the reference is the more accurate side */
            for (int p = 0; p < K; p++) {
                float a = ta ? A[(size_t)p * (size_t)lda + (size_t)i]
                             : A[(size_t)i * (size_t)lda + (size_t)p];
                float b = tb ? B[(size_t)j * (size_t)ldb + (size_t)p]
                             : B[(size_t)p * (size_t)ldb + (size_t)j];
                s += (double)a * (double)b;
            }
            float *c = &C[(size_t)i * (size_t)ldc + (size_t)j];
            /* beta == 0: C is not read (it may hold garbage, even NaN), as in BLAS */
            *c = (float)((double)alpha * s + (beta == 0.0f ? 0.0 : (double)beta * (double)*c));
        }
    }
}

void het_im2col_ref(float *col, const float *img, int C, int H, int W, int k, int stride,
                    int pad, int oh, int ow) {
    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                size_t row = (size_t)(c * k + ki) * (size_t)k + (size_t)kj;
                for (int oy = 0; oy < oh; oy++)
                    for (int ox = 0; ox < ow; ox++) {
                        int iy = oy * stride - pad + ki, ix = ox * stride - pad + kj;
                        float v = 0.0f;
                        if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                            v = img[((size_t)c * (size_t)H + (size_t)iy) * (size_t)W + (size_t)ix];
                        col[(row * (size_t)oh + (size_t)oy) * (size_t)ow + (size_t)ox] = v;
                    }
            }
}

void het_col2im_ref(float *img, const float *col, int C, int H, int W, int k, int stride,
                    int pad, int oh, int ow) {
    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                size_t row = (size_t)(c * k + ki) * (size_t)k + (size_t)kj;
                for (int oy = 0; oy < oh; oy++)
                    for (int ox = 0; ox < ow; ox++) {
                        int iy = oy * stride - pad + ki, ix = ox * stride - pad + kj;
                        if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                            img[((size_t)c * (size_t)H + (size_t)iy) * (size_t)W + (size_t)ix] +=
                                col[(row * (size_t)oh + (size_t)oy) * (size_t)ow + (size_t)ox];
                    }
            }
}

void het_im2col_wide_ref(float *col, size_t ldc, const float *xp, int C, int Hp, int Wp, int k,
                         size_t j0, size_t n) {
    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                size_t r = (size_t)(c * k + ki) * (size_t)k + (size_t)kj;
                for (size_t j = j0; j < j0 + n; j++) {
                    size_t oy = j / (size_t)Wp, ox = j % (size_t)Wp; /* ox + kj may wrap */
                    col[r * ldc + (j - j0)] = xp[(size_t)c * (size_t)Hp * (size_t)Wp +
                                                 (oy + (size_t)ki) * (size_t)Wp + ox + (size_t)kj];
                }
            }
}

void het_col2im_wide_ref(float *xp, const float *col, size_t ldc, int C, int Hp, int Wp, int k,
                         size_t j0, size_t n) {
    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                size_t r = (size_t)(c * k + ki) * (size_t)k + (size_t)kj;
                for (size_t j = j0; j < j0 + n; j++) {
                    size_t oy = j / (size_t)Wp, ox = j % (size_t)Wp;
                    xp[(size_t)c * (size_t)Hp * (size_t)Wp + (oy + (size_t)ki) * (size_t)Wp + ox +
                       (size_t)kj] += col[r * ldc + (j - j0)];
                }
            }
}

void het_vec_add_ref(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

void het_conv_direct_ref(float *out, const float *xp, const float *wt, const float *bias, int O,
                         int C, int Hp, int Wp, int k) {
    int oh = Hp - k + 1, ow = Wp - k + 1;
    for (int o = 0; o < O; o++)
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++) {
                double s = bias ? bias[o] : 0.0;
                for (int c = 0; c < C; c++)
                    for (int i = 0; i < k; i++)
                        for (int j = 0; j < k; j++)
                            s += (double)wt[(((size_t)c * (size_t)k + (size_t)i) * (size_t)k + (size_t)j) * (size_t)O + (size_t)o] *
                                 (double)xp[((size_t)c * (size_t)Hp + (size_t)(y + i)) * (size_t)Wp + (size_t)(x + j)];
                out[((size_t)o * (size_t)oh + (size_t)y) * (size_t)ow + (size_t)x] = (float)s;
            }
}

void het_conv_direct_dw_ref(float *dw, float *db, const float *xp, size_t xstride,
                            const float *dout, size_t dstride, int n, int O, int C, int Hp, int Wp,
                            int k) {
    int oh = Hp - k + 1, ow = Wp - k + 1;
    for (int o = 0; o < O; o++) {
        for (int c = 0; c < C; c++)
            for (int i = 0; i < k; i++)
                for (int j = 0; j < k; j++) {
                    double s = 0.0;
                    for (int b = 0; b < n; b++)
                        for (int y = 0; y < oh; y++)
                            for (int x = 0; x < ow; x++)
                                s += (double)dout[(size_t)b * dstride + ((size_t)o * (size_t)oh + (size_t)y) * (size_t)ow + (size_t)x] *
                                     (double)xp[(size_t)b * xstride + ((size_t)c * (size_t)Hp + (size_t)(y + i)) * (size_t)Wp + (size_t)(x + j)];
                    dw[((size_t)(o * C + c) * (size_t)k + (size_t)i) * (size_t)k + (size_t)j] += (float)s;
                }
        if (db) {
            double s = 0.0;
            for (int b = 0; b < n; b++)
                for (size_t p = 0; p < (size_t)oh * (size_t)ow; p++)
                    s += dout[(size_t)b * dstride + (size_t)o * (size_t)oh * (size_t)ow + p];
            db[o] += (float)s;
        }
    }
}

void het_conv_direct_dx_ref(float *din, const float *dcl, const float *wcl, int C, int oh, int ow,
                            int k) {
    const int H = oh + k - 1, W = ow + k - 1;
    for (int c = 0; c < C; c++)
        for (int Y = 0; Y < H; Y++)
            for (int X = 0; X < W; X++) {
                double s = 0.0;
                for (int i = 0; i < k; i++)
                    for (int j = 0; j < k; j++) {
                        int y = Y - i, x = X - j;
                        if (y < 0 || y >= oh || x < 0 || x >= ow) continue;
                        const float *w = wcl + (((size_t)c * (size_t)k + (size_t)i) * (size_t)k + (size_t)j) * 16;
                        const float *d = dcl + ((size_t)y * (size_t)ow + (size_t)x) * 16;
                        for (int o = 0; o < 16; o++) s += (double)w[o] * (double)d[o];
                    }
                din[((size_t)c * (size_t)H + (size_t)Y) * (size_t)W + (size_t)X] = (float)s;
            }
}

/* The reference twin of tensor/conv_dnnl.c: NCHW convolution of n samples, any stride and zero
 * padding, sums in double. */
static double conv_at(const float *x, const float *w, int C, int H, int W, int k, int stride,
                      int pad, int o, int y, int xo) {
    double s = 0.0;
    for (int c = 0; c < C; c++)
        for (int i = 0; i < k; i++)
            for (int j = 0; j < k; j++) {
                int iy = y * stride - pad + i, ix = xo * stride - pad + j;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                s += (double)w[(((size_t)o * (size_t)C + (size_t)c) * (size_t)k + (size_t)i) * (size_t)k + (size_t)j] *
                     (double)x[((size_t)c * (size_t)H + (size_t)iy) * (size_t)W + (size_t)ix];
            }
    return s;
}

void het_conv2d_ref(float *y, const float *x, const float *w, const float *b, int n, int C, int H,
                    int W, int O, int k, int stride, int pad) {
    int oh = (H + 2 * pad - k) / stride + 1, ow = (W + 2 * pad - k) / stride + 1;
    size_t xs = (size_t)C * (size_t)H * (size_t)W, ys = (size_t)O * (size_t)oh * (size_t)ow;
    for (int s = 0; s < n; s++)
        for (int o = 0; o < O; o++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++)
                    y[(size_t)s * ys + ((size_t)o * (size_t)oh + (size_t)oy) * (size_t)ow + (size_t)ox] =
                        (float)((b ? b[o] : 0.0) +
                                conv_at(x + (size_t)s * xs, w, C, H, W, k, stride, pad, o, oy, ox));
}

void het_conv2d_backward_ref(float *dx, float *dw, float *db, const float *x, const float *w,
                             const float *dy, int n, int C, int H, int W, int O, int k,
                             int stride, int pad) {
    int oh = (H + 2 * pad - k) / stride + 1, ow = (W + 2 * pad - k) / stride + 1;
    size_t xs = (size_t)C * (size_t)H * (size_t)W, ys = (size_t)O * (size_t)oh * (size_t)ow;
    for (int o = 0; o < O; o++) {
        for (int c = 0; c < C; c++)
            for (int i = 0; i < k; i++)
                for (int j = 0; j < k; j++) {
                    double s = 0.0;
                    for (int b = 0; b < n; b++)
                        for (int oy = 0; oy < oh; oy++)
                            for (int ox = 0; ox < ow; ox++) {
                                int iy = oy * stride - pad + i, ix = ox * stride - pad + j;
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                s += (double)dy[(size_t)b * ys + ((size_t)o * (size_t)oh + (size_t)oy) * (size_t)ow + (size_t)ox] *
                                     (double)x[(size_t)b * xs + ((size_t)c * (size_t)H + (size_t)iy) * (size_t)W + (size_t)ix];
                            }
                    dw[(((size_t)o * (size_t)C + (size_t)c) * (size_t)k + (size_t)i) * (size_t)k + (size_t)j] += (float)s;
                }
        if (db) {
            double s = 0.0;
            for (int b = 0; b < n; b++)
                for (size_t p = 0; p < (size_t)oh * (size_t)ow; p++) s += dy[(size_t)b * ys + (size_t)o * (size_t)oh * (size_t)ow + p];
            db[o] += (float)s;
        }
    }
    if (!dx) return;
    for (int b = 0; b < n; b++)
        for (int c = 0; c < C; c++)
            for (int iy = 0; iy < H; iy++)
                for (int ix = 0; ix < W; ix++) {
                    double s = 0.0;
                    for (int o = 0; o < O; o++)
                        for (int i = 0; i < k; i++)
                            for (int j = 0; j < k; j++) {
                                int ty = iy + pad - i, tx = ix + pad - j;
                                if (ty < 0 || tx < 0 || ty % stride || tx % stride) continue;
                                int oy = ty / stride, ox = tx / stride;
                                if (oy >= oh || ox >= ow) continue;
                                s += (double)w[(((size_t)o * (size_t)C + (size_t)c) * (size_t)k + (size_t)i) * (size_t)k + (size_t)j] *
                                     (double)dy[(size_t)b * ys + ((size_t)o * (size_t)oh + (size_t)oy) * (size_t)ow + (size_t)ox];
                            }
                    dx[(size_t)b * xs + ((size_t)c * (size_t)H + (size_t)iy) * (size_t)W + (size_t)ix] += (float)s;
                }
}

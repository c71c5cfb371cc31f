/* hetrain tensor: kernels on plain float arrays, each optimized one with a naive reference twin
 * (suffix _ref) that tests compare against. Outputs first, gradients d-prefixed, shapes in the
 * comment. Row-major throughout. */
#ifndef HETRAIN_TENSOR_H
#define HETRAIN_TENSOR_H

#include <stddef.h>
#include <stdint.h>

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

/* Plane loops of batch norm and element-wise steps (tensor/vec.c). Sums are in double over 8
 * fixed lanes (element i in lane i % 8, lanes added in order): the same bits on every CPU.
 * x_hat = (x - mean) * inv is computed in float, the same way in every function.
 *   het_vmoments: mean and M2 (sum of squared deviations from it) of one plane, two passes
 *   over it (the second from L1), in double
 *   het_vaffine: y = g * x_hat + b, or max(g * x_hat + b, 0) when relu (y must not alias x)
 *   het_vbn_sums: *sdy = sum dy, *sdyh = sum dy * x_hat
 *   het_vbn_dx: dx = k * (dy - mdy - x_hat * mdyh) (dx may alias dy, not x)
 *   het_vrelu: x = max(x, 0) in place; het_vrelu_mask: g = y > 0 ? d : 0 (g may alias d)
 *   het_vadd_relu: y = max(y + x, 0) in place (a residual add and its ReLU) */
void het_vmoments(const float *x, size_t n, double *mean, double *m2);
void het_vaffine(float *y, const float *x, size_t n, float mean, float inv, float g, float b,
                 int relu);
void het_vbn_sums(const float *dy, const float *x, size_t n, float mean, float inv, double *sdy,
                  double *sdyh);
void het_vbn_dx(float *dx, const float *dy, const float *x, size_t n, float k, float mdy,
                float mdyh, float mean, float inv);
void het_vrelu(float *x, size_t n);
void het_vrelu_mask(float *g, const float *y, const float *d, size_t n);
void het_vadd_relu(float *y, const float *x, size_t n);

/* The same loops on HET_BLK channels at once, for the channel-blocked layout (nChw16c, nn.h):
 * x holds n positions of HET_BLK channels (x[p * HET_BLK + j]: channel j at position p), and
 * the per-channel arguments and results are arrays of HET_BLK. Sums are per channel, in double,
 * over the positions in order. */
#define HET_BLK 16
/* Offset of channel c at position p (of hw) within one sample: plain c * hw + p, or
 * channel-blocked (blk). */
static inline size_t het_act_offset(int blk, size_t hw, int c, size_t p) {
    if (!blk) return (size_t)c * hw + p;
    return (size_t)(c / HET_BLK) * hw * HET_BLK + p * HET_BLK + (size_t)(c % HET_BLK);
}
void het_vmoments16(const float *x, size_t n, double *mean, double *m2);
void het_vaffine16(float *y, const float *x, size_t n, const float *mean, const float *inv,
                   const float *g, const float *b, int relu);
void het_vbn_sums16(const float *dy, const float *x, size_t n, const float *mean,
                    const float *inv, double *sdy, double *sdyh);
void het_vbn_dx16(float *dx, const float *dy, const float *x, size_t n, const float *k,
                  const float *mdy, const float *mdyh, const float *mean, const float *inv);

/* ---- bf16 (tensor/bf16.c): the numerics of --precision bf16 ----
 * het_bf16_round: f rounded to the nearest bf16 (ties to even; NaN stays a quiet NaN; past the
 * largest bf16: inf), returned as the float of the same value (its low 16 bits zero), as
 * oneDNN and the CPU's bf16 instructions round. het_vround_bf16: the same for n floats (dst
 * may be src). A convolution or product on rounded operands with fp32 sums is bf16 training's
 * definition (bf16 products are exact in fp32). */
float het_bf16_round(float f);
void het_vround_bf16(float *dst, const float *src, size_t n);
/* The same rounding, written as bf16 bits (the high 16 bits of the rounded float), for kernels
 * that read bf16 memory (oneDNN's matmul: tensor/dense_dnnl.c). */
void het_bf16_bits(uint16_t *dst, const float *src, size_t n);
/* The bf16 instructions of this CPU that the OS enabled (cpuid leaf 7, XCR0): AMX (AMX-BF16
 * with tiles), else AVX512-BF16, else none. HET_BF16_CPU=none|avx512|amx overrides it (tests of
 * the startup line). */
typedef enum { HET_BF16_ISA_NONE = 0, HET_BF16_ISA_AVX512 = 1, HET_BF16_ISA_AMX = 2 } het_bf16_isa;
het_bf16_isa het_bf16_cpu(void);
/* "AMX", "AVX512-BF16" or "none" (static). */
const char *het_bf16_isa_name(het_bf16_isa isa);
/* Whether oneDNN (built in, on this CPU) has bf16 convolutions: 1 with `what` naming the
 * implementation it would pick ("oneDNN 2.6.3 picks brgconv:avx512_core_amx_bf16"), 0 with
 * `what` saying why not ("oneDNN 2.6.3 has no bf16 convolution here (unimplemented)", "built
 * without oneDNN"); het_dnnl_bf16_enabled says whether hetrain runs them. Thread-safe; the
 * first call asks oneDNN once. */
int het_dnnl_bf16_probe(char *what, size_t n);
/* The multiplies per second of the CPU's bf16 dot product (AVX512-BF16's VDPBF16PS) over the
 * fp32 FMA's, measured once in a few ms of this thread's CPU time (best of 5 alternated rounds;
 * HET_BF16_RATIO=X: X, for tests); 0 where the CPU lacks either or the compiler is not GCC
 * (the probe uses its target attributes; auto then takes the portable path). 0.5 on an Intel
 * Xeon model 207 whose AMX is hidden; about 2 expected on AMD Zen 4 / Zen 5 (not measured yet;
 * bf16.c). */
double het_bf16_mac_ratio(void);
/* Which bf16 kernels --precision bf16 runs (--bf16-kernels): AUTO (the default) oneDNN's where
 * the CPU has AMX, or AVX512-BF16 whose dot product reaches HET_BF16_MIN_RATIO of the fp32
 * multiply rate (het_bf16_mac_ratio), else the portable path, which computes the same
 * definition on oneDNN's fp32 kernels; ONEDNN oneDNN's wherever the CPU has bf16 instructions;
 * PORTABLE the portable path. */
typedef enum {
    HET_BF16_KERNELS_AUTO = 0,
    HET_BF16_KERNELS_ONEDNN = 1,
    HET_BF16_KERNELS_PORTABLE = 2
} het_bf16_kernels;
#define HET_BF16_MIN_RATIO 0.75
/* Sets the choice for the process; call it before the models are made (their layers plan
 * their primitives for it). */
void het_dnnl_bf16_choose(het_bf16_kernels k);
/* What the choice came to and why, for the startup line: "oneDNN's" / "portable" and a reason
 * ("--bf16-kernels auto: this CPU's bf16 dot product runs at 0.50x the fp32 multiply rate, below
 * 0.75x"); returns het_dnnl_bf16_enabled(). */
int het_dnnl_bf16_why(char *why, size_t n);
/* Whether --precision bf16 runs oneDNN's bf16 convolutions (HET_DNNL_BF16): the CPU has AMX or
 * AVX512-BF16 (het_bf16_cpu), oneDNN is built in, allowed, and offers them
 * (het_dnnl_bf16_probe), the kernel choice takes them (het_dnnl_bf16_choose), and tests have
 * not turned them off (het_dnnl_bf16_disable). Elsewhere the layers take the portable path. */
int het_dnnl_bf16_enabled(void);
/* Tests: 1 turns oneDNN's bf16 kernels off (the portable path everywhere), 0 back on. */
void het_dnnl_bf16_disable(int off);

/* Re-executes the program (argv as given to main) with OPENBLAS_CORETYPE set when OpenBLAS
 * fell back to its generic kernels on a CPU with AVX-512 or AVX2 (see blas_select.c). Call it
 * first thing in main, before any thread or MPI start. Returns only when nothing was done (0)
 * or the exec failed (-1). */
int het_blas_select_kernels(char **argv);
/* The kernel set OpenBLAS is using (e.g. "SkylakeX", "Haswell", "Prescott"). */
const char *het_blas_corename(void);

/* Sets the BLAS thread count (OpenBLAS), which oneDNN's convolutions use too; returns the
 * previous value or -1 if unknown. */
int het_blas_set_threads(int n);
/* The calling thread's rate on the cost tables' reference kernel (single-thread SGEMM of
 * 512 x 512 operands, the fastest of 15 calls), in flop/s; 0 if it cannot be measured. */
double het_blas_reference_flops(void);

/* ---- 2-D convolution through oneDNN (tensor/conv_dnnl.c) ----
 * One handle per layer shape: input C x H x W, O output channels, k x k kernel, stride, zero
 * padding, with or without a bias. Arrays are plain NCHW (x, y, dx, dy) and OIHW (w, dw). Every
 * call takes `work`: het_dnnl_conv_work's per_sample * n + fixed floats, 64-byte aligned.
 * Backward adds the weight (and bias, unless db is NULL) gradient onto dw (db) and writes dx (dx_add = 0) or adds
 * onto it (dx_add = 1); dx == NULL skips the input gradient. No call ends the process.
 * Calls return HET_OK; HET_ENOTSUP (message set) when oneDNN refuses the primitives of a new
 * batch size on plain operands, with nothing written: the caller then runs its own kernels;
 * any other failure (a refusal on a channel-blocked side, which no caller has another path
 * for; out of memory or an error while running, when outputs may be half written) returns its
 * status with the message set, fills the outputs (y; dw, db, dx) with NaN, so that nothing
 * goes on from half-written values unnoticed (a NaN loss or weight stops a run: --on-nan), and
 * keeps the failure as the process's oneDNN fault (het_dnnl_fault, tensor/internal.h): a
 * layer's forward and backward cannot return a status.
 * het_dnnl_conv_create: HET_OK with *out a handle, or with *out NULL when oneDNN is not built in
 * or is disabled; HET_ENOTSUP (*out NULL, message "conv2d: oneDNN refused ...: <oneDNN's
 * status>") when oneDNN refuses the shape (its own out of memory included: the caller's kernels
 * need none); HET_EINVAL for a shape with no output (k larger than the padded input, a size
 * below 1); HET_ENOMEM. */
typedef struct het_dnnl_conv het_dnnl_conv;
int het_dnnl_available(void);
/* What runs convolutions, for the startup line, e.g. "oneDNN 2.6.3 (AVX-512) where channels
 * are multiples of 16". */
const char *het_dnnl_describe(void);
int het_dnnl_conv_create(het_dnnl_conv **out, int C, int H, int W, int O, int k, int stride,
                         int pad, int bias);
void het_dnnl_conv_free(het_dnnl_conv *h);
void het_dnnl_conv_work(const het_dnnl_conv *h, size_t *per_sample, size_t *fixed);
/* Layouts of a call's activations: `blk` holds HET_DNNL_X_BLK when x and dx are channel-blocked
 * (nChw16c: channel c of sample s at position p = h * W + w is element
 * s * C * H * W + (c / 16) * H * W * 16 + p * 16 + c % 16), HET_DNNL_Y_BLK when y and dy are;
 * 0: all plain NCHW. A side may be blocked only where het_dnnl_conv_blocked says so. A call
 * with a blocked side that fails leaves its outputs NaN (above: no caller has another path for
 * that layout). */
#define HET_DNNL_X_BLK 1
#define HET_DNNL_Y_BLK 2
/* In `blk` too: forward applies y = max(y, 0) itself (a oneDNN post-op: a ReLU layer after the
 * convolution then has nothing left to do). Pass it to backward as well (the same primitives). */
#define HET_DNNL_RELU 4
/* In `blk` too: the primitives read x, w and dy as bf16 (oneDNN's bf16 kernels: AMX or
 * AVX512-BF16; only where het_dnnl_bf16_enabled says so) and sum in fp32; the arrays stay fp32
 * (the reorders into the primitives' layouts round them to bf16, to nearest even, as
 * het_bf16_round) and y, dx, dw, db are fp32. A refusal is HET_ENOTSUP as above. */
#define HET_DNNL_BF16 8 /* only where het_dnnl_conv_bf16 */
/* With HET_DNNL_BF16 and a blocked side: activations that stay bf16 between two convolutions
 * (nn.h: het_layer.in_lp / out_lp). X_BF16: x is nChw16c bf16 (uint16_t bits in the float
 * array's first half), read by forward and the weight gradient; dx stays fp32. Y_BF16: forward
 * writes y as nChw16c bf16 (its fp32 sum rounded to nearest even, after bias and ReLU: the
 * values a later reorder would have rounded it to); dy stays fp32. */
#define HET_DNNL_X_BF16 16
#define HET_DNNL_Y_BF16 32
/* *x_ok (*y_ok): 1 when the input (output) side may be passed blocked, and its primitives run
 * on nChw16c themselves, so a blocked operand needs no reorder: channels a multiple of 16 and
 * oneDNN picked that layout (its AVX-512 kernels do). */
void het_dnnl_conv_blocked(const het_dnnl_conv *h, int *x_ok, int *y_ok);
/* 1 when calls on h may ask for bf16 (HET_DNNL_BF16): het_dnnl_bf16_enabled and oneDNN gave h
 * bf16 primitives. A bf16 call that oneDNN refuses later (a new batch size) fails as a blocked
 * one does (NaN outputs, the fault kept): the layer has no other bf16 path at that point. */
int het_dnnl_conv_bf16(const het_dnnl_conv *h);
int het_dnnl_conv_forward(het_dnnl_conv *h, int n, const float *x, const float *w,
                          const float *b, float *y, float *work, int blk);
int het_dnnl_conv_backward(het_dnnl_conv *h, int n, const float *x, const float *w,
                           const float *dy, float *dx, int dx_add, float *dw, float *db,
                           float *work, int blk);

/* ---- the dense layer's bf16 products on oneDNN's matmul (tensor/dense_dnnl.c) ----
 * A handle for a layer of n_in inputs and n_out outputs (I and O below): made only where het_dnnl_bf16_enabled and
 * oneDNN has a bf16 matmul of the shape (else *out NULL and HET_OK: the portable path).
 * het_dnnl_dense_on: h is there and oneDNN's bf16 kernels are still allowed. Operands are bf16
 * bits (het_bf16_bits), row-major: x [n x I], w [O x I], dy [n x O]; results fp32:
 * forward y = x w^T + b (b [O]); backward dw += dy^T x, and dx = dy w when dx is not NULL.
 * HET_ENOTSUP with nothing written when oneDNN refuses batch n (the caller's portable path
 * runs); any other failure fills the outputs with NaN and is kept as the oneDNN fault. */
typedef struct het_dnnl_dense het_dnnl_dense;
int het_dnnl_dense_create(het_dnnl_dense **out, int n_in, int n_out);
void het_dnnl_dense_free(het_dnnl_dense *h);
int het_dnnl_dense_on(const het_dnnl_dense *h);
int het_dnnl_dense_forward(het_dnnl_dense *h, int n, const uint16_t *x, const uint16_t *w,
                           const float *b, float *y);
int het_dnnl_dense_backward(het_dnnl_dense *h, int n, const uint16_t *x, const uint16_t *w,
                            const uint16_t *dy, float *dx, float *dw);
/* Reference twins (naive, double sums): y = conv(x, w) + b over n samples; backward adds the
 * weight gradient to dw, the bias gradient to db (when not NULL) and the input gradient to dx
 * (when not NULL). */
void het_conv2d_ref(float *y, const float *x, const float *w, const float *b, int n, int C, int H,
                    int W, int O, int k, int stride, int pad);
void het_conv2d_backward_ref(float *dx, float *dw, float *db, const float *x, const float *w,
                             const float *dy, int n, int C, int H, int W, int O, int k,
                             int stride, int pad);
/* Threads of each call (het_blas_set_threads sets it too). */
void het_dnnl_set_threads(int n);
/* Tests: 1 makes het_dnnl_available() 0, so layers planned afterwards use their own kernels
 * (HET_CONV=ref in the environment does the same for a run). */
void het_dnnl_disable(int off);

#ifdef __cplusplus
}
#endif
#endif

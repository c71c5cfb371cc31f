/* 2-D convolution, square kernel, zero padding, NCHW; parameters as PyTorch's Conv2d:
 * weight [out_c x in_c x k x k] then bias [out_c].
 *
 * DESIGN. Three paths, chosen per call:
 *  - direct (stride 1, at most DIRECT_MAX_CH channels each side, pad <= k - 1, CPU with
 *    AVX-512): the kernels of tensor/conv_direct.c read the zero-padded input in place, with no
 *    column matrix. Forward is one register-blocked pass per sample; the weight gradient is one
 *    reduction over the whole batch; the input gradient is a forward convolution of the dout
 *    padded by k - 1 - pad with the weights flipped and their channel axes swapped. Measured
 *    against the wide im2col path below (bench/bench_layers.c, 16 samples, best of 150, us):
 *    conv1 forward 69 -> 42, backward (no din) 78 -> 59; conv2 forward 121 -> 66, backward
 *    264 -> 194.
 * Otherwise im2col + GEMM, one image at a time. Measured at LeNet shapes, batch 64,
 * one BLAS thread: one whole-batch GEMM (column matrix [C*k*k x B*oh*ow]) was slower than
 * per-image GEMMs (conv1 forward 950 vs 523 us, backward 1061 vs 439 us; conv2 similar), since
 * it needs a transposed copy of the output and dout and its column matrix leaves the caches.
 * Two GEMM paths:
 *  - stride 1 (LeNet, most CNNs): the "wide" im2col of tensor/internal.h. Each column-matrix row
 *    is one memcpy from the zero-padded image, at the price of Wp - ow wasted columns per output
 *    row (+14% GEMM work for LeNet's conv1, +36% for conv2); the classic im2col spent more than
 *    that on short copies and padding tests (conv1 forward 523 -> 300 us per batch of 64). The
 *    bias rides in the GEMM as an extra input row of ones against the weights augmented with the
 *    bias column, so forward writes each output once (a crop of the wide result) and backward
 *    gets the bias gradient from the same GEMM. Columns go in chunks of CONV_CHUNK so that a
 *    chunk stays in L1 between its copies and its GEMM. Backward accumulates [dW | db] for the
 *    whole batch in a scratch matrix and adds it to the gradients once; the column matrix is
 *    rebuilt in backward rather than cached (a memcpy per row from an L1-resident image is
 *    cheaper than keeping 80 KB per sample in memory).
 *  - any stride: classic im2col (tensor.h), GEMM into the output preset to the bias.
 * With din == NULL (the first layer) backward skips the input gradient, col2im included.
 *  - oneDNN (tensor/conv_dnnl.c), when built in, for shapes whose output channels are a multiple
 *    of 16 and whose input channels are too or at most 4 (cifar-cnn: 1->32, 32->32, 32->64,
 *    64->64): its blocked-layout kernels ran these 2.2-2.5x faster than the wide path (one
 *    thread, batch 32: 32->32 at 28x28 forward 7162 -> 2815 us). LeNet's 6 and 16 channels stay
 *    on the direct kernels. A shape oneDNN refuses at plan, or a batch size it refuses on plain
 *    activations, falls back to the paths above (a note on stderr, once per process); out of
 *    memory fails the plan. Where oneDNN fails on blocked activations or while running, the
 *    layer's outputs are NaN and het_dnnl_fault says why (tensor.h). Where oneDNN
 *    runs on channel-blocked activations itself, the layer reads and writes them blocked
 *    (nn.h: HET_BLK_TAKE / EMIT), which spares the reorders between consecutive layers.
 * In bf16 (nn.h: het_model_set_precision) oneDNN's bf16 kernels run where the CPU has them
 * (het_dnnl_conv_bf16: AMX or AVX512-BF16), their reorders rounding input, weight and output
 * gradient to bf16; elsewhere every path above runs on the input and output gradient rounded
 * to bf16 into het_exec.lp (element-wise, so in either layout) and on the weight the model
 * rounded: fp32 sums of exact bf16 products either way. Between two convolutions on oneDNN's
 * bf16 kernels the activations stay bf16 (in_lp / out_lp, model.c): forward writes its output
 * rounded and the next one reads it as it is, in forward and in its weight gradient. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain/nn.h"
#include "hetrain/tensor.h"
#include "nn/layer_kinds.h"
#include "tensor/internal.h"

/* Wide columns per GEMM call: a chunk of the column matrix (26 x 256 floats for LeNet's conv1)
 * stays in L1 between the copies that build it and the GEMM that reads it; whole-image chunks
 * measured 1.5x slower for conv1. A constant, so results never depend on timing. */
#define CONV_CHUNK 256
/* OpenBLAS 0.3.21's small-matrix path takes a GEMM with the reduction dimension contiguous in
 * both operands ("TN") only when the result has <= 1200 elements. Larger weight gradients are
 * computed as dW^T = col * dout^T from a transposed copy of dout instead (2.4x faster for
 * LeNet's conv2; 1.5x slower for conv1, which stays on the direct form). */
#define CONV_DW_DIRECT_MAX 1200
/* Direct kernels for stride 1 when both channel counts are at most this (LeNet: 1, 6, 16),
 * where im2col + GEMM measured 2-4x slower (bench/bench_layers.c). */
#define DIRECT_MAX_CH 16

typedef struct conv2d {
    het_layer base;
    int oc, k, stride, pad;
    /* from plan() */
    int C, H, W, oh, ow;
    int ckk;        /* C * k * k */
    int wide;       /* stride-1 path */
    int Hp, Wp;     /* padded input (wide path) */
    size_t nw;      /* wide columns */
    size_t nc;      /* columns per chunk */
    int dw_t;       /* weight gradient through the transposed dout */
    int direct;     /* shape suits the direct kernels (used when the CPU has them) */
    int Hq, Wq;     /* dout padded by k - 1 - pad (direct input gradient) */
    het_dnnl_conv *dn; /* oneDNN handle, NULL when not used */
} conv2d;

/* Work buffer of the wide path, in this order. */
typedef struct wide_bufs {
    float *col;   /* (ckk + 1) x nc: a chunk of [im2col; ones] */
    float *outw;  /* oc x nw: wide output (forward) or wide dout (backward) */
    float *doutT; /* nw x oc: transposed wide dout, when dw_t */
    float *xp;    /* C x Hp x Wp: padded input, when pad > 0 */
    float *dxp;   /* C x Hp x Wp: its gradient, when pad > 0 */
    float *waug;  /* oc x (ckk + 1): [W | b] */
    float *gaug;  /* [dW | db], oc x (ckk + 1), or its transpose when dw_t */
} wide_bufs;

/* Carves the work buffer (NULL: only sizes it); returns the floats used. */
static size_t wide_split(const conv2d *c, float *work, wide_bufs *b) {
    size_t aug = (size_t)c->ckk + 1, oc = (size_t)c->oc;
    size_t xp = c->pad > 0 ? (size_t)c->C * (size_t)c->Hp * (size_t)c->Wp : 0;
    size_t sizes[7] = {aug * c->nc, oc * c->nw, c->dw_t ? c->nw * oc : 0, xp, xp, oc * aug, oc * aug};
    float **ptrs[7] = {&b->col, &b->outw, &b->doutT, &b->xp, &b->dxp, &b->waug, &b->gaug};
    size_t off = 0;
    for (int i = 0; i < 7; i++) {
        *ptrs[i] = work ? work + off : NULL;
        off += sizes[i];
    }
    return off;
}

/* Work buffer of the direct path: fixed part, then one padded input per sample. */
typedef struct direct_bufs {
    float *wt;    /* ckk x oc: transposed weights */
    float *wft;   /* (oc*k*k) x C: flipped, channel-swapped weights (input gradient), or the
                     channels-last weights of het_conv_direct_dx */
    float *doutp; /* oc x Hq x Wq: one sample's dout padded by k - 1 - pad, or its
                     channels-last copy for het_conv_direct_dx */
    float *dws;   /* scratch of het_conv_direct_dw */
    float *xp;    /* batch x C x Hp x Wp: padded inputs, when pad > 0 */
} direct_bufs;

/* Carves the work buffer (NULL: only sizes it); returns the floats of the fixed part. */
static size_t direct_split(const conv2d *c, float *work, int batch, direct_bufs *b) {
    size_t n = (size_t)c->oc * (size_t)c->ckk, ncl = (size_t)c->ckk * 16;
    size_t dq = (size_t)c->oc * (size_t)c->Hq * (size_t)c->Wq, dcl = (size_t)c->oh * (size_t)c->ow * 16;
    /* wft and doutp also hold the channels-last operands of het_conv_direct_dx */
    size_t sizes[5] = {n, n > ncl ? n : ncl, dq > dcl ? dq : dcl,
                       het_conv_direct_dw_scratch(c->oc, c->C, c->Hp, c->Wp, c->k),
                       c->pad > 0 ? (size_t)batch * (size_t)c->C * (size_t)c->Hp * (size_t)c->Wp : 0};
    float **ptrs[5] = {&b->wt, &b->wft, &b->doutp, &b->dws, &b->xp};
    size_t off = 0;
    for (int i = 0; i < 5; i++) {
        *ptrs[i] = work ? work + off : NULL;
        off += sizes[i];
    }
    return off - sizes[4];
}

static int conv_plan(het_layer *l, het_shape in, het_layer_plan *p) {
    conv2d *c = (conv2d *)l;
    if (c->oc < 1 || c->k < 1 || c->stride < 1 || c->pad < 0)
        return het_error_set(HET_EINVAL, "conv2d: bad config out_channels %d kernel %d stride %d pad %d",
                             c->oc, c->k, c->stride, c->pad);
    int Hp = in.h + 2 * c->pad, Wp = in.w + 2 * c->pad;
    if (in.c < 1 || Hp < c->k || Wp < c->k)
        return het_error_set(HET_ESHAPE, "conv2d: input %dx%dx%d with pad %d smaller than kernel %d",
                             in.c, in.h, in.w, c->pad, c->k);
    c->C = in.c;
    c->H = in.h;
    c->W = in.w;
    c->oh = (Hp - c->k) / c->stride + 1;
    c->ow = (Wp - c->k) / c->stride + 1;
    c->ckk = in.c * c->k * c->k;
    c->wide = c->stride == 1;
    c->Hp = Hp;
    c->Wp = Wp;
    memset(p, 0, sizeof *p);
    p->out = (het_shape){c->oc, c->oh, c->ow};
    p->n_params = (size_t)c->oc * (size_t)c->ckk + (size_t)c->oc;
    p->lp_len[0] = (size_t)c->oc * (size_t)c->ckk; /* bf16: the weight, not the bias */
    if (c->wide) {
        c->nw = het_wide_cols(Hp, Wp, c->k);
        c->nc = c->nw < CONV_CHUNK ? c->nw : CONV_CHUNK;
        c->dw_t = (size_t)c->oc * ((size_t)c->ckk + 1) > CONV_DW_DIRECT_MAX;
        wide_bufs b;
        p->work_fixed = wide_split(c, NULL, &b);
        c->direct = c->pad <= c->k - 1 && c->oc <= DIRECT_MAX_CH && c->C <= DIRECT_MAX_CH;
        if (c->direct) {
            c->Hq = c->oh + 2 * (c->k - 1 - c->pad);
            c->Wq = c->ow + 2 * (c->k - 1 - c->pad);
            direct_bufs d;
            size_t fixed = direct_split(c, NULL, 0, &d);
            if (fixed > p->work_fixed) p->work_fixed = fixed;
            p->work_per_sample = c->pad > 0 ? (size_t)c->C * (size_t)Hp * (size_t)Wp : 0;
        }
    } else {
        p->work_fixed = (size_t)c->ckk * (size_t)c->oh * (size_t)c->ow;
    }
    het_dnnl_conv_free(c->dn);
    c->dn = NULL;
    if (c->oc % 16 == 0 && (c->C % 16 == 0 || c->C <= 4)) {
        int st = het_dnnl_conv_create(&c->dn, c->C, c->H, c->W, c->oc, c->k, c->stride, c->pad, 1);
        if (st == HET_ENOTSUP) het_dnnl_note_fallback(); /* the paths above take it */
        else if (st != HET_OK) return st;
    }
    if (c->dn) { /* room for either path: the calls of one never overlap the other's */
        size_t ps, fixed;
        het_dnnl_conv_work(c->dn, &ps, &fixed);
        p->work_per_sample += ps;
        if (fixed > p->work_fixed) p->work_fixed = fixed;
        int x_ok, y_ok; /* blocked activations where oneDNN runs on them itself */
        het_dnnl_conv_blocked(c->dn, &x_ok, &y_ok);
        p->blk = (x_ok ? HET_BLK_TAKE : 0) | (y_ok ? HET_BLK_EMIT : 0);
        p->fuse_relu = 1; /* a post-op of oneDNN's forward */
    }
    return HET_OK;
}


static void conv_init(het_layer *l, float *params, float *state, het_rng *rng) {
    (void)state;
    conv2d *c = (conv2d *)l;
    /* PyTorch: kaiming_uniform_(a = sqrt(5)) gives bound 1/sqrt(fan_in); bias the same */
    float bound = 1.0f / sqrtf((float)c->ckk);
    size_t n = (size_t)c->oc * (size_t)c->ckk + (size_t)c->oc;
    for (size_t i = 0; i < n; i++) params[i] = bound * (2.0f * het_rng_uniform(rng) - 1.0f);
}

/* The padded image of sample `x` (interior rows copied into xp, whose border stays zero), or
 * x itself when there is no padding. */
static const float *wide_input(const conv2d *c, float *xp, const float *x) {
    if (c->pad == 0) return x;
    for (int ch = 0; ch < c->C; ch++)
        for (int y = 0; y < c->H; y++)
            memcpy(xp + ((size_t)ch * (size_t)c->Hp + (size_t)(y + c->pad)) * (size_t)c->Wp +
                       (size_t)c->pad,
                   x + ((size_t)ch * (size_t)c->H + (size_t)y) * (size_t)c->W,
                   sizeof(float) * (size_t)c->W);
    return xp;
}

/* Per call: zero the padded image's border and set the ones row of the column chunk. */
static void wide_prepare(const conv2d *c, const wide_bufs *b) {
    if (c->pad > 0) memset(b->xp, 0, sizeof(float) * (size_t)c->C * (size_t)c->Hp * (size_t)c->Wp);
    float *ones = b->col + (size_t)c->ckk * c->nc;
    for (size_t j = 0; j < c->nc; j++) ones[j] = 1.0f;
}

static void conv_forward_wide(conv2d *c, const het_exec *x, const float *in, float *out, int batch) {
    const float *Wt = x->params, *bias = x->params + (size_t)c->oc * (size_t)c->ckk;
    const size_t in_sz = (size_t)c->C * (size_t)c->H * (size_t)c->W;
    const size_t P = (size_t)c->oh * (size_t)c->ow, out_sz = (size_t)c->oc * P;
    const size_t aug = (size_t)c->ckk + 1;
    wide_bufs b;
    wide_split(c, x->work, &b);
    wide_prepare(c, &b);
    for (int o = 0; o < c->oc; o++) {
        memcpy(b.waug + (size_t)o * aug, Wt + (size_t)o * (size_t)c->ckk, sizeof(float) * (size_t)c->ckk);
        b.waug[(size_t)o * aug + (size_t)c->ckk] = bias[o];
    }
    for (int s = 0; s < batch; s++) {
        const float *xs = wide_input(c, b.xp, in + (size_t)s * in_sz);
        for (size_t j0 = 0; j0 < c->nw; j0 += c->nc) {
            size_t n = c->nw - j0 < c->nc ? c->nw - j0 : c->nc;
            het_im2col_wide(b.col, c->nc, xs, c->C, c->Hp, c->Wp, c->k, j0, n);
            het_gemm(0, 0, c->oc, (int)n, (int)aug, 1.0f, b.waug, (int)aug, b.col, (int)c->nc,
                     0.0f, b.outw + j0, (int)c->nw);
        }
        float *os = out + (size_t)s * out_sz; /* crop: drop the wrap columns */
        for (int o = 0; o < c->oc; o++)
            for (int y = 0; y < c->oh; y++)
                memcpy(os + (size_t)o * P + (size_t)y * (size_t)c->ow,
                       b.outw + (size_t)o * c->nw + (size_t)y * (size_t)c->Wp,
                       sizeof(float) * (size_t)c->ow);
    }
}

static void conv_backward_wide(conv2d *c, const het_exec *x, const float *in, const float *dout,
                               float *din, int batch) {
    const float *Wt = x->params;
    float *dW = x->grads, *db = x->grads + (size_t)c->oc * (size_t)c->ckk;
    const size_t in_sz = (size_t)c->C * (size_t)c->H * (size_t)c->W;
    const size_t P = (size_t)c->oh * (size_t)c->ow, out_sz = (size_t)c->oc * P;
    const size_t aug = (size_t)c->ckk + 1, oc = (size_t)c->oc;
    const size_t xp_sz = (size_t)c->C * (size_t)c->Hp * (size_t)c->Wp;
    wide_bufs b;
    wide_split(c, x->work, &b);
    wide_prepare(c, &b);
    /* the wrap columns of the wide dout stay zero for the whole batch */
    memset(b.outw, 0, sizeof(float) * oc * c->nw);
    if (c->dw_t) memset(b.doutT, 0, sizeof(float) * c->nw * oc);
    for (int s = 0; s < batch; s++) {
        const float *xs = wide_input(c, b.xp, in + (size_t)s * in_sz);
        const float *ds = dout + (size_t)s * out_sz;
        for (size_t o = 0; o < oc; o++)
            for (int y = 0; y < c->oh; y++)
                memcpy(b.outw + o * c->nw + (size_t)y * (size_t)c->Wp, ds + o * P + (size_t)y * (size_t)c->ow,
                       sizeof(float) * (size_t)c->ow);
        if (c->dw_t)
            for (int y = 0; y < c->oh; y++)
                for (int xx = 0; xx < c->ow; xx++) {
                    float *t = b.doutT + ((size_t)y * (size_t)c->Wp + (size_t)xx) * oc;
                    const float *g = ds + (size_t)y * (size_t)c->ow + (size_t)xx;
                    for (size_t o = 0; o < oc; o++) t[o] = g[o * P];
                }
        float *dis = din ? din + (size_t)s * in_sz : NULL;
        float *dxp = c->pad > 0 ? b.dxp : dis;
        if (din) memset(dxp, 0, sizeof(float) * xp_sz);
        for (size_t j0 = 0; j0 < c->nw; j0 += c->nc) {
            size_t n = c->nw - j0 < c->nc ? c->nw - j0 : c->nc;
            float beta = s == 0 && j0 == 0 ? 0.0f : 1.0f;
            het_im2col_wide(b.col, c->nc, xs, c->C, c->Hp, c->Wp, c->k, j0, n);
            /* [dW | db] (+)= dout_w [col; 1]^T, summed over chunks and the batch */
            if (c->dw_t)
                het_gemm(0, 0, (int)aug, c->oc, (int)n, 1.0f, b.col, (int)c->nc, b.doutT + j0 * oc,
                         c->oc, beta, b.gaug, c->oc);
            else
                het_gemm(0, 1, c->oc, (int)aug, (int)n, 1.0f, b.outw + j0, (int)c->nw, b.col,
                         (int)c->nc, beta, b.gaug, (int)aug);
            if (!din) continue;
            /* dcol = W^T dout_w, into the chunk's first ckk rows (the ones row stays) */
            het_gemm(1, 0, c->ckk, (int)n, c->oc, 1.0f, Wt, c->ckk, b.outw + j0, (int)c->nw, 0.0f,
                     b.col, (int)c->nc);
            het_col2im_wide(dxp, b.col, c->nc, c->C, c->Hp, c->Wp, c->k, j0, n);
        }
        if (din && c->pad > 0)
            for (int ch = 0; ch < c->C; ch++)
                for (int y = 0; y < c->H; y++)
                    memcpy(dis + ((size_t)ch * (size_t)c->H + (size_t)y) * (size_t)c->W,
                           dxp + ((size_t)ch * (size_t)c->Hp + (size_t)(y + c->pad)) * (size_t)c->Wp +
                               (size_t)c->pad,
                           sizeof(float) * (size_t)c->W);
    }
    if (batch <= 0) return;
    if (c->dw_t) {
        for (size_t r = 0; r < (size_t)c->ckk; r++)
            for (size_t o = 0; o < oc; o++) dW[o * (size_t)c->ckk + r] += b.gaug[r * oc + o];
        for (size_t o = 0; o < oc; o++) db[o] += b.gaug[(size_t)c->ckk * oc + o];
    } else {
        for (size_t o = 0; o < oc; o++) {
            het_vec_add(dW + o * (size_t)c->ckk, b.gaug + o * aug, (size_t)c->ckk);
            db[o] += b.gaug[o * aug + (size_t)c->ckk];
        }
    }
}

/* Copies `batch` samples into zero-padded images xp (batch x C x Hp x Wp). */
static void pad_inputs(const conv2d *c, float *xp, const float *in, int batch) {
    const size_t in_sz = (size_t)c->C * (size_t)c->H * (size_t)c->W;
    const size_t xp_sz = (size_t)c->C * (size_t)c->Hp * (size_t)c->Wp;
    memset(xp, 0, sizeof(float) * xp_sz * (size_t)batch);
    for (int s = 0; s < batch; s++) wide_input(c, xp + (size_t)s * xp_sz, in + (size_t)s * in_sz);
}

static void conv_forward_direct(conv2d *c, const het_exec *x, const float *in, float *out, int batch) {
    const float *Wt = x->params, *bias = x->params + (size_t)c->oc * (size_t)c->ckk;
    const size_t in_sz = (size_t)c->C * (size_t)c->H * (size_t)c->W;
    const size_t xp_sz = (size_t)c->C * (size_t)c->Hp * (size_t)c->Wp;
    const size_t out_sz = (size_t)c->oc * (size_t)c->oh * (size_t)c->ow;
    direct_bufs b;
    direct_split(c, x->work, batch, &b);
    for (size_t r = 0; r < (size_t)c->ckk; r++)
        for (size_t o = 0; o < (size_t)c->oc; o++) b.wt[r * (size_t)c->oc + o] = Wt[o * (size_t)c->ckk + r];
    if (c->pad > 0) pad_inputs(c, b.xp, in, batch);
    for (int s = 0; s < batch; s++) {
        const float *xs = c->pad > 0 ? b.xp + (size_t)s * xp_sz : in + (size_t)s * in_sz;
        het_conv_direct(out + (size_t)s * out_sz, xs, b.wt, bias, c->oc, c->C, c->Hp, c->Wp, c->k,
                        c->pad);
    }
}

/* Weight gradient as one reduction over the batch; input gradient as a forward convolution of
 * the dout padded by q = k - 1 - pad with wft[o][i][j][c] = W[o][c][k-1-i][k-1-j]. */
static void conv_backward_direct(conv2d *c, const het_exec *x, const float *in, const float *dout,
                                 float *din, int batch) {
    const float *Wt = x->params;
    float *dW = x->grads, *db = x->grads + (size_t)c->oc * (size_t)c->ckk;
    const size_t in_sz = (size_t)c->C * (size_t)c->H * (size_t)c->W;
    const size_t xp_sz = (size_t)c->C * (size_t)c->Hp * (size_t)c->Wp;
    const size_t P = (size_t)c->oh * (size_t)c->ow, out_sz = (size_t)c->oc * P;
    const int k = c->k, q = c->k - 1 - c->pad;
    direct_bufs b;
    direct_split(c, x->work, batch, &b);
    if (batch <= 0) return;
    if (c->pad > 0) pad_inputs(c, b.xp, in, batch);
    het_conv_direct_dw(dW, db, c->pad > 0 ? b.xp : in, c->pad > 0 ? xp_sz : in_sz, dout, out_sz,
                       batch, c->oc, c->C, c->Hp, c->Wp, k, b.dws);
    if (!din) return;
    if (het_conv_direct_dx_ok(c->oc, k, c->pad, c->ow)) { /* vectorized along the channels */
        het_conv_direct_dx_weights(b.wft, Wt, c->oc, c->C, k);
        for (int s = 0; s < batch; s++)
            het_conv_direct_dx(din + (size_t)s * in_sz, dout + (size_t)s * out_sz, b.wft, c->oc,
                               c->C, c->oh, c->ow, k, b.doutp);
        return;
    }
    for (int o = 0; o < c->oc; o++)
        for (int ch = 0; ch < c->C; ch++)
            for (int i = 0; i < k; i++)
                for (int j = 0; j < k; j++)
                    b.wft[(((size_t)o * (size_t)k + (size_t)i) * (size_t)k + (size_t)j) * (size_t)c->C + (size_t)ch] =
                        Wt[(((size_t)o * (size_t)c->C + (size_t)ch) * (size_t)k + (size_t)(k - 1 - i)) * (size_t)k +
                           (size_t)(k - 1 - j)];
    if (q > 0) memset(b.doutp, 0, sizeof(float) * (size_t)c->oc * (size_t)c->Hq * (size_t)c->Wq);
    for (int s = 0; s < batch; s++) {
        const float *ds = dout + (size_t)s * out_sz;
        if (q > 0) { /* interior rows; the border stays zero */
            for (int o = 0; o < c->oc; o++)
                for (int y = 0; y < c->oh; y++)
                    memcpy(b.doutp + ((size_t)o * (size_t)c->Hq + (size_t)(y + q)) * (size_t)c->Wq + (size_t)q,
                           ds + (size_t)o * P + (size_t)y * (size_t)c->ow, sizeof(float) * (size_t)c->ow);
            ds = b.doutp;
        }
        het_conv_direct(din + (size_t)s * in_sz, ds, b.wft, NULL, c->C, c->oc, c->Hq, c->Wq, k, q);
    }
}

/* hetrain's own kernels: direct, wide, or im2col + GEMM */
static void conv_forward_own(conv2d *c, const het_exec *x, const float *in, float *out, int batch) {
    if (c->direct && het_conv_direct_ok(c->k, c->pad)) {
        conv_forward_direct(c, x, in, out, batch);
        return;
    }
    if (c->wide) {
        conv_forward_wide(c, x, in, out, batch);
        return;
    }
    const float *Wt = x->params, *bias = x->params + (size_t)c->oc * (size_t)c->ckk;
    const size_t in_sz = (size_t)c->C * (size_t)c->H * (size_t)c->W;
    const size_t P = (size_t)c->oh * (size_t)c->ow, out_sz = (size_t)c->oc * P;
    float *col = x->work;
    for (int s = 0; s < batch; s++) {
        float *os = out + (size_t)s * out_sz;
        het_im2col(col, in + (size_t)s * in_sz, c->C, c->H, c->W, c->k, c->stride, c->pad, c->oh,
                   c->ow);
        for (int o = 0; o < c->oc; o++)
            for (size_t j = 0; j < P; j++) os[(size_t)o * P + j] = bias[o];
        het_gemm(0, 0, c->oc, (int)P, c->ckk, 1.0f, Wt, c->ckk, col, (int)P, 1.0f, os, (int)P);
    }
}

static const het_layer_ops conv2d_ops;

/* The layouts and fusion of this layer's oneDNN calls (a blocked or bf16 call that oneDNN
 * refuses leaves NaN outputs and a fault: this layer has no other path for it then). */
static int conv_blk(const het_layer *l) {
    return (l->in_blk ? HET_DNNL_X_BLK : 0) | (l->out_blk ? HET_DNNL_Y_BLK : 0) |
           (l->relu_out ? HET_DNNL_RELU : 0) | (l->in_lp ? HET_DNNL_X_BF16 : 0) |
           (l->out_lp ? HET_DNNL_Y_BF16 : 0);
}

/* oneDNN's bf16 kernels: the operands rounded by their reorders (or already bf16 on an edge
 * that stays so: in_lp / out_lp, which only this path reads or writes). */
static int on_dnnl_bf16(const het_layer *l, const conv2d *c, const het_exec *x) {
    return (x->bf16 && het_dnnl_conv_bf16(c->dn)) || l->in_lp || l->out_lp;
}

int het_nn_conv_lp(const het_layer *l) {
    return l->ops == &conv2d_ops && het_dnnl_conv_bf16(((const conv2d *)l)->dn);
}

/* Whether a oneDNN call's status leaves the work to this layer's own kernels: a refusal on
 * plain operands (nothing written). Any other failure left NaN outputs and a fault (tensor.h),
 * which the layer keeps: forward and backward return no status. */
static int dnnl_fallback(const het_layer *l, int st) {
    if (st != HET_ENOTSUP || l->in_blk || l->out_blk) return 0;
    het_dnnl_note_fallback();
    return 1;
}

static void conv_forward(het_layer *l, const het_exec *x, const float *in, float *out, int batch) {
    conv2d *c = (conv2d *)l;
    if (on_dnnl_bf16(l, c, x)) {
        het_dnnl_conv_forward(c->dn, batch, in, x->params, x->params + (size_t)c->oc * (size_t)c->ckk,
                              out, x->work, conv_blk(l) | HET_DNNL_BF16);
        return;
    }
    if (x->bf16) { /* the input as bf16 (x->params holds the rounded weight) */
        het_vround_bf16(x->lp, in, het_shape_size(l->in) * (size_t)batch);
        in = x->lp;
    }
    if (c->dn && !dnnl_fallback(l, het_dnnl_conv_forward(c->dn, batch, in, x->params,
                                                         x->params + (size_t)c->oc * (size_t)c->ckk,
                                                         out, x->work, conv_blk(l))))
        return;
    conv_forward_own(c, x, in, out, batch);
    if (l->relu_out) het_vrelu(out, het_shape_size(l->out) * (size_t)batch);
}

static void conv_backward(het_layer *l, const het_exec *x, const float *in, const float *out,
                          const float *dout, float *din, int batch) {
    (void)out;
    conv2d *c = (conv2d *)l;
    if (on_dnnl_bf16(l, c, x)) {
        het_dnnl_conv_backward(c->dn, batch, in, x->params, dout, din, 0, x->grads,
                               x->grads + (size_t)c->oc * (size_t)c->ckk, x->work,
                               conv_blk(l) | HET_DNNL_BF16);
        return;
    }
    if (x->bf16) { /* input and output gradient as bf16; the bias gradient sums them in fp32 */
        const size_t ni = het_shape_size(l->in) * (size_t)batch;
        het_vround_bf16(x->lp, in, ni);
        het_vround_bf16(x->lp + ni, dout, het_shape_size(l->out) * (size_t)batch);
        in = x->lp;
        dout = x->lp + ni;
    }
    if (c->dn && !dnnl_fallback(l, het_dnnl_conv_backward(c->dn, batch, in, x->params, dout, din,
                                                          0, x->grads,
                                                          x->grads + (size_t)c->oc * (size_t)c->ckk,
                                                          x->work, conv_blk(l))))
        return;
    if (c->direct && het_conv_direct_ok(c->k, c->pad)) {
        conv_backward_direct(c, x, in, dout, din, batch);
        return;
    }
    if (c->wide) {
        conv_backward_wide(c, x, in, dout, din, batch);
        return;
    }
    const float *Wt = x->params;
    float *dW = x->grads, *db = x->grads + (size_t)c->oc * (size_t)c->ckk;
    const size_t in_sz = (size_t)c->C * (size_t)c->H * (size_t)c->W;
    const size_t P = (size_t)c->oh * (size_t)c->ow, out_sz = (size_t)c->oc * P;
    float *col = x->work;
    for (int s = 0; s < batch; s++) {
        const float *ds = dout + (size_t)s * out_sz;
        het_im2col(col, in + (size_t)s * in_sz, c->C, c->H, c->W, c->k, c->stride, c->pad, c->oh,
                   c->ow);
        het_gemm(0, 1, c->oc, c->ckk, (int)P, 1.0f, ds, (int)P, col, (int)P, 1.0f, dW, c->ckk);
        for (int o = 0; o < c->oc; o++) {
            float acc = 0.0f;
            for (size_t j = 0; j < P; j++) acc += ds[(size_t)o * P + j];
            db[o] += acc;
        }
        if (!din) continue;
        het_gemm(1, 0, c->ckk, (int)P, c->oc, 1.0f, Wt, c->ckk, ds, (int)P, 0.0f, col, (int)P);
        float *dis = din + (size_t)s * in_sz;
        memset(dis, 0, sizeof(float) * in_sz);
        het_col2im(dis, col, c->C, c->H, c->W, c->k, c->stride, c->pad, c->oh, c->ow);
    }
}

static void conv_destroy(het_layer *l) {
    het_dnnl_conv_free(((conv2d *)l)->dn);
    free(l);
}

static const het_layer_ops conv2d_ops = {
    .name = "conv2d",
    .plan = conv_plan,
    .init = conv_init,
    .forward = conv_forward,
    .backward = conv_backward,
    .destroy = conv_destroy,
};

het_layer *het_conv2d_new(int out_channels, int kernel, int stride, int pad) {
    conv2d *c = calloc(1, sizeof *c);
    if (!c) {
        het_error_set(HET_ENOMEM, "conv2d: out of memory");
        return NULL;
    }
    c->base.ops = &conv2d_ops;
    c->oc = out_channels;
    c->k = kernel;
    c->stride = stride;
    c->pad = pad;
    return &c->base;
}

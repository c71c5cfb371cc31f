/* Residual basic block of ResNet-20 for CIFAR (He et al., "Deep Residual Learning for Image
 * Recognition", CVPR 2016, section 4.2):
 *
 *     y = relu( bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x) )
 *
 * conv1: 3x3, stride s, pad 1, in_c -> out_c; conv2: 3x3, stride 1, pad 1, out_c -> out_c; both
 * without bias (a bias before batch norm is redundant), as the common PyTorch resnet20. The
 * shortcut is the identity when s == 1 and in_c == out_c, else option A of the paper:
 * x[:, :, ::s, ::s] zero-padded in channels. Where the padding goes the paper does not say; we
 * follow the widely used PyTorch CIFAR ResNet (akamaster/pytorch_resnet_cifar10,
 * F.pad(..., (0,0,0,0, planes//4, planes//4))): (out_c - in_c) / 2 zero channels before the
 * input channels and the rest after them. Option A needs out_c >= in_c.
 *
 * Convolutions run through oneDNN when it is built in (tensor/conv_dnnl.c: 2.8-4.5x faster at
 * these shapes, one thread, batch 32: 16->16 at 28x28 forward + backward 12.4 -> 2.6 ms), else
 * (and as the reference) im2col + GEMM per sample (het_im2col / het_gemm / het_col2im), which
 * also takes a shape or batch size oneDNN refuses on plain activations (a note on stderr, once
 * per process; on blocked ones, or when oneDNN fails while running, the convolution's outputs
 * are NaN and het_dnnl_fault says why, tensor.h); batch norm
 * is the math of bn_math.h (momentum 0.1, eps 1e-5, PyTorch's defaults; with several workers
 * on a batch, whole-batch statistics: two meetings in forward, two in backward).
 *
 * Params: [conv1.w (out_c x in_c x 3 x 3), bn1.gamma, bn1.beta, conv2.w, bn2.gamma, bn2.beta].
 * State:  [bn1.running_mean, bn1.running_var, bn2.running_mean, bn2.running_var].
 * Cache (S = out_c * oh * ow per sample): A1 = conv1(x) (B x S), r1 = relu(bn1(A1)) (B x S),
 *         A2 = conv2(r1) (B x S), then mean1, inv_std1, mean2, inv_std2 (out_c each): batch
 *         norm's backward recomputes x_hat from its input (bn_math.h).
 * Work:   G (B x S: the gradient at bn2, backward), D (B x S: the gradient at bn1), then either col and dcol (the im2col buffer and its gradient, one
 *         sample) or oneDNN's blocked copies (per sample and fixed).
 *
 * Channel-blocked (nn.h): when both convolutions run on oneDNN's nChw16c themselves, the block
 * takes and gives blocked activations (HET_BLK_TAKE | KEEP) and keeps A1, r1 and A2 blocked
 * too, so it reorders nothing; batch norm then runs on 16 channels at a time (bn_math.h) and the
 * option-A shortcut indexes the blocked layout (het_act_offset).
 *
 * bf16 (nn.h: het_model_set_precision): both convolutions read bf16 operands with fp32 sums.
 * Where the CPU has bf16 instructions both run oneDNN's bf16 kernels, whose reorders round the
 * operands (het_dnnl_conv_bf16). Elsewhere (the portable path) conv1's input is rounded into
 * het_exec.lp (the shortcut adds the fp32 input), r1 is rounded in place (conv2's input, and
 * its weight gradient's operand), the output gradients G and D are rounded in place before
 * each convolution's backward; the weights come rounded from the model either way; batch
 * norm, the ReLUs and the shortcut stay fp32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain/nn.h"
#include "hetrain/tensor.h"
#include "nn/bn_math.h"
#include "tensor/internal.h"

#define RB_MOMENTUM 0.1f
#define RB_EPS 1e-5f

typedef struct het_resblock {
    het_layer base;
    int cin, cout, stride;
    int H, W, OH, OW;
    int pad_lo;      /* zero channels before the input channels in the shortcut */
    size_t in_size;  /* cin * H * W */
    size_t P;        /* OH * OW */
    size_t S;        /* cout * P */
    int K1, K2;      /* im2col rows: cin * 9, cout * 9 */
    size_t kmax;     /* max(K1, K2) */
    het_dnnl_conv *dn1, *dn2; /* oneDNN handles of conv1 and conv2, or NULL */
} het_resblock;

/* Offsets into params. */
typedef struct rb_views {
    float *w1, *g1, *b1, *w2, *g2, *b2;
} rb_views;

static rb_views rb_split(const het_resblock *r, float *p) {
    rb_views v;
    v.w1 = p;
    v.g1 = v.w1 + (size_t)r->cout * (size_t)r->K1;
    v.b1 = v.g1 + r->cout;
    v.w2 = v.b1 + r->cout;
    v.g2 = v.w2 + (size_t)r->cout * (size_t)r->K2;
    v.b2 = v.g2 + r->cout;
    return v;
}

static int rb_plan(het_layer *l, het_shape in, het_layer_plan *p) {
    het_resblock *r = (het_resblock *)l;
    if (r->cout < 1 || r->stride < 1)
        return het_error_set(HET_EINVAL, "resblock: out_channels %d and stride %d must be >= 1",
                             r->cout, r->stride);
    if (in.c < 1 || in.h < 1 || in.w < 1)
        return het_error_set(HET_ESHAPE, "resblock: bad input shape %dx%dx%d", in.c, in.h, in.w);
    if (r->cout < in.c)
        return het_error_set(HET_ESHAPE,
                             "resblock: option-A shortcut needs out_channels >= in_channels, got "
                             "%d < %d",
                             r->cout, in.c);
    r->cin = in.c;
    r->H = in.h;
    r->W = in.w;
    r->OH = (in.h - 1) / r->stride + 1; /* (H + 2*1 - 3) / s + 1 */
    r->OW = (in.w - 1) / r->stride + 1;
    r->pad_lo = (r->cout - r->cin) / 2;
    r->in_size = het_shape_size(in);
    r->P = (size_t)r->OH * (size_t)r->OW;
    r->S = (size_t)r->cout * r->P;
    r->K1 = r->cin * 9;
    r->K2 = r->cout * 9;
    r->kmax = (size_t)(r->K1 > r->K2 ? r->K1 : r->K2);
    p->out = (het_shape){r->cout, r->OH, r->OW};
    p->n_params = (size_t)r->cout * (size_t)(r->K1 + r->K2) + 4 * (size_t)r->cout;
    p->n_state = 4 * (size_t)r->cout;
    p->lp_off[1] = (size_t)r->cout * (size_t)r->K1 + 2 * (size_t)r->cout; /* bf16: w1 and w2 */
    p->lp_len[0] = (size_t)r->cout * (size_t)r->K1;
    p->lp_len[1] = (size_t)r->cout * (size_t)r->K2;
    p->cache_per_sample = 3 * r->S + 4 * (size_t)r->cout;
    p->work_per_sample = 2 * r->S;
    p->work_fixed = 2 * r->kmax * r->P;
    het_dnnl_conv_free(r->dn1);
    het_dnnl_conv_free(r->dn2);
    r->dn1 = r->dn2 = NULL;
    int st = het_dnnl_conv_create(&r->dn1, r->cin, r->H, r->W, r->cout, 3, r->stride, 1, 0);
    if (st == HET_OK && r->dn1)
        st = het_dnnl_conv_create(&r->dn2, r->cout, r->OH, r->OW, r->cout, 3, 1, 1, 0);
    if (st == HET_ENOTSUP) { /* both on im2col + GEMM */
        het_dnnl_note_fallback();
    } else if (st != HET_OK) {
        het_dnnl_conv_free(r->dn1);
        r->dn1 = NULL;
        return st;
    }
    if (!r->dn2) {
        het_dnnl_conv_free(r->dn1);
        r->dn1 = NULL;
    } else { /* after A and D: the larger of the two convolutions' needs, or col and dcol */
        size_t ps1, f1, ps2, f2;
        het_dnnl_conv_work(r->dn1, &ps1, &f1);
        het_dnnl_conv_work(r->dn2, &ps2, &f2);
        p->work_per_sample += ps1 > ps2 ? ps1 : ps2;
        if (f1 > p->work_fixed) p->work_fixed = f1;
        if (f2 > p->work_fixed) p->work_fixed = f2;
        int x1, y1, x2, y2;
        het_dnnl_conv_blocked(r->dn1, &x1, &y1);
        het_dnnl_conv_blocked(r->dn2, &x2, &y2);
        if (x1 && y1 && x2 && y2) p->blk = HET_BLK_TAKE | HET_BLK_KEEP; /* both run on it */
    }
    p->team_doubles = BN_TEAM_DOUBLES(r->cout);
    return HET_OK;
}

/* PyTorch's Conv2d default (kaiming_uniform_, a = sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
 * Batch norm: gamma 1, beta 0, running mean 0, running var 1. */
static void rb_init(het_layer *l, float *params, float *state, het_rng *rng) {
    const het_resblock *r = (const het_resblock *)l;
    rb_views v = rb_split(r, params);
    const int C = r->cout;
    const float bound1 = 1.0f / sqrtf((float)r->K1), bound2 = 1.0f / sqrtf((float)r->K2);
    for (size_t i = 0; i < (size_t)C * (size_t)r->K1; i++)
        v.w1[i] = bound1 * (2.0f * het_rng_uniform(rng) - 1.0f);
    for (size_t i = 0; i < (size_t)C * (size_t)r->K2; i++)
        v.w2[i] = bound2 * (2.0f * het_rng_uniform(rng) - 1.0f);
    for (int c = 0; c < C; c++) {
        v.g1[c] = v.g2[c] = 1.0f;
        v.b1[c] = v.b2[c] = 0.0f;
        state[c] = state[2 * C + c] = 0.0f;     /* running means */
        state[C + c] = state[3 * C + c] = 1.0f; /* running vars */
    }
}

/* Whether a oneDNN call's status leaves the work to im2col + GEMM: a refusal on plain operands
 * (nothing written). Any other failure left NaN outputs and a fault (tensor.h). */
static int dnnl_fallback(int st, int blk) {
    if (st != HET_ENOTSUP || blk) return 0;
    het_dnnl_note_fallback();
    return 1;
}

/* One of the block's two convolutions (3x3, pad 1, no bias, cin -> cout channels) as its
 * forward and backward see it: conv1 on the block's input, conv2 on r1. */
typedef struct rb_conv_geom {
    het_dnnl_conv *dn; /* oneDNN's handle (col is then its work memory), or NULL: im2col + GEMM */
    int cin, H, W;     /* the input's channels and plane */
    int stride;
    int K;             /* im2col rows: cin * 9 */
    int blk;           /* operands channel-blocked (nChw16c): the layer's in_blk */
    int bf16;          /* oneDNN's bf16 kernels (x, w, dy rounded by its reorders) */
} rb_conv_geom;

static rb_conv_geom rb_conv1(const het_resblock *r, int blk, int bf16) {
    return (rb_conv_geom){r->dn1, r->cin, r->H, r->W, r->stride, r->K1, blk, bf16};
}

static rb_conv_geom rb_conv2(const het_resblock *r, int blk, int bf16) {
    return (rb_conv_geom){r->dn2, r->cout, r->OH, r->OW, 1, r->K2, blk, bf16};
}

/* y[n] = W (cout x K) . im2col(x[n]) for each sample. */
static void rb_conv(const het_resblock *r, const rb_conv_geom *g, float *y, const float *x,
                    const float *w, float *col, int batch) {
    const int fl = (g->blk ? HET_DNNL_X_BLK | HET_DNNL_Y_BLK : 0) | (g->bf16 ? HET_DNNL_BF16 : 0);
    if (g->dn && !dnnl_fallback(het_dnnl_conv_forward(g->dn, batch, x, w, NULL, y, col, fl),
                                g->blk || g->bf16))
        return;
    const size_t xs = (size_t)g->cin * (size_t)g->H * (size_t)g->W;
    const int P = (int)r->P;
    for (int n = 0; n < batch; n++) {
        het_im2col(col, x + (size_t)n * xs, g->cin, g->H, g->W, 3, g->stride, 1, r->OH, r->OW);
        het_gemm(0, 0, r->cout, P, g->K, 1.0f, w, g->K, col, P, 0.0f, y + (size_t)n * r->S, P);
    }
}

/* What a convolution's backward reads and writes: dw += sum_n dy[n] . im2col(x[n])^T and,
 * when dx != NULL, dx[n] = col2im(W^T . dy[n]), written or (RB_DX_ADD) added. */
typedef enum { RB_DX_WRITE, RB_DX_ADD } rb_dx_mode;
typedef struct rb_conv_grads {
    float *dx;          /* the input gradient, or NULL: none */
    rb_dx_mode dx_mode;
    float *dw;          /* the weight gradient, accumulated */
    const float *dy, *x, *w;
} rb_conv_grads;

/* The backward of convolution g; col and dcol: the im2col buffer and its gradient. */
static void rb_conv_backward(const het_resblock *r, const rb_conv_geom *g,
                             const rb_conv_grads *a, float *col, float *dcol, int batch) {
    const int fl = (g->blk ? HET_DNNL_X_BLK | HET_DNNL_Y_BLK : 0) | (g->bf16 ? HET_DNNL_BF16 : 0);
    const int add = a->dx_mode == RB_DX_ADD;
    if (g->dn && !dnnl_fallback(het_dnnl_conv_backward(g->dn, batch, a->x, a->w, a->dy, a->dx,
                                                       add, a->dw, NULL, col, fl),
                                g->blk || g->bf16))
        return;
    const size_t xs = (size_t)g->cin * (size_t)g->H * (size_t)g->W;
    if (a->dx && !add) memset(a->dx, 0, sizeof(float) * xs * (size_t)batch);
    const int P = (int)r->P, K = g->K;
    for (int n = 0; n < batch; n++) {
        const float *dyn = a->dy + (size_t)n * r->S;
        het_im2col(col, a->x + (size_t)n * xs, g->cin, g->H, g->W, 3, g->stride, 1, r->OH, r->OW);
        het_gemm(0, 1, r->cout, K, P, 1.0f, dyn, P, col, P, 1.0f, a->dw, K);
        if (a->dx) {
            het_gemm(1, 0, K, P, r->cout, 1.0f, a->w, K, dyn, P, 0.0f, dcol, P);
            het_col2im(a->dx + (size_t)n * xs, dcol, g->cin, g->H, g->W, 3, g->stride, 1, r->OH,
                       r->OW);
        }
    }
}

static void rb_forward(het_layer *l, const het_exec *x, const float *in, float *out, int batch) {
    const het_resblock *r = (const het_resblock *)l;
    const int C = r->cout, HW = (int)r->P;
    const size_t BS = (size_t)batch * r->S;
    rb_views v = rb_split(r, x->params);
    float *A1 = x->cache, *r1 = A1 + BS, *A2 = r1 + BS;
    float *mean1 = A2 + BS, *inv1 = mean1 + C, *mean2 = inv1 + C, *inv2 = mean2 + C;
    float *col = x->work + 2 * BS;
    float *rm1 = x->state, *rv1 = rm1 + C, *rm2 = rv1 + C, *rv2 = rm2 + C;
    const int blk = l->in_blk; /* then out and the cached activations are blocked too */
    const bn_geom d = bn_geom_of(batch, C, HW, blk);
    /* bf16: oneDNN's bf16 kernels round conv1's and conv2's inputs themselves; the portable
     * path rounds them here (conv1's into lp: the shortcut adds the fp32 input) */
    const int dn16 = x->bf16 && het_dnnl_conv_bf16(r->dn1) && het_dnnl_conv_bf16(r->dn2);
    const int round = x->bf16 && !dn16;
    const float *xin = in;
    if (round) {
        het_vround_bf16(x->lp, in, (size_t)batch * r->in_size);
        xin = x->lp;
    }

    const rb_conv_geom c1 = rb_conv1(r, blk, dn16), c2 = rb_conv2(r, blk, dn16);
    rb_conv(r, &c1, A1, xin, v.w1, col, batch);
    if (x->train)
        bn_forward_train(r1, mean1, inv1, A1, v.g1, v.b1, rm1, rv1, d, RB_MOMENTUM, RB_EPS,
                         x->team, x->worker, 1);
    else
        bn_forward_eval(r1, mean1, inv1, A1, v.g1, v.b1, rm1, rv1, d, RB_EPS, 1);
    if (round) het_vround_bf16(r1, r1, BS); /* conv2's input, kept bf16 for its backward */

    rb_conv(r, &c2, A2, r1, v.w2, col, batch);
    if (x->train)
        bn_forward_train(out, mean2, inv2, A2, v.g2, v.b2, rm2, rv2, d, RB_MOMENTUM, RB_EPS,
                         x->team, x->worker, 0);
    else
        bn_forward_eval(out, mean2, inv2, A2, v.g2, v.b2, rm2, rv2, d, RB_EPS, 0);

    if (r->stride == 1 && r->cin == C) { /* identity shortcut: add and ReLU in one pass */
        het_vadd_relu(out, in, BS);
        return;
    }
    /* shortcut: out[n][ci + pad_lo][oy][ox] += in[n][ci][oy * s][ox * s] */
    const int s = r->stride;
    const size_t HWin = (size_t)r->H * (size_t)r->W;
    for (int n = 0; n < batch; n++) {
        const float *xn = in + (size_t)n * r->in_size;
        float *yn = out + (size_t)n * r->S;
        for (int ci = 0; ci < r->cin; ci++)
            for (int oy = 0; oy < r->OH; oy++)
                for (int ox = 0; ox < r->OW; ox++)
                    yn[het_act_offset(blk, r->P, ci + r->pad_lo, (size_t)oy * r->OW + (size_t)ox)] +=
                        xn[het_act_offset(blk, HWin, ci, (size_t)(oy * s) * r->W + (size_t)(ox * s))];
    }
    het_vrelu(out, BS);
}

static void rb_backward(het_layer *l, const het_exec *x, const float *in, const float *out,
                        const float *dout, float *din, int batch) {
    const het_resblock *r = (const het_resblock *)l;
    const int C = r->cout, HW = (int)r->P;
    const size_t BS = (size_t)batch * r->S;
    rb_views v = rb_split(r, x->params);
    rb_views g = rb_split(r, x->grads);
    const float *A1 = x->cache, *r1 = A1 + BS, *A2 = r1 + BS;
    const float *mean1 = A2 + BS, *inv1 = mean1 + C, *mean2 = inv1 + C, *inv2 = mean2 + C;
    float *G = x->work, *D = G + BS, *col = D + BS, *dcol = col + r->kmax * r->P;
    const int blk = l->in_blk;
    const bn_geom d = bn_geom_of(batch, C, HW, blk);

    /* through the final ReLU; G is the gradient of both the bn2 output and the shortcut */
    het_vrelu_mask(G, out, dout, BS);
    if (din && r->stride == 1 && r->cin == C) { /* identity shortcut: its gradient is G */
        memcpy(din, G, sizeof(float) * BS);
    } else if (din) { /* shortcut adjoint: gather back to the strided positions, zero elsewhere */
        const int s = r->stride;
        const size_t HWin = (size_t)r->H * (size_t)r->W;
        memset(din, 0, sizeof(float) * (size_t)batch * r->in_size);
        for (int n = 0; n < batch; n++) {
            float *xn = din + (size_t)n * r->in_size;
            const float *gn = G + (size_t)n * r->S;
            for (int ci = 0; ci < r->cin; ci++)
                for (int oy = 0; oy < r->OH; oy++)
                    for (int ox = 0; ox < r->OW; ox++)
                        xn[het_act_offset(blk, HWin, ci, (size_t)(oy * s) * r->W + (size_t)(ox * s))] =
                            gn[het_act_offset(blk, r->P, ci + r->pad_lo, (size_t)oy * r->OW + (size_t)ox)];
        }
    }
    bn_backward(G, g.g2, g.b2, G, A2, mean2, inv2, v.g2, d, x->train, x->team, x->worker);
    const int dn16 = x->bf16 && het_dnnl_conv_bf16(r->dn1) && het_dnnl_conv_bf16(r->dn2);
    const int round = x->bf16 && !dn16; /* as in forward */
    if (round) het_vround_bf16(G, G, BS); /* conv2's output gradient as bf16 */

    /* conv2 (input r1) */
    const rb_conv_geom c1 = rb_conv1(r, blk, dn16), c2 = rb_conv2(r, blk, dn16);
    rb_conv_backward(r, &c2, &(rb_conv_grads){D, RB_DX_WRITE, g.w2, G, r1, v.w2}, col, dcol,
                     batch);
    het_vrelu_mask(D, r1, D, BS);
    bn_backward(D, g.g1, g.b1, D, A1, mean1, inv1, v.g1, d, x->train, x->team, x->worker);
    const float *xin = in; /* bf16: conv1's operands rounded, as in forward */
    if (round) {
        het_vround_bf16(D, D, BS);
        het_vround_bf16(x->lp, in, (size_t)batch * r->in_size);
        xin = x->lp;
    }

    /* conv1 (input x); col2im adds onto the shortcut gradient already in din */
    rb_conv_backward(r, &c1, &(rb_conv_grads){din, RB_DX_ADD, g.w1, D, xin, v.w1}, col, dcol,
                     batch);
}

static void rb_destroy(het_layer *l) {
    het_dnnl_conv_free(((het_resblock *)l)->dn1);
    het_dnnl_conv_free(((het_resblock *)l)->dn2);
    free(l);
}

static const het_layer_ops rb_ops = {
    "resblock", rb_plan, rb_init, rb_forward, rb_backward, rb_destroy,
};

het_layer *het_resblock_new(int out_channels, int stride) {
    het_resblock *r = calloc(1, sizeof *r);
    if (!r) {
        het_error_set(HET_ENOMEM, "resblock: out of memory");
        return NULL;
    }
    r->base.ops = &rb_ops;
    r->base.batch_coupled = 1;
    r->cout = out_channels;
    r->stride = stride;
    return &r->base;
}

/* Batch normalization as PyTorch's BatchNorm2d (input C x H x W: statistics per channel over
 * N, H, W) and BatchNorm1d (flat input F x 1 x 1: per feature over N). The math lives in
 * bn_math.h, shared with the residual block.
 *
 * Params: gamma (C, init 1) then beta (C, init 0). State: running_mean (C, init 0) then
 * running_var (C, init 1). Train mode normalizes with the batch mean and biased variance and
 * updates the running statistics with `momentum` (PyTorch convention, unbiased variance);
 * eval mode uses the running statistics. Batch-coupled: samples interact in forward; with
 * several workers on a batch the statistics are the whole batch's (bn_math.h).
 *
 * Cache: mean (C) and inv_std (C) of the forward pass (backward recomputes x_hat from the layer's
 * input, bn_math.h); cache_per_sample is 2C, so they fit for batch >= 1. */
#include <math.h>
#include <stdlib.h>

#include "hetrain/nn.h"
#include "nn/bn_math.h"

typedef struct het_batchnorm {
    het_layer base;
    float momentum, eps;
    int C, HW;
} het_batchnorm;

static int bn_plan(het_layer *l, het_shape in, het_layer_plan *p) {
    het_batchnorm *b = (het_batchnorm *)l;
    if (!(b->momentum >= 0.0f && b->momentum <= 1.0f))
        return het_error_set(HET_EINVAL, "batchnorm: momentum %g outside [0, 1]",
                             (double)b->momentum);
    if (!(b->eps > 0.0f) || !isfinite(b->eps))
        return het_error_set(HET_EINVAL, "batchnorm: eps %g must be positive", (double)b->eps);
    if (in.c < 1 || in.h < 1 || in.w < 1)
        return het_error_set(HET_ESHAPE, "batchnorm: bad input shape %dx%dx%d", in.c, in.h, in.w);
    b->C = in.c;
    b->HW = in.h * in.w;
    p->out = in;
    p->n_params = 2 * (size_t)in.c;
    p->n_state = 2 * (size_t)in.c;
    p->cache_per_sample = 2 * (size_t)in.c;
    p->work_per_sample = 0;
    p->work_fixed = 0;
    p->team_doubles = BN_TEAM_DOUBLES(in.c);
    p->blk = HET_BLK_TAKE | HET_BLK_KEEP;
    return HET_OK;
}

static void bn_init(het_layer *l, float *params, float *state, het_rng *rng) {
    (void)rng;
    const int C = ((het_batchnorm *)l)->C;
    for (int c = 0; c < C; c++) {
        params[c] = 1.0f;     /* gamma */
        params[C + c] = 0.0f; /* beta */
        state[c] = 0.0f;      /* running_mean */
        state[C + c] = 1.0f;  /* running_var */
    }
}

static void bn_forward(het_layer *l, const het_exec *x, const float *in, float *out, int batch) {
    const het_batchnorm *b = (const het_batchnorm *)l;
    const int C = b->C;
    float *mean = x->cache, *inv_std = x->cache + C;
    const bn_geom d = bn_geom_of(batch, C, b->HW, l->in_blk);
    if (x->train)
        bn_forward_train(out, mean, inv_std, in, x->params, x->params + C, x->state,
                         x->state + C, d, b->momentum, b->eps, x->team, x->worker, 0);
    else
        bn_forward_eval(out, mean, inv_std, in, x->params, x->params + C, x->state,
                        x->state + C, d, b->eps, 0);
}

static void bn_backward_op(het_layer *l, const het_exec *x, const float *in, const float *out,
                           const float *dout, float *din, int batch) {
    (void)out;
    const het_batchnorm *b = (const het_batchnorm *)l;
    const int C = b->C;
    const float *mean = x->cache, *inv_std = x->cache + C;
    bn_backward(din, x->grads, x->grads + C, dout, in, mean, inv_std, x->params,
                bn_geom_of(batch, C, b->HW, l->in_blk), x->train, x->team, x->worker);
}

static void bn_destroy(het_layer *l) { free(l); }

static const het_layer_ops bn_ops = {
    "batchnorm", bn_plan, bn_init, bn_forward, bn_backward_op, bn_destroy,
};

het_layer *het_batchnorm_new(float momentum, float eps) {
    het_batchnorm *b = calloc(1, sizeof *b);
    if (!b) {
        het_error_set(HET_ENOMEM, "batchnorm: out of memory");
        return NULL;
    }
    b->base.ops = &bn_ops;
    b->base.batch_coupled = 1;
    b->momentum = momentum;
    b->eps = eps;
    return &b->base;
}

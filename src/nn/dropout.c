/* Inverted dropout as PyTorch's nn.Dropout(p): in train mode each unit is kept with
 * probability 1 - p and scaled by 1 / (1 - p), else zeroed; in eval mode it is the identity.
 *
 * The mask is drawn from the exec's RNG (het_rng_uniform, keep when u >= p) in sample order,
 * element by element, so the same RNG state gives the same mask. The per-element factor
 * (0 or 1 / (1 - p)) is cached for backward. p = 0 draws nothing; p = 1 zeroes everything
 * (as PyTorch does). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain/nn.h"

typedef struct het_dropout {
    het_layer base;
    float p;
    size_t size; /* floats per sample, from plan() */
} het_dropout;

static int dropout_plan(het_layer *l, het_shape in, het_layer_plan *p) {
    het_dropout *d = (het_dropout *)l;
    if (!(d->p >= 0.0f && d->p <= 1.0f))
        return het_error_set(HET_EINVAL, "dropout: p = %g outside [0, 1]", (double)d->p);
    d->size = het_shape_size(in);
    p->out = in;
    p->blk = HET_BLK_TAKE | HET_BLK_KEEP; /* element-wise: the mask follows the layout */
    p->n_params = 0;
    p->n_state = 0;
    p->cache_per_sample = het_shape_size(in);
    p->work_per_sample = 0;
    p->work_fixed = 0;
    return HET_OK;
}

static void dropout_init(het_layer *l, float *params, float *state, het_rng *rng) {
    (void)l;
    (void)params;
    (void)state;
    (void)rng; /* no parameters */
}

static void dropout_forward(het_layer *l, const het_exec *x, const float *in, float *out,
                            int batch) {
    const het_dropout *d = (const het_dropout *)l;
    const size_t n = d->size * (size_t)batch;
    float *mask = x->cache;
    if (!x->train || d->p == 0.0f) {
        if (out != in) memcpy(out, in, sizeof(float) * n);
        return;
    }
    if (d->p >= 1.0f) {
        memset(mask, 0, sizeof(float) * n);
        memset(out, 0, sizeof(float) * n);
        return;
    }
    const float p = d->p, scale = 1.0f / (1.0f - p);
    for (size_t i = 0; i < n; i++) {
        float m = het_rng_uniform(x->rng) >= p ? scale : 0.0f;
        mask[i] = m;
        out[i] = in[i] * m;
    }
}

static void dropout_backward(het_layer *l, const het_exec *x, const float *in, const float *out,
                             const float *dout, float *din, int batch) {
    (void)in;
    (void)out;
    const het_dropout *d = (const het_dropout *)l;
    if (!din) return;
    const size_t n = d->size * (size_t)batch;
    if (!x->train || d->p == 0.0f) {
        if (din != dout) memcpy(din, dout, sizeof(float) * n);
        return;
    }
    const float *mask = x->cache;
    for (size_t i = 0; i < n; i++) din[i] = dout[i] * mask[i];
}

static void dropout_destroy(het_layer *l) { free(l); }

static const het_layer_ops dropout_ops = {
    "dropout", dropout_plan, dropout_init, dropout_forward, dropout_backward, dropout_destroy,
};

het_layer *het_dropout_new(float p) {
    het_dropout *d = calloc(1, sizeof *d);
    if (!d) {
        het_error_set(HET_ENOMEM, "dropout: out of memory");
        return NULL;
    }
    d->base.ops = &dropout_ops;
    d->p = p;
    return &d->base;
}

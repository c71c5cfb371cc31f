/* Flatten: {c, h, w} -> {c*h*w, 1, 1}, in NCHW order. From a plain input the memory layout does
 * not change, so forward and backward are copies (skipped when the model passes the same buffer
 * both ways); from a channel-blocked one (nn.h) they reorder it to NCHW and back. */
#include <stdlib.h>
#include <string.h>

#include "hetrain/nn.h"
#include "hetrain/tensor.h"
#include "nn/layer_kinds.h"

static int flatten_plan(het_layer *l, het_shape in, het_layer_plan *p) {
    (void)l;
    size_t n = het_shape_size(in);
    if (n < 1 || n > (size_t)1 << 30)
        return het_error_set(HET_ESHAPE, "flatten: input %dx%dx%d", in.c, in.h, in.w);
    *p = (het_layer_plan){.out = {(int)n, 1, 1}, .blk = HET_BLK_TAKE};
    return HET_OK;
}

/* Between NCHW (plain) and nChw16c (blk), one sample after another; to_blk picks the way. */
static void reblock(float *dst, const float *src, het_shape s, int batch, int to_blk) {
    const size_t hw = (size_t)s.h * (size_t)s.w, per = het_shape_size(s);
    for (size_t n = 0; n < (size_t)batch; n++)
        for (int c = 0; c < s.c; c++)
            for (size_t p = 0; p < hw; p++)
                dst[n * per + het_act_offset(to_blk, hw, c, p)] =
                    src[n * per + het_act_offset(!to_blk, hw, c, p)];
}

static void flatten_forward(het_layer *l, const het_exec *x, const float *in, float *out, int batch) {
    (void)x;
    if (l->in_blk)
        reblock(out, in, l->in, batch, 0);
    else if (out != in)
        memcpy(out, in, sizeof(float) * het_shape_size(l->in) * (size_t)batch);
}

static void flatten_backward(het_layer *l, const het_exec *x, const float *in, const float *out,
                             const float *dout, float *din, int batch) {
    (void)x;
    (void)in;
    (void)out;
    if (din && l->in_blk)
        reblock(din, dout, l->in, batch, 1);
    else if (din && din != dout)
        memcpy(din, dout, sizeof(float) * het_shape_size(l->in) * (size_t)batch);
}

static void flatten_destroy(het_layer *l) { free(l); }

static const het_layer_ops flatten_ops = {
    .name = "flatten",
    .plan = flatten_plan,
    .init = NULL,
    .forward = flatten_forward,
    .backward = flatten_backward,
    .destroy = flatten_destroy,
};

int het_nn_is_flatten(const het_layer *l) { return l->ops == &flatten_ops; }

het_layer *het_flatten_new(void) {
    het_layer *l = calloc(1, sizeof *l);
    if (!l) {
        het_error_set(HET_ENOMEM, "flatten: out of memory");
        return NULL;
    }
    l->ops = &flatten_ops;
    return l;
}

/* Average pooling, square window, no padding (PyTorch AvgPool2d; stride <= 0 means
 * stride = kernel). Kernel 0 is global average pooling over the whole H x W plane
 * (AdaptiveAvgPool2d(1)), output {C, 1, 1}, which also reads a channel-blocked input (nn.h).
 * No cache: backward spreads dout / window. */
#include <stdlib.h>
#include <string.h>

#include "hetrain/nn.h"
#include "hetrain/tensor.h"

typedef struct avgpool {
    het_layer base;
    int k, stride;              /* as constructed */
    int C, H, W, kh, kw, sy, sx, oh, ow; /* from plan(): the effective window and strides */
} avgpool;

static int avgpool_plan(het_layer *l, het_shape in, het_layer_plan *p) {
    avgpool *a = (avgpool *)l;
    if (a->k < 0) return het_error_set(HET_EINVAL, "avgpool: kernel %d < 0", a->k);
    if (in.c < 1 || in.h < 1 || in.w < 1)
        return het_error_set(HET_ESHAPE, "avgpool: empty input %dx%dx%d", in.c, in.h, in.w);
    a->C = in.c;
    a->H = in.h;
    a->W = in.w;
    if (a->k == 0) { /* global */
        a->kh = in.h;
        a->kw = in.w;
        a->sy = in.h;
        a->sx = in.w;
    } else {
        if (in.h < a->k || in.w < a->k)
            return het_error_set(HET_ESHAPE, "avgpool: input %dx%dx%d smaller than kernel %d",
                                 in.c, in.h, in.w, a->k);
        a->kh = a->kw = a->k;
        a->sy = a->sx = a->stride > 0 ? a->stride : a->k;
    }
    a->oh = (in.h - a->kh) / a->sy + 1;
    a->ow = (in.w - a->kw) / a->sx + 1;
    memset(p, 0, sizeof *p);
    p->out = (het_shape){in.c, a->oh, a->ow};
    if (a->k == 0) p->blk = HET_BLK_TAKE; /* global: a 1 x 1 output is the same in both */
    return HET_OK;
}

/* Global pooling of a channel-blocked input: the same sums, in the same order per channel. */
static void global_blk_forward(const avgpool *a, const float *in, float *out, int batch) {
    const size_t hw = (size_t)a->H * (size_t)a->W, per = hw * (size_t)a->C;
    const float scale = 1.0f / (float)(a->kh * a->kw);
    for (int n = 0; n < batch; n++)
        for (int cb = 0; cb < a->C / HET_BLK; cb++) {
            const float *xb = in + (size_t)n * per + (size_t)cb * hw * HET_BLK;
            float acc[HET_BLK] = {0};
            for (size_t p = 0; p < hw; p++)
                for (int j = 0; j < HET_BLK; j++) acc[j] += xb[p * HET_BLK + j];
            float *o = out + (size_t)n * (size_t)a->C + (size_t)cb * HET_BLK;
            for (int j = 0; j < HET_BLK; j++) o[j] = acc[j] * scale;
        }
}

static void global_blk_backward(const avgpool *a, const float *dout, float *din, int batch) {
    const size_t hw = (size_t)a->H * (size_t)a->W, per = hw * (size_t)a->C;
    const float scale = 1.0f / (float)(a->kh * a->kw);
    for (int n = 0; n < batch; n++)
        for (int cb = 0; cb < a->C / HET_BLK; cb++) {
            float v[HET_BLK];
            for (int j = 0; j < HET_BLK; j++)
                v[j] = dout[(size_t)n * (size_t)a->C + (size_t)cb * HET_BLK + (size_t)j] * scale;
            float *d = din + (size_t)n * per + (size_t)cb * hw * HET_BLK;
            for (size_t p = 0; p < hw; p++)
                for (int j = 0; j < HET_BLK; j++) d[p * HET_BLK + j] = v[j];
        }
}

static void avgpool_forward(het_layer *l, const het_exec *x, const float *in, float *out, int batch) {
    (void)x;
    avgpool *a = (avgpool *)l;
    if (l->in_blk) {
        global_blk_forward(a, in, out, batch);
        return;
    }
    const size_t plane = (size_t)a->H * (size_t)a->W;
    const float scale = 1.0f / (float)(a->kh * a->kw);
    float *o = out;
    for (int sc = 0; sc < batch * a->C; sc++) { /* every (sample, channel) plane */
        const float *xp = in + (size_t)sc * plane;
        for (int oy = 0; oy < a->oh; oy++)
            for (int ox = 0; ox < a->ow; ox++) {
                const float *w = xp + (size_t)(oy * a->sy) * (size_t)a->W + (size_t)(ox * a->sx);
                float acc = 0.0f;
                for (int ki = 0; ki < a->kh; ki++)
                    for (int kj = 0; kj < a->kw; kj++) acc += w[(size_t)ki * (size_t)a->W + (size_t)kj];
                *o++ = acc * scale;
            }
    }
}

static void avgpool_backward(het_layer *l, const het_exec *x, const float *in, const float *out,
                             const float *dout, float *din, int batch) {
    (void)x;
    (void)in;
    (void)out;
    if (!din) return;
    avgpool *a = (avgpool *)l;
    if (l->in_blk) {
        global_blk_backward(a, dout, din, batch);
        return;
    }
    const size_t plane = (size_t)a->H * (size_t)a->W;
    const float scale = 1.0f / (float)(a->kh * a->kw);
    memset(din, 0, sizeof(float) * plane * (size_t)a->C * (size_t)batch);
    const float *g = dout;
    for (int sc = 0; sc < batch * a->C; sc++) {
        float *dp = din + (size_t)sc * plane;
        for (int oy = 0; oy < a->oh; oy++)
            for (int ox = 0; ox < a->ow; ox++) {
                float v = *g++ * scale;
                float *w = dp + (size_t)(oy * a->sy) * (size_t)a->W + (size_t)(ox * a->sx);
                for (int ki = 0; ki < a->kh; ki++)
                    for (int kj = 0; kj < a->kw; kj++) w[(size_t)ki * (size_t)a->W + (size_t)kj] += v;
            }
    }
}

static void avgpool_destroy(het_layer *l) { free(l); }

static const het_layer_ops avgpool_ops = {
    .name = "avgpool",
    .plan = avgpool_plan,
    .init = NULL,
    .forward = avgpool_forward,
    .backward = avgpool_backward,
    .destroy = avgpool_destroy,
};

het_layer *het_avgpool_new(int kernel, int stride) {
    avgpool *a = calloc(1, sizeof *a);
    if (!a) {
        het_error_set(HET_ENOMEM, "avgpool: out of memory");
        return NULL;
    }
    a->base.ops = &avgpool_ops;
    a->k = kernel;
    a->stride = stride;
    return &a->base;
}

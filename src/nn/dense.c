/* Fully connected layer, PyTorch's Linear: out = in * W^T + b with weight [out x in] then bias
 * [out]. Any input shape is taken as flat (c*h*w features). The whole batch is one GEMM each
 * way: forward out[B x O] = in[B x I] W^T, backward dW[O x I] += dout^T in, db += column sums
 * of dout, din[B x I] = dout W.
 * The forward runs transposed, outT[O x B] = W in^T, into the work buffer, then adds the bias
 * while transposing back: OpenBLAS runs this shape (M = O large, N = B small) faster than
 * M = B at the model's batch slices (measured, us: 784->256 at batch 16 116 -> 77, at 32
 * 160 -> 124, at 64 226 -> 215; 400->120 at 16 28 -> 21). A hand-written AVX-512 dot-product
 * kernel measured 10% faster than this at batch 16 and slower from 32 on: not worth its code.
 * In bf16 (nn.h: het_model_set_precision) the input and output gradient are rounded to bf16
 * into het_exec.lp and the weight comes rounded from the model: the GEMMs then sum exact
 * products of bf16 values in fp32. Where oneDNN's bf16 kernels run (AMX or AVX512-BF16:
 * het_dnnl_bf16_enabled) the products are oneDNN's bf16 matmuls instead (tensor/dense_dnnl.c,
 * 2.5-4x the fp32 GEMMs), on the same rounded operands as bf16 bits: the weight's from the
 * model's copy (het_exec.wbits), the input's and output gradient's rounded into lp. The two
 * paths differ only in the order of the fp32 sums. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain/nn.h"
#include "hetrain/tensor.h"
#include "nn/layer_kinds.h"

typedef struct dense {
    het_layer base;
    int out_f;
    int in_f;           /* from plan() */
    het_dnnl_dense *dn; /* oneDNN's bf16 matmuls, NULL when not used */
} dense;

static int dense_plan(het_layer *l, het_shape in, het_layer_plan *p) {
    dense *d = (dense *)l;
    size_t nin = het_shape_size(in);
    if (d->out_f < 1) return het_error_set(HET_EINVAL, "dense: out_features %d < 1", d->out_f);
    if (nin < 1 || nin > (size_t)1 << 30)
        return het_error_set(HET_ESHAPE, "dense: input of %zu features", nin);
    d->in_f = (int)nin;
    memset(p, 0, sizeof *p);
    p->out = (het_shape){d->out_f, 1, 1};
    p->n_params = (size_t)d->out_f * nin + (size_t)d->out_f;
    p->work_per_sample = (size_t)d->out_f;
    p->lp_len[0] = (size_t)d->out_f * nin; /* bf16: the weight, not the bias */
    het_dnnl_dense_free(d->dn);
    d->dn = NULL;
    int st = het_dnnl_dense_create(&d->dn, d->in_f, d->out_f);
    if (st != HET_OK) return st;
    p->lp_bits = d->dn != NULL; /* the weight as bf16 bits, made once per batch */
    return HET_OK;
}

/* The bf16 bits of n floats at lp offset `at` floats (lp holds HET_LP_PER_SAMPLE(io) floats a
 * sample: bits of the input and output gradient take half of it). */
static uint16_t *bits_of(const het_exec *x, size_t at, const float *v, size_t n) {
    uint16_t *b = (uint16_t *)(x->lp + at);
    het_bf16_bits(b, v, n);
    return b;
}

/* Whether this call runs oneDNN's bf16 matmuls. */
static int on_dnnl(const dense *d, const het_exec *x) {
    return x->bf16 && x->wbits && het_dnnl_dense_on(d->dn);
}

static void dense_init(het_layer *l, float *params, float *state, het_rng *rng) {
    (void)state;
    dense *d = (dense *)l;
    /* PyTorch: kaiming_uniform_(a = sqrt(5)) gives bound 1/sqrt(fan_in); bias the same */
    float bound = 1.0f / sqrtf((float)d->in_f);
    size_t n = (size_t)d->out_f * (size_t)d->in_f + (size_t)d->out_f;
    for (size_t i = 0; i < n; i++) params[i] = bound * (2.0f * het_rng_uniform(rng) - 1.0f);
}

static void dense_forward(het_layer *l, const het_exec *x, const float *in, float *out, int batch) {
    dense *d = (dense *)l;
    const int I = d->in_f, O = d->out_f;
    const float *W = x->params, *b = x->params + (size_t)O * (size_t)I;
    float *outT = x->work;
    if (on_dnnl(d, x)) {
        const uint16_t *xb = bits_of(x, 0, in, (size_t)batch * (size_t)I);
        if (het_dnnl_dense_forward(d->dn, batch, xb, x->wbits, b, out) != HET_ENOTSUP) return;
    } /* refused (nothing written): the portable path */
    if (x->bf16) { /* the input as bf16 (x->params holds the rounded weight) */
        het_vround_bf16(x->lp, in, (size_t)batch * (size_t)I);
        in = x->lp;
    }
    het_gemm(0, 1, O, batch, I, 1.0f, W, I, in, I, 0.0f, outT, batch);
    for (int s = 0; s < batch; s++)
        for (int o = 0; o < O; o++) out[(size_t)s * (size_t)O + (size_t)o] = b[o] + outT[(size_t)o * (size_t)batch + (size_t)s];
}

static void dense_backward(het_layer *l, const het_exec *x, const float *in, const float *out,
                           const float *dout, float *din, int batch) {
    (void)out;
    dense *d = (dense *)l;
    const int I = d->in_f, O = d->out_f;
    const float *W = x->params;
    float *dW = x->grads, *db = x->grads + (size_t)O * (size_t)I;
    if (on_dnnl(d, x)) {
        const size_t ni = (size_t)batch * (size_t)I, no = (size_t)batch * (size_t)O;
        const uint16_t *xb = bits_of(x, 0, in, ni);
        const uint16_t *db16 = bits_of(x, (ni + 1) / 2, dout, no);
        int st = het_dnnl_dense_backward(d->dn, batch, xb, x->wbits, db16, din, dW);
        if (st != HET_ENOTSUP) { /* the bias gradient sums the rounded output gradient */
            for (int s = 0; s < batch; s++)
                for (int o = 0; o < O; o++) {
                    uint32_t u = (uint32_t)db16[(size_t)s * (size_t)O + (size_t)o] << 16;
                    float v;
                    memcpy(&v, &u, sizeof v);
                    db[o] += v;
                }
            return;
        }
    }
    if (x->bf16) { /* input and output gradient as bf16; the bias gradient sums them in fp32 */
        float *rin = x->lp, *rdout = x->lp + (size_t)batch * (size_t)I;
        het_vround_bf16(rin, in, (size_t)batch * (size_t)I);
        het_vround_bf16(rdout, dout, (size_t)batch * (size_t)O);
        in = rin;
        dout = rdout;
    }
    het_gemm(1, 0, O, I, batch, 1.0f, dout, O, in, I, 1.0f, dW, I);
    for (int s = 0; s < batch; s++) {
        const float *ds = dout + (size_t)s * (size_t)O;
        for (int o = 0; o < O; o++) db[o] += ds[o];
    }
    if (din) het_gemm(0, 0, batch, I, O, 1.0f, dout, O, W, I, 0.0f, din, I);
}

static void dense_destroy(het_layer *l) {
    het_dnnl_dense_free(((dense *)l)->dn);
    free(l);
}

static const het_layer_ops dense_ops = {
    .name = "dense",
    .plan = dense_plan,
    .init = dense_init,
    .forward = dense_forward,
    .backward = dense_backward,
    .destroy = dense_destroy,
};

int het_nn_is_dense(const het_layer *l) { return l->ops == &dense_ops; }

het_layer *het_dense_new(int out_features) {
    dense *d = calloc(1, sizeof *d);
    if (!d) {
        het_error_set(HET_ENOMEM, "dense: out of memory");
        return NULL;
    }
    d->base.ops = &dense_ops;
    d->out_f = out_features;
    return &d->base;
}

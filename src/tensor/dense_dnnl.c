/* The dense layer's bf16 products through oneDNN's matmul (--precision bf16, where the CPU has
 * AMX or AVX512-BF16: het_dnnl_bf16_enabled), with fp32 sums and fp32 results.
 *
 * DESIGN. Debian's OpenBLAS (0.3.21) exports no sbgemm, so without this the dense layer's bf16
 * runs the portable path: operands rounded to bf16 but kept as floats, fp32 GEMMs, the speed of
 * fp32. oneDNN's matmul reads bf16 operands (brg:avx512_core_bf16 on AVX512-BF16, AMX tiles
 * where there are some). Measured on an AMD EPYC with AVX512-BF16, one thread, cifar-cnn's
 * 3136 -> 256 layer at a chunk of 16 samples (us, forward / weight gradient / input gradient):
 * OpenBLAS sgemm 370 / 293 / 460, oneDNN bf16 matmul 140 / 143 / 118 (docs/KERNELS.md).
 * The operands come as bf16 bits (uint16): the weights from the model's copy made once per
 * batch (het_exec.wbits), the input and output gradient rounded by the caller into its scratch
 * (het_bf16_bits). Converting the weights in every call would cost as much as the product.
 *
 * Three matmuls over row-major arrays, no reorders (the strides say the transposes):
 *   forward  y[n x O]  = x[n x I] W^T + b     (W^T: [I x O] with strides 1, I)
 *   weights  dW[O x I] += dy^T[O x n] x[n x I] (dy^T: strides 1, O; a sum post-op adds)
 *   input    dx[n x I] = dy[n x O] W[O x I]
 * A handle keeps one set per (batch, thread count), made on first use under its mutex, as
 * conv_dnnl.c does; each call passes the calling thread's scratchpad, so workers may run one
 * set at once. A set oneDNN refuses is HET_ENOTSUP with nothing written (the layer takes the
 * portable path); a failure while running fills the outputs with NaN and is kept as the fault
 * (het_dnnl_fault), as the convolutions' failures are. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "hetrain/core.h"
#include "hetrain/tensor.h"
#include "tensor/internal.h"

#ifndef HET_HAVE_DNNL

#pragma GCC diagnostic ignored "-Wunused-parameter"
int het_dnnl_dense_create(het_dnnl_dense **out, int n_in, int n_out) { return *out = NULL, HET_OK; }
void het_dnnl_dense_free(het_dnnl_dense *h) {}
int het_dnnl_dense_on(const het_dnnl_dense *h) { return 0; }
int het_dnnl_dense_forward(het_dnnl_dense *h, int n, const uint16_t *x, const uint16_t *w,
                           const float *b, float *y) { return HET_ENOTSUP; }
int het_dnnl_dense_backward(het_dnnl_dense *h, int n, const uint16_t *x, const uint16_t *w,
                            const uint16_t *dy, float *dx, float *dw) { return HET_ENOTSUP; }

#else

#include <oneapi/dnnl/dnnl.h>

#include "tensor/conv_dnnl_prims.h"

enum { MM_FWD, MM_DW, MM_DX, MM_N };

typedef struct mm_set {
    int n, threads;
    dnnl_primitive_t p[MM_N];
    dnnl_memory_desc_t a[MM_N], b[MM_N], c[MM_N]; /* src, weights, dst of each */
    dnnl_memory_desc_t bias;
    size_t scratch[MM_N];
} mm_set;

struct het_dnnl_dense {
    int I, O;
    pthread_mutex_t mu;
    mm_set **sets;
    int n_sets, cap_sets;
};

static void set_free(mm_set *s) {
    if (!s) return;
    for (int k = 0; k < MM_N; k++)
        if (s->p[k]) dnnl_primitive_destroy(s->p[k]);
    free(s);
}

/* c[M x N] (+)= a[M x K] b[K x N], a and b bf16 with the given strides, c fp32 row-major. */
static int make_mm(mm_set *s, int k, dnnl_dim_t M, dnnl_dim_t N, dnnl_dim_t K,
                   const dnnl_dims_t as, const dnnl_dims_t bs, int with_bias, int sum) {
    const dnnl_dims_t ad = {M, K}, bd = {K, N}, cd = {M, N};
    TRY(dnnl_memory_desc_init_by_strides(&s->a[k], 2, ad, dnnl_bf16, as), "matmul operand");
    TRY(dnnl_memory_desc_init_by_strides(&s->b[k], 2, bd, dnnl_bf16, bs), "matmul operand");
    TRY(dnnl_memory_desc_init_by_tag(&s->c[k], 2, cd, dnnl_f32, dnnl_ab), "matmul result");
    dnnl_matmul_desc_t md;
    TRY(dnnl_matmul_desc_init(&md, &s->a[k], &s->b[k], with_bias ? &s->bias : NULL, &s->c[k]),
        "matmul");
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t e = dnnl_primitive_attr_create(&attr);
    if (e == dnnl_success) e = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (e == dnnl_success && sum) {
        e = dnnl_post_ops_create(&ops);
        if (e == dnnl_success) e = dnnl_post_ops_append_sum(ops, 1.0f);
        if (e == dnnl_success) e = dnnl_primitive_attr_set_post_ops(attr, ops);
    }
    if (e == dnnl_success) e = dnnl_primitive_desc_create(&pd, &md, attr, het_dnnl_engine(), NULL);
    if (e == dnnl_success) {
        const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        s->scratch[k] = sp ? dnnl_memory_desc_get_size(sp) : 0;
        e = dnnl_primitive_create(&s->p[k], pd);
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (ops) dnnl_post_ops_destroy(ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return e == dnnl_success ? HET_OK : het_dnnl_fail(e, "matmul");
}

/* The three matmuls of batch n at the current thread count; NULL with the error set. */
static mm_set *set_build(const het_dnnl_dense *h, int n) {
    mm_set *s = calloc(1, sizeof *s);
    if (!s) return het_error_set(HET_ENOMEM, "dense: oneDNN: out of memory"), NULL;
    s->n = n, s->threads = het_dnnl_threads();
    const dnnl_dim_t I = h->I, O = h->O, N = n;
    const dnnl_dims_t bd = {1, O};
    int rc = HET_OK;
    if (het_dnnl_injected(HET_DNNL_INJECT_REFUSE)) /* tests */
        rc = het_dnnl_fail(dnnl_unimplemented, "dense: oneDNN refused a bf16 matmul");
    else if (dnnl_memory_desc_init_by_tag(&s->bias, 2, bd, dnnl_f32, dnnl_ab) != dnnl_success)
        rc = het_error_set(HET_EINVAL, "matmul bias descriptor");
    if (rc == HET_OK)
        rc = make_mm(s, MM_FWD, N, O, I, (dnnl_dims_t){I, 1}, (dnnl_dims_t){1, I}, 1, 0);
    if (rc == HET_OK)
        rc = make_mm(s, MM_DW, O, I, N, (dnnl_dims_t){1, O}, (dnnl_dims_t){I, 1}, 0, 1);
    if (rc == HET_OK)
        rc = make_mm(s, MM_DX, N, I, O, (dnnl_dims_t){O, 1}, (dnnl_dims_t){I, 1}, 0, 0);
    if (rc == HET_OK) return s;
    set_free(s);
    return NULL;
}

/* The set of batch n (made on first use); NULL with the error set when oneDNN refuses it. */
static mm_set *set_for(het_dnnl_dense *h, int n) {
    het_dnnl_use_threads();
    const int t = het_dnnl_threads();
    pthread_mutex_lock(&h->mu);
    mm_set *s = NULL;
    for (int i = 0; i < h->n_sets && !s; i++)
        if (h->sets[i]->n == n && h->sets[i]->threads == t) s = h->sets[i];
    if (!s && (s = set_build(h, n)) != NULL) {
        if (h->n_sets == h->cap_sets) {
            int cap = h->cap_sets ? 2 * h->cap_sets : 4;
            mm_set **p = realloc(h->sets, (size_t)cap * sizeof *p);
            if (!p) {
                set_free(s);
                s = NULL;
                het_error_set(HET_ENOMEM, "dense: oneDNN: out of memory");
            } else {
                h->sets = p, h->cap_sets = cap;
            }
        }
        if (s) h->sets[h->n_sets++] = s;
    }
    pthread_mutex_unlock(&h->mu);
    return s;
}

int het_dnnl_dense_create(het_dnnl_dense **out, int n_in, int n_out) {
    *out = NULL;
    if (!het_dnnl_bf16_enabled() || n_in < 1 || n_out < 1) return HET_OK;
    het_dnnl_dense *h = calloc(1, sizeof *h);
    if (!h) return het_error_set(HET_ENOMEM, "dense: oneDNN: out of memory");
    h->I = n_in, h->O = n_out;
    pthread_mutex_init(&h->mu, NULL);
    if (!set_for(h, 1)) { /* oneDNN has no bf16 matmul of this shape: the portable path */
        het_dnnl_dense_free(h);
        return HET_OK;
    }
    *out = h;
    return HET_OK;
}

void het_dnnl_dense_free(het_dnnl_dense *h) {
    if (!h) return;
    for (int i = 0; i < h->n_sets; i++) set_free(h->sets[i]);
    free(h->sets);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

int het_dnnl_dense_on(const het_dnnl_dense *h) { return h && het_dnnl_bf16_enabled(); }

/* One execution: memories over the caller's arrays, the calling thread's scratchpad. */
static int run(const mm_set *s, int k, const void *a, const void *b, const float *bias,
               float *c) {
    dnnl_engine_t eng = het_dnnl_engine();
    dnnl_stream_t st = NULL;
    dnnl_memory_t m[5] = {NULL};
    dnnl_memory_desc_t sd;
    const dnnl_dims_t sdim = {(dnnl_dim_t)s->scratch[k]};
    dnnl_status_t e = dnnl_stream_create(&st, eng, dnnl_stream_default_flags);
    if (e == dnnl_success) e = dnnl_memory_create(&m[0], &s->a[k], eng, (void *)a);
    if (e == dnnl_success) e = dnnl_memory_create(&m[1], &s->b[k], eng, (void *)b);
    if (e == dnnl_success) e = dnnl_memory_create(&m[2], &s->c[k], eng, c);
    int na = 3;
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, m[0]}, {DNNL_ARG_WEIGHTS, m[1]}, {DNNL_ARG_DST, m[2]}};
    if (e == dnnl_success && bias) {
        e = dnnl_memory_create(&m[3], &s->bias, eng, (void *)bias);
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, m[3]};
    }
    if (e == dnnl_success && s->scratch[k]) {
        void *p = het_dnnl_scratch_get(s->scratch[k]);
        e = !p ? dnnl_out_of_memory : dnnl_memory_desc_init_by_tag(&sd, 1, sdim, dnnl_u8, dnnl_x);
        if (e == dnnl_success) e = dnnl_memory_create(&m[4], &sd, eng, p);
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, m[4]};
    }
    if (e == dnnl_success && het_dnnl_injected(HET_DNNL_INJECT_RUN)) e = dnnl_runtime_error;
    if (e == dnnl_success) e = dnnl_primitive_execute(s->p[k], st, na, args);
    if (e == dnnl_success) e = dnnl_stream_wait(st);
    for (int i = 0; i < 5; i++)
        if (m[i]) dnnl_memory_destroy(m[i]);
    if (st) dnnl_stream_destroy(st);
    return e == dnnl_success ? HET_OK : het_dnnl_fail(e, "dense: oneDNN bf16 matmul");
}

static int failed(int status, float *a, size_t na, float *b, size_t nb) {
    for (size_t i = 0; a && i < na; i++) a[i] = NAN;
    for (size_t i = 0; b && i < nb; i++) b[i] = NAN;
    return het_dnnl_keep_fault(status, "; the dense layer's outputs are NaN");
}

int het_dnnl_dense_forward(het_dnnl_dense *h, int n, const uint16_t *x, const uint16_t *w,
                           const float *b, float *y) {
    const mm_set *s = set_for(h, n);
    if (!s) return HET_ENOTSUP; /* nothing written: the caller's portable path */
    int rc = run(s, MM_FWD, x, w, b, y);
    return rc == HET_OK ? HET_OK : failed(rc, y, (size_t)n * (size_t)h->O, NULL, 0);
}

int het_dnnl_dense_backward(het_dnnl_dense *h, int n, const uint16_t *x, const uint16_t *w,
                            const uint16_t *dy, float *dx, float *dw) {
    const mm_set *s = set_for(h, n);
    if (!s) return HET_ENOTSUP;
    int rc = run(s, MM_DW, dy, x, NULL, dw);
    if (rc == HET_OK && dx) rc = run(s, MM_DX, dy, w, NULL, dx);
    return rc == HET_OK ? HET_OK
                        : failed(rc, dw, (size_t)h->O * (size_t)h->I, dx,
                                 dx ? (size_t)n * (size_t)h->I : 0);
}

#endif /* HET_HAVE_DNNL */

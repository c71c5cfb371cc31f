/* 2-D convolution through oneDNN (Debian's libdnnl, the library PyTorch runs its CPU
 * convolutions on): forward, input gradient and weight gradient of one layer shape.
 *
 * DESIGN. oneDNN's fast kernels (jit:avx512_core, jit:avx2) work on channel-blocked layouts
 * (nChw16c and blocked weights); on the plain NCHW layout every layer of hetrain uses it falls
 * back to im2col + its own GEMM, slower than ours. So each call reorders its operands into the
 * layouts the primitive picked ("any"), runs it, and reorders the result back, as PyTorch does.
 * Measured on this machine (Xeon, AVX-512, 2.3 GHz nominal, one thread, batch 32, us per call;
 * the whole table and the choice in docs/KERNELS.md):
 *   32->32 at 28x28, stride 1:  plain NCHW 8333 / 12264 / 11704 (fwd / input grad / weight grad),
 *                               blocked 2815 / 2954 / 2993 (164 GFLOP/s),
 *   hetrain's im2col + OpenBLAS: 7162 forward, 13162 for both gradients.
 * Reorders cost a pass over memory each; they are small beside that factor, but not nothing
 * (about a sixth of ResNet-20's step): a caller whose activations are already channel-blocked
 * (nChw16c, the layout the AVX-512 kernels pick; het_dnnl_conv_blocked says so) passes them as
 * they are (HET_DNNL_X_BLK / Y_BLK), and then only the small weights are reordered. The model
 * keeps activations blocked between the layers that handle it (nn.h).
 *
 * Primitives depend on the batch of the call (a worker's chunk, a ragged last chunk), so a
 * handle keeps one set per batch size, made on first use under a mutex and reused; oneDNN's
 * own primitive cache shares the compiled kernels; conv_dnnl_prims.c makes the sets. Executing a
 * primitive from several worker threads at once is safe: each call passes the calling thread's
 * scratchpad (conv_dnnl_prims.c says why). Each call runs with the thread count
 * set by het_blas_set_threads (model workers call with 1), applied through OpenMP, which Debian's
 * oneDNN is built on.
 *
 * Operands are float arrays: x [n x C x H x W], w [O x C x k x k], b [O], y [n x O x oh x ow],
 * activations plain (NCHW) or blocked, weights always plain. Blocked copies live in the
 * caller's work buffer, het_dnnl_conv_work() floats per sample plus a fixed part. Without
 * oneDNN (HET_HAVE_DNNL undefined) het_dnnl_conv_create gives no handle: callers use their own.
 *
 * Failures never end the process (tensor.h): a refusal on plain operands is HET_ENOTSUP with
 * nothing written (the layer runs its own kernels); any other failure fills the outputs with NaN
 * (a run stops on them: --on-nan) and is kept as the fault (het_dnnl_fault, tensor/internal.h),
 * since a layer's forward and backward cannot return a status. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain/core.h"
#include "hetrain/tensor.h"
#include "tensor/internal.h"

static _Atomic int dnnl_threads = 1; /* het_blas_set_threads keeps it */
static _Atomic int dnnl_disabled;    /* tests and HET_CONV=ref */
static _Atomic int dnnl_inject;      /* tests: HET_DNNL_INJECT_* */

void het_dnnl_set_threads(int n) { dnnl_threads = n < 1 ? 1 : n; }
void het_dnnl_disable(int off) { dnnl_disabled = off; }
void het_dnnl_inject(int what) { dnnl_inject = what; }

/* The fault record (het_dnnl_fault) and whether the first fault and fallback were printed. */
static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;
static int fault_status, printed[2]; /* [0] the first fault, [1] the first fallback */
static char fault_msg[256];

int het_dnnl_fault(char *msg, size_t n) {
    pthread_mutex_lock(&fault_mu);
    int st = fault_status;
    if (msg && n > 0) snprintf(msg, n, "%s", fault_msg);
    pthread_mutex_unlock(&fault_mu);
    return st;
}

void het_dnnl_fault_clear(void) {
    pthread_mutex_lock(&fault_mu);
    fault_status = HET_OK, fault_msg[0] = '\0';
    pthread_mutex_unlock(&fault_mu);
}

/* Keeps the current message as the fault if status is one and none is kept; prints it with
 * `tail` the first time for printed[which]. Returns status. */
static int keep_fault(int status, int which, const char *tail) {
    pthread_mutex_lock(&fault_mu);
    int print = !printed[which];
    printed[which] = 1;
    if (status != HET_OK && fault_status == HET_OK)
        fault_status = status, snprintf(fault_msg, sizeof fault_msg, "%s", het_error_msg());
    pthread_mutex_unlock(&fault_mu);
    if (print) fprintf(stderr, "hetrain: %s%s\n", het_error_msg(), tail), fflush(stderr);
    return status;
}

int het_dnnl_keep_fault(int status, const char *tail) { return keep_fault(status, 0, tail); }

void het_dnnl_note_fallback(void) {
    keep_fault(HET_OK, 1, "; it runs on hetrain's own kernels (printed once)");
}

#ifndef HET_HAVE_DNNL

/* Never called with a handle: het_dnnl_conv_create makes none. */
#pragma GCC diagnostic ignored "-Wunused-parameter"
int het_dnnl_available(void) { return 0; }
const char *het_dnnl_describe(void) { return "hetrain's own (built without oneDNN)"; }
int het_dnnl_conv_create(het_dnnl_conv **out, int C, int H, int W, int O, int k, int stride,
                         int pad, int bias) { return *out = NULL, HET_OK; }
void het_dnnl_conv_free(het_dnnl_conv *h) {}
void het_dnnl_conv_work(const het_dnnl_conv *h, size_t *ps, size_t *fixed) { *ps = *fixed = 0; }
void het_dnnl_conv_blocked(const het_dnnl_conv *h, int *x_ok, int *y_ok) { *x_ok = *y_ok = 0; }
int het_dnnl_conv_bf16(const het_dnnl_conv *h) { return 0; }
int het_dnnl_conv_forward(het_dnnl_conv *h, int n, const float *x, const float *w,
                          const float *b, float *y, float *work, int blk) { return HET_EINVAL; }
int het_dnnl_conv_backward(het_dnnl_conv *h, int n, const float *x, const float *w,
                           const float *dy, float *dx, int dx_add, float *dw, float *db,
                           float *work, int blk) { return HET_EINVAL; }

#else

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <omp.h>

#include "tensor/conv_dnnl_prims.h"

static dnnl_engine_t engine;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void engine_make(void) {
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) engine = NULL;
}

/* Whether oneDNN may be used at all (not disabled, not HET_CONV=ref), without starting it. */
static int dnnl_allowed(void) {
    if (dnnl_disabled) return 0;
    const char *e = getenv("HET_CONV");
    return !(e && strcmp(e, "ref") == 0);
}

int het_dnnl_available(void) {
    if (!dnnl_allowed()) return 0;
    pthread_once(&engine_once, engine_make);
    return engine != NULL;
}

void het_dnnl_use_threads(void) {
    if (omp_get_max_threads() != dnnl_threads) omp_set_num_threads(dnnl_threads);
}

const char *het_dnnl_describe(void) {
    static char text[96];
    /* the engine starts with the first layer that uses it: models without one (mlp, lenet5)
     * never start oneDNN */
    if (!dnnl_allowed()) return "hetrain's own (oneDNN disabled: HET_CONV=ref)";
    const dnnl_version_t *v = dnnl_version();
    /* the ISA values are cumulative bit sets: a newer one holds an older one's bits */
    const unsigned e = (unsigned)dnnl_get_effective_cpu_isa();
    const unsigned a512 = (unsigned)dnnl_cpu_isa_avx512_core, a2 = (unsigned)dnnl_cpu_isa_avx2;
    const char *isa = (e & a512) == a512 ?  " (AVX-512)" : (e & a2) == a2 ? " (AVX2)" : "";
    snprintf(text, sizeof text, "oneDNN %d.%d.%d%s where channels are multiples of 16",
             v->major, v->minor, v->patch, isa);
    return text;
}

/* A oneDNN call that failed: the message names it and oneDNN's status; out of memory is
 * HET_ENOMEM, anything else HET_EINVAL (callers that can fall back return HET_ENOTSUP). */
int het_dnnl_fail(dnnl_status_t s, const char *what) {
    return het_error_set(s == dnnl_out_of_memory ? HET_ENOMEM : HET_EINVAL, "%s: %s", what,
                         dnnl_status2str(s));
}


dnnl_engine_t het_dnnl_engine(void) { return engine; }
int het_dnnl_threads(void) { return dnnl_threads; }
int het_dnnl_injected(int what) { return (dnnl_inject & what) != 0; }

/* Appends s to h's sets (h's mutex held, or h not yet shared); 0 when out of memory. */
static int keep_set(het_dnnl_conv *h, prim_set *s) {
    if (h->n_sets == h->cap_sets) {
        int cap = h->cap_sets ? 2 * h->cap_sets : 4;
        prim_set **p = realloc(h->sets, (size_t)cap * sizeof *p);
        if (!p) return het_error_set(HET_ENOMEM, "conv2d: oneDNN: out of memory"), 0;
        h->sets = p;
        h->cap_sets = cap;
    }
    h->sets[h->n_sets++] = s;
    return 1;
}

/* The message becomes "conv2d: oneDNN <verb> 16->32 channels, kernel 3, stride 2, pad 1, on
 * 9x9, batch n: <the message>"; returns status. */
static int reword(int status, const het_dnnl_conv *h, int n, const char *verb) {
    char why[200];
    snprintf(why, sizeof why, "%s", het_error_msg());
    return het_error_set(status, "conv2d: oneDNN %s %d->%d channels, kernel %d, stride %d, pad "
                         "%d, on %dx%d, batch %d: %s", verb, h->C, h->O, h->k, h->stride, h->pad,
                         h->H, h->W, n, why);
}

int het_dnnl_conv_create(het_dnnl_conv **out, int C, int H, int W, int O, int k, int stride,
                         int pad, int bias) {
    *out = NULL;
    if (!het_dnnl_available()) return HET_OK;
    if (C < 1 || H < 1 || W < 1 || O < 1 || k < 1 || stride < 1 || pad < 0 || H + 2 * pad < k ||
        W + 2 * pad < k)
        return het_error_set(HET_EINVAL, "conv2d: oneDNN: no output for input %dx%dx%d, %d "
                             "channels out, kernel %d, stride %d, pad %d", C, H, W, O, k,
                             stride, pad);
    het_dnnl_conv *h = calloc(1, sizeof *h);
    if (!h) return het_error_set(HET_ENOMEM, "conv2d: oneDNN: out of memory");
    *h = (het_dnnl_conv){.C = C, .H = H, .W = W, .O = O, .k = k, .stride = stride, .pad = pad,
                         .bias = bias, .oh = (H + 2 * pad - k) / stride + 1,
                         .ow = (W + 2 * pad - k) / stride + 1, .x_blk = C % 16 == 0,
                         .y_blk = O % 16 == 0};
    pthread_mutex_init(&h->mu, NULL);
    het_dnnl_use_threads();
    prim_set *s = calloc(1, sizeof *s);
    int rc = !s ? het_error_set(HET_ENOMEM, "conv2d: oneDNN: out of memory")
             : het_dnnl_set_build(h, 1, 0, 0, s) != HET_OK ? reword(HET_ENOTSUP, h, 1, "refused") : HET_OK;
    if (rc == HET_OK) {
        het_dnnl_set_sizes(s, &h->per_sample, &h->fixed);
        h->x_ok = h->x_blk && !s->f_src_in[1].p && !s->w_src_in[1].p && !s->d_dsrc_out[1].p;
        h->y_ok = h->y_blk && !s->f_dst_out[1].p && !s->d_ddst_in[1].p && !s->w_ddst_in[1].p;
        rc = keep_set(h, s) ? HET_OK : HET_ENOMEM;
    }
    if (rc == HET_OK && het_dnnl_bf16_enabled()) { /* the work a bf16 call may need as well */
        prim_set *b = calloc(1, sizeof *b);
        size_t act = 0, fixed = 0;
        if (b && het_dnnl_set_build(h, 1, 0, 1, b) == HET_OK && keep_set(h, b)) {
            h->bf16 = 1;
            het_dnnl_set_sizes(b, &act, &fixed);
            if (act > h->per_sample) h->per_sample = act;
            if (fixed > h->fixed) h->fixed = fixed;
        } else {
            het_dnnl_set_free(b); /* het_dnnl_conv_bf16 says no: the layer takes the portable path */
        }
    }
    if (rc == HET_OK) return *out = h, HET_OK;
    het_dnnl_set_free(s);
    het_dnnl_conv_free(h);
    return rc;
}

void het_dnnl_conv_free(het_dnnl_conv *h) {
    if (!h) return;
    for (int i = 0; i < h->n_sets; i++) het_dnnl_set_free(h->sets[i]);
    free(h->sets);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

void het_dnnl_conv_work(const het_dnnl_conv *h, size_t *per_sample, size_t *fixed) {
    *per_sample = h->per_sample;
    *fixed = h->fixed;
}

void het_dnnl_conv_blocked(const het_dnnl_conv *h, int *x_ok, int *y_ok) {
    *x_ok = h->x_ok;
    *y_ok = h->y_ok;
}

int het_dnnl_conv_bf16(const het_dnnl_conv *h) { return h && h->bf16 && het_dnnl_bf16_enabled(); }

/* Makes and keeps the set of batch n (h's mutex held); NULL with the error set on failure. */
static prim_set *set_new(het_dnnl_conv *h, int n, int relu, int bf16) {
    prim_set *s = calloc(1, sizeof *s);
    size_t act = 0, fixed = 0;
    if (!s) return het_error_set(HET_ENOMEM, "conv2d: oneDNN: out of memory"), NULL;
    int rc = het_dnnl_set_build(h, n, relu, bf16, s);
    if (rc == HET_OK) het_dnnl_set_sizes(s, &act, &fixed);
    if (rc == HET_OK && (act > h->per_sample * (size_t)n + h->fixed || fixed > h->fixed))
        rc = het_error_set(HET_ENOTSUP, "more work memory than planned");
    if (rc != HET_OK) reword(HET_ENOTSUP, h, n, "refused");
    if (rc == HET_OK && keep_set(h, s)) return s;
    het_dnnl_set_free(s);
    return NULL;
}

/* The set of batch n and the current thread count (made on first use); NULL with the error set
 * on failure. */
static prim_set *set_for(het_dnnl_conv *h, int n, int relu, int bf16) {
    het_dnnl_use_threads();
    pthread_mutex_lock(&h->mu);
    prim_set *s = NULL;
    for (int i = 0; i < h->n_sets && !s; i++)
        if (h->sets[i]->n == n && h->sets[i]->threads == dnnl_threads &&
            h->sets[i]->relu == relu && h->sets[i]->bf16 == bf16)
            s = h->sets[i];
    if (!s) s = set_new(h, n, relu, bf16);
    pthread_mutex_unlock(&h->mu);
    return s;
}

/* The layouts of a call (0 plain, 1 blocked, per side; 2 blocked bf16 for x as forward and
 * the weight gradient read it, *lyf for y as forward writes it) and the set of batch n; NULL
 * with the error set when oneDNN refuses (nothing written yet): plain fp32 operands are then
 * HET_ENOTSUP, blocked or bf16 ones, which only oneDNN reads here, a failure (call_failed). */
static prim_set *call_set(het_dnnl_conv *h, int n, int blk, int *lx, int *ly, int *lxs,
                          int *lyf) {
    *lx = (blk & HET_DNNL_X_BLK) != 0;
    *ly = (blk & HET_DNNL_Y_BLK) != 0;
    *lxs = (blk & HET_DNNL_X_BF16) ? 2 : *lx;
    *lyf = (blk & HET_DNNL_Y_BF16) ? 2 : *ly;
    if ((*lx && !h->x_blk) || (*ly && !h->y_blk))
        return het_error_set(HET_EINVAL, "conv2d: oneDNN: a blocked operand with channels %d -> "
                             "%d", h->C, h->O), NULL;
    if ((blk & HET_DNNL_BF16) ? !h->bf16 : (blk & (HET_DNNL_X_BF16 | HET_DNNL_Y_BF16)) != 0)
        return het_error_set(HET_EINVAL, "conv2d: oneDNN: bf16 asked of a layer without bf16 "
                             "primitives"), NULL;
    if ((*lxs == 2 && !*lx) || (*lyf == 2 && !*ly))
        return het_error_set(HET_EINVAL, "conv2d: oneDNN: bf16 activations must be "
                             "channel-blocked"), NULL;
    const int bf16 = (blk & HET_DNNL_BF16) ? (*lyf == 2 ? 2 : 1) : 0;
    return set_for(h, n, (blk & HET_DNNL_RELU) != 0, bf16);
}

/* Arguments and memories of one execution, freed by call_end; the outputs it fills with NaN
 * when it fails (a forward's y; a backward's db, dw, dx). */
typedef struct call {
    dnnl_stream_t stream;
    dnnl_memory_t mem[32];
    int n_mem;
    float *out[3];
    size_t out_n[3];
} call;

static dnnl_memory_t wrap(call *c, const dnnl_memory_desc_t *md, const void *p) {
    dnnl_memory_t m = NULL;
    if (c->n_mem < 32 && dnnl_memory_create(&m, md, engine, (void *)p) == dnnl_success)
        c->mem[c->n_mem++] = m;
    return m;
}

/* The scratchpad argument of a primitive needing `bytes` (the calling thread's buffer); 0
 * when it needs none, -1 when out of memory. */
static int scratch_arg(call *c, size_t bytes, dnnl_exec_arg_t *a) {
    if (!bytes) return 0;
    dnnl_memory_desc_t md;
    dnnl_dims_t d = {(dnnl_dim_t)bytes};
    void *p = het_dnnl_scratch_get(bytes);
    if (!p || dnnl_memory_desc_init_by_tag(&md, 1, d, dnnl_u8, dnnl_x) != dnnl_success) return -1;
    *a = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, wrap(c, &md, p)};
    return a->memory ? 1 : -1;
}

static int exec2(call *c, const reorder *r, dnnl_memory_t from, dnnl_memory_t to) {
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    int k = scratch_arg(c, r->scratch, &a[2]);
    if (!from || !to || k < 0) return het_dnnl_fail(dnnl_out_of_memory, "memory");
    TRY(dnnl_primitive_execute(r->p, c->stream, 2 + k, a), "reorder");
    return HET_OK;
}

/* The memory of a primitive's argument in layout `md`: the plain array itself when `r` (plain
 * -> md) is no reorder, else a copy at *work filled through r (skipped when !fill). */
static dnnl_memory_t operand(call *c, const reorder *r, const dnnl_memory_desc_t *plain_md,
                             const dnnl_memory_desc_t *md, const float *plain, float **work,
                             int fill, int *rc) {
    if (!r->p) return wrap(c, plain_md, plain);
    dnnl_memory_t m = wrap(c, md, *work);
    *work += het_dnnl_fl(r->bytes);
    if (fill && *rc == HET_OK) *rc = exec2(c, r, wrap(c, plain_md, plain), m);
    return m;
}

static int call_begin(call *c) {
    TRY(dnnl_stream_create(&c->stream, engine, dnnl_stream_default_flags), "stream");
    return HET_OK;
}
/* (call_end destroys a NULL stream harmlessly when call_begin failed: dnnl_stream_destroy
 * accepts NULL.) */

/* A call that failed (tensor.h): its outputs filled with NaN, the failure kept as the fault. */
static int call_failed(call *c, int status) {
    /* 0x7fc07fc0: a NaN read as one float or as two bf16 (a bf16 y) */
    const union { uint32_t u; float f; } nan2 = {.u = 0x7fc07fc0u};
    for (int i = 0; i < 3; i++)
        for (size_t j = 0; c->out[i] && j < c->out_n[i]; j++) c->out[i][j] = nan2.f;
    return keep_fault(status, 0, "; the convolution's outputs are NaN");
}

/* Ends a call. Outputs may be half written when oneDNN fails while running (out of memory: it
 * wraps the caller's arrays, so only descriptors are allocated), and the caller cannot redo the
 * step from there: call_failed. */
static int call_end(const het_dnnl_conv *h, int n, call *c, int rc) {
    if (rc == HET_OK && dnnl_stream_wait(c->stream) != dnnl_success) rc = het_dnnl_fail(dnnl_runtime_error, "wait");
    for (int i = 0; i < c->n_mem; i++) dnnl_memory_destroy(c->mem[i]);
    dnnl_stream_destroy(c->stream);
    if (rc == HET_OK) return HET_OK;
    return call_failed(c, reword(rc, h, n, c->out[1] ? "backward failed on" : "forward failed on"));
}

/* Runs p on args[0, nargs) (room for one more: the scratchpad of `scratch` bytes). */
static int run(call *c, dnnl_primitive_t p, size_t scratch, int nargs, dnnl_exec_arg_t *args) {
    for (int i = 0; i < nargs; i++)
        if (!args[i].memory) return het_dnnl_fail(dnnl_out_of_memory, "memory");
    int k = scratch_arg(c, scratch, &args[nargs]);
    if (k < 0) return het_dnnl_fail(dnnl_out_of_memory, "scratchpad");
    if (dnnl_inject & HET_DNNL_INJECT_RUN)
        return het_dnnl_fail(dnnl_runtime_error, "convolution (a test's injected failure)");
    TRY(dnnl_primitive_execute(p, c->stream, nargs + k, args), "convolution");
    return HET_OK;
}

int het_dnnl_conv_forward(het_dnnl_conv *h, int n, const float *x, const float *w,
                          const float *b, float *y, float *work, int blk) {
    int lx, ly, lxs, lyf; /* a bf16 y is half the fp32 one: its NaN fill stays inside */
    size_t ny = (size_t)n * (size_t)h->O * (size_t)h->oh * (size_t)h->ow;
    call c = {.out = {y}, .out_n = {(blk & HET_DNNL_Y_BF16) ? (ny + 1) / 2 : ny}};
    prim_set *s = call_set(h, n, blk, &lx, &ly, &lxs, &lyf);
    if (!s) /* a refusal */
        return lx || ly || (blk & HET_DNNL_BF16) ? call_failed(&c, HET_ENOTSUP) : HET_ENOTSUP;
    int rc = call_begin(&c);
    float *act = work, *fix = work + h->per_sample * (size_t)n;
    const reorder *yo = &s->f_dst_out[lyf];
    dnnl_memory_t src = operand(&c, &s->f_src_in[lxs], &s->u_src[lxs], &s->f_src, x, &act, 1, &rc);
    dnnl_memory_t dst = operand(&c, yo, &s->u_dst[lyf], &s->f_dst, y, &act, 0, &rc);
    dnnl_memory_t wm = operand(&c, &s->f_w_in, &s->u_w, &s->f_w, w, &fix, 1, &rc);
    dnnl_exec_arg_t a[5] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dst},
                            {DNNL_ARG_BIAS, h->bias ? wrap(&c, &s->u_b, b) : NULL}};
    if (rc == HET_OK) rc = run(&c, s->fwd, s->scr_f, h->bias ? 4 : 3, a);
    if (rc == HET_OK && yo->p) rc = exec2(&c, yo, dst, wrap(&c, &s->u_dst[lyf], y));
    return call_end(h, n, &c, rc);
}

int het_dnnl_conv_backward(het_dnnl_conv *h, int n, const float *x, const float *w,
                           const float *dy, float *dx, int dx_add, float *dw, float *db,
                           float *work, int blk) {
    int lx, ly, lxs, lyf; /* out[1] (dw) tells call_end a backward */
    call c = {.out = {h->bias ? db : NULL, dw, dx},
              .out_n = {(size_t)h->O, (size_t)h->O * (size_t)h->C * (size_t)h->k * (size_t)h->k,
                        (size_t)n * (size_t)h->C * (size_t)h->H * (size_t)h->W}};
    prim_set *s = call_set(h, n, blk & ~HET_DNNL_Y_BF16, &lx, &ly, &lxs, &lyf); /* dy: fp32 */
    if (!s) /* a refusal */
        return lx || ly || (blk & HET_DNNL_BF16) ? call_failed(&c, HET_ENOTSUP) : HET_ENOTSUP;
    int rc = call_begin(&c);
    float *act = work, *fix = work + h->per_sample * (size_t)n;
    const dnnl_memory_desc_t *ux = &s->u_src[lx], *uy = &s->u_dst[ly];
    /* weight gradient: into the primitive's layout, then added to dw (and db) */
    dnnl_memory_t src = operand(&c, &s->w_src_in[lxs], &s->u_src[lxs], &s->w_src, x, &act, 1, &rc);
    dnnl_memory_t ddst_d = operand(&c, &s->d_ddst_in[ly], uy, &s->d_ddst, dy, &act, 1, &rc);
    dnnl_memory_t ddst_w = ddst_d;
    if (!s->ddst_shared)
        ddst_w = operand(&c, &s->w_ddst_in[ly], uy, &s->w_ddst, dy, &act, 1, &rc);
    float *dwb = fix + het_dnnl_fl(s->d_w_in.bytes), *dbb = dwb + het_dnnl_fl(dnnl_memory_desc_get_size(&s->w_dw));
    dnnl_memory_t dwm = wrap(&c, &s->w_dw, dwb);
    dnnl_exec_arg_t a[5] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, ddst_w},
                            {DNNL_ARG_DIFF_WEIGHTS, dwm},
                            {DNNL_ARG_DIFF_BIAS, h->bias ? wrap(&c, &s->u_b, dbb) : NULL}};
    if (rc == HET_OK) rc = run(&c, s->bwd_w, s->scr_w, h->bias ? 4 : 3, a);
    if (rc == HET_OK) rc = exec2(&c, &s->w_dw_add, dwm, wrap(&c, &s->u_w, dw));
    if (rc == HET_OK && h->bias && db)
        for (int o = 0; o < h->O; o++) db[o] += dbb[o];
    /* input gradient */
    if (dx && rc == HET_OK) {
        const reorder *out = dx_add ? &s->d_dsrc_add[lx] : &s->d_dsrc_out[lx];
        dnnl_memory_t wm = operand(&c, &s->d_w_in, &s->u_w, &s->d_w, w, &fix, 1, &rc);
        dnnl_memory_t dsrc = out->p ? wrap(&c, &s->d_dsrc, act) : wrap(&c, ux, dx);
        dnnl_exec_arg_t b[4] = {{DNNL_ARG_DIFF_DST, ddst_d}, {DNNL_ARG_WEIGHTS, wm},
                                {DNNL_ARG_DIFF_SRC, dsrc}};
        if (rc == HET_OK) rc = run(&c, s->bwd_d, s->scr_d, 3, b);
        if (rc == HET_OK && out->p) rc = exec2(&c, out, dsrc, wrap(&c, ux, dx));
    }
    return call_end(h, n, &c, rc);
}

#endif /* HET_HAVE_DNNL */

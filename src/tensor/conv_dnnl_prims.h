/* oneDNN convolution, shared between its two files: conv_dnnl.c keeps the handles and runs the
 * calls, conv_dnnl_prims.c makes a handle's primitive sets (descriptors, primitives, reorders)
 * and owns the per-thread scratchpads; dense_dnnl.c (the dense layer's bf16 matmuls) uses the
 * engine, the thread count, the scratchpads and the fault record. Included only where HET_HAVE_DNNL is defined. */
#ifndef HET_TENSOR_CONV_DNNL_PRIMS_H
#define HET_TENSOR_CONV_DNNL_PRIMS_H

#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stddef.h>

#include "hetrain/tensor.h"

/* A reorder from one layout to another, NULL when the two are the same. */
typedef struct reorder {
    dnnl_primitive_t p;
    size_t bytes;   /* of the larger of its two sides (blocked layouts may pad channels) */
    size_t scratch; /* bytes of scratchpad it needs (scratch_get) */
} reorder;

/* Everything one batch size needs. Activation sides come in the caller's layouts, [0] plain
 * (nchw) and [1] channel-blocked (nChw16c, only where the channels are a multiple of 16), fp32;
 * each has its reorders to and from the layouts the primitives picked. A bf16 set also has
 * [2], channel-blocked bf16 (HET_DNNL_X_BF16 / Y_BF16: activations that stay bf16 between two
 * convolutions), for the sides that read or write an activation: x into forward and the
 * weight gradient, y out of forward (its gradients stay fp32). */
typedef struct prim_set {
    int n, threads; /* oneDNN fixes a primitive's thread count when it makes it */
    int relu;       /* forward applies a ReLU to its result (a post-op) */
    int bf16;       /* 1: the primitives read x, w and dy as bf16 (HET_DNNL_BF16): the
                       reorders from the caller's fp32 arrays round them; y, dx, dw and db stay
                       fp32. 2: the same, and forward writes y as bf16 (HET_DNNL_Y_BF16) */
    dnnl_memory_desc_t u_src[3], u_dst[3], u_w, u_b;     /* the caller's: nchw / nChw16c /
                                                            nChw16c bf16, oihw, x */
    dnnl_memory_desc_t f_src, f_w, f_dst;                /* forward's layouts */
    dnnl_memory_desc_t d_dsrc, d_w, d_ddst;              /* input gradient's */
    dnnl_memory_desc_t w_src, w_dw, w_ddst;              /* weight gradient's */
    dnnl_primitive_t fwd, bwd_d, bwd_w;
    size_t scr_f, scr_d, scr_w;                          /* their scratchpads, bytes */
    reorder f_w_in, d_w_in, w_dw_add;                    /* weights: plain -> picked, back */
    reorder f_src_in[3], f_dst_out[3];                   /* caller's -> forward's, back */
    reorder d_ddst_in[2], d_dsrc_out[2], d_dsrc_add[2];  /* _add: dst += reordered */
    reorder w_src_in[3], w_ddst_in[2];
    int ddst_shared; /* the two gradients take dy in the same layout: one reorder serves both */
} prim_set;

struct het_dnnl_conv {
    int C, H, W, O, k, stride, pad, bias, oh, ow;
    int x_blk, y_blk; /* which sides have a blocked variant; which need no reorder (_ok) */
    int x_ok, y_ok;
    int bf16;                 /* calls may ask for bf16 (HET_DNNL_BF16): its batch-1 set built */
    size_t per_sample, fixed; /* work floats, from the batch-1 sets */
    pthread_mutex_t mu;
    prim_set **sets; /* one per (batch, threads) seen, kept until the handle goes: a few per
                        layer (a worker's chunk, a ragged last chunk, evaluation's batch) */
    int n_sets, cap_sets;
};

/* The engine (started by het_dnnl_available), the thread count primitives are made for, and
 * whether a test injected `what` (HET_DNNL_INJECT_*): conv_dnnl.c's settings. */
dnnl_engine_t het_dnnl_engine(void);
int het_dnnl_threads(void);
/* Sets this thread's OpenMP thread count to het_dnnl_threads(), which oneDNN reads when it
 * makes and runs a primitive. */
void het_dnnl_use_threads(void);
int het_dnnl_injected(int what);

/* A oneDNN call that failed: the message names it and oneDNN's status; out of memory is
 * HET_ENOMEM, anything else HET_EINVAL (callers that can fall back return HET_ENOTSUP). */
int het_dnnl_fail(dnnl_status_t s, const char *what);
#define TRY(call, what)                                         \
    do {                                                        \
        dnnl_status_t s_ = (call);                              \
        if (s_ != dnnl_success) return het_dnnl_fail(s_, what); \
    } while (0)

/* Keeps the current message as the process's oneDNN fault (het_dnnl_fault) when status is one
 * and none is kept, printing it with `tail` the first time; returns status (dense_dnnl.c). */
int het_dnnl_keep_fault(int status, const char *tail);

/* The calling thread's scratchpad of at least n bytes (64-byte aligned); NULL when out of
 * memory. */
void *het_dnnl_scratch_get(size_t n);

/* Work floats (rounded up to 16, 64-byte aligned pieces) of a memory of `bytes`. */
static inline size_t het_dnnl_fl(size_t bytes) { return ((bytes + 63) / 64) * 16; }

/* Builds the primitives and reorders of batch size n (forward with a ReLU when relu; bf16
 * operands when bf16 is 1, and forward's output in bf16 too when 2); on failure the message names the step and oneDNN's status. */
int het_dnnl_set_build(const het_dnnl_conv *h, int n, int relu, int bf16, prim_set *s);
void het_dnnl_set_free(prim_set *s);
/* Work layout of a call (floats): per-sample part, then the fixed part. */
void het_dnnl_set_sizes(const prim_set *s, size_t *act, size_t *fixed);

#endif

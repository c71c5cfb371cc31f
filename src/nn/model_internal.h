/* Internal to nn/: the model's struct, shared by model.c (planning, memory, accessors, hooks,
 * element-wise work) and exec.c (the executor: forward, loss, backward, reduction). */
#ifndef HET_NN_MODEL_INTERNAL_H
#define HET_NN_MODEL_INTERNAL_H

#include "hetrain/nn.h"
#include "nn/dense_stack.h"
#include "nn/pool.h"
#include "nn/team.h"

/* Chunks: a worker runs its share through all layers a chunk of samples at a time, so that a
 * chunk's activations stay in cache. A chunk holds at least HET_MODEL_CHUNK samples, more while
 * its buffers fit in HET_MODEL_CHUNK_BYTES (small models such as the MLP then run their whole
 * share at once, which keeps their matrix products large). */
#ifndef HET_MODEL_CHUNK
#define HET_MODEL_CHUNK 16
#endif
#ifndef HET_MODEL_CHUNK_BYTES
#define HET_MODEL_CHUNK_BYTES (1u << 20)
#endif

/* One worker's buffers (sized for one chunk) and its share of the current batch. */
typedef struct het_worker {
    float *acts;    /* per layer: out_size * chunk */
    float *cache;   /* per layer: cache_per_sample * chunk */
    float *work;    /* shared scratch */
    float *dbuf[2]; /* ping-pong gradient buffers */
    float *probs;   /* classes * chunk */
    float *grads;   /* own gradients (worker > 0); worker 0 uses the model's */
    float *lp;      /* bf16: scratch of rounded operands (het_exec.lp), else NULL */
    het_rng rng;
    /* current share */
    const float *x;
    const uint8_t *y;
    int batch;
    int start; /* index of x[0] in the whole batch */
    het_batch_result res;
} het_worker;

struct het_model {
    het_shape in;
    int n_layers;
    het_layer **layers;
    het_layer_plan *plans;
    size_t *param_off, *state_off, *act_off, *cache_off;
    size_t n_params, n_state, act_floats, cache_floats, work_floats, dbuf_floats;
    size_t max_io;         /* largest input or output of a layer, floats per sample */
    int first_param_layer; /* lowest layer with parameters, n_layers if none */
    int coupled;           /* a layer is batch-coupled: one chunk per worker */
    int classes, max_batch, sub_max, workers, chunk;
    float *params, *grads, *state, *logits;
    het_precision prec;
    int lp_edges;     /* bf16: the edges whose activations stay bf16 (het_model_lp_edges) */
    float *params_lp; /* bf16: the parameters as the layers read them (their lp ranges rounded,
                         the rest copied), made from params at every batch; else NULL */
    uint16_t *params_bits; /* bf16, where a layer's plan has lp_bits: the same as bf16 bits
                              (those layers' lp ranges only), made with params_lp; else NULL */
    het_worker *w;
    het_pool *pool;   /* workers - 1 threads; the caller is worker 0 */
    het_team *team;   /* where batch-coupled layers meet (workers > 1), else NULL */
    size_t team_doubles; /* the largest part a layer hands the team */
    het_stack *stack; /* the dense-stack executor (dense_stack.c), NULL if not eligible */
    size_t bytes;
    /* the hook chain, in the order added */
    het_model_hook hooks[HET_MODEL_MAX_HOOKS];
    int n_hooks, n_grad_hooks, n_progress_hooks;
    int in_parallel; /* 1 while workers > 0 may be writing their results (see batch_result) */
};

/* (het_model_refresh_lp, nn.h: bf16's params_lp from params, at the start of every batch.) */

/* Worker widx's slice of [0, n): 16-element aligned blocks, in worker order (model.c). */
void het_model_slice(const het_model *m, int widx, size_t n, size_t *lo, size_t *hi);

#endif

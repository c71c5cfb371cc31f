/* hetrain nn: layers behind one vtable, the model (planned in two passes, one flat buffer each
 * for parameters, gradients and non-trainable state), the loss and the model zoo.
 *
 * Layout: activations are batch-major, each sample C x H x W (NCHW), float32; between layers
 * that handle it, channel-blocked instead (HET_BLK_* below).
 * Backward ACCUMULATES (+=) into parameter gradients, so micro-batches add up for free.
 * nn/ never sees MPI. It depends on optim/ for one thing only: het_update (the optimizer
 * update of het_model_update and het_model_train_step) names het_optim_config. */
#ifndef HETRAIN_NN_H
#define HETRAIN_NN_H

#include <time.h>

#include "hetrain/core.h"
#include "hetrain/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Activation layouts. Plain: each sample C x H x W (NCHW). Channel-blocked (nChw16c, for C a
 * multiple of HET_BLK = 16): channel c at position p = h * W + w of a sample is element
 * (c / 16) * H * W * 16 + p * 16 + c % 16 of it, the layout oneDNN's AVX-512 convolutions work
 * in, so that consecutive convolutions, batch norms, ReLUs and pools pass their activations on
 * without reordering them. A map of 1 x 1 is the same in both. A layer's plan() says in
 * het_layer_plan.blk which layouts it handles; the model picks one per edge between layers
 * (model.c: blocked where the producer can write it and every consumer up to the next layer
 * that converts can read it, unless HET_LAYOUT=plain) and sets het_layer.in_blk / out_blk. The
 * model's input and its logits are plain. Parameters are plain whatever the layout. */
#define HET_BLK_TAKE 1 /* can read a blocked input (C a multiple of 16) */
#define HET_BLK_EMIT 2 /* can write a blocked output, whatever its input */
#define HET_BLK_KEEP 4 /* its output has its input's layout (with TAKE: either) */

/* What a layer needs, computed by its plan() from the input shape. */
typedef struct het_layer_plan {
    het_shape out;           /* output shape per sample */
    size_t n_params;         /* trainable floats (weights then biases, PyTorch order) */
    size_t n_state;          /* non-trainable persistent floats (batch-norm running stats) */
    size_t cache_per_sample; /* floats kept from forward to backward, per sample */
    size_t work_per_sample;  /* scratch floats per sample, shared by all layers of a worker */
    size_t work_fixed;       /* scratch floats independent of batch */
    size_t team_doubles;     /* batch-coupled layers: doubles one worker hands the others at a
                                meeting (het_team_part in nn/team.h), 0 otherwise */
    int blk;                 /* layouts it handles: HET_BLK_* bits; 0: plain only */
    int fuse_relu;           /* 1: it can apply a ReLU that follows it to its own output (a
                                convolution through oneDNN, as a post-op) */
    size_t lp_off[2], lp_len[2]; /* the parameters (offsets from the layer's first) that it
                                reads as bf16 under --precision bf16: the weights of a
                                convolution or a product (biases and batch norm stay fp32);
                                lp_len 0: none */
    int lp_bits;             /* 1: it also reads those weights as bf16 bits (het_exec.wbits) */
} het_layer_plan;

/* The workers that split one training batch, as batch-coupled layers see them (nn/team.h,
 * internal to nn/). */
typedef struct het_team het_team;

/* Per-call execution context: the buffers of one worker for one layer. The model fills it. */
typedef struct het_exec {
    float *params;       /* this layer's trainable parameters (shared by workers) */
    float *grads;        /* this worker's gradients for this layer: backward does += */
    float *state;        /* this layer's non-trainable state (shared; only batch-coupled
                            layers write it, in training, on worker 0 only) */
    float *cache;        /* this worker's, cache_per_sample * n floats, where n >= the batch of
                            the call (the model's chunk: buffers are sized per chunk, not for
                            max_batch) */
    float *work;         /* this worker's, work_per_sample * n + work_fixed floats (same n) */
    het_rng *rng;        /* this worker's RNG stream for this step (dropout) */
    int train;           /* 1: training mode (dropout on, batch-norm batch stats) */
    het_team *team;      /* training with several workers on the batch: batch-coupled layers
                            combine their statistics over it; NULL: the call sees the whole
                            batch (one worker, evaluation, or a layer called on its own) */
    int worker;          /* this worker's index in the team (0 when team is NULL) */
    int bf16;            /* --precision bf16 (het_model_set_precision): convolutions and
                            products read their operands rounded to bf16 and sum in fp32;
                            params already holds the rounded weights (the model's bf16 copy,
                            made once per batch); activations and output gradients are rounded
                            by the layer into lp */
    float *lp;           /* with bf16: this worker's scratch, HET_LP_PER_SAMPLE(max in or out
                            floats of a sample) * n floats, n as for cache */
    const uint16_t *wbits; /* with bf16 and the plan's lp_bits: this layer's parameters as
                            bf16 bits (their lp ranges; the rest undefined), made with params */
} het_exec;
/* Scratch floats per sample of het_exec.lp, for a layer whose input and output are at most
 * io floats per sample: a rounded copy of the input and one of the output gradient. */
#define HET_LP_PER_SAMPLE(io) (2 * (io))

typedef struct het_layer het_layer;

typedef struct het_layer_ops {
    const char *name;
    /* Computes the output shape and buffer needs for input shape `in`. Returns HET_OK or
     * HET_ESHAPE/HET_EINVAL with a message. Stores what it needs in the layer. */
    int (*plan)(het_layer *l, het_shape in, het_layer_plan *p);
    /* Initializes params (and state) as PyTorch's defaults do, drawing from rng. */
    void (*init)(het_layer *l, float *params, float *state, het_rng *rng);
    /* out = f(in) for `batch` samples. */
    void (*forward)(het_layer *l, const het_exec *x, const float *in, float *out, int batch);
    /* Given dout (gradient w.r.t. out), accumulates parameter gradients into x->grads and, when
     * din != NULL, WRITES (not accumulates) the input gradient into din. `in` and `out` are the
     * values of the last forward on this worker. */
    void (*backward)(het_layer *l, const het_exec *x, const float *in, const float *out,
                     const float *dout, float *din, int batch);
    /* Frees the layer itself (and anything it owns). */
    void (*destroy)(het_layer *l);
} het_layer_ops;

/* Base of every layer; concrete layers embed it as their first member. */
struct het_layer {
    const het_layer_ops *ops;
    het_shape in, out;       /* set by the model after plan() */
    int batch_coupled;       /* 1 if samples interact in forward (batch norm): a worker runs
                                its whole share as one chunk, and in training the workers
                                meet at the layer through het_exec.team */
    int in_blk, out_blk;     /* the layouts of in and out: 1 channel-blocked, 0 plain; set by
                                the model after plan() (0 for a layer used on its own) */
    int in_lp, out_lp;       /* in bf16: in (out) holds bf16 bits, channel-blocked, in the first
                                half of its float buffer (the activations between two
                                convolutions on oneDNN's bf16 kernels, and the ReLU one of them
                                applies); set by het_model_set_precision, 0 otherwise */
    int relu_out;            /* set by the model: apply the next layer's ReLU to the output */
    int fused_away;          /* set by the model: a ReLU the previous layer applies; its output
                                is that layer's (the same buffer), forward does nothing */
};

/* ---- layer constructors (each returns NULL on allocation failure) ---- */
het_layer *het_dense_new(int out_features);
het_layer *het_conv2d_new(int out_channels, int kernel, int stride, int pad);
het_layer *het_maxpool_new(int kernel, int stride);
het_layer *het_avgpool_new(int kernel, int stride); /* kernel 0: global average pool */
het_layer *het_relu_new(void);
het_layer *het_flatten_new(void);
het_layer *het_dropout_new(float p);
het_layer *het_batchnorm_new(float momentum, float eps); /* over channels (2d) or features (1d) */
/* Residual block of ResNet-20 (conv3x3-BN-ReLU-conv3x3-BN + shortcut, ReLU), option A
 * shortcut (stride-2 subsample + zero-padded channels) as in He et al. 2016 for CIFAR. */
het_layer *het_resblock_new(int out_channels, int stride);

/* ---- loss: softmax cross-entropy, mean over the batch ---- */
/* Writes probabilities into probs (batch x classes); returns the SUM of per-sample losses;
 * counts correct argmax predictions into *correct (may be NULL). */
double het_softmax_ce_forward(const float *logits, const uint8_t *labels, int batch, int classes,
                              float *probs, int *correct);
/* dlogits = (probs - onehot(labels)) * scale. With scale = 1/B this is the gradient of the
 * batch-mean loss. */
void het_softmax_ce_backward(float *dlogits, const float *probs, const uint8_t *labels, int batch,
                             int classes, float scale);

/* ---- model ---- */
typedef struct het_model het_model;

/* The model's choice of layouts and fusions (HET_BLK_*, het_layer_plan.fuse_relu; model.c) for
 * n layers already planned in sequence (l->in, l->out set, plans[i] their plans): sets every
 * layer's in_blk, out_blk, relu_out and fused_away. het_model_create calls it; tools that run
 * the zoo's layers on their own (bench/bench_layers.c) call it to run them as a model does.
 * HET_ENOMEM on failure. */
int het_layers_choose_layouts(het_layer **layers, const het_layer_plan *plans, int n);

typedef struct het_batch_result {
    double loss_sum;  /* sum over samples of the per-sample loss */
    int correct;      /* correct argmax predictions */
    int count;        /* samples */
} het_batch_result;

/* Takes ownership of `layers` (the array is copied; layers are destroyed with the model, also
 * on failure). `workers` >= 1 threads split each batch (at most max_batch; batch-coupled
 * layers such as batch norm combine their statistics over all workers, see nn/exec.c). `n_classes` is the output size of the last layer. */
int  het_model_create(het_model **out, het_shape in, het_layer **layers, int n_layers,
                      int max_batch, int workers);
void het_model_free(het_model *m);

/* Precision of the model's convolutions and dense layers (--precision). HET_PREC_FP32: fp32
 * throughout (the default). HET_PREC_BF16: they read their operands (activations, weights,
 * output gradients) rounded to bf16 and accumulate in fp32, as oneDNN's bf16 primitives and
 * PyTorch's autocast define it (tensor.h: het_bf16_round); the parameters, gradients,
 * optimizer state and checkpoints stay fp32 (the master weights), and the rounded weights are
 * made once per batch from them; batch norm, pooling, ReLU, the loss and softmax run in fp32.
 * Kernels: oneDNN's bf16 convolutions where the CPU has AMX or AVX512-BF16
 * (het_dnnl_bf16_enabled), else and for the other layers the portable path (rounded operands
 * into the fp32 kernels: exact to that definition, not faster). The dense-stack executor is
 * not used in bf16. */
typedef enum { HET_PREC_FP32 = 0, HET_PREC_BF16 = 1 } het_precision;
/* "fp32" or "bf16" (static); "unknown" otherwise. */
const char *het_precision_name(het_precision p);
/* Sets the precision of m (before its first batch, or between batches; before the range
 * executor's tapes are made: they take the model's precision). Allocates the bf16 weights and
 * each worker's scratch. HET_EINVAL for an unknown value, HET_ENOMEM. */
int het_model_set_precision(het_model *m, het_precision p);
het_precision het_model_precision(const het_model *m);
/* In bf16, the edges whose activations stay bf16 (het_layer.in_lp / out_lp): from a
 * convolution, through a ReLU it applies, into the next convolution, both channel-blocked on
 * oneDNN's bf16 kernels. The producer rounds its output once, to the bf16 values the consumer
 * would have rounded it to (a ReLU and max commute with rounding), so the numbers are those of
 * fp32 edges while a reorder pass is saved each way and the edge takes half the memory
 * traffic. HET_BF16_ACTS=fp32 keeps every edge fp32. Returns how many edges are bf16 (0 in
 * fp32). */
int het_model_lp_edges(const het_model *m);

/* PyTorch-default initialization of all parameters and state, from `seed` alone. */
void het_model_init_params(het_model *m, uint64_t seed);

float *het_model_params(het_model *m);  /* flat trainable parameters */
/* Flat gradients (the reduced sum over workers), followed by HET_MODEL_GRAD_TAIL spare floats
 * that the model never touches: a client may put per-batch figures there (a sample count, a
 * loss sum) so that they travel in the same all-reduce as the gradients. */
float *het_model_grads(het_model *m);
#define HET_MODEL_GRAD_TAIL 4
float *het_model_state(het_model *m);   /* flat non-trainable state (may be NULL if 0) */
size_t het_model_n_params(const het_model *m);
size_t het_model_n_state(const het_model *m);
int    het_model_n_layers(const het_model *m);
int    het_model_max_batch(const het_model *m);
int    het_model_workers(const het_model *m);
/* The CPU-time clocks of the model's worker threads other than the caller's (workers - 1 of
 * them, at most cap; pthread_getcpuclockid), for costing compute by CPU time; returns how many
 * were written. */
int    het_model_worker_clocks(const het_model *m, clockid_t *out, int cap);
het_shape het_model_in_shape(const het_model *m);
int    het_model_n_classes(const het_model *m);
const het_layer *het_model_layer(const het_model *m, int i);
void   het_model_layer_params(const het_model *m, int i, size_t *offset, size_t *count);
void   het_model_layer_state(const het_model *m, int i, size_t *offset, size_t *count);
/* Forward FLOPs per sample (multiply-add = 2), for throughput reports. */
double het_model_flops_per_sample(const het_model *m);
/* Bytes of all buffers the model allocated (params, grads, state, activations, caches). */
size_t het_model_bytes(const het_model *m);

void het_model_zero_grads(het_model *m);
/* Runs fn(user, lo, hi) over disjoint ranges covering [0, n) on the model's worker threads
 * (ranges are multiples of 16 elements except the last; below 32 elements it runs on the
 * caller alone); returns when all are done. For element-wise work on the flat buffers, such as
 * the optimizer step, and for gathering a batch. */
void het_model_parallel_for(het_model *m, size_t n, void (*fn)(void *user, size_t lo, size_t hi),
                            void *user);

/* ---- hooks: clients called while a batch runs ----
 * A hook is called on the thread that called het_model_train_batch / het_model_forward /
 * het_model_eval_batch / het_model_train_step (worker 0), never on a worker thread, so a
 * client may call MPI there under MPI_THREAD_FUNNELED. Hooks are called in the order they
 * were added. A hook must not call back into the model (no train, forward, update, zeroing,
 * parallel_for or hook changes); reading het_model_grads / het_model_params and calling
 * het_model_batch_result is fine. */
#define HET_MODEL_MAX_HOOKS 4

typedef struct het_model_hook {
    /* Gradients grads[offset, offset + count) of layer `layer` (a layer with parameters) are
     * final for this het_model_train_batch call. Called once per such layer, in reverse layer
     * order, so the calls cover [0, n_params) from the end without gap. With one worker, as
     * each layer's backward of the batch's last chunk completes (bucketed all-reduce overlaps
     * the rest of backward); with more workers, after the worker reduction. May be NULL. */
    void (*grad)(void *user, int layer, size_t offset, size_t count);
    /* Layer `layer` has just run forward or backward on a chunk of worker 0's share (every
     * layer of forward, every layer back-propagated; the dense stack of
     * het_model_train_step reports its dense layers, each with its ReLU). Meant for progress
     * of outstanding communication (MPI_Test) during compute. For a layer whose gradients
     * become final there, the grad callbacks come first. May be NULL. */
    void (*progress)(void *user, int layer);
    void *user;
} het_model_hook;

/* Appends a copy of *h to the chain. HET_EINVAL when both callbacks are NULL or the chain
 * already holds HET_MODEL_MAX_HOOKS hooks. */
int  het_model_add_hook(het_model *m, const het_model_hook *h);
/* Removes every hook whose user is `user` (none: nothing happens); keeps the others' order. */
void het_model_remove_hook(het_model *m, void *user);


/* ---- training and inference ---- */
/* Training step on one batch (batch <= max_batch): forward in train mode, loss, backward.
 * ACCUMULATES into grads the gradient of grad_scale * (sum of per-sample losses); pass
 * grad_scale = 1/batch for the batch mean. step_seed seeds dropout (deterministic per step).
 * Calls the hooks (above). res may be NULL. */
int het_model_train_batch(het_model *m, const float *x, const uint8_t *y, int batch,
                          float grad_scale, uint64_t step_seed, het_batch_result *res);
/* The loss sum, correct count and sample count accumulated so far by the running (or last)
 * het_model_train_batch or het_model_train_step call; after it returns, what it returned.
 * Complete for the whole batch from the first grad-hook call of the batch on: every chunk's
 * forward and loss precede the last chunk's backward. From a progress hook with workers > 1 it
 * holds worker 0's samples only (the others are still being written). A forward or eval
 * resets it to zero. */
void het_model_batch_result(const het_model *m, het_batch_result *res);

/* An optimizer update of all parameters, for het_model_update and het_model_train_step. */
typedef struct het_update {
    const het_optim_config *optim;
    float lr;
    float *state;  /* het_optim_state_floats(optim, n_params) floats, zeroed before step 1 */
    int64_t t;     /* 1-based step count */
    int *nonfinite; /* NULL, or set to 1 (never cleared) when an updated parameter is NaN or
                       +-inf: checked in the update's own pass (het_optim_step_range) */
} het_update;

/* Applies u to all parameters from the model's gradients, on the worker threads. */
void het_model_update(het_model *m, const het_update *u);
/* One whole training step: the gradients of het_model_zero_grads + het_model_train_batch (they
 * are in het_model_grads afterwards), then the update u. For a dense stack (dense layers, each
 * optionally followed by a ReLU; flatten anywhere; recognized by the layers' ops tables, not
 * by name) the workers split the features instead of the batch and each updates its own rows
 * of the parameters while they are in cache (nn/dense_stack.c); the result equals the two-call
 * sequence up to float rounding. Other models run exactly that sequence. It cannot serve a
 * grad hook (HET_EINVAL): use het_model_train_batch when gradients must be reduced before the
 * update. Progress hooks are called. */
int het_model_train_step(het_model *m, const float *x, const uint8_t *y, int batch,
                         float grad_scale, uint64_t step_seed, const het_update *u,
                         het_batch_result *res);
/* What het_model_train_step runs, for a log line (a static string): "dense stack: features
 * split over workers, update folded in" or "generic: samples split over workers, then
 * summed". het_model_train_batch always runs the generic executor. */
const char *het_model_executor(const het_model *m);
/* Forward in eval mode; fills res (loss, correct). Calls the progress hooks. */
int het_model_eval_batch(het_model *m, const float *x, const uint8_t *y, int batch,
                         het_batch_result *res);
/* Forward only; returns the logits (batch x classes, owned by the model, valid until the next
 * call), or NULL for a batch outside 1..max_batch. train selects the mode. Calls the progress
 * hooks. */
const float *het_model_forward(het_model *m, const float *x, int batch, int train,
                               uint64_t step_seed);

/* ---- the range executor: layers [first, last) of a model on their own (pipelines) ----
 * A pipeline stage runs a contiguous range of the model's layers on activations that come from
 * outside (the stage before) and back-propagates from an output gradient that comes from
 * outside (the stage after), producing the input gradient the stage before needs. Each
 * micro-batch in flight keeps what its backward needs (activations, caches, its input) in a
 * tape of its own, so several micro-batches can be between forward and backward at once, and
 * a forward thread and a backward thread can run one range's layers at the same time on
 * different tapes: both read the model's parameters (which must not change meanwhile),
 * backward accumulates into a gradient buffer the caller names (one thread at a time per
 * buffer), forward in training writes batch-norm running statistics.
 * A range runs on the calling thread alone (no workers, no team): batch-coupled layers see
 * the micro-batch as their batch (batch norm per micro-batch). Its layer calls are those of
 * the model's executor for one worker: running the ranges [0, k) and [k, n) one after the
 * other on a batch gives the bits of het_model_train_batch on that batch, when the model runs
 * it as one chunk (one worker; a batch of at most the model's chunk, or a batch-coupled
 * model), with sample0 = 0. */
typedef struct het_tape het_tape;

/* 1 when a range may start at layer `cut` (0 < cut < n_layers): the edge into it is plain and
 * it is not a ReLU fused into the layer before (nn.h: layouts, fusion); the ends 0 and
 * n_layers always can. */
int het_model_cut_ok(const het_model *m, int cut);
/* In bf16 (het_model_set_precision): the ranges read the weights as bf16, from a rounded copy
 * of the master weights that the range executor's user refreshes after every change of them
 * (the model's own executor does it at every batch); nothing in fp32. Call it when no range
 * runs. */
void het_model_refresh_lp(het_model *m);
/* A tape for layers [first, last) of m and micro-batches of up to max_batch samples, in the
 * model's precision (set it first: a bf16 tape has its scratch for the rounded operands).
 * HET_EINVAL (message) for a range that is empty, outside the model or starts or ends on an
 * edge het_model_cut_ok refuses; HET_ENOMEM. */
int  het_tape_create(het_tape **out, const het_model *m, int first, int last, int max_batch);
void het_tape_free(het_tape *t);
/* Bytes the tape allocated (activations, caches, scratch, gradient buffers). */
size_t het_tape_bytes(const het_tape *t);
/* Forward of the tape's range on `in` (batch samples of layer first's input shape, plain),
 * which must stay unchanged until the tape's backward (the tape keeps the pointer, not a
 * copy). train: training mode (dropout, batch-norm batch statistics, running statistics
 * updated). Dropout draws the streams the model's executor draws for samples sample0,
 * sample0 + 1, ... of a batch with seed step_seed. Returns the output (batch samples of layer
 * last - 1's output shape, plain), owned by the tape, valid until its next forward; NULL with
 * the message set for a batch outside 1..max_batch. */
const float *het_range_forward(het_model *m, het_tape *t, const float *in, int batch, int train,
                               uint64_t step_seed, int sample0);
/* Backward of the tape's last forward (in training mode) from dout (the gradient of the
 * range's output): ACCUMULATES parameter gradients into grads (a flat buffer laid out as
 * het_model_grads: the layers' own offsets) and returns the gradient of the range's input,
 * owned by the tape (valid until its next backward), when need_din; otherwise NULL, and
 * layers below the range's first layer with parameters are not back-propagated (as the
 * model's executor does below its first). */
const float *het_range_backward(het_model *m, het_tape *t, const float *dout, float *grads,
                                int need_din);

/* The model zoo (het_zoo_layers, het_zoo_build, het_zoo_names) is built from the model files
 * of models/ by the text-format parser: hetrain/netfile.h. */

#ifdef __cplusplus
}
#endif
#endif

/* strategy: how the ranks of a run cooperate. A strategy is a table of functions (DESIGN.md):
 * the trainer owns epochs, evaluation, metrics and checkpoints and asks the strategy to run
 * one epoch's steps, because step loops differ deeply between methods. Each strategy file
 * reads as its method's algorithm; the shared step machinery (computing a local batch's
 * gradients with the emulated slowdown, the gradient all-reduce with per-rank timings
 * piggybacked on it, the optimizer step, the time split and trace events) lives in step.c.
 * Internal to the library. */
#ifndef HET_STRATEGY_H
#define HET_STRATEGY_H

#include <mpi.h>

#include "hetero/hetero.h"
#include "hetrain/comm.h"
#include "core/trace.h"
#include "hetrain/ckpt.h"
#include "hetrain/config.h"
#include "hetrain/data.h"
#include "hetrain/nn.h"

/* What one step did, for the trainer's per-step metrics and progress. */
typedef struct het_step_info {
    int epoch;          /* 1-based */
    int64_t step;       /* optimizer steps completed, after this one */
    double loss_sum;    /* over the global batch (all ranks) */
    int correct;        /* over the global batch */
    int count;          /* global batch samples */
    float lr;
    double secs;        /* wall time of the step on this rank */
} het_step_info;

/* Per-rank time split, seconds (see het_epoch_stats). */
typedef struct het_times {
    double compute_s, comm_s, wait_s, delay_s;
} het_times;

typedef struct het_strategy_ctx het_strategy_ctx;

/* The trainer's callback after every step (metrics line, progress bar); non-zero stops. */
typedef int (*het_step_cb)(het_strategy_ctx *ctx, const het_step_info *info);

struct het_strategy_ctx {
    /* ---- set by the trainer ---- */
    const het_train_config *cfg;
    het_model *model;
    const het_dataset *train;
    int64_t n_train;            /* training samples used (after --train-limit) */
    het_sampler *sampler;       /* the epoch permutation, same on every rank */
    het_schedule *sched;        /* lr of a step: het_schedule_lr(sched, epoch, step, spe) */
    float *opt_state;
    int64_t step;               /* optimizer steps completed; the strategy advances it */
    float *x;                   /* cfg->batch samples */
    uint8_t *y;
    het_comm *comm;             /* NULL: one process without MPI */
    MPI_Comm world;             /* MPI_COMM_NULL without MPI */
    int rank, size;
    het_pace pace;              /* this rank's emulated slowdown */
    het_trace *trace;           /* NULL: off */
    het_step_cb on_step;
    /* ---- step.c's machinery (het_step_*) ---- */
    het_buckets *buckets;       /* NULL: flat all-reduce, or one rank */
    float *extra;               /* size + 2 floats piggybacked on the gradient all-reduce */
    double *bucket_t0;          /* start time of each bucket this step (trace) */
    int *bucket_of_layer;       /* bucket index of each layer (-1: no parameters) */
    int n_buckets;
    double compute_mark;        /* pace.compute_s at the last gradient reduction */
    double t_hook;              /* het_now() of the last hook: end of compute so far */
    het_comm_stats comm_mark;
    het_times times;            /* this epoch's sums, reset by the trainer */
    int hook_failed;            /* status of a failing het_buckets_ready in the hook */
    /* ---- the strategy's own ---- */
    void *priv;
};

typedef struct het_strategy_ops {
    const char *name;
    const char *summary;   /* one line, for --help and docs */
    /* After the trainer built the model and broadcast rank 0's parameters. Collective. */
    int (*init)(het_strategy_ctx *ctx);
    /* All steps of epoch `epoch` (0-based): fills st->samples, loss, train_acc, lr (the
     * GLOBAL figures, equal on every rank) and advances ctx->step. Collective; a failure
     * (divergence included) must be the same on every rank. */
    int (*train_epoch)(het_strategy_ctx *ctx, int epoch, het_epoch_stats *st);
    /* The model to evaluate, with the same weights on every rank (each rank evaluates a shard
     * of the test set and the trainer sums the results). */
    het_model *(*model_for_eval)(het_strategy_ctx *ctx);
    /* Called on every rank (collective); w is non-NULL on rank 0 only, which writes the
     * strategy's sections (tags "s.<name>..."). */
    int (*save_state)(het_strategy_ctx *ctx, het_ckpt_writer *w);
    /* Called on every rank with the same checkpoint open. */
    int (*load_state)(het_strategy_ctx *ctx, het_ckpt_reader *r);
    void (*free)(het_strategy_ctx *ctx);
} het_strategy_ops;

/* ---- registry (strategy.c) ---- */
/* NULL-terminated names of the known strategies. */
const char *const *het_strategy_names(void);
/* The strategy called `name`; NULL (message listing the known ones) if unknown. */
const het_strategy_ops *het_strategy_find(const char *name);

extern const het_strategy_ops het_strategy_allreduce;

/* ---- shared step machinery (step.c) ---- */

/* The dropout seed of a rank's local batch at global step `step`: rank 0 uses the
 * single-process seed, other ranks independent streams. */
uint64_t het_step_seed(const het_strategy_ctx *ctx, int64_t step);

/* Sets up the gradient reduction over all ranks: buckets of cfg->bucket_mb (0: flat) with the
 * model's layer ranges and the gradient hook, and the piggybacked `extra` floats. Nothing to
 * do on one rank. Collective. */
int  het_step_sync_init(het_strategy_ctx *ctx);
void het_step_sync_free(het_strategy_ctx *ctx);

/* Local gradients: gathers idx[0..count), zeroes the gradients, runs forward and backward with
 * grad_scale (count may be 0: zero gradients). With buckets, each layer's all-reduce starts
 * from the gradient hook as its backward completes. Compute is paced by the slowdown. */
int het_step_grads(het_strategy_ctx *ctx, const int64_t *idx, int count, float grad_scale,
                   uint64_t seed, het_batch_result *res);

/* The whole step of one process (no other rank to wait for between gradients and update):
 * het_train_step, paced and traced as one forward+backward+optimizer event, with the update folded in for dense
 * stacks; accounts the compute time and advances ctx->step. */
int het_step_local(het_strategy_ctx *ctx, const int64_t *idx, int count, float grad_scale,
                   uint64_t seed, float lr, het_batch_result *res);

/* Completes the sum over ranks of the gradients (and of res's loss and correct count, which it
 * replaces by the global figures); accounts this step's compute / comm / wait / delay.
 * res->loss_sum is then non-finite on every rank if it was on any. */
int het_step_reduce(het_strategy_ctx *ctx, het_batch_result *res);

/* The optimizer update with the model's worker threads (paced, traced); advances ctx->step. */
void het_step_optim(het_strategy_ctx *ctx, float lr);

/* Sums doubles over all ranks (MPI_Allreduce, deterministic for a fixed number of ranks);
 * nothing on one rank. */
int het_step_sum_doubles(het_strategy_ctx *ctx, double *v, int n);

/* Averages the model's non-trainable state (batch-norm running statistics) over ranks, so
 * that every rank evaluates and checkpoints the same model. Nothing on one rank. */
int het_step_average_state(het_strategy_ctx *ctx);

#endif

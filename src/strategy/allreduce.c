/* allreduce: synchronous data parallelism, the baseline of every paper (Horovod / PyTorch DDP
 * behaviour; METHODS.md section 0).
 *
 * - --batch is the GLOBAL batch B. Each epoch every rank draws the same permutation (seed,
 *   epoch); step s takes perm[s*B, s*B + B') with B' = B except for the last, ragged step, so
 *   every rank runs the same ceil(n / B) steps.
 * - The step's B' samples are split into P contiguous parts as evenly as possible; rank r
 *   takes part r (in a tiny last step a rank may get 0 samples and contributes zero gradient).
 * - Each rank computes the gradient of (sum of its per-sample losses) / B', so the all-reduce
 *   SUM over ranks is exactly the mean gradient of the global batch. With equal parts this is
 *   the rank mean of per-rank mean gradients that Horovod and DDP compute (sum, then / P); with
 *   a ragged last step it stays the exact global mean, where the rank mean would over-weight
 *   the samples of the smaller parts.
 * - Gradient all-reduce: --bucket-mb X (default 25, as DDP) groups the layers' gradients into
 *   buckets from the last layer backwards; each bucket's non-blocking all-reduce starts from
 *   the model's gradient hook as soon as backward has produced it (so it overlaps the backward
 *   of the earlier layers; every hook also tests the buckets in flight, since MPI progresses
 *   only inside MPI calls); all buckets are waited for before the optimizer. --bucket-mb 0:
 *   one blocking all-reduce of the flat gradient buffer after backward. With --threads > 1 the
 *   model fires the hooks after its worker reduction, so there is no overlap.
 * - --allreduce-algo (default auto): each bucket is summed by one all-reduce over all ranks
 *   (flat) or in two levels, node reduce + all-reduce between node leaders + node broadcast
 *   (hier, comm/hier.c: per node one buffer's worth crosses the network, however the ranks are
 *   placed); auto is hier on more than one node. hgc shares the world reducer, so the choice.
 * - Then the identical optimizer step on every rank: parameters stay bitwise equal.
 * - The step is het_step_sync over one world reducer: on one rank, where nothing has to happen
 *   between gradients and update, it folds the update into the step (the dense-stack executor
 *   for mlp); the strategy does not branch on it.
 * - The step's global loss and correct count travel with the last gradient bucket (the
 *   reducer's figures), so no other call is made per step.
 * - Our choices: the model's non-trainable state (batch-norm running statistics, updated from
 *   each rank's local batch, no synchronized batch norm) is averaged over ranks at the end of
 *   each epoch, so every rank evaluates and checkpoints the same model; dropout masks use an
 *   independent stream per rank. Neither applies to mlp and lenet5.
 * Invariant (tests/test_dist.c): P ranks with global batch B give the parameters of 1 rank with
 * batch B on the same sample order, up to float rounding of the sum over ranks. */
#include "strategy/strategy.h"

/* priv: one reducer over all ranks that carries the step's figures. */
static int ar_init(het_strategy_ctx *ctx) {
    het_reducer *red;
    int st = het_reducer_create(&red, ctx, HET_COMM_WORLD, ctx->cfg->bucket_mb,
                                HET_REDUCE_FIGURES);
    ctx->priv = red;
    return st;
}

static int ar_train_epoch(het_strategy_ctx *ctx, int epoch, het_epoch_stats *st) {
    const het_train_config *c = ctx->cfg;
    const int64_t n = ctx->n_train, B = c->batch, spe = (n + B - 1) / B;
    het_epoch_sums *sums = &ctx->esums; /* over the epoch's pieces */
    float lr = 0.0f;
    het_sampler_set_epoch(ctx->sampler, epoch);
    for (int64_t pos = ctx->epoch_pos; pos < n; pos += B) {
        double ts = het_lane_now(&ctx->lane);
        int64_t Bs = n - pos < B ? n - pos : B, lo, len;
        het_partition_even(Bs, ctx->size, ctx->rank, &lo, &len);
        lr = het_schedule_lr(ctx->sched, epoch, ctx->step, spe);
        het_batch_result mine, r;
        int rc = het_step_sync(ctx, ctx->priv, ctx->sampler->perm + pos + lo, (int)len,
                               1.0f / (float)Bs, het_step_seed(ctx, ctx->step), lr, &mine, &r);
        const het_step_rec rec = {.mine = &mine, .count = len, .shown = &r, .shown_n = Bs};
        if (!rc) rc = het_step_record(ctx, sums, &rec, lr, ts);
        if (rc) return rc;
        if (het_step_pause(ctx, pos + B, n)) return HET_OK; /* nothing in flight */
    }
    int rc = het_step_epoch_figures(ctx, sums, lr, st);
    return rc ? rc : het_step_average_state(ctx, 1.0 / ctx->size);
}

static het_model *ar_model_for_eval(het_strategy_ctx *ctx) { return ctx->model; }

static int ar_save_state(het_strategy_ctx *ctx, het_ckpt_writer *w) {
    (void)ctx;
    (void)w; /* nothing beyond the trainer's sections: all ranks hold the same model */
    return HET_OK;
}

static int ar_load_state(het_strategy_ctx *ctx, het_ckpt_reader *r) {
    (void)ctx;
    (void)r;
    return HET_OK;
}

static void ar_free(het_strategy_ctx *ctx) { ctx->priv = NULL; /* the reducer is ctx's */ }

const het_strategy_ops het_strategy_allreduce = {
    .name = "allreduce",
    .summary = "synchronous data parallelism: gradient all-reduce every step (DDP, Horovod)",
    .init = ar_init,
    .train_epoch = ar_train_epoch,
    .model_for_eval = ar_model_for_eval,
    .save_state = ar_save_state,
    .load_state = ar_load_state,
    .free = ar_free,
    .report = NULL,       /* nothing beyond the common epoch line */
    .world_grads = 1,
    .agreed_state = NULL, /* nothing beyond the weights to agree on */
    .opts = NULL,         /* no options of its own */
    .worker_batch = 0,    /* --batch is the global batch */
    .lanes = 0,           /* one compute thread per --threads thread */
    .pieces = 1,          /* epochs in pieces: every step boundary is a drain point */
};

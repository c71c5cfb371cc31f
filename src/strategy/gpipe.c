/* gpipe: pipeline parallelism, the baseline of Q-FB (METHODS.md section 4): GPipe (Huang et
 * al., "GPipe: Efficient Training of Giant Neural Networks using Pipeline Parallelism",
 * NeurIPS 2019) and, with --pipe-schedule 1f1b, the one-forward-one-backward schedule of
 * PipeDream-Flush (Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN Training", ICML
 * 2021) that Megatron-LM runs.
 *
 * The model is cut into K stages over K ranks (R copies with --pipelines R); each step's
 * share of a pipeline is split into M micro-batches (pipe.c: the partition, the messages, the
 * update, the epoch's gathering). One thread per stage, no codecs: fp32 activations forward,
 * fp32 gradients backward.
 * - gpipe: every micro-batch's forward, then every micro-batch's backward. A stage keeps M
 *   micro-batches' activations; its bubble is (K - 1) / (M + K - 1) of the step with equal
 *   stages.
 * - 1f1b: stage k runs min(K - k - 1, M) forwards (warm-up), then alternates one forward and
 *   one backward, then the remaining backwards: at most K - k micro-batches in flight, the
 *   same bubble, and so min(M, K - k) tapes of activations instead of M (the stash MB of the
 *   epoch line and the metrics' stash_bytes).
 * Backwards run in micro-batch order 0, 1, ... in both schedules (GPipe's paper does not fix
 * it), so the gradients accumulate in the same order and both schedules give the same bits.
 * Gradients of all M micro-batches accumulate; the update comes after the last backward, so
 * the result is synchronous mini-batch SGD on the global batch (tests/test_pipe.sh: P ranks ==
 * 1 rank). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/pipe.h"

typedef struct gpipe {
    het_pipe p;
    int one_f_one_b;
} gpipe;

static int gp_init(het_strategy_ctx *ctx) {
    gpipe *g = calloc(1, sizeof *g);
    if (!g) return het_error_set(HET_ENOMEM, "gpipe: out of memory");
    ctx->priv = g;
    g->one_f_one_b = (int)het_strategy_opt_value(ctx->cfg, "pipe-schedule") == 1;
    return het_pipe_init(&g->p, ctx, g->one_f_one_b ? "gpipe (1f1b)" : "gpipe", g->one_f_one_b);
}

/* One step's micro-batches in the configured order. With 1F1B the stage holds K - stage tapes
 * (fewer when M is smaller), reused in turn: forward f takes tape f % (K - stage), which the
 * backward of micro-batch f - (K - stage) freed just before (pipe.c checks it). */
static int run_schedule(gpipe *g, het_strategy_ctx *ctx) {
    het_pipe *p = &g->p;
    const int M = p->n_micro;
    int rc = HET_OK;
    if (!g->one_f_one_b) {
        for (int i = 0; i < M && !rc; i++) rc = het_pipe_forward(p, ctx, i);
        for (int i = 0; i < M && !rc; i++) rc = het_pipe_backward(p, ctx, i);
        return rc;
    }
    int warm = p->K - p->stage - 1, f = 0;
    if (warm > M) warm = M;
    for (; f < warm && !rc; f++) rc = het_pipe_forward(p, ctx, f);
    for (int b = 0; b < M && !rc; b++) {
        if (f < M) rc = het_pipe_forward(p, ctx, f++);
        if (!rc) rc = het_pipe_backward(p, ctx, b);
    }
    return rc;
}

static int gp_run(void *user, het_strategy_ctx *ctx) { return run_schedule(user, ctx); }

static int gp_train_epoch(het_strategy_ctx *ctx, int epoch, het_epoch_stats *st) {
    gpipe *g = ctx->priv;
    return het_pipe_epoch(&g->p, ctx, epoch, st, gp_run, g);
}

static void gp_free(het_strategy_ctx *ctx) {
    gpipe *g = ctx->priv;
    if (g) het_pipe_free(&g->p);
    free(g);
    ctx->priv = NULL;
}

/* The shared entries of pipe_opts.c read ctx->priv as the het_pipe it starts with. */
_Static_assert(offsetof(gpipe, p) == 0, "gpipe must start with its het_pipe");

/* The stages are gathered at every epoch's end (rank 0 holds the whole model): the
 * checkpoint holds the cuts (het_pipe_save_state). */
const het_strategy_ops het_strategy_gpipe = {
    .name = "gpipe",
    .summary = "pipeline parallelism: layers cut into stages over ranks, micro-batches, all "
               "forwards then all backwards (GPipe; --pipe-schedule 1f1b: PipeDream-Flush)",
    .init = gp_init,
    .train_epoch = gp_train_epoch,
    .model_for_eval = het_pipe_model_for_eval,
    .save_state = het_pipe_save_state,
    .load_state = het_pipe_load_state,
    .free = gp_free,
    .report = het_pipe_report_op,
    .world_grads = 0, /* each stage sums its own slice over its replicas */
    .agreed_state = het_pipe_agreed_state,
    .opts = het_gpipe_opts,
    .worker_batch = 0, /* --batch is the global batch */
    .lanes = 0,        /* one compute thread */
    .pieces = 1,       /* epochs in pieces: a step's end is a drain point */
};

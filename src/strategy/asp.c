/* asp: the asynchronous parameter server, the baseline that InHAD (Xiao et al., J.
 * Supercomputing 78 (2022) 5565-5587) is measured against; the scheme of DistBelief's
 * Downpour SGD (Dean et al. 2012) and of the parameter servers after it.
 *
 * ALGORITHM. Servers and workers as in ps.h (the last rank serves by default). A worker loops:
 * compute the gradient of its batch (the mean over --batch samples: here --batch is EACH
 * worker's batch, not a global one) on the weights it holds, push it to the server (one
 * message per shard: its slice), and wait for the reply: the server's weights after applying
 * it, and the worker's next batch. The server takes gradients one at a time as they come and
 * applies each at once with the configured optimizer (SGD / Adam, its state on the server):
 * one update per gradient, whatever the worker's speed, so fast workers contribute more
 * updates and slow workers' gradients are stale (computed on weights that have been updated
 * since). Staleness of a gradient = server version at its update - version it was computed
 * on.
 *
 * Our choices (flags, ps_opts.c):
 * - Batches are handed out by the primary server with each reply, in the order of the epoch's
 *   permutation (the first W go out implicitly, one per worker), so that every sample is seen
 *   once per epoch and fast workers do more batches. The epoch ends when all are back.
 * - lr comes from the schedule at the server's version (its step count); --staleness-lr on
 *   divides it by the gradient's staleness (at least 1), off by default: the plain baseline.
 * - --max-staleness N (off by default) bounds the spread of the workers as stale synchronous
 *   parallel (Ho et al. 2013) does: the primary holds back the reply to a worker that has
 *   pushed more than N batches beyond the slowest unfinished worker, until it is no longer.
 * - Virtual clock: a server takes gradients in virtual-time order (the point-to-point layer's
 *   rule for a receive from any sender), so staleness is what the emulated cluster would
 *   produce and a run with calibrated costs is the same bit for bit on any host. Wall clock:
 *   in the order they come.
 * Invariant (tests/test_ps.sh): one worker gives exactly plain SGD on that worker's batches. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/ps.h"

typedef struct asp {
    het_ps ps;
    unsigned char *rbuf;     /* a shard: the gradient being received */
    unsigned char **reply;   /* a shard: per worker, its reply in flight */
    het_msg *rmsg;           /* ... and their messages */
    int *held;               /* the primary: per worker, 1 while its reply is held back */
    int64_t *pushed;         /* the primary: per worker, gradients taken this epoch */
    unsigned char **sbuf;    /* a worker: per shard, its gradient slice; then the reply */
    unsigned char **wbuf;
    het_msg *msgs;           /* a worker: K sends, K receives */
} asp;

static int asp_init(het_strategy_ctx *ctx) {
    asp *a = calloc(1, sizeof *a);
    if (!a) return het_error_set(HET_ENOMEM, "asp: out of memory");
    ctx->priv = a;
    het_ps *ps = &a->ps;
    int rc = het_ps_init(ps, ctx, "asp");
    if (rc) return rc;
    int K = ps->n_shards, W = ps->n_workers;
    if (ps->shard >= 0) {
        size_t cap = het_ps_msg_bytes(ps, ps->shard, sizeof(het_ps_grad_hdr));
        size_t out = het_ps_msg_bytes(ps, ps->shard, sizeof(het_ps_reply_hdr));
        a->rbuf = het_alloc(cap);
        a->reply = calloc((size_t)W, sizeof *a->reply);
        a->rmsg = calloc((size_t)W, sizeof *a->rmsg);
        a->held = calloc((size_t)W, sizeof(int));
        a->pushed = calloc((size_t)W, sizeof(int64_t));
        if (!a->rbuf || !a->reply || !a->rmsg || !a->held || !a->pushed) rc = HET_ENOMEM;
        for (int w = 0; w < W && !rc; w++)
            if (!(a->reply[w] = het_alloc(out))) rc = HET_ENOMEM;
    } else {
        a->sbuf = calloc((size_t)K, sizeof *a->sbuf);
        a->wbuf = calloc((size_t)K, sizeof *a->wbuf);
        a->msgs = calloc((size_t)(2 * K), sizeof *a->msgs);
        if (!a->sbuf || !a->wbuf || !a->msgs) rc = HET_ENOMEM;
        for (int k = 0; k < K && !rc; k++)
            if (!(a->sbuf[k] = het_alloc(het_ps_msg_bytes(ps, k, sizeof(het_ps_grad_hdr)))) ||
                !(a->wbuf[k] = het_alloc(het_ps_msg_bytes(ps, k, sizeof(het_ps_reply_hdr)))))
                rc = HET_ENOMEM;
    }
    return rc ? het_error_set(HET_ENOMEM, "asp: out of memory for the message buffers") : 0;
}

/* ---------------------------------------------------------------- the worker */

static int worker_epoch(asp *a, het_strategy_ctx *ctx, int epoch, het_epoch_sums *sums) {
    het_ps *ps = &a->ps;
    const int64_t n = ctx->n_train, B = ctx->cfg->batch;
    const int K = ps->n_shards;
    int64_t pos = (int64_t)ps->worker * B, len = pos < n ? (n - pos < B ? n - pos : B) : 0;
    float *grads = het_model_grads(ctx->model), *params = het_model_params(ctx->model);
    float lr = 0.0f;
    int rc = HET_OK;
    (void)epoch;
    while (len > 0 && !rc) {
        double ts = het_lane_now(&ctx->lane);
        het_batch_result res;
        rc = het_step_grads(ctx, NULL, ctx->sampler->perm + pos, (int)len, 1.0f / (float)len,
                            het_step_seed(ctx, ctx->step), &res);
        for (int k = 0; k < K && !rc; k++) {
            het_ps_grad_hdr h = {ctx->step, pos, res.loss_sum, (int32_t)len, res.correct};
            memcpy(a->sbuf[k], &h, sizeof h);
            memcpy(a->sbuf[k] + sizeof h, grads + ps->lo[k], ps->len[k] * sizeof(float));
            rc = het_comm_isend(ctx->comm, HET_COMM_WORLD, ps->shard_rank[k], HET_TAG_GRADS,
                                a->sbuf[k], het_ps_msg_bytes(ps, k, sizeof h), &a->msgs[k]);
            if (!rc)
                rc = het_comm_irecv(ctx->comm, HET_COMM_WORLD, ps->shard_rank[k],
                                    HET_TAG_PARAMS, a->wbuf[k],
                                    het_ps_msg_bytes(ps, k, sizeof(het_ps_reply_hdr)),
                                    &a->msgs[K + k]);
        }
        het_stall_where("waiting for the server", ctx->epoch + 1, (long long)ctx->step);
        int wrc = het_comm_msg_waitall(ctx->comm, 2 * K, a->msgs);
        if (!rc) rc = wrc;
        memset(a->msgs, 0, (size_t)(2 * K) * sizeof *a->msgs);
        if (rc) break;
        het_ps_reply_hdr r0 = {0, -1, 0, 0.0f, 0};
        for (int k = 0; k < K; k++) {
            het_ps_reply_hdr h;
            memcpy(&h, a->wbuf[k], sizeof h);
            if (k == 0) r0 = h;
            memcpy(params + ps->lo[k], a->wbuf[k] + sizeof h, ps->len[k] * sizeof(float));
        }
        ctx->step = r0.version; /* the primary's version of the weights now held */
        lr = r0.lr;
        rc = het_step_record(ctx, sums, &(het_step_rec){.mine = &res, .count = len, .local = 1},
                             lr, ts);
        pos = r0.pos;
        len = r0.pos >= 0 ? r0.len : 0;
    }
    /* nothing more this epoch: a done message to every shard */
    for (int k = 0; k < K; k++) {
        int drc = het_comm_p2p_done(ctx->comm, HET_COMM_WORLD, ps->shard_rank[k], HET_TAG_GRADS,
                                    &a->msgs[k]);
        if (!rc) rc = drc;
    }
    int wrc = het_comm_msg_waitall(ctx->comm, K, a->msgs);
    memset(a->msgs, 0, (size_t)K * sizeof *a->msgs);
    return rc ? rc : wrc;
}

/* ---------------------------------------------------------------- the server */

/* Sends worker w its reply (header h, then this shard's slice of the weights). */
static int send_reply(asp *a, het_strategy_ctx *ctx, int w, const het_ps_reply_hdr *h) {
    het_ps *ps = &a->ps;
    int rc = het_comm_msg_wait(ctx->comm, &a->rmsg[w]); /* its last reply is out */
    memset(&a->rmsg[w], 0, sizeof a->rmsg[w]);
    if (rc) return rc;
    size_t bytes = het_ps_msg_bytes(ps, ps->shard, sizeof *h);
    memcpy(a->reply[w], h, sizeof *h);
    memcpy(a->reply[w] + sizeof *h, het_model_params(ctx->model) + ps->lo[ps->shard],
           ps->len[ps->shard] * sizeof(float));
    ps->run.bytes_out += (double)bytes;
    return het_comm_isend(ctx->comm, HET_COMM_WORLD, ps->worker_rank[w], HET_TAG_PARAMS,
                          a->reply[w], bytes, &a->rmsg[w]);
}

/* --max-staleness: whether worker w may take another batch now (pushed at most N beyond the
 * slowest worker still running). */
static int may_go(const asp *a, int w, const int *finished) {
    const het_ps *ps = &a->ps;
    if (ps->max_staleness < 0) return 1;
    int64_t lo = INT64_MAX;
    for (int u = 0; u < ps->n_workers; u++)
        if (!finished[u] && a->pushed[u] < lo) lo = a->pushed[u];
    return a->pushed[w] - lo <= ps->max_staleness;
}

/* The senders a shard waits for: every worker not held back (the primary's --max-staleness). */
static int set_senders(asp *a, het_strategy_ctx *ctx, int *ranks) {
    het_ps *ps = &a->ps;
    int m = 0;
    for (int w = 0; w < ps->n_workers; w++)
        if (!a->held[w]) ranks[m++] = ps->worker_rank[w];
    return het_comm_p2p_senders(ctx->comm, HET_COMM_WORLD, HET_TAG_GRADS, ranks, m);
}

static int server_epoch(asp *a, het_strategy_ctx *ctx, int epoch) {
    het_ps *ps = &a->ps;
    const int W = ps->n_workers, primary = ps->shard == 0;
    const int64_t n = ctx->n_train, B = ctx->cfg->batch, spe = (n + B - 1) / B;
    int64_t next = (int64_t)W * B; /* the first W batches went out implicitly */
    int *finished = calloc((size_t)W, sizeof(int)), *ranks = malloc((size_t)W * sizeof(int));
    if (!finished || !ranks) {
        free(finished);
        free(ranks);
        return het_error_set(HET_ENOMEM, "asp: out of memory");
    }
    memset(a->pushed, 0, (size_t)W * sizeof(int64_t));
    memset(a->held, 0, (size_t)W * sizeof(int));
    for (int w = 0; w < W; w++) finished[w] = (int64_t)w * B >= n; /* no first batch */
    double t0 = het_lane_now(&ctx->lane);
    size_t cap = het_ps_msg_bytes(ps, ps->shard, sizeof(het_ps_grad_hdr));
    int rc = HET_OK, changed = 0;
    for (;;) {
        if (changed && (rc = set_senders(a, ctx, ranks))) break;
        changed = 0;
        het_msg m = {0};
        het_stall_where("server: waiting for gradients", epoch + 1, (long long)ctx->step);
        if ((rc = het_comm_irecv(ctx->comm, HET_COMM_WORLD, HET_ANY_SOURCE, HET_TAG_GRADS,
                                 a->rbuf, cap, &m)) ||
            (rc = het_comm_msg_wait(ctx->comm, &m)))
            break;
        if (m.done) break; /* every worker is done with the epoch */
        int w = ps->index_of[m.src];
        het_ps_grad_hdr h;
        memcpy(&h, a->rbuf, sizeof h);
        ps->run.bytes_in += (double)m.bytes;
        int64_t v = ctx->step, stale = v - h.version;
        float lr = het_schedule_lr(ctx->sched, epoch, v, spe);
        double scale = ps->staleness_lr && stale > 1 ? 1.0 / (double)stale : 1.0;
        if (ps->staleness_lr && stale > 1) lr /= (float)stale;
        const float *g = (const float *)(a->rbuf + sizeof h);
        int skip = 0;
        if (ctx->cfg->on_nan == HET_ON_NAN_SKIP_STEP) {
            for (size_t i = 0; i < ps->len[ps->shard] && !skip; i++) skip = !isfinite(g[i]);
            skip |= !isfinite(h.loss_sum);
        }
        if (!skip && !het_ps_update(ps, ctx, g, lr, v)) ps->run.nonfinite = 1;
        ctx->step = v + 1; /* a skipped update keeps its place in the count */
        ps->run.skipped += skip;
        ps->run.updates += 1;
        ps->run.stale_sum += (double)stale;
        ps->run.stale_max = fmax(ps->run.stale_max, (double)stale);
        ps->run.grads += 1;
        ps->run.lr_scale_sum += scale;
        ps->run.lr = lr;
        a->pushed[w]++;
        if (primary && (rc = het_ps_eval_due(ps, ctx, next, n))) break; /* --eval-every */
        het_ps_reply_hdr r = {ctx->step, -1, 0, lr, 0};
        if (primary) {
            ps->run_steps[w] += 1;
            if (next < n && !ps->run.nonfinite && !may_go(a, w, finished)) {
                a->held[w] = 1; /* until the slowest catch up */
                changed = 1;
                continue;
            }
            if (!ps->run.nonfinite) het_ps_next_batch(ctx, &next, &r.pos, &r.len);
            finished[w] = r.pos < 0;
        }
        if ((rc = send_reply(a, ctx, w, &r))) break;
        for (int u = 0; primary && u < W && !rc; u++) { /* release who may go now */
            if (!a->held[u] || (next < n && !may_go(a, u, finished))) continue;
            het_ps_reply_hdr q = {ctx->step, -1, 0, lr, 0};
            het_ps_next_batch(ctx, &next, &q.pos, &q.len);
            finished[u] = q.pos < 0;
            a->held[u] = 0;
            changed = 1;
            rc = send_reply(a, ctx, u, &q);
        }
        if (rc) break;
    }
    for (int w = 0; w < W; w++) { /* every reply out before the drain point */
        int wrc = het_comm_msg_wait(ctx->comm, &a->rmsg[w]);
        memset(&a->rmsg[w], 0, sizeof a->rmsg[w]);
        if (!rc) rc = wrc;
    }
    if (primary) ps->run.server_s = het_lane_now(&ctx->lane) - t0;
    if (!rc && primary && next < n && !ps->run.nonfinite)
        rc = het_error_set(HET_EINVAL, "asp: the epoch ended with %lld samples not handed out "
                           "(a strategy bug)", (long long)(n - next));
    if (!rc) rc = set_senders(a, ctx, ranks); /* the next epoch starts with every worker */
    free(finished);
    free(ranks);
    return rc;
}

static int asp_epoch(het_strategy_ctx *ctx, int epoch, het_epoch_stats *st) {
    asp *a = ctx->priv;
    het_epoch_sums sums = {0, 0, 0, 0};
    het_sampler_set_epoch(ctx->sampler, epoch);
    int rc = a->ps.shard >= 0 ? server_epoch(a, ctx, epoch) : worker_epoch(a, ctx, epoch, &sums);
    het_ps_fail(ctx, rc); /* the others wait for this rank's messages */
    if ((rc = het_comm_agree(ctx->world, rc))) return rc;
    return het_ps_drain(&a->ps, ctx, &sums, st);
}

static void asp_free(het_strategy_ctx *ctx) {
    asp *a = ctx->priv;
    if (!a) return;
    for (int w = 0; a->reply && w < a->ps.n_workers; w++) het_free(a->reply[w]);
    for (int k = 0; a->sbuf && k < a->ps.n_shards; k++) het_free(a->sbuf[k]);
    for (int k = 0; a->wbuf && k < a->ps.n_shards; k++) het_free(a->wbuf[k]);
    het_free(a->rbuf);
    free(a->reply);
    free(a->rmsg);
    free(a->held);
    free(a->pushed);
    free(a->sbuf);
    free(a->wbuf);
    free(a->msgs);
    het_ps_free(&a->ps);
    free(a);
    ctx->priv = NULL;
}

const het_strategy_ops het_strategy_asp = {
    .name = "asp",
    .summary = "asynchronous parameter server: one update per worker gradient (Downpour SGD; "
               "the baseline of InHAD)",
    .init = asp_init,
    .train_epoch = asp_epoch,
    .model_for_eval = het_ps_model_for_eval,
    .save_state = het_ps_save_state,
    .load_state = het_ps_load_state,
    .free = asp_free,
    .report = het_ps_report_op,
    .world_grads = 0,     /* no world gradient sum */
    .agreed_state = NULL,
    .opts = het_asp_opts, /* ps_opts.c */
    .worker_batch = 1,    /* --batch is each worker's */
    .lanes = 0,           /* one compute thread */
    .pieces = 0,          /* whole epochs: gradients and weights are in flight inside one */
    .evals = 2,           /* --eval-every: the server evaluates its model (het_ps_eval_due) */
};

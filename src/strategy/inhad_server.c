/* inhad's parameter server (Scheduler): counts iteration numbers, pulls the node aggregates
 * at the threshold, updates, pushes; the algorithm is in inhad.c's opening comment. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/inhad.h"

/* ---------------------------------------------------------------- the server */

/* The newest version finished by time t (the epoch's first: what every worker started on). */
static int64_t avail_at(const inhad *a, double t) {
    int64_t i = a->n_done;
    while (i > 0 && a->done_t[i - 1] > t) i--;
    return a->done_base + i;
}

static int note_done(inhad *a, double t) {
    if (a->n_done == a->cap_done) {
        int64_t cap = a->cap_done ? 2 * a->cap_done : 256;
        double *d = realloc(a->done_t, (size_t)cap * sizeof *d);
        if (!d) return het_error_set(HET_ENOMEM, "inhad: out of memory for the update log");
        a->done_t = d;
        a->cap_done = cap;
    }
    a->done_t[a->n_done++] = t;
    return HET_OK;
}

/* Sends node k's aggregator the control message c (+ extra bytes) from its buffer. */
static int to_node(inhad *a, het_strategy_ctx *ctx, int k, const ctrl_msg *c, const void *extra,
                   size_t n_extra) {
    a->ps.run.bytes_out += (double)(sizeof *c + n_extra);
    return het_ps_out_send(ctx, &a->out, a->agg_rank[k], HET_TAG_CTRL, c, sizeof *c, extra, n_extra,
                    -1.0);
}

/* Sends the due push (the last update's weights and per-worker counts) to every node. */
static int flush_push(inhad *a, het_strategy_ctx *ctx) {
    if (!a->push_due) return HET_OK;
    const int W = a->ps.n_workers;
    a->push_due = 0;
    memcpy(a->sent_incl, a->incl, (size_t)W * sizeof(int64_t));
    int rc = HET_OK;
    for (int k = 0; k < a->n_nodes && !rc; k++)
        rc = to_node(a, ctx, k, &a->push, a->big,
                     a->ps.n * sizeof(float) + (size_t)W * sizeof(int64_t));
    return rc;
}

/* Whether a worker not done needs the due push to go on (more than --max-staleness of its
 * gradients outside the weights pushed so far): it sends nothing until the push is out. */
static int push_needed(const inhad *a, const int64_t *ins, const int *done) {
    const het_ps *ps = &a->ps;
    for (int w = 0; a->push_due && ps->max_staleness >= 0 && w < ps->n_workers; w++)
        if (!done[w] && ins[w] - a->sent_incl[w] > ps->max_staleness) return 1;
    return 0;
}

/* Receives the K aggregates the pull asked for, each into abuf[its node]. They are taken as
 * receives from any of the aggregators not yet heard (the set narrowed after each), so that on
 * the virtual clock they share the server's way in as they would a link (comm's p2p_inbox.c),
 * not each at its sender's pace; the arithmetic is in node order whatever order they come in. */
static int pull_aggregates(inhad *a, het_strategy_ctx *ctx, int epoch, int64_t v) {
    const int K = a->n_nodes;
    const size_t cap = sizeof(agg_hdr) + a->ps.n * sizeof(float);
    int *left = malloc((size_t)K * sizeof *left);
    unsigned char **pool = malloc((size_t)K * sizeof *pool);
    int rc = left && pool ? HET_OK : het_error_set(HET_ENOMEM, "inhad: out of memory");
    for (int k = 0; !rc && k < K; k++) left[k] = a->agg_rank[k], pool[k] = a->abuf[k];
    het_stall_where("server: pulling the aggregates", epoch + 1, (long long)v);
    for (int i = 0; !rc && i < K; i++) {
        het_msg m;
        rc = het_comm_p2p_senders(ctx->comm, HET_COMM_WORLD, HET_TAG_GRADS, left, K - i);
        if (!rc) rc = het_comm_irecv(ctx->comm, HET_COMM_WORLD, HET_ANY_SOURCE, HET_TAG_GRADS,
                                     pool[i], cap, &m);
        if (!rc) rc = het_comm_msg_wait(ctx->comm, &m);
        int k = 0, j = 0;
        while (!rc && k < K && a->agg_rank[k] != m.src) k++;
        while (!rc && j < K - i && left[j] != m.src) j++;
        if (!rc && (m.done || k == K || j == K - i))
            rc = het_error_set(HET_EINVAL, "inhad: an aggregate from rank %d, not an aggregator "
                               "the pull waits for", m.src);
        if (rc) break;
        a->abuf[k] = pool[i];
        left[j] = left[K - i - 1];
        a->ps.run.bytes_in += (double)m.bytes;
    }
    for (int k = 0; rc && pool && k < K; k++) a->abuf[k] = pool[k]; /* failed: each buffer once */
    free(left);
    free(pool);
    return rc;
}

/* Pull, average, update; the push is left due (flush_push). */
static int server_update(inhad *a, het_strategy_ctx *ctx, int epoch, int64_t spe) {
    het_ps *ps = &a->ps;
    const int W = ps->n_workers, K = a->n_nodes;
    const size_t n = ps->n;
    int64_t v = ctx->step;
    ctrl_msg pull = {K_PULL, 0, v, -1, -1, 0, 0.0f};
    int rc = HET_OK;
    for (int k = 0; k < K && !rc; k++)
        rc = to_node(a, ctx, k, &pull, a->counted, (size_t)W * sizeof(int32_t));
    if (!rc) rc = flush_push(a, ctx); /* the last update's, behind the small pull */
    if (!rc) rc = pull_aggregates(a, ctx, epoch, v);
    double C = 0, grads = 0, ssum = 0, smax = 0;
    for (int k = 0; k < K && !rc; k++) {
        agg_hdr h;
        memcpy(&h, a->abuf[k], sizeof h);
        C += (double)h.count, grads += (double)h.grads, ssum += h.stale_sum;
        smax = fmax(smax, h.stale_max);
    }
    if (rc) return rc;
    int first = 1; /* the sample-weighted mean of the node means (one node: its mean as it is) */
    for (int k = 0; k < K; k++) {
        agg_hdr h;
        memcpy(&h, a->abuf[k], sizeof h);
        if (h.count == 0) continue;
        const float *s = (const float *)(a->abuf[k] + sizeof h);
        float wk = (float)((double)h.count / C);
        if (first && (double)h.count == C) memcpy(a->acc, s, n * sizeof(float));
        else if (first) for (size_t j = 0; j < n; j++) a->acc[j] = wk * s[j];
        else for (size_t j = 0; j < n; j++) a->acc[j] += wk * s[j];
        first = 0;
    }
    double mean = grads > 0 ? ssum / grads : 0.0;
    float lr = het_schedule_lr(ctx->sched, epoch, v, spe);
    const double scale = ps->staleness_lr && mean > 1.0 ? 1.0 / mean : 1.0;
    if (ps->staleness_lr && mean > 1.0) lr = (float)(lr / mean);
    int skip = 0;
    if (ctx->cfg->on_nan == HET_ON_NAN_SKIP_STEP)
        for (size_t j = 0; j < n && !skip; j++) skip = !isfinite(a->acc[j]);
    if (first) skip = 1; /* nothing pulled (cannot happen with INs counted) */
    if (!skip && !het_ps_update(ps, ctx, a->acc, lr, v)) ps->run.nonfinite = 1;
    ctx->step = v + 1;
    ps->run.skipped += skip;
    ps->run.updates += 1;
    ps->run.stale_sum += mean;
    ps->run.stale_max = fmax(ps->run.stale_max, smax);
    ps->run.grads += grads;
    ps->run.lr_scale_sum += scale;
    ps->run.lr = lr;
    for (int w = 0; w < W; w++) a->incl[w] += a->counted[w];
    memset(a->counted, 0, (size_t)W * sizeof(int32_t));
    a->push_t = het_lane_now(&ctx->lane);
    if ((rc = note_done(a, a->push_t))) return rc;
    a->push = (ctrl_msg){K_PUSH, 0, ctx->step, -1, -1, 0, lr};
    memcpy(a->big, het_model_params(ctx->model), n * sizeof(float)); /* weights, then incl */
    memcpy(a->big + n * sizeof(float), a->incl, (size_t)W * sizeof(int64_t));
    a->push_due = 1;
    return rc;
}

/* The workers the server hears from next: not done, and not waiting for weights that hold
 * their gradients (more than --max-staleness outside: such a worker sends nothing until an
 * update takes them in, so the receive in virtual-time order must not wait for it). */
static int hear_from(inhad *a, het_strategy_ctx *ctx, const int64_t *ins, const int *done,
                     int *blocked, int *ranks, int *changed) {
    het_ps *ps = &a->ps;
    int m = 0;
    for (int w = 0; w < ps->n_workers; w++) {
        int b = ps->max_staleness >= 0 && ins[w] - a->incl[w] > ps->max_staleness;
        if (b != blocked[w]) blocked[w] = b, *changed = 1;
        if (!done[w] && !b) ranks[m++] = ps->worker_rank[w];
    }
    if (!*changed) return HET_OK;
    *changed = 0;
    return het_comm_p2p_senders(ctx->comm, HET_COMM_WORLD, HET_TAG_COUNT, ranks, m);
}

int het_inhad_server_epoch(inhad *a, het_strategy_ctx *ctx, int epoch) {
    het_ps *ps = &a->ps;
    const int W = ps->n_workers, K = a->n_nodes;
    const int64_t n = ctx->n_train, B = ctx->cfg->batch;
    const int64_t spe = ((n + B - 1) / B + a->T - 1) / a->T; /* updates per epoch, about */
    int64_t next = (int64_t)W * B, *ins = calloc((size_t)W, sizeof(int64_t));
    int *done = calloc((size_t)W, sizeof(int)), *blocked = calloc((size_t)W, sizeof(int));
    int *ranks = malloc((size_t)W * sizeof(int));
    int rc = ins && done && blocked && ranks ? HET_OK
             : het_error_set(HET_ENOMEM, "inhad: out of memory"), total = 0, changed = 1;
    a->done_base = ctx->step;
    a->n_done = 0;
    memset(a->counted, 0, (size_t)W * sizeof(int32_t));
    memset(a->incl, 0, (size_t)W * sizeof(int64_t));
    memset(a->sent_incl, 0, (size_t)W * sizeof(int64_t));
    a->push_due = 0;
    double t0 = het_lane_now(&ctx->lane);
    float lr = 0.0f;
    while (!rc) {
        if ((rc = hear_from(a, ctx, ins, done, blocked, ranks, &changed))) break;
        het_msg m = {0};
        in_msg in;
        if (push_needed(a, ins, done) && (rc = flush_push(a, ctx))) break;
        het_stall_where("server: waiting for iteration numbers", epoch + 1, (long long)ctx->step);
        int arrived = 1; /* the arbiter may say first that nothing comes by the push's time */
        if ((rc = het_ps_recv_by(ctx, HET_ANY_SOURCE, HET_TAG_COUNT, &in, sizeof in, &m, -1.0,
                                 a->push_due ? a->push_t : INFINITY, &arrived)))
            break;
        /* an IN that arrived while the update ran is answered first (the push can wait for
         * a pull it triggers); a later one, or none, sends the push at the update's end */
        if (a->push_due && (!arrived || m.done || m.deliver >= a->push_t) &&
            (rc = flush_push(a, ctx)))
            break;
        if (!arrived && (rc = het_comm_msg_wait_untimed(ctx->comm, &m))) break;
        het_comm_clock_wait(ctx->comm, m.deliver);
        if (m.done) { /* every worker heard from is done */
            int waiting = 0;
            for (int w = 0; w < W; w++) {
                if (!blocked[w]) done[w] = 1;
                waiting |= blocked[w] && !done[w];
            }
            changed = 1;
            if (!waiting) break;
            if (total > 0 && ((rc = server_update(a, ctx, epoch, spe)) || /* frees them */
                              (rc = het_ps_eval_due(ps, ctx, next, n)))) /* --eval-every */
                break;
            total = 0;
            continue;
        }
        int w = ps->index_of[m.src];
        a->counted[w]++;
        ins[w]++;
        ps->run_steps[w] += 1;
        ps->run.bytes_in += (double)m.bytes;
        if (++total >= a->T) {
            if ((rc = server_update(a, ctx, epoch, spe))) break;
            if ((rc = het_ps_eval_due(ps, ctx, next, n))) break; /* --eval-every */
            total = 0;
            lr = (float)ps->run.lr;
        }
        ctrl_msg r = {K_REPLY, 0, ctx->step, -1, avail_at(a, m.stamp), 0, lr};
        if (!ps->run.nonfinite) het_ps_next_batch(ctx, &next, &r.pos, &r.len);
        ps->run.bytes_out += (double)sizeof r;
        rc = het_ps_out_send(ctx, &a->out, ps->worker_rank[w], HET_TAG_CTRL, &r, sizeof r,
                             NULL, 0, -1.0);
        if (rc) break;
    }
    free(ins);
    free(done);
    free(blocked);
    free(ranks);
    if (!rc && total > 0) rc = server_update(a, ctx, epoch, spe); /* the epoch's rest */
    if (!rc) rc = flush_push(a, ctx);
    ctrl_msg end = {K_END, 0, ctx->step, -1, -1, 0, 0.0f};
    for (int k = 0; k < K && !rc; k++) rc = to_node(a, ctx, k, &end, NULL, 0);
    int wrc = rc ? HET_OK : het_ps_out_reap(ctx, &a->out, 1); /* a failure ends the job */
    if (!rc) rc = wrc;
    ps->run.server_s = het_lane_now(&ctx->lane) - t0;
    if (!rc && next < n && !ps->run.nonfinite)
        rc = het_error_set(HET_EINVAL, "inhad: the epoch ended with %lld samples not handed "
                           "out (a strategy bug)", (long long)(n - next));
    return rc;
}


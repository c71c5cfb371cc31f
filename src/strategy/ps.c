/* The parameter-server strategies' shared machinery: roles, the update of a shard's slice,
 * the drain point and the report (ps.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain/optim.h"
#include "strategy/ps.h"

void het_ps_free(het_ps *ps) {
    free(ps->shard_rank);
    free(ps->worker_rank);
    free(ps->index_of);
    free(ps->lo);
    free(ps->len);
    free(ps->steps);
    free(ps->run_steps);
    free(ps->evals);
    memset(ps, 0, sizeof *ps);
}

/* "0-3" or "0,2,5" of the ranks r[0..n) (ascending). */
static void rank_list(const int *r, int n, char *buf, size_t cap) {
    int contiguous = 1;
    for (int i = 1; i < n; i++) contiguous &= r[i] == r[i - 1] + 1;
    buf[0] = '\0';
    if (contiguous && n > 2) {
        snprintf(buf, cap, "%d-%d", r[0], r[n - 1]);
        return;
    }
    for (int i = 0; i < n && strlen(buf) + 12 < cap; i++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%d", i ? "," : "", r[i]);
}

/* Rank 0 prints where the servers and workers are. */
static int print_plan(het_ps *ps, het_strategy_ctx *ctx) {
    const int *node = het_comm_world_nodes(ctx->comm);
    if (ctx->rank == 0) {
        char s[256], w[256] = "";
        rank_list(ps->worker_rank, ps->n_workers, w, sizeof w);
        int shared = 0;
        for (int k = 0; k < ps->n_shards; k++)
            for (int i = 0; i < ps->n_workers; i++)
                shared |= node[ps->shard_rank[k]] == node[ps->worker_rank[i]];
        s[0] = '\0';
        for (int k = 0; k < ps->n_shards; k++)
            snprintf(s + strlen(s), sizeof s - strlen(s), "%s%d (node %d, %zu params)",
                     k ? ", " : "", ps->shard_rank[k], node[ps->shard_rank[k]], ps->len[k]);
        het_log(HET_LOG_INFO, "%s: server%s on rank %s%s; %d worker%s on ranks %s, each "
                "taking batches of --batch samples\n", ps->name, ps->n_shards > 1 ? "s" : "", s,
                shared ? ", sharing a node with workers" : "", ps->n_workers,
                ps->n_workers == 1 ? "" : "s", w);
    }
    return HET_OK;
}

int het_ps_init(het_ps *ps, het_strategy_ctx *ctx, const char *name) {
    const het_train_config *c = ctx->cfg;
    memset(ps, 0, sizeof *ps);
    ps->name = name;
    int P = ctx->size, K = (int)het_strategy_opt_value(c, "ps-shards");
    int top = (int)het_strategy_opt_value(c, "ps-rank");
    if (top < 0) top = P - 1;
    if (!ctx->comm || P < 2)
        return het_error_set(HET_EINVAL, "strategy %s: %d rank; it needs a parameter server "
                             "and at least one worker (mpirun -n 2 or more)", name, P);
    if (top >= P)
        return het_error_set(HET_EINVAL, "ps-rank: %d, but the run has %d ranks (0..%d)", top,
                             P, P - 1);
    if (K > top + 1 || K > P - 1)
        return het_error_set(HET_EINVAL, "ps-shards: %d servers on ranks %d down to %d, but "
                             "ranks go down to 0 and at least one worker must remain", K, top,
                             top - K + 1);
    if (c->eval_every > 0 && K > 1)
        return het_error_set(HET_EINVAL, "--eval-every %d: %s evaluates inside an epoch on one "
                             "server only (--ps-shards %d: each holds a slice of the model)",
                             c->eval_every, name, K);
    if (c->eval_every > 0 && het_model_n_state(ctx->model) > 0)
        return het_error_set(HET_EINVAL, "--eval-every %d: %s cannot evaluate inside an epoch "
                             "a model with batch-norm statistics (%s: the workers hold them; "
                             "the server has them at epoch ends only)", c->eval_every, name,
                             c->model);
    ps->n_shards = K;
    ps->n_workers = P - K;
    ps->n = het_model_n_params(ctx->model);
    ps->opt_blocks = het_optim_state_floats(&c->optim, ps->n) / (ps->n ? ps->n : 1);
    ps->max_staleness = (int)het_strategy_opt_value(c, "max-staleness");
    ps->staleness_lr = (int)het_strategy_opt_value(c, "staleness-lr");
    ps->shard_rank = malloc((size_t)K * sizeof(int));
    ps->lo = malloc((size_t)K * sizeof(size_t));
    ps->len = malloc((size_t)K * sizeof(size_t));
    ps->worker_rank = malloc((size_t)ps->n_workers * sizeof(int));
    ps->index_of = malloc((size_t)P * sizeof(int));
    ps->steps = calloc((size_t)ps->n_workers, sizeof(double));
    ps->run_steps = calloc((size_t)ps->n_workers, sizeof(double));
    if (!ps->shard_rank || !ps->lo || !ps->len || !ps->worker_rank || !ps->index_of ||
        !ps->steps || !ps->run_steps)
        return het_error_set(HET_ENOMEM, "%s: out of memory for the roles", name);
    ps->shard = ps->worker = -1;
    for (int k = 0; k < K; k++) {
        int64_t lo, len;
        het_partition_even((int64_t)ps->n, K, k, &lo, &len);
        ps->shard_rank[k] = top - k;
        ps->lo[k] = (size_t)lo;
        ps->len[k] = (size_t)len;
        if (top - k == ctx->rank) ps->shard = k;
    }
    for (int r = 0, w = 0; r < P; r++) {
        ps->index_of[r] = r > top || r <= top - K ? w : -1;
        if (ps->index_of[r] < 0) continue;
        if (r == ctx->rank) ps->worker = w;
        ps->worker_rank[w++] = r;
    }
    int rc = ps->shard < 0 ? HET_OK /* a shard hears gradients from every worker */
             : het_comm_p2p_senders(ctx->comm, HET_COMM_WORLD, HET_TAG_GRADS, ps->worker_rank,
                                    ps->n_workers);
    return rc ? rc : print_plan(ps, ctx);
}

size_t het_ps_msg_bytes(const het_ps *ps, int k, size_t hdr) {
    return hdr + ps->len[k] * sizeof(float);
}

void het_ps_fail(het_strategy_ctx *ctx, int status) {
    if (status == HET_OK) return;
    fprintf(stderr, "hetrain: rank %d: %s: %s; ending the job\n", ctx->rank, ctx->cfg->strategy,
            het_error_msg());
    fflush(stderr);
    het_interrupt_leaving(1); /* ends on its own: the others' peer watch names it not */
    MPI_Abort(ctx->world, 1);
}

void het_ps_next_batch(const het_strategy_ctx *ctx, int64_t *next, int64_t *pos, int32_t *len) {
    const int64_t n = ctx->n_train, B = ctx->cfg->batch;
    if (*next >= n) {
        *pos = -1;
        *len = 0;
        return;
    }
    *pos = *next;
    *len = (int32_t)(n - *next < B ? n - *next : B);
    *next += B;
}

int het_ps_update(het_ps *ps, het_strategy_ctx *ctx, const float *g, float lr, int64_t v) {
    int k = ps->shard;
    float *p = het_model_params(ctx->model), *grads = het_model_grads(ctx->model);
    memcpy(grads + ps->lo[k], g, ps->len[k] * sizeof(float));
    double t0 = het_step_region_begin(ctx);
    int ok = het_optim_step_range(&ctx->cfg->optim, lr, p, grads, ctx->opt_state, ps->n, v + 1,
                                  ps->lo[k], ps->lo[k] + ps->len[k]);
    het_pace_piece(&ctx->pace, HET_PIECE_OPT, 0, 0);
    ctx->pace.piece_share = ps->n ? (double)ps->len[k] / (double)ps->n : 1.0;
    het_step_region_end(ctx, "server update", (int)v, t0);
    het_step_check_fail(ctx); /* a server is lost as a worker is */
    return ok;
}

static int hand_evals(het_ps *ps, het_strategy_ctx *ctx);

int het_ps_drain(het_ps *ps, het_strategy_ctx *ctx, het_epoch_sums *sums,
                 het_epoch_stats *st) {
    int pend = het_comm_p2p_pending(ctx->comm);
    int rc = pend < 0 ? pend : pend > 0 ? het_error_set(HET_EINVAL, "%s: %d message%s left "
                                                        "unreceived at the epoch's end (a "
                                                        "strategy bug)", ps->name, pend,
                                                        pend == 1 ? "" : "s") : HET_OK;
    if ((rc = het_comm_agree(ctx->world, rc))) return rc;
    /* the figures: each owner contributes, the others add zeros */
    int W = ps->n_workers;
    double *v = calloc((size_t)(HET_PS_NFIG + 1 + W), sizeof(double));
    if (!v) return het_error_set(HET_ENOMEM, "%s: out of memory for the figures", ps->name);
    if (ps->shard == 0) {
        memcpy(v, &ps->run, sizeof ps->run);
        v[HET_PS_NFIG] = (double)ctx->step;
        memcpy(v + HET_PS_NFIG + 1, ps->run_steps, (size_t)W * sizeof(double));
    } else if (ps->shard > 0) {
        v[3] = ps->run.bytes_in;
        v[4] = ps->run.bytes_out;
        v[7] = ps->run.nonfinite;
    }
    rc = het_step_sum_f64(ctx, v, (size_t)(HET_PS_NFIG + 1 + W));
    if (!rc) {
        memcpy(&ps->fig, v, sizeof ps->fig);
        ctx->step = (int64_t)v[HET_PS_NFIG];
        memcpy(ps->steps, v + HET_PS_NFIG + 1, (size_t)W * sizeof(double));
    }
    free(v);
    if (rc) return rc;
    memset(&ps->run, 0, sizeof ps->run);
    memset(ps->run_steps, 0, (size_t)W * sizeof(double));
    if (ps->fig.nonfinite > 0)
        return het_error_set(HET_EINVAL, "training diverged: a non-finite gradient or weight on "
                             "the parameter server by update %lld; the last checkpoint is kept "
                             "(try a lower --lr)", (long long)ctx->step);
    /* the server's model on every rank */
    float *p = het_model_params(ctx->model);
    for (int k = 0; k < ps->n_shards && !rc; k++) {
        rc = het_comm_bcast(ctx->comm, HET_COMM_WORLD, p + ps->lo[k], ps->len[k] * sizeof(float),
                            ps->shard_rank[k]);
        for (size_t b = 0; b < ps->opt_blocks && !rc; b++)
            rc = het_comm_bcast(ctx->comm, HET_COMM_WORLD, ctx->opt_state + b * ps->n + ps->lo[k],
                                ps->len[k] * sizeof(float), ps->shard_rank[k]);
    }
    size_t ns = het_model_n_state(ctx->model);
    if (!rc && ns) { /* batch-norm statistics: the workers' mean (servers add zeros) */
        if (ps->worker < 0) memset(het_model_state(ctx->model), 0, ns * sizeof(float));
        rc = het_step_average_state(ctx, 1.0 / W);
    }
    if (!rc) rc = hand_evals(ps, ctx);
    if (!rc) rc = het_step_epoch_figures(ctx, sums, (float)ps->fig.lr, st);
    if (!rc) st->skipped = (int64_t)ps->fig.skipped;
    return rc;
}

het_model *het_ps_model_for_eval(het_strategy_ctx *ctx) { return ctx->model; }

int het_ps_eval_due(het_ps *ps, het_strategy_ctx *ctx, int64_t next, int64_t n) {
    if (!ctx->eval_here || !het_step_eval_take(ctx, next, n)) return HET_OK;
    if (ps->n_evals == ps->cap_evals) {
        int cap = ps->cap_evals ? 2 * ps->cap_evals : 16;
        het_eval_rec *e = realloc(ps->evals, (size_t)cap * sizeof *e);
        if (!e) return het_error_set(HET_ENOMEM, "%s: out of memory for the evaluations", ps->name);
        ps->evals = e, ps->cap_evals = cap;
    }
    ctx->epoch_pos = next;
    int st = ctx->eval_here(ctx, ctx->eval_user, &ps->evals[ps->n_evals]);
    ctx->epoch_pos = 0;
    if (!st) ps->n_evals++;
    return st;
}

/* The drain point's part of --eval-every: the primary's records to every rank, each put
 * (logged, written) in order; charged to no clock. */
static int hand_evals(het_ps *ps, het_strategy_ctx *ctx) {
    if (ctx->cfg->eval_every <= 0 || !ctx->eval_put) return HET_OK;
    het_step_aside aside;
    het_step_aside_begin(ctx, &aside);
    int64_t count = ps->n_evals;
    int st = het_comm_bcast(ctx->comm, HET_COMM_WORLD, &count, sizeof count, ps->shard_rank[0]);
    if (!st && count > ps->cap_evals) {
        het_eval_rec *e = realloc(ps->evals, (size_t)count * sizeof *e);
        st = e ? HET_OK : het_error_set(HET_ENOMEM, "%s: out of memory for the evaluations",
                                        ps->name);
        if (e) ps->evals = e, ps->cap_evals = (int)count;
    }
    if ((st = het_comm_agree(ctx->world, st))) return st;
    if (count > 0)
        st = het_comm_bcast(ctx->comm, HET_COMM_WORLD, ps->evals,
                            (size_t)count * sizeof *ps->evals, ps->shard_rank[0]);
    het_step_aside_end(ctx, &aside);
    for (int64_t i = 0; i < count && !st; i++) st = ctx->eval_put(ctx, ctx->eval_user, &ps->evals[i]);
    ps->n_evals = 0;
    return het_comm_agree(ctx->world, st);
}

int het_ps_save_state(het_strategy_ctx *ctx, het_ckpt_writer *w) {
    (void)ctx;
    (void)w;
    return HET_OK;
}

int het_ps_load_state(het_strategy_ctx *ctx, het_ckpt_reader *r) {
    (void)r; /* nothing beyond the trainer's sections: a checkpoint is a drain point */
    const het_ps *ps = ctx->priv;
    if (ctx->ckpt_size && ps) {
        char where[96];
        int k = 0;
        for (int i = 0; i < ps->n_shards && k >= 0 && (size_t)k < sizeof where; i++)
            k += snprintf(where + k, sizeof where - (size_t)k, "%s%d", i ? "," : "",
                          ps->shard_rank[i]);
        het_step_resized(ctx, "parameter server: roles re-dealt over %d ranks (%d server "
                         "shard%s on rank %s, %d workers; %d before); 0 in-flight gradients "
                         "dropped (a checkpoint is the epoch's drain point)", ctx->size,
                         ps->n_shards, ps->n_shards == 1 ? "" : "s", where, ps->n_workers,
                         ctx->ckpt_size);
    }
    return HET_OK;
}

void het_ps_report_op(het_strategy_ctx *ctx, char *line, size_t n_line, char *json,
                      size_t n_json) {
    het_ps_report((const het_ps *)ctx->priv, line, n_line, json, n_json);
}

void het_ps_report(const het_ps *ps, char *line, size_t n_line, char *json, size_t n_json) {
    const het_ps_figures *f = &ps->fig;
    double ups = f->server_s > 0 ? f->updates / f->server_s : 0.0;
    double mean = f->updates > 0 ? f->stale_sum / f->updates : 0.0;
    double gpu = f->updates > 0 ? f->grads / f->updates : 0.0;
    double lrs = f->updates > 0 ? f->lr_scale_sum / f->updates : 0.0;
    double lo = ps->n_workers ? ps->steps[0] : 0, hi = lo;
    for (int i = 1; i < ps->n_workers; i++) {
        lo = fmin(lo, ps->steps[i]);
        hi = fmax(hi, ps->steps[i]);
    }
    snprintf(line, n_line, " | server %.0f updates (%.1f/s), staleness mean %.2f max %.0f, "
             "in %.1f MB out %.1f MB, batches per worker %.0f..%.0f", f->updates, ups, mean,
             f->stale_max, f->bytes_in / 1e6, f->bytes_out / 1e6, lo, hi);
    int n = snprintf(json, n_json, "\"ps\":{\"updates\":%.0f,\"updates_per_s\":%.6g,"
                     "\"staleness_mean\":%.6g,\"staleness_max\":%.0f,\"server_bytes_in\":%.0f,"
                     "\"server_bytes_out\":%.0f,\"grads_per_update\":%.6g,\"lr_scale_mean\":"
                     "%.6g,\"worker_steps\":[", f->updates, ups, mean, f->stale_max, f->bytes_in,
                     f->bytes_out, gpu, lrs);
    for (int i = 0; i < ps->n_workers && n > 0 && (size_t)n < n_json; i++)
        n += snprintf(json + n, n_json - (size_t)n, "%s%.0f", i ? "," : "", ps->steps[i]);
    if (n > 0 && (size_t)n < n_json) snprintf(json + n, n_json - (size_t)n, "]}");
}

/* ---------------------------------------------------------------- the outbox (ps.h)
 * Sends whose buffers are copies, kept until MPI is done with them: a rank never waits for a
 * receiver to take a message (a large message waits for its receive: the aggregator takes
 * gradients only when the server pulls them, a worker takes weights only when it needs
 * them), so no send can close a cycle of waits. Completed sends are reaped without waiting. */

int het_ps_out_reap(het_strategy_ctx *ctx, het_ps_out **box, int wait) {
    int rc = HET_OK;
    for (het_ps_out **q = box; *q;) {
        int done = 1;
        int st = wait ? het_comm_msg_wait(ctx->comm, &(*q)->m)
                      : het_comm_msg_test(ctx->comm, &(*q)->m, &done);
        if (!rc) rc = st;
        if (!done && !st) {
            q = &(*q)->next;
            continue;
        }
        het_ps_out *o = *q;
        *q = o->next;
        free(o);
    }
    return rc;
}

/* Sends hdr (h bytes) + body (b bytes) to world rank dest with tag, at stamp (< 0: now). */
int het_ps_out_send(het_strategy_ctx *ctx, het_ps_out **box, int dest, int tag, const void *hdr,
                    size_t h, const void *body, size_t b, double stamp) {
    int rc = het_ps_out_reap(ctx, box, 0);
    het_ps_out *o = malloc(sizeof *o + h + b);
    if (!o) return het_error_set(HET_ENOMEM, "out of memory for a message of %zu bytes",
                                 h + b);
    memset(&o->m, 0, sizeof o->m);
    memcpy(o->buf, hdr, h);
    if (b) memcpy(o->buf + h, body, b);
    int st = stamp >= 0.0 ? het_comm_isend_at(ctx->comm, HET_COMM_WORLD, dest, tag, o->buf,
                                              h + b, stamp, &o->m)
                          : het_comm_isend(ctx->comm, HET_COMM_WORLD, dest, tag, o->buf, h + b,
                                           &o->m);
    o->next = *box;
    *box = o;
    return rc ? rc : st;
}

/* Node of every world rank, and the aggregators. */

int het_ps_recv(het_strategy_ctx *ctx, int src, int tag, void *buf, size_t cap, het_msg *m,
                double posted) {
    int arrived = 1;
    return het_ps_recv_by(ctx, src, tag, buf, cap, m, posted, INFINITY, &arrived);
}

int het_ps_recv_by(het_strategy_ctx *ctx, int src, int tag, void *buf, size_t cap, het_msg *m,
                   double posted, double limit, int *arrived) {
    *arrived = 1;
    int rc = het_comm_irecv_at(ctx->comm, HET_COMM_WORLD, src, tag, buf, cap, posted, m);
    return rc ? rc : het_comm_msg_wait_untimed_by(ctx->comm, m, limit, arrived);
}


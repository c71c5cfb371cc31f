/* inhad: iteration-number-based hierarchical gradient aggregation (D. Xiao, X. Li, J. Zhou,
 * Y. Du, W. Wu, J. Supercomputing 78 (2022) 5565-5587), an asynchronous parameter server
 * whose workers aggregate gradients inside their node and report only iteration numbers (INs)
 * to the server, which decides when to pull. The paper's full text is not public: this is the
 * reconstruction of METHODS.md section 2 (modules Postman, Aggregator, Scheduler; secondary
 * aggregation by n-softsync); each choice below that the abstract does not fix is a flag.
 *
 * ROLES (ps.h): one server (Scheduler) on --ps-rank, by default the last rank; per node an
 * Aggregator, the node's lowest worker rank; workers are every other rank. --batch is each
 * worker's batch.
 * WORKER, per batch: take the node's newest weights; compute the mean gradient of its batch;
 * hand it to the node's aggregator (a message on the node's link; the aggregator's own stays in
 * memory); send the server an IN message (a few bytes: version, samples). It never waits
 * for the server unless more than --max-staleness N of its gradients are not yet in the
 * weights it holds (then it waits for the weights that bring it within N: every push says how
 * many of each worker's gradients it holds). N = 0 is synchronous training with T = workers:
 * every update holds one gradient of every worker, staleness 0. The default N = 1 lets a
 * worker compute one batch while its last gradient travels: every gradient is one update
 * old (README gives the measured accuracy and time of bounds 0, 1, 2 and 4 from
 * bench/bench_ps.sh: 1 is the best trade).
 * SERVER: counts INs; at the threshold T (--inhad-threshold, default workers / --soft-sync n,
 * n-softsync's rule) it pulls every node's aggregate (the gradients whose INs it counted:
 * the sample-weighted mean of the node's gradients and their samples), averages them by samples,
 * scales the learning rate by 1 / the mean staleness of what it pulled (n-softsync's alpha /
 * <sigma>, with --staleness-lr on, the default; staleness = server version - the version a
 * gradient was computed on, counted as 1 when below), updates with the configured optimizer,
 * bumps the version and pushes the weights to each aggregator, which hands them to its workers.
 * At the epoch's end the gradients counted since the last update make one more update.
 * The push waits for the INs that reached the server while its update ran: a pull they
 * trigger goes first (a few bytes that would otherwise queue behind the weights on the
 * link to the aggregator), then the push, both at the update's end. Unless a worker waits
 * for the push (its bound), an IN that arrives later, or none, sends it at once.
 *
 * Our choices beyond the paper: batches are claimed dynamically, the next one coming back with
 * the server's answer to an IN (every sample once per epoch; fast workers do more); messages
 * are MPI point-to-point (comm/p2p.c) with tags per kind, not one-sided counters.
 *
 * TIME. The aggregator is a thread of its rank in the paper's design; here it is the rank's
 * main loop between its own batches, and its messages carry the time its thread would have
 * sent them (het_comm_isend_at: the later of the pull's and the gradients' arrival, without
 * waiting for its own batch). What a worker would see locally on a cluster (which weights have
 * reached its node by its clock) is decided from the server's answer to its IN: the newest
 * update finished by the IN's send time; the worker then takes the newest of those whose
 * weights have arrived by its clock. So on the virtual clock every decision is the emulated
 * cluster's, and a run with calibrated costs is the same bit for bit on any host (the ranks
 * wait for each other in wall time, not in virtual time). On the wall clock the same rules run
 * on real time: the server answers in arrival order, and a worker waits for the answer to its
 * IN (a round trip per batch) and an aggregator serves pulls only between its batches, so
 * wall-clock figures of inhad include those artifacts; virtual time is its reference.
 * --inhad-aggregator loop puts the same artifacts on the virtual clock (a.loop): every message
 * the rank receives moves its clock to the message's arrival (it was blocked on it, the
 * worker on its IN's answer among them), and the aggregator's messages leave at the rank's
 * clock: what a plain MPI program of one thread a rank takes, and what SMPI simulates (its
 * ranks cannot run a second thread), so that bench/validate_smpi.sh compares one protocol.
 * Invariant (tests/test_ps.sh): one worker, T = 1, --max-staleness 0 is plain SGD bit for
 * bit. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/inhad.h"

static int make_nodes(inhad *a, het_strategy_ctx *ctx) {
    het_ps *ps = &a->ps;
    const int *node = het_comm_world_nodes(ctx->comm);
    a->agg_of = malloc((size_t)ps->n_workers * sizeof(int));
    a->agg_rank = malloc((size_t)ps->n_workers * sizeof(int));
    a->local = malloc((size_t)ps->n_workers * sizeof(int));
    if (!a->agg_of || !a->agg_rank || !a->local)
        return het_error_set(HET_ENOMEM, "inhad: out of memory");
    for (int w = 0; w < ps->n_workers; w++) { /* the lowest worker of its node */
        int r = ps->worker_rank[w], lo = r;
        for (int u = 0; u < ps->n_workers; u++)
            if (node[ps->worker_rank[u]] == node[r] && ps->worker_rank[u] < lo)
                lo = ps->worker_rank[u];
        a->agg_of[w] = lo;
        if (lo == r) a->agg_rank[a->n_nodes++] = r;
    }
    for (int w = 0; ps->worker >= 0 && w < ps->n_workers; w++)
        if (a->agg_of[w] == ctx->rank) a->local[a->n_local++] = w;
    return HET_OK;
}

static int inhad_init(het_strategy_ctx *ctx) {
    inhad *a = calloc(1, sizeof *a);
    if (!a) return het_error_set(HET_ENOMEM, "inhad: out of memory");
    ctx->priv = a;
    het_ps *ps = &a->ps;
    int rc = het_ps_init(ps, ctx, "inhad");
    if (rc) return rc;
    if (ps->n_shards > 1)
        return het_error_set(HET_EINVAL, "ps-shards: %d; inhad runs one server (its pulls of "
                             "whole node aggregates are not split by shard)", ps->n_shards);
    if ((rc = make_nodes(a, ctx))) return rc;
    if (ps->shard == 0 && (rc = het_comm_p2p_senders(ctx->comm, HET_COMM_WORLD, HET_TAG_COUNT,
                                                     ps->worker_rank, ps->n_workers)))
        return rc;
    int W = ps->n_workers, n = (int)het_strategy_opt_value(ctx->cfg, "soft-sync");
    a->T = (int)het_strategy_opt_value(ctx->cfg, "inhad-threshold");
    a->loop = het_clock_virtual() && het_strategy_opt_value(ctx->cfg, "inhad-aggregator") == 1;
    if (het_comm_arbiter(ctx->comm) && !a->loop)
        return het_error_set(HET_EINVAL, "p2p-model: arbiter carries one lane per rank; inhad's "
                             "aggregator thread sends at its own times (not yet): add "
                             "--inhad-aggregator loop");
    if (a->T <= 0) a->T = W / n > 0 ? W / n : 1;
    a->cbytes = sizeof(ctrl_msg) + nbytes(a) + (size_t)W * sizeof(int64_t);
    if (ps->max_staleness >= 0 && (int64_t)a->T > (int64_t)W * (ps->max_staleness + 1))
        return het_error_set(HET_EINVAL, "inhad-threshold: %d iteration numbers per update, but "
                             "%d workers with at most %d gradient%s each outside the weights "
                             "they hold can send only %lld: it would wait forever", a->T, W,
                             ps->max_staleness + 1, ps->max_staleness ? "s" : "",
                             (long long)W * (ps->max_staleness + 1));
    a->cbuf = het_alloc(a->cbytes);
    a->big = het_alloc(sizeof(agg_hdr) + nbytes(a) + (size_t)W * sizeof(int64_t));
    a->acc = het_alloc(nbytes(a) ? nbytes(a) : 4);
    a->gbuf = het_alloc(sizeof(grad_hdr) + nbytes(a));
    a->abuf = calloc((size_t)a->n_nodes, sizeof *a->abuf);
    a->counted = calloc((size_t)W, sizeof(int32_t));
    a->incl = calloc((size_t)W, sizeof(int64_t));
    a->sent_incl = calloc((size_t)W, sizeof(int64_t));
    int bad = !a->cbuf || !a->big || !a->acc || !a->gbuf || !a->abuf || !a->counted || !a->incl ||
              !a->sent_incl;
    for (int k = 0; !bad && ps->shard == 0 && k < a->n_nodes; k++)
        bad = !(a->abuf[k] = het_alloc(sizeof(agg_hdr) + nbytes(a)));
    if (bad) return het_error_set(HET_ENOMEM, "inhad: out of memory for the message buffers");
    if (ctx->rank == 0)
        het_log(HET_LOG_INFO, "inhad: %d node aggregator%s (the lowest worker of each node%s); "
                "an update every %d iteration numbers; max staleness %d, lr %s by staleness\n",
                a->n_nodes, a->n_nodes == 1 ? "" : "s",
                a->loop ? ", in its rank's loop: --inhad-aggregator loop" : "", a->T,
                ps->max_staleness, ps->staleness_lr ? "divided" : "not scaled");
    return HET_OK;
}

/* ---------------------------------------------------------------- helpers */

/* Keeps weights w of `version` arriving at `deliver` (copied), with this worker's count of
 * gradients in them (the push's per-worker counts follow the weights). */
static int keep(inhad *a, int64_t version, double deliver, const float *w) {
    int64_t incl;
    memcpy(&incl, (const unsigned char *)w + nbytes(a) + (size_t)a->ps.worker * sizeof incl,
           sizeof incl);
    pending *p = malloc(sizeof *p), **q = &a->pend;
    if (!p || !(p->w = malloc(nbytes(a) ? nbytes(a) : 4))) {
        free(p);
        return het_error_set(HET_ENOMEM, "inhad: out of memory keeping weights");
    }
    memcpy(p->w, w, nbytes(a));
    p->version = version, p->deliver = deliver, p->incl = incl, p->next = NULL;
    while (*q) q = &(*q)->next;
    *q = p;
    a->got = version;
    a->got_incl = incl;
    return HET_OK;
}

/* Takes the newest kept weights of version <= upto that have arrived by the clock (all of
 * version <= exact when exact >= 0: that one, arrived or not), dropping older ones. */
static void adopt(inhad *a, het_strategy_ctx *ctx, int64_t upto, int64_t exact) {
    pending *best = NULL;
    double now = het_lane_now(&ctx->lane);
    for (pending *p = a->pend; p; p = p->next)
        if (exact >= 0 ? p->version == exact : p->version <= upto && p->deliver <= now) best = p;
    if (!best) return;
    memcpy(het_model_params(ctx->model), best->w, nbytes(a));
    ctx->step = best->version;
    a->held_incl = best->incl;
    const int64_t v = best->version; /* best is freed below */
    while (a->pend && a->pend->version <= v) {
        pending *p = a->pend;
        a->pend = p->next;
        free(p->w);
        free(p);
    }
}

static void drop_all(inhad *a) {
    while (a->pend) {
        pending *p = a->pend;
        a->pend = p->next;
        free(p->w);
        free(p);
    }
    while (a->mine) {
        own *o = a->mine;
        a->mine = o->next;
        free(o->g);
        free(o);
    }
    a->mine_tail = &a->mine;
}

/* ---------------------------------------------------------------- the aggregator */

/* The lane the aggregator's time is on: its thread's, or with --inhad-aggregator loop the
 * rank's main lane (it runs between the rank's batches). */
static het_lane *agg_lane(inhad *a, het_strategy_ctx *ctx) {
    return a->loop ? &ctx->lane : &a->agg;
}

/* A pull: the counted gradients of the node's workers, their sample-weighted mean to the
 * server at the thread's time. */
static int serve_pull(inhad *a, het_strategy_ctx *ctx, const ctrl_msg *c, const int32_t *cnt,
                      double at) {
    het_ps *ps = &a->ps;
    size_t n = ps->n;
    het_lane *L = agg_lane(a, ctx);
    if (!a->loop) het_lane_advance_to(L, at); /* the thread acts once the pull has arrived */
    double t = het_lane_now(L);
    agg_hdr h = {0, 0, 0, 0};
    int rc = HET_OK;
    float *sum = (float *)(a->big + sizeof h);
    for (int i = 0; i < a->n_local && !rc; i++) h.grads += cnt[a->local[i]];
    int first = 1;
    double total = 0;
    int64_t left = h.grads;
    /* the mean weighted by samples: acc = sum c_i x_i, then / C; a single gradient is passed
     * as it is (c / C x is not always x in floats: one worker must give plain SGD's bits) */
    for (int i = 0; i < a->n_local && !rc; i++) {
        int w = a->local[i];
        for (int k = 0; k < cnt[w] && !rc; k++, left--) {
            const float *g;
            int64_t version, count;
            if (ps->worker_rank[w] == ctx->rank) { /* its own */
                own *o = a->mine;
                if (!o) return het_error_set(HET_EINVAL, "inhad: pulled a gradient the "
                                             "aggregator does not have (a strategy bug)");
                a->mine = o->next;
                if (!a->mine) a->mine_tail = &a->mine;
                memcpy(a->gbuf + sizeof(grad_hdr), o->g, n * sizeof(float));
                version = o->version, count = o->count;
                free(o->g);
                free(o);
            } else {
                het_msg m = {0};
                rc = het_ps_recv(ctx, ps->worker_rank[w], HET_TAG_GRADS, a->gbuf,
                                 sizeof(grad_hdr) + n * sizeof(float), &m, t);
                if (rc) break;
                grad_hdr gh;
                memcpy(&gh, a->gbuf, sizeof gh);
                version = gh.version, count = gh.count;
                if (a->loop) het_comm_clock_wait(ctx->comm, m.deliver); /* the rank waited */
                else het_lane_advance_to(L, m.deliver);
                t = het_lane_now(L);
            }
            g = (const float *)(a->gbuf + sizeof(grad_hdr));
            double stale = (double)(c->version - version);
            h.stale_sum += stale;
            h.stale_max = fmax(h.stale_max, stale);
            h.count += count;
            if (first && left == 1) { /* one gradient: its mean as it is */
                memcpy(sum, g, n * sizeof(float));
            } else {
                float cf = (float)count;
                if (first) for (size_t j = 0; j < n; j++) a->acc[j] = cf * g[j];
                else for (size_t j = 0; j < n; j++) a->acc[j] += cf * g[j];
            }
            total += (double)count;
            first = 0;
        }
    }
    if (rc) return rc;
    if (h.grads > 1) {
        float inv = (float)(1.0 / total);
        for (size_t j = 0; j < n; j++) sum[j] = a->acc[j] * inv;
    }
    return het_ps_out_send(ctx, &a->out, ps->shard_rank[0], HET_TAG_GRADS, &h, sizeof h, sum,
                    h.count > 0 ? n * sizeof(float) : 0, a->loop ? -1.0 : t);
}

/* A push or the end: to the node's other workers at the thread's time (and kept). */
static int forward(inhad *a, het_strategy_ctx *ctx, const ctrl_msg *c, size_t bytes,
                   double at) {
    het_ps *ps = &a->ps;
    if (!a->loop) het_lane_advance_to(&a->agg, at);
    int rc = HET_OK;
    for (int i = 0; i < a->n_local && !rc; i++) {
        int w = a->local[i];
        if (ps->worker_rank[w] == ctx->rank) continue;
        rc = het_ps_out_send(ctx, &a->out, ps->worker_rank[w], HET_TAG_PARAMS, c, bytes, NULL, 0,
                      a->loop ? -1.0 : het_lane_now(&a->agg));
    }
    if (!rc && c->kind == K_PUSH)
        rc = keep(a, c->version, at, (const float *)((const unsigned char *)c + sizeof *c));
    return rc;
}

/* Messages from the server (an aggregator serves pulls and forwards pushes on the way), or
 * from the aggregator (another worker: pushes): with want and want_incl < 0, up to the answer
 * to its IN (*reply); else until weights of version >= want and with >= want_incl of its
 * gradients in them are kept, or the end (*end). */
static int next_ctrl(inhad *a, het_strategy_ctx *ctx, ctrl_msg *reply, int64_t want,
                     int64_t want_incl, int *end) {
    het_ps *ps = &a->ps;
    int agg = a->n_local > 0;
    for (;;) {
        if ((want >= 0 || want_incl >= 0) && a->got >= want && a->got_incl >= want_incl)
            return HET_OK;
        if (want < 0 && want_incl >= 0) want = 0; /* not the reply: weights */
        het_msg m = {0};
        int from = agg || want < 0 ? ps->shard_rank[0] : a->agg_of[ps->worker];
        int tag = agg || want < 0 ? HET_TAG_CTRL : HET_TAG_PARAMS;
        het_stall_where(agg ? "aggregator: waiting for the server" : "waiting for weights",
                        ctx->epoch + 1, (long long)ctx->step);
        int rc = het_ps_recv(ctx, from, tag, a->cbuf, a->cbytes, &m, -1.0);
        if (rc) return rc;
        if (a->loop) het_comm_clock_wait(ctx->comm, m.deliver); /* the rank was blocked on it */
        ctrl_msg c;
        memcpy(&c, a->cbuf, sizeof c);
        if (c.kind == K_REPLY) {
            *reply = c;
            if (want < 0) return HET_OK;
            continue;
        }
        if (c.kind == K_PULL) {
            rc = serve_pull(a, ctx, &c, (const int32_t *)(a->cbuf + sizeof c), m.deliver);
        } else if (agg) {
            rc = forward(a, ctx, (const ctrl_msg *)a->cbuf, m.bytes, m.deliver);
        } else if (c.kind == K_PUSH) {
            rc = keep(a, c.version, m.deliver, (const float *)(a->cbuf + sizeof c));
        }
        if (rc) return rc;
        if (c.kind == K_END) {
            *end = 1;
            return HET_OK;
        }
    }
}

/* ---------------------------------------------------------------- the worker */

static int worker_epoch(inhad *a, het_strategy_ctx *ctx, het_epoch_sums *sums) {
    het_ps *ps = &a->ps;
    const int64_t n = ctx->n_train, B = ctx->cfg->batch;
    const int agg = a->n_local > 0, srv = ps->shard_rank[0];
    int64_t pos = (int64_t)ps->worker * B, len = pos < n ? (n - pos < B ? n - pos : B) : 0;
    float *grads = het_model_grads(ctx->model), lr = 0.0f;
    int rc = HET_OK, end = 0;
    a->got = ctx->step;
    a->got_incl = a->iter = a->held_incl = 0;
    a->agg = (het_lane){het_lane_now(&ctx->lane), HET_TID_COMM};
    a->mine_tail = &a->mine;
    while (len > 0 && !rc) {
        double ts = het_lane_now(&ctx->lane);
        het_batch_result res;
        rc = het_step_grads(ctx, NULL, ctx->sampler->perm + pos, (int)len, 1.0f / (float)len,
                            het_step_seed(ctx, ctx->step), &res);
        if (rc) break;
        grad_hdr gh = {ctx->step, len};
        if (agg) { /* its own gradient waits in memory for the pull */
            own *o = malloc(sizeof *o);
            if (!o || !(o->g = malloc(nbytes(a) ? nbytes(a) : 4))) {
                free(o);
                rc = het_error_set(HET_ENOMEM, "inhad: out of memory keeping a gradient");
                break;
            }
            memcpy(o->g, grads, nbytes(a));
            o->version = gh.version, o->count = len, o->next = NULL;
            *a->mine_tail = o;
            a->mine_tail = &o->next;
        } else {
            rc = het_ps_out_send(ctx, &a->out, a->agg_of[ps->worker], HET_TAG_GRADS, &gh, sizeof gh,
                          grads, nbytes(a), -1.0);
        }
        in_msg in = {ctx->step, len};
        a->iter++;
        if (!rc)
            rc = het_ps_out_send(ctx, &a->out, srv, HET_TAG_COUNT, &in, sizeof in, NULL, 0,
                                 -1.0);
        ctrl_msg r = {0};
        if (!rc) rc = next_ctrl(a, ctx, &r, -1, -1, &end); /* the answer to the IN */
        if (rc) break;
        lr = r.lr;
        const het_step_rec rec = {.mine = &res, .count = len, .local = 1};
        if ((rc = het_step_record(ctx, sums, &rec, lr, ts))) break;
        /* every update finished by the IN's send time is here or on its way: take them */
        if ((rc = next_ctrl(a, ctx, &r, r.avail, -1, &end))) break;
        adopt(a, ctx, r.avail, -1);
        int64_t need = a->iter - ps->max_staleness;
        if (ps->max_staleness >= 0 && a->held_incl < need) { /* too many outside: wait */
            if ((rc = next_ctrl(a, ctx, &r, -1, need, &end))) break;
            pending *p = a->pend;
            while (p && p->incl < need) p = p->next;
            if (!p) {
                rc = het_error_set(HET_EINVAL, "inhad: no weights hold gradient %lld of worker "
                                   "%d (a strategy bug; newest kept v%lld incl %lld, held %lld, "
                                   "first kept %lld)", (long long)need, ps->worker,
                                   (long long)a->got, (long long)a->got_incl,
                                   (long long)a->held_incl,
                                   a->pend ? (long long)a->pend->incl : -1LL);
                break;
            }
            het_comm_clock_wait(ctx->comm, p->deliver);
            adopt(a, ctx, p->version, p->version);
        }
        pos = r.pos;
        len = r.pos >= 0 ? r.len : 0;
    }
    het_msg dm = {0};
    if (!rc) rc = het_comm_p2p_done(ctx->comm, HET_COMM_WORLD, srv, HET_TAG_COUNT, &dm);
    int drc = het_comm_msg_wait(ctx->comm, &dm);
    if (!rc) rc = drc;
    ctrl_msg r; /* an aggregator serves, a worker takes pushes, until the end */
    if (!rc && !end) rc = next_ctrl(a, ctx, &r, INT64_MAX, -1, &end);
    int wrc = rc ? HET_OK : het_ps_out_reap(ctx, &a->out, 1); /* a failure ends the job */
    drop_all(a);
    return rc ? rc : wrc;
}

/* ---------------------------------------------------------------- the table */

static int inhad_epoch(het_strategy_ctx *ctx, int epoch, het_epoch_stats *st) {
    inhad *a = ctx->priv;
    het_epoch_sums sums = {0, 0, 0, 0};
    het_sampler_set_epoch(ctx->sampler, epoch);
    int rc = a->ps.shard == 0 ? het_inhad_server_epoch(a, ctx, epoch) : worker_epoch(a, ctx, &sums);
    het_ps_fail(ctx, rc); /* the others wait for this rank's messages */
    if ((rc = het_comm_agree(ctx->world, rc))) return rc;
    return het_ps_drain(&a->ps, ctx, &sums, st);
}

static void inhad_free(het_strategy_ctx *ctx) {
    inhad *a = ctx->priv;
    if (!a) return;
    drop_all(a);
    for (het_ps_out *o = a->out, *nx; o; o = nx) nx = o->next, free(o); /* after a failure */
    for (int k = 0; a->abuf && k < a->n_nodes; k++) het_free(a->abuf[k]);
    free(a->abuf);
    het_free(a->cbuf);
    het_free(a->big);
    het_free(a->acc);
    het_free(a->gbuf);
    free(a->counted);
    free(a->incl);
    free(a->sent_incl);
    free(a->done_t);
    free(a->agg_of);
    free(a->agg_rank);
    free(a->local);
    het_ps_free(&a->ps);
    free(a);
    ctx->priv = NULL;
}

const het_strategy_ops het_strategy_inhad = {
    .name = "inhad",
    .summary = "asynchronous parameter server with node aggregation and iteration numbers "
               "(Xiao et al. 2022)",
    .init = inhad_init,
    .train_epoch = inhad_epoch,
    .model_for_eval = het_ps_model_for_eval,
    .save_state = het_ps_save_state,
    .load_state = het_ps_load_state,
    .free = inhad_free,
    .report = het_ps_report_op,
    .world_grads = 0,     /* no world gradient sum */
    .agreed_state = NULL,
    .opts = het_inhad_opts, /* ps_opts.c */
    .worker_batch = 1,    /* --batch is each worker's */
    .lanes = 0,           /* one compute thread */
    .pieces = 0,          /* whole epochs: gradients and weights are in flight inside one */
    .evals = 2,           /* --eval-every: the server evaluates its model (het_ps_eval_due) */
};


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
 * every update holds one gradient of every worker, staleness 0.
 * SERVER: counts INs; at the threshold T (--inhad-threshold, default workers / --soft-sync n,
 * n-softsync's rule) it pulls every node's aggregate (the gradients whose INs it counted:
 * the sample-weighted mean of the node's gradients and their samples), averages them by samples,
 * scales the learning rate by 1 / the mean staleness of what it pulled (n-softsync's alpha /
 * <sigma>, with --staleness-lr on, the default; staleness = server version - the version a
 * gradient was computed on, counted as 1 when below), updates with the configured optimizer,
 * bumps the version and pushes the weights to each aggregator, which hands them to its workers.
 * At the epoch's end the gradients counted since the last update make one more update.
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
 * Invariant (tests/test_ps.sh): one worker, T = 1, --max-staleness 0 is plain SGD bit for
 * bit. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/ps.h"

enum { K_REPLY = 1, K_PULL, K_PUSH, K_END }; /* kinds of the server's control messages */

typedef struct in_msg { /* worker -> server (HET_TAG_COUNT) */
    int64_t version;    /* of the weights the gradient was computed on */
    int64_t count;      /* its samples */
} in_msg;

typedef struct ctrl_msg { /* server -> aggregator / worker (HET_TAG_CTRL), aggregator -> worker
                           * (HET_TAG_PARAMS); a push is followed by the weights, a pull by
                           * W int32 counts of gradients to take per worker */
    int32_t kind, pad;
    int64_t version;    /* push: of the weights; reply: the server's now; pull: the update's */
    int64_t pos;        /* reply: the worker's next batch (-1: none) */
    int64_t avail;      /* reply: the newest update finished by the IN's send time */
    int32_t len;        /* reply: the next batch's samples */
    float lr;           /* reply: the last update's learning rate */
} ctrl_msg;

typedef struct agg_hdr { /* aggregator -> server (HET_TAG_GRADS), then the mean if count > 0 */
    double stale_sum, stale_max;
    int64_t count, grads;
} agg_hdr;

typedef struct grad_hdr { /* worker -> aggregator (HET_TAG_GRADS), then the mean gradient */
    int64_t version, count;
} grad_hdr;

typedef struct pending { /* weights received, not yet taken */
    int64_t version, incl; /* incl: this worker's gradients in them (this epoch) */
    double deliver;
    float *w;
    struct pending *next;
} pending;

typedef struct own { /* an aggregator's own gradient, not yet pulled */
    int64_t version, count;
    float *g;
    struct own *next;
} own;

typedef struct out_msg { /* a send in flight with its own copy of the bytes (the outbox) */
    het_msg m;
    struct out_msg *next;
    unsigned char buf[];
} out_msg;

typedef struct inhad {
    het_ps ps;
    int T, n_nodes;
    int *agg_of;          /* by worker index: its aggregator's world rank */
    int *agg_rank;        /* by node (in order): the aggregator's world rank */
    int *local, n_local;  /* an aggregator: its node's worker indexes (itself first) */
    size_t cbytes;        /* the largest control message */
    unsigned char *cbuf;  /* a control message being received */
    unsigned char *big;   /* gradients, aggregates, pushes: one n-float message */
    float *acc;           /* an aggregator: the sum; the server: the average */
    out_msg *out;         /* this rank's sends in flight */
    unsigned char *gbuf;  /* an aggregator: a gradient received */
    pending *pend;        /* a worker: weights received, by version */
    int64_t got, got_incl;/* ... the newest version received, and its incl */
    int64_t iter, held_incl; /* a worker: its gradients this epoch; those in its weights */
    int64_t *incl;        /* the server: per worker, its gradients in the updates (epoch) */
    own *mine, **mine_tail;
    double vthread;       /* an aggregator: its thread's clock */
    /* the server */
    unsigned char **abuf; /* per node: its aggregate */
    int32_t *counted;     /* per worker: INs since the last update */
    double *done_t;       /* the finishing time of the epoch's updates */
    int64_t done_base, n_done, cap_done;
} inhad;

static size_t nbytes(const inhad *a) { return a->ps.n * sizeof(float); }

/* ---------------------------------------------------------------- the outbox
 * Sends whose buffers are copies, kept until MPI is done with them: a rank never waits for a
 * receiver to take a message (a large message waits for its receive: the aggregator takes
 * gradients only when the server pulls them, a worker takes weights only when it needs
 * them), so no send can close a cycle of waits. Completed sends are reaped without waiting. */

static int out_reap(het_strategy_ctx *ctx, out_msg **box, int wait) {
    int rc = HET_OK;
    for (out_msg **q = box; *q;) {
        int done = 1;
        int st = wait ? het_comm_msg_wait(ctx->comm, &(*q)->m)
                      : het_comm_msg_test(ctx->comm, &(*q)->m, &done);
        if (!rc) rc = st;
        if (!done && !st) {
            q = &(*q)->next;
            continue;
        }
        out_msg *o = *q;
        *q = o->next;
        free(o);
    }
    return rc;
}

/* Sends hdr (h bytes) + body (b bytes) to world rank dest with tag, at stamp (< 0: now). */
static int out_send(het_strategy_ctx *ctx, out_msg **box, int dest, int tag, const void *hdr,
                    size_t h, const void *body, size_t b, double stamp) {
    int rc = out_reap(ctx, box, 0);
    out_msg *o = malloc(sizeof *o + h + b);
    if (!o) return het_error_set(HET_ENOMEM, "inhad: out of memory for a message of %zu bytes",
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
static int make_nodes(inhad *a, het_strategy_ctx *ctx) {
    het_ps *ps = &a->ps;
    int P = ctx->size, *node = malloc((size_t)P * sizeof(int));
    a->agg_of = malloc((size_t)ps->n_workers * sizeof(int));
    a->agg_rank = malloc((size_t)ps->n_workers * sizeof(int));
    a->local = malloc((size_t)ps->n_workers * sizeof(int));
    if (!node || !a->agg_of || !a->agg_rank || !a->local) {
        free(node);
        return het_error_set(HET_ENOMEM, "inhad: out of memory");
    }
    int mine = het_comm_topo(ctx->comm)->node_id;
    if (MPI_Allgather(&mine, 1, MPI_INT, node, 1, MPI_INT, ctx->world) != MPI_SUCCESS) {
        free(node);
        return het_error_set(HET_EMPI, "inhad: MPI_Allgather of the nodes failed");
    }
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
    free(node);
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
    int bad = !a->cbuf || !a->big || !a->acc || !a->gbuf || !a->abuf || !a->counted || !a->incl;
    for (int k = 0; !bad && ps->shard == 0 && k < a->n_nodes; k++)
        bad = !(a->abuf[k] = het_alloc(sizeof(agg_hdr) + nbytes(a)));
    if (bad) return het_error_set(HET_ENOMEM, "inhad: out of memory for the message buffers");
    if (ctx->rank == 0)
        het_log(HET_LOG_INFO, "inhad: %d node aggregator%s (the lowest worker of each node); "
                "an update every %d iteration numbers; max staleness %d, lr %s by staleness\n",
                a->n_nodes, a->n_nodes == 1 ? "" : "s", a->T, ps->max_staleness,
                ps->staleness_lr ? "divided" : "not scaled");
    return HET_OK;
}

/* ---------------------------------------------------------------- helpers */

static int recv_from(het_strategy_ctx *ctx, int src, int tag, void *buf, size_t cap,
                     het_msg *m, int timed) {
    int rc = het_comm_irecv(ctx->comm, HET_COMM_WORLD, src, tag, buf, cap, m);
    if (rc) return rc;
    return timed ? het_comm_msg_wait(ctx->comm, m) : het_comm_msg_wait_untimed(ctx->comm, m);
}

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
    double now = het_clock_now();
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

/* A pull: the counted gradients of the node's workers, their sample-weighted mean to the
 * server at the thread's time. */
static int serve_pull(inhad *a, het_strategy_ctx *ctx, const ctrl_msg *c, const int32_t *cnt,
                      double at) {
    het_ps *ps = &a->ps;
    size_t n = ps->n;
    double t = fmax(a->vthread, at);
    agg_hdr h = {0, 0, 0, 0};
    int rc = HET_OK;
    float *sum = (float *)(a->big + sizeof h);
    /* first the counts (the weights c_i / C need the total), then the gradients */
    for (int i = 0; i < a->n_local && !rc; i++) h.grads += cnt[a->local[i]];
    int first = 1;
    double total = 0;
    int64_t left = h.grads;
    /* gradients arrive in order; their samples are in their headers: gather them one by one
     * into acc as sum c_i x_i / running C is not exact for one gradient, so keep the plain
     * sum of c_i x_i unless there is only one */
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
                rc = recv_from(ctx, ps->worker_rank[w], HET_TAG_GRADS, a->gbuf,
                               sizeof(grad_hdr) + n * sizeof(float), &m, 0);
                if (rc) break;
                grad_hdr gh;
                memcpy(&gh, a->gbuf, sizeof gh);
                version = gh.version, count = gh.count;
                t = fmax(t, m.deliver);
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
    a->vthread = t;
    return out_send(ctx, &a->out, ps->shard_rank[0], HET_TAG_GRADS, &h, sizeof h, sum,
                    h.count > 0 ? n * sizeof(float) : 0, t);
}

/* A push or the end: to the node's other workers at the thread's time (and kept). */
static int forward(inhad *a, het_strategy_ctx *ctx, const ctrl_msg *c, size_t bytes,
                   double at) {
    het_ps *ps = &a->ps;
    a->vthread = fmax(a->vthread, at);
    int rc = HET_OK;
    for (int i = 0; i < a->n_local && !rc; i++) {
        int w = a->local[i];
        if (ps->worker_rank[w] == ctx->rank) continue;
        rc = out_send(ctx, &a->out, ps->worker_rank[w], HET_TAG_PARAMS, c, bytes, NULL, 0,
                      a->vthread);
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
        int rc = recv_from(ctx, from, tag, a->cbuf, a->cbytes, &m, 0);
        if (rc) return rc;
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
    a->vthread = het_clock_now();
    a->mine_tail = &a->mine;
    while (len > 0 && !rc) {
        double ts = het_clock_now();
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
            rc = out_send(ctx, &a->out, a->agg_of[ps->worker], HET_TAG_GRADS, &gh, sizeof gh,
                          grads, nbytes(a), -1.0);
        }
        in_msg in = {ctx->step, len};
        a->iter++;
        if (!rc) rc = out_send(ctx, &a->out, srv, HET_TAG_COUNT, &in, sizeof in, NULL, 0, -1.0);
        ctrl_msg r = {0};
        if (!rc) rc = next_ctrl(a, ctx, &r, -1, -1, &end); /* the answer to the IN */
        if (rc) break;
        lr = r.lr;
        if ((rc = het_step_record(ctx, sums, &res, len, &res, len, 1, lr, ts))) break;
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
    int wrc = rc ? HET_OK : out_reap(ctx, &a->out, 1); /* a failure ends the job */
    drop_all(a);
    return rc ? rc : wrc;
}

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
    return out_send(ctx, &a->out, a->agg_rank[k], HET_TAG_CTRL, c, sizeof *c, extra, n_extra,
                    -1.0);
}

/* Pull, average, update, push. */
static int server_update(inhad *a, het_strategy_ctx *ctx, int epoch, int64_t spe) {
    het_ps *ps = &a->ps;
    const int W = ps->n_workers, K = a->n_nodes;
    const size_t n = ps->n;
    int64_t v = ctx->step;
    ctrl_msg pull = {K_PULL, 0, v, -1, -1, 0, 0.0f};
    int rc = HET_OK;
    for (int k = 0; k < K && !rc; k++)
        rc = to_node(a, ctx, k, &pull, a->counted, (size_t)W * sizeof(int32_t));
    het_msg *m = calloc((size_t)K, sizeof *m);
    if (!m) return het_error_set(HET_ENOMEM, "inhad: out of memory");
    for (int k = 0; k < K && !rc; k++)
        rc = het_comm_irecv(ctx->comm, HET_COMM_WORLD, a->agg_rank[k], HET_TAG_GRADS, a->abuf[k],
                            sizeof(agg_hdr) + n * sizeof(float), &m[k]);
    het_stall_where("server: pulling the aggregates", epoch + 1, (long long)v);
    int wrc = het_comm_msg_waitall(ctx->comm, K, m);
    if (!rc) rc = wrc;
    double C = 0, grads = 0, ssum = 0, smax = 0;
    for (int k = 0; k < K && !rc; k++) {
        agg_hdr h;
        memcpy(&h, a->abuf[k], sizeof h);
        ps->run.bytes_in += (double)m[k].bytes;
        C += (double)h.count, grads += (double)h.grads, ssum += h.stale_sum;
        smax = fmax(smax, h.stale_max);
    }
    free(m);
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
    ps->run.lr = lr;
    for (int w = 0; w < W; w++) a->incl[w] += a->counted[w];
    memset(a->counted, 0, (size_t)W * sizeof(int32_t));
    if ((rc = note_done(a, het_clock_now()))) return rc;
    ctrl_msg push = {K_PUSH, 0, ctx->step, -1, -1, 0, lr};
    memcpy(a->big, het_model_params(ctx->model), n * sizeof(float)); /* weights, then incl */
    memcpy(a->big + n * sizeof(float), a->incl, (size_t)W * sizeof(int64_t));
    for (int k = 0; k < K && !rc; k++)
        rc = to_node(a, ctx, k, &push, a->big, n * sizeof(float) + (size_t)W * sizeof(int64_t));
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

static int server_epoch(inhad *a, het_strategy_ctx *ctx, int epoch) {
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
    double t0 = het_clock_now();
    float lr = 0.0f;
    while (!rc) {
        if ((rc = hear_from(a, ctx, ins, done, blocked, ranks, &changed))) break;
        het_msg m = {0};
        in_msg in;
        het_stall_where("server: waiting for iteration numbers", epoch + 1, (long long)ctx->step);
        if ((rc = recv_from(ctx, HET_ANY_SOURCE, HET_TAG_COUNT, &in, sizeof in, &m, 1))) break;
        if (m.done) { /* every worker heard from is done */
            int waiting = 0;
            for (int w = 0; w < W; w++) {
                if (!blocked[w]) done[w] = 1;
                waiting |= blocked[w] && !done[w];
            }
            changed = 1;
            if (!waiting) break;
            if (total > 0 && (rc = server_update(a, ctx, epoch, spe))) break; /* frees them */
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
            total = 0;
            lr = (float)ps->run.lr;
        }
        ctrl_msg r = {K_REPLY, 0, ctx->step, -1, avail_at(a, m.stamp), 0, lr};
        if (!ps->run.nonfinite) het_ps_next_batch(ctx, &next, &r.pos, &r.len);
        ps->run.bytes_out += (double)sizeof r;
        if ((rc = out_send(ctx, &a->out, ps->worker_rank[w], HET_TAG_CTRL, &r, sizeof r, NULL,
                           0, -1.0)))
            break;
    }
    free(ins);
    free(done);
    free(blocked);
    free(ranks);
    if (!rc && total > 0) rc = server_update(a, ctx, epoch, spe); /* the epoch's rest */
    ctrl_msg end = {K_END, 0, ctx->step, -1, -1, 0, 0.0f};
    for (int k = 0; k < K && !rc; k++) rc = to_node(a, ctx, k, &end, NULL, 0);
    int wrc = rc ? HET_OK : out_reap(ctx, &a->out, 1); /* a failure ends the job */
    if (!rc) rc = wrc;
    ps->run.server_s = het_clock_now() - t0;
    if (!rc && next < n && !ps->run.nonfinite)
        rc = het_error_set(HET_EINVAL, "inhad: the epoch ended with %lld samples not handed "
                           "out (a strategy bug)", (long long)(n - next));
    return rc;
}

/* ---------------------------------------------------------------- the table */

static int inhad_epoch(het_strategy_ctx *ctx, int epoch, het_epoch_stats *st) {
    inhad *a = ctx->priv;
    het_epoch_sums sums = {0, 0, 0, 0};
    het_sampler_set_epoch(ctx->sampler, epoch);
    int rc = a->ps.shard == 0 ? server_epoch(a, ctx, epoch) : worker_epoch(a, ctx, &sums);
    het_ps_fail(ctx, rc); /* the others wait for this rank's messages */
    if ((rc = het_comm_agree(ctx->world, rc))) return rc;
    return het_ps_drain(&a->ps, ctx, &sums, st);
}

static het_model *inhad_model_for_eval(het_strategy_ctx *ctx) { return ctx->model; }

static int inhad_save_state(het_strategy_ctx *ctx, het_ckpt_writer *w) {
    (void)ctx;
    (void)w; /* the server's state is rank 0's after the drain: the trainer's sections */
    return HET_OK;
}

static int inhad_load_state(het_strategy_ctx *ctx, het_ckpt_reader *r) {
    (void)ctx;
    (void)r;
    return HET_OK;
}

static void free_all(unsigned char **b, int n) {
    for (int i = 0; b && i < n; i++) het_free(b[i]);
    free(b);
}

static void inhad_free(het_strategy_ctx *ctx) {
    inhad *a = ctx->priv;
    if (!a) return;
    drop_all(a);
    for (out_msg *o = a->out, *nx; o; o = nx) nx = o->next, free(o); /* after a failure */
    free_all(a->abuf, a->n_nodes);
    het_free(a->cbuf);
    het_free(a->big);
    het_free(a->acc);
    het_free(a->gbuf);
    free(a->counted);
    free(a->incl);
    free(a->done_t);
    free(a->agg_of);
    free(a->agg_rank);
    free(a->local);
    het_ps_free(&a->ps);
    free(a);
    ctx->priv = NULL;
}

static void inhad_report(het_strategy_ctx *ctx, char *line, size_t n_line, char *json,
                         size_t n_json) {
    const inhad *a = ctx->priv;
    het_ps_report(&a->ps, line, n_line, json, n_json);
}

const het_strategy_ops het_strategy_inhad = {
    "inhad", "asynchronous parameter server with node aggregation and iteration numbers "
    "(Xiao et al. 2022)", inhad_init, inhad_epoch, inhad_model_for_eval, inhad_save_state,
    inhad_load_state, inhad_free, inhad_report, 0 /* no world gradient sum */, NULL,
    het_inhad_opts, 1 /* --batch is each worker's */,
};

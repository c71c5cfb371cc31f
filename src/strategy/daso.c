/* daso: distributed asynchronous and selective optimization (METHODS.md section 3).
 * Paper: D. Coquelin, C. Debus, M. Goetz, F. von der Lehr, J. Kahn, M. Siggel, A. Streit,
 * "Accelerating neural network training with distributed asynchronous and selective
 * optimization (DASO)", J. Big Data 9:14 (2022). Reference: the authors' HeAT library,
 * heat/optim/dp_optimizer.py (class DASO), whose per-batch control flow this file follows
 * exactly by default (het_daso_ctl_step in daso_schedule.c, checked against a reference written
 * from HeAT's code: tests/daso_ref.h, test_daso_trace, test_daso); our code.
 *
 * The method. N nodes of G ranks; node-local communication is cheap, cross-node is not.
 * - Local sync: on the batches DDP's flag selects (HeAT sets it after each step for the next
 *   batch: every batch with ls = 1; in (8,2,2) b % 8 in {0,1,2,4,6}) the gradients are averaged
 *   inside the node (a reducer over HET_COMM_NODE whose buckets start from the gradient hook,
 *   so it overlaps backward), then every rank takes the same optimizer step; on the others a
 *   rank steps on its own gradient.
 * - Global sync sends PARAMETERS. Cross group i = local rank i of every node (the topology's
 *   HET_COMM_CROSS of those ranks). On batches b % gs == 0, after the optimizer step, the
 *   ranks of group send_mod copy their parameters into a separate send buffer and start a
 *   non-blocking fp32 all-reduce (SUM) on their cross communicator, in chunks of --daso-chunk
 *   elements (10M; raised so that there are at most 64 chunks: every test progresses every
 *   chunk in flight, so the cost of n chunks grows as n^2); the other groups call nothing.
 *   Then the previous group's pending sync, if any, is merged and that group's local rank
 *   broadcasts inside its node (at every send, even when there was nothing left to merge). The
 *   merge otherwise comes on the batch with b % gs == S' (S' = min(S, last - b) recomputed
 *   every batch), except on a batch before a global sync, where nothing is received (so
 *   (2,1,1) merges at the next send): theta <- theta 2S'/(2S' + N) + sum_n theta_n / (2S' + N),
 *   with the S' stored at the send. Until then the request is progressed by MPI_Test from the
 *   model's progress hook between layers (real overlap: the trace shows "global sync (in
 *   flight)" on the communication row beside the compute). Batches that neither start nor
 *   merge a global sync make no cross-node call at all (the strategy counts the comm layer's
 *   calls_cross per batch; the report carries it).
 * - The epoch's last batch (and every batch with S = 0): group send_mod sends, the previous
 *   group's pending sync is merged and broadcast, then the group's parameters become the mean
 *   of what it sent (a blocking all-reduce; the merge just done is overwritten, as in HeAT) and
 *   it broadcasts in the node: every rank ends the epoch with the same parameters.
 * - Wire: syncs of gs = 0 (warm-up and cool-down epochs) are cast to --daso-wire (bf16 by
 *   default, fp16, fp32; a user MPI_Op adds 16-bit words in float and rounds), also on one node
 *   (a 1-rank group: parameters rounded), and the division by N is rounded to it (HeAT divides
 *   the 16-bit sum); every sync while cycling is fp32, the last batch's included.
 * - Phases (daso_schedule.c): warm-up and cool-down epochs (4 each) use gs = ls = S = 0: a
 *   blocking parameter average every batch, send_mod rotating. Between them (gs, ls, S) starts
 *   at (4, 1, 1) and moves on plateaus of the all-reduced epoch training loss (relative 0.05,
 *   patience 2): divided by --daso-skip-reduction-factor (2), or reset to (max, max/f, max/f)
 *   from gs = 1 (f = --daso-local-skip-factor, 4).
 * Our choices:
 * - --batch is the global batch B: step s takes B' samples of the shared epoch permutation,
 *   split evenly over the P ranks (as allreduce). A rank scales its loss sum by
 *   1 / (its node's samples of the step) on local-sync batches, so the node reducer's SUM is
 *   the node's mean gradient; by 1 / (its own samples) otherwise. One node is allreduce only in
 *   blocking epochs with --daso-one-node-fp32 or --daso-wire fp32 (HeAT casts even there), and
 *   not in cycling epochs (a merge mixes in the rank's own stale copy, as in HeAT).
 * - Departures from HeAT, off by default: --daso-merge-last merges the pending sync before the
 *   last batch's send and average (so the merge is not lost); --daso-one-node-fp32 skips the
 *   cast on one node. Always: a warm-up of 0 epochs cycles from epoch 1 (daso_schedule.c);
 *   G = 1 (HeAT needs 2 ranks per node) merges a sync S' batches after it was sent, not the sync
 *   just sent; a gs = 0 cycling state with S != 0 (factors above gs) sends 16-bit syncs whose
 *   sum is rounded once, not after each addition (the same for 2 nodes).
 * - Beyond the reference (which requires equal nodes): unequal nodes. send_mod rotates over
 *   the local ranks every node has (0 .. smallest node - 1), so every node takes part in every
 *   sync; each node's parameters are weighted by its share w_n of a full step's samples
 *   (the hgc weighting): it sends N w_n theta, so sum / N is the sample-weighted mean and the
 *   merge formula is unchanged. Equal nodes send theta itself (w_n = 1/N exactly).
 * - Momentum differs between nodes: every rank's optimizer state is checkpointed (section
 *   s.daso.optim, per rank), with the schedule (s.daso.sched: gs, ls, S, the plateau detector,
 *   send_mod), so a resume continues bitwise (the per-batch control, het_daso_ctl, restarts at
 *   every epoch, as HeAT's state does: nothing of it outlives an epoch). The schedule read back
 *   is range-checked and compared across ranks (agreed_state): ranks resuming their own copies
 *   with other schedules would enter other collectives.
 * - No world call per step: the per-step figures are the rank's own (het_step_info.local);
 *   divergence is detected on the summed epoch loss, on every rank alike. Batch-norm
 *   statistics are averaged over ranks at the epoch's end, weighted by sample share.
 * - het_daso_set_trace: a test hook that sees every event (node averaging, send with group,
 *   S' and wire, merge and its weight, node broadcast and its root, blocking average) as it is
 *   carried out. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/daso.h"
#include "strategy/strategy.h"

/* The test hook (het_daso_set_trace): every event carried out, on every rank. */
static het_daso_trace_fn g_trace;
static void *g_trace_user;

void het_daso_set_trace(het_daso_trace_fn fn, void *user) {
    g_trace = fn;
    g_trace_user = user;
}

static void emit(const het_strategy_ctx *ctx, het_daso_event e) {
    if (g_trace) g_trace(g_trace_user, ctx->rank, &e);
}

/* Non-blocking all-reduces of one global sync, at most (--daso-chunk is raised to fit). */
#define DASO_MAX_CHUNKS 64

typedef struct daso_sync {   /* one non-blocking global sync */
    float *buf;              /* the parameters sent, then their sum over the nodes */
    het_req *reqs;           /* one per chunk */
    int mod;                 /* the local rank whose cross group sends */
    int mine;                /* this rank is in that group */
    int done;                /* every chunk completed (seen by a test) */
    int btw;                 /* S' at the send (the merge's weight) */
    int64_t from;            /* the batch that sent it */
    int wire;                /* het_wire: not fp32 only with gs = 0 in cycling (HeAT casts) */
    double t0, t1;           /* started, seen complete (trace) */
} daso_sync;

typedef struct daso {
    het_reducer *red;        /* gradients over the node */
    het_daso_params par;
    het_daso_sched sched;    /* the cycling state and the plateau detector */
    het_daso_sched ran;      /* the schedule of the epoch being (last) trained */
    het_daso_ctl ctl;        /* HeAT's per-batch state: send_mod, previous sender, DDP flag */
    het_daso_ctl_opts opts;  /* wire of gs = 0 syncs, --daso-merge-last */
    float *blk;              /* a blocking sync's sum */
    int N, G, local, min_G;  /* nodes, ranks of this node, local rank, smallest node */
    int *members;            /* world ranks of this node, G */
    double weight;           /* N w_n: 1 for equal nodes */
    size_t n;                /* parameters */
    int n_chunks;
    size_t chunk;
    daso_sync *q;            /* FIFO of syncs in flight, capacity cap */
    int cap, head, count;
    int hook_failed;
    int evaluating;          /* an evaluation inside the epoch: the progress hook rests */
    float *keep;             /* this rank's parameters and state during that evaluation */
    /* this epoch, for the report */
    int64_t n_sync, n_merge, n_block, calls_cross, calls_idle;
} daso;

/* The node's samples of a step of Bs samples split evenly over all ranks. */
static int64_t node_samples(const het_strategy_ctx *ctx, const daso *d, int64_t Bs) {
    int64_t sum = 0, lo, len;
    for (int i = 0; i < d->G; i++) {
        het_partition_even(Bs, ctx->size, d->members[i], &lo, &len);
        sum += len;
    }
    return sum;
}

/* Tests the chunks of every sync this rank sends; called between layers. */
static void daso_progress(void *user, int layer) {
    (void)layer;
    het_strategy_ctx *ctx = user;
    daso *d = ctx->priv;
    if (d->evaluating) return; /* the evaluation's forward passes: training's tests only */
    for (int k = 0; k < d->count && !d->hook_failed; k++) {
        daso_sync *y = &d->q[(d->head + k) % d->cap];
        if (!y->mine || y->done) continue;
        int all = 1;
        for (int c = 0; c < d->n_chunks && !d->hook_failed; c++) {
            int done = 0;
            d->hook_failed = het_comm_test(ctx->comm, &y->reqs[c], &done);
            all &= done;
        }
        if (all) {
            y->done = 1;
            y->t1 = het_lane_now(&ctx->lane);
        }
    }
}

/* Topology facts every rank needs: node members, nodes, smallest node. Collective. */
static int daso_topology(het_strategy_ctx *ctx, daso *d) {
    d->N = d->G = 1;
    d->local = 0;
    d->min_G = 1;
    d->members = calloc(1, sizeof(int) * (size_t)(ctx->comm ? ctx->size : 1));
    if (!d->members) return het_error_set(HET_ENOMEM, "out of memory for daso");
    if (!ctx->comm) return HET_OK;
    const het_topo *t = het_comm_topo(ctx->comm);
    d->N = t->n_nodes;
    d->G = t->local_size;
    d->local = t->local_rank;
    const int *node = het_comm_world_nodes(ctx->comm);
    for (int r = 0, i = 0; r < ctx->size; r++)
        if (node[r] == t->node_id) d->members[i++] = r; /* world order, as the node's */
    d->min_G = het_comm_smallest_node(ctx->comm);
    if (!t->uniform) {
        const int64_t B = ctx->cfg->batch;
        d->weight = (double)d->N * (double)node_samples(ctx, d, B) / (double)B;
        if (ctx->rank == 0)
            het_log(HET_LOG_INFO, "daso: unequal nodes (smallest %d ranks): parameters weighted "
                    "by each node's share of the samples; groups 0..%d take turns\n", d->min_G,
                    d->min_G - 1);
    }
    return HET_OK;
}

static int daso_init(het_strategy_ctx *ctx) {
    const het_train_config *c = ctx->cfg;
    daso *d = calloc(1, sizeof *d);
    if (!d) return het_error_set(HET_ENOMEM, "out of memory for daso");
    ctx->priv = d;
    d->weight = 1.0;
    d->par = het_daso_params_read(c); /* the options, read once (daso_opts.c) */
    const long long chunk = (long long)het_strategy_opt_value(c, "daso-chunk");
    d->sched = het_daso_sched_init(&d->par);
    d->ran = het_daso_sched_epoch(&d->par, &d->sched, 0);
    d->n = het_model_n_params(ctx->model);
    /* at most DASO_MAX_CHUNKS requests per sync: each test of one progresses them all, so
     * tiny chunks cost about the square of their count (--daso-chunk 1: 86 s for 0.03 s) */
    d->chunk = (size_t)chunk;
    size_t least = (d->n + DASO_MAX_CHUNKS - 1) / DASO_MAX_CHUNKS;
    if (d->chunk < least) {
        if (ctx->rank == 0)
            het_log(HET_LOG_INFO, "daso: --daso-chunk %lld would make %zu chunks of the %zu "
                    "parameters; %zu elements each instead (at most %d)\n",
                    chunk, (d->n + d->chunk - 1) / d->chunk, d->n, least,
                    DASO_MAX_CHUNKS);
        d->chunk = least;
    }
    if (d->chunk < 1) d->chunk = 1;
    d->n_chunks = (int)((d->n + d->chunk - 1) / d->chunk);
    if (c->batch < ctx->size)
        return het_error_set(HET_EINVAL, "daso: global batch %d is smaller than %d ranks: every "
                             "rank needs at least one sample per step", c->batch, ctx->size);
    int st = daso_topology(ctx, d);
    if (st) return st;
    d->ctl = het_daso_ctl_epoch(d->min_G);
    const int one_node_fp32 = (int)het_strategy_opt_value(c, "daso-one-node-fp32");
    d->opts.wire = d->N == 1 && one_node_fp32 ? HET_WIRE_FP32
                                              : (int)het_strategy_opt_value(c, "daso-wire");
    d->opts.merge_last = (int)het_strategy_opt_value(c, "daso-merge-last");
    if (!(d->blk = malloc(d->n * sizeof(float) + 4)))
        return het_error_set(HET_ENOMEM, "out of memory for daso's blocking sync");
    het_model_hook h = {NULL, daso_progress, ctx};
    if ((st = het_model_add_hook(ctx->model, &h))) return st;
    return het_reducer_create(&d->red, ctx, HET_COMM_NODE, c->bucket_mb, 0);
}

/* A slot at the FIFO's tail (grown when full). */
static int push_sync(daso *d, daso_sync **out) {
    if (d->count == d->cap) {
        int cap = d->cap ? 2 * d->cap : 2;
        daso_sync *q = calloc((size_t)cap, sizeof *q);
        if (!q) return het_error_set(HET_ENOMEM, "out of memory for daso's syncs");
        for (int k = 0; k < d->count; k++) q[k] = d->q[(d->head + k) % d->cap];
        for (int k = d->count; k < cap; k++) {
            q[k].buf = malloc(d->n * sizeof(float) + 4);
            q[k].reqs = calloc((size_t)d->n_chunks, sizeof(het_req));
            if (!q[k].buf || !q[k].reqs) {
                for (int j = d->count; j <= k; j++) free(q[j].buf), free(q[j].reqs);
                free(q);
                return het_error_set(HET_ENOMEM, "out of memory for daso's send buffers");
            }
        }
        free(d->q); /* full: every slot (buffers, requests in flight) was moved */
        d->q = q;
        d->cap = cap;
        d->head = 0;
    }
    *out = &d->q[(d->head + d->count) % d->cap];
    d->count++;
    return HET_OK;
}

/* Starts the non-blocking global sync of batch b on cross group `mod` (its ranks post; the
 * others note it). */
static void wire_round(het_wire w, float *p, size_t n);

static int start_sync(het_strategy_ctx *ctx, daso *d, int64_t b, int mod, int btw, int wire) {
    daso_sync *y = NULL;
    int st = push_sync(d, &y);
    if (st) return st;
    y->mod = mod;
    y->mine = d->local == mod;
    y->btw = btw;
    y->from = b;
    y->wire = wire;
    y->done = !y->mine || d->N == 1;
    y->t0 = y->t1 = het_lane_now(&ctx->lane);
    d->n_sync++;
    if (!y->mine) return HET_OK;
    const float *p = het_model_params(ctx->model);
    if (d->weight != 1.0)
        for (size_t i = 0; i < d->n; i++) y->buf[i] = (float)(d->weight * p[i]);
    else
        memcpy(y->buf, p, d->n * sizeof(float));
    wire_round((het_wire)wire, y->buf, d->n);
    for (int c = 0; c < d->n_chunks && d->N > 1 && !st; c++) {
        size_t lo = (size_t)c * d->chunk, len = d->n - lo < d->chunk ? d->n - lo : d->chunk;
        st = het_comm_iallreduce_sum(ctx->comm, HET_COMM_CROSS, y->buf + lo, len, &y->reqs[c]);
    }
    return st;
}

/* Merges the oldest sync in flight, the one the event names: theta <- theta 2S'/(2S' + N) +
 * sum / (2S' + N) (HeAT's arithmetic; 1 for 2S' when S' <= 0) on the ranks that sent it. */
static int merge(het_strategy_ctx *ctx, daso *d, const het_daso_event *e) {
    daso_sync *y = d->count > 0 ? &d->q[d->head] : NULL;
    if (!y || y->mod != e->group || y->from != e->from)
        return het_error_set(HET_EINVAL, "daso: internal: merge of group %d's sync of batch %lld"
                             " at batch %lld, but %s", e->group, (long long)e->from,
                             (long long)e->batch, y ? "another is older" : "none is in flight");
    int st = d->hook_failed;
    double t0 = het_lane_now(&ctx->lane);
    if (y->mine && !st) {
        float *p = het_model_params(ctx->model);
        for (int c = 0; c < d->n_chunks && d->N > 1 && !st; c++)
            st = het_comm_wait(ctx->comm, &y->reqs[c]);
        if (!y->done) y->t1 = het_lane_now(&ctx->lane);
        het_trace_add(ctx->trace, "global sync (in flight)", HET_TID_COMM, y->mod, y->t0, y->t1);
        const double num = y->btw > 0 ? 2.0 * y->btw : 1.0, den = num + d->N;
        const float factor = (float)(num / den), fden = (float)den;
        if (y->wire != HET_WIRE_FP32) { /* a 16-bit sum (rounded once here), divided in 16 bits */
            wire_round((het_wire)y->wire, y->buf, d->n);
            for (size_t i = 0; i < d->n; i++) y->buf[i] /= fden;
            wire_round((het_wire)y->wire, y->buf, d->n);
            for (size_t i = 0; i < d->n && !st; i++) p[i] = p[i] * factor + y->buf[i];
        } else {
            for (size_t i = 0; i < d->n && !st; i++) p[i] = p[i] * factor + y->buf[i] / fden;
        }
    }
    het_trace_add(ctx->trace, "merge", ctx->lane.tid, y->mod, t0, het_lane_now(&ctx->lane));
    d->head = (d->head + 1) % d->cap;
    d->count--;
    d->n_merge++;
    return st;
}

/* Rounds n floats to the wire type (round to nearest even), as a cast there and back. */
static void wire_round(het_wire w, float *p, size_t n) {
    if (w == HET_WIRE_FP32) return;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        het_wire_pack(w, &p[i], &h, 1);
        het_wire_unpack(w, &h, &p[i], 1);
    }
}

/* A blocking sync's send: cross group e->group sums its parameters (cast to the event's wire
 * type, added in float and rounded) into d->blk; on one node only the cast. */
static int send_blocking(het_strategy_ctx *ctx, daso *d, const het_daso_event *e) {
    if (d->local != e->group) return HET_OK;
    const float *p = het_model_params(ctx->model);
    for (size_t i = 0; i < d->n; i++) d->blk[i] = (float)(d->weight * p[i]);
    if (d->N == 1) {
        wire_round((het_wire)e->wire, d->blk, d->n);
        return HET_OK;
    }
    return het_comm_allreduce_sum_wire(ctx->comm, HET_COMM_CROSS, d->blk, d->n,
                                       (het_wire)e->wire);
}

/* The blocking sync's receive: the group's parameters = the sum / N, the division rounded to
 * the wire type (HeAT divides the 16-bit sum in that type). */
static int average(het_strategy_ctx *ctx, daso *d, const het_daso_event *e) {
    double t0 = het_lane_now(&ctx->lane);
    if (d->local == e->group) {
        float *p = het_model_params(ctx->model);
        for (size_t i = 0; i < d->n; i++) p[i] = d->blk[i] / (float)d->N;
        wire_round((het_wire)e->wire, p, d->n);
    }
    het_trace_add(ctx->trace, "global average (blocking)", ctx->lane.tid, e->group, t0,
                  het_lane_now(&ctx->lane));
    d->n_block++;
    return HET_OK;
}

static int node_bcast(het_strategy_ctx *ctx, daso *d, int root) {
    if (d->G == 1) return HET_OK;
    double t0 = het_lane_now(&ctx->lane);
    int st = het_comm_bcast(ctx->comm, HET_COMM_NODE, het_model_params(ctx->model),
                            d->n * sizeof(float), root);
    het_trace_add(ctx->trace, "node broadcast", ctx->lane.tid, root, t0, het_lane_now(&ctx->lane));
    return st;
}

/* The global part of batch b after its optimizer step (het_daso_ctl_step's events, carried
 * out in order and then reported to the trace hook); *global = 1 when it communicated across
 * nodes. */
static int global_step(het_strategy_ctx *ctx, daso *d, int64_t b, int64_t last, int *global) {
    het_daso_event ev[HET_DASO_CTL_EVENTS];
    int n = het_daso_ctl_step(&d->ctl, &d->ran, b, last, &d->opts, ev), blocking = 0, st = 0;
    *global = 0;
    if (n < 0)
        return het_error_set(HET_EINVAL, "daso: internal: more than %d global syncs in flight "
                             "at batch %lld", HET_DASO_CTL_MAX, (long long)b);
    for (int k = 0; k < n; k++) blocking |= ev[k].kind == HET_DASO_EV_AVG;
    for (int k = 0; k < n && !st; k++) {
        const het_daso_event *e = &ev[k];
        switch (e->kind) {
        case HET_DASO_EV_SEND:
            st = blocking ? send_blocking(ctx, d, e) : start_sync(ctx, d, b, e->group, e->btw, e->wire);
            break;
        case HET_DASO_EV_MERGE: st = merge(ctx, d, e); break;
        case HET_DASO_EV_BCAST: st = node_bcast(ctx, d, e->group); break;
        case HET_DASO_EV_AVG: st = average(ctx, d, e); break;
        default: break;
        }
        *global |= e->kind != HET_DASO_EV_BCAST;
        if (!st) emit(ctx, *e);
    }
    return st;
}

/* One step of batch s: gradients (averaged in the node on local-sync batches), update, the
 * global part. */
static int daso_step(het_strategy_ctx *ctx, daso *d, int64_t pos, int64_t s, int64_t last,
                     float lr, het_batch_result *mine, int64_t *len) {
    const int64_t Bs = ctx->n_train - pos < ctx->cfg->batch ? ctx->n_train - pos
                                                             : ctx->cfg->batch;
    int64_t lo;
    het_partition_even(Bs, ctx->size, ctx->rank, &lo, len);
    int loc = d->ctl.flag;
    emit(ctx, (het_daso_event){.kind = HET_DASO_EV_LOCAL, .group = loc, .batch = s});
    int64_t cnt = loc ? node_samples(ctx, d, Bs) : *len;
    het_reducer *red = loc ? d->red : NULL;
    het_comm_stats c0 = ctx->comm ? het_comm_get_stats(ctx->comm) : (het_comm_stats){0};
    het_batch_result r;
    int st = het_step_grads(ctx, red, ctx->sampler->perm + pos + lo, (int)*len,
                            cnt > 0 ? 1.0f / (float)cnt : 0.0f, het_step_seed(ctx, ctx->step),
                            mine);
    if (!st) st = het_step_reduce(ctx, red, mine, &r);
    if (st) return st;
    /* a local verdict (node-summed gradients, own loss): see strategy/finite.c */
    ctx->skip_record = !het_step_finite(ctx, mine->loss_sum) &&
                       het_step_note(ctx, mine->loss_sum, ctx->step + 1);
    if (ctx->skip_record) ctx->step++;
    else if (!het_step_update(ctx, lr) && ctx->nonfinite.kind == HET_NF_NONE)
        ctx->nonfinite = het_step_diagnose(ctx, mine->loss_sum, ctx->step); /* stops at the
                                                                              epoch's end */
    int global;
    if ((st = global_step(ctx, d, s, last, &global))) return st;
    if (ctx->comm) {
        uint64_t calls = het_comm_get_stats(ctx->comm).calls_cross - c0.calls_cross;
        d->calls_cross += (int64_t)calls;
        if (!global) d->calls_idle += (int64_t)calls;
    }
    return HET_OK;
}

static int daso_train_epoch(het_strategy_ctx *ctx, int epoch, het_epoch_stats *st) {
    daso *d = ctx->priv;
    const int64_t n = ctx->n_train, B = ctx->cfg->batch, spe = (n + B - 1) / B;
    het_epoch_sums sums = {0, 0, 0, 0};
    float lr = 0.0f;
    int rc;
    het_sampler_set_epoch(ctx->sampler, epoch);
    d->ctl = het_daso_ctl_epoch(d->min_G);
    d->n_sync = d->n_merge = d->n_block = d->calls_cross = d->calls_idle = 0;
    d->ran = het_daso_sched_epoch(&d->par, &d->sched, epoch);
    emit(ctx, (het_daso_event){.kind = HET_DASO_EV_EPOCH, .gs = d->ran.gs, .ls = d->ran.ls,
                               .S = d->ran.S, .last = spe - 1});
    for (int64_t pos = 0, s = 0; pos < n; pos += B, s++) {
        double ts = het_lane_now(&ctx->lane);
        het_batch_result mine;
        int64_t len;
        lr = het_schedule_lr(ctx->sched, epoch, ctx->step, spe);
        if ((rc = daso_step(ctx, d, pos, s, spe - 1, lr, &mine, &len))) return rc;
        const het_step_rec rec = {.mine = &mine, .count = len, .local = 1};
        if ((rc = het_step_record(ctx, &sums, &rec, lr, ts))) return rc;
        if ((rc = het_step_eval_due(ctx, pos + B, n))) return rc; /* --eval-every */
    }
    /* the last batch was a global average: the same weights on every rank */
    if ((rc = het_step_check_params(ctx))) return rc;
    /* weights: this rank's share of the samples that counted (skipped steps' do not) */
    rc = het_step_epoch_figures(ctx, &sums, lr, st);
    if (!rc) rc = het_step_average_state(ctx, sums.samples / (double)st->samples);
    if (rc) return rc;
    if (!isfinite(st->loss)) { /* the same on every rank: name the first event recorded */
        het_nonfinite e = {ctx->step, epoch + 1, HET_NF_LOSS, 0, ctx->rank, st->loss, 0};
        const het_nonfinite *mine = ctx->nonfinite.kind ? &ctx->nonfinite : NULL;
        return het_step_stop(ctx, HET_COMM_WORLD, mine, &e);
    }
    d->sched = het_daso_sched_next(&d->par, d->sched, epoch + 1, st->loss);
    return HET_OK;
}

/* " | daso gs 4 ls 1 S 1 syncs 3 merges 3 blocking 1" and the same as JSON. */
static void daso_report(het_strategy_ctx *ctx, char *line, size_t nl, char *json, size_t nj) {
    const daso *d = ctx->priv;
    const het_daso_sched *r = &d->ran, *x = &d->sched;
    het_daso_sched nx = het_daso_sched_epoch(&d->par, x, ctx->epoch + 1);
    snprintf(line, nl, " | daso gs %d ls %d S %d syncs %lld merges %lld blocking %lld", r->gs,
             r->ls, r->S, (long long)d->n_sync, (long long)d->n_merge, (long long)d->n_block);
    snprintf(json, nj, "\"daso\":{\"gs\":%d,\"ls\":%d,\"S\":%d,\"next\":[%d,%d,%d],"
             "\"syncs\":%lld,\"merges\":%lld,\"blocking\":%lld,\"calls_cross\":%lld,"
             "\"calls_cross_idle\":%lld,\"plateaus\":%d,\"best_loss\":%.6g}", r->gs, r->ls,
             r->S, nx.gs, nx.ls, nx.S, (long long)d->n_sync, (long long)d->n_merge,
             (long long)d->n_block, (long long)d->calls_cross, (long long)d->calls_idle,
             x->plateaus, isfinite(x->best) ? x->best : -1.0);
}

static het_model *daso_model_for_eval(het_strategy_ctx *ctx) { return ctx->model; }

/* --eval-every inside an epoch: the ranks' mean (their models differ between syncs); the
 * syncs in flight are not touched meanwhile (the progress hook rests). */
static int daso_eval_model(het_strategy_ctx *ctx, int begin) {
    daso *d = ctx->priv;
    d->evaluating = begin;
    return het_step_eval_mean(ctx, begin, &d->keep);
}

/* s.daso.sched: the cycling state, the plateau detector and send_mod (the same on every
 * rank: rank 0's); s.daso.optim: every rank's optimizer state (momentum differs between nodes). */
typedef struct daso_saved {
    het_daso_sched sched;
    int32_t send_mod, version;
} daso_saved;

static size_t opt_bytes(const het_strategy_ctx *ctx) {
    return het_optim_state_floats(&ctx->cfg->optim, het_model_n_params(ctx->model)) *
           sizeof(float);
}

static int daso_save_state(het_strategy_ctx *ctx, het_ckpt_writer *w) {
    daso *d = ctx->priv;
    daso_saved s;
    memset(&s, 0, sizeof s);
    s.sched = d->sched;
    s.send_mod = d->ctl.send_mod;
    s.version = 1;
    int st = w ? het_ckpt_put(w, "s.daso.sched", &s, sizeof s) : HET_OK;
    int st2 = het_step_save_per_rank(ctx, w, "s.daso.optim", ctx->opt_state, opt_bytes(ctx));
    return st ? st : st2;
}

static int daso_load_state(het_strategy_ctx *ctx, het_ckpt_reader *r) {
    daso *d = ctx->priv;
    const void *p;
    size_t n;
    uint64_t off;
    int st = het_ckpt_find(r, "s.daso.sched", &p, &n, &off);
    if (st) return st;
    daso_saved s;
    if (n != sizeof s)
        return het_error_set(HET_EFORMAT, "%s: offset %llu: daso schedule of %zu bytes, expected "
                             "%zu", het_ckpt_reader_path(r), (unsigned long long)off, n,
                             sizeof s);
    memcpy(&s, p, sizeof s);
    if (ctx->ckpt_size && s.send_mod >= d->min_G && s.send_mod < 65536) {
        /* another number of ranks: the groups are this run's (init); the turn starts over */
        het_step_resized(ctx, "daso send group %d -> 0 (%d groups now)", s.send_mod, d->min_G);
        s.send_mod = 0;
    }
    if (s.version != 1 || s.send_mod < 0 || s.send_mod >= d->min_G)
        return het_error_set(HET_EFORMAT, "%s: offset %llu: daso schedule version %d send_mod %d,"
                             " expected version 1 and send_mod below %d",
                             het_ckpt_reader_path(r), (unsigned long long)off, s.version,
                             s.send_mod, d->min_G);
    if ((st = het_daso_sched_check(&s.sched, het_ckpt_reader_path(r), off))) return st;
    d->sched = s.sched;
    d->ctl.send_mod = s.send_mod;
    if (ctx->ckpt_size) { /* the checkpoint's optimizer section is rank 0's: every rank's now */
        char topo[128] = "1 rank";
        if (ctx->comm) het_topo_describe(het_comm_topo(ctx->comm), topo, sizeof topo);
        het_step_resized(ctx, "daso node groups rebuilt for %s, %d sending group%s; schedule "
                         "gs %d ls %d S %d kept; per-rank optimizer state of %d ranks replaced "
                         "by rank 0's", topo, d->min_G, d->min_G == 1 ? "" : "s", d->sched.gs,
                         d->sched.ls, d->sched.S, ctx->ckpt_size);
        return HET_OK;
    }
    return het_step_load_per_rank(ctx, r, "s.daso.optim", ctx->opt_state, opt_bytes(ctx));
}

/* The schedule and send_mod (s.daso.sched) decide which collectives every rank enters: the
 * same on every rank. The optimizer state (s.daso.optim) is per rank. */
static int daso_agreed_state(het_strategy_ctx *ctx, het_agreed_value *out, int cap) {
    const daso *d = ctx->priv;
    const het_daso_sched *q = &d->sched;
    uint64_t best;
    memcpy(&best, &q->best, sizeof best);
    const het_agreed_value v[] = {
        {"daso schedule gs", (uint64_t)q->gs, 1, HET_COMM_WORLD},
        {"daso schedule ls", (uint64_t)q->ls, 1, HET_COMM_WORLD},
        {"daso schedule S", (uint64_t)q->S, 1, HET_COMM_WORLD},
        {"daso plateau detector: epochs without improvement", (uint64_t)q->bad, 1,
         HET_COMM_WORLD},
        {"daso plateau detector: best loss", best, 0, HET_COMM_WORLD},
        {"daso plateaus", (uint64_t)q->plateaus, 1, HET_COMM_WORLD},
        {"daso send_mod", (uint64_t)d->ctl.send_mod, 1, HET_COMM_WORLD},
    };
    int n = (int)(sizeof v / sizeof v[0]);
    if (n > cap) n = cap;
    memcpy(out, v, (size_t)n * sizeof *out);
    return n;
}

static void daso_free(het_strategy_ctx *ctx) {
    daso *d = ctx->priv;
    if (d) {
        het_model_remove_hook(ctx->model, ctx);
        for (int k = 0; k < d->cap; k++) { /* nothing is in flight after an epoch */
            for (int c = 0; c < d->n_chunks && d->q[k].reqs; c++) free(d->q[k].reqs[c].reqs);
            free(d->q[k].buf);
            free(d->q[k].reqs);
        }
        free(d->q);
        free(d->blk);
        free(d->keep);
        free(d->members);
        free(d);
    }
    ctx->priv = NULL;
}

const het_strategy_ops het_strategy_daso = {
    .name = "daso",
    .summary = "distributed asynchronous and selective optimization: node-local gradients, "
               "delayed global parameter averaging (Coquelin et al. 2022)",
    .init = daso_init,
    .train_epoch = daso_train_epoch,
    .model_for_eval = daso_model_for_eval,
    .eval_model = daso_eval_model, /* the ranks' mean, for --eval-every */
    .save_state = daso_save_state,
    .load_state = daso_load_state,
    .free = daso_free,
    .report = daso_report,
    .world_grads = 0,   /* its own node + cross scheme */
    .agreed_state = daso_agreed_state,
    .opts = het_daso_opts, /* --daso-* (daso_opts.c) */
    .worker_batch = 0,  /* --batch is the global batch */
    .lanes = 0,         /* one compute thread per --threads thread */
    .pieces = 0,        /* whole epochs: a global sync is in flight inside one */
    .evals = 1,         /* but --eval-every evaluates inside them (het_step_eval_due) */
};

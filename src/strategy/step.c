/* The step machinery shared by strategies: paced and traced compute regions, local gradients
 * with the emulated slowdown, reducers (a gradient sum over one communicator scope, bucketed
 * from the model's gradient hook), the optimizer step and the per-rank time split.
 *
 * Time split of rank r in an epoch. compute = the paced compute of the epoch (forward,
 * backward, optimizer, emulated slowdown included); delay = the emulated network's sleeps;
 * MPI time (het_comm_stats.comm_s) is split into waiting for slower ranks and moving bytes.
 * Each het_step_reduce logs the step's compute since the previous reduction c_r (it decides
 * when r arrives) and its time inside MPI m_r. At the epoch's end two all-reduces (MAX) per
 * reducer over its scope, the step counts (that every rank logged as many) and then the log,
 * give max_q c_q of every step, and
 *   wait_r = sum over steps of min(m_r, max_q c_q - c_r),   comm_r = (all MPI time) - wait_r.
 * On the virtual clock the split is what moved V: compute = the charged pieces, wait and comm
 * = what the operations' ends added (waiting for the latest participant, the modeled
 * transfer: het_comm_stats.vwait_s, vnet_s), delay = 0 (nothing sleeps); they sum to the
 * epoch's virtual time.
 * Nothing is exchanged per step for the split, so a strategy that reduces only inside a node
 * makes no call beyond its node on those steps. After the split is settled, every rank's split
 * is all-gathered into ctx->rank_times (one call per epoch) for reports and re-balancing.
 *
 * Figures. A reducer created with HET_REDUCE_FIGURES carries the batch's loss sum and correct
 * count in the same all-reduce as the gradients, at no extra synchronization: they sit in the
 * spare floats after the gradient buffer (HET_MODEL_GRAD_TAIL), a range of their own that
 * falls into the first bucket. The first gradient hook of a batch writes them (the figures
 * are complete then: every chunk's forward precedes the last chunk's backward,
 * het_model_batch_result) and marks them ready before the layer's own range. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hetrain/batch.h"
#include "strategy/strategy.h"

struct het_reducer {
    het_strategy_ctx *ctx;
    het_comm_scope scope;
    int ranks;
    int flags;
    float bucket_mb;
    het_buckets *buckets;  /* NULL on one rank */
    int armed;             /* inside het_step_grads with this reducer */
    int hook_failed;       /* status of a failing het_buckets_ready in the hook */
    int figures_ready;     /* this step's figures are in the tail and marked ready */
    double *bucket_t0;     /* start time of each bucket this step (trace) */
    int n_buckets;
    /* per-step log of this epoch: compute since the previous reduction, time in MPI */
    double *log_c, *log_m;
    int n_log, cap_log;
};

uint64_t het_step_seed(const het_strategy_ctx *ctx, int64_t step) {
    uint64_t s = het_batch_seed(ctx->cfg->seed, step);
    if (ctx->rank == 0) return s;
    het_rng r;
    het_rng_seed2(&r, s, (uint64_t)ctx->rank);
    return het_rng_u64(&r);
}

double het_step_region_begin(het_strategy_ctx *ctx) {
    het_pace_begin(&ctx->pace);
    return ctx->pace.last;
}

void het_step_region_end(het_strategy_ctx *ctx, const char *event, int arg, double t0) {
    het_pace_mark(&ctx->pace);
    het_trace_add(ctx->trace, event, ctx->lane.tid, arg, t0, ctx->pace.mid);
    if (ctx->pace.factor > 1.0)
        het_trace_add(ctx->trace, "slowdown (emulated)", ctx->lane.tid, arg, ctx->pace.mid,
                      ctx->pace.last);
}

/* ---------------------------------------------------------------- reducers */

/* Layer `layer`'s gradients [off, off+count) are final: pace the compute that produced them,
 * then mark the range ready (its bucket starts when complete). */
static void reducer_grad_hook(void *user, int layer, size_t off, size_t count) {
    het_reducer *r = user;
    if (!r->armed || r->hook_failed) return;
    het_strategy_ctx *ctx = r->ctx;
    het_pace_piece(&ctx->pace, HET_PIECE_TO_LAYER, layer, -1);
    het_pace_mark(&ctx->pace);
    double t1 = ctx->pace.last;
    if (ctx->pace.factor > 1.0)
        het_trace_add(ctx->trace, "slowdown (emulated)", ctx->lane.tid, layer, ctx->pace.mid,
                      t1);
    int st = HET_OK;
    if ((r->flags & HET_REDUCE_FIGURES) && !r->figures_ready) { /* the batch's first hook */
        het_batch_result b;
        het_model_batch_result(ctx->model, &b);
        float *tail = het_model_grads(ctx->model) + het_model_n_params(ctx->model);
        tail[0] = (float)b.loss_sum;
        tail[1] = (float)b.correct;
        r->figures_ready = 1;
        st = het_buckets_ready(r->buckets, het_model_n_params(ctx->model), 2);
    }
    int k = het_buckets_bucket_of(r->buckets, off);
    if (!st) st = het_buckets_ready(r->buckets, off, count);
    if (st) r->hook_failed = st;
    /* MPI inside backward: posting buckets, progressing them, and completing the last one at
     * once (waiting for the other ranks): its own event, not hidden in forward+backward */
    double t2 = het_lane_now(&ctx->lane);
    if (t2 - t1 >= 10e-6)
        het_trace_add(ctx->trace, "all-reduce in backward", ctx->lane.tid, layer, t1, t2);
    if (k >= 0) r->bucket_t0[k] = t1; /* hooks run backwards: the last one starts it */
    het_pace_skip(&ctx->pace); /* the time in MPI is not compute */
}

int het_reducer_create(het_reducer **out, het_strategy_ctx *ctx, het_comm_scope s,
                       float bucket_mb, int flags) {
    *out = NULL;
    if (ctx->n_reducers == HET_MAX_REDUCERS)
        return het_error_set(HET_EINVAL, "step: more than %d reducers", HET_MAX_REDUCERS);
    het_reducer *r = calloc(1, sizeof *r);
    if (!r) return het_error_set(HET_ENOMEM, "out of memory for a reducer");
    r->ctx = ctx;
    r->scope = s;
    r->flags = flags;
    r->bucket_mb = bucket_mb;
    r->ranks = ctx->comm ? het_comm_scope_size(ctx->comm, s) : 1;
    int64_t spe = ctx->cfg->batch > 0 ? (ctx->n_train + ctx->cfg->batch - 1) / ctx->cfg->batch
                                       : 1;
    r->cap_log = (int)(spe > 0 ? spe + 1 : 1);
    r->log_c = malloc((size_t)r->cap_log * sizeof(double));
    r->log_m = malloc((size_t)r->cap_log * sizeof(double));
    ctx->reducers[ctx->n_reducers++] = r;
    if (!r->log_c || !r->log_m) return het_error_set(HET_ENOMEM, "out of memory for a reducer");
    *out = r;
    if (r->ranks <= 1) return HET_OK;
    het_model *m = ctx->model;
    int L = het_model_n_layers(m), fig = (flags & HET_REDUCE_FIGURES) != 0;
    size_t *offs = malloc((size_t)(L + 1) * sizeof(size_t));
    if (!offs) return het_error_set(HET_ENOMEM, "out of memory for a reducer");
    for (int i = 0; i < L; i++) {
        size_t n;
        het_model_layer_params(m, i, &offs[i], &n);
    }
    offs[L] = het_model_n_params(m); /* the figures: 2 floats of the gradient buffer's tail */
    size_t bytes_max = (size_t)((double)bucket_mb * 1048576.0);
    int st = het_buckets_create(&r->buckets, ctx->comm, s, het_model_grads(m),
                                het_model_n_params(m) + (fig ? 2 : 0), offs, L + fig, bytes_max,
                                NULL, 0);
    free(offs);
    /* the world's gradients go flat or in two levels (--allreduce-algo; AUTO: by the nodes) */
    if (!st && s == HET_COMM_WORLD)
        st = het_buckets_set_algo(r->buckets, (het_allreduce_algo)ctx->cfg->allreduce_algo);
    /* --precision bf16: the gradients as bf16 on the wire, summed in fp32; the figures fp32 */
    if (!st && ctx->cfg->precision == HET_PREC_BF16)
        st = het_buckets_set_wire(r->buckets, HET_WIRE_BF16, het_model_n_params(m));
    if (st) return st;
    r->n_buckets = het_buckets_n(r->buckets);
    r->bucket_t0 = calloc((size_t)(r->n_buckets > 0 ? r->n_buckets : 1), sizeof(double));
    if (!r->bucket_t0) return het_error_set(HET_ENOMEM, "out of memory for a reducer");
    het_model_hook h = {reducer_grad_hook, NULL, r};
    return het_model_add_hook(m, &h);
}

void het_reducer_free(het_strategy_ctx *ctx, het_reducer *r) {
    if (!r) return;
    for (int i = 0; i < ctx->n_reducers; i++)
        if (ctx->reducers[i] == r) {
            memmove(&ctx->reducers[i], &ctx->reducers[i + 1],
                    (size_t)(ctx->n_reducers - i - 1) * sizeof r);
            ctx->n_reducers--;
            break;
        }
    if (r->buckets) het_model_remove_hook(ctx->model, r);
    het_buckets_free(r->buckets);
    free(r->bucket_t0);
    free(r->log_c);
    free(r->log_m);
    free(r);
}

int het_reducer_ranks(const het_reducer *r) { return r ? r->ranks : 1; }

void het_step_free(het_strategy_ctx *ctx) {
    while (ctx->n_reducers > 0) het_reducer_free(ctx, ctx->reducers[ctx->n_reducers - 1]);
}

/* ---------------------------------------------------------------- steps */

int het_step_grads(het_strategy_ctx *ctx, het_reducer *red, const int64_t *idx, int count,
                   float grad_scale, uint64_t seed, het_batch_result *res) {
    double t0 = het_step_region_begin(ctx);
    ctx->pace.piece_count = count; /* the samples the pieces of this step cost */
    het_stall_where("gradients", ctx->epoch + 1, (long long)ctx->step);
    if (ctx->comm) ctx->comm_mark = het_comm_get_stats(ctx->comm);
    if (red && red->buckets) {
        red->armed = 1;
        red->hook_failed = HET_OK;
        red->figures_ready = 0;
        float *tail = het_model_grads(ctx->model) + het_model_n_params(ctx->model);
        tail[0] = tail[1] = 0.0f; /* a rank without samples adds nothing */
        memset(red->bucket_t0, 0, (size_t)red->n_buckets * sizeof(double));
    }
    int st = het_batch_grads(ctx->model, &(het_batch){ctx->train, idx, count, ctx->x, ctx->y},
                             grad_scale, seed, res);
    if (red) red->armed = 0;
    /* the compute after the last hook (all of it without buckets) */
    het_pace_piece(&ctx->pace, HET_PIECE_FB, 0, count);
    het_step_region_end(ctx, "forward+backward", (int)ctx->step, t0);
    if (st) return st;
    return red && red->buckets ? red->hook_failed : HET_OK;
}

/* Appends this step's (compute, MPI time) to red's log, growing it if an epoch runs longer
 * than planned (an allocation only then). */
static int log_step(het_reducer *r, double c, double m) {
    if (r->n_log == r->cap_log) {
        int cap = 2 * r->cap_log;
        double *a = realloc(r->log_c, (size_t)cap * sizeof(double));
        if (a) r->log_c = a;
        double *b = a ? realloc(r->log_m, (size_t)cap * sizeof(double)) : NULL;
        if (!a || !b) return het_error_set(HET_ENOMEM, "out of memory for the step log");
        r->log_m = b;
        r->cap_log = cap;
    }
    r->log_c[r->n_log] = c;
    r->log_m[r->n_log] = m;
    r->n_log++;
    return HET_OK;
}

int het_step_reduce(het_strategy_ctx *ctx, het_reducer *red, const het_batch_result *local,
                    het_batch_result *global) {
    *global = *local;
    double c_mine = ctx->pace.compute_s - ctx->compute_mark;
    ctx->compute_mark = ctx->pace.compute_s;
    if (!red || !red->buckets) return HET_OK;
    double t0 = het_lane_now(&ctx->lane);
    int st = het_buckets_wait(red->buckets);
    double t1 = het_lane_now(&ctx->lane);
    het_trace_add(ctx->trace, "wait for all-reduce", ctx->lane.tid, (int)ctx->step, t0, t1);
    const char *ev = red->bucket_mb > 0 ? "bucket all-reduce" : "flat all-reduce";
    for (int k = 0; k < red->n_buckets; k++)
        het_trace_add(ctx->trace, ev, HET_TID_COMM, k, red->bucket_t0[k] > 0 ?
                      red->bucket_t0[k] : t0, t1);
    if (st) return st;
    if (red->flags & HET_REDUCE_FIGURES) {
        const float *tail = het_model_grads(ctx->model) + het_model_n_params(ctx->model);
        global->loss_sum = tail[0];
        global->correct = (int)lrintf(tail[1]);
    }
    het_comm_stats now = het_comm_get_stats(ctx->comm);
    return log_step(red, c_mine, now.comm_s - ctx->comm_mark.comm_s);
}

int het_step_update(het_strategy_ctx *ctx, float lr) {
    double t0 = het_step_region_begin(ctx);
    int bad = 0;
    het_model_update(ctx->model, &(het_update){&ctx->cfg->optim, lr, ctx->opt_state,
                                               ctx->step + 1, &bad});
    het_pace_piece(&ctx->pace, HET_PIECE_OPT, 0, 0);
    het_step_region_end(ctx, "optimizer", (int)ctx->step, t0);
    ctx->step++;
    return !bad;
}

/* A non-finite step after the sum over red's scope (the same verdict on every rank of it):
 * stops, naming the rank whose own loss was not finite if one was. */
static int stop_step(het_strategy_ctx *ctx, het_reducer *red, const het_batch_result *local,
                     double loss, int64_t step) {
    het_nonfinite e = het_step_diagnose(ctx, loss, step);
    het_comm_scope s = red && red->buckets ? red->scope : HET_COMM_NONE;
    return het_step_stop(ctx, s, isfinite(local->loss_sum) ? NULL : &e, &e);
}

int het_step_sync(het_strategy_ctx *ctx, het_reducer *red, const int64_t *idx, int count,
                  float grad_scale, uint64_t seed, float lr, het_batch_result *local,
                  het_batch_result *global) {
    int st, bad = 0;
    ctx->skip_record = 0;
    if (het_reducer_ranks(red) <= 1 && ctx->cfg->on_nan == HET_ON_NAN_STOP) {
        /* nothing between gradients and update: fold it in */
        double t0 = het_step_region_begin(ctx);
        het_update u = {&ctx->cfg->optim, lr, ctx->opt_state, ctx->step + 1, &bad};
        st = het_batch_step(ctx->model, &(het_batch){ctx->train, idx, count, ctx->x, ctx->y},
                            grad_scale, seed, &u, local);
        het_pace_piece(&ctx->pace, HET_PIECE_STEP, 0, count);
        het_step_region_end(ctx, "forward+backward+optimizer", (int)ctx->step, t0);
        if (st) return st;
        *global = *local;
        ctx->step++;
        if (!bad && isfinite(local->loss_sum)) return HET_OK;
        return stop_step(ctx, NULL, local, local->loss_sum, ctx->step);
    }
    if ((st = het_step_grads(ctx, red, idx, count, grad_scale, seed, local))) return st;
    if ((st = het_step_reduce(ctx, red, local, global))) return st;
    if (!het_step_finite(ctx, global->loss_sum)) {
        if (ctx->cfg->on_nan == HET_ON_NAN_STOP)
            return stop_step(ctx, red, local, global->loss_sum, ctx->step + 1);
        ctx->skip_record = 1; /* the weights are finite: the last update was checked */
        ctx->step++;
        return HET_OK;
    }
    if (het_step_update(ctx, lr)) return HET_OK;
    return stop_step(ctx, red, local, global->loss_sum, ctx->step); /* overflow, or a NaN
                                                                      gradient, loss finite */
}

/* ---------------------------------------------------------------- epochs */

void het_step_epoch_begin(het_strategy_ctx *ctx) {
    memset(&ctx->times, 0, sizeof ctx->times);
    ctx->epoch_compute0 = ctx->compute_mark = ctx->pace.compute_s;
    if (ctx->comm) ctx->epoch_comm0 = het_comm_get_stats(ctx->comm);
    het_comm_links_begin(ctx->comm);
    for (int i = 0; i < ctx->n_reducers; i++) ctx->reducers[i]->n_log = 0;
}

/* Waiting of this rank behind red's scope this epoch: sum over steps of
 * min(m_r, max_q c_q - c_r). Two all-reduces (MAX) over the scope: the step counts, then the
 * step log. */
static int settle_wait(het_strategy_ctx *ctx, het_reducer *r, double *wait) {
    *wait = 0.0;
    if (!r->buckets) return HET_OK;
    int n[2] = {r->n_log, -r->n_log};
    int rc = het_comm_allreduce_aside(ctx->comm, r->scope, n, 2, HET_T_INT, HET_OP_MAX);
    if (rc) return rc;
    if (n[0] != -n[1])
        return het_error_set(HET_EINVAL, "step log: ranks of one scope reduced %d to %d "
                             "times this epoch (a strategy bug)", -n[1], n[0]);
    if (r->n_log == 0) return HET_OK;
    double *cmax = malloc((size_t)r->n_log * sizeof(double));
    if (!cmax) return het_error_set(HET_ENOMEM, "out of memory settling the time split");
    memcpy(cmax, r->log_c, (size_t)r->n_log * sizeof(double));
    rc = het_comm_allreduce_aside(ctx->comm, r->scope, cmax, r->n_log, HET_T_DOUBLE, HET_OP_MAX);
    if (!rc)
        for (int s = 0; s < r->n_log; s++)
            *wait += fmin(fmax(cmax[s] - r->log_c[s], 0.0), r->log_m[s]);
    free(cmax);
    return rc;
}

int het_step_epoch_end(het_strategy_ctx *ctx) {
    het_times *t = &ctx->times;
    t->compute_s = ctx->pace.compute_s - ctx->epoch_compute0;
    t->wait_s = 0.0;
    for (int i = 0; i < ctx->n_reducers; i++) {
        double w;
        int st = settle_wait(ctx, ctx->reducers[i], &w);
        if (st) return st;
        t->wait_s += w;
    }
    if (ctx->comm && het_clock_virtual()) { /* what the operations' ends added to V */
        het_comm_stats now = het_comm_get_stats(ctx->comm);
        t->wait_s = now.vwait_s - ctx->epoch_comm0.vwait_s;
        t->comm_s = now.vnet_s - ctx->epoch_comm0.vnet_s;
        t->delay_s = 0.0;
    } else if (ctx->comm) {
        het_comm_stats now = het_comm_get_stats(ctx->comm);
        double mpi = now.comm_s - ctx->epoch_comm0.comm_s;
        if (t->wait_s > mpi) t->wait_s = mpi;
        t->comm_s = mpi - t->wait_s;
        t->delay_s = now.delay_s - ctx->epoch_comm0.delay_s;
    }
    double mine[4] = {t->compute_s, t->comm_s, t->wait_s, t->delay_s}, bytes[2] = {0, 0};
    if (ctx->comm) {
        het_comm_stats now = het_comm_get_stats(ctx->comm);
        bytes[0] = (double)(now.bytes_node - ctx->epoch_comm0.bytes_node);
        bytes[1] = (double)(now.bytes_cross - ctx->epoch_comm0.bytes_cross);
    }
    if (ctx->comm && ctx->size > 1) { /* the network model's sanity counter */
        int rc = het_comm_links_epoch(ctx->comm, &ctx->links);
        if (rc) return rc;
    }
    if (ctx->size <= 1 || ctx->world == MPI_COMM_NULL) {
        memcpy(ctx->rank_times, mine, sizeof mine);
        if (ctx->rank_bytes) memcpy(ctx->rank_bytes, bytes, sizeof bytes);
        return HET_OK;
    }
    het_stall_where("time split", ctx->epoch + 1, ctx->step);
    double six[6] = {mine[0], mine[1], mine[2], mine[3], bytes[0], bytes[1]};
    double *all = malloc((size_t)ctx->size * sizeof six);
    if (!all) return het_error_set(HET_ENOMEM, "out of memory for the time split");
    int rc = het_comm_allgather_aside(ctx->comm, HET_COMM_WORLD, six, all, sizeof six);
    for (int q = 0; !rc && q < ctx->size; q++) {
        memcpy(ctx->rank_times + 4 * q, all + 6 * q, 4 * sizeof(double));
        if (ctx->rank_bytes) memcpy(ctx->rank_bytes + 2 * q, all + 6 * q + 4, 2 * sizeof(double));
    }
    free(all);
    return rc;
}

void het_step_check_fail(het_strategy_ctx *ctx) {
    if (!ctx->fail) return;
    const double ran = het_lane_now(&ctx->lane) - ctx->fail_t0;
    if ((ctx->fail_step > 0 && ctx->step >= ctx->fail_step) ||
        (ctx->fail_time > 0 && ran >= ctx->fail_time))
        ctx->fail(ctx); /* does not return */
}

int het_step_pause(het_strategy_ctx *ctx, int64_t next, int64_t n) {
    if (ctx->pause_step <= 0 || ctx->step < ctx->pause_step || next >= n) return 0;
    ctx->paused = 1;
    ctx->epoch_pos = next;
    return 1;
}

int het_step_eval_take(het_strategy_ctx *ctx, int64_t next, int64_t n) {
    const int64_t every = ctx->cfg->eval_every;
    if (every <= 0 || ctx->pause_step <= 0 || ctx->step < ctx->pause_step || next >= n) return 0;
    ctx->pause_step = (ctx->step / every + 1) * every;
    return 1;
}

int het_step_eval_due(het_strategy_ctx *ctx, int64_t next, int64_t n) {
    if (!ctx->eval_fn || !het_step_eval_take(ctx, next, n)) return HET_OK;
    ctx->epoch_pos = next;
    int st = ctx->eval_fn(ctx, ctx->eval_user);
    ctx->epoch_pos = 0;
    return st;
}

void het_step_resized(het_strategy_ctx *ctx, const char *fmt, ...) {
    size_t k = strlen(ctx->resized);
    if (k + 3 >= sizeof ctx->resized) return;
    memcpy(ctx->resized + k, "; ", 3);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->resized + k + 2, sizeof ctx->resized - k - 2, fmt, ap);
    va_end(ap);
}

int het_step_record(het_strategy_ctx *ctx, het_epoch_sums *s, const het_step_rec *rec, float lr,
                    double t0) {
    het_step_check_fail(ctx);
    if (ctx->skip_record) { /* counted once: by each rank deciding alone, else by rank 0 */
        ctx->skip_record = 0;
        s->skipped += rec->local || ctx->rank == 0;
        return HET_OK;
    }
    s->loss += rec->mine->loss_sum;
    s->correct += rec->mine->correct;
    s->samples += (double)rec->count;
    const het_batch_result *shown = rec->shown ? rec->shown : rec->mine;
    const int64_t shown_n = rec->shown ? rec->shown_n : rec->count;
    if (!ctx->on_step || (rec->local && shown_n == 0)) return HET_OK;
    het_step_info info = {ctx->epoch + 1, ctx->step, shown->loss_sum, shown->correct,
                          (int)shown_n, rec->local, lr, het_lane_now(&ctx->lane) - t0};
    return ctx->on_step(ctx, &info);
}

int het_step_epoch_figures(het_strategy_ctx *ctx, het_epoch_sums *s, float lr,
                           het_epoch_stats *st) {
    double v[4] = {s->loss, s->correct, s->samples, s->skipped};
    het_stall_where("epoch figures", ctx->epoch + 1, (long long)ctx->step);
    int rc = het_step_sum_f64(ctx, v, 4);
    if (rc) return rc;
    st->skipped = (int64_t)v[3];
    if (v[2] == 0.0 && v[3] > 0.0)
        return het_error_set(HET_EINVAL, "epoch %d: every step was skipped (%lld with a "
                             "non-finite loss or gradient); training diverged (try a lower "
                             "--lr)", ctx->epoch + 1, (long long)st->skipped);
    st->samples = (int64_t)v[2];
    st->loss = v[0] / v[2];
    st->train_acc = v[1] / v[2];
    st->lr = lr;
    return HET_OK;
}

/* ---------------------------------------------------------------- world helpers */

int het_step_sum_f64(het_strategy_ctx *ctx, double *v, size_t n) {
    if (ctx->size <= 1 || !ctx->comm) return HET_OK;
    return het_comm_allreduce_sum_f64(ctx->comm, HET_COMM_WORLD, v, n);
}

void het_step_aside_begin(het_strategy_ctx *ctx, het_step_aside *a) {
    a->v = het_lane_now(&ctx->lane);
    if (ctx->comm) a->comm = het_comm_get_stats(ctx->comm);
    a->link_mark = het_comm_link_mark(ctx->comm);
    a->queue = het_comm_queue_get(ctx->comm);
    het_comm_arbiter_hold(ctx->comm, a->v); /* the arbiter sees none of it */
}

void het_step_aside_end(het_strategy_ctx *ctx, const het_step_aside *a) {
    het_lane_rewind(&ctx->lane, a->v);
    if (!ctx->comm) return;
    het_comm_arbiter_hold(ctx->comm, -1.0);
    het_comm_link_rewind(ctx->comm, a->link_mark);
    het_comm_queue_set(ctx->comm, a->queue);
    het_comm_stats now = het_comm_get_stats(ctx->comm), *z = &ctx->epoch_comm0;
    z->comm_s += now.comm_s - a->comm.comm_s;
    z->delay_s += now.delay_s - a->comm.delay_s;
    z->vwait_s += now.vwait_s - a->comm.vwait_s;
    z->vnet_s += now.vnet_s - a->comm.vnet_s;
    z->bytes += now.bytes - a->comm.bytes;
    z->calls += now.calls - a->comm.calls;
    z->bytes_cross += now.bytes_cross - a->comm.bytes_cross;
    z->calls_cross += now.calls_cross - a->comm.calls_cross;
    z->bytes_node += now.bytes_node - a->comm.bytes_node;
    z->calls_node += now.calls_node - a->comm.calls_node;
}

int het_step_average(het_strategy_ctx *ctx, float *v, size_t n, double weight) {
    if (ctx->size <= 1 || !ctx->comm || n == 0) return HET_OK;
    if (weight == 1.0 / ctx->size) { /* equal weights: sum, then scale (as it always was) */
        int st = het_comm_allreduce_sum(ctx->comm, HET_COMM_WORLD, v, n);
        float inv = 1.0f / (float)ctx->size;
        for (size_t i = 0; !st && i < n; i++) v[i] *= inv;
        return st;
    }
    for (size_t i = 0; i < n; i++) v[i] = (float)(v[i] * weight);
    return het_comm_allreduce_sum(ctx->comm, HET_COMM_WORLD, v, n);
}

int het_step_eval_mean(het_strategy_ctx *ctx, int begin, float **keep) {
    het_model *m = ctx->model;
    float *p = het_model_params(m), *s = het_model_state(m);
    const size_t np = het_model_n_params(m), ns = het_model_n_state(m);
    if (ctx->size <= 1) return HET_OK;
    if (!begin) {
        if (!*keep) return HET_OK;
        memcpy(p, *keep, np * sizeof *p);
        if (ns) memcpy(s, *keep + np, ns * sizeof *s);
        return HET_OK;
    }
    if (!*keep && !(*keep = malloc((np + ns) * sizeof **keep)))
        return het_error_set(HET_ENOMEM, "out of memory for the evaluation's copy of the model");
    memcpy(*keep, p, np * sizeof *p);
    if (ns) memcpy(*keep + np, s, ns * sizeof *s);
    int64_t lo, len;
    het_partition_even(ctx->cfg->batch, ctx->size, ctx->rank, &lo, &len);
    const double w = (double)len / (double)ctx->cfg->batch;
    int st = het_step_average(ctx, p, np, w);
    return st ? st : het_step_average(ctx, s, ns, w);
}

int het_step_average_state(het_strategy_ctx *ctx, double weight) {
    het_model *m = ctx->model;
    return het_step_average(ctx, het_model_state(m), het_model_n_state(m), weight);
}

int het_step_save_per_rank(het_strategy_ctx *ctx, het_ckpt_writer *w, const char *tag,
                           const void *data, size_t bytes) {
    if (ctx->size <= 1 || ctx->world == MPI_COMM_NULL)
        return w ? het_ckpt_put(w, tag, data, bytes) : HET_OK;
    if (bytes > (size_t)INT32_MAX / (size_t)ctx->size)
        return het_error_set(HET_EINVAL, "checkpoint section %s: %zu bytes per rank is too "
                             "large", tag, bytes);
    char *all = ctx->rank == 0 ? malloc(bytes * (size_t)ctx->size + 1) : NULL;
    int st = het_comm_gather_aside(ctx->comm, HET_COMM_WORLD, data, all, bytes, 0);
    if (st) {
        char why[256];
        snprintf(why, sizeof why, "%s", het_error_msg());
        het_error_set(st, "gathering checkpoint section %s: %s", tag, why);
    } else if (ctx->rank == 0 && !all) st = het_error_set(HET_ENOMEM, "out of memory for %s", tag);
    else if (w) st = het_ckpt_put(w, tag, all, bytes * (size_t)ctx->size);
    free(all);
    return st;
}

int het_step_load_per_rank(het_strategy_ctx *ctx, het_ckpt_reader *r, const char *tag,
                           void *data, size_t bytes) {
    const void *p;
    size_t n;
    uint64_t off;
    int st = het_ckpt_find(r, tag, &p, &n, &off);
    if (st) return st;
    size_t want = bytes * (size_t)ctx->size;
    if (n != want)
        return het_error_set(HET_EFORMAT, "%s: offset %llu: section '%s' of %zu bytes, expected "
                             "%zu (%d ranks x %zu): was it written by another number of ranks?",
                             het_ckpt_reader_path(r), (unsigned long long)off - 8, tag, n, want,
                             ctx->size, bytes);
    memcpy(data, (const char *)p + bytes * (size_t)ctx->rank, bytes);
    return HET_OK;
}

int het_step_calibrate(het_strategy_ctx *ctx, double *speeds) {
    const het_train_config *c = ctx->cfg;
    double rate = 0.0;
    int b = c->batch < 64 ? c->batch : 64;
    if (b > ctx->n_train) b = (int)ctx->n_train;
    int64_t *idx = malloc((size_t)b * sizeof *idx);
    /* Ranks that share a machine take turns (the others sleep), so that ranks sharing cores do
     * not slow each other's measurement; machines measure at the same time. */
    int turns = 1, mine = 0, st = idx ? HET_OK : het_error_set(HET_ENOMEM, "out of memory "
                                                                "calibrating");
    int shared = ctx->comm && ctx->size > 1 && het_comm_host(ctx->comm, &mine, &turns) == HET_OK;
    for (int turn = 0; turn < turns; turn++) {
        if (turn == mine && !st)
            st = het_calibrate_rank(ctx->model, ctx->train, b, c->calibrate_steps, &ctx->pace,
                                    ctx->x, ctx->y, idx, &rate);
        if (shared) {
            int bs = het_comm_host_barrier(ctx->comm);
            if (!st) st = bs;
        }
    }
    free(idx);
    if (ctx->world != MPI_COMM_NULL && ctx->size > 1) st = het_comm_agree(ctx->world, st);
    if (st) return st;
    memset(speeds, 0, (size_t)ctx->size * sizeof(double));
    speeds[ctx->rank] = rate;
    if ((st = het_step_sum_f64(ctx, speeds, (size_t)ctx->size))) return st;
    return HET_OK;
}

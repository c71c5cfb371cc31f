/* The step machinery shared by strategies: local gradients with the emulated slowdown, the
 * gradient sum over ranks (bucketed from the model's gradient hook, or flat), the optimizer
 * step, and the per-rank time split.
 *
 * Time split of one step on rank r. c_r = compute since the previous gradient reduction
 * (previous optimizer step + this forward/backward, slowdown included): it decides when r
 * arrives at the reduction. After the gradients, one small all-reduce of P + 2 floats carries
 * every rank's c_q (rank q writes slot q, the others 0) and the local loss sum and correct
 * count, so afterwards every rank knows all compute times and the global loss. With m_r = time
 * inside MPI this step (het_comm_stats.comm_s):
 *   wait_r = min(m_r, max_q c_q - c_r)    (waiting for slower ranks)
 *   comm_r = m_r - wait_r                  (moving bytes)
 *   delay_r = the emulated network's sleeps (het_comm_stats.delay_s).
 * The loss travels in a separate reduction (not in het_buckets' `extra`) because with buckets
 * the last bucket starts inside backward, before the loss is returned; the cost is the same
 * (het_buckets posts its extra floats as a separate request too). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/strategy.h"
#include "core/trace.h"
#include "hetrain/batch.h"

uint64_t het_step_seed(const het_strategy_ctx *ctx, int64_t step) {
    uint64_t s = het_batch_seed(ctx->cfg->seed, step);
    if (ctx->rank == 0) return s;
    het_rng r;
    het_rng_seed2(&r, s, (uint64_t)ctx->rank);
    return het_rng_u64(&r);
}

/* Layer i's parameters [off, off+count) are final: pace the compute that produced them, then
 * start their bucket's all-reduce when complete. */
static void grad_hook(void *user, int layer, size_t off, size_t count) {
    het_strategy_ctx *ctx = user;
    if (ctx->hook_failed) return;
    double t0 = het_now();
    het_pace_mark(&ctx->pace);
    double t1 = ctx->pace.last;
    if (ctx->pace.factor > 1.0) het_trace_add(ctx->trace, "slowdown (emulated)", HET_TID_COMPUTE, layer, t0, t1);
    ctx->t_hook = t1;
    int st = het_buckets_ready(ctx->buckets, off, count);
    if (st) ctx->hook_failed = st;
    /* hooks come in reverse layer order: the bucket's last hook (its lowest layer) starts it */
    int k = ctx->bucket_of_layer[layer];
    if (k >= 0) ctx->bucket_t0[k] = t1;
    het_pace_skip(&ctx->pace);
}

int het_step_sync_init(het_strategy_ctx *ctx) {
    het_model *m = ctx->model;
    int L = het_model_n_layers(m);
    ctx->extra = calloc((size_t)ctx->size + 2, sizeof(float));
    ctx->bucket_of_layer = malloc((size_t)(L > 0 ? L : 1) * sizeof(int));
    ctx->bucket_t0 = calloc((size_t)(L > 0 ? L : 1), sizeof(double));
    size_t *offs = malloc((size_t)(L > 0 ? L : 1) * sizeof(size_t));
    if (!ctx->extra || !ctx->bucket_of_layer || !ctx->bucket_t0 || !offs) {
        free(offs);
        return het_error_set(HET_ENOMEM, "out of memory for the gradient all-reduce");
    }
    /* the bucket of each layer, by the rule of het_buckets (comm.h): consecutive non-empty
     * ranges from the end of the buffer, up to bucket_bytes each */
    size_t bytes_max = (size_t)((double)ctx->cfg->bucket_mb * 1048576.0);
    int nb = 0;
    size_t cur = 0;
    for (int i = L - 1; i >= 0; i--) {
        size_t off, n;
        het_model_layer_params(m, i, &off, &n);
        offs[i] = off;
        ctx->bucket_of_layer[i] = -1;
        if (n == 0) continue;
        size_t b = n * sizeof(float);
        if (nb == 0 || (bytes_max > 0 && cur + b > bytes_max)) {
            nb++;
            cur = 0;
        }
        ctx->bucket_of_layer[i] = nb - 1;
        cur += b;
    }
    ctx->n_buckets = nb;
    ctx->compute_mark = ctx->pace.compute_s;
    int st = HET_OK;
    if (ctx->size > 1 && ctx->cfg->bucket_mb > 0 && L > 0) {
        st = het_buckets_create(&ctx->buckets, ctx->comm, HET_COMM_WORLD, het_model_grads(m),
                                het_model_n_params(m), offs, L, bytes_max, NULL, 0);
        if (!st) het_model_set_grad_hook(m, grad_hook, ctx);
    }
    free(offs);
    return st;
}

void het_step_sync_free(het_strategy_ctx *ctx) {
    if (ctx->buckets) het_model_set_grad_hook(ctx->model, NULL, NULL);
    het_buckets_free(ctx->buckets);
    ctx->buckets = NULL;
    free(ctx->extra);
    free(ctx->bucket_of_layer);
    free(ctx->bucket_t0);
    ctx->extra = NULL;
    ctx->bucket_of_layer = NULL;
    ctx->bucket_t0 = NULL;
}

int het_step_grads(het_strategy_ctx *ctx, const int64_t *idx, int count, float grad_scale,
                   uint64_t seed, het_batch_result *res) {
    het_pace_begin(&ctx->pace);
    double t0 = ctx->pace.last;
    ctx->hook_failed = HET_OK;
    if (ctx->bucket_t0) memset(ctx->bucket_t0, 0, (size_t)ctx->n_buckets * sizeof(double));
    if (ctx->comm) ctx->comm_mark = het_comm_get_stats(ctx->comm);
    int st = het_batch_grads(ctx->model, ctx->train, idx, count, ctx->x, ctx->y,
                                          grad_scale, seed, res);
    double t1 = het_now();
    /* the compute after the last hook (all of it without buckets) */
    double ts = het_now();
    het_pace_mark(&ctx->pace);
    if (ctx->pace.factor > 1.0)
        het_trace_add(ctx->trace, "slowdown (emulated)", HET_TID_COMPUTE, -1, ts, ctx->pace.last);
    het_trace_add(ctx->trace, "forward+backward", HET_TID_COMPUTE, (int)ctx->step, t0, t1);
    if (st) return st;
    return ctx->hook_failed;
}

int het_step_local(het_strategy_ctx *ctx, const int64_t *idx, int count, float grad_scale,
                   uint64_t seed, float lr, het_batch_result *res) {
    het_pace_begin(&ctx->pace);
    double t0 = ctx->pace.last;
    het_update u = {&ctx->cfg->optim, lr, ctx->opt_state, ctx->step + 1};
    int st = het_batch_step(ctx->model, ctx->train, idx, count, ctx->x, ctx->y, grad_scale, seed,
                            &u, res);
    double t1 = het_now();
    het_pace_mark(&ctx->pace);
    het_trace_add(ctx->trace, "forward+backward+optimizer", HET_TID_COMPUTE, (int)ctx->step, t0, t1);
    if (ctx->pace.factor > 1.0) het_trace_add(ctx->trace, "slowdown (emulated)", HET_TID_COMPUTE, -1, t1, ctx->pace.last);
    ctx->times.compute_s += ctx->pace.compute_s - ctx->compute_mark;
    ctx->compute_mark = ctx->pace.compute_s;
    if (st) return st;
    ctx->step++;
    return HET_OK;
}

int het_step_reduce(het_strategy_ctx *ctx, het_batch_result *res) {
    const int P = ctx->size;
    if (P <= 1 || !ctx->comm) {
        ctx->times.compute_s += ctx->pace.compute_s - ctx->compute_mark;
        ctx->compute_mark = ctx->pace.compute_s;
        return HET_OK;
    }
    het_model *m = ctx->model;
    double c_mine = ctx->pace.compute_s - ctx->compute_mark;
    double t0 = het_now();
    int st;
    if (ctx->buckets) {
        st = het_buckets_wait(ctx->buckets);
        double t1 = het_now();
        het_trace_add(ctx->trace, "wait for all-reduce", HET_TID_COMPUTE, (int)ctx->step, t0, t1);
        for (int k = 0; k < ctx->n_buckets; k++)
            het_trace_add(ctx->trace, "bucket all-reduce", HET_TID_COMM, k, ctx->bucket_t0[k] > 0 ?
                          ctx->bucket_t0[k] : t0, t1);
    } else {
        st = het_comm_allreduce_sum(ctx->comm, HET_COMM_WORLD, het_model_grads(m),
                                    het_model_n_params(m));
        double t1 = het_now();
        het_trace_add(ctx->trace, "flat all-reduce", HET_TID_COMM, (int)ctx->step, t0, t1);
        het_trace_add(ctx->trace, "wait for all-reduce", HET_TID_COMPUTE, (int)ctx->step, t0, t1);
    }
    if (st) return st;
    float *e = ctx->extra;
    memset(e, 0, ((size_t)P + 2) * sizeof(float));
    e[ctx->rank] = (float)c_mine;
    e[P] = (float)res->loss_sum;
    e[P + 1] = (float)res->correct;
    if ((st = het_comm_allreduce_sum(ctx->comm, HET_COMM_WORLD, e, (size_t)P + 2))) return st;
    res->loss_sum = e[P];
    res->correct = (int)lrintf(e[P + 1]);
    double cmax = 0.0;
    for (int q = 0; q < P; q++) cmax = fmax(cmax, (double)e[q]);
    het_comm_stats now = het_comm_get_stats(ctx->comm);
    double mpi = now.comm_s - ctx->comm_mark.comm_s;
    double wait = fmin(fmax(cmax - c_mine, 0.0), mpi);
    ctx->times.compute_s += c_mine;
    ctx->times.wait_s += wait;
    ctx->times.comm_s += mpi - wait;
    ctx->times.delay_s += now.delay_s - ctx->comm_mark.delay_s;
    ctx->compute_mark = ctx->pace.compute_s;
    return HET_OK;
}

void het_step_optim(het_strategy_ctx *ctx, float lr) {
    het_pace_begin(&ctx->pace);
    double t0 = ctx->pace.last;
    het_model_update(ctx->model, &(het_update){&ctx->cfg->optim, lr, ctx->opt_state, ctx->step + 1});
    double t1 = het_now();
    het_pace_mark(&ctx->pace);
    het_trace_add(ctx->trace, "optimizer", HET_TID_COMPUTE, (int)ctx->step, t0, t1);
    if (ctx->pace.factor > 1.0) het_trace_add(ctx->trace, "slowdown (emulated)", HET_TID_COMPUTE, -2, t1,
                                              ctx->pace.last);
    ctx->step++;
}

int het_step_sum_doubles(het_strategy_ctx *ctx, double *v, int n) {
    if (ctx->size <= 1 || ctx->world == MPI_COMM_NULL) return HET_OK;
    int err = MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, ctx->world);
    if (err != MPI_SUCCESS) return het_error_set(HET_EMPI, "MPI_Allreduce of %d doubles failed",
                                                 n);
    return HET_OK;
}

int het_step_average_state(het_strategy_ctx *ctx) {
    het_model *m = ctx->model;
    size_t n = het_model_n_state(m);
    if (ctx->size <= 1 || !ctx->comm || n == 0) return HET_OK;
    float *s = het_model_state(m);
    int st = het_comm_allreduce_sum(ctx->comm, HET_COMM_WORLD, s, n);
    if (st) return st;
    float inv = 1.0f / (float)ctx->size;
    for (size_t i = 0; i < n; i++) s[i] *= inv;
    return HET_OK;
}

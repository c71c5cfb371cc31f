/* Calibrated compute costs for the virtual clock (--compute-cost calibrated[:FILE]): rank 0
 * measures the model's compute pieces once, or reads a table `hetrain calibrate --costs-out`
 * wrote, and broadcasts it; every rank's pace then charges each piece the table's cost (its
 * slowdown still multiplies it), so virtual times are the same bits on every run for a given
 * seed, table and configuration, whatever else the host runs.
 *
 * The measurement: at two batch sizes (the global batch and a quarter of it), after a warm-up,
 * HET_COST_REPS passes of forward + backward (a gradient hook records the CPU time from the
 * pass's start to every layer's gradients), of the optimizer update and of the fused one-rank
 * step, each costed as the virtual clock costs a piece (the CPU time of the busiest thread,
 * het_pace_cpu_take); the median of each is fitted by a line in the batch size
 * (het_cost_fit). Parameters, state, optimizer state and gradients are restored afterwards. */
#include <stdlib.h>
#include <string.h>

#include "hetrain/batch.h"
#include "strategy/strategy.h"

#define HET_COST_REPS 7

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The pass being measured: CPU time so far and at each layer's gradient hook. */
typedef struct recorder {
    het_pace *pace;
    double sum;
    double *at; /* by layer, this pass */
} recorder;

static void record_hook(void *user, int layer, size_t off, size_t count) {
    (void)off;
    (void)count;
    recorder *r = user;
    r->sum += het_pace_cpu_take(r->pace);
    r->at[layer] = r->sum;
}

/* Medians at one batch size: t[0] fb, t[1] opt, t[2] step, t[3 + l] to layer l. */
static int measure_at(het_strategy_ctx *ctx, int count, double *t) {
    het_model *m = ctx->model;
    int L = het_model_n_layers(m), st = HET_OK;
    double *v = malloc((size_t)HET_COST_REPS * (size_t)(3 + L) * sizeof *v);
    double *at = calloc((size_t)L, sizeof *at);
    int64_t *idx = malloc((size_t)count * sizeof *idx);
    if (!v || !at || !idx) st = het_error_set(HET_ENOMEM, "compute costs: out of memory");
    for (int i = 0; !st && i < count; i++) idx[i] = i;
    het_pace pace = ctx->pace; /* its threads; nothing is charged */
    recorder rec = {&pace, 0.0, at};
    het_model_hook h = {record_hook, NULL, &rec};
    const het_optim_config *o = &ctx->cfg->optim;
    float lr = ctx->cfg->sched.base_lr;
    for (int rep = -1; !st && rep < HET_COST_REPS; rep++) { /* rep -1: warm-up */
        het_batch_result r;
        memset(at, 0, (size_t)L * sizeof *at);
        if ((st = het_model_add_hook(m, &h))) break;
        rec.sum = 0.0;
        het_pace_cpu_start(&pace);
        st = het_batch_grads(m, ctx->train, idx, count, ctx->x, ctx->y, 1.0f / (float)count,
                             (uint64_t)rep, &r);
        double fb = rec.sum + het_pace_cpu_take(&pace);
        het_model_remove_hook(m, &rec);
        int bad = 0;
        het_pace_cpu_start(&pace);
        het_model_update(m, &(het_update){o, lr, ctx->opt_state, 1, &bad});
        double opt = het_pace_cpu_take(&pace);
        het_model_zero_grads(m);
        het_pace_cpu_start(&pace);
        if (!st)
            st = het_batch_step(m, ctx->train, idx, count, ctx->x, ctx->y, 1.0f / (float)count,
                                (uint64_t)rep, &(het_update){o, lr, ctx->opt_state, 1, &bad},
                                &r);
        double step = het_pace_cpu_take(&pace);
        if (rep < 0) continue;
        v[rep] = fb;
        v[HET_COST_REPS + rep] = opt;
        v[2 * HET_COST_REPS + rep] = step;
        for (int l = 0; l < L; l++) /* a layer without gradients: where backward stopped */
            v[(3 + l) * HET_COST_REPS + rep] = at[l] > 0.0 ? at[l] : fb;
    }
    for (int k = 0; !st && k < 3 + L; k++) t[k] = median(v + k * HET_COST_REPS, HET_COST_REPS);
    free(v);
    free(at);
    free(idx);
    return st;
}

/* Rank 0: measures the table (parameters, state and optimizer state restored). */
static int measure(het_strategy_ctx *ctx, het_costs *k) {
    het_model *m = ctx->model;
    int L = het_model_n_layers(m);
    int hi = ctx->cfg->batch;
    if (hi > ctx->n_train) hi = (int)ctx->n_train;
    if (hi > het_model_max_batch(m)) hi = het_model_max_batch(m);
    int lo = hi / 4 > 0 ? hi / 4 : 1;
    size_t np = het_model_n_params(m), ns = het_model_n_state(m),
           no = het_optim_state_floats(&ctx->cfg->optim, np);
    float *keep = malloc((np + ns + no + 1) * sizeof(float));
    double *t_lo = malloc((size_t)(3 + L) * sizeof(double)),
           *t_hi = malloc((size_t)(3 + L) * sizeof(double));
    int st = keep && t_lo && t_hi ? HET_OK : het_error_set(HET_ENOMEM, "compute costs: out of "
                                                          "memory");
    if (!st) {
        memcpy(keep, het_model_params(m), np * sizeof(float));
        if (ns) memcpy(keep + np, het_model_state(m), ns * sizeof(float));
        if (no) memcpy(keep + np + ns, ctx->opt_state, no * sizeof(float));
        st = measure_at(ctx, lo, t_lo);
        if (!st) st = measure_at(ctx, hi, t_hi);
        memcpy(het_model_params(m), keep, np * sizeof(float));
        if (ns) memcpy(het_model_state(m), keep + np, ns * sizeof(float));
        if (no) memcpy(ctx->opt_state, keep + np + ns, no * sizeof(float));
        het_model_zero_grads(m);
    }
    if (!st) {
        k->lo = lo;
        k->hi = hi;
        k->reps = HET_COST_REPS;
        k->fb = het_cost_fit(lo, t_lo[0], hi, t_hi[0]);
        k->opt = (het_cost_line){0.5 * (t_lo[1] + t_hi[1]), 0.0}; /* no samples in it */
        k->step = het_cost_fit(lo, t_lo[2], hi, t_hi[2]);
        for (int l = 0; l < L; l++) k->to_layer[l] = het_cost_fit(lo, t_lo[3 + l], hi, t_hi[3 + l]);
    }
    free(keep);
    free(t_lo);
    free(t_hi);
    return st;
}

int het_step_costs_setup(het_strategy_ctx *ctx, het_costs *k, const char *file) {
    het_model *m = ctx->model;
    int L = het_model_n_layers(m), st = het_costs_init(k, ctx->cfg->model, L);
    if (!st && ctx->rank == 0) {
        if (file && file[0]) {
            het_costs r;
            st = het_costs_read(&r, file);
            if (!st && (strcmp(r.model, ctx->cfg->model) != 0 || r.n_layers != L))
                st = het_error_set(HET_EINVAL, "%s: costs of %s (%d layers), but this run "
                                   "trains %s (%d layers)", file, r.model, r.n_layers,
                                   ctx->cfg->model, L);
            if (!st) {
                het_costs_free(k);
                *k = r;
            } else if (r.to_layer) {
                het_costs_free(&r);
            }
        } else {
            st = measure(ctx, k);
        }
    }
    if (ctx->world != MPI_COMM_NULL && ctx->size > 1) {
        st = het_comm_agree(ctx->world, st);
        size_t n = het_costs_packed_len(L);
        double *buf = st ? NULL : malloc(n * sizeof *buf);
        if (!st && !buf) st = het_error_set(HET_ENOMEM, "compute costs: out of memory");
        if (!st && ctx->rank == 0) het_costs_pack(k, buf);
        if (!st && MPI_Bcast(buf, (int)n, MPI_DOUBLE, 0, ctx->world) != MPI_SUCCESS)
            st = het_error_set(HET_EMPI, "MPI_Bcast of the compute costs failed");
        if (!st && ctx->rank != 0) st = het_costs_unpack(k, buf);
        free(buf);
        st = het_comm_agree(ctx->world, st);
    }
    if (!st) ctx->pace.costs = k;
    return st;
}

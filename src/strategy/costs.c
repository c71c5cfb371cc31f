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
 * (het_cost_fit). Then, for the pipelines, each segment between two places a range may start
 * (het_model_cut_ok) alone on the range executor: its forward and its backward, timed apart
 * (CPU time of the calling thread, on which a range runs), the median of as many passes,
 * fitted the same way and kept on the segment's first layer. Parameters, state, optimizer
 * state and gradients are restored afterwards.
 *
 * The table also records what it was measured on: the network's fingerprint (the kinds and
 * shapes of its layers: a table of another network is refused), the compute threads and this
 * host's rate on the reference kernel (het_blas_reference_flops), by which a platform's host
 * speeds rescale it (het_step_costs_scale). */
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "hetrain/batch.h"
#include "hetrain/tensor.h"
#include "strategy/strategy.h"

#define HET_COST_REPS 7

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
        st = het_batch_grads(m, &(het_batch){ctx->train, idx, count, ctx->x, ctx->y},
                             1.0f / (float)count, (uint64_t)rep, &r);
        double fb = rec.sum + het_pace_cpu_take(&pace);
        het_model_remove_hook(m, &rec);
        int bad = 0;
        het_pace_cpu_start(&pace);
        het_model_update(m, &(het_update){o, lr, ctx->opt_state, 1, &bad});
        double opt = het_pace_cpu_take(&pace);
        het_model_zero_grads(m);
        het_pace_cpu_start(&pace);
        if (!st)
            st = het_batch_step(m, &(het_batch){ctx->train, idx, count, ctx->x, ctx->y},
                                1.0f / (float)count, (uint64_t)rep,
                                &(het_update){o, lr, ctx->opt_state, 1, &bad}, &r);
        double step = het_pace_cpu_take(&pace);
        if (rep < 0) continue;
        v[rep] = fb;
        v[HET_COST_REPS + rep] = opt;
        v[2 * HET_COST_REPS + rep] = step;
        for (int l = 0; l < L; l++) /* a layer without gradients: where backward stopped */
            v[(3 + l) * HET_COST_REPS + rep] = at[l] > 0.0 ? at[l] : fb;
    }
    for (int k = 0; !st && k < 3 + L; k++) t[k] = het_median(v + k * HET_COST_REPS, HET_COST_REPS);
    free(v);
    free(at);
    free(idx);
    return st;
}

/* Medians of forward and backward of layers [a, b) alone on `count` samples: t[0], t[1]. */
static int measure_segment(het_model *m, int a, int b, int count, double *t) {
    het_tape *tape = NULL;
    int st = het_tape_create(&tape, m, a, b, count);
    if (st) return st;
    const het_layer *fl = het_model_layer(m, a), *ll = het_model_layer(m, b - 1);
    size_t nin = het_shape_size(fl->in) * (size_t)count;
    size_t nout = het_shape_size(ll->out) * (size_t)count;
    float *x = het_alloc(sizeof(float) * nin), *d = het_alloc(sizeof(float) * nout);
    double *v = malloc(2 * HET_COST_REPS * sizeof *v);
    if (!x || !d || !v) st = het_error_set(HET_ENOMEM, "compute costs: out of memory timing "
                                           "layers [%d, %d)", a, b);
    het_pace pace;
    het_lane none = HET_LANE_START; /* the measurement is charged to no lane */
    het_pace_init(&pace, &none, 1.0); /* the calling thread's CPU time alone */
    if (!st) {
        het_rng g;
        het_rng_seed(&g, 1);
        for (size_t i = 0; i < nin; i++) x[i] = het_rng_uniform(&g) - 0.5f;
        for (size_t i = 0; i < nout; i++) d[i] = (het_rng_uniform(&g) - 0.5f) * 1e-3f;
    }
    for (int rep = -1; !st && rep < HET_COST_REPS; rep++) { /* rep -1: warm-up */
        het_pace_cpu_start(&pace);
        if (!het_range_forward(m, tape, x, count, 1, (uint64_t)rep, 0)) st = HET_EINVAL;
        double f = het_pace_cpu_take(&pace);
        if (!st) het_range_backward(m, tape, d, het_model_grads(m), a > 0);
        double bw = het_pace_cpu_take(&pace);
        if (rep >= 0) v[rep] = f, v[HET_COST_REPS + rep] = bw;
    }
    if (!st)
        t[0] = het_median(v, HET_COST_REPS), t[1] = het_median(v + HET_COST_REPS, HET_COST_REPS);
    free(v);
    het_free(x);
    het_free(d);
    het_tape_free(tape);
    return st;
}

/* The range lines of k: every segment between two cut places, at both batch sizes. */
static int measure_ranges(het_model *m, het_costs *k) {
    int n = het_model_n_layers(m), st = HET_OK;
    for (int a = 0; !st && a < n;) {
        int b = a + 1;
        while (b < n && !het_model_cut_ok(m, b)) b++;
        double lo[2], hi[2];
        st = measure_segment(m, a, b, k->lo, lo);
        if (!st) st = measure_segment(m, a, b, k->hi, hi);
        if (!st) {
            k->fwd[a] = het_cost_fit(k->lo, lo[0], k->hi, hi[0]);
            k->bwd[a] = het_cost_fit(k->lo, lo[1], k->hi, hi[1]);
        }
        a = b;
    }
    return st;
}

unsigned long long het_step_costs_net(const het_model *m) {
    unsigned long long h = 1469598103934665603ULL; /* FNV-1a, 64 bits */
#define MIX(v) (h = (h ^ (unsigned long long)(v)) * 1099511628211ULL)
    het_shape in = het_model_in_shape(m);
    MIX(in.c), MIX(in.h), MIX(in.w), MIX(het_model_n_classes(m));
    for (int l = 0; l < het_model_n_layers(m); l++) {
        const het_layer *x = het_model_layer(m, l);
        for (const char *c = x->ops->name; *c; c++) MIX((unsigned char)*c);
        size_t off, np;
        het_model_layer_params(m, l, &off, &np);
        MIX(x->out.c), MIX(x->out.h), MIX(x->out.w), MIX(np);
    }
#undef MIX
    return h;
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
        k->threads = het_model_workers(m);
        k->ref_flops = het_blas_reference_flops();
        if (!(k->ref_flops > 0.0))
            st = het_error_set(HET_EINVAL, "compute costs: the reference kernel could not be "
                               "timed on this host");
    }
    if (!st) {
        st = measure_ranges(m, k);
        if (ns) memcpy(het_model_state(m), keep + np, ns * sizeof(float));
        het_model_zero_grads(m);
    }
    free(keep);
    free(t_lo);
    free(t_hi);
    return st;
}

int het_step_costs_setup(het_strategy_ctx *ctx, het_costs *k, const char *file, int shipped) {
    het_model *m = ctx->model;
    int L = het_model_n_layers(m), st = het_costs_init(k, ctx->cfg->model, L);
    if (!st) k->net = het_step_costs_net(m);
    if (!st && ctx->rank == 0) {
        if (shipped) {
            het_costs r;
            st = het_costs_shipped(&r, k->net);
            if (!st) {
                het_costs_free(k);
                *k = r;
            }
        } else if (file && file[0]) {
            het_costs r;
            st = het_costs_read(&r, file);
            if (!st && (r.net != k->net || r.n_layers != L))
                st = het_error_set(HET_EINVAL, "%s: costs of another network (%s, %d layers, "
                                   "fingerprint %016llx), but this run trains %s (%d layers, "
                                   "%016llx): measure them with hetrain calibrate --costs-out",
                                   file, r.model, r.n_layers, r.net,
                                   ctx->cfg->model[0] ? ctx->cfg->model : "its model file", L,
                                   k->net);
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
        if (!st) st = het_comm_bcast(ctx->comm, HET_COMM_WORLD, buf, n * sizeof *buf, 0);
        if (!st && ctx->rank != 0) st = het_costs_unpack(k, buf);
        free(buf);
        st = het_comm_agree(ctx->world, st);
    }
    if (!st) ctx->pace.costs = k;
    return st;
}

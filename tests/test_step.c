/* The step machinery apart from the trainer (src/strategy/step.c), on any number of ranks
 * (CTest runs it as one rank; tests/test_step_mpi.sh under mpirun with 2 and 4 ranks, 2 ranks
 * per emulated node):
 * - a world reducer, bucketed (several buckets) and flat, sums every rank's gradients exactly
 *   as a plain MPI_Allreduce of the same local gradients does, and carries the figures;
 * - a node reducer sums over the node only, and its step makes no cross-node call (the comm
 *   byte counters), while a world step does;
 * - two reducers and a third hook client on one model: each armed reducer reduces only its
 *   own step, the third client sees every gradient range once per backward, in reverse order;
 * - het_step_sync over a one-rank reducer equals gradients + update;
 * - het_step_epoch_end settles the split: every rank has every rank's compute time;
 * - hgc with a skipped step (--on-nan skip-step) averages the batch-norm running statistics
 *   with weights that sum to 1. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain.h"
#include "strategy/strategy.h"
#include "test.h"

/* Open MPI leaks at exit (its MCA plugins, MPI_Init's op tables), which LeakSanitizer would
 * report in the sanitizer build; the library's own leaks are covered by the tests without MPI. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }

enum { BATCH = 24, N_TRAIN = 96 };

typedef struct fixture {
    het_train_config cfg;
    het_dataset data;
    het_sampler sampler;
    het_model *model;
    float *opt, *x;
    uint8_t *y;
    het_schedule sched;
    het_strategy_ctx ctx;
} fixture;

static int g_rank, g_size;

static void fixture_init(fixture *f, het_comm *comm, MPI_Comm world) {
    memset(f, 0, sizeof *f);
    f->cfg = het_train_config_defaults();
    f->cfg.batch = BATCH;
    het_shape in = {1, 8, 8};
    CHECK(het_dataset_synthetic(&f->data, N_TRAIN, in, 10, 7) == HET_OK, "synthetic: %s",
          het_error_msg());
    CHECK(het_sampler_init(&f->sampler, N_TRAIN, 1, 1) == HET_OK, "sampler");
    het_sampler_set_epoch(&f->sampler, 0);
    CHECK(het_zoo_build(&f->model, "mlp", in, 10, BATCH, 1) == HET_OK, "zoo: %s", het_error_msg());
    het_model_init_params(f->model, 3);
    size_t np = het_model_n_params(f->model);
    f->opt = calloc(het_optim_state_floats(&f->cfg.optim, np) + 1, sizeof(float));
    f->x = calloc((size_t)BATCH * 64, sizeof(float));
    f->y = calloc(BATCH, 1);
    f->sched = het_schedule_defaults(0.05f);
    het_strategy_ctx *c = &f->ctx;
    c->cfg = &f->cfg;
    c->model = f->model;
    c->train = &f->data;
    c->n_train = N_TRAIN;
    c->sampler = &f->sampler;
    c->sched = &f->sched;
    c->opt_state = f->opt;
    c->x = f->x;
    c->y = f->y;
    c->comm = comm;
    c->world = world;
    c->rank = g_rank;
    c->size = g_size;
    c->lane = HET_LANE_START;
    het_comm_set_lane(comm, &c->lane); /* as the trainer does */
    het_pace_init(&c->pace, &c->lane, 1.0);
    c->rank_times = calloc(4 * (size_t)g_size, sizeof(double));
}

static void fixture_free(fixture *f) {
    het_comm_set_lane(f->ctx.comm, NULL); /* the lane goes with the fixture */
    het_step_free(&f->ctx);
    free(f->ctx.rank_times);
    het_model_free(f->model);
    het_sampler_free(&f->sampler);
    het_dataset_free(&f->data);
    free(f->opt);
    free(f->x);
    free(f->y);
}

/* This rank's samples of the first global batch: a contiguous share, as allreduce takes. */
static const int64_t *my_share(fixture *f, int parts, int part, int *count) {
    int64_t lo, len;
    het_partition_even(BATCH, parts, part, &lo, &len);
    *count = (int)len;
    return f->sampler.perm + lo;
}

/* The reference: this rank's local gradients (no reducer), summed over `comm` by MPI. */
static float *reference_sum(fixture *f, const int64_t *idx, int count, MPI_Comm comm,
                            double *loss) {
    size_t np = het_model_n_params(f->model);
    het_batch_result r;
    CHECK(het_step_grads(&f->ctx, NULL, idx, count, 1.0f / BATCH, 5, &r) == HET_OK, "grads");
    float *g = malloc(np * sizeof(float));
    memcpy(g, het_model_grads(f->model), np * sizeof(float));
    MPI_Allreduce(MPI_IN_PLACE, g, (int)np, MPI_FLOAT, MPI_SUM, comm);
    *loss = r.loss_sum;
    MPI_Allreduce(MPI_IN_PLACE, loss, 1, MPI_DOUBLE, MPI_SUM, comm);
    return g;
}

/* max |a - b| / (floor + |b|) */
static double max_diff(const float *a, const float *b, size_t n, double floor) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / (floor + fabs((double)b[i]));
        if (d > worst) worst = d;
    }
    return worst;
}

static void test_world(het_comm *comm, MPI_Comm world, float bucket_mb) {
    fixture f;
    fixture_init(&f, comm, world);
    het_reducer *red;
    CHECK(het_reducer_create(&red, &f.ctx, HET_COMM_WORLD, bucket_mb, HET_REDUCE_FIGURES) ==
          HET_OK, "reducer: %s", het_error_msg());
    CHECK(het_reducer_ranks(red) == g_size, "reducer ranks %d, expected %d",
          het_reducer_ranks(red), g_size);
    int count;
    const int64_t *idx = my_share(&f, g_size, g_rank, &count);
    double ref_loss;
    float *ref = reference_sum(&f, idx, count, world, &ref_loss);
    het_step_epoch_begin(&f.ctx);
    het_batch_result local, global;
    CHECK(het_step_grads(&f.ctx, red, idx, count, 1.0f / BATCH, 5, &local) == HET_OK, "grads");
    CHECK(het_step_reduce(&f.ctx, red, &local, &global) == HET_OK, "reduce: %s",
          het_error_msg());
    size_t np = het_model_n_params(f.model);
    double d = max_diff(het_model_grads(f.model), ref, np, 1e-6);
    /* 2 ranks: a + b either way, bitwise; more: MPI's order may differ in the last bits */
    CHECK(d <= (g_size <= 2 ? 0.0 : 1e-4), "bucket_mb %g: gradients differ from MPI's sum by "
          "%.3g (relative)", (double)bucket_mb, d);
    CHECK_CLOSE(global.loss_sum, ref_loss, 1e-5, "world loss figure");
    CHECK(het_step_epoch_end(&f.ctx) == HET_OK, "epoch end: %s", het_error_msg());
    for (int q = 0; q < g_size; q++)
        CHECK(f.ctx.rank_times[4 * q] > 0.0, "rank %d compute %g after the epoch", q,
              f.ctx.rank_times[4 * q]);
    CHECK(f.ctx.rank_times[4 * g_rank] == f.ctx.times.compute_s, "own compute %g vs %g",
          f.ctx.rank_times[4 * g_rank], f.ctx.times.compute_s);
    CHECK(f.ctx.times.wait_s >= 0.0 && f.ctx.times.comm_s >= 0.0, "split %g %g",
          f.ctx.times.wait_s, f.ctx.times.comm_s);
    free(ref);
    fixture_free(&f);
}

/* A third client of the model's hooks: records the ranges it is given. */
typedef struct spy {
    int calls, last_layer, in_order, first_param_layer;
} spy;

/* calls of one backward come in reverse layer order; a new backward restarts at the top */
static void spy_hook(void *user, int layer, size_t off, size_t count) {
    spy *s = user;
    (void)off;
    (void)count;
    if (s->last_layer != s->first_param_layer && layer >= s->last_layer) s->in_order = 0;
    s->last_layer = layer;
    s->calls++;
}

static void test_node_and_world(het_comm *comm, MPI_Comm world) {
    fixture f;
    fixture_init(&f, comm, world);
    const het_topo *topo = het_comm_topo(comm);
    het_reducer *node, *all;
    CHECK(het_reducer_create(&node, &f.ctx, HET_COMM_NODE, 0.0005f, HET_REDUCE_FIGURES) ==
          HET_OK, "node reducer: %s", het_error_msg());
    CHECK(het_reducer_create(&all, &f.ctx, HET_COMM_WORLD, 0.0f, HET_REDUCE_FIGURES) == HET_OK,
          "world reducer: %s", het_error_msg());
    spy s = {0, 1 << 30, 1, -1};
    het_model_hook h = {spy_hook, NULL, &s};
    CHECK(het_model_add_hook(f.model, &h) == HET_OK, "spy hook: %s", het_error_msg());
    int with_params = 0;
    for (int i = 0; i < het_model_n_layers(f.model); i++) {
        size_t off, n;
        het_model_layer_params(f.model, i, &off, &n);
        with_params += n > 0;
        if (n > 0 && s.first_param_layer < 0) s.first_param_layer = i;
    }
    int count;
    const int64_t *idx = my_share(&f, topo->local_size, topo->local_rank, &count);
    double ref_loss;
    float *ref = reference_sum(&f, idx, count, het_comm_mpi(comm, HET_COMM_NODE), &ref_loss);
    CHECK(s.calls == with_params && s.in_order, "spy: %d calls (in order %d), expected %d",
          s.calls, s.in_order, with_params);
    het_comm_stats before = het_comm_get_stats(comm);
    het_batch_result local, global;
    CHECK(het_step_grads(&f.ctx, node, idx, count, 1.0f / BATCH, 5, &local) == HET_OK, "grads");
    CHECK(het_step_reduce(&f.ctx, node, &local, &global) == HET_OK, "node reduce: %s",
          het_error_msg());
    het_comm_stats after = het_comm_get_stats(comm);
    size_t np = het_model_n_params(f.model);
    double d = max_diff(het_model_grads(f.model), ref, np, 1e-6);
    CHECK(d <= (topo->local_size <= 2 ? 0.0 : 1e-4), "node sum differs by %.3g", d);
    CHECK_CLOSE(global.loss_sum, ref_loss, 1e-5, "node loss figure");
    CHECK(after.calls_cross == before.calls_cross && after.bytes_cross == before.bytes_cross,
          "a node step made %llu cross-node calls (%llu bytes)",
          (unsigned long long)(after.calls_cross - before.calls_cross),
          (unsigned long long)(after.bytes_cross - before.bytes_cross));
    if (topo->local_size > 1)
        CHECK(after.bytes_node > before.bytes_node, "node step: no node-local bytes counted");
    CHECK(s.calls == 2 * with_params && s.in_order, "spy after the node step: %d calls",
          s.calls);
    /* a world step on the same model: only the world reducer acts */
    before = after;
    idx = my_share(&f, g_size, g_rank, &count);
    CHECK(het_step_grads(&f.ctx, all, idx, count, 1.0f / BATCH, 5, &local) == HET_OK, "grads");
    CHECK(het_step_reduce(&f.ctx, all, &local, &global) == HET_OK, "world reduce: %s",
          het_error_msg());
    after = het_comm_get_stats(comm);
    /* the default --allreduce-algo (auto) is two-level on several nodes: only the node
     * leaders cross nodes, the others reduce and receive inside their node */
    if (topo->n_nodes > 1 && topo->local_rank == 0)
        CHECK(after.calls_cross > before.calls_cross, "a world step made no cross-node call");
    if (topo->n_nodes > 1 && topo->local_rank > 0)
        CHECK(after.calls_cross == before.calls_cross && after.bytes_node > before.bytes_node,
              "rank %d, no node leader: a two-level world step made %llu cross-node calls",
              g_rank, (unsigned long long)(after.calls_cross - before.calls_cross));
    het_model_remove_hook(f.model, &s);
    free(ref);
    fixture_free(&f);
}

/* het_step_sync over a reducer of one rank equals het_step_grads + het_step_update. */
static void test_sync_one_rank(void) {
    fixture a, b;
    fixture_init(&a, NULL, MPI_COMM_NULL);
    fixture_init(&b, NULL, MPI_COMM_NULL);
    a.ctx.rank = b.ctx.rank = 0;
    a.ctx.size = b.ctx.size = 1;
    het_reducer *ra;
    CHECK(het_reducer_create(&ra, &a.ctx, HET_COMM_WORLD, 25.0f, HET_REDUCE_FIGURES) == HET_OK,
          "reducer: %s", het_error_msg());
    CHECK(het_reducer_ranks(ra) == 1, "one-process reducer spans %d ranks",
          het_reducer_ranks(ra));
    het_batch_result l, g;
    for (int step = 0; step < 3; step++) {
        const int64_t *idx = a.sampler.perm + step * BATCH;
        CHECK(het_step_sync(&a.ctx, ra, idx, BATCH, 1.0f / BATCH, 9, 0.05f, &l, &g) == HET_OK,
              "sync: %s", het_error_msg());
        CHECK(g.loss_sum == l.loss_sum, "one rank: global %g vs local %g", g.loss_sum,
              l.loss_sum);
        CHECK(het_step_grads(&b.ctx, NULL, idx, BATCH, 1.0f / BATCH, 9, &l) == HET_OK, "grads");
        het_step_update(&b.ctx, 0.05f);
    }
    CHECK(a.ctx.step == 3 && b.ctx.step == 3, "steps %lld %lld", (long long)a.ctx.step,
          (long long)b.ctx.step);
    size_t np = het_model_n_params(a.model);
    double d = max_diff(het_model_params(a.model), het_model_params(b.model), np, 1e-2);
    CHECK(d <= 1e-4, "fused step vs grads + update: parameters differ by %.3g", d);
    fixture_free(&a);
    fixture_free(&b);
}

/* ---- non-finite steps (--on-nan) ---- */

/* A grad hook added before the reducer's: on rank `rank`, when armed, writes NaN into the first
 * gradient of layer `layer` before the reducer sends it. */
typedef struct poison {
    het_model *m;
    int armed, rank, layer;
} poison;

static void poison_hook(void *user, int layer, size_t off, size_t count) {
    poison *p = user;
    (void)count;
    if (p->armed && g_rank == p->rank && layer == p->layer) het_model_grads(p->m)[off] = NAN;
}

static int first_param_layer(het_model *m) {
    for (int i = 0; i < het_model_n_layers(m); i++) {
        size_t off, n;
        het_model_layer_params(m, i, &off, &n);
        if (n > 0) return i;
    }
    return -1;
}

/* Steps 0..3 of the epoch with het_step_sync; `bad` poisons step 2 (grad: a NaN gradient on
 * rank p->rank; data: that rank's step-2 inputs are not finite, so its loss is NaN). Returns
 * the status of the first failing step, the failing step in *at. */
enum { POISON_GRAD, POISON_DATA };
static int run_steps(fixture *f, het_reducer *red, poison *p, int bad, int *at,
                     het_epoch_sums *sums) {
    for (int step = 0; step < 4; step++) {
        int parts = het_reducer_ranks(red), count;
        const int64_t *idx = my_share(f, parts, parts > 1 ? g_rank : 0, &count) + step * BATCH;
        p->armed = step == 2 && bad == POISON_GRAD;
        float std = f->data.std[0];
        if (step == 2 && bad == POISON_DATA && g_rank == p->rank) f->data.std[0] = 0.0f;
        het_batch_result l, g;
        int st = het_step_sync(&f->ctx, red, idx, count, 1.0f / BATCH, 9, 0.05f, &l, &g);
        f->data.std[0] = std;
        p->armed = 0;
        if (st) {
            *at = step;
            return st;
        }
        het_step_record(&f->ctx, sums, &(het_step_rec){&l, count, &g, BATCH, 0}, 0.05f,
                        het_now());
    }
    return HET_OK;
}

static void test_nonfinite(het_comm *comm, MPI_Comm world, int on_nan, int bad) {
    const char *name = on_nan == HET_ON_NAN_STOP ? "stop" : "skip-step";
    fixture f;
    int one = comm == NULL;
    fixture_init(&f, comm, world);
    if (one) f.ctx.rank = 0, f.ctx.size = 1;
    f.cfg.on_nan = on_nan;
    poison p = {f.model, 0, one ? 0 : g_size - 1, first_param_layer(f.model)};
    het_model_hook h = {poison_hook, NULL, &p};
    if (bad == POISON_GRAD) /* hooks are refused by the folded one-rank step (stop) */
        CHECK(het_model_add_hook(f.model, &h) == HET_OK, "poison hook: %s", het_error_msg());
    het_reducer *red;
    CHECK(het_reducer_create(&red, &f.ctx, HET_COMM_WORLD, 0.0005f, HET_REDUCE_FIGURES) ==
          HET_OK, "reducer: %s", het_error_msg());
    size_t np = het_model_n_params(f.model);
    het_epoch_sums sums = {0, 0, 0, 0};
    int at = -1;
    het_step_epoch_begin(&f.ctx);
    int st = run_steps(&f, red, &p, bad, &at, &sums);
    int finite = 1;
    for (size_t i = 0; i < np; i++) finite &= isfinite(het_model_params(f.model)[i]) != 0;
    if (on_nan == HET_ON_NAN_SKIP_STEP) {
        CHECK(st == HET_OK, "%s: a poisoned step stopped the run: %s", name, het_error_msg());
        CHECK(f.ctx.step == 4, "%s: %lld steps taken, expected 4", name, (long long)f.ctx.step);
        CHECK(finite, "%s: non-finite weights after a skipped step", name);
        het_epoch_stats es;
        memset(&es, 0, sizeof es);
        CHECK(het_step_epoch_figures(&f.ctx, &sums, 0.05f, &es) == HET_OK, "figures: %s",
              het_error_msg());
        CHECK(es.skipped == 1 && es.samples == 3 * BATCH && isfinite(es.loss),
              "%s: %lld skipped, %lld samples, loss %g; expected 1, %d, finite", name,
              (long long)es.skipped, (long long)es.samples, es.loss, 3 * BATCH);
    } else {
        char want[160];
        int lay = bad == POISON_GRAD ? p.layer : het_model_n_layers(f.model) - 1;
        while (bad == POISON_DATA && lay > 0) { /* the top layer with parameters */
            size_t off, n;
            het_model_layer_params(f.model, lay, &off, &n);
            if (n > 0) break;
            lay--;
        }
        snprintf(want, sizeof want, "epoch 1 step 3: non-finite gradient in layer %d (dense)",
                 lay);
        CHECK(st == HET_EINVAL && at == 2, "%s: step %d status %d, expected step 2 and %d (%s)",
              name, at, st, HET_EINVAL, het_error_msg());
        CHECK(strstr(het_error_msg(), want) != NULL, "%s: message '%s', expected '%s'", name,
              het_error_msg(), want);
        if (bad == POISON_DATA && !one && g_size > 1) {
            snprintf(want, sizeof want, "rank %d: epoch 1 step 3:", g_size - 1);
            CHECK(strncmp(het_error_msg(), want, strlen(want)) == 0, "%s: message '%s' does not "
                  "name the rank ('%s')", name, het_error_msg(), want);
        }
    }
    if (bad == POISON_GRAD) het_model_remove_hook(f.model, &p);
    fixture_free(&f);
}

/* ---- hgc under --on-nan skip-step: the running statistics' weights sum to 1 ---- */

typedef struct bn_spy {
    het_strategy_ctx *ctx;
    int64_t poison_at;   /* the step (completed steps before it) whose gradient is poisoned */
    int64_t last;        /* the epoch's last step */
    float *state_last;   /* this rank's model state after the last step, before averaging */
} bn_spy;

static void bn_poison_hook(void *user, int layer, size_t off, size_t count) {
    bn_spy *p = user;
    (void)count;
    if (p->ctx->step == p->poison_at && g_rank == 0 && layer == first_param_layer(p->ctx->model))
        het_model_grads(p->ctx->model)[off] = NAN;
}

static bn_spy *g_bn_spy;
static int bn_on_step(het_strategy_ctx *ctx, const het_step_info *info) {
    if (info->step == g_bn_spy->last)
        memcpy(g_bn_spy->state_last, het_model_state(ctx->model),
               het_model_n_state(ctx->model) * sizeof(float));
    return 0;
}

/* hgc with equal speeds on every rank and one step skipped (a NaN gradient on rank 0): every
 * rank counts the same samples, so the averaged running statistics are the plain mean of the
 * ranks' statistics after the last step. (They were scaled by the share of the epoch's samples
 * that counted: 3/4 of the mean here.) */
static void test_hgc_skip_bn(het_comm *comm, MPI_Comm world) {
    fixture f;
    fixture_init(&f, comm, world);
    het_model_free(f.model);
    het_shape in = {1, 8, 8};
    het_layer *L[4] = {het_dense_new(16), het_batchnorm_new(0.1f, 1e-5f), het_relu_new(),
                       het_dense_new(10)};
    CHECK(het_model_create(&f.model, in, L, 4, BATCH, 1) == HET_OK, "bn model: %s",
          het_error_msg());
    het_model_init_params(f.model, 3);
    free(f.opt);
    f.opt = calloc(het_optim_state_floats(&f.cfg.optim, het_model_n_params(f.model)) + 1,
                   sizeof(float));
    f.ctx.model = f.model;
    f.ctx.opt_state = f.opt;
    f.cfg.on_nan = HET_ON_NAN_SKIP_STEP;
    char speeds[256] = "";
    for (int r = 0; r < g_size; r++) strcat(speeds, r ? ",1" : "1");
    snprintf(f.cfg.speeds, sizeof f.cfg.speeds, "%s", speeds);
    snprintf(f.cfg.strategy, sizeof f.cfg.strategy, "hgc");
    size_t ns = het_model_n_state(f.model);
    bn_spy bs = {&f.ctx, 2, N_TRAIN / BATCH, calloc(ns, sizeof(float))};
    g_bn_spy = &bs;
    f.ctx.on_step = bn_on_step;
    het_model_hook h = {bn_poison_hook, NULL, &bs};
    CHECK(het_model_add_hook(f.model, &h) == HET_OK, "poison hook: %s", het_error_msg());
    const het_strategy_ops *ops = &het_strategy_hgc;
    CHECK(ops->init(&f.ctx) == HET_OK, "hgc init: %s", het_error_msg());
    het_step_epoch_begin(&f.ctx);
    het_epoch_stats es;
    memset(&es, 0, sizeof es);
    CHECK(ops->train_epoch(&f.ctx, 0, &es) == HET_OK, "hgc epoch: %s", het_error_msg());
    CHECK(es.skipped == 1 && es.samples == N_TRAIN - BATCH, "hgc: %lld skipped, %lld samples; "
          "expected 1 and %d", (long long)es.skipped, (long long)es.samples, N_TRAIN - BATCH);
    MPI_Allreduce(MPI_IN_PLACE, bs.state_last, (int)ns, MPI_FLOAT, MPI_SUM, world);
    double worst = 0.0, scale = 0.0;
    const float *st = het_model_state(f.model);
    for (size_t i = 0; i < ns; i++) {
        double want = (double)bs.state_last[i] / g_size;
        worst = fmax(worst, fabs((double)st[i] - want) / (1e-3 + fabs(want)));
        scale += want != 0.0 ? (double)st[i] / want : 1.0;
    }
    CHECK(worst < 1e-5, "hgc skip-step: running statistics differ from the ranks' mean by %.3g "
          "(relative; mean ratio %.4f, expected 1)", worst, scale / (double)ns);
    het_model_remove_hook(f.model, &bs);
    ops->free(&f.ctx);
    free(bs.state_last);
    fixture_free(&f);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (!het_test_world_size_ok(g_size)) MPI_Abort(MPI_COMM_WORLD, 1);
    het_topo topo;
    het_comm *comm = NULL;
    CHECK(het_topo_init(&topo, MPI_COMM_WORLD, g_size >= 2 ? 2 : 1) == HET_OK, "topo: %s",
          het_error_msg());
    het_netem off = {0};
    CHECK(het_comm_create(&comm, &topo, off) == HET_OK, "comm: %s", het_error_msg());
    test_world(comm, topo.world, 0.0f);      /* flat: one bucket */
    test_world(comm, topo.world, 0.0005f);   /* ~512 bytes: one bucket per layer range */
    test_node_and_world(comm, topo.world);
    if (g_rank == 0) test_sync_one_rank();
    /* non-finite steps: over the world reducer, and on one rank (folded step with stop) */
    test_nonfinite(comm, topo.world, HET_ON_NAN_SKIP_STEP, POISON_GRAD);
    test_nonfinite(comm, topo.world, HET_ON_NAN_SKIP_STEP, POISON_DATA);
    if (g_size > 1) /* one rank folds the update into the step, which refuses grad hooks */
        test_nonfinite(comm, topo.world, HET_ON_NAN_STOP, POISON_GRAD);
    test_nonfinite(comm, topo.world, HET_ON_NAN_STOP, POISON_DATA);
    if (g_size > 1) test_hgc_skip_bn(comm, topo.world);
    if (g_rank == 0) {
        test_nonfinite(NULL, MPI_COMM_NULL, HET_ON_NAN_STOP, POISON_DATA);
        test_nonfinite(NULL, MPI_COMM_NULL, HET_ON_NAN_SKIP_STEP, POISON_GRAD);
    }
    het_comm_free(comm);
    het_topo_free(&topo);
    int failed = het_test_failures;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int rc = het_test_finish("test_step");
    MPI_Finalize();
    return rc || failed ? 1 : 0;
}

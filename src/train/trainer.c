/* DESIGN: the trainer.
 *
 * Owns one run: the datasets, the model, optimizer state, the schedule, the epoch sampler, the
 * epoch / step counters and the metrics history. A step is
 *   gather batch -> zero grads -> forward/backward (grad_scale 1/count) -> optimizer step
 * with lr = het_schedule_lr(epoch, global step) and Adam's t = global step + 1; the epoch's
 * permutation comes from het_sampler_set_epoch(seed, epoch), its last partial batch included.
 * After each epoch: het_schedule_epoch_end(mean training loss), evaluation on the test set,
 * one printed line, one metrics object, and a checkpoint when due.
 *
 * Distributed runs. When MPI is initialized the trainer spans MPI_COMM_WORLD: it builds the
 * topology (--ranks-per-node) and the comm context (with the emulated network of --net-bw /
 * --net-lat), broadcasts rank 0's initial parameters and state, and hands each epoch's steps
 * to the strategy (--strategy, src/strategy): the trainer keeps epochs, evaluation, metrics,
 * checkpoints, the trace and the time split. At every point where one rank alone can fail
 * (data files, checkpoint reads, files rank 0 writes) the ranks agree on the status
 * (het_comm_agree) before the next collective, so all return the same error and none hangs.
 * Evaluation: every rank evaluates a contiguous shard of the test set with the strategy's
 * model_for_eval (the same weights everywhere) and the sums are reduced, so P ranks evaluate
 * P times faster; one rank evaluates in order, exactly as before. Rank 0 alone writes the
 * checkpoint, metrics, trace and safetensors; a resume reads the same checkpoint on all ranks.
 * Without MPI initialized (library users, unit tests) it is one process with the same code
 * path and no communication: results are bitwise those of one MPI rank.
 *
 * The datasets are decoded once per host and shared read-only by its ranks (shared_data.c).
 *
 * Nothing here reads the clock except for reported timings. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emul/emul.h"
#include "hetero/hetero.h"
#include "hetrain/batch.h"
#include "hetrain/netfile.h"
#include "hetrain/tensor.h"
#include "train/trainer.h"



/* ----------------------------------------------------------------------- create / free */

/* The step callback of the strategy: progress bar and per-step metrics (rank 0). */
static int on_step(het_strategy_ctx *ctx, const het_step_info *s) {
    het_trainer *t = (het_trainer *)(void *)((char *)ctx - offsetof(het_trainer, ctx));
    t->bar_loss += s->loss_sum;
    t->bar_correct += s->correct;
    t->bar_samples += s->count;
    if (t->metrics && t->cfg.metrics_steps) {
        int rc = het_metrics_step(t->metrics, s->epoch, s->step, s->loss_sum / s->count,
                                  (double)s->correct / s->count, s->lr, s->count, s->secs);
        /* several ranks: a write error surfaces (agreed) at the epoch's metrics line */
        if (rc && t->size == 1) return rc;
    }
    het_bar_update(&t->bar, t->bar_samples, t->bar_loss / (double)t->bar_samples,
                   (double)t->bar_correct / (double)t->bar_samples);
    return HET_OK;
}

/* Rank 0 writes every output: its folder must exist and be writable before any training, so
 * that a bad path fails in a second rather than after the run (and loses nothing). */
static int probe_outputs(const het_train_config *c) {
    const char *key[] = {"checkpoint", "metrics", "trace", "export-safetensors", "export-onnx"};
    const char *path[] = {c->checkpoint, c->metrics, c->trace, c->export_safetensors,
                          c->export_onnx};
    for (int i = 0; i < 5; i++) {
        if (!path[i][0]) continue;
        char dir[HET_PATH_LEN];
        het_path_dir(path[i], dir, sizeof dir);
        if (access(dir, W_OK) != 0)
            return het_error_set(HET_EIO, "%s: cannot write '%s' (folder '%s': %s); checked "
                                 "before training", key[i], path[i], dir, strerror(errno));
    }
    return HET_OK;
}

/* What the strategy sees of the trainer. */
static het_strategy_ctx *strategy_ctx(het_trainer *t) {
    t->sched = t->cfg.sched;
    t->sched.total_epochs = t->cfg.epochs;
    het_strategy_ctx *c = &t->ctx;
    c->cfg = &t->cfg;
    c->model = t->model;
    c->train = &t->train;
    c->n_train = t->n_train;
    c->sampler = &t->sampler;
    c->sched = &t->sched;
    if (t->strat && t->strat->evals) het_trainer_eval_hooks(t); /* eval.c */
    c->opt_state = t->opt_state;
    c->x = t->x;
    c->y = t->y;
    c->comm = t->comm;
    c->rank = t->rank;
    c->size = t->size;
    c->on_step = on_step;
    return c;
}

/* Under MPI: this rank and the world's size, then the ranks compare their configurations,
 * before anything that depends on the configuration (its checks included) can part them. */
static int join_world(het_trainer *t) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    if (inited) MPI_Finalized(&finalized);
    t->mpi = inited && !finalized;
    t->ctx.world = MPI_COMM_NULL;
    if (t->mpi) {
        MPI_Comm_rank(MPI_COMM_WORLD, &t->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &t->size);
    }
    return het_trainer_compare_config(t);
}

/* --holdout N: the test set becomes a view of the last N training samples in use, which the
 * training leaves out (the same on every rank: the data and the limits are agreed). */
static int hold_out(het_trainer *t, int64_t n) {
    if (n >= t->n_train)
        return het_error_set(HET_EINVAL, "--holdout %lld: the training set has %lld samples "
                             "(after --train-limit), expected fewer held out", (long long)n,
                             (long long)t->n_train);
    het_dataset_free(&t->test);
    const size_t per = het_shape_size(t->train.shape);
    const int64_t first = t->n_train - n;
    t->test = t->train;
    t->test.images = t->train.images + (size_t)first * per;
    t->test.labels = t->train.labels + first;
    t->test.n = n;
    t->test.borrowed = 1; /* the training set's memory */
    t->n_test = n;
    t->n_train = first;
    het_log(HET_LOG_INFO, "holdout: training on samples 0-%lld, test_loss and test_acc on the "
            "%lld after them (not the test set)\n", (long long)first - 1, (long long)n);
    return HET_OK;
}

int het_trainer_create(het_trainer **out, const het_train_config *cfg) {
    *out = NULL;
    het_trainer *t = calloc(1, sizeof *t);
    if (!t) return het_error_set(HET_ENOMEM, "out of memory creating the trainer");
    t->cfg = *cfg;
    t->size = 1;
    int st = join_world(t);
    t->size0 = t->size;
    if (!st) st = het_train_config_check(cfg);
    if (!st && !(t->strat = het_strategy_find(cfg->strategy))) st = HET_EINVAL;
    if (!st && cfg->checkpoint_steps && !t->strat->pieces)
        st = het_error_set(HET_EINVAL, "--checkpoint-steps %d: %s checkpoints at epoch ends "
                           "only (between them updates or syncs are in flight); use "
                           "--checkpoint-every N (epochs)", cfg->checkpoint_steps,
                           cfg->strategy);
    if (!st && cfg->eval_every && !het_strategy_evals_inside(t->strat))
        st = het_error_set(HET_EINVAL, "--eval-every %d: %s evaluates at epoch ends only "
                           "(between them updates are in flight); the strategies that take "
                           "it: allreduce, hgc, daso, asp, inhad, gpipe, qfb", cfg->eval_every,
                           cfg->strategy);
    if (!st && cfg->checkpoint_steps && !cfg->checkpoint[0])
        st = het_error_set(HET_EINVAL, "--checkpoint-steps %d: needs --checkpoint FILE",
                           cfg->checkpoint_steps);
    if (st) {
        free(t);
        return st;
    }
    het_blas_set_threads(1); /* parallelism is the model's workers; see --threads */
    if ((st = het_trainer_create_mpi(t))) goto fail;
    if ((st = het_trainer_agree(t, t->rank == 0 ? probe_outputs(cfg) : HET_OK))) goto fail;
    if ((st = het_trainer_load_data(t))) goto fail; /* agreed; once per host under MPI */
    if ((st = het_trainer_agree(t, het_trainer_choose_wait(t)))) goto fail;
    if (!st && (t->test.shape.c != t->train.shape.c || t->test.shape.h != t->train.shape.h ||
                t->test.shape.w != t->train.shape.w || t->test.n_classes != t->train.n_classes))
        st = het_error_set(HET_EFORMAT, "dataset %s: test samples of %dx%dx%d in %d classes, "
                           "expected %dx%dx%d in %d classes as the training samples", cfg->data,
                           t->test.shape.c, t->test.shape.h, t->test.shape.w,
                           t->test.n_classes, t->train.shape.c, t->train.shape.h,
                           t->train.shape.w, t->train.n_classes);
    if ((st = het_trainer_agree(t, st))) goto fail;
    t->n_train = t->train.n;
    t->n_test = t->test.n;
    if (cfg->train_limit > 0 && cfg->train_limit < t->n_train) t->n_train = cfg->train_limit;
    if (cfg->test_limit > 0 && cfg->test_limit < t->n_test) t->n_test = cfg->test_limit;
    if (cfg->holdout > 0 && (st = hold_out(t, cfg->holdout))) goto fail;
    if ((st = het_trainer_compare_data(t))) goto fail;
    if (t->n_train < 1 || t->n_test < 1) {
        st = het_error_set(HET_EINVAL, "dataset %s: %lld training and %lld test samples, "
                           "expected at least 1 of each", cfg->data, (long long)t->n_train,
                           (long long)t->n_test);
        goto fail;
    }
    het_net net; /* the zoo's model file or the user's (text or ONNX, with initial weights) */
    st = cfg->model_file[0] ? het_net_read(&net, cfg->model_file) : het_net_zoo(&net, cfg->model);
    if (!st)
        st = het_net_build(&t->model, &net, t->train.shape, t->train.n_classes, cfg->batch,
                           cfg->threads);
    if (!st) st = het_model_set_precision(t->model, (het_precision)cfg->precision);
    if (!st) {
        clockid_t clocks[HET_PACE_MAX_THREADS]; /* the virtual clock costs their CPU time too */
        het_pace_set_threads(&t->ctx.pace, clocks,
                             het_model_worker_clocks(t->model, clocks, HET_PACE_MAX_THREADS));
        het_model_init_params(t->model, cfg->seed);
        st = het_net_load_weights(&net, t->model); /* an ONNX file's weights, if any */
        if (!st && cfg->init_from[0] && !cfg->resume && t->rank == 0) {
            /* --init-from: rank 0's weights from the file (agreed below); the broadcast then
             * gives them to every rank. A resumed run takes its checkpoint's instead. */
            st = het_safetensors_read(t->model, cfg->init_from);
            if (!st)
                het_log(HET_LOG_INFO, "init: %d tensors from %s\n",
                        het_safetensors_count(t->model), cfg->init_from);
        }
        t->n_opt_state = het_optim_state_floats(&cfg->optim, het_model_n_params(t->model));
        size_t sample = het_shape_size(t->train.shape);
        t->opt_state = het_alloc(t->n_opt_state * sizeof(float));
        t->x = het_alloc((size_t)cfg->batch * sample * sizeof(float));
        t->y = het_alloc((size_t)cfg->batch);
        t->idx = het_alloc((size_t)cfg->batch * sizeof(int64_t));
        t->ctx.rank_times = calloc((size_t)4 * (size_t)t->size, sizeof(double));
        t->ctx.rank_bytes = calloc((size_t)2 * (size_t)t->size, sizeof(double));
        if (!t->opt_state || !t->x || !t->y || !t->idx || !t->ctx.rank_times ||
            !t->ctx.rank_bytes)
            st = het_error_set(HET_ENOMEM, "out of memory for the model's buffers");
    }
    het_net_free(&net);
    if (!st) st = het_sampler_init(&t->sampler, t->n_train, cfg->seed, 1);
    if ((st = het_trainer_agree(t, st))) goto fail;
    /* the header before the first transfer, which the emulated network may make slow */
    het_trainer_print_config(t);
    if (t->size > 1) { /* every replica starts from rank 0's weights */
        het_model *m = t->model;
        st = het_comm_bcast(t->comm, HET_COMM_WORLD, het_model_params(m),
                            het_model_n_params(m) * sizeof(float), 0);
        if (!st && het_model_n_state(m))
            st = het_comm_bcast(t->comm, HET_COMM_WORLD, het_model_state(m),
                                het_model_n_state(m) * sizeof(float), 0);
        if ((st = het_trainer_agree(t, st))) goto fail;
    }
    het_strategy_ctx *c = strategy_ctx(t);
    /* the table is measured before the strategy starts: its gradient hooks (the all-reduce's
     * overlap) would stop the measured one-rank step; calibrate --costs-out measures it here
     * too, only to write it (the run's pace keeps its own costs then) */
#ifdef HET_SMPI /* SimGrid's clock: the pieces are charged to it from the table (slowdown.c) */
    const int charged = 1;
#else
    const int charged = cfg->clock == HET_CLOCK_VIRTUAL;
#endif
    const int table = charged && strcmp(cfg->compute_cost, "measured") != 0;
    if ((table || cfg->costs_out[0]) &&
        (st = het_trainer_costs_setup(t, table ? het_train_costs_file(cfg) : NULL,
                                      table && !strcmp(cfg->compute_cost, "shipped"))))
        goto fail;
    if (!table) c->pace.costs = NULL;
    if (t->plat_speed_max > 0) het_trainer_platform_scale(t);
    st = het_trainer_agree(t, t->strat->init(c));
    t->strat_ready = 1; /* free() must release what a failed init left */
    if (st || (st = het_trainer_compare_strategy(t))) goto fail;
    if (cfg->trace[0] && (st = het_trace_create_world(&c->trace, c->comm))) goto fail;
    t->t_start = het_now();
    t->v_start = het_lane_now(&t->ctx.lane);
    *out = t;
    return HET_OK;
fail:
    het_trainer_free(t);
    return st;
}

void het_trainer_free(het_trainer *t) {
    if (!t) return;
    if (t->strat_ready) (t->strat->free)(&t->ctx); /* (): smpicc defines free(x) */
    het_step_free(&t->ctx);
    het_trace_free(t->ctx.trace);
    het_metrics_close(t->metrics);
    het_sampler_free(&t->sampler);
    het_model_free(t->model);
    het_trainer_free_data(t);
    het_free(t->opt_state);
    het_free(t->x);
    het_free(t->y);
    het_free(t->idx);
    free(t->ctx.rank_times);
    free(t->ctx.rank_bytes);
    free(t->hist);
    het_comm_free(t->comm);
    if (t->have_topo) het_topo_free(&t->topo);
    het_costs_free(&t->costs);
    free(t);
}

het_model *het_trainer_model(het_trainer *t) { return t->model; }
int het_trainer_rank(const het_trainer *t) { return t->rank; }
int het_trainer_size(const het_trainer *t) { return t->size; }

const double *het_trainer_rank_times(const het_trainer *t, int *n_ranks) {
    *n_ranks = t->size;
    return t->ctx.rank_times;
}
const het_train_config *het_trainer_config(const het_trainer *t) { return &t->cfg; }
const het_dataset *het_trainer_train_set(const het_trainer *t) { return &t->train; }
const het_dataset *het_trainer_test_set(const het_trainer *t) { return &t->test; }
int het_trainer_epoch(const het_trainer *t) { return t->epoch; }
int64_t het_trainer_step(const het_trainer *t) { return t->ctx.step; }

const het_epoch_stats *het_trainer_history(const het_trainer *t, int *n) {
    *n = t->n_hist;
    return t->hist;
}

static int push_history(het_trainer *t, const het_epoch_stats *st) {
    if (t->n_hist == t->cap_hist) {
        int cap = t->cap_hist ? 2 * t->cap_hist : 16;
        het_epoch_stats *h = realloc(t->hist, (size_t)cap * sizeof *h);
        if (!h) return het_error_set(HET_ENOMEM, "out of memory recording metrics");
        t->hist = h;
        t->cap_hist = cap;
    }
    t->hist[t->n_hist++] = *st;
    return HET_OK;
}

/* ----------------------------------------------------------------------- epochs */

/* The advice after "training diverged": a oneDNN failure that made the NaN, if there was one
 * (het_step_dnnl_cause), else the learning rate. */
static const char *diverged_hint(void) {
    static char hint[320];
    return het_step_dnnl_cause(hint, sizeof hint) ? hint : "try a lower --lr";
}

/* After an epoch: a model with a non-finite parameter or state value (an update that blew up,
 * e.g. in the epoch's last step, after the last loss was checked) stops the run with the
 * epoch and the layer named, before it is evaluated or checkpointed over a good checkpoint. */
static int check_finite_model(het_trainer *t, int epoch) {
    het_model *m = t->model;
    const float *p = het_model_params(m), *s = het_model_state(m);
    size_t np = het_model_n_params(m), ns = het_model_n_state(m), bad = SIZE_MAX;
    int in_state = 0;
    for (size_t i = 0; i < np && bad == SIZE_MAX; i++)
        if (!isfinite(p[i])) bad = i;
    for (size_t i = 0; i < ns && bad == SIZE_MAX; i++)
        if (!isfinite(s[i])) bad = i, in_state = 1;
    if (bad == SIZE_MAX) return HET_OK;
    int layer = 0;
    for (int i = 0; i < het_model_n_layers(m); i++) {
        size_t off, n;
        if (in_state) het_model_layer_state(m, i, &off, &n);
        else het_model_layer_params(m, i, &off, &n);
        if (n > 0 && bad >= off && bad < off + n) layer = i;
    }
    return het_error_set(HET_EINVAL, "training diverged: non-finite %s in layer %d (%s) after "
                         "epoch %d, step %lld; the last checkpoint is kept (%s)",
                         in_state ? "state" : "parameters", layer,
                         het_model_layer(m, layer)->ops->name, epoch, (long long)t->ctx.step,
                         diverged_hint());
}

int het_trainer_train_epoch(het_trainer *t, het_epoch_stats *st) {
    const int e = t->epoch;
    het_strategy_ctx *c = &t->ctx;
    memset(st, 0, sizeof *st);
    st->epoch = e + 1;
    c->epoch = e;
    c->pace.factor = het_slowdown_factor_at(t->changes, t->n_changes, e + 1, t->rank,
                                            t->base_factor);
    het_step_epoch_begin(c);
    t->bar_loss = 0.0;
    t->bar_correct = t->bar_samples = 0;
    het_bar_begin(&t->bar, e + 1, t->cfg.epochs, t->n_train);
    if (c->epoch_pos == 0) memset(&c->esums, 0, sizeof c->esums); /* else a resumed piece */
    double t0 = het_lane_now(&t->ctx.lane);
    t->eval_wall_epoch = 0.0;
    int rc;
    for (;;) { /* the epoch's pieces: a checkpoint every --checkpoint-steps steps, a test
                  accuracy every --eval-every steps */
        const int64_t nc = t->cfg.checkpoint_steps, ne = t->cfg.eval_every;
        const int64_t next_c = nc > 0 ? (c->step / nc + 1) * nc : 0;
        const int64_t next_e = ne > 0 ? (c->step / ne + 1) * ne : 0;
        c->paused = 0;
        c->pause_step = next_c > 0 && (next_e <= 0 || next_c < next_e) ? next_c : next_e;
        c->pause_ckpt = next_c > 0 && c->pause_step == next_c;
        rc = t->strat->train_epoch(c, e, st);
        if (rc || !c->paused) break;
        if (next_e > 0 && c->step >= next_e && (rc = het_trainer_eval_inside(t))) break;
        if (next_c > 0 && c->step >= next_c) {
            if ((rc = het_trainer_agree(t, check_finite_model(t, e + 1)))) break;
            if ((rc = het_trainer_save(t, t->cfg.checkpoint))) break;
        }
    }
    c->epoch_pos = 0;
    c->paused = 0;
    double secs = het_lane_now(&t->ctx.lane) - t0;
    if (!het_clock_virtual()) secs -= t->eval_wall_epoch; /* virtual: rewound by eval_inside */
    het_bar_end(&t->bar);
    if (rc) return rc; /* strategies fail on every rank alike */
    if ((rc = het_trainer_agree(t, check_finite_model(t, e + 1)))) return rc;
    if ((rc = het_step_epoch_end(c))) return rc;
    st->epoch = e + 1;
    st->samples_per_s = secs > 0 ? (double)st->samples / secs : 0.0;
    st->epoch_s = secs;
    st->compute_s = c->times.compute_s;
    st->comm_s = c->times.comm_s;
    st->wait_s = c->times.wait_s;
    st->delay_s = c->times.delay_s;
    st->link_measured = t->size > 1 && c->links.measured;
    st->link_busy_max = c->links.busy_max;
    st->link_over_max = c->links.over_max;
    het_schedule_epoch_end(&t->sched, (float)st->loss);
    t->epoch++;
    return HET_OK;
}


int het_trainer_write_costs(het_trainer *t, const char *path) {
    int st = t->costs.to_layer ? HET_OK : het_trainer_costs_setup(t, NULL, 0);
    if (st) return st;
    char note[256];
    snprintf(note, sizeof note, "hetrain calibrate: compute costs of %s (CPU time, median of "
             "%d), seconds = A + B x samples", t->cfg.model, t->costs.reps);
    if (t->rank == 0) st = het_costs_write(&t->costs, path, note); /* core/outfile.c */
    return het_trainer_agree(t, st);
}

int het_trainer_calibrate(het_trainer *t, double *speeds) {
    double t0 = het_lane_now(&t->ctx.lane);
    int st = het_step_calibrate(&t->ctx, speeds);
    het_trace_add(t->ctx.trace, "calibration", t->ctx.lane.tid, 0, t0,
                  het_lane_now(&t->ctx.lane));
    return st;
}

/* ----------------------------------------------------------------------- the run */

static int checkpoint_due(const het_trainer *t) {
    const het_train_config *c = &t->cfg;
    return c->checkpoint[0] && (t->epoch % c->checkpoint_every == 0 || t->epoch >= c->epochs);
}

/* Opens the metrics file and the progress bar once per trainer. */
static int run_begin(het_trainer *t) {
    const het_train_config *c = &t->cfg;
    if (t->started) return HET_OK;
    t->started = 1;
    het_bar_init(&t->bar, c->progress);
    t->t_start = het_now();
    t->v_start = het_lane_now(&t->ctx.lane);
    int st = HET_OK;
    if (c->metrics[0] && t->rank == 0)
        st = het_metrics_open(&t->metrics, c->metrics, c->resume ? t->epoch : -1);
    return het_trainer_agree(t, st);
}

int het_trainer_run_epoch(het_trainer *t) {
    const het_train_config *c = &t->cfg;
    het_epoch_stats es;
    int st = run_begin(t);
    if (st) return st;
    if ((st = het_trainer_train_epoch(t, &es))) return st;
    if ((st = het_trainer_evaluate(t, &es.test_loss, &es.test_acc))) return st;
    if (!isfinite(es.test_loss) || !isfinite(es.loss)) /* the same on every rank */
        return het_error_set(HET_EINVAL, "training diverged: %s loss %s after epoch %d, step "
                             "%lld; the last checkpoint is kept (%s)",
                             isfinite(es.loss) ? "test" : "training",
                             isnan(isfinite(es.loss) ? es.test_loss : es.loss) ? "nan" : "inf",
                             es.epoch, (long long)t->ctx.step, diverged_hint());
    es.elapsed_s = het_now() - t->t_start - t->eval_wall;
    es.vtime_s = het_clock_virtual() ? het_lane_now(&t->ctx.lane) - t->v_start : 0.0;
    /* every epoch: whether rank 0 writes metrics is rank 0's business (consistency.c) */
    if ((st = het_trainer_memory(t, &es.peak_rss_max, &es.peak_rss_sum, &es.pss_sum)))
        return st;
    es.data_bytes = (int64_t)t->data_bytes;
    es.data_copies = t->data_copies;
    if ((st = push_history(t, &es))) return st;
    char split[256], extra[512] = "", json[1024] = "";
    het_trainer_format_split(t, split, sizeof split);
    if (t->strat->report) t->strat->report(&t->ctx, extra, sizeof extra, json, sizeof json);
    char skipped[64] = "";
    if (es.skipped)
        snprintf(skipped, sizeof skipped, " | skipped %lld non-finite step%s",
                 (long long)es.skipped, es.skipped == 1 ? "" : "s");
    char vt[64] = ""; /* the virtual clock beside the wall clock */
    if (het_clock_virtual())
        snprintf(vt, sizeof vt, " vtime %.2fs (epoch %.3fs)", es.vtime_s, es.epoch_s);
    het_log(HET_LOG_INFO, "epoch %d/%d loss %.4f train_acc %.4f test_loss %.4f test_acc "
            "%.4f lr %.4g %.0f samples/s%s %.2fs%s%s%s%s\n", es.epoch, c->epochs, es.loss,
            es.train_acc, es.test_loss, es.test_acc, es.lr, es.samples_per_s,
            het_clock_virtual() ? " (virtual)" : "", es.elapsed_s, vt, split, extra, skipped);
    st = HET_OK;
    if (t->metrics)
        st = het_metrics_epoch(t->metrics, &es, t->size > 1 ? t->ctx.rank_times : NULL,
                               t->size > 1 ? t->ctx.rank_bytes : NULL, t->size, json);
    if ((st = het_trainer_agree(t, st))) return st;
    if (checkpoint_due(t)) st = het_trainer_save(t, c->checkpoint);
    return st;
}

int het_trainer_run(het_trainer *t) {
    const het_train_config *c = &t->cfg;
    int st;
    if (c->resume && (st = het_trainer_load(t, c->checkpoint))) return st;
    if (c->resume && t->ctx.epoch_pos > 0)
        het_log(HET_LOG_INFO, "resumed from %s inside epoch %d at sample %lld (step %lld)\n",
                c->checkpoint, t->epoch + 1, (long long)t->ctx.epoch_pos,
                (long long)t->ctx.step);
    else if (c->resume)
        het_log(HET_LOG_INFO, "resumed from %s after epoch %d (step %lld)\n", c->checkpoint,
                t->epoch, (long long)t->ctx.step);
    if ((st = run_begin(t))) return st;
    if ((st = het_trainer_faults(t))) return st;
    while (t->epoch < c->epochs)
        if ((st = het_trainer_run_epoch(t))) return st;
    if (c->trace[0]) {
        st = het_trace_write(t->ctx.trace, t->ctx.comm, c->trace);
        if ((st = het_trainer_agree(t, st))) return st;
        het_log(HET_LOG_INFO, "trace: %s\n", c->trace);
    }
    if (c->export_safetensors[0]) {
        st = t->rank == 0 ? het_safetensors_write(t->model, c->export_safetensors) : HET_OK;
        if ((st = het_trainer_agree(t, st))) return st;
        het_log(HET_LOG_INFO, "weights: %s\n", c->export_safetensors);
    }
    if (c->export_onnx[0]) { /* the network again from its file (the weights are the model's) */
        het_net net;
        memset(&net, 0, sizeof net);
        st = HET_OK;
        if (t->rank == 0) {
            st = c->model_file[0] ? het_net_read(&net, c->model_file) : het_net_zoo(&net, c->model);
            if (!st) st = het_net_write_onnx(&net, t->model, c->export_onnx);
            het_net_free(&net);
        }
        if ((st = het_trainer_agree(t, st))) return st;
        het_log(HET_LOG_INFO, "onnx: %s\n", c->export_onnx);
    }
    if ((st = het_trainer_report_memory(t))) return st;
    if (t->n_hist > 0) {
        const het_epoch_stats *last = &t->hist[t->n_hist - 1];
        int64_t skipped = 0;
        char note[64] = "";
        for (int i = 0; i < t->n_hist; i++) skipped += t->hist[i].skipped;
        if (skipped)
            snprintf(note, sizeof note, ", %lld non-finite step%s skipped", (long long)skipped,
                     skipped == 1 ? "" : "s");
        het_log(HET_LOG_INFO, "done: %d epochs, test_loss %.4f test_acc %.4f%s%s%s\n", t->epoch,
                last->test_loss, last->test_acc, note, c->checkpoint[0] ? ", checkpoint " : "",
                c->checkpoint);
    }
    return het_trainer_agree(t, het_metrics_close_checked(&t->metrics));
}

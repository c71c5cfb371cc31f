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
 * Nothing here reads the clock except for reported timings. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hetero/hetero.h"
#include "hetrain/comm.h"
#include "hetrain/tensor.h"
#include "hetrain/train.h"
#include "strategy/strategy.h"
#include "train/internal.h"

struct het_trainer {
    het_train_config cfg;
    het_dataset train, test;
    int64_t n_train, n_test;   /* after --train-limit / --test-limit */
    het_model *model;
    float *opt_state;
    size_t n_opt_state;
    het_schedule sched;
    het_sampler sampler;
    float *x;                  /* batch x sample floats */
    uint8_t *y;
    int64_t *idx;
    int epoch;                 /* epochs completed; ctx.step counts optimizer steps */
    het_epoch_stats *hist;
    int n_hist, cap_hist;
    het_metrics_file *metrics;
    het_bar bar;
    int started;               /* run_begin done */
    double t_start;
    /* distributed */
    int mpi;                   /* MPI is initialized: collective over MPI_COMM_WORLD */
    int rank, size;
    het_topo topo;
    int have_topo;
    het_comm *comm;
    const het_strategy_ops *strat;
    int strat_ready;           /* strat->init succeeded: free it */
    het_strategy_ctx ctx;
    double *rank_times;        /* 4 per rank (rank 0) or 4 (others): the last epoch's split */
    double bar_loss;           /* progress bar: running sums of the epoch */
    int64_t bar_correct, bar_samples;
};

/* Every rank passes its status; all get the lowest failing rank's (see het_comm_agree). */
static int agree(const het_trainer *t, int st) {
    return t->mpi && t->size > 1 ? het_comm_agree(MPI_COMM_WORLD, st) : st;
}

/* ----------------------------------------------------------------------- step helpers */

uint64_t het_train_step_seed(uint64_t seed, int64_t step) {
    het_rng r;
    het_rng_seed2(&r, seed ^ 0x6a09e667f3bcc909ULL, (uint64_t)step);
    return het_rng_u64(&r);
}

/* Gathering a batch runs on the model's worker threads too, each over a slice of samples. */
typedef struct gather_job {
    const het_dataset *d;
    const int64_t *idx;
    float *x;
    uint8_t *y;
} gather_job;

static void gather_range(void *user, size_t lo, size_t hi) {
    gather_job *j = user;
    het_dataset_gather(j->d, j->idx + lo, (int)(hi - lo), j->x + lo * het_shape_size(j->d->shape),
                       j->y + lo);
}

int het_train_batch_grads_scaled(het_model *m, const het_dataset *d, const int64_t *idx,
                                 int count, float *x, uint8_t *y, float grad_scale,
                                 uint64_t step_seed, het_batch_result *res) {
    if (count < 0 || count > het_model_max_batch(m))
        return het_error_set(HET_EINVAL, "batch of %d samples, expected 0..%d", count,
                             het_model_max_batch(m));
    het_model_zero_grads(m);
    if (count == 0) {
        memset(res, 0, sizeof *res);
        return HET_OK;
    }
    gather_job g = {d, idx, x, y};
    het_model_parallel_for(m, (size_t)count, gather_range, &g);
    return het_model_train_batch(m, x, y, count, grad_scale, step_seed, res);
}

int het_train_step(het_model *m, const het_dataset *d, const int64_t *idx, int count, float *x,
                   uint8_t *y, float grad_scale, uint64_t step_seed, const het_update *u,
                   het_batch_result *res) {
    if (count < 1 || count > het_model_max_batch(m))
        return het_error_set(HET_EINVAL, "batch of %d samples, expected 1..%d", count,
                             het_model_max_batch(m));
    gather_job g = {d, idx, x, y};
    het_model_parallel_for(m, (size_t)count, gather_range, &g);
    return het_model_train_step(m, x, y, count, grad_scale, step_seed, u, res);
}

int het_train_batch_grads(het_model *m, const het_dataset *d, const int64_t *idx, int count,
                          float *x, uint8_t *y, uint64_t step_seed, het_batch_result *res) {
    if (count < 1 || count > het_model_max_batch(m))
        return het_error_set(HET_EINVAL, "batch of %d samples, expected 1..%d", count,
                             het_model_max_batch(m));
    return het_train_batch_grads_scaled(m, d, idx, count, x, y, 1.0f / (float)count, step_seed,
                                        res);
}

/* Sums of samples [from, to) of d in eval mode, in batches of at most `batch`. */
static int eval_range(het_model *m, const het_dataset *d, int64_t from, int64_t to, int batch,
                      float *x, uint8_t *y, int64_t *idx, het_batch_result *res) {
    memset(res, 0, sizeof *res);
    for (int64_t pos = from; pos < to; pos += batch) {
        int count = (int)(to - pos < batch ? to - pos : batch);
        for (int i = 0; i < count; i++) idx[i] = pos + i;
        het_dataset_gather(d, idx, count, x, y);
        het_batch_result r;
        int st = het_model_eval_batch(m, x, y, count, &r);
        if (st) return st;
        res->loss_sum += r.loss_sum;
        res->correct += r.correct;
        res->count += r.count;
    }
    return HET_OK;
}

int het_eval_dataset(het_model *m, const het_dataset *d, int64_t n, int batch, float *x,
                     uint8_t *y, int64_t *idx, het_batch_result *res) {
    memset(res, 0, sizeof *res);
    if (batch < 1 || batch > het_model_max_batch(m))
        return het_error_set(HET_EINVAL, "eval batch %d, expected 1..%d", batch,
                             het_model_max_batch(m));
    return eval_range(m, d, 0, n, batch, x, y, idx, res);
}

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

/* The distributed part of create: topology, comm, slowdown. */
static int create_mpi(het_trainer *t) {
    const het_train_config *cfg = &t->cfg;
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    if (inited) MPI_Finalized(&finalized);
    t->mpi = inited && !finalized;
    t->ctx.world = MPI_COMM_NULL;
    if (t->mpi) {
        MPI_Comm_rank(MPI_COMM_WORLD, &t->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &t->size);
    }
    double factors[1024];
    int nf = cfg->slowdown[0] ? het_slowdown_parse(cfg->slowdown, factors, 1024) : 0;
    if (nf < 0) return nf;
    if (nf > 0 && nf != t->size)
        return het_error_set(HET_EINVAL, "slowdown: %d factor%s for %d rank%s, expected one "
                             "per rank", nf, nf == 1 ? "" : "s", t->size, t->size == 1 ? "" :
                             "s");
    het_pace_init(&t->ctx.pace, nf > 0 ? factors[t->rank] : 1.0);
    if (!t->mpi) return HET_OK;
    int st = het_topo_init(&t->topo, MPI_COMM_WORLD, cfg->ranks_per_node);
    t->have_topo = st == HET_OK;
    if ((st = agree(t, st))) return st;
    het_netem ne = {cfg->net_lat, cfg->net_bw};
    st = agree(t, het_comm_create(&t->comm, &t->topo, ne));
    t->ctx.world = het_comm_mpi(t->comm, HET_COMM_WORLD);
    return st;
}

int het_trainer_create(het_trainer **out, const het_train_config *cfg) {
    *out = NULL;
    int st = het_train_config_check(cfg);
    if (st) return st;
    const het_strategy_ops *strat = het_strategy_find(cfg->strategy);
    if (!strat) return HET_EINVAL;
    het_trainer *t = calloc(1, sizeof *t);
    if (!t) return het_error_set(HET_ENOMEM, "out of memory creating the trainer");
    t->cfg = *cfg;
    t->size = 1;
    t->strat = strat;
    het_blas_set_threads(1); /* parallelism is the model's workers; see --threads */
    if ((st = create_mpi(t))) goto fail;
    st = het_dataset_load_named(&t->train, &t->test, cfg->data,
                                cfg->data_dir[0] ? cfg->data_dir : NULL);
    if ((st = agree(t, st))) goto fail;
    t->n_train = t->train.n;
    t->n_test = t->test.n;
    if (cfg->train_limit > 0 && cfg->train_limit < t->n_train) t->n_train = cfg->train_limit;
    if (cfg->test_limit > 0 && cfg->test_limit < t->n_test) t->n_test = cfg->test_limit;
    if (t->n_train < 1 || t->n_test < 1) {
        st = het_error_set(HET_EINVAL, "dataset %s: %lld training and %lld test samples, "
                           "expected at least 1 of each", cfg->data, (long long)t->n_train,
                           (long long)t->n_test);
        goto fail;
    }
    st = het_zoo_build(&t->model, cfg->model, t->train.shape, t->train.n_classes, cfg->batch,
                       cfg->threads);
    if (!st) {
        het_model_init_params(t->model, cfg->seed);
        t->n_opt_state = het_optim_state_floats(&cfg->optim, het_model_n_params(t->model));
        size_t sample = het_shape_size(t->train.shape);
        t->opt_state = het_alloc(t->n_opt_state * sizeof(float));
        t->x = het_alloc((size_t)cfg->batch * sample * sizeof(float));
        t->y = het_alloc((size_t)cfg->batch);
        t->idx = het_alloc((size_t)cfg->batch * sizeof(int64_t));
        t->rank_times = calloc((size_t)4 * (size_t)t->size, sizeof(double));
        if (!t->opt_state || !t->x || !t->y || !t->idx || !t->rank_times)
            st = het_error_set(HET_ENOMEM, "out of memory for the model's buffers");
    }
    if (!st) st = het_sampler_init(&t->sampler, t->n_train, cfg->seed, 1);
    if ((st = agree(t, st))) goto fail;
    if (t->size > 1) { /* every replica starts from rank 0's weights */
        het_model *m = t->model;
        st = het_comm_bcast(t->comm, HET_COMM_WORLD, het_model_params(m),
                            het_model_n_params(m) * sizeof(float), 0);
        if (!st && het_model_n_state(m))
            st = het_comm_bcast(t->comm, HET_COMM_WORLD, het_model_state(m),
                                het_model_n_state(m) * sizeof(float), 0);
        if ((st = agree(t, st))) goto fail;
    }
    t->sched = cfg->sched;
    t->sched.total_epochs = cfg->epochs;
    het_strategy_ctx *c = &t->ctx;
    c->cfg = &t->cfg;
    c->model = t->model;
    c->train = &t->train;
    c->n_train = t->n_train;
    c->sampler = &t->sampler;
    c->sched = &t->sched;
    c->opt_state = t->opt_state;
    c->x = t->x;
    c->y = t->y;
    c->comm = t->comm;
    c->rank = t->rank;
    c->size = t->size;
    c->on_step = on_step;
    st = agree(t, t->strat->init(c));
    t->strat_ready = 1; /* free() must release what a failed init left */
    if (st) goto fail;
    if (cfg->trace[0] && (st = het_trace_create(&c->trace, c->world))) goto fail;
    t->t_start = het_now();
    *out = t;
    return HET_OK;
fail:
    het_trainer_free(t);
    return st;
}

void het_trainer_free(het_trainer *t) {
    if (!t) return;
    if (t->strat_ready) t->strat->free(&t->ctx);
    het_trace_free(t->ctx.trace);
    het_metrics_close(t->metrics);
    het_sampler_free(&t->sampler);
    het_model_free(t->model);
    het_dataset_free(&t->train);
    het_dataset_free(&t->test);
    het_free(t->opt_state);
    het_free(t->x);
    het_free(t->y);
    het_free(t->idx);
    free(t->rank_times);
    free(t->hist);
    het_comm_free(t->comm);
    if (t->have_topo) het_topo_free(&t->topo);
    free(t);
}

het_model *het_trainer_model(het_trainer *t) { return t->model; }
int het_trainer_rank(const het_trainer *t) { return t->rank; }
int het_trainer_size(const het_trainer *t) { return t->size; }

const double *het_trainer_rank_times(const het_trainer *t, int *n_ranks) {
    *n_ranks = t->rank == 0 ? t->size : 1;
    return t->rank_times;
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

void het_train_optim_step(het_model *m, const het_optim_config *c, float lr, float *opt_state,
                          int64_t t) {
    het_update u = {c, lr, opt_state, t};
    het_model_update(m, &u);
}

int het_trainer_train_epoch(het_trainer *t, het_epoch_stats *st) {
    const int e = t->epoch;
    het_strategy_ctx *c = &t->ctx;
    memset(st, 0, sizeof *st);
    st->epoch = e + 1;
    memset(&c->times, 0, sizeof c->times);
    t->bar_loss = 0.0;
    t->bar_correct = t->bar_samples = 0;
    het_bar_begin(&t->bar, e + 1, t->cfg.epochs, t->n_train);
    double t0 = het_now();
    int rc = t->strat->train_epoch(c, e, st);
    double secs = het_now() - t0;
    het_bar_end(&t->bar);
    if (rc) return rc; /* strategies fail on every rank alike */
    st->epoch = e + 1;
    st->samples_per_s = secs > 0 ? (double)st->samples / secs : 0.0;
    st->compute_s = c->times.compute_s;
    st->comm_s = c->times.comm_s;
    st->wait_s = c->times.wait_s;
    st->delay_s = c->times.delay_s;
    double mine[4] = {st->compute_s, st->comm_s, st->wait_s, st->delay_s};
    if (t->size > 1) {
        int err = MPI_Gather(mine, 4, MPI_DOUBLE, t->rank_times, 4, MPI_DOUBLE, 0, c->world);
        if (err != MPI_SUCCESS) return het_error_set(HET_EMPI, "MPI_Gather of timings failed");
        if (t->rank != 0) memcpy(t->rank_times, mine, sizeof mine);
    } else {
        memcpy(t->rank_times, mine, sizeof mine);
    }
    het_schedule_epoch_end(&t->sched, (float)st->loss);
    t->epoch++;
    return HET_OK;
}


int het_trainer_evaluate(het_trainer *t, double *loss, double *acc) {
    het_model *m = t->strat->model_for_eval(&t->ctx);
    double t0 = het_now(), sum[3];
    het_batch_result r;
    int st;
    if (t->size == 1) {
        st = het_eval_dataset(m, &t->test, t->n_test, t->cfg.batch, t->x, t->y, t->idx, &r);
        if (st) return st;
        sum[0] = r.loss_sum;
        sum[1] = r.correct;
        sum[2] = r.count;
    } else { /* rank r evaluates shard r of the test set; the sums are reduced */
        int64_t lo, len;
        het_split_even(t->n_test, t->size, t->rank, &lo, &len);
        st = agree(t, eval_range(m, &t->test, lo, lo + len, t->cfg.batch, t->x, t->y, t->idx,
                                 &r));
        if (st) return st;
        sum[0] = r.loss_sum;
        sum[1] = r.correct;
        sum[2] = r.count;
        if ((st = het_step_sum_doubles(&t->ctx, sum, 3))) return st;
    }
    het_trace_add(t->ctx.trace, HET_EV_EVAL, t->epoch, t0, het_now());
    *loss = sum[2] > 0 ? sum[0] / sum[2] : 0.0;
    *acc = sum[2] > 0 ? sum[1] / sum[2] : 0.0;
    return HET_OK;
}

/* ----------------------------------------------------------------------- checkpoints */

#define META_BYTES 96u
#define SCHED_BYTES 52u
#define PROGRESS_BYTES 48u
#define RECORD_BYTES 56u

static void encode_meta(het_wbuf *b, const char *model, const char *data, size_t n_params,
                        size_t n_state, het_opt_kind kind, size_t n_opt) {
    het_w_str(b, model, 32);
    het_w_str(b, data, 32);
    het_w_u64(b, n_params);
    het_w_u64(b, n_state);
    het_w_u32(b, (uint32_t)kind);
    het_w_u32(b, 0);
    het_w_u64(b, n_opt);
}

/* Rank 0's part of a save: the trainer's sections, then the strategy's; w is committed. */
static int save_file(het_trainer *t, const char *path) {
    het_ckpt_writer *w;
    int st = het_ckpt_writer_open(&w, path);
    if (st) {
        t->strat->save_state(&t->ctx, NULL); /* the strategy's collectives still run */
        return st;
    }
    het_model *m = t->model;
    size_t n_params = het_model_n_params(m), n_state = het_model_n_state(m);

    size_t cfg_len = het_train_config_format(&t->cfg, 0, NULL, 0);
    char *cfg_text = malloc(cfg_len + 1);
    size_t rec_bytes = 8 + (size_t)t->n_hist * RECORD_BYTES;
    uint8_t *rec = malloc(rec_bytes);
    if (!cfg_text || !rec) {
        free(cfg_text);
        free(rec);
        het_ckpt_writer_abort(w);
        return het_error_set(HET_ENOMEM, "out of memory writing %s", path);
    }
    het_train_config_format(&t->cfg, 0, cfg_text, cfg_len + 1);

    uint8_t meta[META_BYTES], sched[SCHED_BYTES], prog[PROGRESS_BYTES];
    het_wbuf b = {meta, sizeof meta, 0};
    encode_meta(&b, t->cfg.model, t->cfg.data, n_params, n_state, t->cfg.optim.kind,
                t->n_opt_state);

    const het_schedule *s = &t->sched;
    b = (het_wbuf){sched, sizeof sched, 0};
    het_w_u32(&b, (uint32_t)s->kind);
    het_w_f32(&b, s->base_lr);
    het_w_f32(&b, s->warmup_epochs);
    het_w_u32(&b, (uint32_t)s->step_epochs);
    het_w_f32(&b, s->gamma);
    het_w_u32(&b, (uint32_t)s->total_epochs);
    het_w_f32(&b, s->min_lr);
    het_w_u32(&b, (uint32_t)s->patience);
    het_w_f32(&b, s->factor);
    het_w_f32(&b, s->threshold);
    het_w_f32(&b, s->scale);
    het_w_f32(&b, s->best);
    het_w_u32(&b, (uint32_t)s->bad_epochs);

    b = (het_wbuf){prog, sizeof prog, 0};
    het_w_u64(&b, (uint64_t)t->epoch);
    het_w_u64(&b, (uint64_t)t->ctx.step);
    het_w_u64(&b, t->sampler.seed);
    het_w_u64(&b, (uint64_t)t->sampler.n);
    het_w_u64(&b, 0); /* position inside the epoch: checkpoints are taken between epochs */
    het_w_u64(&b, t->cfg.seed);

    b = (het_wbuf){rec, rec_bytes, 0};
    het_w_u64(&b, (uint64_t)t->n_hist);
    for (int i = 0; i < t->n_hist; i++) {
        const het_epoch_stats *h = &t->hist[i];
        het_w_u64(&b, (uint64_t)h->epoch);
        het_w_u64(&b, (uint64_t)h->samples);
        het_w_f64(&b, h->loss);
        het_w_f64(&b, h->train_acc);
        het_w_f64(&b, h->test_loss);
        het_w_f64(&b, h->test_acc);
        het_w_f64(&b, h->lr);
    }

    st = het_ckpt_put(w, "config", cfg_text, strlen(cfg_text));
    if (!st) st = het_ckpt_put(w, "meta", meta, sizeof meta);
    if (!st) st = het_ckpt_put(w, "params", het_model_params(m), n_params * sizeof(float));
    if (!st) st = het_ckpt_put(w, "state", het_model_state(m), n_state * sizeof(float));
    if (!st) st = het_ckpt_put(w, "optim", t->opt_state, t->n_opt_state * sizeof(float));
    if (!st) st = het_ckpt_put(w, "sched", sched, sizeof sched);
    if (!st) st = het_ckpt_put(w, "progress", prog, sizeof prog);
    if (!st) st = het_ckpt_put(w, "metrics", rec, rec_bytes);
    free(cfg_text);
    free(rec);
    int ss = t->strat->save_state(&t->ctx, st ? NULL : w);
    if (!st) st = ss;
    if (st) {
        het_ckpt_writer_abort(w);
        return st;
    }
    return het_ckpt_writer_commit(w);
}

int het_trainer_save(het_trainer *t, const char *path) {
    double t0 = het_now();
    int st = t->rank == 0 ? save_file(t, path) : t->strat->save_state(&t->ctx, NULL);
    het_trace_add(t->ctx.trace, HET_EV_CKPT, t->epoch, t0, het_now());
    return agree(t, st);
}

/* Checks the "meta" section against what this process built. n_opt < 0: not checked. */
static int check_meta(het_ckpt_reader *r, const char *model, het_model *m, int check_opt,
                      het_opt_kind kind, size_t n_opt) {
    const void *p;
    size_t n;
    uint64_t off;
    int st = het_ckpt_find(r, "meta", &p, &n, &off);
    if (st) return st;
    const char *path = het_ckpt_reader_path(r);
    if (n != META_BYTES)
        return het_error_set(HET_EFORMAT, "%s: offset %llu: section 'meta' of %zu bytes, "
                             "expected %u", path, (unsigned long long)off - 8, n, META_BYTES);
    het_rbuf b = {p, 0};
    char name[33], data[33];
    het_r_str(&b, name, 32);
    het_r_str(&b, data, 32);
    uint64_t np = het_r_u64(&b), ns = het_r_u64(&b);
    uint32_t k = het_r_u32(&b);
    (void)het_r_u32(&b);
    uint64_t no = het_r_u64(&b);
    static const char *const opt_names[] = {"sgd", "adam"};
    if (strcmp(name, model) != 0)
        return het_error_set(HET_EFORMAT, "%s: offset %llu: model \"%s\", expected \"%s\"", path,
                             (unsigned long long)off, name, model);
    if (np != het_model_n_params(m))
        return het_error_set(HET_EFORMAT, "%s: offset %llu: %llu parameters, expected %zu", path,
                             (unsigned long long)off + 64, (unsigned long long)np,
                             het_model_n_params(m));
    if (ns != het_model_n_state(m))
        return het_error_set(HET_EFORMAT, "%s: offset %llu: %llu state values, expected %zu",
                             path, (unsigned long long)off + 72, (unsigned long long)ns,
                             het_model_n_state(m));
    if (!check_opt) return HET_OK;
    if (k != (uint32_t)kind)
        return het_error_set(HET_EFORMAT, "%s: offset %llu: optimizer %s, expected %s", path,
                             (unsigned long long)off + 80, k < 2 ? opt_names[k] : "unknown",
                             opt_names[kind]);
    if (no != n_opt)
        return het_error_set(HET_EFORMAT, "%s: offset %llu: %llu optimizer state values, "
                             "expected %zu (momentum on one side only?)", path,
                             (unsigned long long)off + 88, (unsigned long long)no, n_opt);
    return HET_OK;
}

/* Section `tag`, which must be exactly `bytes` long; *off gets its file offset. */
static int section(het_ckpt_reader *r, const char *tag, size_t bytes, const void **p,
                   uint64_t *off) {
    size_t n;
    int st = het_ckpt_find(r, tag, p, &n, off);
    if (st) return st;
    if (n != bytes)
        return het_error_set(HET_EFORMAT, "%s: offset %llu: section '%s' of %zu bytes, expected "
                             "%zu", het_ckpt_reader_path(r), (unsigned long long)*off - 8, tag,
                             n, bytes);
    return HET_OK;
}

int het_checkpoint_load_weights(het_model *m, const char *model_name, const char *path) {
    het_ckpt_reader *r;
    int st = het_ckpt_reader_open(&r, path);
    if (st) return st;
    size_t np = het_model_n_params(m) * sizeof(float), ns = het_model_n_state(m) * sizeof(float);
    const void *params, *state;
    uint64_t off;
    st = check_meta(r, model_name, m, 0, HET_OPT_SGD, 0);
    if (!st) st = section(r, "params", np, &params, &off);
    if (!st) st = section(r, "state", ns, &state, &off);
    if (!st) {
        memcpy(het_model_params(m), params, np);
        if (ns) memcpy(het_model_state(m), state, ns);
    }
    het_ckpt_reader_close(r);
    return st;
}

static int load_file(het_trainer *t, const char *path);

int het_trainer_load(het_trainer *t, const char *path) {
    return agree(t, load_file(t, path));
}

/* Every rank reads the same file; the strategy's sections are read last. */
static int load_file(het_trainer *t, const char *path) {
    het_ckpt_reader *r;
    int st = het_ckpt_reader_open(&r, path);
    if (st) return st;
    het_model *m = t->model;
    size_t np = het_model_n_params(m) * sizeof(float), ns = het_model_n_state(m) * sizeof(float);
    size_t no = t->n_opt_state * sizeof(float), rec_bytes = 0;
    const void *params, *state, *optim, *sched, *prog, *rec;
    uint64_t off, prog_off, rec_off;
    /* Check everything first, so that a bad file leaves the trainer as it was. */
    st = check_meta(r, t->cfg.model, m, 1, t->cfg.optim.kind, t->n_opt_state);
    if (!st) st = section(r, "params", np, &params, &off);
    if (!st) st = section(r, "state", ns, &state, &off);
    if (!st) st = section(r, "optim", no, &optim, &off);
    if (!st) st = section(r, "sched", SCHED_BYTES, &sched, &off);
    if (!st) st = section(r, "progress", PROGRESS_BYTES, &prog, &prog_off);
    if (!st) st = het_ckpt_find(r, "metrics", &rec, &rec_bytes, &rec_off);
    if (st) goto done;
    het_rbuf b = {prog, 0};
    uint64_t epoch = het_r_u64(&b), step = het_r_u64(&b);
    if (epoch > 1000000 || step > (uint64_t)INT64_MAX) {
        st = het_error_set(HET_EFORMAT, "%s: offset %llu: epoch %llu, step %llu, expected at "
                           "most 1000000 epochs", path, (unsigned long long)prog_off,
                           (unsigned long long)epoch, (unsigned long long)step);
        goto done;
    }
    uint64_t n_rec = rec_bytes >= 8 ? het_get_u64(rec) : 0;
    if (rec_bytes != 8 + epoch * RECORD_BYTES || n_rec != epoch) {
        st = het_error_set(HET_EFORMAT, "%s: offset %llu: metrics section of %zu bytes holding "
                           "%llu records, expected %llu bytes with one record per each of "
                           "%llu epochs", path, (unsigned long long)rec_off, rec_bytes,
                           (unsigned long long)n_rec,
                           (unsigned long long)(8 + epoch * RECORD_BYTES),
                           (unsigned long long)epoch);
        goto done;
    }
    if (t->cap_hist < (int)epoch) {
        het_epoch_stats *h = realloc(t->hist, (epoch ? epoch : 1) * sizeof *h);
        if (!h) {
            st = het_error_set(HET_ENOMEM, "out of memory loading %s", path);
            goto done;
        }
        t->hist = h;
        t->cap_hist = (int)(epoch ? epoch : 1);
    }
    /* Everything is checked: restore. */
    memcpy(het_model_params(m), params, np);
    if (ns) memcpy(het_model_state(m), state, ns);
    if (no) memcpy(t->opt_state, optim, no);
    /* Hyper-parameters come from the configuration; the plateau state from the file. */
    b = (het_rbuf){sched, 40};
    t->sched.scale = het_r_f32(&b);
    t->sched.best = het_r_f32(&b);
    t->sched.bad_epochs = (int)het_r_u32(&b);
    t->epoch = (int)epoch;
    t->ctx.step = (int64_t)step;
    t->n_hist = (int)epoch;
    b = (het_rbuf){rec, 8};
    for (int i = 0; i < t->n_hist; i++) {
        het_epoch_stats *h = &t->hist[i];
        memset(h, 0, sizeof *h);
        h->epoch = (int)het_r_u64(&b);
        h->samples = (int64_t)het_r_u64(&b);
        h->loss = het_r_f64(&b);
        h->train_acc = het_r_f64(&b);
        h->test_loss = het_r_f64(&b);
        h->test_acc = het_r_f64(&b);
        h->lr = het_r_f64(&b);
    }
    st = t->strat->load_state(&t->ctx, r);
done:
    het_ckpt_reader_close(r);
    return st;
}

int het_train_config_from_checkpoint(het_train_config *c, const char *path) {
    het_ckpt_reader *r;
    int st = het_ckpt_reader_open(&r, path);
    if (st) return st;
    const void *p;
    size_t n;
    uint64_t off;
    st = het_ckpt_find(r, "config", &p, &n, &off);
    if (!st) st = het_train_config_apply_text(c, path, off, p, n);
    het_ckpt_reader_close(r);
    return st;
}

/* ----------------------------------------------------------------------- the run */

static void print_config(het_trainer *t) {
    const het_train_config *c = &t->cfg;
    het_model *m = t->model;
    het_shape s = t->train.shape;
    het_log(HET_LOG_INFO, "hetrain: %s on %s: %lld train / %lld test samples of %dx%dx%d, "
            "%d classes\n", c->model, c->data, (long long)t->n_train, (long long)t->n_test, s.c,
            s.h, s.w, t->train.n_classes);
    /* one rank trains with het_model_train_step: dense stacks split features (dense_stack.c) */
    int stack = het_model_stacked(m) && t->size <= 1;
    het_log(HET_LOG_INFO, "model: %zu parameters, %.4g MFLOP/sample forward, %d worker "
            "thread%s (split by %s), %.1f MiB; OpenBLAS kernels %s\n", het_model_n_params(m),
            het_model_flops_per_sample(m) / 1e6, het_model_workers(m),
            het_model_workers(m) == 1 ? "" : "s", stack ? "features, update folded in" : "samples",
            (double)het_model_bytes(m) / 1048576.0, het_blas_corename());
    size_t len = het_train_config_format(c, 1, NULL, 0);
    char *text = malloc(len + 1);
    if (!text) return;
    het_train_config_format(c, 1, text, len + 1);
    /* "key = value\n" lines -> "key=value key=value", empty paths left out */
    char *line = malloc(len + 16), *o = line;
    if (line) {
        o += sprintf(o, "config:");
        for (char *p = strtok(text, "\n"); p; p = strtok(NULL, "\n")) {
            char *eq = strstr(p, " = ");
            if (!eq || !eq[3]) continue;
            *eq = '\0';
            o += sprintf(o, " %s=%s", p, eq + 3);
        }
        het_log(HET_LOG_INFO, "%s\n", line);
    }
    free(line);
    free(text);
}

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
    int st = HET_OK;
    if (c->metrics[0] && t->rank == 0)
        st = het_metrics_open(&t->metrics, c->metrics, c->resume ? t->epoch : -1);
    return agree(t, st);
}

/* " | compute 81% comm 6% wait 11% delay 2% (rank 0), slowest rank 3 compute 97%" */
static void format_split(const het_trainer *t, char *buf, size_t n) {
    buf[0] = '\0';
    if (t->size < 2 || t->rank != 0) return;
    const double *rt = t->rank_times;
    double tot = rt[0] + rt[1] + rt[2] + rt[3];
    int slow = 0;
    for (int q = 1; q < t->size; q++)
        if (rt[4 * q] > rt[4 * slow]) slow = q;
    const double *s = rt + 4 * slow;
    double tots = s[0] + s[1] + s[2] + s[3];
    if (tot <= 0 || tots <= 0) return;
    snprintf(buf, n, " | compute %.0f%% comm %.0f%% wait %.0f%% delay %.0f%% (rank 0), slowest "
             "rank %d compute %.0f%%", 100 * rt[0] / tot, 100 * rt[1] / tot, 100 * rt[2] / tot,
             100 * rt[3] / tot, slow, 100 * s[0] / tots);
}

int het_trainer_run_epoch(het_trainer *t) {
    const het_train_config *c = &t->cfg;
    het_epoch_stats es;
    int st = run_begin(t);
    if (st) return st;
    if ((st = het_trainer_train_epoch(t, &es))) return st;
    if ((st = het_trainer_evaluate(t, &es.test_loss, &es.test_acc))) return st;
    es.elapsed_s = het_now() - t->t_start;
    if ((st = push_history(t, &es))) return st;
    char split[160];
    format_split(t, split, sizeof split);
    het_log(HET_LOG_INFO, "epoch %d/%d loss %.4f train_acc %.4f test_loss %.4f test_acc "
            "%.4f lr %.4g %.0f samples/s %.2fs%s\n", es.epoch, c->epochs, es.loss, es.train_acc,
            es.test_loss, es.test_acc, es.lr, es.samples_per_s, es.elapsed_s, split);
    st = HET_OK;
    if (t->metrics)
        st = het_metrics_epoch(t->metrics, &es, t->size > 1 ? t->rank_times : NULL, t->size);
    if ((st = agree(t, st))) return st;
    if (checkpoint_due(t)) st = het_trainer_save(t, c->checkpoint);
    return st;
}

int het_trainer_run(het_trainer *t) {
    const het_train_config *c = &t->cfg;
    int st;
    if (c->resume && (st = het_trainer_load(t, c->checkpoint))) return st;
    print_config(t);
    if (t->mpi) {
        char topo[256];
        het_topo_describe(&t->topo, topo, sizeof topo);
        het_log(HET_LOG_INFO, "ranks: %s; strategy %s, global batch %d", topo, c->strategy,
                c->batch);
        if (c->slowdown[0]) het_log(HET_LOG_INFO, ", slowdown %s", c->slowdown);
        if (c->net_bw > 0 || c->net_lat > 0)
            het_log(HET_LOG_INFO, ", emulated network %.3g B/s %.3g s", c->net_bw,
                    (double)c->net_lat);
        het_log(HET_LOG_INFO, "\n");
    }
    if (c->resume)
        het_log(HET_LOG_INFO, "resumed from %s after epoch %d (step %lld)\n", c->checkpoint,
                t->epoch, (long long)t->ctx.step);
    if ((st = run_begin(t))) return st;
    while (t->epoch < c->epochs)
        if ((st = het_trainer_run_epoch(t))) return st;
    if (c->trace[0]) {
        if ((st = agree(t, het_trace_write(t->ctx.trace, c->trace)))) return st;
        het_log(HET_LOG_INFO, "trace: %s\n", c->trace);
    }
    if (c->export_safetensors[0]) {
        st = t->rank == 0 ? het_safetensors_write(t->model, c->export_safetensors) : HET_OK;
        if ((st = agree(t, st))) return st;
        het_log(HET_LOG_INFO, "weights: %s\n", c->export_safetensors);
    }
    if (t->n_hist > 0) {
        const het_epoch_stats *last = &t->hist[t->n_hist - 1];
        het_log(HET_LOG_INFO, "done: %d epochs, test_loss %.4f test_acc %.4f%s%s\n", t->epoch,
                last->test_loss, last->test_acc, c->checkpoint[0] ? ", checkpoint " : "",
                c->checkpoint);
    }
    return agree(t, het_metrics_close_checked(&t->metrics));
}

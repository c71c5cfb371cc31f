/* DESIGN: the checkpoint of a run (the sections the trainer writes into the container of
 * core/ckpt.c). Rank 0 writes, every rank reads the same file.
 *   config    the configuration text that changes the result (het_train_config_format, 0)
 *   meta      model and data names, parameter / state / optimizer-state counts and kind
 *   params, state, optim   the flat buffers (rank 0's; see the strategy contract)
 *   sched     het_schedule_encode: hyper-parameters and the plateau state
 *   progress  epoch, step, sampler seed and size, position in the epoch (the sample of its
 *             permutation where it goes on: 0 between epochs, > 0 for --checkpoint-steps),
 *             run seed
 *   world     the ranks that wrote it and the ranks the run started on (absent in older
 *             files: taken as this run's)
 *   run.sums, run.state  inside an epoch only: every rank's running figures of the epoch and
 *             its model state (batch norm's statistics differ between ranks until the
 *             epoch's end), per rank; on another number of ranks rank 0 takes the sum of
 *             the figures and every rank the "state" section (rank 0's)
 *   metrics   one record per completed epoch (the history)
 *   s.<name>.* the strategy's own sections (its save_state / load_state)
 * A load checks every section before it changes anything, so a bad file leaves the trainer as
 * it was. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_io/tensor_names.h"
#include "train/trainer.h"

/* ----------------------------------------------------------------------- checkpoints */

#define META_BYTES 96u
#define PROGRESS_BYTES 48u
#define RECORD_BYTES 56u
#define WORLD_BYTES 16u

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

/* Inside an epoch: every rank's figures of the epoch so far and its model state (sections
 * run.sums, run.state). Collective; w on rank 0 only (NULL there after a failure: the
 * gathers still run). */
static int save_piece(het_trainer *t, het_ckpt_writer *w) {
    het_strategy_ctx *c = &t->ctx;
    if (c->epoch_pos == 0) return HET_OK;
    const het_epoch_sums *e = &c->esums;
    double v[4] = {e->loss, e->correct, e->samples, e->skipped};
    int st = het_step_save_per_rank(c, w, "run.sums", v, sizeof v);
    size_t ns = het_model_n_state(t->model) * sizeof(float);
    int s2 = ns ? het_step_save_per_rank(c, w, "run.state", het_model_state(t->model), ns)
                : HET_OK;
    return st ? st : s2;
}

/* Rank 0's part of a save: the trainer's sections, then the strategy's; w is committed. */
static int save_file(het_trainer *t, const char *path) {
    het_ckpt_writer *w;
    int st = het_ckpt_writer_open(&w, path);
    if (st) {
        save_piece(t, NULL); /* the gathers and the strategy's collectives still run */
        t->strat->save_state(&t->ctx, NULL);
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

    uint8_t meta[META_BYTES], sched[HET_SCHEDULE_BYTES], prog[PROGRESS_BYTES];
    het_wbuf b = {meta, sizeof meta, 0};
    encode_meta(&b, t->cfg.model, t->cfg.data, n_params, n_state, t->cfg.optim.kind,
                t->n_opt_state);

    het_schedule_encode(&t->sched, sched);

    b = (het_wbuf){prog, sizeof prog, 0};
    het_w_u64(&b, (uint64_t)t->epoch);
    het_w_u64(&b, (uint64_t)t->ctx.step);
    het_w_u64(&b, t->sampler.seed);
    het_w_u64(&b, (uint64_t)t->sampler.n);
    het_w_u64(&b, (uint64_t)t->ctx.epoch_pos); /* > 0: inside epoch t->epoch + 1 */
    het_w_u64(&b, t->cfg.seed);
    uint8_t world[WORLD_BYTES];
    b = (het_wbuf){world, sizeof world, 0};
    het_w_u32(&b, (uint32_t)t->size);
    het_w_u32(&b, (uint32_t)t->size0);
    het_w_u64(&b, 0);

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
    if (!st) st = het_ckpt_put(w, "world", world, sizeof world);
    if (!st) st = het_ckpt_put(w, "metrics", rec, rec_bytes);
    free(cfg_text);
    free(rec);
    int ss = save_piece(t, st ? NULL : w);
    if (!st) st = ss;
    ss = t->strat->save_state(&t->ctx, st ? NULL : w);
    if (!st) st = ss;
    if (st) {
        het_ckpt_writer_abort(w);
        return st;
    }
    return het_ckpt_writer_commit(w);
}

int het_trainer_save(het_trainer *t, const char *path) {
    double t0 = het_lane_now(&t->ctx.lane);
    if (t->rank == 0) het_interrupt_checkpoint(path, t->epoch, 0); /* once renamed */
    het_stall_where("checkpoint", t->epoch, (long long)t->ctx.step);
    int st = HET_OK;
    if (t->rank == 0) {
        st = save_file(t, path);
    } else {
        st = save_piece(t, NULL);
        int s2 = t->strat->save_state(&t->ctx, NULL);
        if (!st) st = s2;
    }
    het_trace_add(t->ctx.trace, "checkpoint", t->ctx.lane.tid, t->epoch, t0,
                  het_lane_now(&t->ctx.lane));
    return het_trainer_agree(t, st);
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

/* The floats of section `tag` (at file offset off) must be finite, and batch norm's running
 * variances >= 0: a NaN or infinity would train on as a divergence far from its cause. A
 * failure names the tensor (PyTorch's names, as the safetensors export; the optimizer's state
 * by the parameter it belongs to), its element and offset. state: the floats are the model's
 * state (else parameters, repeated per copy). */
static int finite_section(het_ckpt_reader *r, het_model *m, const char *tag, const void *p,
                          size_t n, uint64_t off, int state) {
    const unsigned char *b = p;
    const size_t np = het_model_n_params(m);
    het_tensor_name *t = NULL;
    int nt = -1, st = HET_OK; /* the tensors' table, made at the first suspect value */
    for (size_t i = 0; i < n && !st; i++) {
        float v;
        memcpy(&v, b + 4 * i, 4);
        if (isfinite(v) && !(state && v < 0.0f)) continue;
        if (nt < 0 && (nt = het_tensor_names(m, &t)) < 0) return nt;
        size_t k = state || !np ? i : i % np, el = k;
        const char *name = "?";
        for (int j = 0; j < nt; j++)
            if (t[j].state == state && k >= t[j].off && k < t[j].off + t[j].count)
                name = t[j].name, el = k - t[j].off;
        const size_t nl = strlen(name);
        const int var = nl >= 11 && strcmp(name + nl - 11, "running_var") == 0;
        if (isfinite(v) && !var) continue; /* a negative running mean is fine */
        if (isfinite(v))
            st = het_error_set(HET_EFORMAT, "%s: offset %llu: section '%s': tensor '%s' element "
                               "%zu is %g, expected a variance >= 0", het_ckpt_reader_path(r),
                               (unsigned long long)(off + 4 * i), tag, name, el, (double)v);
        else
            st = het_error_set(HET_EFORMAT, "%s: offset %llu: section '%s': tensor '%s' element "
                               "%zu is %s, expected finite values", het_ckpt_reader_path(r),
                               (unsigned long long)(off + 4 * i), tag, name, el,
                               isnan(v) ? "NaN" : "infinite");
    }
    free(t);
    return st;
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
    if (!st) st = finite_section(r, m, "params", params, np / 4, off, 0);
    if (!st) st = section(r, "state", ns, &state, &off);
    if (!st) st = finite_section(r, m, "state", state, ns / 4, off, 1);
    if (!st) {
        memcpy(het_model_params(m), params, np);
        if (ns) memcpy(het_model_state(m), state, ns);
    }
    het_ckpt_reader_close(r);
    return st;
}

/* A checkpoint checked by load_check, to be restored by load_restore. */
typedef struct loaded {
    const char *path;
    het_ckpt_reader *r;
    const void *params, *state, *optim, *sched, *rec;
    uint64_t epoch, step;
    uint64_t pos;      /* the position inside epoch `epoch` + 1 (0: between epochs) */
    int size, size0;   /* the ranks that wrote it, and those the run started on */
    char strategy[32]; /* the checkpoint's */
} loaded;

static int load_check(het_trainer *t, const char *path, loaded *L);
static int load_restore(het_trainer *t, loaded *L);

/* Every rank reads the same file (or its own copy: the ranks then compare position and
 * contents); the strategy's sections are read last and compared as its agreed_state. Every step is agreed, so that a file that
 * fails on one rank stops all. */
int het_trainer_load(het_trainer *t, const char *path) {
    loaded L;
    memset(&L, 0, sizeof L);
    L.path = path;
    int st = het_trainer_agree(t, load_check(t, path, &L));
    if (!st) {
        het_model *m = t->model;
        uint32_t crc[3] = {
            het_crc32(0, L.params, het_model_n_params(m) * sizeof(float)),
            het_crc32(0, L.state, het_model_n_state(m) * sizeof(float)),
            het_crc32(0, L.optim, t->n_opt_state * sizeof(float))};
        st = het_trainer_compare_checkpoint(t, L.epoch, L.step, crc);
    }
    if (!st) st = het_trainer_agree(t, load_restore(t, &L));
    if (!st) st = het_trainer_compare_strategy(t); /* the strategy's sections */
    het_ckpt_reader_close(L.r);
    return st;
}

/* The strategy the checkpoint was trained with, from its configuration section. */
static int stored_strategy(het_ckpt_reader *r, char *out, size_t n) {
    const void *p;
    size_t len;
    uint64_t off;
    het_train_config c = het_train_config_defaults();
    int st = het_ckpt_find(r, "config", &p, &len, &off);
    if (!st) st = het_train_config_apply_text(&c, het_ckpt_reader_path(r), off, p, len);
    if (!st) snprintf(out, n, "%s", c.strategy);
    return st;
}

/* Checks every section, so that a bad file leaves the trainer as it was. */
static int load_check(het_trainer *t, const char *path, loaded *L) {
    int st = het_ckpt_reader_open(&L->r, path);
    if (st) {
        L->r = NULL;
        return st;
    }
    het_ckpt_reader *r = L->r;
    het_model *m = t->model;
    size_t np = het_model_n_params(m) * sizeof(float), ns = het_model_n_state(m) * sizeof(float);
    size_t no = t->n_opt_state * sizeof(float), rec_bytes = 0;
    const void *prog;
    uint64_t off, prog_off, rec_off;
    st = check_meta(r, t->cfg.model, m, 1, t->cfg.optim.kind, t->n_opt_state);
    if (!st) st = section(r, "params", np, &L->params, &off);
    if (!st) st = finite_section(r, m, "params", L->params, np / 4, off, 0);
    if (!st) st = section(r, "state", ns, &L->state, &off);
    if (!st) st = finite_section(r, m, "state", L->state, ns / 4, off, 1);
    if (!st) st = section(r, "optim", no, &L->optim, &off);
    if (!st) st = finite_section(r, m, "optim", L->optim, no / 4, off, 0);
    if (!st) st = section(r, "sched", HET_SCHEDULE_BYTES, &L->sched, &off);
    if (!st) st = section(r, "progress", PROGRESS_BYTES, &prog, &prog_off);
    if (!st) st = het_ckpt_find(r, "metrics", &L->rec, &rec_bytes, &rec_off);
    if (!st) st = stored_strategy(r, L->strategy, sizeof L->strategy);
    if (st) return st;
    het_rbuf b = {prog, 0};
    uint64_t epoch = het_r_u64(&b), step = het_r_u64(&b);
    if (epoch > 1000000 || step > (uint64_t)INT64_MAX)
        return het_error_set(HET_EFORMAT, "%s: offset %llu: epoch %llu, step %llu, expected at "
                             "most 1000000 epochs", path, (unsigned long long)prog_off,
                             (unsigned long long)epoch, (unsigned long long)step);
    (void)het_r_u64(&b); /* the sampler's seed and size: the configuration's */
    (void)het_r_u64(&b);
    L->pos = het_r_u64(&b);
    if (L->pos >= (uint64_t)t->n_train)
        return het_error_set(HET_EFORMAT, "%s: offset %llu: position %llu inside epoch %llu, "
                             "expected below the run's %lld training samples", path,
                             (unsigned long long)prog_off + 32, (unsigned long long)L->pos,
                             (unsigned long long)epoch + 1, (long long)t->n_train);
    L->size = L->size0 = t->size;
    if (het_ckpt_has(r, "world")) {
        const void *wp;
        if ((st = section(r, "world", WORLD_BYTES, &wp, &off))) return st;
        het_rbuf wb = {wp, 0};
        uint32_t ws = het_r_u32(&wb), ws0 = het_r_u32(&wb);
        if (ws < 1 || ws > (1u << 24) || ws0 < 1 || ws0 > (1u << 24))
            return het_error_set(HET_EFORMAT, "%s: offset %llu: written by %u ranks of a run "
                                 "started on %u, expected 1..16777216 each", path,
                                 (unsigned long long)off, ws, ws0);
        L->size = (int)ws;
        L->size0 = (int)ws0;
    }
    if (L->pos > 0) { /* inside an epoch: the ranks' figures (and state) so far */
        size_t n;
        const void *q;
        if ((st = het_ckpt_find(r, "run.sums", &q, &n, &off))) return st;
        if (n != 4 * sizeof(double) * (size_t)L->size)
            return het_error_set(HET_EFORMAT, "%s: offset %llu: section 'run.sums' of %zu bytes, "
                                 "expected %zu (%d ranks)", path, (unsigned long long)off - 8, n,
                                 4 * sizeof(double) * (size_t)L->size, L->size);
        if (ns && (st = het_ckpt_find(r, "run.state", &q, &n, &off))) return st;
        if (ns && n != ns * (size_t)L->size)
            return het_error_set(HET_EFORMAT, "%s: offset %llu: section 'run.state' of %zu "
                                 "bytes, expected %zu (%d ranks)", path,
                                 (unsigned long long)off - 8, n, ns * (size_t)L->size, L->size);
        if (ns && (st = finite_section(r, m, "run.state", q, n / 4, off, 1))) return st;
    }
    uint64_t n_rec = rec_bytes >= 8 ? het_get_u64(L->rec) : 0;
    if (rec_bytes != 8 + epoch * RECORD_BYTES || n_rec != epoch)
        return het_error_set(HET_EFORMAT, "%s: offset %llu: metrics section of %zu bytes "
                             "holding %llu records, expected %llu bytes with one record per "
                             "each of %llu epochs", path, (unsigned long long)rec_off,
                             rec_bytes, (unsigned long long)n_rec,
                             (unsigned long long)(8 + epoch * RECORD_BYTES),
                             (unsigned long long)epoch);
    if (t->cap_hist < (int)epoch) {
        het_epoch_stats *h = realloc(t->hist, (epoch ? epoch : 1) * sizeof *h);
        if (!h) return het_error_set(HET_ENOMEM, "out of memory loading %s", path);
        t->hist = h;
        t->cap_hist = (int)(epoch ? epoch : 1);
    }
    L->epoch = epoch;
    L->step = step;
    return HET_OK;
}

/* Inside an epoch: this rank's figures and model state so far; on another number of ranks
 * rank 0 takes the sum of every old rank's figures and every rank keeps the "state"
 * section's (rank 0's, restored already). Checked by load_check. */
static void restore_piece(het_trainer *t, loaded *L) {
    het_strategy_ctx *c = &t->ctx;
    const void *q;
    size_t n;
    uint64_t off;
    double v[4] = {0, 0, 0, 0};
    het_ckpt_find(L->r, "run.sums", &q, &n, &off);
    for (int r = 0; r < L->size; r++) {
        if (L->size == t->size ? r != t->rank : t->rank != 0) continue;
        for (int k = 0; k < 4; k++) {
            double x;
            memcpy(&x, (const char *)q + (4 * (size_t)r + (size_t)k) * sizeof x, sizeof x);
            v[k] += x;
        }
    }
    c->esums = (het_epoch_sums){v[0], v[1], v[2], v[3]};
    size_t ns = het_model_n_state(t->model) * sizeof(float);
    if (ns && L->size == t->size && !het_ckpt_find(L->r, "run.state", &q, &n, &off))
        memcpy(het_model_state(t->model), (const char *)q + ns * (size_t)t->rank, ns);
}

/* Everything is checked (and the same on every rank): restore. */
static int load_restore(het_trainer *t, loaded *L) {
    het_model *m = t->model;
    size_t np = het_model_n_params(m) * sizeof(float), ns = het_model_n_state(m) * sizeof(float);
    size_t no = t->n_opt_state * sizeof(float);
    memcpy(het_model_params(m), L->params, np);
    if (ns) memcpy(het_model_state(m), L->state, ns);
    if (no) memcpy(t->opt_state, L->optim, no);
    /* Hyper-parameters come from the configuration; the plateau state from the file. */
    het_schedule_decode_state(&t->sched, L->sched);
    t->epoch = (int)L->epoch;
    t->ctx.step = (int64_t)L->step;
    het_interrupt_checkpoint(L->path, t->epoch, 1); /* what an interrupted run leaves */
    t->n_hist = (int)L->epoch;
    het_rbuf b = {L->rec, 8};
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
    het_strategy_ctx *c = &t->ctx;
    c->epoch_pos = (int64_t)L->pos;
    memset(&c->esums, 0, sizeof c->esums);
    if (L->pos > 0) restore_piece(t, L);
    t->size0 = L->size0;
    c->ckpt_size = L->size != t->size ? L->size : 0;
    c->resized[0] = '\0';
    char lr[160] = "";
    if (t->size != t->size0 && t->cfg.resize_lr == HET_RESIZE_LR_LINEAR) {
        const float f = (float)t->size / (float)t->size0;
        t->sched.base_lr = t->cfg.sched.base_lr * f;
        t->sched.min_lr = t->cfg.sched.min_lr * f;
        snprintf(lr, sizeof lr, "lr %g -> %g (--resize-lr linear: x %d/%d, the ranks the run "
                 "started on)", (double)t->cfg.sched.base_lr, (double)t->sched.base_lr,
                 t->size, t->size0);
    } else if (t->cfg.resize_lr == HET_RESIZE_LR_LINEAR) {
        snprintf(lr, sizeof lr, "lr %g (--resize-lr linear: the %d ranks the run started on)",
                 (double)t->cfg.sched.base_lr, t->size0);
    } else {
        snprintf(lr, sizeof lr, "lr %g kept (--resize-lr keep; global batch %d)",
                 (double)t->cfg.sched.base_lr, t->cfg.batch);
    }
    /* a checkpoint of another strategy holds none of this one's state: it starts afresh from
     * the checkpoint's model and optimizer */
    int st = HET_OK;
    if (strcmp(L->strategy, t->cfg.strategy) != 0)
        het_log(HET_LOG_INFO, "resume: %s was trained with %s; %s starts its own state afresh\n",
                L->path, L->strategy, t->cfg.strategy);
    else
        st = t->strat->load_state(c, L->r);
    if (!st && c->ckpt_size) {
        char where[96];
        if (L->pos > 0)
            snprintf(where, sizeof where, "from sample %llu of epoch %d", (unsigned long long)L->pos,
                     t->epoch + 1);
        else
            snprintf(where, sizeof where, "from the start of epoch %d", t->epoch + 1);
        het_log(HET_LOG_INFO, "resume: %d ranks from a checkpoint of %d: data re-dealt over %d "
                "ranks %s; %s%s%s\n", t->size, c->ckpt_size, t->size, where, lr,
                L->pos > 0 ? "; the epoch's figures so far summed on rank 0" : "", c->resized);
    }
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
    /* the stored strategy's options only (train.h): a configuration with none given keeps
     * none of another strategy's */
    const het_train_config none = het_train_config_defaults();
    if (!st) het_train_config_for_resume(c, &none);
    return st;
}


/* hgc: heterogeneous gradient computing (METHODS.md section 1).
 * Paper: S. Moreno-Alvarez, M. E. Paoletti, J. A. Rico-Gallego, J. M. Haut, "Heterogeneous
 * gradient computing optimization for scalable deep neural networks", J. Supercomputing 78
 * (2022) 13455-13469; on their "Training deep neural networks: a static load balancing
 * approach", J. Supercomputing 2020.
 *
 * The method. Ranks differ in speed; equal batches make every step wait for the slowest.
 * - Speeds s_r (sum 1): measured at start by each rank timing forward + backward (--speeds
 *   auto, the default; the emulated slowdown counts, hetero/speeds.c), given (--speeds
 *   0.4,0.4,0.2) or read from a file (--speeds-file, as `hetrain calibrate --out` writes it).
 * - Partition (--batching proportional): every step of B' samples (B = --batch, the GLOBAL
 *   batch; the epoch's last step may be smaller) is cut into B'_r = round(s_r B') samples,
 *   the rounding residue on the fastest rank, each >= 1 (het_partition_weighted); rank r
 *   takes its contiguous part of the step's slice of the epoch permutation. So every rank runs
 *   the same ceil(n / B) steps, the epoch's samples are covered exactly once (none dropped),
 *   and rank r's share of the epoch follows its speed. A last step with fewer samples than
 *   ranks is split evenly (some ranks get none and add zero gradient).
 * - Aggregation (--weighting sample, the 2022 paper): each rank scales its loss sum by 1/B',
 *   so the one gradient all-reduce (SUM) gives g = sum_r (B'_r / B') g_r, the mean gradient of
 *   the global batch, exactly what one process would compute on the same B' samples
 *   (tests/test_dist.c). The count is known to every rank in advance (the partition is a
 *   deterministic function of the speeds), so no count travels with the gradients.
 * - Ablations: --batching equal cuts every step evenly (plain synchronous SGD);
 *   --weighting rank scales by 1/(P' B'_r) (P' ranks with samples), the mean of the per-rank
 *   mean gradients: with proportional batches this is the unweighted 2020 scheme, which
 *   weights a sample on a slow rank more than one on a fast rank.
 * Beyond the paper (our choices):
 * - --rebalance: every rank measures its paced compute time per sample of each step over the
 *   last epoch (or the last --rebalance-steps N steps); the median of them is robust to a few
 *   steps slowed by something else; one sum over ranks gives the new speeds
 *   s_r ~ 1 / (seconds per sample)_r; when some speed drifted by more than
 *   --rebalance-threshold (relative, default 0.1) the partition follows the new speeds. A
 *   slowdown that changes mid-run (--slowdown-at EPOCH:RANK:FACTOR) shows it.
 * - The speeds are checkpointed (section s.hgc.speeds): a resumed run continues with the
 *   partition it had (bitwise identical to an uninterrupted run for given speeds). Read back,
 *   each must be in (0, 1] and they sum to 1; the trainer compares speeds and partition
 *   across ranks (agreed_state), so ranks resuming their own copies cannot split differently.
 * - Batch norm with unequal local batches: statistics per local batch (no synchronized batch
 *   norm); the running statistics are averaged over ranks weighted by each rank's share of the
 *   epoch's samples (of the steps that were not skipped: the all-reduced count).
 * - On one rank hgc is allreduce (het_step_sync folds the update into the step). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "strategy/strategy.h"

/* ---------------------------------------------------------------- options */

/* The words' order is the value read: index 0 is the paper's choice. */
enum { BATCHING_PROPORTIONAL = 0, BATCHING_EQUAL = 1 };
enum { WEIGHTING_SAMPLE = 0, WEIGHTING_RANK = 1 };
static const char *const batching_words[] = {"proportional", "equal", NULL};
static const char *const weighting_words[] = {"sample", "rank", NULL};

/* hgc's own options. Its speeds (--speeds, --speeds-file) and --calibrate-steps stay keys of
 * het_train_config: `hetrain calibrate`, which runs no strategy, reads and writes them too
 * (include/hetrain/config.h). */
const het_strategy_opt het_hgc_opts[] = {
    {"batching", "proportional|equal", "local batches proportional (to speed) or equal",
     HET_SOPT_WORD, 0, 0, BATCHING_PROPORTIONAL, batching_words, 0},
    {"weighting", "sample|rank", "gradients weighted by sample (the global mean) or by rank "
     "(the mean of the ranks' means)", HET_SOPT_WORD, 0, 0, WEIGHTING_SAMPLE, weighting_words,
     0},
    {"rebalance", NULL, "re-estimate speeds from step timings and re-partition", HET_SOPT_BOOL,
     0, 0, 0, NULL, 0},
    {"rebalance-threshold", "X", "relative speed drift that re-partitions, in (0, 10]",
     HET_SOPT_FLOAT, 0, 10, 0.1, NULL, HET_SOPT_LO_OPEN},
    {"rebalance-steps", "N", "re-balance every N steps (0: at epoch boundaries)", HET_SOPT_INT,
     0, 1e9, 0, NULL, 0},
    {NULL, NULL, NULL, HET_SOPT_INT, 0, 0, 0, NULL, 0},
};

/* ---------------------------------------------------------------- the strategy */

typedef struct hgc {
    int batching;        /* BATCHING_*, --batching */
    int weighting;       /* WEIGHTING_*, --weighting */
    int rebalance;       /* --rebalance */
    float threshold;     /* --rebalance-threshold (a float, as it was as a config field) */
    int rebalance_steps; /* --rebalance-steps */
    het_reducer *red;
    double *speeds;      /* P, sum 1 */
    int64_t *sizes;      /* P: the partition of the current step */
    double *per_sample;  /* paced compute seconds per sample of each step since the last
                            re-balance (steps with samples only) */
    int n_steps, cap_steps;
    int rebalanced;      /* the partition changed at the start of this epoch */
} hgc;

/* A speeds file is read on every rank (node-local copies, its path may differ): the ranks
 * agree on the read, then compare what they read (a hash of n and the speeds; collective), so
 * that ranks with other partitions never pair their collectives. */
static int same_speeds(het_strategy_ctx *ctx, const hgc *h, int n) {
    if (ctx->world == MPI_COMM_NULL || ctx->size <= 1) return HET_OK;
    int st = het_comm_agree(ctx->world, n < 0 ? n : HET_OK);
    if (st) return st;
    uint64_t v = 0xcbf29ce484222325ULL ^ (uint64_t)n;
    const unsigned char *b = (const unsigned char *)h->speeds;
    for (size_t i = 0; i < (size_t)(n < ctx->size ? n : ctx->size) * sizeof(double); i++)
        v = (v ^ b[i]) * 0x100000001b3ULL;
    het_comm_diff d;
    if ((st = het_comm_compare(ctx->world, &v, 1, &d)) || d.rank < 0) return st;
    return het_error_set(HET_EINVAL, "rank %d%s from rank 0: hgc speeds file (%s on rank 0); "
                         "every rank must run the same inputs", d.rank, d.n_ranks > 1 ?
                         " and others differ" : " differs", ctx->cfg->speeds_file);
}

/* Speeds from --speeds-file, --speeds LIST or a calibration (--speeds auto), normalized. */
static int initial_speeds(het_strategy_ctx *ctx, hgc *h) {
    const het_train_config *c = ctx->cfg;
    const int P = ctx->size;
    int n;
    if (c->speeds_file[0]) {
        n = het_speeds_read_file(c->speeds_file, h->speeds, P);
        int st = same_speeds(ctx, h, n);
        if (st) return st;
    } else if (strcmp(c->speeds, "auto") != 0) {
        n = het_speeds_parse(c->speeds, h->speeds, P);
    } else {
        int st = het_step_calibrate(ctx, h->speeds);
        if (st) return st;
        n = P;
    }
    if (n > 0 && n != P && c->resume) { /* a resume on another number of ranks: the
                                             * checkpoint's speeds, re-scaled by load_state */
        for (int r = 0; r < P; r++) h->speeds[r] = 1.0;
        n = P;
    }
    if (n >= 0 && n != P)
        return het_error_set(HET_EINVAL, "hgc: %d speed%s for %d rank%s, expected one per rank",
                             n, n == 1 ? "" : "s", P, P == 1 ? "" : "s");
    if (n < 0) return n;
    het_speeds_normalize(h->speeds, P);
    return HET_OK;
}

static void log_speeds(const het_strategy_ctx *ctx, const hgc *h, const char *what) {
    char line[512];
    int k = snprintf(line, sizeof line, "hgc: %s speeds", what);
    for (int r = 0; r < ctx->size && k > 0 && (size_t)k < sizeof line; r++)
        k += snprintf(line + k, sizeof line - (size_t)k, "%s%.3f", r ? "/" : " ", h->speeds[r]);
    het_log(HET_LOG_INFO, "%s\n", line);
}

static int hgc_init(het_strategy_ctx *ctx) {
    hgc *h = calloc(1, sizeof *h);
    if (!h) return het_error_set(HET_ENOMEM, "out of memory for hgc");
    ctx->priv = h;
    const het_train_config *c = ctx->cfg; /* the options, read once */
    h->batching = (int)het_strategy_opt_value(c, "batching");
    h->weighting = (int)het_strategy_opt_value(c, "weighting");
    h->rebalance = (int)het_strategy_opt_value(c, "rebalance");
    h->threshold = (float)het_strategy_opt_value(c, "rebalance-threshold");
    h->rebalance_steps = (int)het_strategy_opt_value(c, "rebalance-steps");
    h->speeds = calloc((size_t)ctx->size, sizeof(double));
    h->sizes = calloc((size_t)ctx->size, sizeof(int64_t));
    int64_t spe = (ctx->n_train + ctx->cfg->batch - 1) / ctx->cfg->batch;
    h->cap_steps = (int)(spe + 1);
    h->per_sample = malloc((size_t)h->cap_steps * sizeof(double));
    if (!h->speeds || !h->sizes || !h->per_sample)
        return het_error_set(HET_ENOMEM, "out of memory for hgc");
    if (ctx->cfg->batch < ctx->size)
        return het_error_set(HET_EINVAL, "hgc: global batch %d is smaller than %d ranks: every "
                             "rank needs at least one sample per step", ctx->cfg->batch,
                             ctx->size);
    int st = initial_speeds(ctx, h);
    if (st) return st;
    log_speeds(ctx, h, ctx->cfg->speeds_file[0] ? "file" : strcmp(ctx->cfg->speeds, "auto")
                                                      ? "given" : "calibrated");
    return het_reducer_create(&h->red, ctx, HET_COMM_WORLD, ctx->cfg->bucket_mb,
                              HET_REDUCE_FIGURES);
}

/* This rank's samples per paced second since the last re-balance, from the median step's
 * seconds per sample: a few steps disturbed by something else on the machine (or the first,
 * cold steps) do not move it, while what slows every step (the device, or cores shared with
 * the other ranks during training) does; 0 without steps. */
static double measured_rate(hgc *h) {
    if (h->n_steps == 0) return 0.0;
    double med = het_median(h->per_sample, (size_t)h->n_steps);
    h->n_steps = 0;
    return med > 0 ? 1.0 / med : 0.0;
}

/* New speeds from every rank's measured rate since the last call; adopted when one drifted past
 * the threshold. Collective (one sum of P doubles). */
static int rebalance(het_strategy_ctx *ctx, hgc *h) {
    const int P = ctx->size;
    double *all = calloc((size_t)P, sizeof(double));
    if (!all) return het_error_set(HET_ENOMEM, "out of memory re-balancing");
    all[ctx->rank] = measured_rate(h);
    int st = het_step_sum_f64(ctx, all, (size_t)P);
    double drift = 0.0;
    int ok = !st;
    for (int r = 0; r < P && ok; r++) ok = all[r] > 0;
    if (ok) {
        het_speeds_normalize(all, P);
        for (int r = 0; r < P; r++) drift = fmax(drift, fabs(all[r] - h->speeds[r]) / h->speeds[r]);
        if (drift > h->threshold) {
            memcpy(h->speeds, all, (size_t)P * sizeof(double));
            h->rebalanced = 1;
        }
    }
    free(all);
    return st;
}

/* Rank r's part [*lo, *lo + *len) of a step of Bs samples, and the scale of its loss sum. */
static void partition(const het_strategy_ctx *ctx, hgc *h, int64_t Bs, int64_t *lo,
                      int64_t *len, float *scale) {
    const int P = ctx->size;
    if (h->batching != BATCHING_PROPORTIONAL || Bs < P ||
        het_partition_weighted(Bs, h->speeds, P, h->sizes) != HET_OK) {
        int64_t at;
        for (int r = 0; r < P; r++) het_partition_even(Bs, P, r, &at, &h->sizes[r]);
    }
    het_partition_offsets(h->sizes, ctx->rank, lo, len);
    if (h->weighting == WEIGHTING_SAMPLE) {
        *scale = 1.0f / (float)Bs;
    } else {
        int active = 0;
        for (int r = 0; r < P; r++) active += h->sizes[r] > 0;
        *scale = *len > 0 ? 1.0f / ((float)active * (float)*len) : 0.0f;
    }
}

static int hgc_train_epoch(het_strategy_ctx *ctx, int epoch, het_epoch_stats *st) {
    const het_train_config *c = ctx->cfg;
    hgc *h = ctx->priv;
    const int64_t n = ctx->n_train, B = c->batch, spe = (n + B - 1) / B;
    het_epoch_sums *sums = &ctx->esums; /* over the epoch's pieces */
    float lr = 0.0f;
    int rc;
    const int64_t pos0 = ctx->epoch_pos; /* > 0: the epoch's next piece */
    if (pos0 == 0) h->rebalanced = 0;
    if (h->rebalance && epoch > 0 && pos0 == 0 && (rc = rebalance(ctx, h))) return rc;
    het_sampler_set_epoch(ctx->sampler, epoch);
    for (int64_t pos = pos0, s = pos0 / B; pos < n; pos += B, s++) {
        if (h->rebalance && h->rebalance_steps > 0 && s > 0 && s % h->rebalance_steps == 0 &&
            (rc = rebalance(ctx, h)))
            return rc;
        double ts = het_lane_now(&ctx->lane), c0 = ctx->pace.compute_s;
        int64_t Bs = n - pos < B ? n - pos : B, lo, len;
        float scale;
        partition(ctx, h, Bs, &lo, &len, &scale);
        lr = het_schedule_lr(ctx->sched, epoch, ctx->step, spe);
        het_batch_result mine, r;
        rc = het_step_sync(ctx, h->red, ctx->sampler->perm + pos + lo, (int)len, scale,
                           het_step_seed(ctx, ctx->step), lr, &mine, &r);
        if (rc) return rc;
        if (len > 0 && h->n_steps < h->cap_steps)
            h->per_sample[h->n_steps++] = (ctx->pace.compute_s - c0) / (double)len;
        const het_step_rec rec = {.mine = &mine, .count = len, .shown = &r, .shown_n = Bs};
        if ((rc = het_step_record(ctx, sums, &rec, lr, ts))) return rc;
        if (het_step_pause(ctx, pos + B, n)) return HET_OK; /* nothing in flight */
    }
    /* running statistics averaged with each rank's share of the epoch's samples that
     * counted: skipped steps' (--on-nan skip-step) are not, so the weights sum to 1 */
    rc = het_step_epoch_figures(ctx, sums, lr, st);
    return rc ? rc : het_step_average_state(ctx, sums->samples / (double)st->samples);
}

/* " | hgc batch 37/18/9 speed 0.57/0.29/0.14 idle 2%/3%/4%" and the same as JSON. */
static void hgc_report(het_strategy_ctx *ctx, char *line, size_t nl, char *json, size_t nj) {
    hgc *h = ctx->priv;
    const int P = ctx->size;
    size_t a = 0, b = 0;
    int64_t lo, len;
    float scale;
    partition(ctx, h, ctx->cfg->batch, &lo, &len, &scale); /* a full step's local batches */
    a += (size_t)snprintf(line, nl, " | hgc%s batch", h->rebalanced ? " (re-balanced)" : "");
    b += (size_t)snprintf(json, nj, "\"hgc\":{\"rebalanced\":%s,\"batch\":[",
                          h->rebalanced ? "true" : "false");
    for (int r = 0; r < P && a < nl && b < nj; r++) {
        het_partition_offsets(h->sizes, r, &lo, &len);
        a += (size_t)snprintf(line + a, nl - a, "%s%lld", r ? "/" : " ", (long long)len);
        b += (size_t)snprintf(json + b, nj - b, "%s%lld", r ? "," : "", (long long)len);
    }
    for (int k = 0; k < 2; k++) {
        if (a < nl) a += (size_t)snprintf(line + a, nl - a, " %s", k ? "idle" : "speed");
        if (b < nj) b += (size_t)snprintf(json + b, nj - b, "],\"%s\":[", k ? "idle" : "speed");
        for (int r = 0; r < P && a < nl && b < nj; r++) {
            const double *t = ctx->rank_times + 4 * r;
            double tot = t[0] + t[1] + t[2] + t[3];
            double v = k ? (tot > 0 ? t[2] / tot : 0.0) : h->speeds[r];
            a += (size_t)snprintf(line + a, nl - a, k ? "%s%.0f%%" : "%s%.2f", r ? "/" : " ",
                                  k ? 100 * v : v);
            b += (size_t)snprintf(json + b, nj - b, "%s%.4g", r ? "," : "", v);
        }
    }
    if (b < nj) snprintf(json + b, nj - b, "]}");
}

static het_model *hgc_model_for_eval(het_strategy_ctx *ctx) { return ctx->model; }

static int hgc_save_state(het_strategy_ctx *ctx, het_ckpt_writer *w) {
    hgc *h = ctx->priv; /* the same speeds on every rank: rank 0's */
    return w ? het_ckpt_put(w, "s.hgc.speeds", h->speeds, (size_t)ctx->size * sizeof(double))
             : HET_OK;
}

/* A resume on Q ranks of speeds saved by Pk: calibrated speeds (--speeds auto) were measured
 * again on the Q ranks by init and stay; given ones are re-scaled: ranks below min(Pk, Q)
 * keep theirs, new ranks get the mean of the old, normalized again (a relaunch numbers the
 * ranks left in their old order). */
static int resize_speeds(het_strategy_ctx *ctx, hgc *h, const double *v, int Pk) {
    const het_train_config *c = ctx->cfg;
    const int Q = ctx->size;
    if (!c->speeds_file[0] && strcmp(c->speeds, "auto") == 0) {
        het_step_resized(ctx, "hgc speeds re-measured on %d ranks (the checkpoint's %d "
                         "dropped)", Q, Pk);
        return HET_OK;
    }
    double mean = 0.0;
    for (int q = 0; q < Pk; q++) {
        double x;
        memcpy(&x, v + q, sizeof x);
        if (q < Q) h->speeds[q] = x;
        mean += x / Pk;
    }
    for (int q = Pk; q < Q; q++) h->speeds[q] = mean;
    het_speeds_normalize(h->speeds, Q);
    char line[256];
    int k = snprintf(line, sizeof line, "hgc speeds re-scaled from %d to %d ranks:", Pk, Q);
    for (int q = 0; q < Q && k > 0 && (size_t)k < sizeof line; q++)
        k += snprintf(line + k, sizeof line - (size_t)k, "%s%.3f", q ? "/" : " ", h->speeds[q]);
    het_step_resized(ctx, "%s", line);
    return HET_OK;
}

static int hgc_load_state(het_strategy_ctx *ctx, het_ckpt_reader *r) {
    hgc *h = ctx->priv;
    const void *p;
    size_t n;
    uint64_t off;
    int st = het_ckpt_find(r, "s.hgc.speeds", &p, &n, &off);
    if (st) return st;
    const int Pk = ctx->ckpt_size ? ctx->ckpt_size : ctx->size; /* the checkpoint's ranks */
    if (n != (size_t)Pk * sizeof(double))
        return het_error_set(HET_EFORMAT, "%s: offset %llu: hgc speeds of %zu ranks, expected "
                             "%d (resume with the same number of ranks)",
                             het_ckpt_reader_path(r), (unsigned long long)off,
                             n / sizeof(double), Pk);
    /* checked as --speeds is: every speed > 0; saved normalized (sum 1) */
    const double *v = p;
    double sum = 0.0;
    for (int q = 0; q < Pk; q++) {
        double x;
        memcpy(&x, v + q, sizeof x);
        if (!(isfinite(x) && x > 0.0 && x <= 1.0))
            return het_error_set(HET_EFORMAT, "%s: offset %llu: hgc speed of rank %d is %g, "
                                 "expected a number in (0, 1]", het_ckpt_reader_path(r),
                                 (unsigned long long)off + (unsigned long long)q * 8, q, x);
        sum += x;
    }
    if (fabs(sum - 1.0) > 1e-6)
        return het_error_set(HET_EFORMAT, "%s: offset %llu: hgc speeds sum to %.9g, expected 1",
                             het_ckpt_reader_path(r), (unsigned long long)off, sum);
    if (Pk == ctx->size) {
        memcpy(h->speeds, p, n);
        return HET_OK;
    }
    return resize_speeds(ctx, h, v, Pk);
}

/* The speeds and the partition of a full step they give: the same on every rank. */
static int hgc_agreed_state(het_strategy_ctx *ctx, het_agreed_value *out, int cap) {
    hgc *h = ctx->priv;
    int64_t lo, len;
    float scale;
    if (cap < 2) return 0;
    partition(ctx, h, ctx->cfg->batch, &lo, &len, &scale);
    out[0] = het_agreed_bytes("hgc speeds", h->speeds, (size_t)ctx->size * sizeof(double),
                              HET_COMM_WORLD);
    out[1] = het_agreed_bytes("hgc partition", h->sizes, (size_t)ctx->size * sizeof(int64_t),
                              HET_COMM_WORLD);
    return 2;
}

static void hgc_free(het_strategy_ctx *ctx) {
    hgc *h = ctx->priv;
    if (h) {
        free(h->speeds);
        free(h->sizes);
        free(h->per_sample);
        free(h);
    }
    ctx->priv = NULL;
}

const het_strategy_ops het_strategy_hgc = {
    .name = "hgc",
    .summary = "heterogeneous gradient computing: batches proportional to speed, gradients "
               "weighted by samples (Moreno-Alvarez et al. 2022)",
    .init = hgc_init,
    .train_epoch = hgc_train_epoch,
    .model_for_eval = hgc_model_for_eval,
    .save_state = hgc_save_state,
    .load_state = hgc_load_state,
    .free = hgc_free,
    .report = hgc_report,
    .world_grads = 1,
    .agreed_state = hgc_agreed_state,
    .opts = het_hgc_opts, /* --batching, --weighting, --rebalance* (its speeds: config keys) */
    .worker_batch = 0,  /* --batch is the global batch */
    .lanes = 0,         /* one compute thread per --threads thread */
    .pieces = 1,        /* epochs in pieces: every step boundary is a drain point */
};

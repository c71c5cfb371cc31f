/* Internal pieces of src/train shared between its files: the metrics file, the progress bar,
 * applying configuration text. */
#ifndef HET_TRAIN_INTERNAL_H
#define HET_TRAIN_INTERNAL_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain/train.h"
#include "core/bytes.h"
#include "core/trace.h"
#include "strategy/strategy.h"

/* Shortest "%.Ng" text that reads back as the same float (0.05, not 0.0500000007). */
static inline void het_fmt_float(char *buf, size_t n, float v) {
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, n, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) return;
    }
}

/* The folder of a path ("." for a bare name, "/" for a file at the root) into dir; returns
 * the file's name inside it. */
static inline const char *het_path_dir(const char *path, char *dir, size_t n) {
    const char *slash = strrchr(path, '/');
    snprintf(dir, n, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
             slash ? path : ".");
    return slash ? slash + 1 : path;
}

/* ---- config.c: the table of keys, for config_file.c ---- */
#define HET_CONFIG_MAX_KEYS 128
/* Index of `key` in the table ('-' and '_' equal), or -1 if unknown. */
int het_config_key_index(const char *key);
/* The key's name as documented ("train-limit"). */
const char *het_config_key_name(int index);
/* 1 if a repeated setting of the key appends to it (slowdown-at) instead of replacing it. */
int het_config_key_appends(int index);
/* What a boolean key or option accepts: 1 | true | yes | on (*out = 1), 0 | false | no | off
 * (*out = 0); returns 1 when v is one of them, 0 otherwise (*out untouched). */
int het_config_parse_bool(const char *v, int *out);
/* The message of a number v outside [lo, hi] (an end excluded where lo_open / hi_open; hi of
 * 1e300 or more: no upper end), for the built-in keys and the strategies' options alike:
 * "name: v is out of range, expected [lo, hi)". Returns HET_EINVAL. */
int het_config_range_error(const char *name, const char *v, double lo, double hi, int lo_open,
                           int hi_open);

/* ---- config_sopt.c: the strategies' own options (het_strategy_opt, strategy.h) ---- */
/* Distinct option names over all registered strategies' tables that the key table can hold:
 * their indices follow the built-in keys' (het_config_key_index). */
#define HET_SOPT_MAX_NAMES 64
/* The entry for `key` ('-' and '_' equal) of the first registered strategy's table that has
 * it, or NULL; *index (may be NULL) gets its index among the distinct names of all tables, -1
 * when none. */
const het_strategy_opt *het_sopt_entry(const char *key, int *index);
/* The name of the option of that index. */
const char *het_sopt_name(int index);
/* Checks text v against entry o (an integer or a number in its range, one of the words, a
 * list, a boolean) and writes its canonical form into canon (n bytes). HET_EINVAL with one
 * line "name: ...", worded as the built-in keys' messages for numbers and booleans. */
int het_sopt_parse(const het_strategy_opt *o, const char *v, char *canon, size_t n);
/* Sets option o to v in c->strategy_opts (replacing an earlier setting), or fails as
 * het_sopt_parse does. A NULL value (a flag given alone) is "true" for HET_SOPT_BOOL and
 * "missing value" for the other kinds. */
int het_sopt_set(het_train_config *c, const het_strategy_opt *o, const char *v);
/* Every option set must be in the table of c->strategy: HET_EINVAL otherwise, one line naming
 * the strategies that have it ("ps-rank: an option of --strategy asp, not of allreduce"). */
int het_sopt_check(const het_train_config *c);
/* Appends the options set as "name = value" lines to buf[used..n) as snprintf would (the text
 * may be cut at n); returns the new length needed. */
size_t het_sopt_format(const het_train_config *c, char *buf, size_t n, size_t used);

/* ---- metrics.c: JSON Lines ---- */
typedef struct het_metrics_file het_metrics_file;
/* Opens path for writing, which changes nothing yet: the file is replaced at the first line
 * written (created then if missing), so a run that fails before its first step or epoch
 * leaves an existing file as it was. keep_epochs < 0 replaces it; otherwise (resume) keeps the
 * lines of the existing file whose "epoch" is <= keep_epochs and appends after them.
 * HET_EIO when an existing file cannot be opened for writing. */
int het_metrics_open(het_metrics_file **out, const char *path, int keep_epochs);
/* rank_times: NULL, or 4 doubles per rank (compute, comm, wait, delay) for n_ranks ranks,
 * written as per-rank arrays after the epoch's other timing fields; rank_bytes: NULL, or 2 per
 * rank (payload bytes node-local, cross-node) written as arrays bytes_node, bytes_cross;
 * extra_json: NULL, "", or one more JSON member ("\"name\":value") from the strategy. */
int het_metrics_epoch(het_metrics_file *f, const het_epoch_stats *s, const double *rank_times,
                      const double *rank_bytes, int n_ranks, const char *extra_json);
int het_metrics_step(het_metrics_file *f, int epoch, int64_t step, double loss, double acc,
                     double lr, int batch, double secs);
/* A test accuracy inside epoch `epoch` (1-based) after optimizer step `step` and `samples` of
 * the epoch (--eval-every): time_s is the run's clock since the start without the evaluations
 * (virtual: the latest rank's), eval_s the wall time the evaluation took. */
int het_metrics_eval(het_metrics_file *f, int epoch, int64_t step, int64_t samples,
                     double test_loss, double test_acc, double time_s, double eval_s);
/* Closes and reports a write error (HET_EIO) if any; sets *f to NULL. */
int het_metrics_close_checked(het_metrics_file **f);
void het_metrics_close(het_metrics_file *f);

/* ---- progress.c: the live bar (rank 0, on a terminal unless forced) ---- */
typedef struct het_bar {
    int on;
    int epoch, epochs;
    int64_t total;
    double last, start;
} het_bar;
/* Whether rank output reaches a terminal: isatty(1), or under an MPI launcher the launcher's. */
int het_stdout_is_terminal(void);
void het_bar_init(het_bar *b, het_progress mode);
void het_bar_begin(het_bar *b, int epoch, int epochs, int64_t total);
void het_bar_update(het_bar *b, int64_t done, double loss, double acc);
void het_bar_end(het_bar *b);

/* ---- config.c ---- */
/* Applies "key = value" lines from memory (a checkpoint's config section at file offset
 * `off`); unknown keys are ignored (a newer writer), bad values are HET_EFORMAT. */
int het_train_config_apply_text(het_train_config *c, const char *path, uint64_t off,
                                const void *text, size_t n);

/* ---- trace.c: writing the Chrome trace of every rank (recording: core/trace.h) ---- */
/* het_trace_create, then (comm not NULL, collective over its world) a barrier that aligns the
 * ranks' origins. Through comm's bookkeeping calls, as the write's: watched by the stall
 * inspector, charged to no clock. */
int het_trace_create_world(het_trace **out, het_comm *comm);
/* Collective over comm's world (NULL: this process alone): gathers every rank's events to rank
 * 0, which writes path atomically (temporary file + rename). HET_EIO on rank 0 if it cannot
 * write (the caller agrees on it). */
int het_trace_write(het_trace *t, het_comm *comm, const char *path);

/* The FILE of --compute-cost calibrated:FILE, or NULL. */
const char *het_train_costs_file(const het_train_config *c);

#endif

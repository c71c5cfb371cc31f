/* Internal pieces of src/train shared between its files: the metrics file, the progress bar,
 * applying configuration text. */
#ifndef HET_TRAIN_INTERNAL_H
#define HET_TRAIN_INTERNAL_H

#include <stdio.h>
#include <stdlib.h>

#include "hetrain/train.h"
#include "train/bytes.h"

/* Shortest "%.Ng" text that reads back as the same float (0.05, not 0.0500000007). */
static inline void het_fmt_float(char *buf, size_t n, float v) {
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, n, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) return;
    }
}

/* ---- metrics.c: JSON Lines ---- */
typedef struct het_metrics_file het_metrics_file;
/* Opens path for writing. keep_epochs < 0 truncates it; otherwise (resume) keeps the lines of
 * the existing file whose "epoch" is <= keep_epochs and appends after them. */
int het_metrics_open(het_metrics_file **out, const char *path, int keep_epochs);
int het_metrics_epoch(het_metrics_file *f, const het_epoch_stats *s);
int het_metrics_step(het_metrics_file *f, int epoch, int64_t step, double loss, double acc,
                     double lr, int batch, double secs);
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
void het_bar_init(het_bar *b, het_progress mode);
void het_bar_begin(het_bar *b, int epoch, int epochs, int64_t total);
void het_bar_update(het_bar *b, int64_t done, double loss, double acc);
void het_bar_end(het_bar *b);

/* ---- config.c ---- */
/* Applies "key = value" lines from memory (a checkpoint's config section at file offset
 * `off`); unknown keys are ignored (a newer writer), bad values are HET_EFORMAT. */
int het_train_config_apply_text(het_train_config *c, const char *path, uint64_t off,
                                const void *text, size_t n);

#endif

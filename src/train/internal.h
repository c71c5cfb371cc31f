/* Internal pieces of src/train shared between its files: the metrics file, the progress bar,
 * applying configuration text. */
#ifndef HET_TRAIN_INTERNAL_H
#define HET_TRAIN_INTERNAL_H

#include <mpi.h>
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
/* rank_times: NULL, or 4 doubles per rank (compute, comm, wait, delay) for n_ranks ranks,
 * written as per-rank arrays after the epoch's other timing fields. */
int het_metrics_epoch(het_metrics_file *f, const het_epoch_stats *s, const double *rank_times,
                      int n_ranks);
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

/* ---- trace.c: Chrome trace events ----
 * Each rank buffers complete events ("ph":"X", pid = rank, tid 0 = compute thread, tid 1 =
 * communication); het_trace_write gathers them to rank 0, which writes one JSON file. */
typedef enum {
    HET_EV_FWDBWD,    /* forward + backward of the local batch (tid 0) */
    HET_EV_OPTIM,     /* optimizer step (tid 0) */
    HET_EV_SLOWDOWN,  /* emulated slowdown sleep (tid 0) */
    HET_EV_WAIT,      /* waiting for the gradient all-reduce to complete (tid 0) */
    HET_EV_BUCKET,    /* one bucket's all-reduce, start to observed completion (tid 1) */
    HET_EV_ALLREDUCE, /* flat gradient all-reduce (tid 1) */
    HET_EV_EVAL,      /* evaluation (tid 0) */
    HET_EV_CKPT,      /* checkpoint (tid 0) */
    HET_EV_STEP,      /* a whole local step, forward + backward + optimizer (one rank, tid 0) */
    HET_EV_N
} het_event;
typedef struct het_trace het_trace;
/* Collective over world (MPI_COMM_NULL: one process): a barrier aligns the ranks' clocks. */
int  het_trace_create(het_trace **out, MPI_Comm world);
/* Records [t0, t1] (het_now() seconds); `arg` is shown as args.i (bucket, step). NULL: off. */
void het_trace_add(het_trace *t, het_event e, int arg, double t0, double t1);
/* Collective: gathers every rank's events to rank 0, which writes path atomically (temporary
 * file + rename). HET_EIO on rank 0 if it cannot write (the caller agrees on it). */
int  het_trace_write(het_trace *t, const char *path);
void het_trace_free(het_trace *t);

#endif

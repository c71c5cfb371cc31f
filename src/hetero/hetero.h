/* hetero: the speed model of heterogeneous clusters: partitions of batches and data over ranks
 * (partition.c) and the speeds of the ranks (speeds.c); the emulated slowdown they are measured
 * under is in emul/ (emul/emul.h). Internal to the library (strategies and the trainer). */
#ifndef HET_HETERO_H
#define HET_HETERO_H

#include "hetrain/batch.h"
#include "hetrain/core.h"
#include "emul/emul.h"

/* ---- speeds.c: the speed model (relative speeds s_r, sum 1) ---- */
/* Speeds "0.4,0.4,0.2": numbers > 0 (het_parse_numbers); any scale (normalized by users). */
int het_speeds_parse(const char *text, double *out, int cap);
/* Reads a speeds file: one number > 0 per line, '#' comments and blank lines skipped. Returns
 * how many (up to cap stored) or HET_EIO / HET_EFORMAT ("FILE:LINE: ..."). */
int het_speeds_read_file(const char *path, double *out, int cap);
/* Writes n speeds, one per line after a '#' comment line, atomically (temporary + rename). */
int het_speeds_write_file(const char *path, const double *s, int n, const char *comment);
/* Scales s[0..n) to sum 1. */
void het_speeds_normalize(double *s, int n);
/* This rank's training speed in samples/s: one warm-up and at least `steps` timed passes (and
 * at least half a second of them) of forward + backward over `batch` samples (the first ones of d; idx/x/y: caller buffers of `batch`),
 * each a paced compute region, so the emulated slowdown counts exactly as in training; the
 * median pass decides. The model's state (batch-norm statistics) is restored and its
 * gradients are left zeroed; parameters are not touched. */
int het_calibrate_rank(het_model *m, const het_dataset *d, int batch, int steps,
                       het_pace *pace, float *x, uint8_t *y, int64_t *idx, double *rate);

/* ---- partition.c ---- */
/* Contiguous part r of n items split into `parts` as evenly as possible (the first n % parts
 * parts get one more). */
void het_partition_even(int64_t n, int parts, int r, int64_t *lo, int64_t *len);
/* sizes[r] = round(n w_r / sum w) with the rounding residue on the largest weight, so that the
 * sizes sum to n exactly and each is >= 1. HET_EINVAL if a weight is not finite and > 0, or
 * n < parts (a clear message). */
int  het_partition_weighted(int64_t n, const double *w, int parts, int64_t *sizes);
/* Start and length of part r of consecutive parts of the given sizes. */
void het_partition_offsets(const int64_t *sizes, int r, int64_t *lo, int64_t *len);

#endif

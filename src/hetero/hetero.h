/* hetero: the speed model of heterogeneous clusters: partitions of batches and data over ranks
 * (partition.c) and the emulated per-rank slowdown (slowdown.c). The slowdown:
 * a rank with factor f stretches each piece of compute that took t seconds to f*t by sleeping
 * (f-1)*t right after it (nanosleep, so a slow rank does not steal the other ranks' cores).
 * Internal to the library (strategies and the trainer). */
#ifndef HET_HETERO_H
#define HET_HETERO_H

#include "hetrain/batch.h"
#include "hetrain/core.h"

/* Parses a comma-separated list of numbers in [lo, hi] ((lo, hi] with lo_open), blanks
 * allowed around them. Writes up to `cap` of them into out (out may be NULL) and returns how
 * many the list holds, or HET_EINVAL (negative) with a message "... expected <what>". */
int het_parse_numbers(const char *text, double *out, int cap, double lo, int lo_open,
                      double hi, const char *what);
/* Slowdown factors "1,1,2,4": numbers in 1..1000 (het_parse_numbers). */
int het_slowdown_parse(const char *text, double *out, int cap);

/* A slowdown that changes mid-run (--slowdown-at EPOCH:RANK:FACTOR,...). */
typedef struct het_slowdown_change {
    int epoch;      /* 1-based: from this epoch on */
    int rank;
    double factor;
} het_slowdown_change;
/* Parses "2:1:3,4:0:2" into up to cap changes (out may be NULL); returns how many, or
 * HET_EINVAL with a message naming the bad item. */
int het_slowdown_at_parse(const char *text, het_slowdown_change *out, int cap);
/* The factor of `rank` in 1-based `epoch`: the latest change started at or before it, else
 * base. A pure function, so a resumed run gets the same factors. */
double het_slowdown_factor_at(const het_slowdown_change *c, int n, int epoch, int rank,
                              double base);

/* Sleeps for `s` seconds (nothing when s <= 0), resuming after signals. */
void het_sleep_s(double s);

/* Paces one rank's compute. begin() starts a compute interval; mark() ends it: the elapsed
 * t is stretched to factor*t by sleeping and a new interval starts; skip() drops the time
 * since the last begin/mark (communication, not compute). `compute_s` accumulates the
 * stretched compute time, `slept_s` the sleeps alone. */
typedef struct het_pace {
    double factor;
    double last;       /* start of the current interval */
    double compute_s;  /* stretched compute so far (caller may reset) */
    double slept_s;    /* emulation sleeps so far (caller may reset) */
    double debt_s;     /* sleep still owed (< 0: overslept), carried to the next piece */
} het_pace;

void   het_pace_init(het_pace *p, double factor);
void   het_pace_begin(het_pace *p);
/* Returns the stretched length of the interval it ends. */
double het_pace_mark(het_pace *p);
void   het_pace_skip(het_pace *p);

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

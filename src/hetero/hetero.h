/* hetero: the speed model of heterogeneous clusters: partitions of batches and data over ranks
 * (partition.c) and the emulated per-rank slowdown (slowdown.c). The slowdown:
 * a rank with factor f stretches each piece of compute that took t seconds to f*t by sleeping
 * (f-1)*t right after it (nanosleep, so a slow rank does not steal the other ranks' cores).
 * Internal to the library (strategies and the trainer). */
#ifndef HET_HETERO_H
#define HET_HETERO_H

#include "hetrain/core.h"

/* Parses "1,1,2,4" (factors >= 1 and <= 1000, comma separated, blanks allowed around them).
 * Writes up to `cap` factors into out (out may be NULL) and returns how many the list holds,
 * or HET_EINVAL (negative) with a message such as "'0.5' is below 1". */
int het_slowdown_parse(const char *text, double *out, int cap);

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

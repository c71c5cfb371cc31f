/* Small statistics over measured times (core/stats.c): one sort and one median for the
 * calibration (hetero/speeds.c), hgc's re-balancing, the cost tables (strategy/costs.c) and
 * the pipeline plan (strategy/pipe_plan.c). Internal to the library. */
#ifndef HET_CORE_STATS_H
#define HET_CORE_STATS_H

#include <stddef.h>

/* qsort's comparison of two doubles, ascending (NaN-free input). */
int het_cmp_double(const void *a, const void *b);
/* Sorts v[0..n) ascending. */
void het_sort_double(double *v, size_t n);
/* The median of v[0..n), n >= 1: v is sorted in place and v[n / 2] returned (for an even n
 * the upper of the two middle values, as hgc has always taken it; the other callers pass odd
 * counts). */
double het_median(double *v, size_t n);

#endif

/* Sort and median of measured times (see core/stats.h). */
#include <stdlib.h>

#include "core/stats.h"

int het_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void het_sort_double(double *v, size_t n) { qsort(v, n, sizeof *v, het_cmp_double); }

double het_median(double *v, size_t n) {
    het_sort_double(v, n);
    return v[n / 2];
}

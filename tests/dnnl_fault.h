/* Checks of oneDNN's fault record (tensor/internal.h: het_dnnl_fault), shared by the tests of
 * the oneDNN wrappers (test_conv_dnnl.c, test_dense_bf16.c). */
#ifndef HET_TEST_DNNL_FAULT_H
#define HET_TEST_DNNL_FAULT_H
#include <string.h>

#include "tensor/internal.h"
#include "test.h"

/* The fault kept is st (with `want` in its message unless NULL); clears it. */
static void check_fault(const char *what, int st, const char *want) {
    char msg[256];
    int got = het_dnnl_fault(msg, sizeof msg);
    CHECK(got == st, "%s: fault %d (%s), expected %d", what, got, msg, st);
    CHECK(!want || strstr(msg, want), "%s: fault message '%s' lacks '%s'", what, msg, want);
    het_dnnl_fault_clear();
}

/* Whether all n values are NaN. */
static int all_nan(const float *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] == p[i]) return 0;
    return 1;
}
#endif

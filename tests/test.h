/* Minimal test harness: CHECK records a failure with both values and carries on; main returns
 * het_test_finish(), non-zero when anything failed. */
#ifndef HET_TEST_H
#define HET_TEST_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int het_test_failures = 0;
static int het_test_checks = 0;

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        het_test_checks++;                                                        \
        if (!(cond)) {                                                            \
            het_test_failures++;                                                  \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
        }                                                                         \
    } while (0)

/* |a - b| <= tol * max(1, |a|, |b|) */
#define CHECK_CLOSE(a, b, tol, what)                                              \
    do {                                                                          \
        double a_ = (a), b_ = (b), m_ = fmax(1.0, fmax(fabs(a_), fabs(b_)));      \
        CHECK(fabs(a_ - b_) <= (tol) * m_, "%s: %.9g vs %.9g (tol %g)", what, a_, \
              b_, (double)(tol));                                                 \
    } while (0)

/* Whether timing assertions are checked: not when HET_TEST_NO_TIMING is set (make test-asan,
 * where the sanitizers' slowdown, 2-20x and uneven, makes timings say nothing). The code under
 * test still runs; only the figures go unchecked. */
static inline int het_test_timing(void) {
    const char *v = getenv("HET_TEST_NO_TIMING");
    return !(v && *v && *v != '0');
}

/* Under a launcher (tests/mpi.sh sets HET_TEST_NP): 1 when the world has the ranks launched.
 * A launcher of another MPI than the test's starts P singletons, each of which would pass on
 * its own; this makes them fail instead. */
static inline int het_test_world_size_ok(int size) {
    const char *v = getenv("HET_TEST_NP");
    if (!v || !*v || atoi(v) == size) return 1;
    fprintf(stderr, "FAIL: launched as %s ranks, but MPI's world has %d: a launcher of another "
            "MPI than this program's?\n", v, size);
    return 0;
}

static inline int het_test_finish(const char *name) {
    printf("%s: %d checks, %d failed\n", name, het_test_checks, het_test_failures);
    return het_test_failures ? 1 : 0;
}
#endif

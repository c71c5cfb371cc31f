/* OpenBLAS kernel selection.
 *
 * Debian's OpenBLAS is built with DYNAMIC_ARCH: at load time it picks kernels for the CPU
 * model it recognizes. OpenBLAS 0.3.21 does not know newer Xeons (e.g. family 6 model 207)
 * and falls back to its generic "Prescott" kernels, which run sgemm 4-5x slower than its
 * AVX-512 ("SkylakeX") or AVX2 ("Haswell") kernels on the same machine. The choice can only be
 * overridden through OPENBLAS_CORETYPE before the library loads, so a program that wants the
 * fast kernels re-executes itself once with that variable set. A value already set by the
 * user is always respected, and HET_BLAS_NO_REEXEC=1 turns this off. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hetrain/tensor.h"

char *openblas_get_corename(void);

const char *het_blas_corename(void) { return openblas_get_corename(); }

int het_blas_select_kernels(char **argv) {
    if (getenv("OPENBLAS_CORETYPE") || getenv("HET_BLAS_NO_REEXEC")) return 0;
    const char *core = openblas_get_corename();
    if (!core || strcmp(core, "Prescott") != 0) return 0;
    const char *want = NULL;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        want = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        want = "Haswell";
#endif
    if (!want || !argv) return 0;
    if (setenv("OPENBLAS_CORETYPE", want, 1) != 0) return 0;
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE"); /* exec failed: carry on with the generic kernels */
    return -1;
}

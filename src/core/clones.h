/* HET_CLONES: compile a function for AVX-512, AVX2 and baseline x86-64 and pick the variant at
 * run time (GCC's target_clones, an ifunc). Without -ffast-math and with C11's
 * -ffp-contract=off every variant gives the same bits, so results do not depend on the CPU.
 * Empty under ThreadSanitizer (its instrumented ifunc resolver would run before the sanitizer
 * is set up, and crash), under clang and off x86-64. Internal header. */
#ifndef HET_CORE_CLONES_H
#define HET_CORE_CLONES_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#define HET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HET_CLONES
#endif

#endif

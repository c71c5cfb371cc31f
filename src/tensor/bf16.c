/* bf16 numerics for --precision bf16: rounding float operands to bf16 (kept as floats), and
 * which bf16 instructions the CPU has.
 *
 * DESIGN. bf16 training as oneDNN and PyTorch's autocast define it: a convolution or a matrix
 * product reads its operands (activations, weights, output gradients) as bf16 and accumulates
 * in fp32. A bf16 value is exactly a float whose low 16 bits are zero, and the product of two
 * bf16 values (8-bit significands) is exact in fp32 (16 bits <= 24), so rounding each operand
 * to bf16 and running the fp32 kernels computes exactly that definition, with fp32 sums (the
 * portable path: slow, since it moves fp32 data and runs fp32 FMAs, but exact everywhere).
 * The rounding is oneDNN's and the hardware's (VCVTNEPS2BF16): round to nearest, ties to even;
 * NaN stays a quiet NaN; finite values that round past the largest bf16 become inf. It is the
 * same function as comm/wire.c's het_wire_bf16_from_float (tests/test_bf16.c checks both give
 * the same bits), written here because tensor/ sits below comm/.
 *
 * The CPU's bf16 instructions (cpuid leaf 7): AVX512-BF16 (sub-leaf 1, EAX bit 5) and AMX
 * (sub-leaf 0, EDX bit 22 AMX-BF16, bit 24 AMX-TILE), each only when the OS saves the state
 * they need (XCR0: bits 5-7 for AVX-512's, bits 17-18 for AMX's tile configuration and data).
 * On Linux a process must also ask for AMX's tile data (arch_prctl ARCH_REQ_XCOMP_PERM);
 * oneDNN does that itself before it runs AMX code.
 *
 * Having AVX512-BF16 does not make it fast: its dot product (VDPBF16PS, 32 multiplies) may
 * issue at a fraction of the FMA's rate (16). On an Intel Xeon model 207 whose hypervisor hides
 * AMX it ran at 0.25 of VFMADD231PS's instructions per second, half its multiplies, and oneDNN's
 * bf16 convolutions took 1.6-1.9x the time of its fp32 ones (docs/BENCHMARKS.md);
 * on AMD's Zen 4 / Zen 5 the same instruction should double it (their instruction tables; not
 * yet measured by the probe), as oneDNN's bf16 kernels there did (1.3-1.6x its fp32). het_bf16_mac_ratio
 * measures it (a few ms, once): --bf16-kernels auto (conv_dnnl_bf16.c) runs oneDNN's bf16
 * kernels only where they can be the faster. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "core/clones.h"
#include "hetrain/tensor.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#define HET_HAVE_CPUID 1
#endif

/* The float bits u rounded to bf16 in the high half (the low half undefined): a NaN made
 * quiet, else to nearest even. Integer operations only, so every vector variant gives the same
 * bits. */
static inline uint32_t rne_high(uint32_t u) {
    uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
    return nan ? (u | 0x00400000u) : u + 0x7fffu + ((u >> 16) & 1u);
}

float het_bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u = rne_high(u) & 0xffff0000u;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The same as het_bf16_round on every element, vectorized. */
HET_CLONES
void het_vround_bf16(float *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof u);
        u = rne_high(u) & 0xffff0000u;
        memcpy(&dst[i], &u, sizeof u);
    }
}

HET_CLONES
void het_bf16_bits(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof u);
        dst[i] = (uint16_t)(rne_high(u) >> 16);
    }
}

#ifdef HET_HAVE_CPUID
static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}
#endif

het_bf16_isa het_bf16_cpu(void) {
    const char *e = getenv("HET_BF16_CPU"); /* tests: what the startup line says elsewhere */
    if (e && strcmp(e, "none") == 0) return HET_BF16_ISA_NONE;
    if (e && strcmp(e, "avx512") == 0) return HET_BF16_ISA_AVX512;
    if (e && strcmp(e, "amx") == 0) return HET_BF16_ISA_AMX;
#ifdef HET_HAVE_CPUID
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return HET_BF16_ISA_NONE; /* OSXSAVE */
    const uint64_t xcr0 = xgetbv0();
    if (__get_cpuid_max(0, NULL) < 7) return HET_BF16_ISA_NONE;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned edx0 = d, max_sub = a;
    const int avx512_os = (xcr0 & 0xe6u) == 0xe6u; /* SSE, AVX, opmask, ZMM state */
    const int amx_os = (xcr0 & (3u << 17)) == (3u << 17);
    if (amx_os && (edx0 & (1u << 22)) && (edx0 & (1u << 24))) return HET_BF16_ISA_AMX;
    if (max_sub >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        if (avx512_os && (a & (1u << 5))) return HET_BF16_ISA_AVX512;
    }
#endif
    return HET_BF16_ISA_NONE;
}

const char *het_bf16_isa_name(het_bf16_isa isa) {
    switch (isa) {
    case HET_BF16_ISA_AMX: return "AMX";
    case HET_BF16_ISA_AVX512: return "AVX512-BF16";
    case HET_BF16_ISA_NONE: break;
    }
    return "none";
}

/* ---- the bf16 dot product's multiply rate against the fp32 FMA's ---- */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HET_HAVE_RATE_PROBE 1

/* Each loop is assembly, so that the figure does not depend on the build (at -O0, or under
 * AddressSanitizer, accumulators of C code live in memory and the loads and stores set the
 * pace: the ratio came out 1.91 instead of 0.50): 12 independent chains (more than latency x
 * issue rate of either instruction on the CPUs named above) in zmm0-11, on operands in zmm12-13
 * broadcast from `k` (two bf16 halves or a float: 0.5 and 0.25 either way, so no value grows
 * past a few thousand or becomes subnormal), REPS times. */
#define REPS 20000
#define CHAINS(op) \
    op " %%zmm12, %%zmm13, %%zmm0\n\t" op " %%zmm12, %%zmm13, %%zmm1\n\t"              \
    op " %%zmm12, %%zmm13, %%zmm2\n\t" op " %%zmm12, %%zmm13, %%zmm3\n\t"              \
    op " %%zmm12, %%zmm13, %%zmm4\n\t" op " %%zmm12, %%zmm13, %%zmm5\n\t"              \
    op " %%zmm12, %%zmm13, %%zmm6\n\t" op " %%zmm12, %%zmm13, %%zmm7\n\t"              \
    op " %%zmm12, %%zmm13, %%zmm8\n\t" op " %%zmm12, %%zmm13, %%zmm9\n\t"              \
    op " %%zmm12, %%zmm13, %%zmm10\n\t" op " %%zmm12, %%zmm13, %%zmm11\n\t"
#define ZERO12                                                                             \
    "vpxord %%zmm0, %%zmm0, %%zmm0\n\t" "vmovaps %%zmm0, %%zmm1\n\t"                    \
    "vmovaps %%zmm0, %%zmm2\n\t" "vmovaps %%zmm0, %%zmm3\n\t" "vmovaps %%zmm0, %%zmm4\n\t" \
    "vmovaps %%zmm0, %%zmm5\n\t" "vmovaps %%zmm0, %%zmm6\n\t" "vmovaps %%zmm0, %%zmm7\n\t" \
    "vmovaps %%zmm0, %%zmm8\n\t" "vmovaps %%zmm0, %%zmm9\n\t" "vmovaps %%zmm0, %%zmm10\n\t" \
    "vmovaps %%zmm0, %%zmm11\n\t"
#define CLOBBERS "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
                 "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc"

static double thread_secs(void) {
    struct timespec t; /* the thread's CPU time: a preemption mid-loop costs nothing */
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The seconds of REPS x 12 `op`s on operands broadcast from the 32-bit words k0, k1. */
#define RATE_LOOP(name, op, type, k0, k1)                                                    \
    static double name(void) {                                                             \
        static const type k[2] = {k0, k1};                                                 \
        long n = REPS;                                                                     \
        double t0 = thread_secs();                                                         \
        __asm__ volatile("vbroadcastss %[a], %%zmm12\n\t" "vbroadcastss %[b], %%zmm13\n\t" \
                         ZERO12 "1:\n\t" CHAINS(op) "dec %[n]\n\t" "jnz 1b\n\t" "vzeroupper" \
                         : [n] "+r"(n) : [a] "m"(k[0]), [b] "m"(k[1]) : CLOBBERS);          \
        return thread_secs() - t0;                                                         \
    }
RATE_LOOP(fma_secs, "vfmadd231ps", float, 0.5f, 0.25f)
/* bf16 pairs (0.5, 0.5) and (0.25, 0.25) */
RATE_LOOP(dp_secs, "vdpbf16ps", uint32_t, 0x3f003f00u, 0x3e803e80u)
#endif

double het_bf16_mac_ratio(void) {
    const char *e = getenv("HET_BF16_RATIO"); /* tests: a CPU of another kind */
    if (e && *e) return strtod(e, NULL);
#ifdef HET_HAVE_RATE_PROBE
    /* the CPU's own bits, not het_bf16_cpu's (HET_BF16_CPU may say what it lacks) */
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bf16")) return 0.0;
    /* alternated, best of 5 each: a busy neighbour or a frequency step moves one round */
    double fma = 1e30, dp = 1e30;
    for (int r = 0; r < 5; r++) {
        double f = fma_secs(), d = dp_secs();
        if (f < fma) fma = f;
        if (d < dp) dp = d;
    }
    if (!(fma > 0.0) || !(dp > 0.0)) return 0.0;
    return (32.0 / dp) / (16.0 / fma); /* multiplies per second, bf16 / fp32 */
#else
    return 0.0;
#endif
}

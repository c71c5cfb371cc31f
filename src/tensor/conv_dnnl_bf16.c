/* Whether --precision bf16 runs oneDNN's bf16 convolutions on this CPU, and what they are, for
 * the startup line and the tests: one bf16 forward convolution (16 -> 16 channels, 3x3, 8x8,
 * batch 16, layouts of oneDNN's choice) is described, and oneDNN's implementation name kept
 * (e.g. "brgconv:avx512_core_amx_bf16" with AMX, "jit_bf16:avx512_core_bf16" with AVX512-BF16;
 * oneDNN 2.6 has none on AVX2 CPUs). They run (conv_dnnl.c, HET_DNNL_BF16) only where the CPU
 * has AMX or AVX512-BF16 itself: on a plain AVX-512 CPU oneDNN emulates bf16 with fp32
 * instructions, slower than its fp32 kernels, and the portable path (tensor/bf16.c) computes
 * the same definition. With AVX512-BF16 alone they run where they can be the faster: the
 * kernel choice (het_dnnl_bf16_choose, --bf16-kernels) and its reason live here too. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hetrain/tensor.h"

#ifndef HET_HAVE_DNNL

int het_dnnl_bf16_probe(char *what, size_t n) {
    snprintf(what, n, "built without oneDNN");
    return 0;
}

int het_dnnl_bf16_enabled(void) { return 0; }
void het_dnnl_bf16_disable(int off) { (void)off; }
void het_dnnl_bf16_choose(het_bf16_kernels k) { (void)k; }
int het_dnnl_bf16_why(char *why, size_t n) {
    snprintf(why, n, "built without oneDNN");
    return 0;
}

#else

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

static int probe_ok;
static het_bf16_isa probe_isa;
static char probe_what[128];
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

static void probe(void) {
    probe_isa = het_bf16_cpu();
    dnnl_engine_t eng = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t e = dnnl_engine_create(&eng, dnnl_cpu, 0);
    const dnnl_dims_t ds = {16, 16, 8, 8}, dw = {16, 16, 3, 3}, db = {16};
    const dnnl_dims_t st = {1, 1}, pad = {1, 1};
    dnnl_memory_desc_t src, wei, bias, dst;
    if (e == dnnl_success) e = dnnl_memory_desc_init_by_tag(&src, 4, ds, dnnl_bf16, dnnl_format_tag_any);
    if (e == dnnl_success) e = dnnl_memory_desc_init_by_tag(&wei, 4, dw, dnnl_bf16, dnnl_format_tag_any);
    if (e == dnnl_success) e = dnnl_memory_desc_init_by_tag(&bias, 1, db, dnnl_f32, dnnl_x);
    if (e == dnnl_success) e = dnnl_memory_desc_init_by_tag(&dst, 4, ds, dnnl_bf16, dnnl_format_tag_any);
    dnnl_convolution_desc_t cd;
    if (e == dnnl_success)
        e = dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct,
                                               &src, &wei, &bias, &dst, st, pad, pad);
    if (e == dnnl_success) e = dnnl_primitive_desc_create(&pd, &cd, NULL, eng, NULL);
    const char *impl = NULL;
    if (e == dnnl_success) e = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    const dnnl_version_t *v = dnnl_version();
    if (e == dnnl_success && impl) {
        probe_ok = 1;
        snprintf(probe_what, sizeof probe_what, "oneDNN %d.%d.%d picks %s", v->major,
                 v->minor, v->patch, impl);
    } else {
        snprintf(probe_what, sizeof probe_what, "oneDNN %d.%d.%d has no bf16 convolution here (%s)",
                 v->major, v->minor, v->patch, dnnl_status2str(e));
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (eng) dnnl_engine_destroy(eng);
}

int het_dnnl_bf16_probe(char *what, size_t n) {
    pthread_once(&probe_once, probe);
    snprintf(what, n, "%s", probe_what);
    return probe_ok;
}

static _Atomic int bf16_off; /* tests */
static _Atomic int choice = HET_BF16_KERNELS_AUTO;
static double rate_ratio;
static pthread_once_t rate_once = PTHREAD_ONCE_INIT;

static void rate_probe(void) { rate_ratio = het_bf16_mac_ratio(); }

void het_dnnl_bf16_disable(int off) { bf16_off = off; }

void het_dnnl_bf16_choose(het_bf16_kernels k) {
    choice = k == HET_BF16_KERNELS_ONEDNN || k == HET_BF16_KERNELS_PORTABLE ? (int)k
                                                                            : HET_BF16_KERNELS_AUTO;
}

/* 1 when oneDNN's bf16 kernels run, with the reason in why (n > 0) */
static int decide(char *why, size_t n) {
    if (n) why[0] = '\0';
    if (bf16_off) return 0;
    if (!het_dnnl_available()) return 0;
    pthread_once(&probe_once, probe); /* cpuid once: it traps to the hypervisor in a VM */
    if (!probe_ok || probe_isa == HET_BF16_ISA_NONE) return 0;
    if (choice == HET_BF16_KERNELS_PORTABLE || choice == HET_BF16_KERNELS_ONEDNN) {
        if (n)
            snprintf(why, n, "--bf16-kernels %s",
                     choice == HET_BF16_KERNELS_ONEDNN ? "onednn" : "portable");
        return choice == HET_BF16_KERNELS_ONEDNN;
    }
    if (probe_isa == HET_BF16_ISA_AMX) {
        if (n) snprintf(why, n, "--bf16-kernels auto: AMX");
        return 1;
    }
    pthread_once(&rate_once, rate_probe);
    const int on = rate_ratio >= HET_BF16_MIN_RATIO;
    if (n)
        snprintf(why, n, "--bf16-kernels auto: this CPU's bf16 dot product runs at %.2fx the fp32 "
                 "multiply rate, %s %.2fx%s", rate_ratio, on ? "at least" : "below",
                 HET_BF16_MIN_RATIO, on ? "" : ", so oneDNN's fp32 kernels are the faster");
    return on;
}

int het_dnnl_bf16_why(char *why, size_t n) { return decide(why, n); }

int het_dnnl_bf16_enabled(void) { return decide(NULL, 0); }

#endif

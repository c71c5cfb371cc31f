/* Whether --precision bf16 runs oneDNN's bf16 convolutions on this CPU, and what they are, for
 * the startup line and the tests: one bf16 forward convolution (16 -> 16 channels, 3x3, 8x8,
 * batch 16, layouts of oneDNN's choice) is described, and oneDNN's implementation name kept
 * (e.g. "brgconv:avx512_core_amx_bf16" with AMX, "jit_bf16:avx512_core_bf16" with AVX512-BF16;
 * oneDNN 2.6 has none on AVX2 CPUs). They run (conv_dnnl.c, HET_DNNL_BF16) only where the CPU
 * has AMX or AVX512-BF16 itself: on a plain AVX-512 CPU oneDNN emulates bf16 with fp32
 * instructions, slower than its fp32 kernels, and the portable path (tensor/bf16.c) computes
 * the same definition. */
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

void het_dnnl_bf16_disable(int off) { bf16_off = off; }

int het_dnnl_bf16_enabled(void) {
    if (bf16_off || !het_dnnl_available()) return 0;
    pthread_once(&probe_once, probe); /* cpuid once: it traps to the hypervisor in a VM */
    return probe_ok && probe_isa != HET_BF16_ISA_NONE;
}

#endif

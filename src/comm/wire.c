/* Wire types: float <-> bf16 and float <-> fp16 conversions, packing of float arrays into
 * 16-bit words, and the MPI user reductions that add 16-bit words in float.
 *
 * DESIGN. Portable C on the bit patterns (no F16C, no _Float16), so that every build and every
 * rank rounds the same way. Both conversions from float round to nearest, ties to even:
 * - bf16 is the upper half of a float: add 0x7fff plus the lowest kept bit, then truncate.
 *   NaN keeps its sign and upper payload and is made quiet (a payload that lies only in the
 *   dropped half would otherwise become inf). Rounding up past the largest finite bf16 gives
 *   inf, as it should.
 * - fp16 (IEEE binary16): |x| >= 65520 (the midpoint between 65504 and the next power of two)
 *   overflows to inf; normal results round the 13 dropped mantissa bits; below 2^-14 the
 *   result is subnormal, a multiple of 2^-24, rounded from the full 24-bit significand (so
 *   2^-25 rounds to 0 and anything above it to the smallest subnormal). NaN stays NaN (quiet,
 *   sign and upper payload kept).
 * Converting bf16 or fp16 to float is exact.
 *
 * The reductions (wire_sum_bf16, wire_sum_fp16) convert both operands to float, add in float
 * and round back: inout[i] = round(in[i] + inout[i]). Float addition of two operands is
 * commutative bitwise, so the MPI_Op is created commutative. */
#include <string.h>

#include "comm/internal.h"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t het_wire_bf16_from_float(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a NaN, quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float het_wire_bf16_to_float(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

uint16_t het_wire_fp16_from_float(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: quiet, upper payload kept */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* >= 65520 (incl. inf): rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    uint32_t e = a >> 23;
    if (a < 0x38800000u) { /* below 2^-14: subnormal or zero, in units of 2^-24 */
        if (e < 102) return sign; /* below 2^-25 (float subnormals too): rounds to 0 */
        uint32_t m = (a & 0x7fffffu) | 0x800000u; /* value = m 2^(e-150) */
        uint32_t shift = 126 - e;                 /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++; /* may carry into 0x400: 2^-14 */
        return (uint16_t)(sign | q);
    }
    /* normal: exponent 113..142 -> 1..30 */
    uint32_t h = ((e - 112) << 10) | ((a >> 13) & 0x3ffu), rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry moves the exponent */
    return (uint16_t)(sign | h);
}

float het_wire_fp16_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) { /* zero or subnormal: m 2^-24, exact in float */
        float v = (float)m * 0x1p-24f;
        return f32_from_bits(f32_bits(v) | sign);
    }
    if (e == 31) return f32_from_bits(sign | 0x7f800000u | (m << 13)); /* inf, NaN */
    return f32_from_bits(sign | ((e + 112) << 23) | (m << 13));
}

const char *het_wire_name(het_wire w) {
    switch (w) {
    case HET_WIRE_FP32: return "fp32";
    case HET_WIRE_FP16: return "fp16";
    case HET_WIRE_BF16: return "bf16";
    }
    return "unknown";
}

int het_wire_parse(const char *text, het_wire *out) {
    static const het_wire all[] = {HET_WIRE_FP32, HET_WIRE_FP16, HET_WIRE_BF16};
    if (!out) return het_error_set(HET_EINVAL, "wire type: NULL output");
    for (size_t i = 0; text && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(text, het_wire_name(all[i])) == 0) {
            *out = all[i];
            return HET_OK;
        }
    return het_error_set(HET_EINVAL, "wire type '%s': expected fp32, fp16 or bf16",
                         text ? text : "(null)");
}

size_t het_wire_bytes(het_wire w) { return w == HET_WIRE_FP32 ? sizeof(float) : 2; }

void het_wire_pack(het_wire w, const float *src, void *dst, size_t n) {
    uint16_t *d = dst;
    switch (w) {
    case HET_WIRE_FP32:
        if (n) memcpy(dst, src, n * sizeof(float));
        return;
    case HET_WIRE_FP16:
        for (size_t i = 0; i < n; i++) d[i] = het_wire_fp16_from_float(src[i]);
        return;
    case HET_WIRE_BF16:
        for (size_t i = 0; i < n; i++) d[i] = het_wire_bf16_from_float(src[i]);
        return;
    }
}

void het_wire_unpack(het_wire w, const void *src, float *dst, size_t n) {
    const uint16_t *s = src;
    switch (w) {
    case HET_WIRE_FP32:
        if (n) memcpy(dst, src, n * sizeof(float));
        return;
    case HET_WIRE_FP16:
        for (size_t i = 0; i < n; i++) dst[i] = het_wire_fp16_to_float(s[i]);
        return;
    case HET_WIRE_BF16:
        for (size_t i = 0; i < n; i++) dst[i] = het_wire_bf16_to_float(s[i]);
        return;
    }
}

/* MPI_User_function: inout[i] = round_bf16(in[i] + inout[i]), added in float. */
static void wire_sum_bf16(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = het_wire_bf16_from_float(het_wire_bf16_to_float(a[i]) +
                                        het_wire_bf16_to_float(b[i]));
}

/* MPI_User_function: inout[i] = round_fp16(in[i] + inout[i]), added in float. */
static void wire_sum_fp16(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = het_wire_fp16_from_float(het_wire_fp16_to_float(a[i]) +
                                        het_wire_fp16_to_float(b[i]));
}

MPI_User_function *het_wire_sum_fn(het_wire w) {
    switch (w) {
    case HET_WIRE_FP16: return wire_sum_fp16;
    case HET_WIRE_BF16: return wire_sum_bf16;
    case HET_WIRE_FP32: break;
    }
    return NULL;
}

/* comm/wire.c: float <-> fp16 and float <-> bf16 conversions, pack / unpack, wire names.
 * No MPI needed. Checks, for both 16-bit types:
 * - every one of the 65536 values converts to float exactly (against an independent formula
 *   for fp16) and back to itself; NaNs stay NaNs with their sign;
 * - round to nearest even at every tie: for each pair of neighbouring finite values a < b, the
 *   midpoint (exact in float) goes to the even one, the floats just below and above it go to
 *   a and b; past the largest finite value the midpoint goes to inf;
 * - edge values (max, min subnormal, 2^-25, overflow, inf, NaN with a low payload, -0);
 * - one million random floats round to a nearest neighbour (no closer 16-bit value). */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "hetrain/comm.h"
#include "test.h"

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* fp16 value of h by the definition, in double: (-1)^s m 2^-24 or (-1)^s (1024+m) 2^(e-25). */
static double fp16_value(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp((double)m, -24) : ldexp((double)(1024 + m), e - 25);
    return s ? -v : v;
}

typedef struct conv {
    const char *name;
    uint16_t (*from)(float);
    float (*to)(uint16_t);
    uint16_t max_finite; /* largest finite positive value */
    uint16_t inf;
    double inf_mid;      /* the midpoint between max_finite and the next power of the format */
} conv;

static int is_nan16(const conv *c, uint16_t h) {
    return (h & 0x7fffu) > c->inf;
}

static void test_round_trip(const conv *c) {
    int bad = 0, bad_nan = 0, bad_def = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = c->to(h);
        uint16_t back = c->from(f);
        if (is_nan16(c, h)) {
            if (!isnan(f) || !is_nan16(c, back) || (back >> 15) != (h >> 15)) {
                if (bad_nan++ < 5)
                    fprintf(stderr, "%s NaN %04x -> %08x -> %04x\n", c->name, h, bits_of(f),
                            back);
            }
            continue;
        }
        if (back != h && bad++ < 5)
            fprintf(stderr, "%s %04x -> %.9g -> %04x\n", c->name, h, (double)f, back);
        if (c->from == het_wire_fp16_from_float && (h & 0x7fffu) < c->inf &&
            (double)f != fp16_value(h) && bad_def++ < 5)
            fprintf(stderr, "fp16 %04x: %.9g, by definition %.9g\n", h, (double)f,
                    fp16_value(h));
    }
    CHECK(bad == 0 && bad_nan == 0 && bad_def == 0, "%s: round trip: %d wrong, %d NaN wrong, "
          "%d off the definition", c->name, bad, bad_nan, bad_def);
}

/* Ties and their neighbours, for every pair of neighbouring finite values of both signs. */
static void test_ties(const conv *c) {
    int bad = 0;
    for (uint32_t h = 0; h < c->max_finite; h++) {
        double a = c->to((uint16_t)h), b = c->to((uint16_t)(h + 1)), mid = 0.5 * (a + b);
        float m = (float)mid;
        if ((double)m != mid) { /* the midpoint must be a float for this test to mean much */
            CHECK(0, "%s: midpoint of %04x and %04x is not a float", c->name, h, h + 1);
            return;
        }
        uint16_t even = (h & 1u) ? (uint16_t)(h + 1) : (uint16_t)h;
        uint16_t got[3] = {c->from(m), c->from(nextafterf(m, 0.0f)),
                           c->from(nextafterf(m, INFINITY))};
        uint16_t want[3] = {even, (uint16_t)h, (uint16_t)(h + 1)};
        for (int k = 0; k < 3; k++) {
            uint16_t gn = c->from(k == 0 ? -m : k == 1 ? -nextafterf(m, 0.0f) :
                                  -nextafterf(m, INFINITY));
            if ((got[k] != want[k] || gn != (uint16_t)(want[k] | 0x8000u)) && bad++ < 5)
                fprintf(stderr, "%s: between %04x and %04x, case %d: got %04x / %04x, want "
                        "%04x\n", c->name, h, h + 1, k, got[k], gn, want[k]);
        }
    }
    CHECK(bad == 0, "%s: %d ties or neighbours rounded wrong", c->name, bad);
    /* overflow: the midpoint past the largest finite value is a tie that goes to inf (odd
     * max); just below it stays finite */
    float m = (float)c->inf_mid;
    CHECK(c->from(m) == c->inf && c->from(-m) == (uint16_t)(c->inf | 0x8000u),
          "%s: %.9g -> %04x, expected inf %04x", c->name, (double)m, c->from(m), c->inf);
    CHECK(c->from(nextafterf(m, 0.0f)) == c->max_finite, "%s: below the overflow tie: %04x",
          c->name, c->from(nextafterf(m, 0.0f)));
    CHECK(c->from(FLT_MAX) == c->inf && c->from(INFINITY) == c->inf &&
          c->from(-INFINITY) == (uint16_t)(c->inf | 0x8000u), "%s: FLT_MAX / inf: %04x %04x",
          c->name, c->from(FLT_MAX), c->from(INFINITY));
}

/* Random floats (random bit patterns within the format's range) round to a nearest value. */
static void test_random(const conv *c) {
    het_rng r;
    het_rng_seed(&r, 2024);
    int bad = 0;
    uint32_t lim = bits_of((float)c->inf_mid);
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)het_rng_u64(&r) % lim;
        float x = float_of(u | (i & 1 ? 0x80000000u : 0u));
        uint16_t h = c->from(x);
        double d = fabs((double)c->to(h) - x);
        uint16_t mag = h & 0x7fffu, s = h & 0x8000u;
        double dn = mag < c->max_finite ? fabs((double)c->to((uint16_t)(s | (mag + 1))) - x)
                                        : INFINITY;
        double dp = mag > 0 ? fabs((double)c->to((uint16_t)(s | (mag - 1))) - x) : INFINITY;
        if ((d > dn || d > dp) && bad++ < 5)
            fprintf(stderr, "%s: %.9g -> %04x (error %g), a neighbour is closer (%g, %g)\n",
                    c->name, (double)x, h, d, dn, dp);
    }
    CHECK(bad == 0, "%s: %d random floats not rounded to nearest", c->name, bad);
}

static void test_fp16_edges(void) {
    struct { float x; uint16_t h; } k[] = {
        {0.0f, 0x0000},           {-0.0f, 0x8000},           {1.0f, 0x3c00},
        {-2.0f, 0xc000},          {65504.0f, 0x7bff},        {-65504.0f, 0xfbff},
        {0x1p-14f, 0x0400},       {0x1p-24f, 0x0001},        {0x1.ff8p-15f, 0x03ff},
        {0x1p-25f, 0x0000},       {0x1.000002p-25f, 0x0001}, {0x1.8p-24f, 0x0002},
        {0x1.4p-24f, 0x0001},     {65519.0f, 0x7bff},        {65520.0f, 0x7c00},
        {1e9f, 0x7c00},           {FLT_TRUE_MIN, 0x0000},    {-FLT_TRUE_MIN, 0x8000},
        {0.1f, 0x2e66},           {1.0f / 3.0f, 0x3555},     {2049.0f, 0x6800},
        {2051.0f, 0x6802},        {2050.0f, 0x6801},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        CHECK(het_wire_fp16_from_float(k[i].x) == k[i].h, "fp16(%a) = %04x, expected %04x",
              (double)k[i].x, het_wire_fp16_from_float(k[i].x), k[i].h);
    /* a NaN whose payload lies only in the dropped bits must not become inf */
    float snan = float_of(0x7f800001u), nnan = float_of(0xffc00000u);
    uint16_t h = het_wire_fp16_from_float(snan);
    CHECK((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0, "fp16(NaN 7f800001) = %04x", h);
    h = het_wire_fp16_from_float(nnan);
    CHECK((h & 0x7fffu) > 0x7c00u && (h & 0x8000u), "fp16(-NaN) = %04x", h);
    CHECK(isinf(het_wire_fp16_to_float(0x7c00)) && het_wire_fp16_to_float(0x7c00) > 0 &&
          isnan(het_wire_fp16_to_float(0x7e00)), "fp16 inf / NaN to float");
    CHECK(het_wire_fp16_to_float(0x0001) == 0x1p-24f && het_wire_fp16_to_float(0x8001) ==
          -0x1p-24f, "fp16 min subnormal: %a", (double)het_wire_fp16_to_float(0x0001));
}

static void test_bf16_edges(void) {
    struct { float x; uint16_t h; } k[] = {
        {1.0f, 0x3f80},   {-2.0f, 0xc000},          {0x1.fep127f, 0x7f7f},
        {FLT_MAX, 0x7f80}, {0x1.01p0f, 0x3f80},     {0x1.03p0f, 0x3f82},
        {0x1.010002p0f, 0x3f81}, {FLT_TRUE_MIN, 0x0000}, {0x1p-133f, 0x0001},
        {-0.0f, 0x8000},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        CHECK(het_wire_bf16_from_float(k[i].x) == k[i].h, "bf16(%a) = %04x, expected %04x",
              (double)k[i].x, het_wire_bf16_from_float(k[i].x), k[i].h);
    float snan = float_of(0x7f800001u);
    uint16_t h = het_wire_bf16_from_float(snan);
    CHECK((h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0, "bf16(NaN 7f800001) = %04x, not NaN",
          h);
    CHECK(het_wire_bf16_to_float(0x3f80) == 1.0f, "bf16 1.0");
}

static void test_pack(void) {
    enum { N = 1000 };
    float x[N], y[N];
    uint16_t w[N];
    het_rng r;
    het_rng_seed(&r, 7);
    for (int i = 0; i < N; i++) x[i] = 100.0f * het_rng_normal(&r);
    het_wire ws[2] = {HET_WIRE_FP16, HET_WIRE_BF16};
    for (int k = 0; k < 2; k++) {
        het_wire_pack(ws[k], x, w, N);
        het_wire_unpack(ws[k], w, y, N);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            uint16_t h = ws[k] == HET_WIRE_FP16 ? het_wire_fp16_from_float(x[i])
                                                : het_wire_bf16_from_float(x[i]);
            float f = ws[k] == HET_WIRE_FP16 ? het_wire_fp16_to_float(h)
                                             : het_wire_bf16_to_float(h);
            bad += w[i] != h || bits_of(y[i]) != bits_of(f);
        }
        CHECK(bad == 0, "%s pack / unpack: %d of %d differ from the scalar conversion",
              het_wire_name(ws[k]), bad, N);
    }
    float z[N];
    het_wire_pack(HET_WIRE_FP32, x, z, N);
    het_wire_unpack(HET_WIRE_FP32, z, y, N);
    CHECK(memcmp(x, y, sizeof x) == 0, "fp32 pack / unpack is not a copy");
    het_wire_pack(HET_WIRE_FP16, NULL, NULL, 0); /* n = 0 touches nothing */
}

static void test_names(void) {
    het_wire w = HET_WIRE_FP32;
    const char *names[3] = {"fp32", "fp16", "bf16"};
    for (int i = 0; i < 3; i++) {
        CHECK(strcmp(het_wire_name((het_wire)i), names[i]) == 0, "name %d: %s", i,
              het_wire_name((het_wire)i));
        CHECK(het_wire_parse(names[i], &w) == HET_OK && (int)w == i, "parse %s: %d", names[i],
              (int)w);
    }
    CHECK(het_wire_parse("fp8", &w) == HET_EINVAL, "fp8 accepted");
    CHECK(strstr(het_error_msg(), "fp8") && strstr(het_error_msg(), "fp32") &&
          strstr(het_error_msg(), "fp16") && strstr(het_error_msg(), "bf16"),
          "message: %s", het_error_msg());
    CHECK(het_wire_parse(NULL, &w) == HET_EINVAL && het_wire_parse("bf16", NULL) == HET_EINVAL,
          "NULL accepted");
    CHECK(strcmp(het_wire_name((het_wire)9), "unknown") == 0, "name 9: %s",
          het_wire_name((het_wire)9));
}

int main(void) {
    conv fp16 = {"fp16", het_wire_fp16_from_float, het_wire_fp16_to_float, 0x7bff, 0x7c00,
                 65520.0};
    conv bf16 = {"bf16", het_wire_bf16_from_float, het_wire_bf16_to_float, 0x7f7f, 0x7f80,
                 ldexp(511.0, 119)}; /* (0x1.fe + 0x2.00) / 2 * 2^127 = 0x1.ff p127 */
    test_round_trip(&fp16);
    test_round_trip(&bf16);
    test_ties(&fp16);
    test_ties(&bf16);
    test_random(&fp16);
    test_random(&bf16);
    test_fp16_edges();
    test_bf16_edges();
    test_pack();
    test_names();
    return het_test_finish("test_wire");
}

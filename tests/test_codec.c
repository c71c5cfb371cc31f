/* tensor/codec.c: the codecs of the Q-FB pipeline (hetrain/codec.h). Seed 20240611, printed.
 * Checks:
 * - q8: on random data of several sizes (n = 1 .. 60000), in [-1, 1], negative only, huge
 *   (+-3e38: max - min overflows a float), far from zero (1e6 + [0, 1): the decode's float
 *   rounding is larger than the step), |x - decoded| <= scale / 2 (1 + 1e-9) + half an ulp of
 *   the decoded value; the step is (max - min) / 255 rounded up; no other code is closer; min
 *   and max get codes 0 and 255; a constant tensor decodes bitwise; NaN and +-inf refused with
 *   their index; the wire form is 16 + n bytes and unpacks to what encode + decode give.
 * - q8 unpack refuses every truncation (each copied into a buffer of exactly its length, so
 *   AddressSanitizer sees any read past it), a byte too many, a wrong kind, version, reserved
 *   byte, n, NaN or negative scale, min + 255 scale past FLT_MAX; x untouched each time.
 * - gc top-k keeps exactly k, the first k of a sort by (|v| descending, index ascending), on
 *   random data and on data with many equal magnitudes and zeros (the tie rule); the same
 *   input gives the same bytes. The threshold keeps exactly |v| >= t (values equal to t
 *   included). Quantize off: sent values bitwise v, residual 0 there and bitwise v elsewhere.
 *   Quantize on: scale = max|kept| / 127, each code the nearest.
 * - error feedback: every element's decoded + new residual is g + old residual to an ulp, and
 *   the sums to 1e-5 of sum |g + r| (the sum itself can be near 0), over 200 rounds in every
 *   mode, quantized or not; over 100 rounds of N(0, 1) gradients at top-k 10 % the residual
 *   never exceeds T (the k-th largest |v|) or half a step, and its RMS stays below 2 (1.16
 *   measured) where a residual never sent (a random walk) would reach 10.
 * - sizes: top-k 1 % of n = 60000 is 16 + 600 * 5 = 3016 bytes quantized (1.3 % of n * 4),
 *   4816 fp32; HET_GRADC_NONE is dense: 60016 bytes quantized, 240016 fp32.
 * - gc decode refuses truncations (exact-size copies), a byte too many, an index >= n,
 *   indices not ascending or repeated, k > n, a wrong kind (a q8 buffer), width, reserved
 *   byte, n, scale, code -128, a NaN fp32 value; out untouched each time. The add variant adds.
 * - gc encode refuses a non-finite g + r (r unchanged), k = 0 or > n, a bad threshold or
 *   mode, a buffer too small. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hetrain/codec.h"
#include "hetrain/core.h"
#include "test.h"

static het_rng rng;

static float *falloc(size_t n) { return het_alloc(sizeof(float) * (n ? n : 1)); }

/* A copy of buf[len] in a heap block of exactly len bytes (AddressSanitizer sees a read past). */
static uint8_t *exact_copy(const uint8_t *buf, size_t len) {
    uint8_t *p = malloc(len ? len : 1);
    if (len) memcpy(p, buf, len);
    return p;
}

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static float rdf(const uint8_t *p) {
    uint32_t u = rd32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static void wrf(uint8_t *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    wr32(p, u);
}

/* ---- q8 ---- */

enum { D_UNIT, D_NEG, D_HUGE, D_FAR, D_COUNT };
static const char *dist_name[D_COUNT] = {"[-1,1]", "negative", "huge", "1e6+[0,1)"};

static float draw(int d) {
    float u = het_rng_uniform(&rng);
    switch (d) {
    case D_NEG: return -1.0f - 4.0f * u;
    case D_HUGE: return (2.0f * u - 1.0f) * 3.0e38f;
    case D_FAR: return 1.0e6f + u;
    default: return 2.0f * u - 1.0f;
    }
}

static void test_q8_round_trip(void) {
    const size_t sizes[] = {1, 2, 7, 255, 256, 1000, 60000};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        for (int d = 0; d < D_COUNT; d++) {
            size_t n = sizes[si];
            float *x = falloc(n), *y = falloc(n), *y2 = falloc(n);
            uint8_t *codes = malloc(n), *buf = malloc(het_q8_bytes(n));
            for (size_t i = 0; i < n; i++) x[i] = draw(d);
            if (n > 2 && d == D_HUGE) x[0] = -FLT_MAX, x[1] = FLT_MAX;
            float lo = x[0], hi = x[0];
            for (size_t i = 0; i < n; i++) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
            het_q8_params p;
            int st = het_q8_encode(codes, &p, x, n);
            CHECK(st == HET_OK, "n %zu %s: status %d", n, dist_name[d], st);
            het_q8_decode(y, codes, n, p);
            double range = (double)hi - lo;
            CHECK(p.min == lo && (double)p.scale * 255.0 >= range &&
                      (double)p.scale <= range / 255.0 * (1.0 + 2.0 * FLT_EPSILON),
                  "n %zu %s: min %g (of %g), scale %g for a range of %g", n, dist_name[d],
                  (double)p.min, (double)lo, (double)p.scale, range);
            size_t bad = 0, worse = 0, lo_code = 255, hi_code = 0;
            double worst = 0.0;
            for (size_t i = 0; i < n; i++) {
                double e = fabs((double)x[i] - y[i]);
                double tol = 0.5 * p.scale * (1.0 + 1e-9) + 0.5 * FLT_EPSILON * fabs(y[i]);
                if (e > tol && bad++ < 3)
                    fprintf(stderr, "  n %zu %s: x[%zu] %.9g -> %u -> %.9g, error %g > %g\n",
                            n, dist_name[d], i, (double)x[i], codes[i], (double)y[i], e, tol);
                worst = fmax(worst, p.scale > 0 ? e / p.scale : e);
                /* nearest: no neighbouring code is closer (in exact arithmetic) */
                double t = ((double)x[i] - p.min), q = codes[i], s = p.scale;
                double here = fabs(t - q * s) - 1e-9 * s;
                if ((q > 0 && fabs(t - (q - 1) * s) < here) ||
                    (q < 255 && fabs(t - (q + 1) * s) < here))
                    worse++;
                if (x[i] == lo && codes[i] < lo_code) lo_code = codes[i];
                if (x[i] == hi && codes[i] > hi_code) hi_code = codes[i];
            }
            CHECK(bad == 0, "n %zu %s: %zu values beyond scale / 2 (worst %g steps)", n,
                  dist_name[d], bad, worst);
            CHECK(worse == 0, "n %zu %s: %zu codes not the nearest", n, dist_name[d], worse);
            if (hi > lo)
                CHECK(lo_code == 0 && hi_code == 255, "n %zu %s: min -> %zu, max -> %zu", n,
                      dist_name[d], lo_code, hi_code);
            else
                CHECK(memcmp(x, y, sizeof(float) * n) == 0, "n %zu: constant not exact", n);
            /* the wire form: 16 + n bytes, the same values */
            st = het_q8_pack(buf, het_q8_bytes(n), x, n);
            CHECK(st == HET_OK && het_q8_bytes(n) == 16 + n && buf[0] == 'Q' &&
                      rd32(buf + 4) == n && memcmp(buf + 16, codes, n) == 0,
                  "n %zu %s: pack status %d, %zu bytes", n, dist_name[d], st, het_q8_bytes(n));
            st = het_q8_unpack(y2, n, buf, het_q8_bytes(n));
            CHECK(st == HET_OK && memcmp(y, y2, sizeof(float) * n) == 0,
                  "n %zu %s: unpack status %d (%s) or values differ", n, dist_name[d], st,
                  het_error_msg());
            het_free(x), het_free(y), het_free(y2), free(codes), free(buf);
        }
    }
}

static void test_q8_constant(void) {
    const float vals[] = {0.0f, -3.25f, 1e-42f, FLT_MAX, -FLT_MAX, 7.0f};
    for (size_t vi = 0; vi < sizeof vals / sizeof *vals; vi++) {
        size_t n = 33;
        float x[33], y[33];
        uint8_t buf[16 + 33];
        for (size_t i = 0; i < n; i++) x[i] = vals[vi];
        int st = het_q8_pack(buf, sizeof buf, x, n);
        int st2 = het_q8_unpack(y, n, buf, sizeof buf);
        CHECK(st == HET_OK && st2 == HET_OK && memcmp(x, y, sizeof x) == 0 &&
                  rdf(buf + 12) == 0.0f,
              "constant %g: status %d / %d, decoded %g, scale %g", (double)vals[vi], st, st2,
              (double)y[0], (double)rdf(buf + 12));
    }
    /* two values one subnormal step apart: the step must not round to 0 */
    float x[2] = {0.0f, 1e-45f}, y[2];
    uint8_t buf[18];
    int st = het_q8_pack(buf, sizeof buf, x, 2);
    st = st ? st : het_q8_unpack(y, 2, buf, sizeof buf);
    CHECK(st == HET_OK && y[0] == x[0] && y[1] == x[1], "subnormal pair: %d, %g %g", st,
          (double)y[0], (double)y[1]);
    /* n = 0: a header only */
    st = het_q8_pack(buf, 16, x, 0);
    CHECK(st == HET_OK && het_q8_unpack(y, 0, buf, 16) == HET_OK, "n = 0: %d", st);
}

static void test_q8_refused(void) {
    const float bad[] = {NAN, INFINITY, -INFINITY};
    const size_t at[] = {0, 5, 99};
    for (size_t b = 0; b < 3; b++) {
        for (size_t a = 0; a < 3; a++) {
            float x[100];
            uint8_t buf[116];
            for (size_t i = 0; i < 100; i++) x[i] = (float)i;
            x[at[a]] = bad[b];
            het_error_clear();
            int st = het_q8_pack(buf, sizeof buf, x, 100);
            char want[32];
            snprintf(want, sizeof want, "x[%zu]", at[a]);
            CHECK(st == HET_EINVAL && strstr(het_error_msg(), want),
                  "%g at %zu: status %d, message '%s'", (double)bad[b], at[a], st,
                  het_error_msg());
        }
    }
    float x[100], y[100];
    uint8_t good[116];
    for (size_t i = 0; i < 100; i++) x[i] = sinf((float)i);
    CHECK(het_q8_pack(good, 115, x, 100) == HET_EINVAL, "a buffer too small accepted");
    CHECK(het_q8_pack(good, sizeof good, x, 100) == HET_OK, "pack: %s", het_error_msg());
    /* every truncation, and one byte too many */
    for (size_t len = 0; len <= sizeof good + 1; len++) {
        if (len == sizeof good) continue;
        uint8_t *c = malloc(sizeof good + 1);
        memcpy(c, good, sizeof good);
        c[sizeof good] = 0;
        uint8_t *e = exact_copy(c, len);
        for (size_t i = 0; i < 100; i++) y[i] = 42.0f;
        int st = het_q8_unpack(y, 100, e, len);
        CHECK(st == HET_EFORMAT && y[0] == 42.0f && y[99] == 42.0f,
              "q8 of %zu bytes (of 116): status %d", len, st);
        free(c), free(e);
    }
    struct { size_t off; int width; uint32_t v; const char *what; } cases[] = {
        {0, 1, 'G', "kind"},           {1, 1, 2, "version"},      {2, 1, 1, "reserved"},
        {4, 4, 99, "n 99"},            {4, 4, 101, "n 101"},
        {12, 4, 0x7fc00000u, "NaN scale"}, {12, 4, 0xbf800000u, "scale -1"},
        {8, 4, 0x7f000000u, "min 1.7e38 (+ 255 scale past FLT_MAX)"},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        uint8_t c[116];
        memcpy(c, good, sizeof c);
        if (cases[ci].width == 1) c[cases[ci].off] = (uint8_t)cases[ci].v;
        else wr32(c + cases[ci].off, cases[ci].v);
        if (ci == 7) wrf(c + 12, 1e37f);
        for (size_t i = 0; i < 100; i++) y[i] = 42.0f;
        het_error_clear();
        int st = het_q8_unpack(y, 100, c, sizeof c);
        CHECK(st == HET_EFORMAT && y[0] == 42.0f && strstr(het_error_msg(), "expected"),
              "q8 with %s: status %d, message '%s'", cases[ci].what, st, het_error_msg());
    }
}

/* ---- gc ---- */

typedef struct mag {
    float a;
    size_t i;
} mag;

/* |v| descending, then index ascending: the first k are what top-k must keep */
static int mag_cmp(const void *x, const void *y) {
    const mag *p = x, *q = y;
    if (p->a != q->a) return p->a > q->a ? -1 : 1;
    return p->i < q->i ? -1 : p->i > q->i;
}

/* The kept set of a wire form into keep[n]: from the indices (sparse) or where out != 0
 * (dense; the caller's data has no zeros). *exact = 0 when the set may miss elements: dense
 * int8, where a kept value can have code 0 and reads as not sent (harmless: it decodes the
 * same). */
static size_t kept_of(unsigned char *keep, int *exact, const uint8_t *buf, const float *out,
                      size_t n) {
    size_t k = rd32(buf + 8), w = buf[1];
    memset(keep, 0, n);
    *exact = k * (4 + w) < n * w || w == 4;
    if (k * (4 + w) < n * w)
        for (size_t j = 0; j < k; j++) {
            uint32_t i = rd32(buf + 16 + 4 * j);
            if (i < n) keep[i] = 1;
            else *exact = -1; /* an encoder gone wrong; decode would have refused it */
        }
    else
        for (size_t i = 0; i < n; i++) keep[i] = out[i] != 0.0f;
    return k;
}

/* One top-k round on v (r = 0, g = v), compared with a sort. */
static void check_topk(const float *v, size_t n, size_t k, int quantize, const char *what) {
    float *r = falloc(n), *out = falloc(n), *work = falloc(n);
    size_t cap = het_gradc_bytes(n, n, quantize), len = 0, len2 = 0;
    uint8_t *buf = malloc(cap), *buf2 = malloc(cap);
    unsigned char *keep = malloc(n);
    het_gradc_config cfg = {HET_GRADC_TOPK, k, 0.0f, quantize};
    int st = het_gradc_encode(buf, cap, &len, r, v, n, &cfg, work);
    CHECK(st == HET_OK && len == het_gradc_bytes(n, k, quantize), "%s: status %d (%s), %zu bytes",
          what, st, het_error_msg(), len);
    st = het_gradc_decode(out, n, buf, len, 0);
    CHECK(st == HET_OK, "%s: decode %d (%s)", what, st, het_error_msg());
    int exact;
    size_t hk = kept_of(keep, &exact, buf, out, n);
    mag *m = malloc(sizeof(mag) * n);
    for (size_t i = 0; i < n; i++) m[i] = (mag){fabsf(v[i]), i};
    qsort(m, n, sizeof *m, mag_cmp);
    size_t wrong = 0, count = 0;
    for (size_t j = 0; j < n; j++) {
        count += keep[m[j].i];
        if (!exact && keep[m[j].i] <= (j < k)) continue; /* a subset is all it can show */
        if (keep[m[j].i] != (j < k) && wrong++ < 3)
            fprintf(stderr, "  %s: v[%zu] = %g (rank %zu of k %zu) %s\n", what, m[j].i,
                    (double)v[m[j].i], j, k, keep[m[j].i] ? "kept" : "not kept");
    }
    CHECK(hk == k && exact >= 0 && (exact ? count == k : count <= k) && wrong == 0,
          "%s: header k %zu, %zu kept, %zu wrong (k %zu)", what, hk, count, wrong, k);
    /* determinism: the same input, the same bytes (work NULL: allocated in the call) */
    memset(r, 0, sizeof(float) * n);
    st = het_gradc_encode(buf2, cap, &len2, r, v, n, &cfg, NULL);
    CHECK(st == HET_OK && len2 == len && memcmp(buf, buf2, len) == 0, "%s: not deterministic",
          what);
    het_free(r), het_free(out), het_free(work), free(buf), free(buf2), free(keep), free(m);
}

static void test_gc_topk(void) {
    const size_t sizes[] = {1, 10, 1000, 60000};
    for (size_t si = 0; si < 4; si++) {
        size_t n = sizes[si];
        float *v = falloc(n);
        for (size_t i = 0; i < n; i++) v[i] = het_rng_normal(&rng);
        const size_t ks[] = {1, het_gradc_k_of_ratio(0.01, n), n / 3 + 1, n / 2 + 1, n};
        for (size_t ki = 0; ki < 5; ki++) {
            for (int q = 0; q < 2; q++) {
                char what[64];
                snprintf(what, sizeof what, "top-k random n %zu k %zu q %d", n, ks[ki], q);
                check_topk(v, n, ks[ki], q, what);
            }
        }
        /* ties: magnitudes from {0, 0.5, 1, 2}, both signs, the cut inside a run of equals */
        for (size_t i = 0; i < n; i++) {
            static const float t[] = {0.0f, 0.5f, -0.5f, 1.0f, -1.0f, 2.0f, -2.0f, 0.0f};
            v[i] = t[het_rng_below(&rng, 8)];
        }
        const size_t kt[] = {1, n / 7 + 1, n / 3 + 1, n - n / 5};
        for (size_t ki = 0; ki < 4; ki++) {
            char what[64];
            snprintf(what, sizeof what, "top-k ties n %zu k %zu", n, kt[ki]);
            if (kt[ki] * 8 < n * 4) check_topk(v, n, kt[ki], 0, what);
            if (kt[ki] * 5 < n) check_topk(v, n, kt[ki], 1, what);
        }
        het_free(v);
    }
    /* all equal (zeros of a dead layer): the first k indices */
    float z[1000] = {0};
    check_topk(z, 1000, 10, 1, "top-k all zero");
    check_topk(z, 1000, 10, 0, "top-k all zero fp32");
}

static void test_gc_threshold(void) {
    size_t n = 5000;
    float *v = falloc(n), *r = falloc(n), *out = falloc(n);
    unsigned char *keep = malloc(n);
    const float t = 1.5f;
    for (size_t i = 0; i < n; i++) v[i] = het_rng_normal(&rng);
    for (size_t i = 0; i < n; i += 97) v[i] = (i / 97) % 2 ? -t : t; /* exactly at t */
    for (size_t i = 1; i < n; i += 101) v[i] = nextafterf(t, 0.0f);  /* just below */
    for (int q = 0; q < 2; q++) {
        size_t cap = het_gradc_bytes(n, n, q), len = 0;
        uint8_t *buf = malloc(cap);
        memset(r, 0, sizeof(float) * n);
        het_gradc_config cfg = {HET_GRADC_THRESHOLD, 0, t, q};
        int st = het_gradc_encode(buf, cap, &len, r, v, n, &cfg, NULL);
        st = st ? st : het_gradc_decode(out, n, buf, len, 0);
        int exact;
        size_t k = kept_of(keep, &exact, buf, out, n), want = 0, wrong = 0;
        for (size_t i = 0; i < n; i++) {
            int w = fabsf(v[i]) >= t;
            want += (size_t)w;
            wrong += (size_t)(keep[i] != w);
        }
        CHECK(st == HET_OK && exact == 1 && k == want && wrong == 0 && len == het_gradc_bytes(n, k, q),
              "threshold q %d: status %d, k %zu, want %zu, %zu wrong", q, st, k, want, wrong);
        free(buf);
    }
    het_free(v), het_free(r), het_free(out), free(keep);
}

/* Kept values: fp32 exactly, int8 to the nearest code of max|kept| / 127. */
static void test_gc_values(void) {
    size_t n = 4000, k = 300;
    float *g = falloc(n), *r = falloc(n), *r0 = falloc(n), *out = falloc(n);
    for (size_t i = 0; i < n; i++) g[i] = het_rng_normal(&rng), r0[i] = 0.3f * het_rng_normal(&rng);
    for (int q = 0; q < 2; q++) {
        size_t cap = het_gradc_bytes(n, n, q), len = 0;
        uint8_t *buf = malloc(cap);
        memcpy(r, r0, sizeof(float) * n);
        het_gradc_config cfg = {HET_GRADC_TOPK, k, 0.0f, q};
        int st = het_gradc_encode(buf, cap, &len, r, g, n, &cfg, NULL);
        st = st ? st : het_gradc_decode(out, n, buf, len, 0);
        float scale = rdf(buf + 12), amax = 0.0f;
        for (size_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(g[i] + r0[i]));
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            float v = g[i] + r0[i];
            int sent = out[i] != 0.0f;
            if (!q) {
                bad += sent ? out[i] != v || r[i] != 0.0f : r[i] != v;
            } else if (sent) {
                /* the code sent is the nearest to v / scale */
                double c = (double)v / scale, e = fabs((double)out[i] - v);
                bad += e > 0.5 * scale * (1 + 1e-6) || fabs(out[i] / scale - nearbyint(c)) > 1e-3;
            }
        }
        CHECK(st == HET_OK && bad == 0 && (q ? scale == amax / 127.0f : scale == 0.0f),
              "values q %d: status %d, %zu wrong, scale %g (max %g)", q, st, bad,
              (double)scale, (double)amax);
        free(buf);
    }
    het_free(g), het_free(r), het_free(r0), het_free(out);
}

/* Error feedback: decoded + new r == g + old r, element by element and in sum. */
static void test_gc_feedback(void) {
    size_t n = 3000;
    float *g = falloc(n), *r = falloc(n), *out = falloc(n), *work = falloc(n), *v = falloc(n);
    const het_gradc_config cfgs[] = {
        {HET_GRADC_TOPK, het_gradc_k_of_ratio(0.01, n), 0.0f, 1}, {HET_GRADC_TOPK, 300, 0.0f, 0},
        {HET_GRADC_THRESHOLD, 0, 2.0f, 1}, {HET_GRADC_THRESHOLD, 0, 2.0f, 0},
        {HET_GRADC_NONE, 0, 0.0f, 1}, {HET_GRADC_NONE, 0, 0.0f, 0},
    };
    for (size_t ci = 0; ci < sizeof cfgs / sizeof *cfgs; ci++) {
        const het_gradc_config *c = &cfgs[ci];
        size_t cap = het_gradc_bytes(n, n, c->quantize), len = 0, bad_el = 0, bad_sum = 0;
        uint8_t *buf = malloc(cap);
        memset(r, 0, sizeof(float) * n);
        double worst = 0.0;
        for (int round = 0; round < 200; round++) {
            float gs = round % 3 == 0 ? 1e-3f : round % 3 == 1 ? 1.0f : 100.0f;
            for (size_t i = 0; i < n; i++) {
                g[i] = gs * het_rng_normal(&rng);
                v[i] = g[i] + r[i];
            }
            int st = het_gradc_encode(buf, cap, &len, r, g, n, c, work);
            st = st ? st : het_gradc_decode(out, n, buf, len, 0);
            if (st) {
                CHECK(0, "feedback cfg %zu round %d: status %d (%s)", ci, round, st,
                      het_error_msg());
                break;
            }
            double s_in = 0, s_out = 0, l1 = 0;
            for (size_t i = 0; i < n; i++) {
                s_in += v[i];
                s_out += (double)out[i] + r[i];
                l1 += fabs(v[i]);
                if (fabs((double)out[i] + r[i] - v[i]) > FLT_EPSILON * fabs(v[i])) bad_el++;
            }
            worst = fmax(worst, fabs(s_in - s_out) / l1);
            if (fabs(s_in - s_out) > 1e-5 * l1) bad_sum++;
        }
        CHECK(bad_el == 0 && bad_sum == 0, "feedback cfg %zu: %zu elements, %zu rounds off "
              "(worst sum difference %g of sum |v|)", ci, bad_el, bad_sum, worst);
        free(buf);
    }
    het_free(g), het_free(r), het_free(out), het_free(work), het_free(v);
}

/* The residual over 100 rounds of N(0, 1) gradients at top-k 10 %, quantized. */
static void test_gc_residual_bounded(void) {
    size_t n = 10000, k = het_gradc_k_of_ratio(0.1, n), bad = 0;
    float *g = falloc(n), *r = falloc(n), *v = falloc(n);
    mag *m = malloc(sizeof(mag) * n);
    size_t cap = het_gradc_bytes(n, k, 1), len = 0;
    uint8_t *buf = malloc(cap);
    het_gradc_config cfg = {HET_GRADC_TOPK, k, 0.0f, 1};
    double rms = 0.0, rmax = 0.0;
    for (int round = 0; round < 100; round++) {
        for (size_t i = 0; i < n; i++) {
            g[i] = het_rng_normal(&rng);
            v[i] = g[i] + r[i];
            m[i] = (mag){fabsf(v[i]), i};
        }
        qsort(m, n, sizeof *m, mag_cmp);
        int st = het_gradc_encode(buf, cap, &len, r, g, n, &cfg, NULL);
        CHECK(st == HET_OK, "residual round %d: %d", round, st);
        double bound = fmax(m[k - 1].a, 0.5 * rdf(buf + 12) * (1 + 1e-6)), ss = 0.0;
        rmax = 0.0;
        for (size_t i = 0; i < n; i++) {
            ss += (double)r[i] * r[i];
            rmax = fmax(rmax, fabs(r[i]));
        }
        bad += rmax > bound;
        rms = sqrt(ss / (double)n);
    }
    printf("residual after 100 rounds at top-k 10 %%: RMS %.3f, max %.3f (never sent: ~10)\n",
           rms, rmax);
    CHECK(bad == 0 && rms < 2.0, "residual: %zu rounds above T, RMS %g", bad, rms);
    het_free(g), het_free(r), het_free(v), free(m), free(buf);
}

static void test_gc_sizes(void) {
    size_t n = 60000, k = het_gradc_k_of_ratio(0.01, n);
    CHECK(k == 600, "k of 1 %% of 60000: %zu", k);
    CHECK(het_gradc_k_of_ratio(0.07, 100) == 7 && het_gradc_k_of_ratio(0.3, 10) == 3 &&
              het_gradc_k_of_ratio(0.001, 10) == 1 && het_gradc_k_of_ratio(0.5, 3) == 2 &&
              het_gradc_k_of_ratio(0.0, 10) == 1 && het_gradc_k_of_ratio(NAN, 10) == 1 &&
              het_gradc_k_of_ratio(2.0, 10) == 10 && het_gradc_k_of_ratio(0.5, 0) == 0,
          "k_of_ratio: 0.07 of 100 -> %zu, 0.3 of 10 -> %zu", het_gradc_k_of_ratio(0.07, 100),
          het_gradc_k_of_ratio(0.3, 10));
    float *g = falloc(n), *r = falloc(n);
    for (size_t i = 0; i < n; i++) g[i] = het_rng_normal(&rng);
    uint8_t *buf = malloc(het_gradc_bytes(n, n, 0));
    size_t len = 0;
    het_gradc_config cfg = {HET_GRADC_TOPK, k, 0.0f, 1};
    int st = het_gradc_encode(buf, het_gradc_bytes(n, n, 0), &len, r, g, n, &cfg, NULL);
    printf("top-k 1 %% of %zu floats: %zu bytes quantized (%.2f %% of %zu), %zu fp32\n", n, len,
           100.0 * (double)len / (double)(n * 4), n * 4, het_gradc_bytes(n, k, 0));
    CHECK(st == HET_OK && len == 3016 && len <= n * 4 * 3 / 10, "top-k 1 %%: %zu bytes", len);
    CHECK(het_gradc_bytes(n, k, 0) == 4816 && het_gradc_bytes(n, n, 1) == 60016 &&
              het_gradc_bytes(n, n, 0) == 240016 && het_q8_bytes(n) == 60016,
          "sizes: %zu %zu %zu", het_gradc_bytes(n, k, 0), het_gradc_bytes(n, n, 1),
          het_gradc_bytes(n, n, 0));
    /* HET_GRADC_NONE goes dense: n + 16 bytes quantized */
    memset(r, 0, sizeof(float) * n);
    cfg = (het_gradc_config){HET_GRADC_NONE, 0, 0.0f, 1};
    st = het_gradc_encode(buf, het_gradc_bytes(n, n, 0), &len, r, g, n, &cfg, NULL);
    CHECK(st == HET_OK && len == 60016, "none, quantized: %d, %zu bytes", st, len);
    het_free(g), het_free(r), free(buf);
}

static void test_gc_refused(void) {
    size_t n = 100, k = 10, len = 0;
    float g[100], r[100], out[100], r_before[100];
    for (size_t i = 0; i < n; i++) g[i] = het_rng_normal(&rng), r[i] = 0.0f;
    uint8_t good[16 + 10 * 5], good32[16 + 10 * 8];
    het_gradc_config cfg = {HET_GRADC_TOPK, k, 0.0f, 1};
    CHECK(het_gradc_encode(good, sizeof good, &len, r, g, n, &cfg, NULL) == HET_OK &&
              len == sizeof good, "encode: %s", het_error_msg());
    memset(r, 0, sizeof r);
    cfg.quantize = 0;
    CHECK(het_gradc_encode(good32, sizeof good32, &len, r, g, n, &cfg, NULL) == HET_OK &&
              len == sizeof good32, "encode fp32: %s", het_error_msg());
    /* truncations and one byte too many */
    for (size_t l = 0; l <= sizeof good + 1; l++) {
        if (l == sizeof good) continue;
        uint8_t c[sizeof good + 1] = {0};
        memcpy(c, good, sizeof good);
        uint8_t *e = exact_copy(c, l);
        for (size_t i = 0; i < n; i++) out[i] = 42.0f;
        int st = het_gradc_decode(out, n, e, l, 0);
        CHECK(st == HET_EFORMAT && out[0] == 42.0f && out[99] == 42.0f,
              "gc of %zu bytes (of %zu): status %d", l, sizeof good, st);
        free(e);
    }
    uint8_t q8[16 + 100];
    CHECK(het_q8_pack(q8, sizeof q8, g, n) == HET_OK, "q8 pack");
    for (int ci = 0; ci < 14; ci++) {
        uint8_t c[sizeof good32];
        const char *what = "";
        size_t l = sizeof good;
        memcpy(c, ci >= 12 ? good32 : good, ci >= 12 ? sizeof good32 : sizeof good);
        switch (ci) {
        case 0: c[0] = 'Q', what = "kind 'Q'"; break;
        case 1: c[1] = 2, what = "width 2"; break;
        case 2: c[3] = 1, what = "reserved byte"; break;
        case 3: wr32(c + 4, 99), what = "n 99"; break;
        case 4: wr32(c + 8, 101), what = "k 101 > n"; break;
        case 5: wr32(c + 16 + 4 * 9, 100), what = "index = n"; break;
        case 6: wr32(c + 16 + 4 * 9, 0xffffffffu), what = "index 2^32 - 1"; break;
        case 7: { /* swap indices 3 and 4 */
            uint32_t a = rd32(c + 28), b = rd32(c + 32);
            wr32(c + 28, b), wr32(c + 32, a), what = "indices not ascending";
            break;
        }
        case 8: wr32(c + 20, rd32(c + 16)), what = "index repeated"; break;
        case 9: wrf(c + 12, NAN), what = "scale NaN"; break;
        case 10: wrf(c + 12, -1.0f), what = "scale -1"; break;
        case 11: c[16 + 40 + 2] = 0x80, what = "code -128"; break;
        case 12: wrf(c + 16 + 40 + 4, NAN), l = sizeof good32, what = "fp32 value NaN"; break;
        case 13: wrf(c + 12, 1.0f), l = sizeof good32, what = "fp32 with a scale"; break;
        }
        for (size_t i = 0; i < n; i++) out[i] = 42.0f;
        het_error_clear();
        int st = het_gradc_decode(out, n, c, l, ci % 2);
        CHECK(st == HET_EFORMAT && out[0] == 42.0f && out[99] == 42.0f &&
                  strstr(het_error_msg(), "expected"),
              "gc with %s: status %d, message '%s'", what, st, het_error_msg());
    }
    int st = het_gradc_decode(out, n, q8, sizeof q8, 0);
    CHECK(st == HET_EFORMAT, "gc decode of a q8 buffer: %d", st);
    /* k > n in a dense form, whose length does not depend on k */
    uint8_t dense[16 + 100];
    cfg = (het_gradc_config){HET_GRADC_NONE, 0, 0.0f, 1};
    memset(r, 0, sizeof r);
    st = het_gradc_encode(dense, sizeof dense, &len, r, g, n, &cfg, NULL);
    CHECK(st == HET_OK && len == sizeof dense && het_gradc_decode(out, n, dense, len, 0) == HET_OK,
          "dense: %d", st);
    wr32(dense + 8, 101);
    out[0] = 42.0f;
    st = het_gradc_decode(out, n, dense, len, 0);
    CHECK(st == HET_EFORMAT && out[0] == 42.0f, "dense with k 101 > n: status %d", st);
    st = het_q8_unpack(out, n, good, sizeof good);
    CHECK(st == HET_EFORMAT, "q8 unpack of a gc buffer: %d", st);
    /* the add variant: out + decoded */
    float dec[100];
    CHECK(het_gradc_decode(dec, n, good, sizeof good, 0) == HET_OK, "decode");
    for (size_t i = 0; i < n; i++) out[i] = (float)i;
    CHECK(het_gradc_decode(out, n, good, sizeof good, 1) == HET_OK, "decode add");
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += out[i] != (float)i + dec[i];
    CHECK(bad == 0, "add: %zu wrong", bad);
    /* encode refusals: nothing written, r unchanged */
    for (size_t i = 0; i < n; i++) r[i] = 0.1f * (float)i;
    memcpy(r_before, r, sizeof r);
    uint8_t buf[16 + 100 * 4];
    const het_gradc_config bad_cfgs[] = {
        {HET_GRADC_TOPK, 0, 0.0f, 1}, {HET_GRADC_TOPK, 101, 0.0f, 1}, {HET_GRADC_THRESHOLD, 0, -1.0f, 1},
        {HET_GRADC_THRESHOLD, 0, NAN, 1}, {HET_GRADC_THRESHOLD, 0, INFINITY, 1}, {7, 0, 0.0f, 1},
    };
    for (size_t ci = 0; ci < sizeof bad_cfgs / sizeof *bad_cfgs; ci++) {
        st = het_gradc_encode(buf, sizeof buf, &len, r, g, n, &bad_cfgs[ci], NULL);
        CHECK(st == HET_EINVAL, "config %zu accepted: %d", ci, st);
    }
    cfg = (het_gradc_config){HET_GRADC_TOPK, 10, 0.0f, 1};
    st = het_gradc_encode(buf, 16 + 10 * 5 - 1, &len, r, g, n, &cfg, NULL);
    CHECK(st == HET_EINVAL, "a buffer too small accepted: %d", st);
    float g2[100];
    for (int ci = 0; ci < 3; ci++) {
        memcpy(g2, g, sizeof g2);
        if (ci == 0) g2[17] = NAN;
        if (ci == 1) g2[17] = -INFINITY;
        if (ci == 2) g2[17] = FLT_MAX, r[17] = FLT_MAX; /* g + r overflows */
        memcpy(r_before, r, sizeof r);
        het_error_clear();
        st = het_gradc_encode(buf, sizeof buf, &len, r, g2, n, &cfg, NULL);
        CHECK(st == HET_EINVAL && memcmp(r, r_before, sizeof r) == 0 &&
                  strstr(het_error_msg(), "g[17]"),
              "non-finite case %d: status %d, message '%s'", ci, st, het_error_msg());
    }
}

int main(void) {
    uint64_t seed = 20240611;
    printf("test_codec: seed %llu\n", (unsigned long long)seed);
    het_rng_seed(&rng, seed);
    test_q8_round_trip();
    test_q8_constant();
    test_q8_refused();
    test_gc_topk();
    test_gc_threshold();
    test_gc_values();
    test_gc_feedback();
    test_gc_residual_bounded();
    test_gc_sizes();
    test_gc_refused();
    return het_test_finish("test_codec");
}

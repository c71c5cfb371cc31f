/* Vector loops of batch normalization and of the residual block's element-wise steps, on one
 * plane (contiguous floats) at a time.
 *
 * DESIGN. The sums accumulate in double in 8 fixed lanes (element i goes to lane i % 8), then
 * the lanes are added in order: the compiler vectorizes that (8 doubles per AVX-512 register)
 * without reassociating anything, so every instruction-set variant gives the same bits, and the
 * result does not depend on the machine. The scalar double sums they replace made batch norm
 * and the block's element-wise code about a third of ResNet-20's step once the convolutions ran
 * through oneDNN (perf, one thread). Compiled for AVX-512 / AVX2 / baseline and picked at run
 * time (core/clones.h).
 *
 * Batch norm keeps its input, not x_hat: forward writes only y, and backward recomputes
 * x_hat = (x - mean) * inv_std with the same float operations, so the results are those of a
 * stored x_hat while forward saves a stream of writes (its affine pass was 14 % of ResNet-20's
 * step, bound by memory). */
#include <stddef.h>

#include "core/clones.h"
#include "core/vectors.h"
#include "hetrain/tensor.h"


#define LANES 8

static double lanes_total(const double *l) {
    double s = 0;
    for (int i = 0; i < LANES; i++) s += l[i];
    return s;
}

/* sum x and sum (x - mu)^2 in the lanes; inlined into the clones of their callers */
static inline double lanes_sum(const float *restrict x, size_t n) {
    double l[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) l[j] += (double)x[i + j];
    for (; i < n; i++) l[i % LANES] += (double)x[i];
    return lanes_total(l);
}

static inline double lanes_sqdev(const float *restrict x, size_t n, double mu) {
    double l[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            double d = (double)x[i + j] - mu;
            l[j] += d * d;
        }
    for (; i < n; i++) {
        double d = (double)x[i] - mu;
        l[i % LANES] += d * d;
    }
    return lanes_total(l);
}

HET_CLONES
void het_vbn_sums(const float *restrict dy, const float *restrict x, size_t n, float mean,
                  float inv, double *sdy, double *sdyh) {
    double l[LANES] = {0}, m[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float h = (x[i + j] - mean) * inv;
            l[j] += (double)dy[i + j];
            m[j] += (double)dy[i + j] * (double)h;
        }
    for (; i < n; i++) {
        float h = (x[i] - mean) * inv;
        l[i % LANES] += (double)dy[i];
        m[i % LANES] += (double)dy[i] * (double)h;
    }
    *sdy = lanes_total(l);
    *sdyh = lanes_total(m);
}

HET_CLONES
void het_vmoments(const float *restrict x, size_t n, double *mean, double *m2) {
    const double mu = n ? lanes_sum(x, n) / (double)n : 0.0;
    *mean = mu;
    *m2 = lanes_sqdev(x, n, mu); /* the plane is in L1 now */
}

HET_CLONES
void het_vaffine(float *restrict y, const float *restrict x, size_t n, float mean, float inv,
                 float g, float b, int relu) {
    if (relu) {
        for (size_t i = 0; i < n; i++) {
            float o = g * ((x[i] - mean) * inv) + b;
            y[i] = o > 0.0f ? o : 0.0f;
        }
        return;
    }
    for (size_t i = 0; i < n; i++) y[i] = g * ((x[i] - mean) * inv) + b;
}

HET_CLONES
void het_vbn_dx(float *dx, const float *dy, const float *restrict x, size_t n, float k,
                float mdy, float mdyh, float mean, float inv) {
    for (size_t i = 0; i < n; i++) {
        float h = (x[i] - mean) * inv;
        dx[i] = k * (dy[i] - mdy - h * mdyh);
    }
}

HET_CLONES
void het_vrelu(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

HET_CLONES
void het_vrelu_mask(float *g, const float *restrict y, const float *d, size_t n) {
    for (size_t i = 0; i < n; i++) g[i] = y[i] > 0.0f ? d[i] : 0.0f;
}

HET_CLONES
void het_vadd_relu(float *y, const float *restrict x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = y[i] + x[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

/* ---- the 16-channel twins (channel-blocked layout): lane j is channel j of the block ----
 * Written with GCC's vector types (core/vectors.h): plain loops over 16 lanes were compiled to
 * scalar code (ResNet-20's step 10 % slower than with the plane loops). */
HET_CLONES
void het_vmoments16(const float *restrict x, size_t n, double *restrict mean,
                    double *restrict m2) {
    het_v8d s0 = {0}, s1 = {0}, q0 = {0}, q1 = {0};
    for (size_t p = 0; p < n; p++) {
        s0 += HET_WIDE(HET_LD8(x + p * HET_BLK));
        s1 += HET_WIDE(HET_LD8(x + p * HET_BLK + 8));
    }
    const double dn = n ? (double)n : 1.0;
    const het_v8d mu0 = s0 / dn, mu1 = s1 / dn;
    for (size_t p = 0; p < n; p++) { /* in cache now: a sample's block is HW x 64 bytes */
        het_v8d d0 = HET_WIDE(HET_LD8(x + p * HET_BLK)) - mu0, d1 = HET_WIDE(HET_LD8(x + p * HET_BLK + 8)) - mu1;
        q0 += d0 * d0;
        q1 += d1 * d1;
    }
    HET_ST8D(mean, mu0), HET_ST8D(mean + 8, mu1), HET_ST8D(m2, q0), HET_ST8D(m2 + 8, q1);
}

HET_CLONES
void het_vaffine16(float *restrict y, const float *restrict x, size_t n, const float *mean,
                   const float *inv, const float *g, const float *b, int relu) {
    const het_v16f mu = HET_LD16(mean), is = HET_LD16(inv), gg = HET_LD16(g), bb = HET_LD16(b), z = {0};
    for (size_t p = 0; p < n; p++) {
        het_v16f o = gg * ((HET_LD16(x + p * HET_BLK) - mu) * is) + bb;
        if (relu) o = (het_v16f)((het_v16i)o & (o > z)); /* o > 0 ? o : 0, NaN to 0 as well */
        HET_ST16(y + p * HET_BLK, o);
    }
}

HET_CLONES
void het_vbn_sums16(const float *restrict dy, const float *restrict x, size_t n,
                    const float *mean, const float *inv, double *sdy, double *sdyh) {
    const het_v8f mu0 = HET_LD8(mean), mu1 = HET_LD8(mean + 8), is0 = HET_LD8(inv), is1 = HET_LD8(inv + 8);
    het_v8d l0 = {0}, l1 = {0}, m0 = {0}, m1 = {0};
    for (size_t p = 0; p < n; p++) {
        const float *xp = x + p * HET_BLK, *gp = dy + p * HET_BLK;
        het_v8f h0 = (HET_LD8(xp) - mu0) * is0, h1 = (HET_LD8(xp + 8) - mu1) * is1;
        het_v8d g0 = HET_WIDE(HET_LD8(gp)), g1 = HET_WIDE(HET_LD8(gp + 8));
        l0 += g0;
        l1 += g1;
        m0 += g0 * HET_WIDE(h0);
        m1 += g1 * HET_WIDE(h1);
    }
    HET_ST8D(sdy, l0), HET_ST8D(sdy + 8, l1), HET_ST8D(sdyh, m0), HET_ST8D(sdyh + 8, m1);
}

HET_CLONES
void het_vbn_dx16(float *dx, const float *dy, const float *restrict x, size_t n, const float *k,
                  const float *mdy, const float *mdyh, const float *mean, const float *inv) {
    const het_v16f kk = HET_LD16(k), a = HET_LD16(mdy), b = HET_LD16(mdyh), mu = HET_LD16(mean), is = HET_LD16(inv);
    for (size_t p = 0; p < n; p++) {
        het_v16f h = (HET_LD16(x + p * HET_BLK) - mu) * is;
        HET_ST16(dx + p * HET_BLK, kk * (HET_LD16(dy + p * HET_BLK) - a - h * b));
    }
}

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

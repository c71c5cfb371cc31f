/* Batch-normalization math shared by nn/batchnorm.c and nn/resblock.c (internal header).
 *
 * Layout: x is N x C x HW (NCHW with the spatial dims flattened; a flat feature vector is
 * HW = 1). Statistics are per channel over the M = N * HW values of that channel, accumulated
 * in double in a fixed order (n, then hw) so results are deterministic.
 *
 * Forward stores x_hat (N x C x HW) and inv_std (C) for backward; in eval mode they are the
 * values computed from the running statistics, so backward works in both modes. */
#ifndef HET_NN_BN_MATH_H
#define HET_NN_BN_MATH_H

#include <math.h>
#include <stddef.h>

/* Train mode: y = gamma * (x - mean) / sqrt(var + eps) + beta with the batch mean and the
 * biased batch variance; running = (1 - momentum) * running + momentum * batch, the running
 * variance using the unbiased batch variance (PyTorch). With M = 1 the unbiased variance is
 * undefined (PyTorch refuses); the biased one (0) is used instead. y may alias x. */
static inline void bn_forward_train(float *y, float *x_hat, float *inv_std, const float *x,
                                    const float *gamma, const float *beta, float *run_mean,
                                    float *run_var, int N, int C, int HW, float momentum,
                                    float eps) {
    const size_t chw = (size_t)C * (size_t)HW, hw = (size_t)HW;
    const double M = (double)N * (double)HW;
    for (int c = 0; c < C; c++) {
        double sum = 0;
        for (int n = 0; n < N; n++) {
            const float *xp = x + (size_t)n * chw + (size_t)c * hw;
            for (size_t i = 0; i < hw; i++) sum += xp[i];
        }
        const double mean = sum / M;
        double ss = 0;
        for (int n = 0; n < N; n++) {
            const float *xp = x + (size_t)n * chw + (size_t)c * hw;
            for (size_t i = 0; i < hw; i++) {
                double d = (double)xp[i] - mean;
                ss += d * d;
            }
        }
        const double var = ss / M;
        const double var_unbiased = M > 1 ? ss / (M - 1) : var;
        const double is = 1.0 / sqrt(var + (double)eps);
        const float fmean = (float)mean, fis = (float)is, g = gamma[c], b = beta[c];
        inv_std[c] = fis;
        for (int n = 0; n < N; n++) {
            const size_t off = (size_t)n * chw + (size_t)c * hw;
            const float *xp = x + off;
            float *hp = x_hat + off, *yp = y + off;
            for (size_t i = 0; i < hw; i++) {
                float h = (xp[i] - fmean) * fis;
                hp[i] = h;
                yp[i] = g * h + b;
            }
        }
        run_mean[c] = (1.0f - momentum) * run_mean[c] + momentum * fmean;
        run_var[c] = (1.0f - momentum) * run_var[c] + momentum * (float)var_unbiased;
    }
}

/* Eval mode: the same affine map with the running statistics; state is not touched. */
static inline void bn_forward_eval(float *y, float *x_hat, float *inv_std, const float *x,
                                   const float *gamma, const float *beta, const float *run_mean,
                                   const float *run_var, int N, int C, int HW, float eps) {
    const size_t chw = (size_t)C * (size_t)HW, hw = (size_t)HW;
    for (int c = 0; c < C; c++) {
        const float fis = (float)(1.0 / sqrt((double)run_var[c] + (double)eps));
        const float m = run_mean[c], g = gamma[c], b = beta[c];
        inv_std[c] = fis;
        for (int n = 0; n < N; n++) {
            const size_t off = (size_t)n * chw + (size_t)c * hw;
            const float *xp = x + off;
            float *hp = x_hat + off, *yp = y + off;
            for (size_t i = 0; i < hw; i++) {
                float h = (xp[i] - m) * fis;
                hp[i] = h;
                yp[i] = g * h + b;
            }
        }
    }
}

/* Backward: dgamma += sum(dy * x_hat), dbeta += sum(dy) per channel; when dx != NULL it is
 * WRITTEN: train mode (batch statistics)
 *     dx = gamma * inv_std / M * (M * dy - sum(dy) - x_hat * sum(dy * x_hat)),
 * eval mode (constant statistics) dx = gamma * inv_std * dy. dx may alias dy (in place). */
static inline void bn_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                               const float *x_hat, const float *inv_std, const float *gamma,
                               int N, int C, int HW, int train) {
    const size_t chw = (size_t)C * (size_t)HW, hw = (size_t)HW;
    const double M = (double)N * (double)HW;
    for (int c = 0; c < C; c++) {
        double sdy = 0, sdyh = 0;
        for (int n = 0; n < N; n++) {
            const size_t off = (size_t)n * chw + (size_t)c * hw;
            const float *dp = dy + off, *hp = x_hat + off;
            for (size_t i = 0; i < hw; i++) {
                sdy += dp[i];
                sdyh += (double)dp[i] * hp[i];
            }
        }
        dgamma[c] += (float)sdyh;
        dbeta[c] += (float)sdy;
        if (!dx) continue;
        const float k = gamma[c] * inv_std[c];
        const float mdy = train ? (float)(sdy / M) : 0.0f;
        const float mdyh = train ? (float)(sdyh / M) : 0.0f;
        for (int n = 0; n < N; n++) {
            const size_t off = (size_t)n * chw + (size_t)c * hw;
            const float *dp = dy + off, *hp = x_hat + off;
            float *xp = dx + off;
            for (size_t i = 0; i < hw; i++) xp[i] = k * (dp[i] - mdy - hp[i] * mdyh);
        }
    }
}

#endif

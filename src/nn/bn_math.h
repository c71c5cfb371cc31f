/* Batch-normalization math shared by nn/batchnorm.c and nn/resblock.c (internal header).
 *
 * Layout: x is N x C x HW (NCHW with the spatial dims flattened; a flat feature vector is
 * HW = 1). Statistics are per channel over the M = N * HW values of that channel, accumulated
 * in double in a fixed order (samples in order; within a plane the 8 lanes of tensor/vec.c) so
 * results are deterministic and the plane loops vectorize.
 *
 * Several workers (team != NULL, nn/team.h): each holds N of the batch's samples. In forward
 * each computes its samples' count, mean and M2 (sum of squared deviations from that mean) per
 * channel, two passes in double as one worker does; after the meeting every worker combines
 * all parts in worker order with Chan et al.'s pairwise update ("Updating formulae and a
 * pairwise algorithm for computing sample variances", 1979):
 *     n = na + nb, d = mean_b - mean_a, mean = mean_a + d * nb / n,
 *     M2 = M2_a + M2_b + d^2 * na * nb / n,
 * which unlike sum and sum of squares does not cancel when the mean is large against the
 * spread. Every worker normalizes its samples with the whole batch's statistics; worker 0
 * alone updates the running statistics. Backward exchanges the per-channel sums of dy and
 * dy * x_hat (plain sums in double, added in worker order). Part layout: [count, C means or
 * sums of dy, C M2s or sums of dy * x_hat]: BN_TEAM_DOUBLES(C).
 *
 * Forward stores the mean (C) and inv_std (C) it normalized with; backward recomputes
 * x_hat = (x - mean) * inv_std from forward's input x, which the caller keeps (tensor/vec.c:
 * the same float operations, so the same values as a stored x_hat, with one stream of writes
 * less in forward). In eval mode they are the running statistics, so backward works in both
 * modes. */
#ifndef HET_NN_BN_MATH_H
#define HET_NN_BN_MATH_H

#include <math.h>
#include <stddef.h>

#include "hetrain/tensor.h"
#include "nn/team.h"

#define BN_TEAM_DOUBLES(C) (2 * (size_t)(C) + 1)

/* Adds a part of nb values with mean mb and M2 qb to the running (*n, *mu, *q), Chan et al.'s
 * update (see the top); an empty part changes nothing, the first one is taken as it is. */
static inline void bn_chan_merge(double *n, double *mu, double *q, double nb, double mb,
                                 double qb) {
    if (nb == 0) return;
    if (*n == 0) {
        *n = nb, *mu = mb, *q = qb;
        return;
    }
    const double nn = *n + nb, d = mb - *mu;
    *mu += d * (nb / nn);
    *q += qb + d * d * (*n * nb / nn);
    *n = nn;
}

/* Mean and M2 of channel c of x (N >= 1 samples), in double: each plane's in two passes over
 * it while it is in L1 (het_vmoments), the planes combined in order (Chan et al., below), so
 * the channel is read from memory once. */
static inline void bn_moments(const float *x, int N, int C, int HW, int c, double *mean,
                              double *m2) {
    const size_t chw = (size_t)C * (size_t)HW, hw = (size_t)HW;
    double n = 0, mu = 0, q = 0;
    for (int s = 0; s < N; s++) {
        double mb, qb;
        het_vmoments(x + (size_t)s * chw + (size_t)c * hw, hw, &mb, &qb);
        bn_chan_merge(&n, &mu, &q, (double)hw, mb, qb);
    }
    *mean = mu;
    *m2 = q;
}

/* Channel c's whole-batch count M, mean and M2 from the parts of `workers` workers, combined
 * in worker order (Chan et al.). */
static inline void bn_combine_moments(const double *all, size_t stride, int workers, int C,
                                      int c, double *M, double *mean, double *m2) {
    double n = 0, mu = 0, q = 0;
    for (int w = 0; w < workers; w++) {
        const double *p = all + (size_t)w * stride;
        bn_chan_merge(&n, &mu, &q, p[0], p[1 + c], p[1 + C + c]);
    }
    *M = n, *mean = mu, *m2 = q;
}

/* Channel c of N samples: y = g * (x - mean) * inv_std + b, then max(y, 0) when relu. */
static inline void bn_affine_channel(float *y, const float *x, float g, float b, float mean,
                                     float inv_std, int N, int C, int HW, int c, int relu) {
    const size_t chw = (size_t)C * (size_t)HW, hw = (size_t)HW;
    for (int n = 0; n < N; n++) {
        const size_t off = (size_t)n * chw + (size_t)c * hw;
        het_vaffine(y + off, x + off, hw, mean, inv_std, g, b, relu);
    }
}

/* Normalizes channel c of this worker's N samples with the batch's mean and M2 over M values:
 * y = gamma * (x - mean) / sqrt(var + eps) + beta, var = M2 / M (biased). When run_mean is
 * not NULL, running = (1 - momentum) * running + momentum * batch, the running variance using
 * the unbiased M2 / (M - 1) (PyTorch); with M = 1 that is undefined (PyTorch refuses) and the
 * biased one (0) is used instead. With relu, y = max(y, 0) in the same pass. Stores the mean
 * and inv_std of channel c for backward. */
static inline void bn_normalize(float *y, float *mean_out, float *inv_std, const float *x,
                                const float *gamma, const float *beta, float *run_mean,
                                float *run_var, int N, int C, int HW, int c, double M,
                                double mean, double m2, float momentum, float eps, int relu) {
    const double var = m2 / M;
    const double var_unbiased = M > 1 ? m2 / (M - 1) : var;
    const double is = 1.0 / sqrt(var + (double)eps);
    const float fmean = (float)mean, fis = (float)is;
    mean_out[c] = fmean;
    inv_std[c] = fis;
    bn_affine_channel(y, x, gamma[c], beta[c], fmean, fis, N, C, HW, c, relu);
    if (!run_mean) return;
    run_mean[c] = (1.0f - momentum) * run_mean[c] + momentum * fmean;
    run_var[c] = (1.0f - momentum) * run_var[c] + momentum * (float)var_unbiased;
}

/* Train mode: normalizes with the statistics of the batch, i.e. of this worker's N >= 1
 * samples (team NULL) or of all the team's (worker widx; see the top), and updates the running
 * statistics (worker 0 only). relu: y = max(y, 0) in the same pass. y must not alias x: backward
 * reads x, with the mean and inv_std stored here. */
static inline void bn_forward_train(float *y, float *mean_out, float *inv_std, const float *x,
                                    const float *gamma, const float *beta, float *run_mean,
                                    float *run_var, int N, int C, int HW, float momentum,
                                    float eps, het_team *team, int widx, int relu) {
    if (!team) {
        const double M = (double)N * (double)HW;
        for (int c = 0; c < C; c++) {
            double mean, m2;
            bn_moments(x, N, C, HW, c, &mean, &m2);
            bn_normalize(y, mean_out, inv_std, x, gamma, beta, run_mean, run_var, N, C, HW, c, M,
                         mean, m2, momentum, eps, relu);
        }
        return;
    }
    double *part = het_team_part(team, widx);
    part[0] = (double)N * (double)HW;
    for (int c = 0; c < C; c++) bn_moments(x, N, C, HW, c, &part[1 + c], &part[1 + C + c]);
    size_t stride;
    const double *all = het_team_exchange(team, widx, &stride);
    const int workers = het_team_size(team);
    for (int c = 0; c < C; c++) {
        double M, mean, m2;
        bn_combine_moments(all, stride, workers, C, c, &M, &mean, &m2);
        bn_normalize(y, mean_out, inv_std, x, gamma, beta, widx == 0 ? run_mean : NULL,
                     widx == 0 ? run_var : NULL, N, C, HW, c, M, mean, m2, momentum, eps, relu);
    }
}

/* Eval mode: the same affine map with the running statistics (and relu); state is not
 * touched. */
static inline void bn_forward_eval(float *y, float *mean_out, float *inv_std, const float *x,
                                   const float *gamma, const float *beta, const float *run_mean,
                                   const float *run_var, int N, int C, int HW, float eps,
                                   int relu) {
    for (int c = 0; c < C; c++) {
        const float fis = (float)(1.0 / sqrt((double)run_var[c] + (double)eps));
        mean_out[c] = run_mean[c];
        inv_std[c] = fis;
        bn_affine_channel(y, x, gamma[c], beta[c], run_mean[c], fis, N, C, HW, c, relu);
    }
}

/* Channel c's sums of dy and dy * x_hat over this worker's N samples, in double (x_hat from x,
 * mean and inv_std as forward computed it). */
static inline void bn_grad_sums(const float *dy, const float *x, const float *mean,
                                const float *inv_std, int N, int C, int HW, int c, double *sdy,
                                double *sdyh) {
    const size_t chw = (size_t)C * (size_t)HW, hw = (size_t)HW;
    double s = 0, sh = 0;
    for (int n = 0; n < N; n++) {
        const size_t off = (size_t)n * chw + (size_t)c * hw;
        double a, b;
        het_vbn_sums(dy + off, x + off, hw, mean[c], inv_std[c], &a, &b);
        s += a, sh += b;
    }
    *sdy = s, *sdyh = sh;
}

/* Channel c of dx from the batch's sums over M values (see bn_backward). */
static inline void bn_dx(float *dx, const float *dy, const float *x, const float *mean,
                         const float *inv_std, const float *gamma, int N, int C, int HW, int c,
                         double M, double sdy, double sdyh, int train) {
    const size_t chw = (size_t)C * (size_t)HW, hw = (size_t)HW;
    const float k = gamma[c] * inv_std[c];
    const float mdy = train ? (float)(sdy / M) : 0.0f;
    const float mdyh = train ? (float)(sdyh / M) : 0.0f;
    for (int n = 0; n < N; n++) {
        const size_t off = (size_t)n * chw + (size_t)c * hw;
        het_vbn_dx(dx + off, dy + off, x + off, hw, k, mdy, mdyh, mean[c], inv_std[c]);
    }
}

/* Backward: dgamma += sum(dy * x_hat), dbeta += sum(dy) per channel over this worker's samples;
 * when dx != NULL it is WRITTEN: train mode (batch statistics, the sums over the whole batch:
 * the team's when team != NULL)
 *     dx = gamma * inv_std / M * (M * dy - sum(dy) - x_hat * sum(dy * x_hat)),
 * eval mode (constant statistics; team must be NULL) dx = gamma * inv_std * dy, where
 * x_hat = (x - mean) * inv_std from forward's input x and its stored mean and inv_std. dx may
 * alias dy (in place), not x. */
static inline void bn_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                               const float *x, const float *mean, const float *inv_std,
                               const float *gamma, int N, int C, int HW, int train,
                               het_team *team, int widx) {
    if (!team) {
        const double M = (double)N * (double)HW;
        for (int c = 0; c < C; c++) {
            double sdy, sdyh;
            bn_grad_sums(dy, x, mean, inv_std, N, C, HW, c, &sdy, &sdyh);
            dgamma[c] += (float)sdyh;
            dbeta[c] += (float)sdy;
            if (dx) bn_dx(dx, dy, x, mean, inv_std, gamma, N, C, HW, c, M, sdy, sdyh, train);
        }
        return;
    }
    double *part = het_team_part(team, widx);
    part[0] = (double)N * (double)HW;
    for (int c = 0; c < C; c++) {
        bn_grad_sums(dy, x, mean, inv_std, N, C, HW, c, &part[1 + c], &part[1 + C + c]);
        dgamma[c] += (float)part[1 + C + c];
        dbeta[c] += (float)part[1 + c];
    }
    if (!dx) return; /* the same layer on every worker: all of them skip the meeting */
    size_t stride;
    const double *all = het_team_exchange(team, widx, &stride);
    const int workers = het_team_size(team);
    for (int c = 0; c < C; c++) {
        double M = 0, sdy = 0, sdyh = 0;
        for (int w = 0; w < workers; w++) {
            const double *p = all + (size_t)w * stride;
            M += p[0], sdy += p[1 + c], sdyh += p[1 + C + c];
        }
        bn_dx(dx, dy, x, mean, inv_std, gamma, N, C, HW, c, M, sdy, sdyh, train);
    }
}

#endif

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
 * modes.
 *
 * Both activation layouts (nn.h): plain NCHW, where channel c of a sample is one plane, and
 * channel-blocked nChw16c, where 16 channels share a block of HW x 16 floats. Either way a
 * sample's channels come in groups of gs (1 or 16) channels that are contiguous: group g of
 * sample s starts at s * C * HW + g * gs * HW. The loops go over groups, with the plane kernels
 * (het_vmoments ...) or their 16-channel twins (het_vmoments16 ...); per channel the results are
 * the same statistics, summed in another order. */
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

/* The shape of a call: N samples of C channels of HW positions, in groups of gs channels. */
typedef struct bn_geom {
    int N, C, HW, gs;
} bn_geom;

static inline bn_geom bn_geom_of(int N, int C, int HW, int blk) {
    return (bn_geom){N, C, HW, blk ? HET_BLK : 1};
}

/* Offset of group g of sample s. */
static inline size_t bn_goff(bn_geom d, int s, int g) {
    return (size_t)s * (size_t)d.C * (size_t)d.HW + (size_t)g * (size_t)d.gs * (size_t)d.HW;
}

/* Mean and M2 of the gs channels of group g of x (N >= 1 samples), in double: each sample's
 * values in two passes while they are in cache (het_vmoments / 16), the samples combined in
 * order (Chan et al., above), so the group is read from memory once. */
static inline void bn_moments(const float *x, bn_geom d, int g, double *mean, double *m2) {
    double n[HET_BLK] = {0}, mu[HET_BLK] = {0}, q[HET_BLK] = {0};
    for (int s = 0; s < d.N; s++) {
        double mb[HET_BLK], qb[HET_BLK];
        if (d.gs == 1)
            het_vmoments(x + bn_goff(d, s, g), (size_t)d.HW, mb, qb);
        else
            het_vmoments16(x + bn_goff(d, s, g), (size_t)d.HW, mb, qb);
        for (int j = 0; j < d.gs; j++) bn_chan_merge(&n[j], &mu[j], &q[j], (double)d.HW, mb[j], qb[j]);
    }
    for (int j = 0; j < d.gs; j++) mean[j] = mu[j], m2[j] = q[j];
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

/* Group g of N samples: y = gamma * (x - mean) * inv_std + beta per channel (mean, inv_std,
 * gamma, beta indexed by channel), then max(y, 0) when relu. */
static inline void bn_affine_group(float *y, const float *x, const float *gamma,
                                   const float *beta, const float *mean, const float *inv_std,
                                   bn_geom d, int g, int relu) {
    const int c = g * d.gs;
    for (int s = 0; s < d.N; s++) {
        const size_t off = bn_goff(d, s, g);
        if (d.gs == 1)
            het_vaffine(y + off, x + off, (size_t)d.HW, mean[c], inv_std[c], gamma[c], beta[c],
                        relu);
        else
            het_vaffine16(y + off, x + off, (size_t)d.HW, mean + c, inv_std + c, gamma + c,
                          beta + c, relu);
    }
}

/* Channel c's statistics from the batch's mean and M2 over M values: var = M2 / M (biased),
 * inv_std = 1 / sqrt(var + eps), stored for backward. When run_mean is not NULL,
 * running = (1 - momentum) * running + momentum * batch, the running variance using the
 * unbiased M2 / (M - 1) (PyTorch); with M = 1 that is undefined (PyTorch refuses) and the
 * biased one (0) is used instead. */
static inline void bn_channel_stats(float *mean_out, float *inv_std, float *run_mean,
                                    float *run_var, int c, double M, double mean, double m2,
                                    float momentum, float eps) {
    const double var = m2 / M;
    const double var_unbiased = M > 1 ? m2 / (M - 1) : var;
    const double is = 1.0 / sqrt(var + (double)eps);
    const float fmean = (float)mean, fis = (float)is;
    mean_out[c] = fmean;
    inv_std[c] = fis;
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
                                    float *run_var, bn_geom d, float momentum, float eps,
                                    het_team *team, int widx, int relu) {
    const int groups = d.C / d.gs;
    if (!team) {
        const double M = (double)d.N * (double)d.HW;
        for (int g = 0; g < groups; g++) {
            double mean[HET_BLK], m2[HET_BLK];
            bn_moments(x, d, g, mean, m2);
            for (int j = 0; j < d.gs; j++)
                bn_channel_stats(mean_out, inv_std, run_mean, run_var, g * d.gs + j, M, mean[j],
                                 m2[j], momentum, eps);
            bn_affine_group(y, x, gamma, beta, mean_out, inv_std, d, g, relu);
        }
        return;
    }
    const int C = d.C;
    double *part = het_team_part(team, widx);
    part[0] = (double)d.N * (double)d.HW;
    for (int g = 0; g < groups; g++) {
        double mean[HET_BLK], m2[HET_BLK];
        bn_moments(x, d, g, mean, m2);
        for (int j = 0; j < d.gs; j++) {
            part[1 + g * d.gs + j] = mean[j];
            part[1 + C + g * d.gs + j] = m2[j];
        }
    }
    size_t stride;
    const double *all = het_team_exchange(team, widx, &stride);
    const int workers = het_team_size(team);
    for (int c = 0; c < C; c++) {
        double M, mean, m2;
        bn_combine_moments(all, stride, workers, C, c, &M, &mean, &m2);
        bn_channel_stats(mean_out, inv_std, widx == 0 ? run_mean : NULL,
                         widx == 0 ? run_var : NULL, c, M, mean, m2, momentum, eps);
    }
    for (int g = 0; g < groups; g++) bn_affine_group(y, x, gamma, beta, mean_out, inv_std, d, g, relu);
}

/* Eval mode: the same affine map with the running statistics (and relu); state is not
 * touched. */
static inline void bn_forward_eval(float *y, float *mean_out, float *inv_std, const float *x,
                                   const float *gamma, const float *beta, const float *run_mean,
                                   const float *run_var, bn_geom d, float eps, int relu) {
    for (int c = 0; c < d.C; c++) {
        mean_out[c] = run_mean[c];
        inv_std[c] = (float)(1.0 / sqrt((double)run_var[c] + (double)eps));
    }
    for (int g = 0; g < d.C / d.gs; g++)
        bn_affine_group(y, x, gamma, beta, mean_out, inv_std, d, g, relu);
}

/* Group g's per-channel sums of dy and dy * x_hat over this worker's N samples, in double
 * (x_hat from x, mean and inv_std as forward computed it). */
static inline void bn_grad_sums(const float *dy, const float *x, const float *mean,
                                const float *inv_std, bn_geom d, int g, double *sdy,
                                double *sdyh) {
    const int c = g * d.gs;
    for (int j = 0; j < d.gs; j++) sdy[j] = sdyh[j] = 0;
    for (int s = 0; s < d.N; s++) {
        const size_t off = bn_goff(d, s, g);
        double a[HET_BLK], b[HET_BLK];
        if (d.gs == 1)
            het_vbn_sums(dy + off, x + off, (size_t)d.HW, mean[c], inv_std[c], a, b);
        else
            het_vbn_sums16(dy + off, x + off, (size_t)d.HW, mean + c, inv_std + c, a, b);
        for (int j = 0; j < d.gs; j++) sdy[j] += a[j], sdyh[j] += b[j];
    }
}

/* Group g of dx from the batch's sums over M values (see bn_backward), sdy[j] and sdyh[j]
 * those of the group's channel j. */
static inline void bn_dx(float *dx, const float *dy, const float *x, const float *mean,
                         const float *inv_std, const float *gamma, bn_geom d, int g, double M,
                         const double *sdy, const double *sdyh, int train) {
    const int c0 = g * d.gs;
    float k[HET_BLK], mdy[HET_BLK], mdyh[HET_BLK];
    for (int j = 0; j < d.gs; j++) {
        const int c = c0 + j;
        k[j] = gamma[c] * inv_std[c];
        mdy[j] = train ? (float)(sdy[j] / M) : 0.0f;
        mdyh[j] = train ? (float)(sdyh[j] / M) : 0.0f;
    }
    for (int s = 0; s < d.N; s++) {
        const size_t off = bn_goff(d, s, g);
        if (d.gs == 1)
            het_vbn_dx(dx + off, dy + off, x + off, (size_t)d.HW, k[0], mdy[0], mdyh[0],
                       mean[c0], inv_std[c0]);
        else
            het_vbn_dx16(dx + off, dy + off, x + off, (size_t)d.HW, k, mdy, mdyh, mean + c0,
                         inv_std + c0);
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
                               const float *gamma, bn_geom d, int train, het_team *team,
                               int widx) {
    const int C = d.C, groups = C / d.gs;
    if (!team) {
        const double M = (double)d.N * (double)d.HW;
        for (int g = 0; g < groups; g++) {
            double sdy[HET_BLK], sdyh[HET_BLK];
            bn_grad_sums(dy, x, mean, inv_std, d, g, sdy, sdyh);
            for (int j = 0; j < d.gs; j++) {
                dgamma[g * d.gs + j] += (float)sdyh[j];
                dbeta[g * d.gs + j] += (float)sdy[j];
            }
            if (dx) bn_dx(dx, dy, x, mean, inv_std, gamma, d, g, M, sdy, sdyh, train);
        }
        return;
    }
    double *part = het_team_part(team, widx);
    part[0] = (double)d.N * (double)d.HW;
    for (int g = 0; g < groups; g++) {
        double *sdy = &part[1 + g * d.gs], *sdyh = &part[1 + C + g * d.gs];
        bn_grad_sums(dy, x, mean, inv_std, d, g, sdy, sdyh);
        for (int j = 0; j < d.gs; j++) {
            dgamma[g * d.gs + j] += (float)sdyh[j];
            dbeta[g * d.gs + j] += (float)sdy[j];
        }
    }
    if (!dx) return; /* the same layer on every worker: all of them skip the meeting */
    size_t stride;
    const double *all = het_team_exchange(team, widx, &stride);
    const int workers = het_team_size(team);
    double M = 0;
    for (int w = 0; w < workers; w++) M += all[(size_t)w * stride];
    for (int g = 0; g < groups; g++) {
        double sdy[HET_BLK], sdyh[HET_BLK];
        for (int j = 0; j < d.gs; j++) {
            const int c = g * d.gs + j;
            sdy[j] = sdyh[j] = 0;
            for (int w = 0; w < workers; w++) {
                const double *p = all + (size_t)w * stride;
                sdy[j] += p[1 + c], sdyh[j] += p[1 + C + c];
            }
        }
        bn_dx(dx, dy, x, mean, inv_std, gamma, d, g, M, sdy, sdyh, train);
    }
}

#endif

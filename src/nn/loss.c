/* Softmax cross-entropy over `classes` logits per sample, numerically stable: with
 * m = max_j z_j and S = sum_j exp(z_j - m) (accumulated in double), p_j = exp(z_j - m) / S and
 * loss = log S - (z_label - m), so no exp ever overflows and logits of +-1000 are fine.
 * A label >= classes contributes a NaN loss (and no one-hot term backward) rather than reading
 * out of bounds. probs may be the logits buffer itself (the logits are read before being
 * overwritten). */
#include <math.h>

#include "hetrain/nn.h"

double het_softmax_ce_forward(const float *logits, const uint8_t *labels, int batch, int classes,
                              float *probs, int *correct) {
    double total = 0.0;
    int ok = 0;
    for (int s = 0; s < batch; s++) {
        const float *z = logits + (size_t)s * (size_t)classes;
        float *p = probs + (size_t)s * (size_t)classes;
        int arg = 0;
        float m = z[0];
        for (int j = 1; j < classes; j++)
            if (z[j] > m) { /* first maximum wins ties */
                m = z[j];
                arg = j;
            }
        int y = labels[s];
        double zy = y < classes ? (double)z[y] : NAN;
        double sum = 0.0;
        for (int j = 0; j < classes; j++) {
            p[j] = expf(z[j] - m);
            sum += (double)p[j];
        }
        float inv = (float)(1.0 / sum);
        for (int j = 0; j < classes; j++) p[j] *= inv;
        total += log(sum) - (zy - (double)m); /* NaN for a bad label */
        ok += arg == y;
    }
    if (correct) *correct = ok;
    return total;
}

void het_softmax_ce_backward(float *dlogits, const float *probs, const uint8_t *labels, int batch,
                             int classes, float scale) {
    for (int s = 0; s < batch; s++) {
        const float *p = probs + (size_t)s * (size_t)classes;
        float *d = dlogits + (size_t)s * (size_t)classes;
        for (int j = 0; j < classes; j++) d[j] = p[j] * scale;
        if (labels[s] < classes) d[labels[s]] -= scale;
    }
}

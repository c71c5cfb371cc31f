/* The pipelines' stage plan (pipe.h: het_pipe_plan): rank 0 times forward + backward of every
 * segment between two places a range may start at (het_model_cut_ok), on a micro-batch of
 * the run's size, the median of 3 after a warm-up, with the model's state restored after;
 * then the K - 1 cuts that minimize the slowest stage's time, by dynamic programming over the
 * segments (or the user's cuts, --stages, checked and costed by the same segments). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "strategy/pipe.h"

/* Rank 0: seconds of forward + backward of layers [a, b) on mb samples (median of 3 after a
 * warm-up); the model's state is restored afterwards. < 0 on failure (message set). */
static double time_segment(het_model *m, int a, int b, int mb, float *state_copy) {
    het_tape *t = NULL;
    if (het_tape_create(&t, m, a, b, mb) != HET_OK) return -1;
    const het_layer *fl = het_model_layer(m, a), *ll = het_model_layer(m, b - 1);
    size_t nin = het_shape_size(fl->in) * (size_t)mb, nout = het_shape_size(ll->out) * (size_t)mb;
    float *x = het_alloc(sizeof(float) * nin), *d = het_alloc(sizeof(float) * nout);
    double r = -1;
    if (x && d) {
        het_rng g;
        het_rng_seed(&g, 1);
        for (size_t i = 0; i < nin; i++) x[i] = het_rng_uniform(&g) - 0.5f;
        for (size_t i = 0; i < nout; i++) d[i] = (het_rng_uniform(&g) - 0.5f) * 1e-3f;
        double s[4];
        for (int rep = 0; rep < 4; rep++) {
            double t0 = het_now();
            het_range_forward(m, t, x, mb, 1, 1, 0);
            het_range_backward(m, t, d, het_model_grads(m), a > 0);
            s[rep] = het_now() - t0;
        }
        r = het_median(s + 1, 3);
        if (state_copy)
            memcpy(het_model_state(m), state_copy, sizeof(float) * het_model_n_state(m));
    } else {
        het_error_set(HET_ENOMEM, "out of memory timing layers [%d, %d)", a, b);
    }
    het_free(x);
    het_free(d);
    het_tape_free(t);
    return r;
}

int het_pipe_plan(het_model *m, int K, int mb, const int *given, const het_costs *costs,
                  int *cut, double *cost) {
    const int n = het_model_n_layers(m);
    int at[256], S = 0; /* the places a range may start, then n */
    for (int c = 0; c < n && S < 255; c++)
        if (het_model_cut_ok(m, c)) at[S++] = c;
    at[S] = n;
    if (S < K)
        return het_error_set(HET_EINVAL, "the model can be cut at %d places only (plain edges "
                             "between layers): at most %d stages, not %d", S, S, K);
    for (int k = 0; given && k < K - 1; k++)
        if (given[k] <= 0 || given[k] >= n || !het_model_cut_ok(m, given[k]))
            return het_error_set(HET_EINVAL, "--stages: the model cannot be cut before layer %d "
                                 "(%d layers; the edge there is channel-blocked or inside a "
                                 "fused ReLU)", given[k], n);
    double seg[256], pre[257];
    float *state = NULL;
    size_t ns = het_model_n_state(m);
    if (ns && !(state = malloc(sizeof(float) * ns)))
        return het_error_set(HET_ENOMEM, "out of memory for the partition");
    if (state) memcpy(state, het_model_state(m), sizeof(float) * ns);
    pre[0] = 0;
    for (int s = 0; s < S; s++) {
        seg[s] = costs ? het_costs_range_s(costs, at[s], at[s + 1], mb)
                       : time_segment(m, at[s], at[s + 1], mb, state);
        if (seg[s] < 0) {
            free(state);
            return HET_ENOMEM;
        }
        pre[s + 1] = pre[s] + seg[s];
    }
    free(state);
    het_model_zero_grads(m);
    /* best[k][s]: the least slowest stage cutting segments [0, s) into k stages */
    static double best[HET_PIPE_MAX_STAGES + 1][257];
    static int from[HET_PIPE_MAX_STAGES + 1][257];
    for (int k = 0; k <= K; k++)
        for (int s = 0; s <= S; s++) best[k][s] = 1e300;
    best[0][0] = 0;
    for (int k = 1; k <= K; k++)
        for (int s = k; s <= S; s++)
            for (int j = k - 1; j < s; j++) {
                double v = best[k - 1][j], w = pre[s] - pre[j];
                if (w > v) v = w;
                if (v < best[k][s]) best[k][s] = v, from[k][s] = j;
            }
    int s = S;
    for (int k = K; k >= 1; k--) {
        int j = from[k][s];
        cut[k] = at[s];
        cost[k - 1] = pre[s] - pre[j];
        s = j;
    }
    cut[0] = 0;
    if (given) { /* the user's cuts, costed by the segments they hold */
        for (int k = 1; k < K; k++) cut[k] = given[k - 1];
        for (int k = 0, s0 = 0; k < K; k++) {
            int s1 = s0;
            while (at[s1] < cut[k + 1]) s1++;
            cost[k] = pre[s1] - pre[s0];
            s0 = s1;
        }
    }
    return HET_OK;
}


int het_pipe_replanned(het_pipe *p, het_strategy_ctx *ctx, const char *name, size_t stages) {
    char cuts[96] = "none";
    int k = 0;
    for (int j = 1; j < p->K && k >= 0 && (size_t)k < sizeof cuts; j++)
        k += snprintf(cuts + k, sizeof cuts - (size_t)k, "%s%d", j > 1 ? "," : "", p->cut[j]);
    het_step_resized(ctx, "%s: re-planned from %zu stages to %d (cuts at layers %s) x %d "
                     "pipeline%s, the weights re-cut from the whole model", name, stages, p->K,
                     cuts, p->R, p->R == 1 ? "" : "s");
    return HET_OK;
}

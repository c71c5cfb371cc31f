/* What the pipeline strategies (gpipe.c, qfb.c) share beyond the step machinery of pipe.c:
 * their option tables, each option declared once (as ps_opts.c does for the parameter
 * servers), the epoch's report, the agreed state, and the vtable entries both point at. The
 * entries read ctx->priv as a het_pipe: each strategy's private struct starts with one. */
#include <stdio.h>

#include "strategy/pipe.h"

/* ---------------------------------------------------------------- options */

static const char *const act_words[] = {"int8", "off", NULL};
static const char *const gradc_words[] = {"2step", "off", NULL};
static const char *const sparse_words[] = {"topk", "threshold", "none", NULL};
static const char *const quant_words[] = {"int8", "off", NULL};
static const char *const onoff_words[] = {"on", "off", NULL};
static const char *const sched_words[] = {"gpipe", "1f1b", NULL};

/* What both pipelines take: declared once */
#define PIPELINES                                                                             \
    {"pipelines", "R", "data-parallel copies of the pipeline (ranks = R x stages; each "      \
     "stage's gradients are summed over its R copies)", HET_SOPT_INT, 1, 1024, 1, NULL, 0}
#define MICRO_BATCHES                                                                         \
    {"micro-batches", "M", "micro-batches per step and pipeline (the pipeline's share of "    \
     "--batch split as evenly as possible)", HET_SOPT_INT, 1, HET_PIPE_MAX_MICRO, 4, NULL, 0}
#define STAGES                                                                                \
    {"stages", "C1,C2,...", "the stages' first layers after the first stage's (K - 1 cuts, "  \
     "ascending); unset: cut where the measured times balance", HET_SOPT_LIST, 1, 100000, 0,  \
     NULL, 0}

const het_strategy_opt het_gpipe_opts[] = {
    PIPELINES, MICRO_BATCHES, STAGES,
    {"pipe-schedule", "gpipe|1f1b", "gpipe: all forwards, then all backwards; 1f1b: one "
     "forward one backward (PipeDream-Flush, Megatron)", HET_SOPT_WORD, 0, 0, 0, sched_words, 0},
    {NULL, NULL, NULL, HET_SOPT_INT, 0, 0, 0, NULL, 0},
};

const het_strategy_opt het_qfb_opts[] = {
    PIPELINES, MICRO_BATCHES, STAGES,
    {"act-codec", "int8|off", "activations sent forward as per-tensor affine int8, or fp32",
     HET_SOPT_WORD, 0, 0, 0, act_words, 0},
    {"grad-codec", "2step|off", "gradients sent backward through 2-Step GC (sparsify, then "
     "quantize, with error feedback), or fp32", HET_SOPT_WORD, 0, 0, 0, gradc_words, 0},
    {"grad-sparsify", "topk|threshold|none", "2-Step GC's first step: the --grad-topk largest "
     "values, those of |v| >= --grad-threshold, or all (default none: top-k 0.1 cost lenet5 "
     "0.91 point [0.19, 1.63] over 3 seeds for half the bytes, README)", HET_SOPT_WORD, 0, 0,
     2, sparse_words, 0},
    {"grad-topk", "X", "the fraction of a message's values top-k keeps (below 0.2 with int8 "
     "values: above, the indices cost more than sending every value)", HET_SOPT_FLOAT, 1e-6,
     1, 0.1, NULL, 0},
    {"grad-threshold", "T", "the magnitude the threshold keeps from", HET_SOPT_FLOAT, 0, 1e30,
     1e-4, NULL, 0},
    {"grad-quant", "int8|off", "2-Step GC's second step: kept values as int8, or fp32",
     HET_SOPT_WORD, 0, 0, 0, quant_words, 0},
    {"grad-feedback", "on|off", "error feedback: what 2-Step GC did not send is added to the "
     "next micro-batch's gradient", HET_SOPT_WORD, 0, 0, 0, onoff_words, 0},
    {NULL, NULL, NULL, HET_SOPT_INT, 0, 0, 0, NULL, 0},
};

/* ---------------------------------------------------------------- report */

void het_pipe_report(het_pipe *p, het_strategy_ctx *ctx, const char *name, char *line, size_t nl,
                     char *json, size_t nj) {
    (void)ctx;
    const double *f = p->stage_fig;
    size_t a = (size_t)snprintf(line, nl, " | %s stages", name);
    size_t b = (size_t)snprintf(json, nj, "\"%s\":{\"stages\":%d,\"pipelines\":%d,"
                                "\"micro_batches\":%d,\"cuts\":[", name, p->K, p->R, p->M);
    for (int k = 0; k <= p->K && b < nj; k++)
        b += (size_t)snprintf(json + b, nj - b, "%s%d", k ? "," : "", p->cut[k]);
    for (int k = 0; k < p->K && a < nl; k++)
        a += (size_t)snprintf(line + a, nl - a, "%s%d-%d", k ? "/" : " ", p->cut[k],
                              p->cut[k + 1] - 1);
    /* the bubble: the part of the epoch in which no thread of the stage computed */
    if (a < nl) a += (size_t)snprintf(line + a, nl - a, " bubble");
    if (b < nj) b += (size_t)snprintf(json + b, nj - b, "],\"bubble\":[");
    for (int k = 0; k < p->K; k++) {
        const double *g = f + HET_PIPE_FIGS * k;
        const double bub = g[6] > 0 ? 1 - g[5] / g[6] : 0;
        if (a < nl) a += (size_t)snprintf(line + a, nl - a, "%s%.0f%%", k ? "/" : " ", 100 * bub);
        if (b < nj) b += (size_t)snprintf(json + b, nj - b, "%s%.4f", k ? "," : "", bub);
    }
    /* the lanes' overlap: the part of the stage's work done while its other thread computed */
    if (b < nj) b += (size_t)snprintf(json + b, nj - b, "],\"overlap\":[");
    for (int k = 0; k < p->K && b < nj; k++) {
        const double *g = f + HET_PIPE_FIGS * k;
        b += (size_t)snprintf(json + b, nj - b, "%s%.4f", k ? "," : "",
                              g[7] > 0 ? 1 - g[5] / g[7] : 0);
    }
    static const char *const fig[5] = {"stash_bytes", "bytes_fwd", "bytes_bwd", "bytes_fwd_fp32",
                                       "bytes_bwd_fp32"};
    static const char *const txt[3] = {"stash MB", "MB fwd", "MB bwd"};
    for (int j = 0; j < 5; j++) {
        if (j < 3 && a < nl) a += (size_t)snprintf(line + a, nl - a, " %s", txt[j]);
        if (b < nj) b += (size_t)snprintf(json + b, nj - b, "],\"%s\":[", fig[j]);
        for (int k = 0; k < p->K; k++) {
            const double v = f[HET_PIPE_FIGS * k + j];
            if (j < 3 && a < nl)
                a += (size_t)snprintf(line + a, nl - a, "%s%.2f", k ? "/" : " ", v / 1e6);
            if (b < nj) b += (size_t)snprintf(json + b, nj - b, "%s%.0f", k ? "," : "", v);
        }
    }
    if (b < nj) snprintf(json + b, nj - b, "]}");
}

het_agreed_value het_pipe_agreed(const het_pipe *p) {
    return het_agreed_bytes("pipeline stage cuts", p->cut, sizeof(int) * (size_t)(p->K + 1),
                            HET_COMM_WORLD);
}

/* ---------------------------------------------------------------- vtable entries */

het_model *het_pipe_model_for_eval(het_strategy_ctx *ctx) { return ctx->model; }

int het_pipe_save_state(het_strategy_ctx *ctx, het_ckpt_writer *w) {
    return het_pipe_save(ctx->priv, w);
}

int het_pipe_load_state(het_strategy_ctx *ctx, het_ckpt_reader *r) {
    return het_pipe_load(ctx->priv, ctx, r, ctx->cfg->strategy);
}

void het_pipe_report_op(het_strategy_ctx *ctx, char *line, size_t nl, char *json, size_t nj) {
    het_pipe_report(ctx->priv, ctx, ctx->cfg->strategy, line, nl, json, nj);
}

int het_pipe_agreed_state(het_strategy_ctx *ctx, het_agreed_value *out, int cap) {
    if (cap < 1) return 0;
    out[0] = het_pipe_agreed(ctx->priv);
    return 1;
}

/* asp: the asynchronous parameter server (placeholder while its server loop is written). */
#include "strategy/strategy.h"

static int asp_init(het_strategy_ctx *ctx) {
    (void)ctx;
    return het_error_set(HET_EINVAL, "strategy asp: not built yet");
}
static int asp_train_epoch(het_strategy_ctx *ctx, int epoch, het_epoch_stats *st) {
    (void)ctx, (void)epoch, (void)st;
    return HET_EINVAL;
}
static het_model *asp_model_for_eval(het_strategy_ctx *ctx) { return ctx->model; }
static int asp_save_state(het_strategy_ctx *ctx, het_ckpt_writer *w) {
    (void)ctx, (void)w;
    return HET_OK;
}
static int asp_load_state(het_strategy_ctx *ctx, het_ckpt_reader *r) {
    (void)ctx, (void)r;
    return HET_OK;
}
static void asp_free(het_strategy_ctx *ctx) { (void)ctx; }

const het_strategy_ops het_strategy_asp = {
    "asp", "asynchronous parameter server (baseline of InHAD)", asp_init, asp_train_epoch,
    asp_model_for_eval, asp_save_state, asp_load_state, asp_free, NULL, 0, NULL, het_asp_opts,
};

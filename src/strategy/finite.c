/* DESIGN: non-finite values in training (--on-nan stop | skip-step; see strategy.h).
 *
 * Cost. By default a step checks its loss, a double that already travels with the gradients
 * (the reducer's figures), and the optimizer tells whether every weight it wrote is finite (a
 * comparison in its own pass, het_optim_step_range): a non-finite gradient makes its weights
 * non-finite, and so does an update that overflows. Both are free. The gradients are then
 * still in their buffer, so the report names the layer. --on-nan skip-step must not apply such
 * an update, so it also scans the summed gradients before it (het_all_finite, one vectorized
 * pass: ~0.1-0.2 % of a lenet5 step, ~3 % of an mlp step on one rank; bench_train's
 * scan_frac). The diagnosis below runs only once something is not finite.
 *
 * Agreement. In allreduce and hgc the check reads the loss and gradients after their
 * all-reduce: NaN and inf survive a sum, so every rank sees the same verdict and skips or stops
 * alike without a call. Naming the rank where it started costs one all-reduce and one
 * broadcast, on the way out. In daso the ranks sum gradients within their node only, so a
 * verdict is local: a rank records its first event and, in skip-step mode, drops its own
 * update (nothing collective depends on it). The ranks stop together where they hold the same
 * weights and figures, at the epoch's end (its last batch is a global average): non-finite
 * weights or epoch loss stop every rank, naming the first event of the lowest rank that recorded
 * one. A per-step stop would need a cross-node call every step, which daso exists to avoid. */
#include <math.h>
#include <string.h>

#include "hetrain/tensor.h"
#include "strategy/strategy.h"
#include "tensor/internal.h"

int het_step_finite(const het_strategy_ctx *ctx, double loss) {
    het_model *m = ctx->model;
    return isfinite(loss) && (ctx->cfg->on_nan != HET_ON_NAN_SKIP_STEP ||
                              het_all_finite(het_model_grads(m), het_model_n_params(m)));
}

/* The layer whose parameters hold flat index i. */
static int layer_of(het_model *m, size_t i) {
    for (int l = 0; l < het_model_n_layers(m); l++) {
        size_t off, n;
        het_model_layer_params(m, l, &off, &n);
        if (n > 0 && i >= off && i < off + n) return l;
    }
    return 0;
}

het_nonfinite het_step_diagnose(const het_strategy_ctx *ctx, double loss, int64_t step) {
    het_model *m = ctx->model;
    const float *p = het_model_params(m), *g = het_model_grads(m);
    size_t n = het_model_n_params(m), i;
    het_nonfinite e = {step, ctx->epoch + 1, HET_NF_GRADIENT, 0, ctx->rank, loss,
                       het_dnnl_fault(NULL, 0) != HET_OK};
    for (i = n; i-- > 0;)
        if (!isfinite(g[i])) {
            e.layer = layer_of(m, i);
            return e;
        }
    e.kind = HET_NF_LOSS;
    if (!isfinite(loss)) return e;
    for (i = 0; i < n && isfinite(p[i]); i++) {}
    if (i < n) e.kind = HET_NF_WEIGHTS, e.layer = layer_of(m, i);
    return e;
}

int het_step_dnnl_cause(char *buf, size_t n) {
    char msg[280];
    if (het_dnnl_fault(msg, sizeof msg) == HET_OK) return 0;
    snprintf(buf, n, "a oneDNN convolution failed first: %s", msg);
    return 1;
}

int het_step_stop(het_strategy_ctx *ctx, het_comm_scope s, const het_nonfinite *mine,
                  const het_nonfinite *fallback) {
    het_nonfinite e = mine ? *mine : *fallback;
    int named = mine != NULL, size = 1;
    if (ctx->comm && s != HET_COMM_NONE) size = het_comm_scope_size(ctx->comm, s);
    if (size > 1) {
        int first = mine ? het_comm_scope_rank(ctx->comm, s) : size;
        int err = het_comm_allreduce_int(ctx->comm, s, &first, 1, HET_OP_MIN);
        if (!err && first < size) err = het_comm_bcast(ctx->comm, s, &e, sizeof e, first);
        if (err) return err; /* comm's message names the call */
        named = first < size;
        if (!named) e = *fallback;
    }
    char who[32] = "", what[160];
    if (named && ctx->size > 1) snprintf(who, sizeof who, "rank %d: ", e.rank);
    const char *lname = het_model_layer(ctx->model, e.layer)->ops->name;
    const char *lv = isnan(e.loss) ? "nan" : "inf";
    if (e.kind == HET_NF_WEIGHTS)
        snprintf(what, sizeof what, "non-finite weights in layer %d (%s)", e.layer, lname);
    else if (e.kind == HET_NF_GRADIENT)
        snprintf(what, sizeof what, "non-finite gradient in layer %d (%s)%s%s", e.layer, lname,
                 isfinite(e.loss) ? "" : ", loss ", isfinite(e.loss) ? "" : lv);
    else
        snprintf(what, sizeof what, "non-finite loss (%s)", lv);
    if (e.dnnl) { /* not divergence: oneDNN's failure made the NaN (tensor.h) */
        char cause[320];
        if (!het_step_dnnl_cause(cause, sizeof cause))
            snprintf(cause, sizeof cause, "a oneDNN convolution failed first: its message is "
                     "printed above by rank %d", e.rank);
        return het_error_set(HET_EINVAL, "%sepoch %d step %lld: %s; %s", who, e.epoch,
                             (long long)e.step, what, cause);
    }
    return het_error_set(HET_EINVAL, "%sepoch %d step %lld: %s; training diverged (try a lower "
                         "--lr%s)", who, e.epoch, (long long)e.step, what,
                         ctx->cfg->on_nan == HET_ON_NAN_SKIP_STEP || e.kind == HET_NF_WEIGHTS
                             ? "" : ", or --on-nan skip-step");
}

int het_step_note(het_strategy_ctx *ctx, double loss, int64_t step) {
    int skip = ctx->cfg->on_nan == HET_ON_NAN_SKIP_STEP;
    if (!skip && ctx->nonfinite.kind == HET_NF_NONE)
        ctx->nonfinite = het_step_diagnose(ctx, loss, step);
    return skip;
}

int het_step_check_params(het_strategy_ctx *ctx) {
    het_model *m = ctx->model;
    if (het_all_finite(het_model_params(m), het_model_n_params(m))) return HET_OK;
    het_nonfinite fallback = het_step_diagnose(ctx, 0.0, ctx->step);
    const het_nonfinite *mine = ctx->nonfinite.kind != HET_NF_NONE ? &ctx->nonfinite : NULL;
    return het_step_stop(ctx, HET_COMM_WORLD, mine, &fallback);
}

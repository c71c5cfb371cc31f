/* Test accuracy: at an epoch's end (het_trainer_evaluate: each rank a shard of the test set,
 * the sums reduced) and inside an epoch (--eval-every): at a pause or a step end of every rank
 * (het_trainer_eval_inside), or on a parameter server alone (eval_here, the records handed
 * round at the drain point by eval_put). Every evaluation inside an epoch is charged to no
 * clock. */
#include "train/internal.h"
#include "train/trainer.h"

static int eval_put(het_strategy_ctx *c, void *user, const het_eval_rec *r);

/* model_for_eval's test loss and accuracy over test samples [lo, hi); with `world`, every rank
 * its own range and the sums reduced (collective), else this rank alone. */
static int eval_range(het_trainer *t, int64_t lo, int64_t hi, int world, double *loss,
                      double *acc) {
    het_model *m = t->strat->model_for_eval(&t->ctx);
    double t0 = het_lane_now(&t->ctx.lane), sum[3];
    het_batch_result r;
    het_stall_where("evaluation", t->epoch, (long long)t->ctx.step);
    int st = het_batch_eval(m, &t->test, lo, hi, t->cfg.batch, t->x, t->y, t->idx, &r);
    if (world) st = het_trainer_agree(t, st);
    if (st) return st;
    sum[0] = r.loss_sum;
    sum[1] = r.correct;
    sum[2] = r.count;
    if (world && (st = het_step_sum_f64(&t->ctx, sum, 3))) return st;
    het_trace_add(t->ctx.trace, "evaluation", t->ctx.lane.tid, t->epoch, t0,
                  het_lane_now(&t->ctx.lane));
    *loss = sum[2] > 0 ? sum[0] / sum[2] : 0.0;
    *acc = sum[2] > 0 ? sum[1] / sum[2] : 0.0;
    return HET_OK;
}

int het_trainer_evaluate(het_trainer *t, double *loss, double *acc) {
    if (t->size == 1) return eval_range(t, 0, t->n_test, 0, loss, acc);
    int64_t lo, len; /* rank r evaluates shard r of the test set; the sums are reduced */
    het_partition_even(t->n_test, t->size, t->rank, &lo, &len);
    return eval_range(t, lo, lo + len, 1, loss, acc);
}


/* --eval-every: the test accuracy at a pause inside the epoch (every rank is at the same step
 * end; nothing in flight, except daso's global syncs, whose evaluation calls it from inside
 * its epoch, het_step_eval_due, and which on the wall clock go on meanwhile), charged to no
 * clock: on the virtual clock each rank's clock goes back
 * to where it was (the evaluation's reduction would have made every rank wait for the latest),
 * on the wall clock its time is left out of the run's times. The record's time is the latest
 * rank's, as an epoch's is after its evaluation. */
int het_trainer_eval_inside(het_trainer *t) {
    het_strategy_ctx *c = &t->ctx;
    het_step_aside aside;
    het_step_aside_begin(c, &aside);
    const double v0 = aside.v, w0 = het_now();
    double when = het_clock_virtual() ? v0 - t->v_start : w0 - t->t_start - t->eval_wall;
    double *all = calloc((size_t)t->size, sizeof *all), loss, acc;
    if (!all) return het_error_set(HET_ENOMEM, "out of memory for the evaluation's times");
    all[t->rank] = when;
    int st = het_step_sum_f64(c, all, (size_t)t->size);
    for (int r = 0; !st && r < t->size; r++) when = all[r] > when ? all[r] : when;
    free(all);
    const het_strategy_ops *o = t->strat;
    if (!st && o->eval_model) st = het_trainer_agree(t, o->eval_model(c, 1));
    if (!st) st = het_trainer_evaluate(t, &loss, &acc);
    if (o->eval_model) { /* every rank its own model back, also after a failed evaluation */
        int st2 = het_trainer_agree(t, o->eval_model(c, 0));
        st = st ? st : st2;
    }
    if (st) return st;
    het_step_aside_end(c, &aside);
    const het_eval_rec r = {c->step, c->epoch_pos, loss, acc, when, het_now() - w0, -1, 0};
    return het_trainer_agree(t, eval_put(c, t, &r));
}

/* A parameter server's evaluation (ops.evals 2): this rank alone, the whole test set, while the
 * workers go on; charged to no clock (on the wall clock the workers wait for the server
 * meanwhile, and every rank leaves its time out once eval_put hands it round). */
static int eval_here(het_strategy_ctx *c, void *user, het_eval_rec *r) {
    het_trainer *t = user;
    het_step_aside aside;
    het_step_aside_begin(c, &aside);
    const double w0 = het_now();
    memset(r, 0, sizeof *r);
    r->when = het_clock_virtual() ? aside.v - t->v_start : w0 - t->t_start - t->eval_wall;
    r->step = c->step, r->samples = c->epoch_pos, r->rank = t->rank;
    int st = eval_range(t, 0, t->n_test, 0, &r->loss, &r->acc);
    het_step_aside_end(c, &aside);
    r->spent = het_now() - w0;
    t->eval_wall += r->spent, t->eval_wall_epoch += r->spent;
    return st;
}

/* An evaluation's record: the log line and the "eval" record (rank 0's metrics); its wall time
 * left out of the run's (by every rank, except the one that made it alone, eval_here, which
 * counted it then; rank -1: every rank took part). */
static int eval_put(het_strategy_ctx *c, void *user, const het_eval_rec *r) {
    het_trainer *t = user;
    (void)c;
    if (r->rank != t->rank) t->eval_wall += r->spent, t->eval_wall_epoch += r->spent;
    het_log(HET_LOG_INFO, "eval epoch %d step %lld (%lld samples): test_loss %.4f test_acc %.4f "
            "at %.3fs%s; evaluation %.2fs, charged to no clock\n", t->epoch + 1,
            (long long)r->step, (long long)r->samples, r->loss, r->acc, r->when,
            het_clock_virtual() ? " (virtual)" : "", r->spent);
    return t->metrics ? het_metrics_eval(t->metrics, t->epoch + 1, r->step, r->samples, r->loss,
                                         r->acc, r->when, r->spent)
                      : HET_OK;
}


static int eval_called(het_strategy_ctx *ctx, void *user) {
    (void)ctx;
    return het_trainer_eval_inside(user);
}

void het_trainer_eval_hooks(het_trainer *t) {
    het_strategy_ctx *c = &t->ctx;
    c->eval_fn = eval_called, c->eval_here = eval_here, c->eval_put = eval_put;
    c->eval_user = t;
}

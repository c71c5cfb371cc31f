/* qfb: the Q-FB pipeline (D. Xiao, C. Yang, W. Wu, "Efficient DNN training based on
 * backpropagation parallelization", Computing 104 (2022) 2431-2451; METHODS.md section 4,
 * reconstructed from the abstract: the paper's text is not public).
 *
 * The partition, the micro-batches, the replicas and the epoch's gathering are gpipe's
 * (pipe.c). What Q-FB adds:
 * - Per stage a forward thread and a backward thread that share the stage's weights and one
 *   gradient accumulator: forward of micro-batch i + 1 runs while backward of micro-batch i
 *   runs. The forward thread takes micro-batches 0, 1, ... as their inputs arrive; the
 *   backward thread takes them in the same order as their output gradients arrive (on the
 *   last stage: as the forward thread computed the loss). Each micro-batch has its own tape,
 *   so the two threads never share activations; the weights change only after all M
 *   backwards (accumulated-gradient update), so every micro-batch of step t sees W(t): with
 *   the codecs off the result is synchronous SGD, bit for bit that of gpipe and one process.
 * - Codecs, each switchable (--act-codec, --grad-codec): activations forward as per-tensor
 *   affine int8 (tensor/codec.c: codes, minimum, scale); input gradients backward as "2-Step
 *   GC": sparsified (top-k of --grad-topk of the values, or |v| >= --grad-threshold), then the
 *   kept values quantized to int8 (--grad-quant), with error feedback: what was not sent is
 *   added to the next micro-batch's gradient before it is encoded (ours: the paper does not
 *   say where the residual goes; it is kept per position of the stage's input). The threads
 *   encode and decode: it is their compute. The default has no first step (int8 alone): the
 *   paper's top-k of 10 % cost lenet5 0.91 point of test accuracy (95 % interval 0.19-1.63,
 *   seeds 1-3, 10 epochs) against codecs off, int8 alone 0.33 (-0.05-0.71), for half of int8's
 *   bytes (bench/bench_qfb_codec.sh, README).
 * - MPI is called by the rank's main thread alone (MPI_THREAD_FUNNELED): it posts the step's
 *   receives, hands arrived messages to the threads, sends what they produced, and sleeps on a
 *   condition variable between polls (100 us while messages are outstanding).
 * - Time. Each thread is a lane (het_lane: its own time and trace row, which only it moves)
 *   with its own het_pace (slowdown.c, the code every rank's compute is paced by, with
 *   pace.lane = that lane): on the wall clock
 *   both are real time, a piece's slowdown is a sleep of the thread that computed it (with the
 *   shared code's correction of oversleeping); on the virtual clock a lane's time starts at the
 *   step's start, waits for its input's arrival (the message's delivery time) and advances by
 *   its pieces' CPU time (the thread's clock) x the rank's slowdown;
 *   its messages leave at its own time (het_comm_isend_at). At the step's end the rank's clock
 *   moves to the later lane. The time split's compute is the time in which either thread
 *   computed (overlaps counted once); the rest of the step is waiting.
 * With a cost table (--compute-cost calibrated) a lane's piece costs the table's range line of
 * the stage's layers (forward or backward) instead of its CPU time; the codecs' encoding and
 * decoding are then not charged (the table has no line for them). */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emul/emul.h"
#include "strategy/pipe.h"

enum { LANE_F = 0, LANE_B = 1 };

typedef struct qfb qfb;

typedef struct lane {
    qfb *q;
    int which;
    pthread_t th;
    het_lane time;     /* the thread's lane: its time (virtual clock), its trace row */
    het_pace pace;     /* its pieces' pace (slowdown.c), on that lane (pace.lane = &time) */
    double s[HET_PIPE_MAX_MICRO], e[HET_PIPE_MAX_MICRO]; /* its pieces this step (chosen clock) */
} lane;

struct qfb {
    het_pipe p;
    het_strategy_ctx *ctx;
    lane lane[2];
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;     /* the threads' wake-up: a new step, an input, quit */
    pthread_cond_t main_cv; /* the main thread's: a thread produced something */
    int gen, quit, err;
    char errmsg[512];
    double factor, t0;     /* the rank's slowdown; the step's start (chosen clock) */
    /* per micro-batch of the step, under mu */
    unsigned char in_ok[HET_PIPE_MAX_MICRO], g_ok[HET_PIPE_MAX_MICRO];
    unsigned char f_done[HET_PIPE_MAX_MICRO], b_done[HET_PIPE_MAX_MICRO];
    het_msg in_msg[HET_PIPE_MAX_MICRO], g_msg[HET_PIPE_MAX_MICRO]; /* as received */
    const void *f_buf[HET_PIPE_MAX_MICRO], *b_buf[HET_PIPE_MAX_MICRO];
    size_t f_bytes[HET_PIPE_MAX_MICRO], b_bytes[HET_PIPE_MAX_MICRO];
};

/* ---------------------------------------------------------------- the lanes */

/* The lane waits for an input that arrives at `at` (chosen clock). */
static void lane_arrive(lane *l, double at) {
    if (het_clock_virtual()) {
        het_lane_advance_to(&l->time, at);
    } else {
        het_sleep_until(at);
    }
}

/* A piece's start on the lane's pace (its clock, its thread's CPU time). */
static double lane_begin(lane *l) {
    het_pace_begin(&l->pace);
    return l->pace.last;
}

/* A piece's end: the shared pacing code stretches it by the rank's slowdown (a sleep with
 * slowdown.c's overshoot correction, or the lane's clock charged a table's range line, else
 * the thread's CPU time); its interval kept for the step's busy time and the trace. */
static void lane_end(lane *l, int i, double start, const char *event) {
    qfb *q = l->q;
    const het_pipe *p = &q->p;
    l->pace.factor = q->factor; /* --slowdown-at may change it between epochs */
    het_pace_range(&l->pace, l->which == LANE_B, p->cut[p->stage], p->cut[p->stage + 1],
                   p->mb_len[i]);
    het_pace_mark(&l->pace);
    l->s[i] = start;
    l->e[i] = l->pace.last;
    het_trace_add(q->ctx->trace, event, l->time.tid, i, start, l->e[i]);
}

/* A thread's failure: the first is kept with its message (messages are per thread). */
static void lane_fail(qfb *q, int rc) {
    if (!q->err) {
        q->err = rc;
        snprintf(q->errmsg, sizeof q->errmsg, "%s", het_error_msg());
    }
    pthread_cond_broadcast(&q->main_cv);
    pthread_cond_broadcast(&q->cv);
}

static int forward_piece(qfb *q, lane *l, int i) {
    double start = lane_begin(l);
    int rc = het_pipe_forward_compute(&q->p, q->ctx, i, &q->in_msg[i], &q->f_buf[i],
                                      &q->f_bytes[i]);
    lane_end(l, i, start, "forward");
    return rc;
}

static int backward_piece(qfb *q, lane *l, int i) {
    double start = lane_begin(l);
    int rc = het_pipe_backward_compute(&q->p, q->ctx, i, &q->g_msg[i], &q->b_buf[i],
                                       &q->b_bytes[i]);
    lane_end(l, i, start, "backward");
    return rc;
}

/* A lane's thread: each step, its pieces in micro-batch order as their inputs are there. */
static void *lane_main(void *arg) {
    lane *l = arg;
    qfb *q = l->q;
    int seen = 0;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->quit && q->gen == seen) pthread_cond_wait(&q->cv, &q->mu);
        if (q->quit) break;
        seen = q->gen;
        const int n = q->p.n_micro, last = q->p.next < 0;
        for (int i = 0; i < n && !q->err && !q->quit; i++) {
            if (l->which == LANE_F) {
                while (!q->in_ok[i] && !q->err && !q->quit) pthread_cond_wait(&q->cv, &q->mu);
            } else {
                while (!(q->f_done[i] && (last || q->g_ok[i])) && !q->err && !q->quit)
                    pthread_cond_wait(&q->cv, &q->mu);
            }
            if (q->err || q->quit) break;
            double at = q->t0;
            if (l->which == LANE_F && q->p.prev >= 0) at = q->in_msg[i].deliver;
            if (l->which == LANE_B) {
                at = q->lane[LANE_F].e[i];
                if (!last && q->g_msg[i].deliver > at) at = q->g_msg[i].deliver;
            }
            pthread_mutex_unlock(&q->mu);
            lane_arrive(l, at);
            int rc = l->which == LANE_F ? forward_piece(q, l, i) : backward_piece(q, l, i);
            pthread_mutex_lock(&q->mu);
            if (rc) {
                lane_fail(q, rc);
                break;
            }
            if (l->which == LANE_F) q->f_done[i] = 1;
            else q->b_done[i] = 1;
            pthread_cond_broadcast(&q->cv);
            pthread_cond_broadcast(&q->main_cv);
        }
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* ---------------------------------------------------------------- the main thread */

/* The busy time of the step: the union of both lanes' pieces. */
static double busy_union(const qfb *q, int n) {
    double s[2 * HET_PIPE_MAX_MICRO], e[2 * HET_PIPE_MAX_MICRO];
    int k = 0;
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < n; i++) s[k] = q->lane[w].s[i], e[k++] = q->lane[w].e[i];
    /* insertion sort by start: 2 M intervals */
    for (int a = 1; a < k; a++)
        for (int b = a; b > 0 && s[b] < s[b - 1]; b--) {
            double t = s[b]; s[b] = s[b - 1]; s[b - 1] = t;
            t = e[b]; e[b] = e[b - 1]; e[b - 1] = t;
        }
    double sum = 0, cs = 0, ce = -1e300;
    for (int a = 0; a < k; a++) {
        if (s[a] > ce) {
            if (ce > cs) sum += ce - cs;
            cs = s[a];
            ce = e[a];
        } else if (e[a] > ce) {
            ce = e[a];
        }
    }
    if (k && ce > cs) sum += ce - cs;
    return sum;
}

/* One step's micro-batches: start the lanes, move messages until every backward is done. */
static int run_step(qfb *q) {
    het_pipe *p = &q->p;
    het_strategy_ctx *ctx = q->ctx;
    const int n = p->n_micro, M = p->M;
    int sent_f = 0, sent_b = 0, rc = HET_OK;
    pthread_mutex_lock(&q->mu);
    memset(q->in_ok, 0, sizeof q->in_ok);
    memset(q->g_ok, 0, sizeof q->g_ok);
    memset(q->f_done, 0, sizeof q->f_done);
    memset(q->b_done, 0, sizeof q->b_done);
    q->t0 = het_lane_now(&ctx->lane);
    q->lane[LANE_F].time.t = q->lane[LANE_B].time.t = q->t0;
    for (int i = 0; i < n && p->prev < 0; i++) q->in_ok[i] = 1; /* stage 0 gathers its own */
    q->gen++;
    pthread_cond_broadcast(&q->cv);
    for (;;) {
        int all = !q->err, changed = 0, pending = 0;
        /* arrivals */
        pthread_mutex_unlock(&q->mu);
        for (int i = 0; i < n && !rc; i++) {
            int d = 0;
            if (p->prev >= 0 && !q->in_ok[i]) {
                if (!(rc = het_comm_msg_test_untimed(ctx->comm, &p->recvs[i], &d)) && d) {
                    q->in_msg[i] = p->recvs[i];
                    memset(&p->recvs[i], 0, sizeof p->recvs[i]);
                    pthread_mutex_lock(&q->mu);
                    q->in_ok[i] = 1;
                    pthread_mutex_unlock(&q->mu);
                    changed = 1;
                } else {
                    pending = 1;
                }
            }
            if (!rc && p->next >= 0 && !q->g_ok[i]) {
                if (!(rc = het_comm_msg_test_untimed(ctx->comm, &p->recvs[M + i], &d)) && d) {
                    q->g_msg[i] = p->recvs[M + i];
                    memset(&p->recvs[M + i], 0, sizeof p->recvs[M + i]);
                    pthread_mutex_lock(&q->mu);
                    q->g_ok[i] = 1;
                    pthread_mutex_unlock(&q->mu);
                    changed = 1;
                } else {
                    pending = 1;
                }
            }
        }
        pthread_mutex_lock(&q->mu);
        if (rc) break;
        if (changed) pthread_cond_broadcast(&q->cv);
        /* what the lanes produced, in order */
        while (!rc && p->next >= 0 && sent_f < n && q->f_done[sent_f]) {
            const int i = sent_f++;
            rc = het_comm_isend_at(ctx->comm, HET_COMM_WORLD, p->next, HET_TAG_ACTS, q->f_buf[i],
                                   q->f_bytes[i], q->lane[LANE_F].e[i], &p->sends[i]);
        }
        while (!rc && p->prev >= 0 && sent_b < n && q->b_done[sent_b]) {
            const int i = sent_b++;
            rc = het_comm_isend_at(ctx->comm, HET_COMM_WORLD, p->prev, HET_TAG_DACTS, q->b_buf[i],
                                   q->b_bytes[i], q->lane[LANE_B].e[i], &p->sends[M + i]);
        }
        if (rc || q->err) break;
        for (int i = 0; i < n; i++) all &= q->b_done[i];
        if (all && (p->next < 0 || sent_f == n) && (p->prev < 0 || sent_b == n)) break;
        pending |= sent_f > 0 || sent_b > 0; /* sends progress inside MPI calls too */
        if (pending && ctx->comm) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100000;
            if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
            pthread_cond_timedwait(&q->main_cv, &q->mu, &ts);
        } else {
            pthread_cond_wait(&q->main_cv, &q->mu);
        }
    }
    if (q->err && !rc) rc = het_error_set(q->err, "%s", q->errmsg);
    if (rc) { /* stop the lanes: they wait for the next step */
        q->err = q->err ? q->err : rc;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    if (rc) return rc;
    /* the step's end on the rank's clock: the later lane; compute is the busy union */
    const double busy = busy_union(q, n);
    const double tf = q->lane[LANE_F].time.t, tb = q->lane[LANE_B].time.t;
    const double end = tf > tb ? tf : tb;
    p->busy_s += busy;
    for (int w = 0; w < 2; w++) /* what the lanes computed, each on its own */
        for (int i = 0; i < n; i++) p->work_s += q->lane[w].e[i] - q->lane[w].s[i];
    ctx->pace.compute_s += busy;
    if (het_clock_virtual()) {
        het_lane_advance(&ctx->lane, busy);
        if (ctx->comm) het_comm_clock_wait(ctx->comm, end);
        else het_lane_advance_to(&ctx->lane, end);
    }
    het_pace_begin(&ctx->pace); /* the main thread's own piece starts here */
    return HET_OK;
}

/* ---------------------------------------------------------------- the strategy */

static void stop_lanes(qfb *q) {
    if (!q->started) return;
    pthread_mutex_lock(&q->mu);
    q->quit = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    for (int w = 0; w < q->started; w++) pthread_join(q->lane[w].th, NULL);
    q->started = 0;
}

static int qfb_init(het_strategy_ctx *ctx) {
    qfb *q = calloc(1, sizeof *q);
    if (!q) return het_error_set(HET_ENOMEM, "qfb: out of memory");
    ctx->priv = q;
    q->ctx = ctx;
    q->factor = ctx->pace.factor;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    pthread_cond_init(&q->main_cv, NULL);
    int rc = het_pipe_init(&q->p, ctx, "qfb", 0);
    if (rc) return rc;
    for (int w = 0; w < 2; w++) { /* each lane paces its pieces on its own time */
        lane *l = &q->lane[w];
        l->time = (het_lane){het_lane_now(&ctx->lane), w == LANE_F ? HET_TID_FORWARD
                                                                   : HET_TID_COMPUTE};
        het_pace_init(&l->pace, &l->time, q->factor);
        l->pace.costs = ctx->pace.costs;
        l->pace.scale = ctx->pace.scale;
    }
    const het_train_config *c = ctx->cfg;
    het_pipe *p = &q->p;
    p->act_q8 = het_strategy_opt_value(c, "act-codec") == 0;
    p->grad_codec = het_strategy_opt_value(c, "grad-codec") == 0;
    const int sp = (int)het_strategy_opt_value(c, "grad-sparsify");
    p->gradc.mode = sp == 0 ? HET_GRADC_TOPK : sp == 1 ? HET_GRADC_THRESHOLD : HET_GRADC_NONE;
    p->gradc.threshold = (float)het_strategy_opt_value(c, "grad-threshold");
    p->gradc.quantize = het_strategy_opt_value(c, "grad-quant") == 0;
    p->gradc_ratio = het_strategy_opt_value(c, "grad-topk");
    p->gradc_feedback = het_strategy_opt_value(c, "grad-feedback") == 0;
    if ((rc = het_pipe_codecs(p, "qfb"))) return rc;
    for (int w = 0; w < 2; w++) {
        q->lane[w].q = q;
        q->lane[w].which = w;
        if (pthread_create(&q->lane[w].th, NULL, lane_main, &q->lane[w]) != 0) {
            stop_lanes(q);
            return het_error_set(HET_ENOMEM, "qfb: cannot start the %s thread",
                                 w ? "backward" : "forward");
        }
        q->started = w + 1;
    }
    if (ctx->rank == 0)
        het_log(HET_LOG_INFO, "qfb: a forward and a backward thread per stage; activations %s, "
                "gradients %s\n", p->act_q8 ? "int8" : "fp32",
                !p->grad_codec ? "fp32"
                : p->gradc.mode == HET_GRADC_TOPK
                    ? (p->gradc.quantize ? "2-Step GC (top-k, int8)" : "2-Step GC (top-k, fp32)")
                : p->gradc.mode == HET_GRADC_THRESHOLD
                    ? (p->gradc.quantize ? "2-Step GC (threshold, int8)"
                                         : "2-Step GC (threshold, fp32)")
                    : "int8 (all values)");
    return HET_OK;
}

static int qfb_run(void *user, het_strategy_ctx *ctx) {
    (void)ctx;
    return run_step(user);
}

static int qfb_train_epoch(het_strategy_ctx *ctx, int epoch, het_epoch_stats *st) {
    qfb *q = ctx->priv;
    q->factor = ctx->pace.factor; /* --slowdown-at may change it between epochs */
    return het_pipe_epoch(&q->p, ctx, epoch, st, qfb_run, q);
}

/* Floats of the residual section per rank: the largest stage input of any rank (sections of
 * het_step_save_per_rank have one size on every rank). */
static size_t residual_floats(const qfb *q) {
    const het_pipe *p = &q->p;
    size_t most = 0;
    for (int k = 1; k < p->K; k++) {
        size_t n = het_shape_size(het_model_layer(q->ctx->model, p->cut[k])->in);
        if (n > most) most = n;
    }
    return most * (size_t)p->mb_max;
}

/* The gradient codec's residuals (stages > 0), per rank: a resumed run then sends what the
 * uninterrupted one would. save: every rank's, padded to one size; load: each its own. */
static int residuals(het_strategy_ctx *ctx, het_ckpt_writer *w, het_ckpt_reader *r) {
    qfb *q = ctx->priv;
    het_pipe *p = &q->p;
    const size_t n = residual_floats(q), mine = p->residual ? p->in_floats * (size_t)p->mb_max : 0;
    if (!p->grad_codec || n == 0 || (r && !het_ckpt_has(r, "s.qfb.residual")))
        return HET_OK; /* none kept (a checkpoint of codecs off): they start at zero */
    if (r && ctx->ckpt_size) { /* other stages: the residuals of other tensors */
        het_step_resized(ctx, "qfb: error-feedback residuals of %d ranks dropped (they start "
                         "at zero)", ctx->ckpt_size);
        return HET_OK;
    }
    float *buf = calloc(n, sizeof(float));
    if (!buf) return het_error_set(HET_ENOMEM, "qfb: out of memory for the residuals");
    int rc;
    if (!r) {
        if (mine) memcpy(buf, p->residual, sizeof(float) * mine);
        rc = het_step_save_per_rank(ctx, w, "s.qfb.residual", buf, sizeof(float) * n);
    } else {
        rc = het_step_load_per_rank(ctx, r, "s.qfb.residual", buf, sizeof(float) * n);
        if (!rc && mine) memcpy(p->residual, buf, sizeof(float) * mine);
    }
    free(buf);
    return rc;
}

static int qfb_save_state(het_strategy_ctx *ctx, het_ckpt_writer *w) {
    int rc = het_pipe_save_state(ctx, w);
    return rc ? rc : residuals(ctx, w, NULL);
}

static int qfb_load_state(het_strategy_ctx *ctx, het_ckpt_reader *r) {
    /* the lanes wait for a step: the buffers may be made again */
    int rc = het_pipe_load_state(ctx, r);
    return rc ? rc : residuals(ctx, NULL, r);
}

static void qfb_free(het_strategy_ctx *ctx) {
    qfb *q = ctx->priv;
    if (!q) return;
    stop_lanes(q);
    het_pipe_free(&q->p);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    pthread_cond_destroy(&q->main_cv);
    free(q);
    ctx->priv = NULL;
}

/* The shared entries of pipe_opts.c read ctx->priv as the het_pipe it starts with. */
_Static_assert(offsetof(qfb, p) == 0, "qfb must start with its het_pipe");

const het_strategy_ops het_strategy_qfb = {
    .name = "qfb",
    .summary = "Q-FB pipeline: stages over ranks, a forward and a backward thread per stage, "
               "accumulated-gradient updates, int8 activations and 2-Step GC gradients",
    .init = qfb_init,
    .train_epoch = qfb_train_epoch,
    .model_for_eval = het_pipe_model_for_eval,
    .save_state = qfb_save_state, /* the cuts, and the gradient codec's residuals */
    .load_state = qfb_load_state,
    .free = qfb_free,
    .report = het_pipe_report_op,
    .world_grads = 0, /* each stage sums its own slice over its replicas */
    .agreed_state = het_pipe_agreed_state,
    .opts = het_qfb_opts,
    .worker_batch = 0, /* --batch is the global batch */
    .lanes = 2,        /* a forward and a backward thread */
    .pieces = 1,       /* epochs in pieces: a step's end is a drain point (the lanes wait) */
};

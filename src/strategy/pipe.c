/* DESIGN: what the pipelines share (pipe.h): GPipe and 1F1B (gpipe.c), Q-FB (qfb.c).
 *
 * Ranks. P = R x K: --pipelines R copies of a pipeline of K stages; world rank r is stage
 * r % K of pipeline r / K (a pipeline's stages are neighbours in rank order, so that with
 * --ranks-per-node they share nodes). Stage k runs layers [cut[k], cut[k + 1]) of the model
 * (nn/range.c); every rank holds the whole model, but between epochs a rank updates only its
 * stage's slice of the parameters.
 *
 * Partition. Rank 0 times forward + backward of every segment between two places a range may
 * start at (het_model_cut_ok: plain edges, not inside a fused ReLU), on a micro-batch of the
 * run's size, the median of 3 after a warm-up, and chooses the K - 1 cuts that minimize the
 * slowest stage's time (dynamic programming over the segments); the cuts are broadcast, so
 * every rank runs rank 0's plan, which is printed.
 *
 * A step. --batch B is the global batch: B' = B (or the epoch's ragged rest) samples of the
 * epoch's permutation, split evenly over the R pipelines, each pipeline's share into M
 * micro-batches as evenly as possible (fewer when the share has fewer samples). Stage 0
 * gathers a micro-batch's samples; every stage but the last sends its output forward
 * (activations, fp32), the last computes the loss (gradient scale 1 / B', so that the
 * micro-batches' gradients add up to the global batch's mean) and its gradient; backward runs
 * from there, every stage but the first sends its input gradient back. Each micro-batch in
 * flight has its own tape (activations, caches). Dropout draws the streams of the samples'
 * positions in the global batch. After the step's micro-batches, a stage's gradients are summed
 * over its R replicas (an all-reduce of its slice only) and its slice is updated: every
 * micro-batch of step t saw the weights W(t) (synchronous mini-batch SGD; batch norm per
 * micro-batch).
 *
 * The epoch's end. Batch-norm statistics are averaged over a stage's replicas; then each
 * stage's parameters, state and optimizer state are broadcast from pipeline 0's rank of that
 * stage to every rank (the contract: every rank holds the same model, rank 0 the
 * authoritative one); they cost what the emulated network says, like every message.
 *
 * Messages: p2p (comm/p2p.c) tags HET_TAG_ACTS and HET_TAG_DACTS from a given neighbour, so
 * delays, byte counts and the virtual clock are those of every strategy. */
#include <stdlib.h>
#include <string.h>

#include "strategy/pipe.h"

/* ---------------------------------------------------------------- set-up */

/* The flat-buffer slices of layers [a, b): parameters and state. */
static void slices(const het_model *m, int a, int b, size_t *plo, size_t *phi, size_t *slo,
                   size_t *shi) {
    size_t o, c;
    het_model_layer_params(m, a, &o, &c);
    *plo = o;
    *phi = b < het_model_n_layers(m) ? (het_model_layer_params(m, b, &o, &c), o)
                                     : het_model_n_params(m);
    het_model_layer_state(m, a, &o, &c);
    *slo = o;
    *shi = b < het_model_n_layers(m) ? (het_model_layer_state(m, b, &o, &c), o)
                                     : het_model_n_state(m);
}

/* The stage's slices and buffers for p->cut: per micro-batch its input and its output
 * gradient (the receives of a step are posted at its start), the tapes (one per micro-batch, or
 * 1F1B's K - stage), the codecs' buffers when they are on. */
static int stage_alloc(het_pipe *p, het_strategy_ctx *ctx, const char *name) {
    het_model *m = ctx->model;
    const int a = p->cut[p->stage], b = p->cut[p->stage + 1];
    int rc;
    slices(m, a, b, &p->p_lo, &p->p_hi, &p->s_lo, &p->s_hi);
    p->in_floats = het_shape_size(het_model_layer(m, a)->in);
    p->out_floats = het_shape_size(het_model_layer(m, b - 1)->out);
    const size_t mb = (size_t)p->mb_max;
    p->stash_bytes = 0;
    p->n_tapes = p->bounded && p->K - p->stage < p->M ? p->K - p->stage : p->M;
    p->tape = calloc((size_t)p->n_tapes, sizeof *p->tape);
    p->in = calloc((size_t)p->M, sizeof *p->in);
    p->dout = calloc((size_t)p->M, sizeof *p->dout);
    p->sends = calloc((size_t)(2 * p->M), sizeof *p->sends);
    p->recvs = calloc((size_t)(2 * p->M), sizeof *p->recvs);
    p->idx = calloc((size_t)p->M * mb, sizeof *p->idx);
    p->y = calloc((size_t)p->M * mb, 1);
    p->probs = het_alloc(sizeof(float) * mb * (size_t)het_model_n_classes(m));
    if (!p->tape || !p->in || !p->dout || !p->sends || !p->recvs || !p->idx || !p->y ||
        !p->probs)
        return het_error_set(HET_ENOMEM, "%s: out of memory for the stage's buffers", name);
    for (int i = 0; i < p->n_tapes; i++) {
        if ((rc = het_tape_create(&p->tape[i], m, a, b, p->mb_max))) return rc;
        p->stash_bytes += het_tape_bytes(p->tape[i]);
    }
    for (int i = 0; i < p->M; i++) {
        if (!(p->in[i] = het_alloc(sizeof(float) * p->in_floats * mb)) ||
            !(p->dout[i] = het_alloc(sizeof(float) * p->out_floats * mb)))
            return het_error_set(HET_ENOMEM, "%s: out of memory for micro-batch buffers", name);
    }
    return p->act_q8 || p->grad_codec ? het_pipe_codecs(p, name) : HET_OK;
}

/* Frees what stage_alloc made (and the codecs' buffers). */
static void stage_release(het_pipe *p) {
    for (int i = 0; p->tape && i < p->n_tapes; i++) het_tape_free(p->tape[i]);
    for (int i = 0; i < p->M; i++) {
        if (p->in) het_free(p->in[i]);
        if (p->dout) het_free(p->dout[i]);
        if (p->rbuf_a) het_free(p->rbuf_a[i]);
        if (p->rbuf_g) het_free(p->rbuf_g[i]);
        if (p->sbuf_a) het_free(p->sbuf_a[i]);
        if (p->sbuf_g) het_free(p->sbuf_g[i]);
    }
    free(p->tape);
    free(p->in);
    free(p->dout);
    free(p->rbuf_a);
    free(p->rbuf_g);
    free(p->sbuf_a);
    free(p->sbuf_g);
    het_free(p->residual);
    het_free(p->gradc_work);
    free(p->sends);
    free(p->recvs);
    free(p->idx);
    free(p->y);
    het_free(p->probs);
    p->tape = NULL, p->in = p->dout = NULL, p->rbuf_a = p->rbuf_g = p->sbuf_a = p->sbuf_g = NULL;
    p->residual = p->gradc_work = p->probs = NULL, p->sends = p->recvs = NULL, p->idx = NULL;
    p->y = NULL;
}

int het_pipe_init(het_pipe *p, het_strategy_ctx *ctx, const char *name, int bounded) {
    const het_train_config *c = ctx->cfg;
    het_model *m = ctx->model;
    memset(p, 0, sizeof *p);
    p->bounded = bounded;
    p->replicas = HET_COMM_NONE;
    p->prev = p->next = -1;
    p->R = (int)het_strategy_opt_value(c, "pipelines");
    p->M = (int)het_strategy_opt_value(c, "micro-batches");
    if (ctx->size % p->R)
        return het_error_set(HET_EINVAL, "%s: %d ranks are not a multiple of --pipelines %d",
                             name, ctx->size, p->R);
    p->K = ctx->size / p->R;
    if (p->K > HET_PIPE_MAX_STAGES)
        return het_error_set(HET_EINVAL, "%s: %d stages, at most %d", name, p->K,
                             HET_PIPE_MAX_STAGES);
    p->stage = ctx->rank % p->K;
    p->line = ctx->rank / p->K;
    const int share = (c->batch + p->R - 1) / p->R;
    p->mb_max = (share + p->M - 1) / p->M;
    /* the plan: rank 0 measures, everyone gets its cuts */
    int rc = HET_OK;
    double plan[2 * HET_PIPE_MAX_STAGES + 1] = {0};
    int given[HET_PIPE_MAX_STAGES + 1];
    const int n_given = het_strategy_opt_list(c, "stages", given, HET_PIPE_MAX_STAGES + 1);
    if (n_given && n_given != p->K - 1)
        return het_error_set(HET_EINVAL, "%s: --stages gives %d cut%s, %d stages need %d", name,
                             n_given, n_given == 1 ? "" : "s", p->K, p->K - 1);
    if (ctx->rank == 0) {
        int cut[HET_PIPE_MAX_STAGES + 1];
        rc = het_pipe_plan(m, p->K, p->mb_max, n_given ? given : NULL, ctx->pace.costs, cut,
                           p->stage_cost);
        plan[0] = rc;
        for (int k = 0; k <= p->K && !rc; k++) plan[1 + k] = cut[k];
        for (int k = 0; k < p->K && !rc; k++) plan[2 + p->K + k] = p->stage_cost[k];
    }
    if (ctx->comm && het_comm_bcast(ctx->comm, HET_COMM_WORLD, plan,
                                    (size_t)(2 * p->K + 2) * sizeof *plan, 0) != HET_OK)
        return het_error_set(HET_EMPI, "%s: broadcast of the stage plan failed", name);
    if (plan[0] != 0) return ctx->rank == 0 ? rc : het_error_set(HET_EINVAL, "%s: rank 0 "
                                                  "could not plan the stages", name);
    /* rank 0's message names the strategy too */
    for (int k = 0; k <= p->K; k++) p->cut[k] = (int)plan[1 + k];
    for (int k = 0; k < p->K; k++) p->stage_cost[k] = plan[2 + p->K + k];
    if (p->stage > 0) p->prev = ctx->rank - 1;
    if (p->stage < p->K - 1) p->next = ctx->rank + 1;
    if (p->R > 1 && (rc = het_comm_split(ctx->comm, HET_COMM_WORLD, p->stage, p->line,
                                         &p->replicas)))
        return rc;
    if ((rc = stage_alloc(p, ctx, name))) return rc;
    if (ctx->rank == 0) {
        char line[1024];
        size_t o = (size_t)snprintf(line, sizeof line, "%s: %d stage%s x %d pipeline%s, %d "
                                    "micro-batches of up to %d samples:", name, p->K,
                                    p->K > 1 ? "s" : "", p->R, p->R > 1 ? "s" : "", p->M,
                                    p->mb_max);
        for (int k = 0; k < p->K && o < sizeof line; k++)
            o += (size_t)snprintf(line + o, sizeof line - o, "%s stage %d layers %d-%d (%s .. "
                                  "%s) %.2f ms", k ? ";" : "", k, p->cut[k], p->cut[k + 1] - 1,
                                  het_model_layer(m, p->cut[k])->ops->name,
                                  het_model_layer(m, p->cut[k + 1] - 1)->ops->name,
                                  1e3 * p->stage_cost[k]);
        het_log(HET_LOG_INFO, "%s\n", line);
    }
    return HET_OK;
}

void het_pipe_free(het_pipe *p) {
    stage_release(p);
    memset(p, 0, sizeof *p);
}

/* ---------------------------------------------------------------- codecs */

static uint8_t **byte_bufs(int M, size_t cap) {
    uint8_t **b = calloc((size_t)M, sizeof *b);
    for (int i = 0; b && i < M; i++)
        if (!(b[i] = het_alloc(cap ? cap : 1))) return b; /* het_pipe_free frees them */
    return b;
}

int het_pipe_codecs(het_pipe *p, const char *name) {
    if (p->rbuf_a || p->rbuf_g || p->sbuf_a || p->sbuf_g || p->residual) return HET_OK;
    const size_t mb = (size_t)p->mb_max, na = p->out_floats * mb, ni = p->in_floats * mb;
    int ok = 1;
    if (p->act_q8) {
        p->cap_a = het_q8_bytes(p->next >= 0 ? na : ni);
        if (p->next >= 0) ok &= (p->sbuf_a = byte_bufs(p->M, het_q8_bytes(na))) != NULL;
        if (p->prev >= 0) ok &= (p->rbuf_a = byte_bufs(p->M, het_q8_bytes(ni))) != NULL;
    }
    if (p->grad_codec) {
        if (p->prev >= 0) {
            ok &= (p->sbuf_g = byte_bufs(p->M, het_gradc_bytes(ni, ni, p->gradc.quantize))) != NULL;
            ok &= (p->residual = het_alloc(sizeof(float) * ni)) != NULL;
            ok &= (p->gradc_work = het_alloc(sizeof(float) * ni)) != NULL;
            if (p->residual) memset(p->residual, 0, sizeof(float) * ni);
        }
        if (p->next >= 0)
            ok &= (p->rbuf_g = byte_bufs(p->M, het_gradc_bytes(na, na, p->gradc.quantize))) != NULL;
    }
    for (int i = 0; ok && i < p->M; i++)
        ok = (!p->sbuf_a || p->sbuf_a[i]) && (!p->rbuf_a || p->rbuf_a[i]) &&
             (!p->sbuf_g || p->sbuf_g[i]) && (!p->rbuf_g || p->rbuf_g[i]);
    return ok ? HET_OK : het_error_set(HET_ENOMEM, "%s: out of memory for the codecs", name);
}

void het_pipe_epoch_begin(het_pipe *p, const het_lane *lane) {
    p->bytes_fwd = p->bytes_bwd = p->raw_fwd = p->raw_bwd = p->busy_s = p->work_s = 0;
    p->epoch_t0 = het_lane_now(lane);
}

int het_pipe_take_acts(het_pipe *p, int i, const het_msg *m) {
    if (!p->act_q8) return HET_OK; /* received into p->in[i] */
    return het_q8_unpack(p->in[i], p->in_floats * (size_t)p->mb_len[i], p->rbuf_a[i], m->bytes);
}

int het_pipe_pack_acts(het_pipe *p, int i, const float *out, const void **buf, size_t *bytes) {
    const size_t n = p->out_floats * (size_t)p->mb_len[i];
    p->raw_fwd += (double)(sizeof(float) * n);
    if (!p->act_q8) {
        *buf = out;
        *bytes = sizeof(float) * n;
    } else {
        int rc = het_q8_pack(p->sbuf_a[i], het_q8_bytes(n), out, n);
        if (rc) return rc;
        *buf = p->sbuf_a[i];
        *bytes = het_q8_bytes(n);
    }
    p->bytes_fwd += (double)*bytes;
    return HET_OK;
}

int het_pipe_take_grads(het_pipe *p, int i, const het_msg *m) {
    if (!p->grad_codec) return HET_OK; /* received into p->dout[i] */
    return het_gradc_decode(p->dout[i], p->out_floats * (size_t)p->mb_len[i], p->rbuf_g[i],
                            m->bytes, 0);
}

int het_pipe_pack_grads(het_pipe *p, int i, const float *din, const void **buf, size_t *bytes) {
    const size_t n = p->in_floats * (size_t)p->mb_len[i];
    p->raw_bwd += (double)(sizeof(float) * n);
    if (!p->grad_codec) {
        *buf = din;
        *bytes = sizeof(float) * n;
    } else {
        het_gradc_config c = p->gradc;
        if (c.mode == HET_GRADC_TOPK) c.k = het_gradc_k_of_ratio(p->gradc_ratio, n);
        if (!p->gradc_feedback) memset(p->residual, 0, sizeof(float) * n);
        int rc = het_gradc_encode(p->sbuf_g[i], het_gradc_bytes(n, n, c.quantize), bytes,
                                  p->residual, din, n, &c, p->gradc_work);
        if (rc) return rc;
        *buf = p->sbuf_g[i];
    }
    p->bytes_bwd += (double)*bytes;
    return HET_OK;
}

/* ---------------------------------------------------------------- a step */

static size_t mb_bytes(const het_pipe *p, int i, size_t per_sample) {
    return sizeof(float) * per_sample * (size_t)p->mb_len[i];
}

int het_pipe_step_begin(het_pipe *p, het_strategy_ctx *ctx, int64_t pos) {
    const int64_t n = ctx->n_train, B = ctx->cfg->batch;
    const int64_t Bs = n - pos < B ? n - pos : B;
    int64_t lo, len;
    het_partition_even(Bs, p->R, p->line, &lo, &len);
    p->step_pos = pos;
    p->step_len = (int)Bs;
    p->grad_scale = 1.0f / (float)Bs;
    p->seed = het_batch_seed(ctx->cfg->seed, ctx->step);
    p->n_micro = len < p->M ? (int)len : p->M;
    for (int i = 0; i < p->n_micro; i++) {
        int64_t mlo, mlen;
        het_partition_even(len, p->n_micro, i, &mlo, &mlen);
        p->mb_start[i] = (int)(lo + mlo);
        p->mb_len[i] = (int)mlen;
    }
    memset(&p->res, 0, sizeof p->res);
    for (int t = 0; t < p->n_tapes; t++) p->tape_mb[t] = p->tape_done[t] = -1;
    het_model_zero_grads(ctx->model);
    het_model_refresh_lp(ctx->model); /* bf16: the stage reads the weights rounded (nn.h) */
    int rc = HET_OK;
    for (int i = 0; i < p->n_micro && !rc; i++) {
        const size_t na = p->in_floats * (size_t)p->mb_len[i];
        const size_t ng = p->out_floats * (size_t)p->mb_len[i];
        if (p->prev >= 0)
            rc = p->act_q8 ? het_comm_irecv(ctx->comm, HET_COMM_WORLD, p->prev, HET_TAG_ACTS,
                                            p->rbuf_a[i], het_q8_bytes(na), &p->recvs[i])
                           : het_comm_irecv(ctx->comm, HET_COMM_WORLD, p->prev, HET_TAG_ACTS,
                                            p->in[i], mb_bytes(p, i, p->in_floats), &p->recvs[i]);
        if (!rc && p->next >= 0)
            rc = p->grad_codec
                     ? het_comm_irecv(ctx->comm, HET_COMM_WORLD, p->next, HET_TAG_DACTS,
                                      p->rbuf_g[i], het_gradc_bytes(ng, ng, p->gradc.quantize),
                                      &p->recvs[p->M + i])
                     : het_comm_irecv(ctx->comm, HET_COMM_WORLD, p->next, HET_TAG_DACTS,
                                      p->dout[i], mb_bytes(p, i, p->out_floats),
                                      &p->recvs[p->M + i]);
    }
    return rc;
}

/* Waits for message *m (a posted receive) into *got, then clears it for reuse. */
static int take(het_strategy_ctx *ctx, het_msg *m, het_msg *got, const char *what) {
    het_stall_where(what, ctx->epoch + 1, (long long)ctx->step);
    int rc = het_comm_msg_wait(ctx->comm, m);
    *got = *m;
    memset(m, 0, sizeof *m);
    return rc;
}

/* Micro-batch i's tape. Bounded (1F1B), tape i % n_tapes must be free for a forward (its
 * last micro-batch's backward ran) and hold i for the backward: a schedule that breaks the
 * bound is an error, never activations overwritten. The messages sent from a tape (the
 * stage's output forward, its input gradient back: het_range_* return pointers into it) are
 * waited for before a forward writes it again, as a framework that reuses the buffer must. */
static int tape_of(het_pipe *p, het_strategy_ctx *ctx, int i, int fwd, het_tape **t) {
    const int slot = i % p->n_tapes;
    *t = p->tape[slot];
    if (!p->bounded) return HET_OK;
    const int held = p->tape_mb[slot], last = p->tape_done[slot];
    if (fwd ? held >= 0 : held != i)
        return het_error_set(HET_EINVAL, "gpipe (1f1b): stage %d: micro-batch %d's %s finds "
                             "its tape %s (%d tapes)", p->stage, i, fwd ? "forward" : "backward",
                             held >= 0 ? "holding another micro-batch" : "empty", p->n_tapes);
    int rc = HET_OK;
    if (fwd && last >= 0 && ctx->comm) {
        het_stall_where("pipeline sends", ctx->epoch + 1, (long long)ctx->step);
        rc = het_comm_msg_wait(ctx->comm, &p->sends[last]);
        if (!rc) rc = het_comm_msg_wait(ctx->comm, &p->sends[p->M + last]);
        memset(&p->sends[last], 0, sizeof p->sends[last]);
        memset(&p->sends[p->M + last], 0, sizeof p->sends[last]);
    }
    p->tape_mb[slot] = fwd ? i : -1;
    if (!fwd) p->tape_done[slot] = i;
    return rc;
}

int het_pipe_forward_compute(het_pipe *p, het_strategy_ctx *ctx, int i, const het_msg *got,
                             const void **buf, size_t *bytes) {
    het_model *m = ctx->model;
    const int n = p->mb_len[i];
    const int64_t *perm = ctx->sampler->perm + p->step_pos + p->mb_start[i];
    uint8_t *y = p->y + (size_t)i * (size_t)p->mb_max;
    int rc = HET_OK;
    if (p->prev < 0) het_dataset_gather(ctx->train, perm, n, p->in[i], y);
    else rc = het_pipe_take_acts(p, i, got);
    het_tape *tape = NULL;
    if (!rc) rc = tape_of(p, ctx, i, 1, &tape);
    const float *out = rc ? NULL : het_range_forward(m, tape, p->in[i], n, 1, p->seed,
                                                      p->mb_start[i]);
    if (!out && !rc) rc = HET_EINVAL; /* the message is set */
    if (rc) return rc;
    if (p->next >= 0) return het_pipe_pack_acts(p, i, out, buf, bytes);
    /* the loss of the last stage */
    const int classes = het_model_n_classes(m);
    for (int s = 0; s < n && p->prev >= 0; s++) y[s] = ctx->train->labels[perm[s]];
    int correct = 0;
    p->res.loss_sum += het_softmax_ce_forward(out, y, n, classes, p->probs, &correct);
    p->res.correct += correct;
    p->res.count += n;
    het_softmax_ce_backward(p->dout[i], p->probs, y, n, classes, p->grad_scale);
    return HET_OK;
}

int het_pipe_backward_compute(het_pipe *p, het_strategy_ctx *ctx, int i, const het_msg *got,
                              const void **buf, size_t *bytes) {
    int rc = p->next >= 0 ? het_pipe_take_grads(p, i, got) : HET_OK;
    het_tape *tape = NULL;
    if (!rc) rc = tape_of(p, ctx, i, 0, &tape);
    const float *din = rc ? NULL : het_range_backward(ctx->model, tape, p->dout[i],
                                                      het_model_grads(ctx->model), p->prev >= 0);
    if (!rc && p->prev >= 0) rc = het_pipe_pack_grads(p, i, din, buf, bytes);
    return rc;
}

int het_pipe_forward(het_pipe *p, het_strategy_ctx *ctx, int i) {
    het_msg got = {0};
    int rc = p->prev >= 0 ? take(ctx, &p->recvs[i], &got, "waiting for activations") : HET_OK;
    if (rc) return rc;
    double t0 = het_step_region_begin(ctx);
    const void *buf = NULL;
    size_t bytes = 0;
    rc = het_pipe_forward_compute(p, ctx, i, &got, &buf, &bytes);
    het_pace_range(&ctx->pace, 0, p->cut[p->stage], p->cut[p->stage + 1], p->mb_len[i]);
    het_step_region_end(ctx, "forward", i, t0);
    p->busy_s += ctx->pace.last - t0;
    p->work_s += ctx->pace.last - t0;
    if (!rc && p->next >= 0)
        rc = het_comm_isend(ctx->comm, HET_COMM_WORLD, p->next, HET_TAG_ACTS, buf, bytes,
                            &p->sends[i]);
    return rc;
}

int het_pipe_backward(het_pipe *p, het_strategy_ctx *ctx, int i) {
    het_msg got = {0};
    int rc = p->next >= 0 ? take(ctx, &p->recvs[p->M + i], &got, "waiting for gradients")
                          : HET_OK;
    if (rc) return rc;
    double t0 = het_step_region_begin(ctx);
    const void *buf = NULL;
    size_t bytes = 0;
    rc = het_pipe_backward_compute(p, ctx, i, &got, &buf, &bytes);
    het_pace_range(&ctx->pace, 1, p->cut[p->stage], p->cut[p->stage + 1], p->mb_len[i]);
    het_step_region_end(ctx, "backward", i, t0);
    p->busy_s += ctx->pace.last - t0;
    p->work_s += ctx->pace.last - t0;
    if (!rc && p->prev >= 0)
        rc = het_comm_isend(ctx->comm, HET_COMM_WORLD, p->prev, HET_TAG_DACTS, buf, bytes,
                            &p->sends[p->M + i]);
    return rc;
}

void het_pipe_pace_update(const het_pipe *p, het_strategy_ctx *ctx) {
    if (p->p_hi > p->p_lo) {
        het_pace_piece(&ctx->pace, HET_PIECE_OPT, 0, 0);
        ctx->pace.piece_share = (double)(p->p_hi - p->p_lo) /
                                (double)het_model_n_params(ctx->model);
    } else {
        het_pace_range(&ctx->pace, 0, 0, 0, 0); /* no parameters: nothing to charge */
    }
}

int het_pipe_step_end(het_pipe *p, het_strategy_ctx *ctx, float lr) {
    int rc = HET_OK;
    if (ctx->comm) {
        het_stall_where("pipeline sends", ctx->epoch + 1, (long long)ctx->step);
        rc = het_comm_msg_waitall(ctx->comm, 2 * p->M, p->sends);
        memset(p->sends, 0, (size_t)(2 * p->M) * sizeof *p->sends);
    }
    float *g = het_model_grads(ctx->model);
    if (!rc && p->R > 1 && p->p_hi > p->p_lo)
        rc = het_comm_allreduce_sum(ctx->comm, p->replicas, g + p->p_lo, p->p_hi - p->p_lo);
    if (rc) return rc;
    double t0 = het_step_region_begin(ctx);
    int ok = 1;
    if (p->p_hi > p->p_lo)
        ok = het_optim_step_range(&ctx->cfg->optim, lr, het_model_params(ctx->model), g,
                                  ctx->opt_state, het_model_n_params(ctx->model), ctx->step + 1,
                                  p->p_lo, p->p_hi);
    het_pipe_pace_update(p, ctx);
    het_step_region_end(ctx, "optimizer", (int)ctx->step, t0);
    p->busy_s += ctx->pace.last - t0;
    p->work_s += ctx->pace.last - t0;
    ctx->step++;
    /* non-finite weights: recorded here, every rank stops at the epoch's end
     * (het_step_check_params once the stages are gathered) */
    if (!ok && ctx->nonfinite.kind == HET_NF_NONE)
        ctx->nonfinite = het_step_diagnose(ctx, p->res.loss_sum, ctx->step);
    return HET_OK;
}

/* ---------------------------------------------------------------- an epoch */

/* Every stage's parameters, optimizer state (and with_state its model state: a pause inside
 * an epoch keeps each rank's own, which the trainer saves per rank) from rank k to all. */
static int pipe_share(het_pipe *p, het_strategy_ctx *ctx, int with_state) {
    het_model *m = ctx->model;
    float *state = het_model_state(m);
    int rc = HET_OK;
    const size_t np = het_model_n_params(m);
    const size_t per = np ? het_optim_state_floats(&ctx->cfg->optim, np) / np : 0;
    for (int k = 0; k < p->K && !rc && ctx->comm; k++) {
        size_t plo, phi, slo, shi;
        slices(m, p->cut[k], p->cut[k + 1], &plo, &phi, &slo, &shi);
        if (phi > plo)
            rc = het_comm_bcast(ctx->comm, HET_COMM_WORLD, het_model_params(m) + plo,
                                sizeof(float) * (phi - plo), k);
        for (size_t j = 0; j < per && phi > plo && !rc; j++)
            rc = het_comm_bcast(ctx->comm, HET_COMM_WORLD, ctx->opt_state + j * np + plo,
                                sizeof(float) * (phi - plo), k);
        if (!rc && shi > slo && with_state)
            rc = het_comm_bcast(ctx->comm, HET_COMM_WORLD, state + slo,
                                sizeof(float) * (shi - slo), k);
    }
    return rc;
}

int het_pipe_epoch(het_pipe *p, het_strategy_ctx *ctx, int epoch, het_epoch_stats *st,
                   int (*run)(void *user, het_strategy_ctx *ctx), void *user) {
    const int64_t n = ctx->n_train, B = ctx->cfg->batch, spe = (n + B - 1) / B;
    het_epoch_sums *sums = &ctx->esums; /* over the epoch's pieces */
    float lr = 0.0f;
    if (ctx->epoch_pos == 0) het_pipe_epoch_begin(p, &ctx->lane);
    het_sampler_set_epoch(ctx->sampler, epoch);
    int rc = HET_OK, pause = 0;
    for (int64_t pos = ctx->epoch_pos; pos < n && !rc && !pause; pos += B) {
        double ts = het_lane_now(&ctx->lane);
        lr = het_schedule_lr(ctx->sched, epoch, ctx->step, spe);
        rc = het_pipe_step_begin(p, ctx, pos);
        if (!rc) rc = run(user, ctx);
        if (!rc) rc = het_pipe_step_end(p, ctx, lr);
        /* the loss is the last stage's: the others report no samples */
        het_batch_result none = {0, 0, 0}, *mine = p->next < 0 ? &p->res : &none;
        const het_step_rec rec = {.mine = mine, .count = mine->count, .local = 1};
        if (!rc) rc = het_step_record(ctx, sums, &rec, lr, ts);
        if (!rc) pause = het_step_pause(ctx, pos + B, n); /* the step's sends are done */
    }
    /* a failing rank's partners would wait for it: agree before the collectives */
    rc = ctx->comm ? het_comm_agree(ctx->world, rc) : rc;
    if (rc) return rc;
    if (pause && ctx->pause_ckpt) return pipe_share(p, ctx, 0); /* a checkpoint inside the epoch */
    if (pause) { /* an evaluation's only: the whole model on every rank, charged to no clock */
        het_step_aside a;
        het_step_aside_begin(ctx, &a);
        rc = pipe_share(p, ctx, 0);
        het_step_aside_end(ctx, &a);
        return rc;
    }
    rc = het_step_epoch_figures(ctx, sums, lr, st);
    if (!rc) rc = het_pipe_gather(p, ctx);
    return rc ? rc : het_step_check_params(ctx);
}

/* ---------------------------------------------------------------- the epoch's end */

int het_pipe_gather(het_pipe *p, het_strategy_ctx *ctx) {
    het_model *m = ctx->model;
    int rc = HET_OK;
    const double t_end = het_lane_now(&ctx->lane);
    float *state = het_model_state(m);
    if (p->R > 1 && p->s_hi > p->s_lo && ctx->comm) {
        rc = het_comm_allreduce_sum(ctx->comm, p->replicas, state + p->s_lo, p->s_hi - p->s_lo);
        for (size_t i = p->s_lo; i < p->s_hi && !rc; i++) state[i] /= (float)p->R;
    }
    if (!rc) rc = pipe_share(p, ctx, 1);
    /* every stage's figures (pipeline 0's ranks) on every rank, for the report */
    double f[HET_PIPE_FIGS * HET_PIPE_MAX_STAGES] = {0};
    if (!rc && p->line == 0) {
        double *g = f + HET_PIPE_FIGS * p->stage;
        g[0] = (double)p->stash_bytes;
        g[1] = p->bytes_fwd;
        g[2] = p->bytes_bwd;
        g[3] = p->raw_fwd;
        g[4] = p->raw_bwd;
        g[5] = p->busy_s;
        g[6] = t_end - p->epoch_t0;
        g[7] = p->work_s;
    }
    if (!rc) rc = het_step_sum_f64(ctx, f, (size_t)(HET_PIPE_FIGS * p->K));
    if (!rc) memcpy(p->stage_fig, f, sizeof(double) * (size_t)(HET_PIPE_FIGS * p->K));
    return rc;
}

/* ---------------------------------------------------------------- checkpoints */

int het_pipe_save(het_pipe *p, het_ckpt_writer *w) {
    int32_t c[HET_PIPE_MAX_STAGES + 1];
    for (int k = 0; k <= p->K; k++) c[k] = p->cut[k];
    return w ? het_ckpt_put(w, "s.pipe.cuts", c, sizeof(int32_t) * (size_t)(p->K + 1)) : HET_OK;
}

int het_pipe_load(het_pipe *p, het_strategy_ctx *ctx, het_ckpt_reader *r, const char *name) {
    if (!het_ckpt_has(r, "s.pipe.cuts")) return HET_OK;
    int32_t c[HET_PIPE_MAX_STAGES + 1];
    const void *data;
    size_t bytes = 0;
    int rc = het_ckpt_find(r, "s.pipe.cuts", &data, &bytes, NULL);
    if (rc) return rc;
    if (bytes != sizeof(int32_t) * (size_t)(p->K + 1) && ctx->ckpt_size)
        return het_pipe_replanned(p, ctx, name, bytes / sizeof(int32_t) - 1);
    if (bytes != sizeof(int32_t) * (size_t)(p->K + 1))
        return het_error_set(HET_EINVAL, "%s: the checkpoint %s holds the cuts of %zu stages, "
                             "this run has %d (%d ranks, --pipelines %d): resume with as many "
                             "stages", name, het_ckpt_reader_path(r),
                             bytes / sizeof(int32_t) > 0 ? bytes / sizeof(int32_t) - 1 : 0,
                             p->K, ctx->size, p->R);
    memcpy(c, data, bytes);
    const int n = het_model_n_layers(ctx->model);
    int same = 1;
    for (int k = 0; k <= p->K; k++) {
        if (c[k] < 0 || c[k] > n || (k && c[k] <= c[k - 1]) || (k == 0) != (c[k] == 0) ||
            (k == p->K) != (c[k] == n) || !het_model_cut_ok(ctx->model, c[k]))
            return het_error_set(HET_EFORMAT, "%s: %s: stage cut %d (layer %d), expected a "
                                 "place the model can be cut", name, het_ckpt_reader_path(r), k,
                                 (int)c[k]);
        same &= c[k] == p->cut[k];
    }
    if (same) return HET_OK;
    /* the run measured another plan than the checkpoint's: the checkpoint's wins, so that the
     * resumed run computes what the uninterrupted one did (codecs see the same tensors) */
    stage_release(p);
    for (int k = 0; k <= p->K; k++) p->cut[k] = c[k];
    if (ctx->rank == 0)
        het_log(HET_LOG_INFO, "%s: the checkpoint's stages replace the measured plan\n", name);
    return stage_alloc(p, ctx, name);
}

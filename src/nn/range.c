/* DESIGN: the range executor (nn.h): layers [first, last) of a model on inputs and output
 * gradients from outside, one micro-batch per tape, for the pipelines (strategy/pipe.c).
 *
 * A tape is one worker's buffers of the model's executor (exec.c) cut to the range and sized
 * for one micro-batch: an activation buffer per layer (a fused ReLU shares its producer's, as
 * in the model), a cache per layer, one scratch and two ping-pong gradient buffers, and the
 * pointer to the input, which backward reads at the first layer. The layer calls are those
 * of exec.c's chunk_forward / chunk_train for worker 0 without a team: the same het_exec
 * fields, the same dropout streams (seeded by the sample's index in the batch and the layer),
 * so a model cut into ranges computes what it computes whole (the bitwise test in
 * tests/test_range.c). What differs: backward starts from an output gradient instead of the
 * loss, and it can produce the gradient of the range's input, which the model's executor never
 * computes below its first layer with parameters. */
#include <stdlib.h>
#include <string.h>

#include "nn/model_internal.h"

struct het_tape {
    int first, last, max_batch;
    size_t *act_off, *cache_off; /* per layer of the range, floats into acts / cache */
    float *acts, *cache, *work, *dbuf[2];
    float *lp; /* bf16: the rounded operands' scratch (het_exec.lp); NULL in fp32 */
    int bf16;
    size_t bytes;
    het_rng rng;
    /* the last forward's */
    const float *in;
    int batch, train, sample0;
    uint64_t step_seed;
};

int het_model_cut_ok(const het_model *m, int cut) {
    if (cut <= 0 || cut >= m->n_layers) return cut == 0 || cut == m->n_layers;
    return !m->layers[cut - 1]->out_blk && !m->layers[cut]->in_blk && !m->layers[cut]->fused_away;
}

static float *tape_alloc(het_tape *t, size_t floats) {
    t->bytes += sizeof(float) * (floats ? floats : 1);
    return het_alloc(sizeof(float) * (floats ? floats : 1));
}

void het_tape_free(het_tape *t) {
    if (!t) return;
    het_free(t->acts);
    het_free(t->cache);
    het_free(t->work);
    het_free(t->dbuf[0]);
    het_free(t->dbuf[1]);
    het_free(t->lp);
    free(t->act_off);
    free(t->cache_off);
    free(t);
}

int het_tape_create(het_tape **out, const het_model *m, int first, int last, int max_batch) {
    *out = NULL;
    if (first < 0 || last > m->n_layers || first >= last)
        return het_error_set(HET_EINVAL, "layer range [%d, %d) is not inside the model's %d layers",
                             first, last, m->n_layers);
    for (int e = 0; e < 2; e++) {
        int cut = e ? last : first;
        if (!het_model_cut_ok(m, cut))
            return het_error_set(HET_EINVAL, "a range cannot %s at layer %d (%s): the edge "
                                 "there is channel-blocked or a fused ReLU", e ? "end" : "start",
                                 cut, m->layers[cut]->ops->name);
    }
    if (max_batch <= 0) return het_error_set(HET_EINVAL, "tape: max batch %d", max_batch);
    het_tape *t = calloc(1, sizeof *t);
    if (!t) return het_error_set(HET_ENOMEM, "out of memory for a tape");
    t->first = first;
    t->last = last;
    t->max_batch = max_batch;
    const int n = last - first;
    t->act_off = calloc((size_t)n, sizeof *t->act_off);
    t->cache_off = calloc((size_t)n, sizeof *t->cache_off);
    const size_t mb = (size_t)max_batch;
    size_t act = 0, cache = 0, work = 0, io = het_shape_size(m->layers[first]->in);
    for (int k = 0; t->act_off && t->cache_off && k < n; k++) {
        const int i = first + k;
        const het_layer_plan *p = &m->plans[i];
        t->cache_off[k] = cache;
        if (m->layers[i]->fused_away) { /* never at k = 0: het_model_cut_ok */
            t->act_off[k] = t->act_off[k - 1];
        } else {
            t->act_off[k] = act;
            act += het_shape_size(p->out) * mb;
        }
        cache += p->cache_per_sample * mb;
        size_t wf = p->work_per_sample * mb + p->work_fixed;
        if (wf > work) work = wf;
        if (het_shape_size(p->out) > io) io = het_shape_size(p->out);
    }
    if (t->act_off && t->cache_off) {
        t->acts = tape_alloc(t, act);
        t->cache = tape_alloc(t, cache);
        t->work = tape_alloc(t, work);
        t->dbuf[0] = tape_alloc(t, io * mb);
        t->dbuf[1] = tape_alloc(t, io * mb);
        t->bf16 = m->prec == HET_PREC_BF16;
        if (t->bf16) t->lp = tape_alloc(t, HET_LP_PER_SAMPLE(io) * mb); /* io: the most in or out */
    }
    if (!t->act_off || !t->cache_off || !t->acts || !t->cache || !t->work || !t->dbuf[0] ||
        !t->dbuf[1] || (t->bf16 && !t->lp)) {
        het_tape_free(t);
        return het_error_set(HET_ENOMEM, "out of memory for a tape of layers [%d, %d), %d samples",
                             first, last, max_batch);
    }
    *out = t;
    return HET_OK;
}

size_t het_tape_bytes(const het_tape *t) { return t->bytes; }

/* Layer i's context on tape t, as exec.c's worker_exec for worker 0 without a team. */
static void tape_exec(const het_model *m, het_tape *t, int i, float *grads, het_exec *ex) {
    const int k = i - t->first;
    ex->params = (t->bf16 ? m->params_lp : m->params) + m->param_off[i];
    ex->grads = grads ? grads + m->param_off[i] : NULL;
    ex->state = m->state ? m->state + m->state_off[i] : NULL;
    ex->cache = t->cache + t->cache_off[k];
    ex->work = t->work;
    ex->rng = &t->rng;
    ex->train = t->train;
    ex->team = NULL;
    ex->worker = 0;
    ex->bf16 = t->bf16; /* the weights as rounded by the user's het_model_refresh_lp */
    ex->lp = t->lp;
    ex->wbits = t->bf16 && m->params_bits ? m->params_bits + m->param_off[i] : NULL;
    /* the dropout stream of exec.c: by the sample's index in the batch and by the layer */
    het_rng_seed2(&t->rng, t->step_seed, ((uint64_t)t->sample0 << 16) | (uint64_t)i);
}

const float *het_range_forward(het_model *m, het_tape *t, const float *in, int batch, int train,
                               uint64_t step_seed, int sample0) {
    if (batch <= 0 || batch > t->max_batch) {
        het_error_set(HET_EINVAL, "micro-batch %d outside 1..%d (the tape's)", batch, t->max_batch);
        return NULL;
    }
    t->in = in;
    t->batch = batch;
    t->train = train;
    t->step_seed = step_seed;
    t->sample0 = sample0;
    const float *x = in;
    for (int i = t->first; i < t->last; i++) {
        het_exec ex;
        tape_exec(m, t, i, NULL, &ex);
        float *out = t->acts + t->act_off[i - t->first];
        het_layer *l = m->layers[i];
        l->ops->forward(l, &ex, x, out, batch);
        x = out;
    }
    return x;
}

const float *het_range_backward(het_model *m, het_tape *t, const float *dout, float *grads,
                                int need_din) {
    /* the lowest layer back-propagated: the first, or the range's first with parameters */
    int low = t->first;
    if (!need_din)
        while (low < t->last && m->plans[low].n_params == 0) low++;
    int cur = 0;
    for (int i = t->last - 1; i >= low; i--) {
        het_layer *l = m->layers[i];
        het_exec ex;
        tape_exec(m, t, i, grads, &ex);
        const int k = i - t->first;
        const float *in = k > 0 ? t->acts + t->act_off[k - 1] : t->in;
        const float *out = t->acts + t->act_off[k];
        float *din = i > low || need_din ? t->dbuf[cur ^ 1] : NULL;
        l->ops->backward(l, &ex, in, out, dout, din, t->batch);
        dout = din;
        cur ^= 1;
    }
    return need_din ? dout : NULL;
}

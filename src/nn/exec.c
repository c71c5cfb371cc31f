/* DESIGN: the executor of a model: forward, the fused softmax cross-entropy loss, backward,
 * the worker reduction, and the hooks.
 *
 * A batch is split into contiguous shares, one per worker (the caller is worker 0; the others
 * run on the model's pool, nn/pool.c). A worker runs its share through all layers a chunk of
 * samples at a time, so that a chunk's activations stay in cache; backward accumulates, so
 * chunks add up exactly as one sub-batch would (up to summation order). Backward skips the
 * input gradient of every layer below the first layer with parameters.
 *
 * Worker 0 accumulates into the model's gradient buffer, workers > 0 into their own; afterwards
 * their buffers are added into the model's in a fixed order (worker 1, 2, ...) over disjoint
 * slices of the parameters, so results are deterministic for a given worker count.
 *
 * Batch-coupled layers (batch norm, the residual block) need the statistics of the whole
 * batch before any worker can go on, so a worker must have all its samples at such a layer
 * at once: a coupled model runs each worker's whole share as one chunk (size_chunks in
 * model.c), as its one worker ran the whole batch before. In training the active workers (those with samples: a batch smaller than the
 * worker count, or a split like 4 = 2 + 2 + 0, leaves some without) form the model's team
 * (nn/team.c): at each batch-norm layer, forward and backward, they write per-channel partial
 * statistics, meet at a barrier, and each combines all parts in worker order, so every worker
 * and every run with the same worker count gets the same bits (bn_math.h has the formulas).
 * Workers without samples run no layers and are not counted at the meetings. With one active
 * worker, in evaluation, or with het_model_forward in eval mode the layers get no team and
 * compute exactly as one worker always did. Running statistics are updated by worker 0 only;
 * gamma and beta gradients go to each worker's buffer and are summed by the reduction below.
 *
 * Hooks run on worker 0, i.e. the calling thread, only: progress after every layer of worker
 * 0's chunks, forward and backward; grad with one worker as each layer's backward of the last
 * chunk completes (the rest of backward overlaps the client's communication), with more
 * workers after the reduction, in reverse layer order. het_model_train_step hands a dense
 * stack to nn/dense_stack.c with the update folded in; it runs every other model as
 * zero + train_batch + update. */
#include <string.h>

#include "nn/model_internal.h"

/* What every worker reads during one parallel region. */
typedef struct exec_job {
    het_model *m;
    int train;         /* training mode (dropout, batch-norm batch statistics) */
    float grad_scale;  /* the loss gradient's scale */
    uint64_t step_seed;
} exec_job;

/* ---------------------------------------------------------------- hooks */

static void fire_grad(het_model *m, int layer) {
    for (int h = 0; h < m->n_hooks; h++)
        if (m->hooks[h].grad)
            m->hooks[h].grad(m->hooks[h].user, layer, m->param_off[layer], m->plans[layer].n_params);
}

static void fire_progress(het_model *m, int layer) {
    for (int h = 0; h < m->n_hooks; h++)
        if (m->hooks[h].progress) m->hooks[h].progress(m->hooks[h].user, layer);
}

/* ---------------------------------------------------------------- per-worker compute */

static void worker_exec(const exec_job *j, het_worker *wk, int i, het_exec *ex, float *grads) {
    const het_model *m = j->m;
    ex->params = m->params + m->param_off[i];
    ex->grads = grads + m->param_off[i];
    ex->state = m->state ? m->state + m->state_off[i] : NULL;
    ex->cache = wk->cache + m->cache_off[i];
    ex->work = wk->work;
    ex->rng = &wk->rng;
    ex->train = j->train;
    /* the model sets the team's size to the active workers for each batch (split_batch) */
    ex->team = j->train && m->team && het_team_size(m->team) > 1 ? m->team : NULL;
    ex->worker = ex->team ? (int)(wk - m->w) : 0;
    ex->bf16 = m->prec == HET_PREC_BF16;
    ex->lp = wk->lp;
    if (ex->bf16) ex->params = m->params_lp + m->param_off[i];
    ex->wbits = ex->bf16 && m->params_bits ? m->params_bits + m->param_off[i] : NULL;
}

/* Forward of `n` samples starting at sample `s0` of this worker's share; returns the logits. */
static const float *chunk_forward(const exec_job *j, het_worker *wk, int widx, int s0, int n) {
    het_model *m = j->m;
    const int progress = widx == 0 && m->n_progress_hooks > 0;
    const float *in = wk->x + (size_t)s0 * het_shape_size(m->in);
    for (int i = 0; i < m->n_layers; i++) {
        het_exec ex;
        worker_exec(j, wk, i, &ex, widx == 0 ? m->grads : wk->grads);
        /* dropout stream: by layer and by the chunk's first sample in the whole batch */
        het_rng_seed2(&wk->rng, j->step_seed, ((uint64_t)(wk->start + s0) << 16) | (uint64_t)i);
        float *out = wk->acts + m->act_off[i];
        het_layer *l = m->layers[i];
        l->ops->forward(l, &ex, in, out, n);
        if (progress) fire_progress(m, i);
        in = out;
    }
    return in;
}

/* Forward, loss and backward of one chunk; `last`: the last chunk of this worker's share. */
static void chunk_train(const exec_job *j, het_worker *wk, int widx, int s0, int n, int last) {
    het_model *m = j->m;
    const float *logits = chunk_forward(j, wk, widx, s0, n);
    const uint8_t *y = wk->y + s0;
    int correct = 0;
    wk->res.loss_sum += het_softmax_ce_forward(logits, y, n, m->classes, wk->probs, &correct);
    wk->res.correct += correct;
    wk->res.count += n;
    float *grads = widx == 0 ? m->grads : wk->grads;
    float *dout = wk->dbuf[0];
    het_softmax_ce_backward(dout, wk->probs, y, n, m->classes, j->grad_scale);
    const int grad_now = last && m->workers == 1 && m->n_grad_hooks > 0;
    const int progress = widx == 0 && m->n_progress_hooks > 0;
    int cur = 0;
    for (int i = m->n_layers - 1; i >= m->first_param_layer; i--) {
        het_layer *l = m->layers[i];
        het_exec ex;
        worker_exec(j, wk, i, &ex, grads);
        het_rng_seed2(&wk->rng, j->step_seed, ((uint64_t)(wk->start + s0) << 16) | (uint64_t)i);
        const float *in = i > 0 ? wk->acts + m->act_off[i - 1] : wk->x + (size_t)s0 * het_shape_size(m->in);
        const float *out = wk->acts + m->act_off[i];
        float *din = i > m->first_param_layer ? wk->dbuf[cur ^ 1] : NULL;
        l->ops->backward(l, &ex, in, out, dout, din, n);
        if (grad_now && m->plans[i].n_params > 0) fire_grad(m, i);
        if (progress) fire_progress(m, i);
        dout = din;
        cur ^= 1;
    }
}

static void train_task(void *user, int widx) {
    const exec_job *j = user;
    const het_model *m = j->m;
    het_worker *wk = &m->w[widx];
    /* workers > 0 start from zeroed gradients: see reduce_task */
    for (int s0 = 0; s0 < wk->batch; s0 += m->chunk) {
        int n = wk->batch - s0 < m->chunk ? wk->batch - s0 : m->chunk;
        chunk_train(j, wk, widx, s0, n, s0 + n >= wk->batch);
    }
}

static void forward_task(void *user, int widx) {
    const exec_job *j = user;
    const het_model *m = j->m;
    het_worker *wk = &m->w[widx];
    for (int s0 = 0; s0 < wk->batch; s0 += m->chunk) {
        int n = wk->batch - s0 < m->chunk ? wk->batch - s0 : m->chunk;
        const float *logits = chunk_forward(j, wk, widx, s0, n);
        memcpy(m->logits + (size_t)(wk->start + s0) * (size_t)m->classes, logits,
               sizeof(float) * (size_t)n * (size_t)m->classes);
    }
}

/* Adds the gradients of workers 1.. into the model's buffer over this worker's slice of the
 * parameters, always in worker order: deterministic. Their buffers are left zeroed (they start
 * zeroed and every training step ends with this reduction). */
static void reduce_task(void *user, int widx) {
    het_model *m = user;
    size_t lo, hi;
    het_model_slice(m, widx, m->n_params, &lo, &hi);
    for (int w = 1; w < m->workers; w++) {
        if (m->w[w].batch == 0) continue;
        float *g = m->w[w].grads;
        for (size_t k = lo; k < hi; k++) {
            m->grads[k] += g[k];
            g[k] = 0.0f; /* ready for the next step: saves a separate memset */
        }
    }
}

/* ---------------------------------------------------------------- batches */

static int split_batch(het_model *m, const float *x, const uint8_t *y, int batch) {
    if (batch <= 0 || batch > m->max_batch)
        return het_error_set(HET_EINVAL, "batch %d outside 1..%d (the model's max batch)", batch,
                             m->max_batch);
    size_t in_sz = het_shape_size(m->in);
    int per = (batch + m->workers - 1) / m->workers, start = 0, active = 0;
    for (int w = 0; w < m->workers; w++) {
        int n = batch - start < per ? batch - start : per;
        if (n < 0) n = 0;
        active += n > 0;
        m->w[w].x = x + (size_t)start * in_sz;
        m->w[w].y = y ? y + start : NULL;
        m->w[w].batch = n;
        m->w[w].start = start;
        memset(&m->w[w].res, 0, sizeof m->w[w].res);
        start += n;
    }
    if (m->team) het_team_begin(m->team, active); /* shares are front-loaded: 0..active-1 */
    return HET_OK;
}

/* split_batch for training: every label must name a class. */
static int split_labeled(het_model *m, const float *x, const uint8_t *y, int batch) {
    int st = split_batch(m, x, y, batch);
    if (st != HET_OK) return st;
    for (int i = 0; i < batch; i++)
        if (y[i] >= m->classes)
            return het_error_set(HET_EINVAL, "label %d of sample %d is not below %d classes", y[i],
                                 i, m->classes);
    return HET_OK;
}

void het_model_batch_result(const het_model *m, het_batch_result *res) {
    het_batch_result r = {0, 0, 0};
    int n = m->in_parallel ? 1 : m->workers; /* the others may still be writing */
    for (int w = 0; w < n; w++) {
        r.loss_sum += m->w[w].res.loss_sum;
        r.correct += m->w[w].res.correct;
        r.count += m->w[w].res.count;
    }
    *res = r;
}

/* Runs fn on every worker with in_parallel set while workers > 0 may write their results. */
static void run_parallel(het_model *m, void (*fn)(void *user, int widx), void *user) {
    m->in_parallel = m->workers > 1;
    het_pool_run(m->pool, fn, user);
    m->in_parallel = 0;
}

int het_model_train_batch(het_model *m, const float *x, const uint8_t *y, int batch,
                          float grad_scale, uint64_t step_seed, het_batch_result *res) {
    int st = split_labeled(m, x, y, batch);
    if (st != HET_OK) return st;
    het_model_refresh_lp(m); /* the weights as bf16 read them, once per batch */
    exec_job j = {m, 1, grad_scale, step_seed};
    run_parallel(m, train_task, &j);
    if (m->workers > 1) {
        het_pool_run(m->pool, reduce_task, m);
        if (m->n_grad_hooks > 0)
            for (int i = m->n_layers - 1; i >= 0; i--)
                if (m->plans[i].n_params > 0) fire_grad(m, i);
    }
    if (res) het_model_batch_result(m, res);
    return HET_OK;
}

/* ---------------------------------------------------------------- the dense stack */

typedef struct stack_job {
    het_model *m;
    het_stack_job sj;
} stack_job;

static void stack_progress(void *user, int layer) { fire_progress(user, layer); }

static void stack_task(void *user, int widx) {
    stack_job *j = user;
    het_stack_run(j->m->stack, &j->sj, widx, &j->m->w[widx].res);
}


const char *het_model_executor(const het_model *m) {
    if (m->stack && m->prec == HET_PREC_FP32)
        return "dense stack: features split over workers, update folded in";
    return m->team ? "generic: samples split over workers, batch norm over the whole batch, "
                     "then summed"
                   : "generic: samples split over workers, then summed";
}

int het_model_train_step(het_model *m, const float *x, const uint8_t *y, int batch,
                         float grad_scale, uint64_t step_seed, const het_update *u,
                         het_batch_result *res) {
    if (m->n_grad_hooks > 0)
        return het_error_set(HET_EINVAL, "train_step: a gradient hook is set, but the update "
                             "cannot wait for it (use het_model_train_batch)");
    if (!m->stack || m->prec != HET_PREC_FP32) { /* the dense stack runs fp32 only */
        het_model_zero_grads(m);
        int st = het_model_train_batch(m, x, y, batch, grad_scale, step_seed, res);
        if (st == HET_OK) het_model_update(m, u);
        return st;
    }
    int st = split_labeled(m, x, y, batch);
    if (st != HET_OK) return st;
    stack_job j = {m, {x, y, batch, grad_scale, m->params, m->grads, m->n_params, u,
                       m->n_progress_hooks > 0 ? stack_progress : NULL, m}};
    run_parallel(m, stack_task, &j);
    if (res) het_model_batch_result(m, res);
    return HET_OK;
}

/* ---------------------------------------------------------------- inference */

const float *het_model_forward(het_model *m, const float *x, int batch, int train,
                               uint64_t step_seed) {
    if (split_batch(m, x, NULL, batch) != HET_OK) return NULL;
    het_model_refresh_lp(m);
    exec_job j = {m, train, 0.0f, step_seed};
    het_pool_run(m->pool, forward_task, &j);
    return m->logits;
}

int het_model_eval_batch(het_model *m, const float *x, const uint8_t *y, int batch,
                         het_batch_result *res) {
    const float *logits = het_model_forward(m, x, batch, 0, 0);
    if (!logits) return HET_EINVAL;
    int correct = 0;
    /* probabilities go to worker 0's buffer in chunks of its size */
    double loss = 0;
    for (int start = 0; start < batch; start += m->chunk) {
        int n = batch - start < m->chunk ? batch - start : m->chunk;
        int c = 0;
        loss += het_softmax_ce_forward(logits + (size_t)start * (size_t)m->classes, y + start, n,
                                       m->classes, m->w[0].probs, &c);
        correct += c;
    }
    if (res) {
        res->loss_sum = loss;
        res->correct = correct;
        res->count = batch;
    }
    return HET_OK;
}

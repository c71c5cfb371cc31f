/* DESIGN: the model: planning, memory, accessors, hooks and element-wise work.
 *
 * A model is a list of layers planned in two passes: first every layer's plan() gives its
 * output shape and buffer needs, then one allocation each for the trainable parameters, their
 * gradients and the non-trainable state, with a view (offset) per layer. Zeroing gradients is
 * one memset, an optimizer is one loop, averaging gradients across ranks is one all-reduce.
 *
 * Workers: a batch is split into `workers` contiguous sub-batches run on a pool of threads
 * (nn/pool.c; the calling thread is worker 0). Each worker has its own activations, caches,
 * scratch and (for workers > 0) gradient buffer, all sized for one chunk of samples;
 * parameters and state are shared read-only. Layers that couple the samples of a batch (batch
 * norm) make every worker run its whole share as one chunk, and the workers meet at them in a
 * team (nn/team.c) to combine statistics over the whole batch. The executor that runs them
 * (forward, loss, backward, the worker reduction, the hooks) is nn/exec.c; the dense-stack
 * executor is nn/dense_stack.c. */
#include <stdlib.h>
#include <string.h>

#include "hetrain/tensor.h"
#include "nn/layer_kinds.h"
#include "nn/model_internal.h"

/* ---------------------------------------------------------------- create / free */

static void destroy_layers(het_layer **layers, int n) {
    for (int i = 0; i < n; i++)
        if (layers[i] && layers[i]->ops->destroy) layers[i]->ops->destroy(layers[i]);
}

void het_model_free(het_model *m) {
    if (!m) return;
    het_pool_free(m->pool);
    het_team_free(m->team);
    het_stack_free(m->stack);
    if (m->w) {
        for (int i = 0; i < m->workers; i++) {
            het_worker *wk = &m->w[i];
            het_free(wk->acts);
            het_free(wk->cache);
            het_free(wk->work);
            het_free(wk->dbuf[0]);
            het_free(wk->dbuf[1]);
            het_free(wk->probs);
            het_free(wk->grads);
            het_free(wk->lp);
        }
        free(m->w);
    }
    destroy_layers(m->layers, m->n_layers);
    free(m->layers);
    free(m->plans);
    free(m->param_off);
    free(m->state_off);
    free(m->act_off);
    free(m->cache_off);
    het_free(m->params);
    het_free(m->params_lp);
    het_free(m->params_bits);
    het_free(m->grads);
    het_free(m->state);
    het_free(m->logits);
    free(m);
}

static float *model_alloc(het_model *m, size_t floats) {
    m->bytes += sizeof(float) * (floats ? floats : 1);
    return het_alloc(sizeof(float) * (floats ? floats : 1));
}

/* Pass 1: every layer's plan() on its input shape; offsets of the parameters and state. */
static int plan_layers(het_model *m) {
    het_shape s = m->in;
    m->first_param_layer = m->n_layers;
    m->max_io = het_shape_size(s);
    for (int i = 0; i < m->n_layers; i++) {
        het_layer *l = m->layers[i];
        het_layer_plan *p = &m->plans[i];
        memset(p, 0, sizeof *p);
        int st = l->ops->plan(l, s, p);
        if (st != HET_OK) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", het_error_msg());
            return het_error_set(st, "layer %d (%s) on input %dx%dx%d: %s", i, l->ops->name, s.c,
                                 s.h, s.w, msg);
        }
        l->in = s;
        l->out = p->out;
        if (l->batch_coupled) m->coupled = 1;
        if (p->team_doubles > m->team_doubles) m->team_doubles = p->team_doubles;
        if (p->n_params > 0 && m->first_param_layer == m->n_layers) m->first_param_layer = i;
        m->param_off[i] = m->n_params;
        m->state_off[i] = m->n_state;
        m->n_params += p->n_params;
        m->n_state += p->n_state;
        s = p->out;
        if (het_shape_size(s) > m->max_io) m->max_io = het_shape_size(s);
    }
    m->classes = (int)het_shape_size(s);
    return HET_OK;
}

/* The layout of every edge between layers (nn.h: HET_BLK_*): blocked where the producer can
 * write it and every layer up to the next one that converts can read it, with 16 | C on each
 * edge; the model's input and output stay plain. take[i]: layer i's input may be blocked. The
 * sizes do not depend on the layout (no padding with 16 | C), so nothing else changes. Then
 * fusion: a ReLU after a layer that can apply it (het_layer_plan.fuse_relu) is applied there,
 * and the ReLU layer shares that layer's output buffer (size_chunks) and does nothing in
 * forward; its backward is unchanged (it masks by its output, which is that buffer).
 * HET_LAYOUT=plain keeps every edge plain and fuses nothing (the reference execution, for
 * comparisons). */
int het_layers_choose_layouts(het_layer **layers, const het_layer_plan *plans, int n) {
    const char *e = getenv("HET_LAYOUT");
    const int allow = !(e && strcmp(e, "plain") == 0);
    int *take = calloc((size_t)n + 1, sizeof *take);
    if (!take) return het_error_set(HET_ENOMEM, "out of memory for the model plan");
    for (int i = n - 1; i >= 0; i--) {
        const het_layer *l = layers[i];
        const int blk = plans[i].blk;
        const int can = allow && (blk & HET_BLK_TAKE) && l->in.c % HET_BLK == 0;
        take[i] = (blk & HET_BLK_KEEP) ? can && take[i + 1] : can;
    }
    int cur = 0; /* the model's input is plain */
    for (int i = 0; i < n; i++) {
        het_layer *l = layers[i];
        const int blk = plans[i].blk;
        l->in_blk = cur;
        if (!(blk & HET_BLK_KEEP))
            cur = allow && (blk & HET_BLK_EMIT) && l->out.c % HET_BLK == 0 && take[i + 1];
        l->out_blk = cur; /* a KEEP layer's blocked input implies take[i + 1] */
    }
    free(take);
    for (int i = 0; i < n; i++) layers[i]->relu_out = layers[i]->fused_away = 0;
    for (int i = 0; i + 1 < n; i++)
        if (allow && plans[i].fuse_relu && het_nn_is_relu(layers[i + 1]))
            layers[i]->relu_out = layers[i + 1]->fused_away = 1;
    return HET_OK;
}

/* The worker count, the chunk (samples per pass through the layers) and the per-chunk sizes
 * and offsets of the activations, caches, scratch and gradient buffers. */
static void size_chunks(het_model *m, int workers) {
    m->workers = workers < m->max_batch ? workers : m->max_batch;
    m->sub_max = (m->max_batch + m->workers - 1) / m->workers;
    size_t per_sample = 2 * m->max_io, max_work = 0;
    for (int i = 0; i < m->n_layers; i++) {
        per_sample += het_shape_size(m->plans[i].out) + m->plans[i].cache_per_sample;
        if (m->plans[i].work_per_sample > max_work) max_work = m->plans[i].work_per_sample;
    }
    per_sample = (per_sample + max_work) * sizeof(float);
    size_t fit = HET_MODEL_CHUNK_BYTES / (per_sample ? per_sample : 1);
    m->chunk = fit > HET_MODEL_CHUNK ? (int)(fit < (size_t)m->sub_max ? fit : (size_t)m->sub_max)
                                     : HET_MODEL_CHUNK;
    if (m->coupled || m->chunk > m->sub_max) m->chunk = m->sub_max;
    size_t sub = (size_t)m->chunk;
    for (int i = 0; i < m->n_layers; i++) {
        het_layer_plan *p = &m->plans[i];
        m->cache_off[i] = m->cache_floats;
        if (m->layers[i]->fused_away) { /* a fused ReLU: its output is its input's buffer */
            m->act_off[i] = m->act_off[i - 1];
        } else {
            m->act_off[i] = m->act_floats;
            m->act_floats += het_shape_size(p->out) * sub;
        }
        m->cache_floats += p->cache_per_sample * sub;
        size_t wf = p->work_per_sample * sub + p->work_fixed;
        if (wf > m->work_floats) m->work_floats = wf;
    }
    m->dbuf_floats = m->max_io * sub;
}

/* Pass 2: the flat buffers and every worker's. */
static int alloc_buffers(het_model *m) {
    m->params = model_alloc(m, m->n_params);
    m->grads = model_alloc(m, m->n_params + HET_MODEL_GRAD_TAIL);
    m->state = m->n_state ? model_alloc(m, m->n_state) : NULL;
    m->logits = model_alloc(m, (size_t)m->classes * (size_t)m->max_batch);
    m->w = calloc((size_t)m->workers, sizeof *m->w);
    if (!m->params || !m->grads || (m->n_state && !m->state) || !m->logits || !m->w)
        return het_error_set(HET_ENOMEM, "out of memory for model buffers");
    for (int i = 0; i < m->workers; i++) {
        het_worker *wk = &m->w[i];
        wk->acts = model_alloc(m, m->act_floats);
        wk->cache = model_alloc(m, m->cache_floats);
        wk->work = model_alloc(m, m->work_floats);
        wk->dbuf[0] = model_alloc(m, m->dbuf_floats);
        wk->dbuf[1] = model_alloc(m, m->dbuf_floats);
        wk->probs = model_alloc(m, (size_t)m->classes * (size_t)m->chunk);
        wk->grads = i > 0 ? model_alloc(m, m->n_params) : NULL;
        if (!wk->acts || !wk->cache || !wk->work || !wk->dbuf[0] || !wk->dbuf[1] || !wk->probs ||
            (i > 0 && !wk->grads))
            return het_error_set(HET_ENOMEM, "out of memory for worker %d buffers", i);
    }
    return HET_OK;
}

/* The model struct with its own copy of the layer array and the per-layer plan arrays; NULL
 * (message set) on failure, with the layers destroyed. */
static het_model *model_new(het_shape in, het_layer **layers, int n_layers, int max_batch) {
    het_model *m = calloc(1, sizeof *m);
    het_layer **own = calloc((size_t)n_layers, sizeof *own);
    if (!m || !own) {
        destroy_layers(layers, n_layers);
        free(m);
        free(own);
        het_error_set(HET_ENOMEM, "out of memory for the model");
        return NULL;
    }
    memcpy(own, layers, (size_t)n_layers * sizeof *own);
    m->layers = own;
    m->n_layers = n_layers;
    m->in = in;
    m->max_batch = max_batch;
    m->plans = calloc((size_t)n_layers, sizeof *m->plans);
    m->param_off = calloc((size_t)n_layers, sizeof(size_t));
    m->state_off = calloc((size_t)n_layers, sizeof(size_t));
    m->act_off = calloc((size_t)n_layers, sizeof(size_t));
    m->cache_off = calloc((size_t)n_layers, sizeof(size_t));
    if (!m->plans || !m->param_off || !m->state_off || !m->act_off || !m->cache_off) {
        het_model_free(m);
        het_error_set(HET_ENOMEM, "out of memory for the model plan");
        return NULL;
    }
    return m;
}

int het_model_create(het_model **out, het_shape in, het_layer **layers, int n_layers,
                     int max_batch, int workers) {
    *out = NULL;
    if (n_layers <= 0 || max_batch <= 0 || workers <= 0) {
        destroy_layers(layers, n_layers);
        return het_error_set(HET_EINVAL, "model needs layers, max_batch > 0 and workers > 0");
    }
    het_model *m = model_new(in, layers, n_layers, max_batch);
    if (!m) return HET_ENOMEM;
    int st = HET_OK;
    for (int i = 0; i < n_layers && st == HET_OK; i++)
        if (!layers[i]) st = het_error_set(HET_ENOMEM, "out of memory creating layer %d", i);
    if (st == HET_OK) st = plan_layers(m);
    if (st == HET_OK) st = het_layers_choose_layouts(m->layers, m->plans, m->n_layers);
    if (st == HET_OK) {
        size_chunks(m, workers);
        st = alloc_buffers(m);
    }
    if (st == HET_OK)
        st = het_stack_create(&m->stack, m->layers, m->param_off, n_layers, max_batch, m->workers,
                              &m->bytes);
    if (st == HET_OK) st = het_pool_create(&m->pool, m->workers);
    if (st == HET_OK && m->coupled && m->workers > 1)
        st = het_team_create(&m->team, m->workers, m->team_doubles);
    if (st != HET_OK) {
        het_model_free(m);
        return st;
    }
    *out = m;
    return HET_OK;
}

/* ---------------------------------------------------------------- precision */

const char *het_precision_name(het_precision p) {
    switch (p) {
    case HET_PREC_FP32: return "fp32";
    case HET_PREC_BF16: return "bf16";
    }
    return "unknown";
}

/* The edges whose activations stay bf16 (nn.h: het_model_lp_edges): a convolution's blocked
 * output, through the ReLU it applies, into a convolution's blocked input, both on oneDNN's
 * bf16 kernels. Only there: every other layer reads fp32, and a pooling or batch norm between
 * two convolutions would not see the values rounding commutes with. */
static void choose_lp_edges(het_model *m) {
    const char *e = getenv("HET_BF16_ACTS");
    const int allow = m->prec == HET_PREC_BF16 && !(e && strcmp(e, "fp32") == 0);
    het_layer **L = m->layers;
    m->lp_edges = 0;
    for (int i = 0; i < m->n_layers; i++) L[i]->in_lp = L[i]->out_lp = 0;
    for (int i = 0; allow && i < m->n_layers; i++) {
        const int j = i + 1 + (L[i]->relu_out ? 1 : 0); /* the consumer, past a fused ReLU */
        if (j >= m->n_layers || !L[i]->out_blk || !L[j]->in_blk || !het_nn_conv_lp(L[i]) ||
            !het_nn_conv_lp(L[j]))
            continue;
        L[i]->out_lp = L[j]->in_lp = 1;
        if (L[i]->relu_out) L[i + 1]->in_lp = L[i + 1]->out_lp = 1;
        m->lp_edges++;
    }
}

int het_model_set_precision(het_model *m, het_precision p) {
    if (p != HET_PREC_FP32 && p != HET_PREC_BF16)
        return het_error_set(HET_EINVAL, "precision %d: expected fp32 or bf16", (int)p);
    if (p == HET_PREC_BF16 && !m->params_lp) {
        m->params_lp = model_alloc(m, m->n_params);
        if (!m->params_lp) return het_error_set(HET_ENOMEM, "out of memory for the bf16 weights");
        int bits = 0;
        for (int i = 0; i < m->n_layers; i++) bits |= m->plans[i].lp_bits;
        if (bits) { /* n_params uint16: half as many floats, rounded up */
            m->params_bits = (uint16_t *)model_alloc(m, (m->n_params + 1) / 2);
            if (!m->params_bits) return het_error_set(HET_ENOMEM, "out of memory for the bf16 weights");
        }
        for (int i = 0; i < m->workers; i++) {
            m->w[i].lp = model_alloc(m, HET_LP_PER_SAMPLE(m->max_io) * (size_t)m->chunk);
            if (!m->w[i].lp)
                return het_error_set(HET_ENOMEM, "out of memory for worker %d's bf16 scratch", i);
        }
    }
    m->prec = p;
    choose_lp_edges(m);
    return HET_OK;
}

int het_model_lp_edges(const het_model *m) { return m->lp_edges; }

het_precision het_model_precision(const het_model *m) { return m->prec; }

void het_model_refresh_lp(het_model *m) {
    if (m->prec != HET_PREC_BF16) return;
    memcpy(m->params_lp, m->params, sizeof(float) * m->n_params);
    for (int i = 0; i < m->n_layers; i++)
        for (int r = 0; r < 2; r++) {
            const het_layer_plan *p = &m->plans[i];
            float *w = m->params_lp + m->param_off[i] + p->lp_off[r];
            if (p->lp_len[r]) het_vround_bf16(w, w, p->lp_len[r]);
            if (p->lp_len[r] && p->lp_bits && m->params_bits) /* exact: w is rounded */
                het_bf16_bits(m->params_bits + m->param_off[i] + p->lp_off[r], w, p->lp_len[r]);
        }
}

/* ---------------------------------------------------------------- accessors */

void het_model_init_params(het_model *m, uint64_t seed) {
    for (int i = 0; i < m->n_layers; i++) {
        het_layer *l = m->layers[i];
        if (!l->ops->init) continue;
        het_rng rng;
        het_rng_seed2(&rng, seed, (uint64_t)i);
        l->ops->init(l, m->params + m->param_off[i], m->state ? m->state + m->state_off[i] : NULL,
                     &rng);
    }
}

float *het_model_params(het_model *m) { return m->params; }
float *het_model_grads(het_model *m) { return m->grads; }
float *het_model_state(het_model *m) { return m->state; }
size_t het_model_n_params(const het_model *m) { return m->n_params; }
size_t het_model_n_state(const het_model *m) { return m->n_state; }
int het_model_n_layers(const het_model *m) { return m->n_layers; }
int het_model_max_batch(const het_model *m) { return m->max_batch; }
int het_model_workers(const het_model *m) { return m->workers; }

int het_model_worker_clocks(const het_model *m, clockid_t *out, int cap) {
    return m && m->pool ? het_pool_cpu_clocks(m->pool, out, cap) : 0;
}
het_shape het_model_in_shape(const het_model *m) { return m->in; }
int het_model_n_classes(const het_model *m) { return m->classes; }
const het_layer *het_model_layer(const het_model *m, int i) { return m->layers[i]; }
size_t het_model_bytes(const het_model *m) { return m->bytes; }

void het_model_layer_params(const het_model *m, int i, size_t *offset, size_t *count) {
    *offset = m->param_off[i];
    *count = m->plans[i].n_params;
}

void het_model_layer_state(const het_model *m, int i, size_t *offset, size_t *count) {
    *offset = m->state_off[i];
    *count = m->plans[i].n_state;
}

/* Multiply-adds of the weight-bearing layers, counted as 2 FLOPs each: every parameter is used
 * once per output position (dense: once; conv: oh*ow times). Element-wise layers are not
 * counted. */
double het_model_flops_per_sample(const het_model *m) {
    double f = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const het_layer *l = m->layers[i];
        f += 2.0 * (double)m->plans[i].n_params * (double)l->out.h * (double)l->out.w;
    }
    return f;
}

/* ---------------------------------------------------------------- hooks */

static void count_hooks(het_model *m) {
    m->n_grad_hooks = m->n_progress_hooks = 0;
    for (int i = 0; i < m->n_hooks; i++) {
        m->n_grad_hooks += m->hooks[i].grad != NULL;
        m->n_progress_hooks += m->hooks[i].progress != NULL;
    }
}

int het_model_add_hook(het_model *m, const het_model_hook *h) {
    if (!h || (!h->grad && !h->progress))
        return het_error_set(HET_EINVAL, "model hook: needs a grad or a progress callback");
    if (m->n_hooks >= HET_MODEL_MAX_HOOKS)
        return het_error_set(HET_EINVAL, "model hook: the chain is full (%d hooks)",
                             HET_MODEL_MAX_HOOKS);
    m->hooks[m->n_hooks] = *h;
    m->n_hooks++;
    count_hooks(m);
    return HET_OK;
}

void het_model_remove_hook(het_model *m, void *user) {
    int k = 0;
    for (int i = 0; i < m->n_hooks; i++)
        if (m->hooks[i].user != user) m->hooks[k++] = m->hooks[i];
    m->n_hooks = k;
    count_hooks(m);
}

/* ---------------------------------------------------------------- element-wise work */

void het_model_slice(const het_model *m, int widx, size_t n, size_t *lo, size_t *hi) {
    size_t blocks = (n + 15) / 16, per = (blocks + (size_t)m->workers - 1) / (size_t)m->workers;
    size_t a = per * 16 * (size_t)widx, b = a + per * 16;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

typedef struct range_job {
    const het_model *m;
    size_t n;
    void (*fn)(void *user, size_t lo, size_t hi);
    void *user;
} range_job;

static void range_task(void *user, int widx) {
    const range_job *j = user;
    size_t lo, hi;
    het_model_slice(j->m, widx, j->n, &lo, &hi);
    if (lo < hi) j->fn(j->user, lo, hi);
}

void het_model_parallel_for(het_model *m, size_t n, void (*fn)(void *user, size_t lo, size_t hi),
                            void *user) {
    if (m->workers == 1 || n < 32) {
        if (n > 0) fn(user, 0, n);
        return;
    }
    range_job j = {m, n, fn, user};
    het_pool_run(m->pool, range_task, &j);
}

static void zero_range(void *user, size_t lo, size_t hi) {
    memset((float *)user + lo, 0, sizeof(float) * (hi - lo));
}

void het_model_zero_grads(het_model *m) { het_model_parallel_for(m, m->n_params, zero_range, m->grads); }

/* The optimizer over the flat buffers, on the worker threads, each over its own slice
 * (element-wise, so the result does not depend on the split). */
typedef struct update_job {
    het_model *m;
    const het_update *u;
} update_job;

static void update_range(void *user, size_t lo, size_t hi) {
    update_job *j = user;
    const het_update *u = j->u;
    if (!het_optim_step_range(u->optim, u->lr, j->m->params, j->m->grads, u->state,
                              j->m->n_params, u->t, lo, hi) && u->nonfinite)
        __atomic_store_n(u->nonfinite, 1, __ATOMIC_RELAXED); /* workers may meet here */
}

void het_model_update(het_model *m, const het_update *u) {
    update_job j = {m, u};
    het_model_parallel_for(m, m->n_params, update_range, &j);
}

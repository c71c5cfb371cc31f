/* DESIGN: the model.
 *
 * A model is a list of layers planned in two passes: first every layer's plan() gives its
 * output shape and buffer needs, then one allocation each for the trainable parameters, their
 * gradients and the non-trainable state, with a view (offset) per layer. Zeroing gradients is
 * one memset, an optimizer is one loop, averaging gradients across ranks is one all-reduce.
 *
 * Workers: a batch is split into `workers` contiguous sub-batches run by a small thread pool
 * (the calling thread is worker 0). Each worker has its own activations, caches, scratch and
 * (for workers > 0) gradient buffer; parameters and state are shared read-only. After backward
 * the workers' gradients are added into the model's gradient buffer in a fixed order (worker
 * 0, 1, ...), so results are deterministic for a given worker count. Layers that couple the
 * samples of a batch (batch norm) force one worker. With one worker, gradients accumulate
 * directly into the model's buffer and the gradient hook fires as soon as each layer's
 * backward completes (what bucketed all-reduce needs to overlap communication).
 *
 * Backward skips the input gradient of every layer below the first layer with parameters. */
#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hetrain/nn.h"
#include "nn/dense_stack.h"

/* Chunks: a worker runs its share through all layers a chunk of samples at a time, so that a
 * chunk's activations stay in cache. A chunk holds at least HET_MODEL_CHUNK samples, more while
 * its buffers fit in HET_MODEL_CHUNK_BYTES (small models such as the MLP then run their whole
 * share at once, which keeps their matrix products large). */
#ifndef HET_MODEL_CHUNK
#define HET_MODEL_CHUNK 16
#endif
#ifndef HET_MODEL_CHUNK_BYTES
#define HET_MODEL_CHUNK_BYTES (1u << 20)
#endif

typedef struct het_worker {
    float *acts;    /* per layer: out_size * chunk */
    float *cache;   /* per layer: cache_per_sample * chunk */
    float *work;    /* shared scratch */
    float *dbuf[2]; /* ping-pong gradient buffers */
    float *probs;   /* classes * chunk */
    float *grads;   /* own gradients (worker > 0); worker 0 uses the model's */
    het_rng rng;
    /* current task */
    const float *x;
    const uint8_t *y;
    int batch;
    int start; /* index of x[0] in the whole batch */
    het_batch_result res;
} het_worker;

typedef enum { TASK_TRAIN, TASK_FORWARD, TASK_REDUCE, TASK_RANGE, TASK_STACK, TASK_QUIT } task_kind;

struct het_model {
    het_shape in;
    int n_layers;
    het_layer **layers;
    het_layer_plan *plans;
    size_t *param_off, *state_off, *act_off, *cache_off;
    size_t n_params, n_state, act_floats, cache_floats, work_floats, dbuf_floats;
    int first_param_layer; /* lowest layer with parameters, n_layers if none */
    int classes, max_batch, sub_max, workers, chunk;
    float *params, *grads, *state, *logits;
    het_worker *w;
    het_grad_hook hook;
    void *hook_user;
    het_stack *stack; /* the dense-stack executor (dense_stack.c), NULL if not eligible */
    size_t bytes;
    /* task parameters shared with the pool */
    task_kind task;
    int train_mode;
    float grad_scale;
    uint64_t step_seed;
    void (*range_fn)(void *user, size_t lo, size_t hi);
    void *range_user;
    size_t range_n;
    const het_stack_job *stack_job;
    /* thread pool */
    pthread_t *threads;
    int n_threads; /* started threads (workers - 1) */
    pthread_mutex_t mu;
    pthread_cond_t cv_start, cv_done;
    atomic_uint generation;
    atomic_int pending;
};

/* ---------------------------------------------------------------- per-worker compute */

static void worker_exec(het_model *m, het_worker *wk, int i, het_exec *ex, float *grads) {
    ex->params = m->params + m->param_off[i];
    ex->grads = grads + m->param_off[i];
    ex->state = m->state ? m->state + m->state_off[i] : NULL;
    ex->cache = wk->cache + m->cache_off[i];
    ex->work = wk->work;
    ex->rng = &wk->rng;
    ex->train = m->train_mode;
}

/* Forward of `n` samples starting at sample `s0` of this worker's share; returns the logits. */
static const float *chunk_forward(het_model *m, het_worker *wk, int widx, int s0, int n) {
    const float *in = wk->x + (size_t)s0 * het_shape_size(m->in);
    for (int i = 0; i < m->n_layers; i++) {
        het_exec ex;
        worker_exec(m, wk, i, &ex, widx == 0 ? m->grads : wk->grads);
        /* dropout stream: by layer and by the chunk's first sample in the whole batch */
        het_rng_seed2(&wk->rng, m->step_seed, ((uint64_t)(wk->start + s0) << 16) | (uint64_t)i);
        float *out = wk->acts + m->act_off[i];
        het_layer *l = m->layers[i];
        l->ops->forward(l, &ex, in, out, n);
        in = out;
    }
    return in;
}

static void chunk_train(het_model *m, het_worker *wk, int widx, int s0, int n, int last) {
    const float *logits = chunk_forward(m, wk, widx, s0, n);
    const uint8_t *y = wk->y + s0;
    int correct = 0;
    wk->res.loss_sum += het_softmax_ce_forward(logits, y, n, m->classes, wk->probs, &correct);
    wk->res.correct += correct;
    wk->res.count += n;
    float *grads = widx == 0 ? m->grads : wk->grads;
    float *dout = wk->dbuf[0];
    het_softmax_ce_backward(dout, wk->probs, y, n, m->classes, m->grad_scale);
    int cur = 0;
    for (int i = m->n_layers - 1; i >= m->first_param_layer; i--) {
        het_layer *l = m->layers[i];
        het_exec ex;
        worker_exec(m, wk, i, &ex, grads);
        het_rng_seed2(&wk->rng, m->step_seed, ((uint64_t)(wk->start + s0) << 16) | (uint64_t)i);
        const float *in = i > 0 ? wk->acts + m->act_off[i - 1] : wk->x + (size_t)s0 * het_shape_size(m->in);
        const float *out = wk->acts + m->act_off[i];
        float *din = i > m->first_param_layer ? wk->dbuf[cur ^ 1] : NULL;
        l->ops->backward(l, &ex, in, out, dout, din, n);
        if (last && m->workers == 1 && m->hook && m->plans[i].n_params > 0)
            m->hook(m->hook_user, i, m->param_off[i], m->plans[i].n_params);
        dout = din;
        cur ^= 1;
    }
}

/* A worker's share runs in chunks of m->chunk samples through all layers, so that the
 * activations of a chunk stay in cache; backward accumulates, so chunks add up exactly as one
 * sub-batch would (up to summation order). */
static void worker_train(het_model *m, het_worker *wk, int widx) {
    for (int s0 = 0; s0 < wk->batch; s0 += m->chunk) {
        int n = wk->batch - s0 < m->chunk ? wk->batch - s0 : m->chunk;
        chunk_train(m, wk, widx, s0, n, s0 + n >= wk->batch);
    }
}

static void worker_forward(het_model *m, het_worker *wk, int widx) {
    for (int s0 = 0; s0 < wk->batch; s0 += m->chunk) {
        int n = wk->batch - s0 < m->chunk ? wk->batch - s0 : m->chunk;
        const float *logits = chunk_forward(m, wk, widx, s0, n);
        memcpy(m->logits + (size_t)(wk->start + s0) * (size_t)m->classes, logits,
               sizeof(float) * (size_t)n * (size_t)m->classes);
    }
}

/* This worker's slice of [0, n): 16-element aligned blocks, in worker order. */
static void worker_slice(const het_model *m, int widx, size_t n, size_t *lo, size_t *hi) {
    size_t blocks = (n + 15) / 16, per = (blocks + (size_t)m->workers - 1) / (size_t)m->workers;
    size_t a = per * 16 * (size_t)widx, b = a + per * 16;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

/* Adds the gradients of workers 1.. into the model's buffer over this worker's slice of the
 * parameters, always in worker order: deterministic. Their buffers are left zeroed (they start
 * zeroed and every training step ends with this reduction). */
static void worker_reduce(het_model *m, int widx) {
    size_t lo, hi;
    worker_slice(m, widx, m->n_params, &lo, &hi);
    for (int w = 1; w < m->workers; w++) {
        if (m->w[w].batch == 0) continue;
        float *g = m->w[w].grads;
        for (size_t j = lo; j < hi; j++) {
            m->grads[j] += g[j];
            g[j] = 0.0f; /* ready for the next step: saves a separate memset */
        }
    }
}

static void run_task(het_model *m, int widx) {
    het_worker *wk = &m->w[widx];
    switch (m->task) {
    case TASK_TRAIN:
        if (wk->batch > 0) {
            worker_train(m, wk, widx); /* workers > 0 start from zero: see worker_reduce */
        }
        break;
    case TASK_FORWARD:
        if (wk->batch > 0) worker_forward(m, wk, widx);
        break;
    case TASK_REDUCE:
        worker_reduce(m, widx);
        break;
    case TASK_RANGE: {
        size_t lo, hi;
        worker_slice(m, widx, m->range_n, &lo, &hi);
        if (lo < hi) m->range_fn(m->range_user, lo, hi);
        break;
    }
    case TASK_STACK:
        het_stack_run(m->stack, m->stack_job, widx, &wk->res);
        break;
    case TASK_QUIT:
        break;
    }
}

/* ---------------------------------------------------------------- thread pool */

typedef struct { het_model *m; int widx; } pool_arg;

static void *pool_main(void *arg) {
    pool_arg *a = arg;
    het_model *m = a->m;
    int widx = a->widx;
    free(a);
    unsigned seen = 0;
    for (;;) {
        /* spin briefly (steps are short), then sleep on the condition variable */
        unsigned g = atomic_load_explicit(&m->generation, memory_order_acquire);
        for (int spin = 0; g == seen && spin < 20000; spin++)
            g = atomic_load_explicit(&m->generation, memory_order_acquire);
        if (g == seen) {
            pthread_mutex_lock(&m->mu);
            while ((g = atomic_load(&m->generation)) == seen) pthread_cond_wait(&m->cv_start, &m->mu);
            pthread_mutex_unlock(&m->mu);
        }
        seen = g;
        if (m->task == TASK_QUIT) return NULL;
        run_task(m, widx);
        if (atomic_fetch_sub_explicit(&m->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&m->mu);
            pthread_cond_signal(&m->cv_done);
            pthread_mutex_unlock(&m->mu);
        }
    }
}

/* Runs m->task on all workers (the caller is worker 0) and waits for all of them. */
static void pool_run(het_model *m) {
    if (m->n_threads == 0) {
        run_task(m, 0);
        return;
    }
    atomic_store(&m->pending, m->n_threads);
    pthread_mutex_lock(&m->mu);
    atomic_fetch_add_explicit(&m->generation, 1, memory_order_release);
    pthread_cond_broadcast(&m->cv_start);
    pthread_mutex_unlock(&m->mu);
    run_task(m, 0);
    for (int spin = 0; atomic_load_explicit(&m->pending, memory_order_acquire) > 0 && spin < 200000;
         spin++) {
    }
    if (atomic_load(&m->pending) > 0) {
        pthread_mutex_lock(&m->mu);
        while (atomic_load(&m->pending) > 0) pthread_cond_wait(&m->cv_done, &m->mu);
        pthread_mutex_unlock(&m->mu);
    }
}

/* ---------------------------------------------------------------- create / free */

static int pool_start(het_model *m) {
    if (m->workers <= 1) return HET_OK;
    m->threads = calloc((size_t)m->workers - 1, sizeof(pthread_t));
    if (!m->threads) return het_error_set(HET_ENOMEM, "out of memory for worker threads");
    for (int i = 1; i < m->workers; i++) {
        pool_arg *a = malloc(sizeof *a);
        if (!a) return het_error_set(HET_ENOMEM, "out of memory for worker threads");
        a->m = m;
        a->widx = i;
        if (pthread_create(&m->threads[i - 1], NULL, pool_main, a) != 0) {
            free(a);
            return het_error_set(HET_ENOMEM, "cannot start worker thread %d", i);
        }
        m->n_threads++;
    }
    return HET_OK;
}

void het_model_free(het_model *m) {
    if (!m) return;
    if (m->n_threads > 0) {
        m->task = TASK_QUIT;
        pthread_mutex_lock(&m->mu);
        atomic_fetch_add(&m->generation, 1);
        pthread_cond_broadcast(&m->cv_start);
        pthread_mutex_unlock(&m->mu);
        for (int i = 0; i < m->n_threads; i++) pthread_join(m->threads[i], NULL);
    }
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv_start);
    pthread_cond_destroy(&m->cv_done);
    free(m->threads);
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
        }
        free(m->w);
    }
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i] && m->layers[i]->ops->destroy) m->layers[i]->ops->destroy(m->layers[i]);
    free(m->layers);
    free(m->plans);
    free(m->param_off);
    free(m->state_off);
    free(m->act_off);
    free(m->cache_off);
    het_free(m->params);
    het_free(m->grads);
    het_free(m->state);
    het_free(m->logits);
    free(m);
}

static float *model_alloc(het_model *m, size_t floats) {
    m->bytes += sizeof(float) * (floats ? floats : 1);
    return het_alloc(sizeof(float) * (floats ? floats : 1));
}

int het_model_create(het_model **out, het_shape in, het_layer **layers, int n_layers,
                     int max_batch, int workers) {
    *out = NULL;
    if (n_layers <= 0 || max_batch <= 0 || workers <= 0) {
        for (int i = 0; i < n_layers; i++)
            if (layers[i] && layers[i]->ops->destroy) layers[i]->ops->destroy(layers[i]);
        return het_error_set(HET_EINVAL, "model needs layers, max_batch > 0 and workers > 0");
    }
    het_model *m = calloc(1, sizeof *m);
    if (!m) {
        for (int i = 0; i < n_layers; i++)
            if (layers[i] && layers[i]->ops->destroy) layers[i]->ops->destroy(layers[i]);
        return het_error_set(HET_ENOMEM, "out of memory for the model");
    }
    m->layers = calloc((size_t)n_layers, sizeof *m->layers);
    if (!m->layers) {
        for (int i = 0; i < n_layers; i++)
            if (layers[i] && layers[i]->ops->destroy) layers[i]->ops->destroy(layers[i]);
        free(m);
        return het_error_set(HET_ENOMEM, "out of memory for the model");
    }
    m->n_layers = n_layers;
    int st = HET_OK;
    for (int i = 0; i < n_layers; i++) {
        m->layers[i] = layers[i];
        if (!layers[i]) st = het_error_set(HET_ENOMEM, "out of memory creating layer %d", i);
    }
    m->in = in;
    m->max_batch = max_batch;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv_start, NULL);
    pthread_cond_init(&m->cv_done, NULL);
    atomic_init(&m->generation, 0);
    atomic_init(&m->pending, 0);
    if (st != HET_OK) goto fail;
    m->plans = calloc((size_t)n_layers, sizeof *m->plans);
    m->param_off = calloc((size_t)n_layers, sizeof(size_t));
    m->state_off = calloc((size_t)n_layers, sizeof(size_t));
    m->act_off = calloc((size_t)n_layers, sizeof(size_t));
    m->cache_off = calloc((size_t)n_layers, sizeof(size_t));
    if (!m->plans || !m->param_off || !m->state_off || !m->act_off || !m->cache_off) {
        st = het_error_set(HET_ENOMEM, "out of memory for the model plan");
        goto fail;
    }

    /* pass 1: plan shapes and sizes */
    het_shape s = in;
    int coupled = 0;
    m->first_param_layer = n_layers;
    size_t max_io = het_shape_size(in);
    for (int i = 0; i < n_layers; i++) {
        het_layer *l = m->layers[i];
        het_layer_plan *p = &m->plans[i];
        memset(p, 0, sizeof *p);
        st = l->ops->plan(l, s, p);
        if (st != HET_OK) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", het_error_msg());
            st = het_error_set(st, "layer %d (%s) on input %dx%dx%d: %s", i, l->ops->name, s.c,
                               s.h, s.w, msg);
            goto fail;
        }
        l->in = s;
        l->out = p->out;
        if (l->batch_coupled) coupled = 1;
        if (p->n_params > 0 && m->first_param_layer == n_layers) m->first_param_layer = i;
        m->param_off[i] = m->n_params;
        m->state_off[i] = m->n_state;
        m->act_off[i] = m->act_floats;
        m->cache_off[i] = m->cache_floats;
        m->n_params += p->n_params;
        m->n_state += p->n_state;
        s = p->out;
        if (het_shape_size(s) > max_io) max_io = het_shape_size(s);
    }
    m->classes = (int)het_shape_size(s);
    m->workers = coupled ? 1 : workers;
    if (m->workers > max_batch) m->workers = max_batch;
    m->sub_max = (max_batch + m->workers - 1) / m->workers;
    size_t per_sample = 2 * max_io;
    size_t max_work = 0;
    for (int i = 0; i < n_layers; i++) {
        per_sample += het_shape_size(m->plans[i].out) + m->plans[i].cache_per_sample;
        if (m->plans[i].work_per_sample > max_work) max_work = m->plans[i].work_per_sample;
    }
    per_sample = (per_sample + max_work) * sizeof(float);
    size_t fit = HET_MODEL_CHUNK_BYTES / (per_sample ? per_sample : 1);
    m->chunk = fit > HET_MODEL_CHUNK ? (int)(fit < (size_t)m->sub_max ? fit : (size_t)m->sub_max)
                                     : HET_MODEL_CHUNK;
    if (coupled || m->chunk > m->sub_max) m->chunk = m->sub_max;
    size_t sub = (size_t)m->chunk;
    for (int i = 0; i < n_layers; i++) {
        het_layer_plan *p = &m->plans[i];
        m->act_off[i] = m->act_floats;
        m->cache_off[i] = m->cache_floats;
        m->act_floats += het_shape_size(p->out) * sub;
        m->cache_floats += p->cache_per_sample * sub;
        size_t wf = p->work_per_sample * sub + p->work_fixed;
        if (wf > m->work_floats) m->work_floats = wf;
    }
    m->dbuf_floats = max_io * sub;

    /* pass 2: allocate */
    m->params = model_alloc(m, m->n_params);
    m->grads = model_alloc(m, m->n_params);
    m->state = m->n_state ? model_alloc(m, m->n_state) : NULL;
    m->logits = model_alloc(m, (size_t)m->classes * (size_t)max_batch);
    m->w = calloc((size_t)m->workers, sizeof *m->w);
    if (!m->params || !m->grads || (m->n_state && !m->state) || !m->logits || !m->w) {
        st = het_error_set(HET_ENOMEM, "out of memory for model buffers");
        goto fail;
    }
    for (int i = 0; i < m->workers; i++) {
        het_worker *wk = &m->w[i];
        wk->acts = model_alloc(m, m->act_floats);
        wk->cache = model_alloc(m, m->cache_floats);
        wk->work = model_alloc(m, m->work_floats);
        wk->dbuf[0] = model_alloc(m, m->dbuf_floats);
        wk->dbuf[1] = model_alloc(m, m->dbuf_floats);
        wk->probs = model_alloc(m, (size_t)m->classes * sub);
        wk->grads = i > 0 ? model_alloc(m, m->n_params) : NULL;
        if (!wk->acts || !wk->cache || !wk->work || !wk->dbuf[0] || !wk->dbuf[1] || !wk->probs ||
            (i > 0 && !wk->grads)) {
            st = het_error_set(HET_ENOMEM, "out of memory for worker %d buffers", i);
            goto fail;
        }
    }
    st = het_stack_create(&m->stack, m->layers, m->param_off, n_layers, max_batch, m->workers,
                          &m->bytes);
    if (st != HET_OK) goto fail;
    st = pool_start(m);
    if (st != HET_OK) goto fail;
    *out = m;
    return HET_OK;
fail:
    het_model_free(m);
    return st;
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

static void zero_range(void *user, size_t lo, size_t hi) {
    memset((float *)user + lo, 0, sizeof(float) * (hi - lo));
}

void het_model_zero_grads(het_model *m) { het_model_parallel_for(m, m->n_params, zero_range, m->grads); }

void het_model_parallel_for(het_model *m, size_t n, void (*fn)(void *user, size_t lo, size_t hi),
                            void *user) {
    if (m->workers == 1 || n < 32) {
        if (n > 0) fn(user, 0, n);
        return;
    }
    m->task = TASK_RANGE;
    m->range_fn = fn;
    m->range_user = user;
    m->range_n = n;
    pool_run(m);
}

void het_model_set_grad_hook(het_model *m, het_grad_hook hook, void *user) {
    m->hook = hook;
    m->hook_user = user;
}

/* ---------------------------------------------------------------- steps */

static int split_batch(het_model *m, const float *x, const uint8_t *y, int batch) {
    if (batch <= 0 || batch > m->max_batch)
        return het_error_set(HET_EINVAL, "batch %d outside 1..%d (the model's max batch)", batch,
                             m->max_batch);
    size_t in_sz = het_shape_size(m->in);
    int per = (batch + m->workers - 1) / m->workers, start = 0;
    for (int w = 0; w < m->workers; w++) {
        int n = batch - start < per ? batch - start : per;
        if (n < 0) n = 0;
        m->w[w].x = x + (size_t)start * in_sz;
        m->w[w].y = y ? y + start : NULL;
        m->w[w].batch = n;
        m->w[w].start = start;
        memset(&m->w[w].res, 0, sizeof m->w[w].res);
        start += n;
    }
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

static void gather_results(het_model *m, het_batch_result *res) {
    het_batch_result r = {0, 0, 0};
    for (int w = 0; w < m->workers; w++) {
        r.loss_sum += m->w[w].res.loss_sum;
        r.correct += m->w[w].res.correct;
        r.count += m->w[w].res.count;
    }
    if (res) *res = r;
}

int het_model_train_batch(het_model *m, const float *x, const uint8_t *y, int batch,
                          float grad_scale, uint64_t step_seed, het_batch_result *res) {
    int st = split_labeled(m, x, y, batch);
    if (st != HET_OK) return st;
    m->task = TASK_TRAIN;
    m->train_mode = 1;
    m->grad_scale = grad_scale;
    m->step_seed = step_seed;
    pool_run(m);
    if (m->workers > 1) {
        m->task = TASK_REDUCE;
        pool_run(m);
        if (m->hook)
            for (int i = m->n_layers - 1; i >= 0; i--)
                if (m->plans[i].n_params > 0)
                    m->hook(m->hook_user, i, m->param_off[i], m->plans[i].n_params);
    }
    gather_results(m, res);
    return HET_OK;
}

/* The optimizer over the flat buffers, on the worker threads, each over its own slice
 * (element-wise, so the result does not depend on the split). */
typedef struct update_job {
    het_model *m;
    const het_update *u;
} update_job;

static void update_range(void *user, size_t lo, size_t hi) {
    update_job *j = user;
    const het_update *u = j->u;
    het_optim_step_range(u->optim, u->lr, j->m->params, j->m->grads, u->state, j->m->n_params,
                         u->t, lo, hi);
}

void het_model_update(het_model *m, const het_update *u) {
    update_job j = {m, u};
    het_model_parallel_for(m, m->n_params, update_range, &j);
}

int het_model_stacked(const het_model *m) { return m->stack != NULL; }

int het_model_train_step(het_model *m, const float *x, const uint8_t *y, int batch,
                         float grad_scale, uint64_t step_seed, const het_update *u,
                         het_batch_result *res) {
    if (m->hook)
        return het_error_set(HET_EINVAL, "train_step: a gradient hook is set, but the update "
                             "cannot wait for it (use het_model_train_batch)");
    if (!m->stack) {
        het_model_zero_grads(m);
        int st = het_model_train_batch(m, x, y, batch, grad_scale, step_seed, res);
        if (st == HET_OK) het_model_update(m, u);
        return st;
    }
    int st = split_labeled(m, x, y, batch);
    if (st != HET_OK) return st;
    het_stack_job j = {x, y, batch, grad_scale, m->params, m->grads, m->n_params, u};
    m->stack_job = &j;
    m->task = TASK_STACK;
    pool_run(m);
    m->stack_job = NULL;
    gather_results(m, res);
    return HET_OK;
}

const float *het_model_forward(het_model *m, const float *x, int batch, int train,
                               uint64_t step_seed) {
    if (split_batch(m, x, NULL, batch) != HET_OK) return NULL;
    m->task = TASK_FORWARD;
    m->train_mode = train;
    m->step_seed = step_seed;
    pool_run(m);
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

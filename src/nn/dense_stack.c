/* DESIGN: the feature-parallel executor of dense stacks, with the optimizer folded in.
 *
 * A model whose layers are only dense layers, each optionally followed by a ReLU (flatten
 * anywhere; it moves no data), is a chain of stages out_k = act(in_k W_k^T + b_k). For such
 * a model het_model_train_step runs this executor instead of the generic one (nn/model.c),
 * which splits the BATCH over workers: there, every worker reads all of W, writes a private
 * copy of all of dW, the copies are summed, and the optimizer then makes one more pass over
 * parameters, gradients and state, which by then have left the cache. For the MLP that is
 * four passes over 1 MB buffers per step, a third of its time on two cores.
 *
 * Here the workers split the FEATURES: worker w owns rows [r0, r1) of every W_k (units of 16
 * rows, so that no two workers write one cache line of a weight matrix) and computes, over
 * the whole batch,
 *   forward   out_k[:, r0:r1] = in_k W_k[r0:r1]^T + b_k[r0:r1], ReLU     (reads own rows only)
 *   backward  dW_k[r0:r1] = dZ_k[:, r0:r1]^T in_k, db_k[r0:r1]            (no reduction at all)
 *             dIn_k[:, q0:q1] = dZ_k W_k[:, q0:q1], [q0, q1) = its rows of stage k-1
 * then updates its own rows of W_k and b_k with the optimizer: the gradient rows were just
 * written, so the update finds them in cache, and the worker's parameters, gradients and
 * optimizer state stay in its core's cache from step to step (for the MLP on two workers,
 * 0.4 MB each of W, dW and state per core). Barriers: after each stage's forward (the next
 * stage reads all columns of out_k), after the loss (each worker computes the softmax of its
 * share of the samples, whole rows), before each dIn_k (it needs all columns of dZ_k), and one
 * at the end. A stage's rows may only be updated once every worker has read W_k for dIn_k:
 * stage 0 (no dIn) right after each block of dW rows, stage k >= 2 after the barrier of stage
 * k - 1, stage 1 after the last barrier.
 *
 * The products run in blocks of 16 rows: OpenBLAS takes its small-matrix kernels (no packing)
 * for such shapes, measured on this 2-core VM, one thread (us per 64-sample step, MLP first
 * layer, 128 rows): forward 211 -> 85, weight gradient 182 -> 159.
 *
 * The result equals the generic executor's (and PyTorch's) up to float rounding: sums over the
 * batch run in one product instead of one per worker. It is deterministic for a given worker
 * count. Dropout, batch norm or any other layer make the model ineligible (generic path).
 * Eligibility is decided by the layers' ops tables (nn/layer_kinds.h), never by name: this
 * file re-implements dense.c's and relu.c's math, so only those very layers qualify.
 *
 * Progress hooks: worker 0 reports each stage (its dense layer's index) after the stage's
 * forward and after its backward, before the next barrier. */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "hetrain/tensor.h"
#include "nn/dense_stack.h"
#include "nn/layer_kinds.h"

#define STACK_BLOCK 16 /* rows per product and per ownership unit */

typedef struct stage {
    int in_f, out_f;
    int relu;
    int layer;     /* the dense layer's index in the model */
    size_t w_off;  /* W [out_f x in_f] at params + w_off, then b [out_f] */
    float *act;    /* [max_batch x out_f] outputs (after the ReLU) */
    float *dz;     /* [max_batch x out_f] gradient w.r.t. the pre-activation */
} stage;

struct het_stack {
    int n_stages, workers, max_batch;
    stage *st;
    atomic_int bar_count;
    atomic_uint bar_gen;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* All workers meet here. Spins briefly (the waits of a step are microseconds), then yields
 * the core, so that more workers than cores (or several ranks per core) still progress. */
static void stack_barrier(het_stack *s) {
    if (s->workers == 1) return;
    unsigned g = atomic_load_explicit(&s->bar_gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&s->bar_count, 1, memory_order_acq_rel) == s->workers - 1) {
        atomic_store_explicit(&s->bar_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->bar_gen, 1, memory_order_release);
        return;
    }
    for (int spin = 0; atomic_load_explicit(&s->bar_gen, memory_order_acquire) == g; spin++) {
        if (spin < 2000)
            cpu_relax();
        else
            sched_yield();
    }
}

/* Worker w's rows [lo, hi) of n outputs: whole units of STACK_BLOCK rows, split evenly. */
static void own_rows(const het_stack *s, int n, int w, int *lo, int *hi) {
    int units = (n + STACK_BLOCK - 1) / STACK_BLOCK;
    int a = units * w / s->workers * STACK_BLOCK, b = units * (w + 1) / s->workers * STACK_BLOCK;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

int het_stack_create(het_stack **out, het_layer *const *layers, const size_t *param_off,
                     int n_layers, int max_batch, int workers, size_t *bytes) {
    *out = NULL;
    int n = 0;
    for (int i = 0; i < n_layers; i++) {
        if (het_nn_is_dense(layers[i]))
            n++;
        else if (!het_nn_is_relu(layers[i]) && !het_nn_is_flatten(layers[i]))
            return HET_OK; /* another kind of layer: not a dense stack */
    }
    if (n == 0) return HET_OK;
    stage *st = calloc((size_t)n, sizeof *st);
    if (!st) return het_error_set(HET_ENOMEM, "out of memory for the dense-stack plan");
    int k = -1, prev_dense = 0; /* prev_dense: the last layer that moved data was a dense */
    for (int i = 0; i < n_layers; i++) {
        const het_layer *l = layers[i];
        if (het_nn_is_flatten(l)) continue;
        if (het_nn_is_relu(l)) {
            if (!prev_dense) { /* ReLU first, or twice: leave it to the generic path */
                free(st);
                return HET_OK;
            }
            st[k].relu = 1;
            prev_dense = 0;
            continue;
        }
        k++;
        st[k].in_f = (int)het_shape_size(l->in);
        st[k].out_f = (int)het_shape_size(l->out);
        st[k].w_off = param_off[i];
        st[k].layer = i;
        prev_dense = 1;
    }
    het_stack *s = calloc(1, sizeof *s);
    if (!s) {
        free(st);
        return het_error_set(HET_ENOMEM, "out of memory for the dense-stack plan");
    }
    s->n_stages = n;
    s->workers = workers;
    s->max_batch = max_batch;
    s->st = st;
    atomic_init(&s->bar_count, 0);
    atomic_init(&s->bar_gen, 0);
    for (k = 0; k < n; k++) {
        size_t f = (size_t)max_batch * (size_t)st[k].out_f;
        st[k].act = het_alloc(sizeof(float) * f);
        st[k].dz = het_alloc(sizeof(float) * f);
        *bytes += 2 * sizeof(float) * f;
        if (!st[k].act || !st[k].dz) {
            het_stack_free(s);
            return het_error_set(HET_ENOMEM, "out of memory for the dense-stack buffers");
        }
    }
    *out = s;
    return HET_OK;
}

void het_stack_free(het_stack *s) {
    if (!s) return;
    for (int k = 0; k < s->n_stages; k++) {
        het_free(s->st[k].act);
        het_free(s->st[k].dz);
    }
    free(s->st);
    free(s);
}

/* out[:, lo:hi] += b[lo:hi], then ReLU (v < 0 ? 0 : v, NaN passes, as nn/relu.c). */
static void bias_act(float *restrict out, const float *restrict b, int batch, int ld, int lo,
                     int hi, int relu) {
    for (int s = 0; s < batch; s++) {
        float *restrict o = out + (size_t)s * (size_t)ld;
        if (relu)
            for (int j = lo; j < hi; j++) {
                float v = o[j] + b[j];
                o[j] = v < 0.0f ? 0.0f : v;
            }
        else
            for (int j = lo; j < hi; j++) o[j] += b[j];
    }
}

/* dz[:, lo:hi] = 0 where the ReLU's output was not positive (nn/relu.c's backward). */
static void relu_mask(float *restrict dz, const float *restrict act, int batch, int ld, int lo,
                      int hi) {
    for (int s = 0; s < batch; s++) {
        float *restrict d = dz + (size_t)s * (size_t)ld;
        const float *restrict a = act + (size_t)s * (size_t)ld;
        for (int j = lo; j < hi; j++) d[j] = a[j] > 0.0f ? d[j] : 0.0f;
    }
}

/* db[lo:hi] = column sums of dz[:, lo:hi], in sample order as nn/dense.c. */
static void bias_grad(float *restrict db, const float *restrict dz, int batch, int ld, int lo,
                      int hi) {
    for (int j = lo; j < hi; j++) db[j] = 0.0f;
    for (int s = 0; s < batch; s++) {
        const float *restrict d = dz + (size_t)s * (size_t)ld;
        for (int j = lo; j < hi; j++) db[j] += d[j];
    }
}

/* The optimizer over rows [lo, hi) of stage g: those rows of W, then of b. */
static void update_rows(const stage *g, const het_stack_job *j, int lo, int hi) {
    if (lo >= hi) return;
    const het_update *u = j->u;
    size_t I = (size_t)g->in_f, O = (size_t)g->out_f;
    int ok = het_optim_step_range(u->optim, u->lr, j->params, j->grads, u->state, j->n_params,
                                  u->t, g->w_off + (size_t)lo * I, g->w_off + (size_t)hi * I);
    ok &= het_optim_step_range(u->optim, u->lr, j->params, j->grads, u->state, j->n_params,
                               u->t, g->w_off + O * I + (size_t)lo, g->w_off + O * I + (size_t)hi);
    if (!ok && u->nonfinite) __atomic_store_n(u->nonfinite, 1, __ATOMIC_RELAXED);
}

void het_stack_run(het_stack *s, const het_stack_job *j, int w, het_batch_result *res) {
    const int B = j->batch, S = s->n_stages;
    /* forward, stage by stage */
    const float *in = j->x;
    for (int k = 0; k < S; k++) {
        stage *g = &s->st[k];
        const int I = g->in_f, O = g->out_f;
        const float *W = j->params + g->w_off;
        int r0, r1;
        own_rows(s, O, w, &r0, &r1);
        for (int o = r0; o < r1; o += STACK_BLOCK) {
            int n = r1 - o < STACK_BLOCK ? r1 - o : STACK_BLOCK;
            het_gemm(0, 1, B, n, I, 1.0f, in, I, W + (size_t)o * (size_t)I, I, 0.0f, g->act + o, O);
        }
        bias_act(g->act, W + (size_t)O * (size_t)I, B, O, r0, r1, g->relu);
        if (w == 0 && j->progress) j->progress(j->progress_user, g->layer);
        stack_barrier(s);
        in = g->act;
    }
    /* loss over this worker's share of the samples, whole rows of logits */
    stage *L = &s->st[S - 1];
    const int C = L->out_f;
    int s0 = (int)((int64_t)B * w / s->workers), s1 = (int)((int64_t)B * (w + 1) / s->workers);
    if (s1 > s0) {
        int correct = 0;
        float *dz = L->dz + (size_t)s0 * (size_t)C;
        res->loss_sum += het_softmax_ce_forward(L->act + (size_t)s0 * (size_t)C, j->y + s0,
                                                s1 - s0, C, dz, &correct);
        het_softmax_ce_backward(dz, dz, j->y + s0, s1 - s0, C, j->grad_scale);
        res->correct += correct;
        res->count += s1 - s0;
    }
    stack_barrier(s);
    /* backward, stage by stage, updating rows as soon as nobody reads them any more */
    for (int k = S - 1; k >= 0; k--) {
        stage *g = &s->st[k];
        const int I = g->in_f, O = g->out_f;
        const float *x = k > 0 ? s->st[k - 1].act : j->x;
        float *dW = j->grads + g->w_off, *db = dW + (size_t)O * (size_t)I;
        int r0, r1;
        own_rows(s, O, w, &r0, &r1);
        if (g->relu) relu_mask(g->dz, g->act, B, O, r0, r1);
        for (int o = r0; o < r1; o += STACK_BLOCK) {
            int n = r1 - o < STACK_BLOCK ? r1 - o : STACK_BLOCK;
            het_gemm(1, 0, n, I, B, 1.0f, g->dz + o, O, x, I, 0.0f, dW + (size_t)o * (size_t)I, I);
            bias_grad(db, g->dz, B, O, o, o + n);
            if (k == 0) update_rows(g, j, o, o + n); /* nobody reads W_0 in backward */
        }
        if (w == 0 && j->progress) j->progress(j->progress_user, g->layer);
        if (k == 0) break;
        stack_barrier(s); /* all of dZ_k written; every worker is done with W_{k+1} */
        if (k + 1 < S) {
            int u0, u1;
            own_rows(s, s->st[k + 1].out_f, w, &u0, &u1);
            update_rows(&s->st[k + 1], j, u0, u1);
        }
        stage *p = &s->st[k - 1];
        int q0, q1;
        own_rows(s, p->out_f, w, &q0, &q1);
        if (q1 > q0)
            het_gemm(0, 0, B, q1 - q0, O, 1.0f, g->dz, O, j->params + g->w_off + q0, I, 0.0f,
                     p->dz + q0, p->out_f);
    }
    if (S > 1) {
        stack_barrier(s); /* every worker is done with W_1 */
        int u0, u1;
        own_rows(s, s->st[1].out_f, w, &u0, &u1);
        update_rows(&s->st[1], j, u0, u1);
    }
}

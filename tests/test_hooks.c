/* The model's hook chain (het_model_add_hook / het_model_remove_hook): with one and two
 * workers, two clients both get every layer's gradient range exactly once, in reverse order,
 * in the order they were added; progress comes during forward and backward; every call is on
 * the caller's thread; removal, the cap, het_model_train_step's rules, het_model_batch_result
 * inside a grad hook equals the final result;
 * hooks change no bit of the training. */
#include <pthread.h>
#include <string.h>

#include "hetrain/netfile.h"
#include "hetrain/nn.h"
#include "test.h"

#define MAX_EV 4096

/* One shared log of every call, in order, so that the order across clients is checked too. */
typedef struct event {
    int client; /* 0 = A, 1 = B, ... */
    int grad;   /* 1: grad, 0: progress */
    int layer;
    size_t offset, count;
} event;

typedef struct hook_log {
    event ev[MAX_EV];
    int n;
    int off_thread; /* calls not on the caller's thread */
    pthread_t caller;
    het_model *m;
    int have_res; /* batch_result at the first grad call */
    het_batch_result res;
} hook_log;

typedef struct client {
    hook_log *log;
    int id;
} client;

static void log_event(client *c, int grad, int layer, size_t off, size_t count) {
    hook_log *g = c->log;
    if (!pthread_equal(pthread_self(), g->caller)) g->off_thread++;
    if (g->n < MAX_EV) g->ev[g->n++] = (event){c->id, grad, layer, off, count};
}

static void on_grad(void *user, int layer, size_t off, size_t count) {
    client *c = user;
    if (!c->log->have_res) {
        het_model_batch_result(c->log->m, &c->log->res);
        c->log->have_res = 1;
    }
    log_event(c, 1, layer, off, count);
}

static void on_progress(void *user, int layer) { log_event(user, 0, layer, 0, 0); }

static void fill(float *x, size_t n, uint64_t seed) {
    het_rng r;
    het_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * het_rng_uniform(&r) - 1.0f;
}

typedef struct data {
    float *x;
    uint8_t *y;
    int batch;
} data;

static data make_data(het_shape in, int batch) {
    data d = {het_alloc(het_shape_size(in) * (size_t)batch * sizeof(float)), het_alloc((size_t)batch),
              batch};
    fill(d.x, het_shape_size(in) * (size_t)batch, 5);
    for (int i = 0; i < batch; i++) d.y[i] = (uint8_t)(i * 7 % 10);
    return d;
}

static void free_data(data *d) {
    het_free(d->x);
    het_free(d->y);
}

/* Client `id`'s grad calls in the log: once per layer with parameters, in reverse order, the
 * ranges contiguous from the end of the buffer down to 0. */
static void check_grads(const char *what, const hook_log *g, int id, const het_model *m) {
    int L = het_model_n_layers(m), calls = 0, expect = L - 1, ok = 1;
    size_t end = het_model_n_params(m);
    for (int e = 0; e < g->n; e++) {
        const event *v = &g->ev[e];
        if (v->client != id || !v->grad) continue;
        size_t off, cnt;
        while (expect >= 0 && (het_model_layer_params(m, expect, &off, &cnt), cnt == 0)) expect--;
        if (expect < 0 || v->layer != expect || v->offset != off || v->count != cnt ||
            v->offset + v->count != end) {
            CHECK(0, "%s: client %d call %d: layer %d [%zu, +%zu), expected layer %d ending at %zu",
                  what, id, calls, v->layer, v->offset, v->count, expect, end);
            ok = 0;
            break;
        }
        end = v->offset;
        expect--;
        calls++;
    }
    if (ok) CHECK(end == 0, "%s: client %d: grad ranges stop at %zu, not 0", what, id, end);
}

/* Clients are called in the order added: for each grad call of B, the one before it in the
 * log is A's call for the same layer. */
static void check_client_order(const char *what, const hook_log *g) {
    for (int e = 0; e < g->n; e++) {
        const event *v = &g->ev[e];
        if (v->client != 1 || !v->grad) continue;
        CHECK(e > 0 && g->ev[e - 1].client == 0 && g->ev[e - 1].grad &&
                  g->ev[e - 1].layer == v->layer,
              "%s: B's grad call for layer %d does not follow A's", what, v->layer);
    }
}

/* Client A's progress calls: the batch's first forward chunk reports layers 0..L-1 in order,
 * and the last calls are the last chunk's backward, L-1 down to the first layer with
 * parameters. With one worker, each grad call directly follows that layer's backward (the
 * calls of A and B for layer i come right before A's progress for i). */
static void check_progress(const char *what, const hook_log *g, const het_model *m, int workers) {
    int L = het_model_n_layers(m), first = 0, np = 0;
    size_t off, cnt;
    while (first < L && (het_model_layer_params(m, first, &off, &cnt), cnt == 0)) first++;
    int *seq = malloc(sizeof(int) * MAX_EV);
    for (int e = 0; e < g->n; e++)
        if (g->ev[e].client == 0 && !g->ev[e].grad) seq[np++] = g->ev[e].layer;
    int nb = L - first;
    CHECK(np >= L + nb, "%s: %d progress calls, expected at least %d", what, np, L + nb);
    for (int i = 0; i < L && i < np; i++)
        CHECK(seq[i] == i, "%s: progress call %d (forward) reports layer %d", what, i, seq[i]);
    for (int k = 0; k < nb && np - nb + k >= 0; k++)
        CHECK(seq[np - nb + k] == L - 1 - k, "%s: backward progress %d reports layer %d, expected %d",
              what, k, seq[np - nb + k], L - 1 - k);
    free(seq);
    if (workers > 1) return;
    for (int e = 0; e < g->n; e++) {
        const event *v = &g->ev[e];
        if (v->client != 1 || !v->grad) continue;
        CHECK(e + 1 < g->n && g->ev[e + 1].client == 0 && !g->ev[e + 1].grad &&
                  g->ev[e + 1].layer == v->layer,
              "%s: one worker: the grad calls for layer %d must come right after its backward",
              what, v->layer);
    }
}

/* Two clients on one model: A with grad and progress, B with grad only. */
static void test_chain(const char *name, het_shape in, int batch, int workers) {
    char what[96];
    snprintf(what, sizeof what, "%s, %d workers, batch %d", name, workers, batch);
    het_model *m = NULL, *ref = NULL;
    CHECK(het_zoo_build(&m, name, in, 10, batch, workers) == HET_OK, "%s", het_error_msg());
    CHECK(het_zoo_build(&ref, name, in, 10, batch, workers) == HET_OK, "%s", het_error_msg());
    if (!m || !ref) goto out;
    CHECK(het_model_workers(m) == workers, "%s: got %d workers", what, het_model_workers(m));
    het_model_init_params(m, 3);
    het_model_init_params(ref, 3);
    hook_log *g = calloc(1, sizeof *g);
    g->caller = pthread_self();
    g->m = m;
    client a = {g, 0}, b = {g, 1};
    CHECK(het_model_add_hook(m, &(het_model_hook){on_grad, on_progress, &a}) == HET_OK, "%s",
          het_error_msg());
    CHECK(het_model_add_hook(m, &(het_model_hook){on_grad, NULL, &b}) == HET_OK, "%s",
          het_error_msg());
    data d = make_data(in, batch);
    het_batch_result r, rr;
    het_model_zero_grads(m);
    het_model_zero_grads(ref);
    CHECK(het_model_train_batch(m, d.x, d.y, batch, 1.0f / batch, 7, &r) == HET_OK, "%s",
          het_error_msg());
    CHECK(het_model_train_batch(ref, d.x, d.y, batch, 1.0f / batch, 7, &rr) == HET_OK, "%s",
          het_error_msg());
    check_grads(what, g, 0, m);
    check_grads(what, g, 1, m);
    check_client_order(what, g);
    check_progress(what, g, m, workers);
    CHECK(g->off_thread == 0, "%s: %d hook calls off the caller's thread", what, g->off_thread);
    /* het_model_batch_result at the first grad call is already the whole batch's */
    CHECK(g->have_res && g->res.loss_sum == r.loss_sum && g->res.correct == r.correct &&
              g->res.count == r.count,
          "%s: batch_result in the first grad hook: loss %.17g correct %d count %d; final: "
          "loss %.17g correct %d count %d", what, g->res.loss_sum, g->res.correct, g->res.count,
          r.loss_sum, r.correct, r.count);
    het_batch_result after;
    het_model_batch_result(m, &after);
    CHECK(after.loss_sum == r.loss_sum && after.count == batch, "%s: batch_result afterwards: "
          "%.17g / %d vs %.17g / %d", what, after.loss_sum, after.count, r.loss_sum, batch);
    /* hooks change nothing */
    size_t n = het_model_n_params(m);
    CHECK(r.loss_sum == rr.loss_sum && memcmp(het_model_grads(m), het_model_grads(ref),
                                              n * sizeof(float)) == 0,
          "%s: hooks must not change the loss (%.17g vs %.17g) or any gradient bit", what,
          r.loss_sum, rr.loss_sum);
    /* forward alone: progress, layers 0.. in order, nothing else */
    g->n = 0;
    CHECK(het_model_forward(m, d.x, batch, 0, 0) != NULL, "%s", het_error_msg());
    int L = het_model_n_layers(m), grads = 0;
    for (int e = 0; e < g->n; e++) grads += g->ev[e].grad;
    CHECK(grads == 0 && g->n >= L, "%s: forward: %d grad calls, %d calls in all (want 0, >= %d)",
          what, grads, g->n, L);
    for (int e = 0; e < L && e < g->n; e++)
        CHECK(g->ev[e].layer == e, "%s: forward progress %d reports layer %d", what, e, g->ev[e].layer);
    CHECK(g->off_thread == 0, "%s: forward: %d calls off the caller's thread", what, g->off_thread);
    /* removal: A goes, B stays */
    het_model_remove_hook(m, &a);
    g->n = 0;
    g->have_res = 0;
    CHECK(het_model_train_batch(m, d.x, d.y, batch, 1.0f / batch, 7, &r) == HET_OK, "%s",
          het_error_msg());
    int a_calls = 0;
    for (int e = 0; e < g->n; e++) a_calls += g->ev[e].client == 0;
    CHECK(a_calls == 0, "%s: removed client A still got %d calls", what, a_calls);
    check_grads(what, g, 1, m);
    het_model_remove_hook(m, &b);
    g->n = 0;
    CHECK(het_model_train_batch(m, d.x, d.y, batch, 1.0f / batch, 7, &r) == HET_OK, "%s",
          het_error_msg());
    CHECK(g->n == 0, "%s: %d calls after removing every hook", what, g->n);
    free_data(&d);
    free(g);
out:
    het_model_free(m);
    het_model_free(ref);
}

static void nop_grad(void *user, int layer, size_t off, size_t count) {
    (void)user, (void)layer, (void)off, (void)count;
}

static void count_grad(void *user, int layer, size_t off, size_t count) {
    (void)layer, (void)off, (void)count;
    (*(int *)user)++;
}

/* Adding: validation and the cap; removal by user removes all of that user's hooks. */
static void test_add_remove(void) {
    het_model *m = NULL;
    CHECK(het_zoo_build(&m, "mlp", (het_shape){1, 28, 28}, 10, 4, 1) == HET_OK, "%s", het_error_msg());
    if (!m) return;
    int u[HET_MODEL_MAX_HOOKS + 1];
    CHECK(het_model_add_hook(m, &(het_model_hook){NULL, NULL, &u[0]}) == HET_EINVAL,
          "a hook without callbacks must be refused");
    for (int i = 0; i < HET_MODEL_MAX_HOOKS; i++)
        CHECK(het_model_add_hook(m, &(het_model_hook){nop_grad, NULL, &u[i]}) == HET_OK,
              "hook %d: %s", i, het_error_msg());
    CHECK(het_model_add_hook(m, &(het_model_hook){nop_grad, NULL, &u[4]}) == HET_EINVAL,
          "hook %d beyond the cap must be refused", HET_MODEL_MAX_HOOKS + 1);
    CHECK(strstr(het_error_msg(), "full") != NULL, "message: %s", het_error_msg());
    for (int i = 0; i < HET_MODEL_MAX_HOOKS; i++) het_model_remove_hook(m, &u[i]);
    het_model_remove_hook(m, &u[0]); /* unknown user: nothing */
    /* two hooks of one user go together; a third of another user stays */
    int c1 = 0, c2 = 0;
    CHECK(het_model_add_hook(m, &(het_model_hook){count_grad, NULL, &c1}) == HET_OK, "add");
    CHECK(het_model_add_hook(m, &(het_model_hook){count_grad, NULL, &c2}) == HET_OK, "add");
    CHECK(het_model_add_hook(m, &(het_model_hook){count_grad, NULL, &c1}) == HET_OK, "add");
    float x[4 * 784] = {0};
    uint8_t y[4] = {1, 2, 3, 4};
    het_batch_result r;
    het_model_remove_hook(m, &c1);
    CHECK(het_model_train_batch(m, x, y, 4, 0.25f, 0, &r) == HET_OK, "%s", het_error_msg());
    CHECK(c1 == 0 && c2 == 3, "after removing user c1: c1 got %d calls (want 0), c2 %d (want 3)",
          c1, c2);
    het_model_remove_hook(m, &c2);
    het_model_free(m);
}

/* The deprecated one-slot wrapper: replaces only its own hook, NULL removes it. */
/* train_step refuses grad hooks and serves progress hooks, on the caller's thread, for the
 * dense stack (mlp: its dense layers) and the generic path (lenet5). */
static void test_train_step(const char *name, int workers, int batch) {
    char what[64];
    snprintf(what, sizeof what, "train_step %s, %d workers", name, workers);
    het_shape in = {1, 28, 28};
    het_model *m = NULL;
    CHECK(het_zoo_build(&m, name, in, 10, batch, workers) == HET_OK, "%s", het_error_msg());
    if (!m) return;
    het_model_init_params(m, 1);
    size_t n = het_model_n_params(m);
    float *st = het_alloc(n * sizeof(float));
    memset(st, 0, n * sizeof(float));
    het_optim_config oc = het_optim_defaults();
    het_update u = {&oc, 0.05f, st, 1, NULL};
    data d = make_data(in, batch);
    het_batch_result r;
    hook_log *g = calloc(1, sizeof *g);
    g->caller = pthread_self();
    g->m = m;
    client a = {g, 0}, b = {g, 1};
    CHECK(het_model_add_hook(m, &(het_model_hook){nop_grad, NULL, &b}) == HET_OK, "add");
    CHECK(het_model_train_step(m, d.x, d.y, batch, 1.0f / batch, 0, &u, &r) == HET_EINVAL,
          "%s: a grad hook must be refused", what);
    het_model_remove_hook(m, &b);
    CHECK(het_model_add_hook(m, &(het_model_hook){NULL, on_progress, &a}) == HET_OK, "add");
    CHECK(het_model_train_step(m, d.x, d.y, batch, 1.0f / batch, 0, &u, &r) == HET_OK, "%s: %s",
          what, het_error_msg());
    CHECK(g->n > 0 && g->off_thread == 0, "%s: %d progress calls, %d off the caller's thread",
          what, g->n, g->off_thread);
    het_batch_result after;
    het_model_batch_result(m, &after);
    CHECK(after.loss_sum == r.loss_sum && after.correct == r.correct && after.count == batch,
          "%s: batch_result %.17g/%d/%d vs %.17g/%d/%d", what, after.loss_sum, after.correct,
          after.count, r.loss_sum, r.correct, batch);
    if (strstr(het_model_executor(m), "dense stack")) {
        /* forward 0, 2, 4, backward 4, 2, 0 */
        static const int want[6] = {0, 2, 4, 4, 2, 0};
        CHECK(g->n == 6, "%s: %d progress calls, expected 6", what, g->n);
        for (int e = 0; e < 6 && e < g->n; e++)
            CHECK(g->ev[e].layer == want[e], "%s: progress %d reports layer %d, expected %d", what,
                  e, g->ev[e].layer, want[e]);
    }
    het_model_remove_hook(m, &a);
    free(g);
    free_data(&d);
    het_free(st);
    het_model_free(m);
}

int main(void) {
    het_shape img = {1, 28, 28};
    for (int w = 1; w <= 2; w++) {
        test_chain("mlp", img, 13, w);
        test_chain("lenet5", img, 37, w); /* several chunks per worker */
    }
    test_chain("lenet5", img, 37, 3);
    test_add_remove();
    test_train_step("mlp", 2, 16);
    test_train_step("mlp", 1, 16);
    test_train_step("lenet5", 2, 16);
    return het_test_finish("test_hooks");
}

/* DESIGN: the worker pool of a model.
 *
 * A training step is a few short parallel regions (a batch's forward and backward, the
 * gradient reduction, the optimizer update, the batch gather), each microseconds to a few
 * milliseconds long, one after another from one calling thread. So the pool keeps its threads
 * and hands them work by bumping a generation counter: a waiting thread first spins on it
 * (20 000 loads, a few microseconds: the next region usually follows at once), then sleeps on
 * a condition variable. The caller runs worker 0's part itself, then spins on a countdown of
 * the others (200 000 loads) before it too sleeps. The generation's release/acquire pair
 * publishes the job (fn, user) and everything the caller wrote before; the countdown's
 * acquire/release publishes what the workers wrote.
 *
 * Inside a region, workers may meet at a het_barrier (a count of arrivals and a generation
 * counter, as in the dense stack): the last to arrive bumps the generation, the others spin
 * on it for 2000 pauses, then yield the core (the waits are short, and yielding keeps more
 * workers than cores progressing).
 *
 * The pool knows nothing of its clients: a job is a function pointer and its argument. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "hetrain/core.h"
#include "nn/pool.h"

typedef struct pool_thread {
    het_pool *p;
    int widx;
    pthread_t tid;
} pool_thread;

struct het_pool {
    int workers;
    int n_threads; /* started threads (at most workers - 1) */
    pool_thread *th;
    /* the current job, written by the caller before it bumps the generation */
    void (*fn)(void *user, int widx);
    void *user;
    int quit;
    pthread_mutex_t mu;
    pthread_cond_t cv_start, cv_done;
    atomic_uint generation;
    atomic_int pending;
};

static void *pool_main(void *arg) {
    pool_thread *t = arg;
    het_pool *p = t->p;
    unsigned seen = 0;
    for (;;) {
        /* spin briefly (regions are short and follow each other), then sleep */
        unsigned g = atomic_load_explicit(&p->generation, memory_order_acquire);
        for (int spin = 0; g == seen && spin < 20000; spin++)
            g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load(&p->generation)) == seen) pthread_cond_wait(&p->cv_start, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        seen = g;
        if (p->quit) return NULL;
        p->fn(p->user, t->widx);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

void het_pool_run(het_pool *p, void (*fn)(void *user, int widx), void *user) {
    if (p->n_threads == 0) {
        fn(user, 0);
        return;
    }
    p->fn = fn;
    p->user = user;
    atomic_store(&p->pending, p->n_threads);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv_start);
    pthread_mutex_unlock(&p->mu);
    fn(user, 0);
    for (int spin = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0 && spin < 200000;
         spin++) {
    }
    if (atomic_load(&p->pending) > 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

int het_pool_workers(const het_pool *p) { return p->workers; }

/* ---------------------------------------------------------------- the barrier */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

void het_barrier_init(het_barrier *b, int n) {
    atomic_init(&b->count, 0);
    atomic_init(&b->gen, 0);
    b->n = n;
}

unsigned het_barrier_generation(het_barrier *b) {
    return atomic_load_explicit(&b->gen, memory_order_acquire);
}

void het_barrier_wait(het_barrier *b) {
    if (b->n <= 1) return;
    /* the generation cannot move before this caller arrives */
    unsigned g = atomic_load_explicit(&b->gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->count, 1, memory_order_acq_rel) == b->n - 1) {
        atomic_store_explicit(&b->count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->gen, 1, memory_order_release);
        return;
    }
    for (int spin = 0; atomic_load_explicit(&b->gen, memory_order_acquire) == g; spin++) {
        if (spin < 2000)
            cpu_relax();
        else
            sched_yield();
    }
}

void het_pool_free(het_pool *p) {
    if (!p) return;
    if (p->n_threads > 0) {
        p->quit = 1;
        pthread_mutex_lock(&p->mu);
        atomic_fetch_add(&p->generation, 1);
        pthread_cond_broadcast(&p->cv_start);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n_threads; i++) pthread_join(p->th[i].tid, NULL);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_start);
    pthread_cond_destroy(&p->cv_done);
    free(p->th);
    free(p);
}

int het_pool_create(het_pool **out, int workers) {
    *out = NULL;
    if (workers < 1) return het_error_set(HET_EINVAL, "pool: %d workers, need at least 1", workers);
    het_pool *p = calloc(1, sizeof *p);
    if (!p) return het_error_set(HET_ENOMEM, "out of memory for worker threads");
    p->workers = workers;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_start, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    if (workers == 1) {
        *out = p;
        return HET_OK;
    }
    p->th = calloc((size_t)workers - 1, sizeof *p->th);
    if (!p->th) {
        het_pool_free(p);
        return het_error_set(HET_ENOMEM, "out of memory for worker threads");
    }
    for (int i = 1; i < workers; i++) {
        pool_thread *t = &p->th[i - 1];
        t->p = p;
        t->widx = i;
        if (pthread_create(&t->tid, NULL, pool_main, t) != 0) {
            het_pool_free(p); /* stops the threads started so far */
            return het_error_set(HET_ENOMEM, "cannot start worker thread %d", i);
        }
        p->n_threads++;
    }
    *out = p;
    return HET_OK;
}

int het_pool_cpu_clocks(const het_pool *p, clockid_t *out, int cap) {
    int n = 0;
    for (int i = 0; p && i < p->n_threads && n < cap; i++)
        if (pthread_getcpuclockid(p->th[i].tid, &out[n]) == 0) n++;
    return n;
}

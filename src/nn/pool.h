/* Internal to nn/: a fixed team of worker threads that runs one function on every worker
 * (pool.c). The caller is worker 0; threads 1..workers-1 are started by het_pool_create. */
#ifndef HET_NN_POOL_H
#define HET_NN_POOL_H

#include <stdatomic.h>
#include <time.h>

typedef struct het_pool het_pool;

/* Starts workers - 1 threads (none for workers == 1). HET_EINVAL for workers < 1, HET_ENOMEM
 * when memory or a thread cannot be had (then nothing is left running). */
int het_pool_create(het_pool **out, int workers);
/* Stops and joins the threads; NULL is fine. Must not race with het_pool_run. */
void het_pool_free(het_pool *p);
int het_pool_workers(const het_pool *p);
/* The CPU-time clocks (pthread_getcpuclockid) of the pool's threads (workers 1..workers-1), at
 * most cap; returns how many were written. */
int het_pool_cpu_clocks(const het_pool *p, clockid_t *out, int cap);
/* Runs fn(user, widx) once for every widx in [0, workers): widx 0 on the calling thread, the
 * others on the pool's threads, and returns when all have returned. Everything the caller
 * wrote before the call is visible to fn, and everything fn wrote is visible to the caller
 * afterwards. One caller at a time; fn must not call het_pool_run on the same pool. */
void het_pool_run(het_pool *p, void (*fn)(void *user, int widx), void *user);

/* A generation-counter barrier for workers inside one het_pool_run: the first `n` callers of
 * het_barrier_wait meet; each returns once all n have arrived, and everything any of them
 * wrote before arriving is visible to all of them afterwards. Reusable at once (the next
 * meeting counts afresh). Waiters spin briefly, then yield the core, so more workers than
 * cores still progress. `n` may change only while nobody waits (e.g. between runs). */
typedef struct het_barrier {
    atomic_int count;  /* arrivals at the current meeting */
    atomic_uint gen;   /* meetings completed */
    int n;             /* participants */
} het_barrier;

void het_barrier_init(het_barrier *b, int n);
/* Meetings completed so far: constant for a participant between its meetings, so it tells
 * the participants of one meeting apart from those of the next (e.g. which of two buffers). */
unsigned het_barrier_generation(het_barrier *b);
void het_barrier_wait(het_barrier *b);

#endif

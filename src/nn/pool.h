/* Internal to nn/: a fixed team of worker threads that runs one function on every worker
 * (pool.c). The caller is worker 0; threads 1..workers-1 are started by het_pool_create. */
#ifndef HET_NN_POOL_H
#define HET_NN_POOL_H

typedef struct het_pool het_pool;

/* Starts workers - 1 threads (none for workers == 1). HET_EINVAL for workers < 1, HET_ENOMEM
 * when memory or a thread cannot be had (then nothing is left running). */
int het_pool_create(het_pool **out, int workers);
/* Stops and joins the threads; NULL is fine. Must not race with het_pool_run. */
void het_pool_free(het_pool *p);
int het_pool_workers(const het_pool *p);
/* Runs fn(user, widx) once for every widx in [0, workers): widx 0 on the calling thread, the
 * others on the pool's threads, and returns when all have returned. Everything the caller
 * wrote before the call is visible to fn, and everything fn wrote is visible to the caller
 * afterwards. One caller at a time; fn must not call het_pool_run on the same pool. */
void het_pool_run(het_pool *p, void (*fn)(void *user, int widx), void *user);

#endif

/* The worker pool (nn/pool.c): for 1..4 workers, fn runs exactly once per worker index in
 * every run, index 0 on the caller's thread and the others on distinct pool threads; what the
 * caller wrote before a run is visible to fn and what fn wrote is visible after it; a
 * reduction in fixed order gives the same bits in every run; runs after the threads went to
 * sleep (condition-variable path) work too; errors. */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "hetrain/core.h"
#include "nn/pool.h"
#include "test.h"

#define MAXW 4
#define N 10007

typedef struct job {
    int workers;
    int run;              /* written by the caller before each run */
    int seen[MAXW];       /* seen[w] = run, written by worker w */
    int calls[MAXW];      /* calls per index in this run */
    pthread_t tid[MAXW];  /* the thread that ran index w */
    const float *x;
    double part[MAXW];    /* worker w's sum over its slice */
} job;

static void work(void *user, int widx) {
    job *j = user;
    j->calls[widx]++;
    j->seen[widx] = j->run;
    j->tid[widx] = pthread_self();
    size_t lo = (size_t)N * (size_t)widx / (size_t)j->workers;
    size_t hi = (size_t)N * (size_t)(widx + 1) / (size_t)j->workers;
    double s = 0;
    for (size_t i = lo; i < hi; i++) s += j->x[i] * (double)(j->run % 7 + 1);
    j->part[widx] = s;
}

static void test_workers(int workers, const float *x) {
    het_pool *p = NULL;
    CHECK(het_pool_create(&p, workers) == HET_OK, "%d workers: %s", workers, het_error_msg());
    if (!p) return;
    CHECK(het_pool_workers(p) == workers, "het_pool_workers %d, expected %d", het_pool_workers(p),
          workers);
    job j;
    memset(&j, 0, sizeof j);
    j.workers = workers;
    j.x = x;
    double first[7];
    int bad_calls = 0, bad_seen = 0, bad_thread = 0, bad_sum = 0;
#if defined(__SANITIZE_THREAD__)
    const int runs = 500; /* TSan slows the spin-waits ~70x; every run still checks the same */
#else
    const int runs = 20000;
#endif
    for (int r = 1; r <= runs; r++) {
        j.run = r;
        memset(j.calls, 0, sizeof j.calls);
        if (r % 5000 == 0) { /* let the threads fall asleep on the condition variable */
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        het_pool_run(p, work, &j);
        double total = 0;
        for (int w = 0; w < workers; w++) {
            bad_calls += j.calls[w] != 1;
            bad_seen += j.seen[w] != r;
            total += j.part[w]; /* fixed order */
        }
        bad_thread += !pthread_equal(j.tid[0], pthread_self());
        for (int a = 1; a < workers; a++)
            for (int b = 0; b < a; b++) bad_thread += pthread_equal(j.tid[a], j.tid[b]) != 0;
        if (r <= 7)
            first[r - 1] = total;
        else
            bad_sum += memcmp(&total, &first[(r - 1) % 7], sizeof total) != 0;
    }
    CHECK(bad_calls == 0, "%d workers: %d (run, index) pairs not called exactly once", workers,
          bad_calls);
    CHECK(bad_seen == 0, "%d workers: %d indices missed a run's data", workers, bad_seen);
    CHECK(bad_thread == 0, "%d workers: %d runs with index 0 off the caller or a thread reused",
          workers, bad_thread);
    CHECK(bad_sum == 0, "%d workers: %d runs whose ordered sum differs in bits", workers, bad_sum);
    het_pool_free(p);
}

static void nothing(void *user, int widx) { (void)user, (void)widx; }

int main(void) {
    static float x[N];
    het_rng r;
    het_rng_seed(&r, 3);
    for (int i = 0; i < N; i++) x[i] = het_rng_uniform(&r);
    for (int w = 1; w <= MAXW; w++) test_workers(w, x);
    het_pool *p = (het_pool *)&r;
    CHECK(het_pool_create(&p, 0) == HET_EINVAL && p == NULL, "0 workers must be refused");
    /* start and stop quickly, also right after a run */
    for (int i = 0; i < 200; i++) {
        p = NULL;
        CHECK(het_pool_create(&p, 1 + i % MAXW) == HET_OK, "%s", het_error_msg());
        if (i % 2) het_pool_run(p, nothing, NULL);
        het_pool_free(p);
    }
    het_pool_free(NULL);
    return het_test_finish("test_pool");
}

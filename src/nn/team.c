/* DESIGN: the meetings of batch-coupled layers (team.h).
 *
 * One barrier (nn/pool.h: a count of arrivals and a generation counter, spin then yield) and
 * two buffers of parts, one slot per worker, each slot rounded up to a cache line so that the
 * workers' writes do not share lines. A meeting uses buffer (generation & 1): a worker reads
 * the generation before it arrives, when it cannot have moved yet, so all participants of a
 * meeting agree on the buffer. One barrier per meeting is enough: a worker writes the buffer
 * of meeting k + 2 only after meeting k + 1, which every other worker reaches only after it
 * has finished reading meeting k's. */
#include <stdlib.h>

#include "nn/pool.h"
#include "nn/team.h"

struct het_team {
    het_barrier bar;
    int workers;
    size_t stride; /* doubles per slot */
    double *buf[2];
};

int het_team_create(het_team **out, int workers, size_t doubles) {
    *out = NULL;
    het_team *t = calloc(1, sizeof *t);
    if (!t) return het_error_set(HET_ENOMEM, "out of memory for the worker team");
    t->workers = workers;
    t->stride = (doubles + 7) / 8 * 8;
    if (t->stride == 0) t->stride = 8;
    het_barrier_init(&t->bar, workers);
    for (int i = 0; i < 2; i++) {
        t->buf[i] = het_alloc(sizeof(double) * t->stride * (size_t)workers);
        if (!t->buf[i]) { /* het_alloc zeroes */
            het_team_free(t);
            return het_error_set(HET_ENOMEM, "out of memory for the worker team");
        }
    }
    *out = t;
    return HET_OK;
}

void het_team_free(het_team *t) {
    if (!t) return;
    het_free(t->buf[0]);
    het_free(t->buf[1]);
    free(t);
}

void het_team_begin(het_team *t, int active) {
    t->bar.n = active < t->workers ? active : t->workers;
}

int het_team_size(const het_team *t) { return t->bar.n; }

double *het_team_part(het_team *t, int widx) {
    return t->buf[het_barrier_generation(&t->bar) & 1] + (size_t)widx * t->stride;
}

const double *het_team_exchange(het_team *t, int widx, size_t *stride) {
    (void)widx;
    const double *all = t->buf[het_barrier_generation(&t->bar) & 1];
    het_barrier_wait(&t->bar);
    *stride = t->stride;
    return all;
}

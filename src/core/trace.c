/* Trace recording (see core/trace.h). Events are appended to one growing array under a mutex;
 * times are stored relative to the origin. Formatting writes each event as one Chrome trace
 * "complete" event ("ph":"X", microseconds). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/trace.h"
#include "hetrain/core.h"

#define HET_TRACE_MAX (1 << 20)

typedef struct ev {
    const char *name;
    double t0, t1; /* seconds since the origin */
    int32_t tid, arg;
} ev;

struct het_trace {
    pthread_mutex_t mu;
    double origin;
    ev *ev;
    int n, cap;
    int64_t dropped;
};

int het_trace_create(het_trace **out) {
    *out = NULL;
    het_trace *t = calloc(1, sizeof *t);
    if (!t) return het_error_set(HET_ENOMEM, "out of memory for the trace");
    pthread_mutex_init(&t->mu, NULL);
    t->origin = het_now();
    *out = t;
    return HET_OK;
}

void het_trace_free(het_trace *t) {
    if (!t) return;
    pthread_mutex_destroy(&t->mu);
    free(t->ev);
    free(t);
}

void het_trace_set_origin(het_trace *t, double origin) {
    if (t) t->origin = origin;
}

void het_trace_add(het_trace *t, const char *name, int tid, int arg, double t0, double t1) {
    if (!t || !name) return;
    pthread_mutex_lock(&t->mu);
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 4096;
        ev *p = t->cap < HET_TRACE_MAX ? realloc(t->ev, (size_t)cap * sizeof *p) : NULL;
        if (!p) {
            t->dropped++;
            pthread_mutex_unlock(&t->mu);
            return;
        }
        t->ev = p;
        t->cap = cap;
    }
    t->ev[t->n++] = (ev){name, t0 - t->origin, t1 - t->origin, (int32_t)tid, (int32_t)arg};
    pthread_mutex_unlock(&t->mu);
}

int het_trace_format(het_trace *t, int pid, char **text, size_t *len, int64_t *n_events,
                     int64_t *dropped) {
    *text = NULL;
    *len = 0;
    pthread_mutex_lock(&t->mu);
    size_t cap = 256 * (size_t)t->n + 1, n = 0;
    char *s = malloc(cap);
    if (!s) {
        pthread_mutex_unlock(&t->mu);
        return het_error_set(HET_ENOMEM, "out of memory formatting the trace");
    }
    for (int i = 0; i < t->n; i++) {
        const ev *e = &t->ev[i];
        double dur = (e->t1 - e->t0) * 1e6;
        int k = snprintf(s + n, cap - n, ",\n{\"name\":\"%.96s\",\"ph\":\"X\",\"pid\":%d,"
                         "\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"i\":%d}}", e->name, pid,
                         (int)e->tid, e->t0 * 1e6, dur > 0 ? dur : 0.0, (int)e->arg);
        if (k > 0) n += (size_t)k < cap - n ? (size_t)k : cap - n - 1;
    }
    s[n] = '\0';
    *n_events = t->n;
    *dropped = t->dropped;
    pthread_mutex_unlock(&t->mu);
    *text = s;
    *len = n;
    return HET_OK;
}

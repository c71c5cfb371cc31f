/* Emulated heterogeneity: a per-rank slowdown factor f >= 1. After a piece of compute that
 * took t seconds the rank sleeps (f-1)*t, so the piece takes f*t in all, as on a device f times
 * slower. Sleeping (not spinning) leaves the core to the other ranks, which matters when ranks
 * share cores. The strategies mark every compute piece of a step (forward and backward up to
 * each layer's gradient hook, the optimizer), so a slow rank also starts its gradient
 * transfers late, as a slow device would. Accuracy: nanosleep overshoots (by tens of
 * microseconds, by milliseconds on a busy machine); the overshoot is carried over and taken off
 * the next sleeps, so the factor holds on average. tests/test_slowdown.c checks it within 15 %. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hetero/hetero.h"

int het_slowdown_parse(const char *text, double *out, int cap) {
    int n = 0;
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        char *end;
        errno = 0;
        double f = strtod(p, &end);
        size_t len = strcspn(p, ",");
        if (end == p || isnan(f)) {
            return het_error_set(HET_EINVAL, "'%.*s' is not a number, expected factors >= 1 "
                                 "such as 1,1,2,4", (int)len, p);
        }
        const char *q = end;
        while (*q == ' ' || *q == '\t') q++;
        if (*q && *q != ',')
            return het_error_set(HET_EINVAL, "'%.*s' is not a number, expected factors >= 1 "
                                 "such as 1,1,2,4", (int)len, p);
        if (!(f >= 1.0) || f > 1000.0)
            return het_error_set(HET_EINVAL, "factor %.*s is out of range, expected 1..1000",
                                 (int)(end - p), p);
        if (out && n < cap) out[n] = f;
        n++;
        if (!*q) return n;
        p = q + 1;
    }
}

void het_sleep_s(double s) {
    if (!(s > 0)) return;
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec > 999999999L) ts.tv_nsec = 999999999L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void het_pace_init(het_pace *p, double factor) {
    memset(p, 0, sizeof *p);
    p->factor = factor >= 1.0 ? factor : 1.0;
    p->last = het_now();
}

void het_pace_begin(het_pace *p) { p->last = het_now(); }

void het_pace_skip(het_pace *p) { p->last = het_now(); }

double het_pace_mark(het_pace *p) {
    double now = het_now(), t = now - p->last;
    if (p->factor > 1.0) {
        /* sleep what this piece owes plus what earlier sleeps fell short of (or minus what
         * they overshot: a busy machine wakes sleepers late), so the factor holds on average */
        double want = (p->factor - 1.0) * t + p->debt_s;
        het_sleep_s(want);
        double after = het_now();
        p->debt_s = want - (after - now);
        if (p->debt_s < -0.05) p->debt_s = -0.05; /* forget overshoots older than ~50 ms */
        p->slept_s += after - now;
        now = after;
    }
    double stretched = now - p->last;
    p->compute_s += stretched;
    p->last = now;
    return stretched;
}

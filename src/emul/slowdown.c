/* Emulated heterogeneity: a per-rank slowdown factor f >= 1. On the wall clock, after a piece
 * of compute that took t seconds the rank sleeps (f-1)*t, so the piece takes f*t in all, as on
 * a device f times slower; on the virtual clock the piece's cost (its CPU time) times f is
 * charged to the rank's clock and nothing sleeps (clock.c). How the wall clock waits
 * (het_emul_wait_set): sleeping leaves the core to the other ranks, which matters when ranks
 * share cores; with a core for every compute thread it spins instead, as a slow device keeps
 * computing and MPI busy-polls on a real network: a core woken from a sleep computes the next
 * piece slower (cold caches, a lower clock), which the emulated device would not (mlp on 2
 * ranks: 0.166 s of compute an epoch after sleeps, 0.084 s without). The strategies mark every
 * compute piece of a step (forward and backward up to each layer's gradient hook, the
 * optimizer), so a slow rank also starts its gradient transfers late, as a slow device would.
 * Accuracy: nanosleep overshoots (by tens of microseconds, by milliseconds on a busy machine);
 * the overshoot is carried over and taken off the next sleeps, so the factor holds on average. tests/test_slowdown.c checks it within 15 %. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emul/emul.h"
#ifdef HET_SMPI
#include <smpi/smpi.h> /* smpi_execute_flops: compute charged to SimGrid's clock */
#endif

int het_parse_numbers(const char *text, double *out, int cap, double lo, int lo_open,
                      double hi, const char *what) {
    int n = 0;
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        char *end;
        errno = 0;
        double f = strtod(p, &end);
        size_t len = strcspn(p, ",");
        const char *q = end;
        while (*q == ' ' || *q == '\t') q++;
        if (end == p || isnan(f) || (*q && *q != ','))
            return het_error_set(HET_EINVAL, "'%.*s' is not a number, expected %s", (int)len, p,
                                 what);
        if ((lo_open ? !(f > lo) : !(f >= lo)) || !(f <= hi))
            return het_error_set(HET_EINVAL, "%.*s is out of range, expected %s", (int)(end - p),
                                 p, what);
        if (out && n < cap) out[n] = f;
        n++;
        if (!*q) return n;
        p = q + 1;
    }
}

int het_slowdown_parse(const char *text, double *out, int cap) {
    return het_parse_numbers(text, out, cap, 1.0, 0, 1000.0,
                             "factors in 1..1000 such as 1,1,2,4");
}

int het_slowdown_at_parse(const char *text, het_slowdown_change *out, int cap) {
    int n = 0;
    const char *p = text;
    while (*p) {
        size_t len = strcspn(p, ",");
        char item[64];
        int used = 0;
        het_slowdown_change c;
        snprintf(item, sizeof item, "%.*s", (int)(len < 63 ? len : 63), p);
        if (len >= 63 || sscanf(item, " %d : %d : %lf %n", &c.epoch, &c.rank, &c.factor, &used)
                         != 3 || item[used] != '\0')
            return het_error_set(HET_EINVAL, "'%.*s' is not EPOCH:RANK:FACTOR, e.g. 2:1:3",
                                 (int)len, p);
        if (c.epoch < 1 || c.rank < 0 || !(c.factor >= 1.0) || c.factor > 1000.0)
            return het_error_set(HET_EINVAL, "'%.*s': expected epoch >= 1, rank >= 0 and a "
                                 "factor in 1..1000", (int)len, p);
        if (out && n < cap) out[n] = c;
        n++;
        p += len;
        if (*p == ',') p++;
    }
    return n;
}

double het_slowdown_factor_at(const het_slowdown_change *c, int n, int epoch, int rank,
                              double base) {
    double f = base;
    int best = 0;
    for (int i = 0; i < n; i++) /* the latest change that has started wins */
        if (c[i].rank == rank && c[i].epoch <= epoch && c[i].epoch >= best) {
            best = c[i].epoch;
            f = c[i].factor;
        }
    return f;
}

static int wait_spin; /* 1: het_sleep_s / het_sleep_until spin on the clock */

void het_emul_wait_set(int spin) { wait_spin = spin != 0; }
int het_emul_wait_spin(void) { return wait_spin; }

int het_emul_wait_auto(int host_ranks, int threads_per_rank, long cores) {
    if (host_ranks < 1) host_ranks = 1;
    if (threads_per_rank < 1) threads_per_rank = 1;
    return cores > 0 && (long)host_ranks * threads_per_rank <= cores;
}

void het_sleep_s(double s) {
    if (!(s > 0)) return;
    if (wait_spin) {
        het_sleep_until(het_now() + s);
        return;
    }
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec > 999999999L) ts.tv_nsec = 999999999L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Sleeps until het_now() >= until; returns the seconds slept (0 if already past). */
double het_sleep_until(double until) {
    double t0 = het_now(), now = t0;
    while (now < until) {
        if (wait_spin) { /* a clock read is ~20 ns: nothing else to do */
            now = het_now();
            continue;
        }
        double left = until - now;
        struct timespec ts;
        ts.tv_sec = (time_t)left;
        ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
        if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
        nanosleep(&ts, NULL); /* EINTR or early return: the loop re-checks the clock */
        now = het_now();
    }
    return now - t0;
}

void het_pace_init(het_pace *p, het_lane *lane, double factor) {
    memset(p, 0, sizeof *p);
    p->lane = lane;
    p->factor = factor >= 1.0 ? factor : 1.0;
    p->last = p->mid = het_lane_now(lane);
}

void het_pace_set_threads(het_pace *p, const clockid_t *clocks, int n) {
    if (n < 0) n = 0;
    if (n > HET_PACE_MAX_THREADS) n = HET_PACE_MAX_THREADS;
    p->n_threads = n;
    for (int i = 0; i < n; i++) p->threads[i] = clocks[i];
}

static double cpu_s(clockid_t id) {
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return 0.0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Virtual clock: reads the CPU clocks into cpu0 (calling thread first). */
void het_pace_cpu_start(het_pace *p) {
    p->cpu0[0] = cpu_s(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < p->n_threads; i++) p->cpu0[i + 1] = cpu_s(p->threads[i]);
}

/* Virtual clock: the CPU time of the interval, the most any thread of it spent (the workers
 * split a batch and meet at its end, so the busiest one decides when the piece is done); the
 * clocks restart. A thread whose clock cannot be read counts 0. */
double het_pace_cpu_take(het_pace *p) {
    double now = cpu_s(CLOCK_THREAD_CPUTIME_ID), most = now - p->cpu0[0];
    p->cpu0[0] = now;
    for (int i = 0; i < p->n_threads; i++) {
        double t = cpu_s(p->threads[i]), d = t - p->cpu0[i + 1];
        p->cpu0[i + 1] = t;
        if (d > most) most = d;
    }
    return most > 0.0 ? most : 0.0;
}


void het_pace_begin(het_pace *p) {
    if (het_clock_virtual()) het_pace_cpu_start(p);
    p->last = het_lane_now(p->lane);
}

void het_pace_skip(het_pace *p) { het_pace_begin(p); }

void het_pace_piece(het_pace *p, int piece, int layer, int count) {
    p->piece = piece;
    p->piece_layer = layer;
    p->piece_layer_end = layer + 1;
    if (count >= 0) p->piece_count = count;
}

void het_pace_range(het_pace *p, int backward, int first, int end, int count) {
    p->piece = backward ? HET_PIECE_RANGE_BWD : HET_PIECE_RANGE_FWD;
    p->piece_layer = first;
    p->piece_layer_end = end;
    p->piece_count = count;
}

/* The virtual clock's mark: the piece costs its CPU time (or the hook's figure) x factor,
 * charged to the clock. */
static double mark_virtual(het_pace *p) {
    double t = het_pace_cpu_take(p);
    if (p->costs && p->piece != HET_PIECE_NONE)
        t = het_costs_charge(p->costs, p->piece, p->piece_layer, p->piece_layer_end,
                             p->piece_count) *
            (p->piece_share > 0.0 ? p->piece_share : 1.0);
    else if (p->cost)
        t = p->cost(p->cost_user, t);
    p->piece = HET_PIECE_NONE;
    p->piece_share = 0.0;
    if (!(t >= 0.0)) t = 0.0;
    if (p->scale > 0.0) t *= p->scale;
    double start = het_lane_now(p->lane);
    p->mid = start + t;
    het_lane_advance(p->lane, t * p->factor);
    p->last = het_lane_now(p->lane);
    double stretched = p->last - start;
    p->compute_s += stretched;
    return stretched;
}

double het_pace_mark(het_pace *p) {
    if (het_clock_virtual()) return mark_virtual(p);
#ifdef HET_SMPI /* SimGrid's time: the piece's table cost, as flops on this rank's host */
    if (p->costs && p->piece != HET_PIECE_NONE) {
        double t = het_costs_charge(p->costs, p->piece, p->piece_layer, p->piece_layer_end,
                                    p->piece_count) *
                   (p->piece_share > 0.0 ? p->piece_share : 1.0);
        if (t > 0.0) smpi_execute_flops(t * p->costs->ref_flops);
    }
#endif
    p->piece = HET_PIECE_NONE;
    p->piece_share = 0.0;
    double now = het_now(), t = now - p->last;
    p->mid = now;
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

/* Flows that share links: max-min fair bandwidth sharing between the flows active at a time,
 * events at latency ends and completions (flows.h says what it models and how to use it).
 *
 * State: every flow ever added (their completion times stay readable), and the list of flows
 * not yet complete (`live`), the only ones an event or a solve looks at. A solve is progressive
 * filling over the live flows past their latency: each round finds the smallest fair share,
 * min over resources of (capacity left / unfixed flows crossing it) and over unfixed flows of
 * their own rate bound, fixes the flows it limits at that share and takes it from every
 * resource on their routes; at most one round per resource and bound. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emul/flows.h"
#include "hetrain/core.h"

enum { F_WAITING, F_ACTIVE, F_DONE };

typedef struct flow {
    double start, active_at; /* active_at = start + latency */
    double bytes, left, bound, rate, done;
    double factor;                     /* bytes move at rate x factor (SimGrid's bw factor) */
    int route[HET_FLOW_ROUTE_MAX], n_route;
    double weight[HET_FLOW_ROUTE_MAX]; /* what a unit of rate takes of each resource */
    int state;
} flow;

struct het_flows {
    int n_res;
    double *cap, *res_bytes, *res_busy;
    double *rem;  /* solve: capacity left per resource */
    double *cnt;  /* solve: the unfixed flows' weights per resource */
    int *num;     /* solve: how many unfixed flows cross each resource (a sum of weights can
                     keep a rounding residue once they are all fixed) */
    char *used;   /* drain: resources that carried bytes in the span */
    flow *fl;
    int n_fl, cap_fl;
    int *live, n_live; /* ids of flows not complete, in the order they were added */
    double now;
    int dirty; /* the active set changed since the last solve */
};

het_flows *het_flows_new(int n, const double *capacity) {
    if (n < 1 || !capacity) {
        het_error_set(HET_EINVAL, "flows: %d resources, expected at least 1", n);
        return NULL;
    }
    for (int r = 0; r < n; r++)
        if (!(capacity[r] > 0.0) || !isfinite(capacity[r])) {
            het_error_set(HET_EINVAL, "flows: resource %d has capacity %g, expected a finite "
                          "number > 0 bytes/s", r, capacity[r]);
            return NULL;
        }
    het_flows *f = calloc(1, sizeof *f);
    if (!f) goto oom;
    f->n_res = n;
    f->cap = malloc((size_t)n * sizeof *f->cap);
    f->res_bytes = calloc((size_t)n, sizeof *f->res_bytes);
    f->res_busy = calloc((size_t)n, sizeof *f->res_busy);
    f->rem = malloc((size_t)n * sizeof *f->rem);
    f->cnt = malloc((size_t)n * sizeof *f->cnt);
    f->num = malloc((size_t)n * sizeof *f->num);
    f->used = malloc((size_t)n);
    if (!f->cap || !f->res_bytes || !f->res_busy || !f->rem || !f->cnt || !f->num || !f->used)
        goto oom;
    memcpy(f->cap, capacity, (size_t)n * sizeof *f->cap);
    return f;
oom:
    het_flows_free(f);
    het_error_set(HET_ENOMEM, "flows: out of memory for %d resources", n);
    return NULL;
}

void het_flows_free(het_flows *f) {
    if (!f) return;
    free(f->cap);
    free(f->res_bytes);
    free(f->res_busy);
    free(f->rem);
    free(f->cnt);
    free(f->num);
    free(f->used);
    free(f->fl);
    free(f->live);
    free(f);
}

int het_flows_add(het_flows *f, double start, double bytes, double latency, double rate_bound,
                  const int *route, int n_route) {
    return het_flows_add_weighted(f, start, bytes, latency, rate_bound, 1.0, route, NULL, n_route);
}

int het_flows_check(const het_flows *f, double start, double bytes, double latency,
                    double rate_bound, double factor, const int *route, const double *weight,
                    int n_route) {
    if (n_route < 1 || n_route > HET_FLOW_ROUTE_MAX || !route)
        return het_error_set(HET_EINVAL, "flows: a route of %d resources, expected 1..%d",
                             n_route, HET_FLOW_ROUTE_MAX);
    for (int i = 0; i < n_route; i++) {
        if (route[i] < 0 || route[i] >= f->n_res)
            return het_error_set(HET_EINVAL, "flows: resource %d on the route, expected "
                                 "0..%d", route[i], f->n_res - 1);
        if (weight && (!(weight[i] > 0.0) || !isfinite(weight[i])))
            return het_error_set(HET_EINVAL, "flows: weight %g on resource %d, expected a "
                                 "finite number > 0", weight[i], route[i]);
    }
    if (!(factor > 0.0) || !isfinite(factor))
        return het_error_set(HET_EINVAL, "flows: rate factor %g, expected a finite number > 0",
                             factor);
    if (!(bytes >= 0.0) || !isfinite(bytes) || !(latency >= 0.0) || !isfinite(latency) ||
        !(rate_bound >= 0.0) || !isfinite(start))
        return het_error_set(HET_EINVAL, "flows: bytes %g, latency %g s, rate bound %g, start "
                             "%g s: expected finite numbers >= 0", bytes, latency, rate_bound,
                             start);
    if (start < f->now)
        return het_error_set(HET_EINVAL, "flows: a flow starting at %.17g s, before the "
                             "network's time %.17g s", start, f->now);
    return HET_OK;
}

int het_flows_add_weighted(het_flows *f, double start, double bytes, double latency,
                           double rate_bound, double factor, const int *route,
                           const double *weight, int n_route) {
    int rc = het_flows_check(f, start, bytes, latency, rate_bound, factor, route, weight,
                             n_route);
    if (rc != HET_OK) return rc;
    if (f->n_fl == f->cap_fl) {
        int cap = f->cap_fl ? 2 * f->cap_fl : 64;
        flow *nf = realloc(f->fl, (size_t)cap * sizeof *nf);
        if (!nf) return het_error_set(HET_ENOMEM, "flows: out of memory for %d flows", cap);
        f->fl = nf;
        int *nl = realloc(f->live, (size_t)cap * sizeof *nl);
        if (!nl) return het_error_set(HET_ENOMEM, "flows: out of memory for %d flows", cap);
        f->live = nl;
        f->cap_fl = cap;
    }
    flow *x = &f->fl[f->n_fl];
    memset(x, 0, sizeof *x);
    x->start = start;
    x->active_at = start + latency;
    x->bytes = x->left = bytes;
    x->bound = rate_bound;
    x->done = -1.0;
    x->factor = factor;
    memcpy(x->route, route, (size_t)n_route * sizeof *route);
    for (int i = 0; i < n_route; i++) x->weight[i] = weight ? weight[i] : 1.0;
    x->n_route = n_route;
    x->state = F_WAITING;
    f->live[f->n_live++] = f->n_fl;
    f->dirty = 1;
    return f->n_fl++;
}

/* Max-min fair rates of the active flows (progressive filling). */
static void solve(het_flows *f) {
    f->dirty = 0;
    memcpy(f->rem, f->cap, (size_t)f->n_res * sizeof *f->rem);
    for (int r = 0; r < f->n_res; r++) f->cnt[r] = 0.0, f->num[r] = 0;
    int unfixed = 0;
    for (int i = 0; i < f->n_live; i++) {
        flow *x = &f->fl[f->live[i]];
        x->rate = -1.0; /* unfixed */
        if (x->state != F_ACTIVE) continue;
        unfixed++;
        for (int k = 0; k < x->n_route; k++)
            f->cnt[x->route[k]] += x->weight[k], f->num[x->route[k]]++;
    }
    while (unfixed > 0) {
        double share = INFINITY;
        for (int r = 0; r < f->n_res; r++)
            if (f->num[r] > 0 && f->rem[r] / f->cnt[r] < share) share = f->rem[r] / f->cnt[r];
        for (int i = 0; i < f->n_live; i++) {
            const flow *x = &f->fl[f->live[i]];
            if (x->state == F_ACTIVE && x->rate < 0.0 && x->bound > 0.0 && x->bound < share)
                share = x->bound;
        }
        if (share < 0.0) share = 0.0; /* rounding of rem */
        /* fix every unfixed flow that this share limits: a bound equal to it, or a resource
         * on its route whose fair share it is */
        int fixed = 0;
        for (int i = 0; i < f->n_live; i++) {
            flow *x = &f->fl[f->live[i]];
            if (x->state != F_ACTIVE || x->rate >= 0.0) continue;
            int limited = x->bound > 0.0 && x->bound <= share;
            for (int k = 0; k < x->n_route && !limited; k++) {
                int r = x->route[k];
                limited = f->num[r] > 0 && f->rem[r] / f->cnt[r] <= share;
            }
            if (!limited) continue;
            x->rate = -2.0; /* marked: fixed at share below, after every flow is tested */
            fixed++;
        }
        if (fixed == 0) break; /* cannot happen: the minimum limits some flow */
        for (int i = 0; i < f->n_live; i++) {
            flow *x = &f->fl[f->live[i]];
            if (x->rate != -2.0) continue;
            x->rate = share;
            for (int k = 0; k < x->n_route; k++) {
                int r = x->route[k];
                f->rem[r] -= share * x->weight[k];
                f->cnt[r] -= x->weight[k];
                if (--f->num[r] == 0) f->cnt[r] = 0.0; /* no residue */
            }
        }
        unfixed -= fixed;
    }
}

double het_flows_next(het_flows *f) {
    if (f->dirty) solve(f);
    double t = INFINITY;
    for (int i = 0; i < f->n_live; i++) {
        const flow *x = &f->fl[f->live[i]];
        double e = x->state == F_WAITING ? x->active_at
                   : x->rate > 0.0       ? f->now + x->left / (x->rate * x->factor)
                                         : INFINITY;
        if (e < t) t = e;
    }
    return t;
}

/* Moves bytes for dt seconds at the present rates (no event inside). */
static void drain(het_flows *f, double dt) {
    if (!(dt > 0.0)) return;
    memset(f->used, 0, (size_t)f->n_res);
    for (int i = 0; i < f->n_live; i++) {
        flow *x = &f->fl[f->live[i]];
        if (x->state != F_ACTIVE || !(x->rate > 0.0)) continue;
        double moved = x->rate * x->factor * dt;
        if (moved > x->left) moved = x->left;
        x->left -= moved;
        for (int k = 0; k < x->n_route; k++) { /* what the flow took of the resource */
            f->res_bytes[x->route[k]] += moved / x->factor * x->weight[k];
            f->used[x->route[k]] = 1;
        }
    }
    for (int r = 0; r < f->n_res; r++)
        if (f->used[r]) f->res_busy[r] += dt;
}

/* At time now: flows past their latency become active; flows with no bytes left complete. */
static void settle(het_flows *f, double event) {
    int w = 0;
    for (int i = 0; i < f->n_live; i++) {
        int id = f->live[i];
        flow *x = &f->fl[id];
        if (x->state == F_WAITING && x->active_at <= f->now) {
            x->state = F_ACTIVE;
            f->dirty = 1;
        }
        /* the flow whose completion is this event ends now, whatever rounding left of it */
        if (x->state == F_ACTIVE && x->rate > 0.0 && event >= 0.0 && x->left > 0.0 &&
            f->now >= event && x->left <= x->rate * x->factor * (event * 1e-12 + 1e-15))
            x->left = 0.0;
        if (x->state == F_ACTIVE && x->left <= 0.0) {
            x->state = F_DONE;
            x->done = f->now;
            f->dirty = 1;
            continue;
        }
        f->live[w++] = id;
    }
    f->n_live = w;
}

void het_flows_advance(het_flows *f, double t) {
    if (!(t >= f->now)) return;
    for (;;) {
        double e = het_flows_next(f);
        if (!(e <= t)) break;
        drain(f, e - f->now);
        f->now = e;
        settle(f, e);
    }
    if (f->dirty) solve(f);
    if (t > f->now && isfinite(t)) { /* no event before t: the rates hold */
        drain(f, t - f->now);
        f->now = t;
    }
}

int het_flows_rewind(het_flows *f, double t) {
    if (f->n_live > 0 || !isfinite(t))
        return het_error_set(HET_EINVAL, "flows: rewind to %g s with %d flows live", t,
                             f->n_live);
    f->now = t;
    return HET_OK;
}

void het_flows_run(het_flows *f) {
    for (;;) {
        double e = het_flows_next(f);
        if (!isfinite(e)) break;
        het_flows_advance(f, e);
    }
}

double het_flows_rate(het_flows *f, int id) {
    if (id < 0 || id >= f->n_fl || f->fl[id].state != F_ACTIVE) return 0.0;
    if (f->dirty) solve(f);
    return f->fl[id].rate > 0.0 ? f->fl[id].rate : 0.0;
}

double het_flows_done(const het_flows *f, int id) {
    return id >= 0 && id < f->n_fl ? f->fl[id].done : -1.0;
}

double het_flows_resource_bytes(const het_flows *f, int r) {
    return r >= 0 && r < f->n_res ? f->res_bytes[r] : 0.0;
}

double het_flows_resource_busy_s(const het_flows *f, int r) {
    return r >= 0 && r < f->n_res ? f->res_busy[r] : 0.0;
}

double het_flows_now(const het_flows *f) { return f->now; }

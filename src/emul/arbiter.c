/* The arbiter: flows posted by lanes at their own virtual times, completed in virtual-time
 * order under a conservative rule (arbiter.h says what it models and why it is exact).
 *
 * State: every flow posted (its parameters until it enters the network, then its id there), the
 * ids posted but not yet in the network (`posted`), those in the network not yet complete
 * (`inflight`), and per lane its state (running, waiting, inside a collective, left), its clock,
 * what it waits for, and its flows by its own count (het_arbiter_find: the key a message's
 * header can carry). A settle is a loop over the next thing to commit: the network's next event
 * (committed once every promise is at or past it: a flow started at that very time changes no
 * rate before it) or the earliest posted start (admitted once every promise is past it, so that
 * every flow of that start is there and they enter in the order (lane, the lane's count)).
 * Promises are recomputed before each: a running lane's clock; a waiting lane's least end of
 * what it waits for (a flow complete: its end; in the network: the network's next event, before
 * which no flow ends; posted only: start + latency + bytes at the route's whole capacity; a
 * message not posted: its sender's promise + the lookahead); a lane in a collective the latest
 * of its members' (a member inside: its clock there); never below the lane's own clock. These
 * are the greatest fixed point of those rules, iterated down from "never". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emul/arbiter.h"
#include "hetrain/core.h"

enum { L_RUN, L_WAIT, L_GROUP, L_LEFT };
enum { ENTRIES = 64 };

typedef struct aflow {
    double start, bytes, latency, factor;
    double least;                      /* the earliest it can end: alone on its route */
    double weight[HET_FLOW_ROUTE_MAX];
    int route[HET_FLOW_ROUTE_MAX], n_route;
    int lane, seq;                     /* the order among flows of one start */
    int net;                           /* its id in the network, -1 while posted only */
    double done;                       /* final completion, -1 until then */
    int pending, dest, stream;         /* rendezvous: 1 until its receive is matched (start:
                                        * the send's time till then), its receiver and stream, */
    double lag;                        /* and how long after its send it can start at the
                                        * earliest (its header's time) */
} aflow;

typedef struct rstream {               /* a lane's receives posted on one stream, in order */
    int stream, n, cap, first;         /* first: the earliest not matched yet */
    double *tr;                        /* when each was posted, */
    int *src;                          /* from which lane (-1: any), */
    unsigned char *matched;            /* and whether it took its message */
} rstream;

typedef struct lane {
    int state, seq;
    double clock;
    int *flows, n_flows, cap_flows;    /* L_WAIT: for one of these flows */
    int *from, n_from, cap_from;       /* ... or a message from one of these lanes; L_GROUP:
                                        * the other members of its collective */
    double *look;
    double until;                      /* L_WAIT: it resumes by then at the latest (a message
                                        * the arbiter does not carry), or INFINITY */
    long long g_comm, g_seq;           /* L_GROUP: the collective (communicator, number) */
    struct entry { long long comm, seq; double t; } ent[ENTRIES]; /* the collectives it entered
                                        * last (a ring) and when, */
    int n_ent;
    struct { long long comm, seq; } *most; /* and per communicator the latest number */
    int n_most, cap_most;
    int *ids, n_ids, cap_ids;          /* its flows by its own count */
    rstream *rs;                       /* its receives, per stream */
    int n_rs, cap_rs;
} lane;

struct het_arbiter {
    int n_lanes, n_res;
    lane *ln;
    double *prom, *cap;
    het_flows *net;
    aflow *fl;
    int n_fl, cap_fl;
    int *posted, n_posted;             /* ids posted, not in the network yet */
    int *inflight, n_inflight;         /* ids in the network, not complete */
    int *pend, n_pend;                 /* ids waiting for their receive (rendezvous) */
    het_arbiter_span_fn span;          /* told each flow's rate between two events, or NULL */
    void *span_arg;
};

het_arbiter *het_arbiter_new(int n_lanes, int n_res, const double *capacity) {
    if (n_lanes < 1) {
        het_error_set(HET_EINVAL, "arbiter: %d lanes, expected at least 1", n_lanes);
        return NULL;
    }
    het_flows *net = het_flows_new(n_res, capacity);
    if (!net) return NULL;
    het_arbiter *a = calloc(1, sizeof *a);
    if (!a || !(a->ln = calloc((size_t)n_lanes, sizeof *a->ln)) ||
        !(a->prom = calloc((size_t)n_lanes, sizeof *a->prom)) ||
        !(a->cap = malloc((size_t)n_res * sizeof *a->cap))) {
        if (a) free(a->ln), free(a->prom);
        free(a);
        het_flows_free(net);
        het_error_set(HET_ENOMEM, "arbiter: out of memory for %d lanes", n_lanes);
        return NULL;
    }
    memcpy(a->cap, capacity, (size_t)n_res * sizeof *a->cap);
    a->n_lanes = n_lanes, a->n_res = n_res, a->net = net;
    return a;
}

void het_arbiter_free(het_arbiter *a) {
    if (!a) return;
    for (int i = 0; i < a->n_lanes; i++) {
        lane *l = &a->ln[i];
        free(l->flows), free(l->from), free(l->look), free(l->ids), free(l->most);
        for (int k = 0; k < l->n_rs; k++)
            free(l->rs[k].tr), free(l->rs[k].src), free(l->rs[k].matched);
        free(l->rs);
    }
    free(a->ln);
    free(a->prom);
    free(a->cap);
    free(a->fl);
    free(a->posted);
    free(a->inflight);
    free(a->pend);
    het_flows_free(a->net);
    free(a);
}

/* The lane `lane` if it may report at t (not before its promise); NULL with the error set. */
static lane *lane_at(het_arbiter *a, int id, double t, const char *op) {
    if (!a || id < 0 || id >= a->n_lanes) {
        het_error_set(HET_EINVAL, "arbiter %s: lane %d outside [0, %d)", op, id,
                      a ? a->n_lanes : 0);
        return NULL;
    }
    lane *l = &a->ln[id];
    if (l->state == L_LEFT) {
        het_error_set(HET_EINVAL, "arbiter %s: lane %d has left", op, id);
        return NULL;
    }
    if (!(t >= l->clock) || !isfinite(t)) {
        het_error_set(HET_EINVAL, "arbiter %s: lane %d at %.17g s, before its promise %.17g s",
                      op, id, t, l->clock);
        return NULL;
    }
    return l;
}

int het_arbiter_post(het_arbiter *a, int id, double start, double bytes, double latency,
                     double factor, const int *route, const double *weight, int n_route) {
    lane *l = lane_at(a, id, start, "post");
    if (!l) return HET_EINVAL;
    int rc = het_flows_check(a->net, start, bytes, latency, 0.0, factor, route, weight, n_route);
    if (rc != HET_OK) return rc;
    if (a->n_fl == a->cap_fl) {
        int cap = a->cap_fl ? 2 * a->cap_fl : 64;
        aflow *nf = realloc(a->fl, (size_t)cap * sizeof *nf);
        if (nf) a->fl = nf;
        int *np = nf ? realloc(a->posted, (size_t)cap * sizeof *np) : NULL;
        if (np) a->posted = np;
        int *ni = np ? realloc(a->inflight, (size_t)cap * sizeof *ni) : NULL;
        if (ni) a->inflight = ni;
        int *nd = ni ? realloc(a->pend, (size_t)cap * sizeof *nd) : NULL;
        if (!nd) return het_error_set(HET_ENOMEM, "arbiter: out of memory for %d flows", cap);
        a->pend = nd, a->cap_fl = cap;
    }
    if (l->n_ids == l->cap_ids) {
        int cap = l->cap_ids ? 2 * l->cap_ids : 16;
        int *ni = realloc(l->ids, (size_t)cap * sizeof *ni);
        if (!ni) return het_error_set(HET_ENOMEM, "arbiter: out of memory for %d flows", cap);
        l->ids = ni, l->cap_ids = cap;
    }
    l->ids[l->n_ids++] = a->n_fl;
    aflow *x = &a->fl[a->n_fl];
    memset(x, 0, sizeof *x);
    x->start = start, x->bytes = bytes, x->latency = latency, x->factor = factor;
    x->n_route = n_route, x->lane = id, x->seq = l->seq++, x->net = -1, x->done = -1.0;
    x->dest = -1;
    double rate = INFINITY; /* the most the route lets it move */
    for (int k = 0; k < n_route; k++) {
        x->route[k] = route[k];
        x->weight[k] = weight ? weight[k] : 1.0;
        if (a->cap[route[k]] / x->weight[k] < rate) rate = a->cap[route[k]] / x->weight[k];
    }
    x->least = start + latency + bytes / (rate * factor);
    if (bytes == 0.0) x->done = start + latency; /* no bandwidth: it ends whatever else runs */
    else a->posted[a->n_posted++] = a->n_fl;
    l->state = L_RUN, l->clock = start;
    return a->n_fl++;
}

int het_arbiter_post_rdv(het_arbiter *a, int lane_id, double start, int dest, int stream,
                         double lag, double bytes, double latency, double factor,
                         const int *route, const double *weight, int n_route) {
    if (!(lag >= 0.0) || !isfinite(lag))
        return het_error_set(HET_EINVAL, "arbiter post: a lag of %g s", lag);
    if (a && (dest < 0 || dest >= a->n_lanes || dest == lane_id))
        return het_error_set(HET_EINVAL, "arbiter post: lane %d sends to lane %d", lane_id, dest);
    int id = het_arbiter_post(a, lane_id, start, bytes, latency, factor, route, weight,
                              n_route);
    if (id < 0) return id;
    aflow *x = &a->fl[id];
    if (bytes > 0.0) a->n_posted--; /* posted last: it waits for its receive instead */
    x->done = -1.0, x->pending = 1, x->dest = dest, x->stream = stream, x->lag = lag;
    a->pend[a->n_pend++] = id;
    return id;
}

/* The index of lane l's receives on `stream` in l->rs, or -1. */
static int stream_at(const lane *l, int stream) {
    for (int k = 0; k < l->n_rs; k++)
        if (l->rs[k].stream == stream) return k;
    return -1;
}

/* Lane l's receives on `stream` (made when make, else NULL). */
static rstream *stream_of(lane *l, int stream, int make) {
    int k = stream_at(l, stream);
    if (k >= 0) return &l->rs[k];
    if (!make) return NULL;
    if (l->n_rs == l->cap_rs) {
        int cap = l->cap_rs ? 2 * l->cap_rs : 4;
        rstream *n = realloc(l->rs, (size_t)cap * sizeof *n);
        if (!n) return NULL;
        l->rs = n, l->cap_rs = cap;
    }
    l->rs[l->n_rs] = (rstream){.stream = stream};
    return &l->rs[l->n_rs++];
}

int het_arbiter_recv(het_arbiter *a, int id, double t, int stream, int src) {
    lane *l = lane_at(a, id, t, "receive");
    if (!l) return HET_EINVAL;
    if (src < -1 || src >= a->n_lanes || src == id)
        return het_error_set(HET_EINVAL, "arbiter receive: lane %d from lane %d", id, src);
    rstream *r = stream_of(l, stream, 1);
    if (r && r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        double *tr = realloc(r->tr, (size_t)cap * sizeof *tr);
        if (tr) r->tr = tr;
        int *sr = tr ? realloc(r->src, (size_t)cap * sizeof *sr) : NULL;
        if (sr) r->src = sr;
        unsigned char *m = sr ? realloc(r->matched, (size_t)cap) : NULL;
        if (m) r->matched = m, r->cap = cap;
        else r = NULL;
    }
    if (!r) return het_error_set(HET_ENOMEM, "arbiter: out of memory for receives");
    r->tr[r->n] = t, r->src[r->n] = src, r->matched[r->n] = 0;
    l->state = L_RUN, l->clock = t;
    return r->n++;
}

int het_arbiter_match(het_arbiter *a, int id, int stream, int r, int flow) {
    rstream *rs = a && id >= 0 && id < a->n_lanes ? stream_of(&a->ln[id], stream, 0) : NULL;
    if (!rs || r < 0 || r >= rs->n || rs->matched[r])
        return het_error_set(HET_EINVAL, "arbiter match: lane %d has no receive %d on stream %d "
                             "to match", id, r, stream);
    aflow *x = flow >= 0 && flow < a->n_fl ? &a->fl[flow] : NULL;
    if (flow >= 0 && (!x || (x->pending && (x->dest != id || x->stream != stream ||
                                            (rs->src[r] >= 0 && rs->src[r] != x->lane)))))
        return het_error_set(HET_EINVAL, "arbiter match: flow %d is not lane %d's on stream %d",
                             flow, id, stream);
    rs->matched[r] = 1;
    while (rs->first < rs->n && rs->matched[rs->first]) rs->first++;
    if (!x || !x->pending) return HET_OK; /* it did not wait for its receive */
    double start = x->start + x->lag > rs->tr[r] ? x->start + x->lag : rs->tr[r];
    if (start < het_flows_now(a->net))
        return het_error_set(HET_EINVAL, "arbiter match: flow %d starts at %.17g s, after the "
                             "network moved to %.17g s", flow, start, het_flows_now(a->net));
    x->least += start - x->start;
    x->start = start, x->pending = 0;
    if (x->bytes == 0.0) x->done = start + x->latency;
    else a->posted[a->n_posted++] = flow;
    int w = 0;
    for (int i = 0; i < a->n_pend; i++)
        if (a->pend[i] != flow) a->pend[w++] = a->pend[i];
    a->n_pend = w;
    return HET_OK;
}

double het_arbiter_start(const het_arbiter *a, int id) {
    return a && id >= 0 && id < a->n_fl ? a->fl[id].start : -1.0;
}

int het_arbiter_pending(const het_arbiter *a, int id) {
    return a && id >= 0 && id < a->n_fl && a->fl[id].pending;
}

int het_arbiter_run(het_arbiter *a, int id, double t) {
    lane *l = lane_at(a, id, t, "run");
    if (!l) return HET_EINVAL;
    l->state = L_RUN, l->clock = t;
    return HET_OK;
}

/* Makes room for n ints (and doubles when look) in a wait list. */
static int wait_room(int **v, double **look, int *cap, int n) {
    if (n <= *cap) return HET_OK;
    int *nv = realloc(*v, (size_t)n * sizeof *nv);
    if (nv) *v = nv;
    double *nl = nv && look ? realloc(*look, (size_t)n * sizeof *nl) : NULL;
    if (nl) *look = nl;
    if (!nv || (look && !nl)) return het_error_set(HET_ENOMEM, "arbiter: out of memory");
    *cap = n;
    return HET_OK;
}

int het_arbiter_wait(het_arbiter *a, int id, double t, const int *flows, int n_flows,
                     const int *from, const double *lookahead, int n_from) {
    return het_arbiter_wait_until(a, id, t, INFINITY, flows, n_flows, from, lookahead, n_from);
}

int het_arbiter_wait_until(het_arbiter *a, int id, double t, double until, const int *flows,
                           int n_flows, const int *from, const double *lookahead, int n_from) {
    lane *l = lane_at(a, id, t, "wait");
    if (!l) return HET_EINVAL;
    if (!(until >= t))
        return het_error_set(HET_EINVAL, "arbiter wait: lane %d at %.17g s waits until %.17g s",
                             id, t, until);
    if (n_flows < 0 || n_from < 0 || (n_flows && !flows) || (n_from && (!from || !lookahead)))
        return het_error_set(HET_EINVAL, "arbiter wait: %d flows, %d lanes", n_flows, n_from);
    for (int i = 0; i < n_flows; i++)
        if (flows[i] < 0 || flows[i] >= a->n_fl)
            return het_error_set(HET_EINVAL, "arbiter wait: flow %d was not posted", flows[i]);
    for (int i = 0; i < n_from; i++)
        if (from[i] < 0 || from[i] >= a->n_lanes || from[i] == id || !(lookahead[i] >= 0.0) ||
            !isfinite(lookahead[i]))
            return het_error_set(HET_EINVAL, "arbiter wait: lane %d waits for lane %d with a "
                                 "lookahead of %g s", id, from[i], lookahead[i]);
    int rc = wait_room(&l->flows, NULL, &l->cap_flows, n_flows);
    if (rc == HET_OK) rc = wait_room(&l->from, &l->look, &l->cap_from, n_from);
    if (rc != HET_OK) return rc;
    if (n_flows) memcpy(l->flows, flows, (size_t)n_flows * sizeof *flows);
    if (n_from) memcpy(l->from, from, (size_t)n_from * sizeof *from);
    if (n_from) memcpy(l->look, lookahead, (size_t)n_from * sizeof *lookahead);
    l->n_flows = n_flows, l->n_from = n_from, l->state = L_WAIT, l->clock = t, l->until = until;
    return HET_OK;
}

int het_arbiter_leave(het_arbiter *a, int id) {
    if (!a || id < 0 || id >= a->n_lanes)
        return het_error_set(HET_EINVAL, "arbiter leave: lane %d outside [0, %d)", id,
                             a ? a->n_lanes : 0);
    a->ln[id].state = L_LEFT;
    return HET_OK;
}

/* Notes that lane l entered collective (comm, seq) at t. */
static int note_entry(lane *l, long long comm, long long seq, double t) {
    l->ent[l->n_ent++ % ENTRIES] = (struct entry){comm, seq, t};
    for (int i = 0; i < l->n_most; i++)
        if (l->most[i].comm == comm) {
            if (seq > l->most[i].seq) l->most[i].seq = seq;
            return HET_OK;
        }
    if (l->n_most == l->cap_most) {
        int cap = l->cap_most ? 2 * l->cap_most : 4;
        void *m = realloc(l->most, (size_t)cap * sizeof *l->most);
        if (!m) return het_error_set(HET_ENOMEM, "arbiter: out of memory for collectives");
        l->most = m, l->cap_most = cap;
    }
    l->most[l->n_most].comm = comm, l->most[l->n_most++].seq = seq;
    return HET_OK;
}

int het_arbiter_enter(het_arbiter *a, int id, double t, long long comm, long long seq) {
    lane *l = lane_at(a, id, t, "enter a collective");
    return l ? note_entry(l, comm, seq, t) : HET_EINVAL;
}

int het_arbiter_wait_group(het_arbiter *a, int id, double t, long long comm, long long seq,
                           const int *members, int n) {
    lane *l = lane_at(a, id, t, "wait in a collective");
    if (!l) return HET_EINVAL;
    if (n < 0 || (n && !members))
        return het_error_set(HET_EINVAL, "arbiter wait in a collective: %d members", n);
    for (int i = 0; i < n; i++)
        if (members[i] < 0 || members[i] >= a->n_lanes)
            return het_error_set(HET_EINVAL, "arbiter wait in a collective: member %d outside "
                                 "[0, %d)", members[i], a->n_lanes);
    int rc = wait_room(&l->from, &l->look, &l->cap_from, n);
    if (rc != HET_OK) return rc;
    l->n_from = 0;
    for (int i = 0; i < n; i++)
        if (members[i] != id) l->from[l->n_from++] = members[i];
    int entered = 0; /* a wait after its post: the post's time stays its entry */
    for (int i = 0; i < ENTRIES && i < l->n_ent; i++)
        entered |= l->ent[i].comm == comm && l->ent[i].seq == seq;
    if (!entered && (rc = note_entry(l, comm, seq, t)) != HET_OK) return rc;
    l->n_flows = 0, l->g_comm = comm, l->g_seq = seq, l->state = L_GROUP, l->clock = t;
    return HET_OK;
}

/* When lane m entered collective (comm, seq): its time (1), entered at a time no longer kept
 * (0: it is past), or not yet (-1). */
static int entered(const lane *m, long long comm, long long seq, double *t) {
    for (int i = 0; i < ENTRIES && i < m->n_ent; i++)
        if (m->ent[i].comm == comm && m->ent[i].seq == seq) {
            *t = m->ent[i].t;
            return 1;
        }
    for (int i = 0; i < m->n_most; i++)
        if (m->most[i].comm == comm) return m->most[i].seq >= seq ? 0 : -1;
    return -1;
}

int het_arbiter_find(const het_arbiter *a, int id, int seq) {
    if (!a || id < 0 || id >= a->n_lanes || seq < 0 || seq >= a->ln[id].n_ids) return -1;
    return a->ln[id].ids[seq];
}

double het_arbiter_wait_bound(het_arbiter *a, int id) {
    if (!a || id < 0 || id >= a->n_lanes || a->ln[id].state != L_WAIT) return INFINITY;
    const lane *l = &a->ln[id];
    double en = het_flows_next(a->net), b = INFINITY;
    for (int k = 0; k < l->n_flows; k++) {
        const aflow *x = &a->fl[l->flows[k]];
        double end = x->done >= 0.0 ? INFINITY : x->net < 0 ? x->least : en;
        if (end < b) b = end;
    }
    for (int k = 0; k < l->n_from; k++)
        if (a->prom[l->from[k]] + l->look[k] < b) b = a->prom[l->from[k]] + l->look[k];
    return b;
}

/* Lane i's promise from the others' (prom) and the network's next event en. */
static double promise_of(const het_arbiter *a, int i, double en) {
    const lane *l = &a->ln[i];
    double p = INFINITY;
    switch (l->state) {
    case L_RUN: return l->clock;
    case L_LEFT: return INFINITY;
    case L_GROUP: /* it resumes once the last member is in: no earlier than any member's
                   * entry, or the promise of one not in yet */
        p = l->clock;
        for (int k = 0; k < l->n_from; k++) {
            double q = -INFINITY;
            int in = entered(&a->ln[l->from[k]], l->g_comm, l->g_seq, &q);
            if (in < 0) q = a->prom[l->from[k]];
            if (q > p) p = q;
        }
        return p;
    default: /* L_WAIT: the least end of what it waits for, or its time limit */
        p = l->until;
        for (int k = 0; k < l->n_flows; k++) {
            const aflow *x = &a->fl[l->flows[k]];
            double end = x->done >= 0.0 ? x->done : x->net < 0 ? x->least : en;
            if (end < p) p = end;
        }
        for (int k = 0; k < l->n_from; k++)
            if (a->prom[l->from[k]] + l->look[k] < p) p = a->prom[l->from[k]] + l->look[k];
        return p < l->clock ? l->clock : p;
    }
}

/* Every lane's promise, the network's next event at en: the greatest fixed point of
 * promise_of, from "never" down (lanes that wait for each other with nothing to end it keep
 * "never"; every step only lowers a promise, so the loop ends). */
static void promises(het_arbiter *a, double en) {
    for (int i = 0; i < a->n_lanes; i++) a->prom[i] = INFINITY;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < a->n_lanes; i++) {
            double p = promise_of(a, i, en);
            if (p < a->prom[i]) a->prom[i] = p, changed = 1;
        }
    }
}

/* Adds the posted flows that start at s to the network, in (lane, count) order. */
static int admit(het_arbiter *a, double s) {
    for (;;) {
        int best = -1, bi = -1;
        for (int i = 0; i < a->n_posted; i++) {
            int id = a->posted[i];
            if (id < 0 || a->fl[id].start != s) continue;
            const aflow *x = &a->fl[id];
            if (best < 0 || x->lane < a->fl[best].lane ||
                (x->lane == a->fl[best].lane && x->seq < a->fl[best].seq))
                best = id, bi = i;
        }
        if (best < 0) break;
        aflow *x = &a->fl[best];
        x->net = het_flows_add_weighted(a->net, x->start, x->bytes, x->latency, 0.0, x->factor,
                                        x->route, x->weight, x->n_route);
        if (x->net < 0) return x->net;
        a->inflight[a->n_inflight++] = best;
        a->posted[bi] = -1;
    }
    int w = 0;
    for (int i = 0; i < a->n_posted; i++)
        if (a->posted[i] >= 0) a->posted[w++] = a->posted[i];
    a->n_posted = w;
    return HET_OK;
}

/* Records the completions the network made final. */
static void collect(het_arbiter *a) {
    int w = 0;
    for (int i = 0; i < a->n_inflight; i++) {
        aflow *x = &a->fl[a->inflight[i]];
        double d = het_flows_done(a->net, x->net);
        if (d >= 0.0) x->done = d;
        else a->inflight[w++] = a->inflight[i];
    }
    a->n_inflight = w;
}

/* The earliest a flow waiting for its receive can start: its send, and the first receive of
 * its receiver on its stream not matched yet that can take it (from its lane or any; every
 * later one comes after it), or, with none, the receiver's promise (it posts none before). */
static double pending_bound(const het_arbiter *a) {
    double b = INFINITY;
    for (int i = 0; i < a->n_pend; i++) {
        const aflow *x = &a->fl[a->pend[i]];
        const lane *r = &a->ln[x->dest];
        int k = stream_at(r, x->stream);
        const rstream *rs = k >= 0 ? &r->rs[k] : NULL;
        double t = a->prom[x->dest];
        for (int k2 = rs ? rs->first : 0; rs && k2 < rs->n; k2++)
            if (!rs->matched[k2] && (rs->src[k2] < 0 || rs->src[k2] == x->lane)) {
                t = rs->tr[k2];
                break;
            }
        if (t < x->start + x->lag) t = x->start + x->lag;
        if (t < b) b = t;
    }
    return b;
}

void het_arbiter_on_span(het_arbiter *a, het_arbiter_span_fn fn, void *arg) {
    if (a) a->span = fn, a->span_arg = arg;
}

/* Tells the span callback every flow's rate from the network's time to t. */
static void spans(het_arbiter *a, double t) {
    double now = het_flows_now(a->net);
    for (int i = 0; a->span && t > now && i < a->n_inflight; i++) {
        double rate = het_flows_rate(a->net, a->fl[a->inflight[i]].net);
        if (rate > 0.0) a->span(a->span_arg, a->inflight[i], now, t, rate);
    }
}

double het_arbiter_settle(het_arbiter *a) {
    if (!a) return 0.0;
    for (;;) {
        double en = het_flows_next(a->net), es = INFINITY;
        for (int i = 0; i < a->n_posted; i++)
            if (a->fl[a->posted[i]].start < es) es = a->fl[a->posted[i]].start;
        promises(a, en);
        double h = pending_bound(a); /* a flow not matched yet starts no earlier */
        for (int i = 0; i < a->n_lanes; i++)
            if (a->prom[i] < h) h = a->prom[i];
        if (en <= es && isfinite(en)) {
            if (!(h >= en)) break;
            spans(a, en);
            het_flows_advance(a->net, en);
            collect(a);
        } else if (isfinite(es)) {
            if (!(h > es) || admit(a, es) != HET_OK) break;
        } else {
            break;
        }
    }
    return het_flows_now(a->net);
}

double het_arbiter_done(const het_arbiter *a, int id) {
    return a && id >= 0 && id < a->n_fl ? a->fl[id].done : -1.0;
}

double het_arbiter_promise(const het_arbiter *a, int id) {
    return a && id >= 0 && id < a->n_lanes ? a->prom[id] : -1.0;
}

const het_flows *het_arbiter_flows(const het_arbiter *a) { return a ? a->net : NULL; }

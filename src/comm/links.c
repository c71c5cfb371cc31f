/* Link occupancy on the virtual clock: the model's sanity counter ("no link carries more than
 * its bandwidth", issue #36).
 *
 * DESIGN. Every transfer the model charges across nodes notes the span of virtual time during
 * which its bytes move and the node links they take there: a point-to-point message is noted
 * by its receiver once it knows the arrival, on the sender's node's way out and its own node's
 * way in, for its wire time (bytes / bandwidth, latency excluded) before the arrival at load
 * 1, or, when it shared the receiver's way in with others (p2p_inbox.c), for each span between
 * two of that network's events at its share of the link then (under --p2p-model arbiter: by
 * world rank 0, from the arbiter's network, between two of its events: comm.c note_span); a
 * collective that crosses nodes is noted by each
 * participant on both ways of its own node's link, for the wire time of the collective's
 * busiest link (the model's time without latency) at its end, the node's participants taking
 * equal shares of load 1 (the model already charges the node's ranks of one collective for
 * their common link). At the end of an epoch (het_comm_links_epoch, collective over the world,
 * charged to no clock) rank 0 gathers every span and sweeps each link way's spans in time
 * order: between two consecutive span ends the load is the sum of the spans' loads then; the
 * link is busy while the load is above 0 (counted up to its capacity) and over capacity by
 * the load above 1 (two transfers each moving at the whole bandwidth at once count one). Each
 * node's figures go back to its ranks as shares of the world's epoch (earliest start to latest
 * end of the ranks' clocks), with the worst link of the world. A link the model treats
 * physically shows 0. Exact for the spans noted; what it cannot see is the model's own
 * approximation of a collective's timing (its wire time placed at its end). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/internal.h"
#include "emul/emul.h"

void het_comm_link_note(het_comm *c, int node_out, int node_in, double t0, double t1,
                        double load) {
    if (!c || !het_clock_virtual() || !(t1 > t0) || !(load > 0.0)) return;
    het_link_log *g = &c->links;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 256;
        het_link_span *s = realloc(g->span, cap * sizeof *s);
        if (!s) { /* the counter is incomplete, not wrong: it says so (measured = 0) */
            g->lost = 1;
            return;
        }
        g->span = s, g->cap = cap;
    }
    g->span[g->n++] = (het_link_span){t0, t1, load, node_out, node_in};
}

size_t het_comm_link_mark(const het_comm *c) { return c ? c->links.n : 0; }

void het_comm_link_rewind(het_comm *c, size_t mark) {
    if (c && mark <= c->links.n) c->links.n = mark;
}

void het_comm_links_begin(het_comm *c) {
    if (!c) return;
    c->links.n = 0;
    c->links.lost = 0;
    c->links.t_begin = het_lane_now(c->lane);
}

/* An event of the sweep: at t, the load of link way `key` (2 node + 0 out / 1 in) changes. */
typedef struct ev {
    double t, dl;
    int key;
} ev;

static int cmp_ev(const void *a, const void *b) {
    const ev *x = a, *y = b;
    if (x->key != y->key) return (x->key > y->key) - (x->key < y->key);
    return (x->t > y->t) - (x->t < y->t);
}

/* Every rank's spans at world rank 0 (*all, *n_all there; nothing elsewhere). */
static int gather_spans(het_comm *c, het_link_span **all, int *n_all) {
    *all = NULL, *n_all = 0;
    MPI_Comm w = c->topo->world;
    int size = c->topo->size, root = c->topo->rank == 0;
    if (c->links.n > (size_t)INT_MAX / sizeof(het_link_span))
        return het_error_set(HET_EINVAL, "link counters: %zu spans on one rank", c->links.n);
    int mine = (int)(c->links.n * sizeof(het_link_span));
    int *cnt = root ? malloc((size_t)size * sizeof *cnt) : NULL;
    int *off = root ? malloc((size_t)size * sizeof *off) : NULL;
    int rc = !root || (cnt && off) ? HET_OK : het_error_set(HET_ENOMEM, "link counters: out "
                                                             "of memory");
    rc = het_comm_agree(w, rc); /* every rank joins each collective below, or none does */
    if (rc == HET_OK) { /* the counts, then the spans */
        MPI_Request q;
        int err = MPI_Igather(&mine, 1, MPI_INT, cnt, 1, MPI_INT, 0, w, &q);
        if (err == MPI_SUCCESS) err = het_stall_collective(w, "gather", &q);
        if (err != MPI_SUCCESS) rc = het_comm_mpi_error(err, "MPI_Igather(link span counts)");
    }
    long long total = 0;
    for (int r = 0; root && rc == HET_OK && r < size; r++)
        off[r] = total <= INT_MAX ? (int)total : 0, total += cnt[r];
    int ok = rc == HET_OK && total <= INT_MAX &&
             (!root || (*all = malloc(total > 0 ? (size_t)total : 1)));
    if (rc == HET_OK && root && !ok)
        rc = het_error_set(HET_ENOMEM, "link counters: out of memory for %lld bytes of spans",
                           total);
    rc = het_comm_agree(w, rc);
    if (rc == HET_OK) {
        MPI_Request q;
        int err = MPI_Igatherv(c->links.span, mine, MPI_BYTE, *all, cnt, off, MPI_BYTE, 0, w, &q);
        if (err == MPI_SUCCESS) err = het_stall_collective(w, "gatherv", &q);
        if (err != MPI_SUCCESS) rc = het_comm_mpi_error(err, "MPI_Igatherv(link spans)");
    }
    free(cnt), free(off);
    if (rc != HET_OK) free(*all), *all = NULL;
    else if (root) *n_all = (int)(total / (long long)sizeof(het_link_span));
    return rc;
}

/* Seconds busy (v[key]) and over capacity (v[2 N + key]) of every link way, key = 2 node +
 * 0 (out) or 1 (in), by a sweep over each way's span ends in time order. */
static int sweep(const het_link_span *sp, int n, int n_nodes, double *v) {
    ev *e = malloc((size_t)(4 * n > 0 ? 4 * n : 1) * sizeof *e);
    if (!e) return het_error_set(HET_ENOMEM, "link counters: out of memory for %d spans", n);
    int m = 0;
    for (int i = 0; i < n; i++) {
        const int nd[2] = {sp[i].node_out, sp[i].node_in};
        for (int d = 0; d < 2; d++)
            if (nd[d] >= 0 && nd[d] < n_nodes) {
                e[m++] = (ev){sp[i].t0, sp[i].load, 2 * nd[d] + d};
                e[m++] = (ev){sp[i].t1, -sp[i].load, 2 * nd[d] + d};
            }
    }
    qsort(e, (size_t)m, sizeof *e, cmp_ev);
    double load = 0.0;
    for (int i = 0; i < m; i++) {
        if (i > 0 && e[i].key != e[i - 1].key) load = 0.0;
        else if (i > 0 && e[i].t > e[i - 1].t) {
            double dt = e[i].t - e[i - 1].t;
            if (load > 1e-9) v[e[i].key] += dt * fmin(load, 1.0);
            if (load > 1.0 + 1e-9) v[2 * n_nodes + e[i].key] += dt * (load - 1.0);
        }
        load += e[i].dl;
    }
    free(e);
    return HET_OK;
}

int het_comm_links_epoch(het_comm *c, het_comm_links *out) {
    memset(out, 0, sizeof *out);
    if (!c || !het_clock_virtual()) return HET_OK;
    /* busy[2N], over[2N] (seconds), lost, -start, end: one MAX over the world gives every rank
     * rank 0's sweep (the others hold 0s), whether any rank lost a span, and the world's epoch */
    const int N = c->topo->n_nodes, K = 4 * N + 3;
    double *v = calloc((size_t)K, sizeof *v);
    if (!v) return het_error_set(HET_ENOMEM, "link counters: out of memory");
    het_link_span *all = NULL;
    int n_all = 0, rc = gather_spans(c, &all, &n_all);
    if (!rc && c->topo->rank == 0) rc = sweep(all, n_all, N, v);
    free(all);
    v[4 * N] = c->links.lost, v[4 * N + 1] = -c->links.t_begin;
    v[4 * N + 2] = het_lane_now(c->lane);
    if (!rc) rc = het_comm_allreduce_aside(c, HET_COMM_WORLD, v, K, HET_T_DOUBLE, HET_OP_MAX);
    const double len = v[4 * N + 2] + v[4 * N + 1];
    for (int k = 0; k < 4 * N; k++) v[k] = len > 0.0 ? v[k] / len : 0.0;
    if (!rc) {
        const int me = c->topo->node_id;
        out->busy_out = v[2 * me], out->busy_in = v[2 * me + 1];
        out->over_out = v[2 * N + 2 * me], out->over_in = v[2 * N + 2 * me + 1];
        for (int k = 0; k < 2 * N; k++) {
            out->busy_max = fmax(out->busy_max, v[k]);
            out->over_max = fmax(out->over_max, v[2 * N + k]);
        }
        out->measured = v[4 * N] == 0.0;
    }
    free(v);
    return rc;
}

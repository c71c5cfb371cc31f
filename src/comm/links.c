/* Link occupancy on the virtual clock: the model's sanity counter ("no link carries more than
 * its bandwidth", issue #36).
 *
 * DESIGN. Every transfer the model charges across nodes notes, on its rank, the span of
 * virtual time during which it occupies its node's link and the share of the link it takes
 * there: a point-to-point message occupies the sender's way out and the receiver's way in for
 * its wire time (bytes / bandwidth) at load 1, its latency excluded; a collective that crosses
 * nodes occupies both ways of every node link it crosses for the wire time of its busiest link
 * (its latency excluded), at its end, each of the node's participating ranks taking an equal
 * share (the model already charges the node's ranks of one collective for their common link).
 * At the end of an epoch (het_comm_links_epoch, collective over the world, charged to no
 * clock) each node's ranks gather the node's spans (an all-gather over the node) and sweep
 * them in time order: between two consecutive span ends the link's load is the sum of the
 * spans' loads then, and each node link gets its busy share (the time it carried anything,
 * capped at its capacity) and its oversubscribed share (the time-weighted load above capacity:
 * two transfers each moving at the whole bandwidth at once count one), per direction, as
 * shares of the world's epoch (earliest start to latest end of the ranks' clocks); the worst
 * link of the world comes with them. A link the model treats physically shows 0. Exact for
 * the spans noted; what it does not see is the model's own approximation of a collective's
 * timing (its wire time placed at its end). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/internal.h"
#include "emul/emul.h"

void het_comm_link_note(het_comm *c, int dirs, double t0, double t1, double load) {
    if (!c || !het_clock_virtual() || !(t1 > t0) || !(load > 0.0) || !dirs) return;
    het_link_log *g = &c->links;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 256;
        het_link_span *s = realloc(g->span, cap * sizeof *s);
        if (!s) { /* the counter is incomplete, not wrong: it says so */
            g->lost = 1;
            return;
        }
        g->span = s, g->cap = cap;
    }
    g->span[g->n++] = (het_link_span){t0, t1, load, dirs};
}

size_t het_comm_link_mark(const het_comm *c) { return c ? c->links.n : 0; }

void het_comm_link_rewind(het_comm *c, size_t mark) {
    if (c && mark <= c->links.n) c->links.n = mark;
}

void het_comm_links_begin(het_comm *c) {
    if (!c) return;
    c->links.n = 0;
    c->links.lost = 0;
    c->links.t_begin = het_clock_now();
}

/* An event of the sweep: at t, the load of direction d changes by dl. */
typedef struct ev {
    double t, dl;
    int d;
} ev;

static int cmp_ev(const void *a, const void *b) {
    const ev *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

/* Every span of this rank's node (an all-gather over the node's ranks) into *all, *n_all. */
static int node_spans(het_comm *c, het_link_span **all, int *n_all) {
    *all = NULL, *n_all = 0;
    MPI_Comm node = het_comm_mpi(c, HET_COMM_NODE);
    int size = 1;
    MPI_Comm_size(node, &size);
    if (c->links.n > (size_t)(INT_MAX / (int)sizeof(het_link_span)) / (size_t)size)
        return het_error_set(HET_EINVAL, "link counters: %zu spans on one rank", c->links.n);
    int mine = (int)c->links.n * (int)sizeof(het_link_span);
    int *cnt = malloc((size_t)size * sizeof *cnt), *off = malloc((size_t)size * sizeof *off);
    if (!cnt || !off) {
        free(cnt), free(off);
        return het_error_set(HET_ENOMEM, "link counters: out of memory");
    }
    MPI_Request q;
    int err = MPI_Iallgather(&mine, 1, MPI_INT, cnt, 1, MPI_INT, node, &q);
    if (err == MPI_SUCCESS) err = het_stall_collective(node, "allgather", &q);
    long long total = 0;
    for (int r = 0; err == MPI_SUCCESS && r < size; r++) off[r] = (int)total, total += cnt[r];
    int rc = HET_OK;
    if (err != MPI_SUCCESS) rc = het_comm_mpi_error(err, "MPI_Iallgather(link span counts)");
    else if (total > INT_MAX) rc = het_error_set(HET_EINVAL, "link counters: too many spans");
    else if (!(*all = malloc(total > 0 ? (size_t)total : 1)))
        rc = het_error_set(HET_ENOMEM, "link counters: out of memory for %lld bytes", total);
    if (rc == HET_OK) {
        err = MPI_Iallgatherv(c->links.span, mine, MPI_BYTE, *all, cnt, off, MPI_BYTE, node, &q);
        if (err == MPI_SUCCESS) err = het_stall_collective(node, "allgatherv", &q);
        if (err != MPI_SUCCESS) rc = het_comm_mpi_error(err, "MPI_Iallgatherv(link spans)");
    }
    free(cnt), free(off);
    if (rc != HET_OK) free(*all), *all = NULL;
    else *n_all = (int)(total / (long long)sizeof(het_link_span));
    return rc;
}

/* Busy and over-capacity seconds of the node's link per direction (v[0..1] busy, v[2..3]
 * over), by a sweep over the spans' ends in time order. */
static int sweep(const het_link_span *sp, int n, double v[4]) {
    ev *e = malloc((size_t)(4 * n > 0 ? 4 * n : 1) * sizeof *e);
    if (!e) return het_error_set(HET_ENOMEM, "link counters: out of memory for %d spans", n);
    int m = 0;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < 2; d++)
            if (sp[i].dirs & (1 << d)) {
                e[m++] = (ev){sp[i].t0, sp[i].load, d};
                e[m++] = (ev){sp[i].t1, -sp[i].load, d};
            }
    qsort(e, (size_t)m, sizeof *e, cmp_ev);
    double load[2] = {0, 0};
    for (int i = 0; i < m; i++) {
        if (i > 0 && e[i].t > e[i - 1].t) {
            double dt = e[i].t - e[i - 1].t;
            for (int d = 0; d < 2; d++) {
                if (load[d] > 1e-9) v[d] += dt * fmin(load[d], 1.0);
                if (load[d] > 1.0 + 1e-9) v[2 + d] += dt * (load[d] - 1.0);
            }
        }
        load[e[i].d] += e[i].dl;
    }
    free(e);
    return HET_OK;
}

int het_comm_links_epoch(het_comm *c, het_comm_links *out) {
    memset(out, 0, sizeof *out);
    out->measured = 0;
    if (!c || !het_clock_virtual()) return HET_OK;
    double span[2] = {-c->links.t_begin, het_clock_now()}; /* the world's epoch: MAX of both */
    int rc = het_comm_allreduce_aside(c, HET_COMM_WORLD, span, 2, HET_T_DOUBLE, HET_OP_MAX);
    if (rc) return rc;
    double len = span[1] + span[0], v[5] = {0, 0, 0, 0, c->links.lost};
    het_link_span *all = NULL;
    int n_all = 0;
    if ((rc = node_spans(c, &all, &n_all)) == HET_OK) rc = sweep(all, n_all, v);
    free(all);
    if (rc) return rc;
    for (int k = 0; k < 4; k++) v[k] = len > 0.0 ? v[k] / len : 0.0;
    out->busy_out = v[0], out->busy_in = v[1], out->over_out = v[2], out->over_in = v[3];
    if ((rc = het_comm_allreduce_aside(c, HET_COMM_WORLD, v, 5, HET_T_DOUBLE, HET_OP_MAX)))
        return rc;
    out->busy_max = fmax(v[0], v[1]);
    out->over_max = fmax(v[2], v[3]);
    out->measured = v[4] == 0.0;
    return HET_OK;
}

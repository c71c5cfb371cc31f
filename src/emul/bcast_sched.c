/* Broadcasts as the MPI library's code runs them, rank by rank (issue #36): each rank's part of
 * the algorithm is a short program of point-to-point operations (post a send, post a receive,
 * wait for one request, wait for all), and a small discrete-event run executes the programs of
 * all ranks against the flow model (emul/flows.c). What it models:
 * - a message starts when both its send and its receive are posted (SimGrid's rendezvous in the
 *   mailbox; in a broadcast the receiver is nearly always there first), between nodes as a flow
 *   from the sender's node uplink to the receiver's node downlink (latency x lat_factor, bytes
 *   at bw x bw_factor, with cross-traffic 5 % of its rate on the back route), inside a node at
 *   node_lat + bytes / node_bw when local_on, unshared;
 * - a send of 64 KiB or more completes when its bytes are in, a smaller one when posted (the
 *   eager limit of Open MPI's TCP transport, SMPI's send-is-detached threshold);
 * - the broadcast ends when the last message is in.
 * Events are taken in time order (a rank's next operations at its clock, a flow's end, a
 * message inside a node arriving), lowest rank first on ties, so the result is exact and the
 * same bit for bit for the same inputs.
 *
 * The programs (written from the algorithms' descriptions in Open MPI 4.1's coll/base and
 * libnbc; relative rank x = (rank - root) mod p):
 * - chain (coll/base's chain and pipeline, fanout 1, through its generic tree broadcast): x
 *   receives each segment from x - 1 and passes it to x + 1; it posts the receive of segment
 *   k + 1 before waiting for segment k, and waits for the send of segment k before it waits for
 *   segment k + 1; the root waits for each segment's send before the next. Open MPI 4.1's fixed
 *   rules give no segment size: one segment, the whole buffer hop by hop.
 * - scatter + all-gather (coll/base's scatter_allgather; MPICH's scatter + recursive doubling
 *   is the same for a power of two): a binomial tree scatters blocks of ceil(bytes / p), x
 *   receiving its subtree's blocks from x - lowbit(x) and sending the upper halves on, the
 *   largest first, with blocking sends; then recursive doubling, at distance 1, 2, 4 ...
 *   exchanging what each subtree holds (a send-receive); with p not a power of two the ranks
 *   whose partner does not exist get the missing blocks by recursive halving inside their
 *   subtree, from ranks that have them.
 * - libnbc's binomial tree (MPI_Ibcast on more than 4 ranks): ranks 0 and root swap places; v
 *   receives from v - 2^floor(log2 v), then posts its sends to v + 2^r for every 2^r > v at
 *   once (the nearest first), so they share its node's uplink.
 * - Open MPI's binomial tree (coll/base's binomial: the generic tree broadcast over
 *   topo_build_bmtree): x receives from x with its highest bit cleared, then posts its sends to
 *   x + 2^k for every 2^k > x at once and waits for them, libnbc's tree but rotated to the
 *   root. (MPICH's binomial tree, which SMPI runs for Open MPI's: x receives from x less its
 *   lowest bit and sends one blocking send after another; bcast.c.)
 * - the binary tree (coll/base's bintree: the generic tree broadcast over topo_build_tree with
 *   fanout 2): levels {0}, {1, 2}, {3 .. 6}, ...; x on level l has the children x + 2^l and
 *   x + 2^(l+1); x receives from its parent, then posts its sends to both children at once
 *   and waits for them (unsegmented: the fixed rules give no segment size).
 * - the split binary tree (coll/base's split_bintree, on that tree): the root sends the first
 *   half (ceil(bytes / 2)) down its left child's subtree (odd x) and the rest down its right
 *   child's (even x), one blocking send after another, each rank passing its half to its
 *   children the same way; then x exchanges halves with its pair in the other subtree (x + 1
 *   for odd x, x - 1 for even x, a send-receive); on an even number of ranks the last rank
 *   (odd, no pair) gets the second half from the root instead. With segments (Open MPI's
 *   fixed rules give none; SMPI's copy takes 1 KiB below 370728 bytes, 8 KiB above) the root
 *   sends segment k of each half in turn, and a rank receives segment k + 1 while it passes
 *   segment k on; the exchange moves whole halves. A half empty or smaller than a segment:
 *   the chain, as the library falls back to. */
#include <math.h>
#include <stdlib.h>

#include "emul/flows.h"
#include "hetrain/emul.h"

enum { EAGER_LIMIT = 65536 };
enum { OP_ISEND, OP_IRECV, OP_WAIT, OP_WAITALL };

typedef struct {
    int kind, peer, req; /* peer: a rank; req: OP_WAIT's request (the rank's n-th post) */
    double bytes;        /* OP_ISEND */
} op;

typedef struct {
    int src, dst;
    double bytes, post_s, post_r; /* posts: < 0 not yet */
    double in;                    /* arrival; < 0 not yet known */
    int flow;                     /* its flow, or -1 */
} msg;

typedef struct {
    op *ops;
    int n_ops, cap_ops;
    int pc;
    double t;     /* when it runs its next operation (INFINITY: blocked or finished) */
    double since; /* blocked: since when */
    int *req;     /* its posts in order: msg id x 2 + (1 for a receive) */
    int n_req, cap_req;
} prog;

typedef struct {
    het_netem ne;
    const int *node;
    int p;
    prog *r;
    msg *m;
    int n_m, cap_m;
    het_flows *f;
    int *flow_msg; /* by flow id: its message */
    int cap_flows;
    int local_on; /* messages inside a node cost the node link's time */
    int oom;
} sched;

static void *grow(void *a, int *cap, int need, size_t size) {
    if (need <= *cap) return a;
    int c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *b = realloc(a, (size_t)c * size);
    if (b) *cap = c;
    return b;
}

static void emit(sched *s, int rank, int kind, int peer, double bytes, int req) {
    prog *g = &s->r[rank];
    op *o = grow(g->ops, &g->cap_ops, g->n_ops + 1, sizeof *o);
    if (!o) { s->oom = 1; return; }
    g->ops = o;
    g->ops[g->n_ops++] = (op){kind, peer, req, bytes};
}

/* A rank's program, by relative ranks (x's rank is (x + root) mod p); posts return the number
 * a wait names. */
typedef struct {
    sched *s;
    int root, p, posts;
} writer;

static int rank_of(const writer *w, int x) { return (x + w->root) % w->p; }
static int isend(writer *w, int x, int y, double bytes) {
    emit(w->s, rank_of(w, x), OP_ISEND, rank_of(w, y), bytes, 0);
    return w->posts++;
}
static int irecv(writer *w, int x, int y) {
    emit(w->s, rank_of(w, x), OP_IRECV, rank_of(w, y), 0.0, 0);
    return w->posts++;
}
static void wait1(writer *w, int x, int req) { emit(w->s, rank_of(w, x), OP_WAIT, 0, 0.0, req); }
static void waitall(writer *w, int x) { emit(w->s, rank_of(w, x), OP_WAITALL, 0, 0.0, 0); }
static void send(writer *w, int x, int y, double bytes) { wait1(w, x, isend(w, x, y, bytes)); }
static void recv(writer *w, int x, int y) { wait1(w, x, irecv(w, x, y)); }

/* ---- the run ---- */

static int msg_find(sched *s, int src, int dst, int recv_side) {
    for (int i = 0; i < s->n_m; i++) /* the first of the pair still missing this side */
        if (s->m[i].src == src && s->m[i].dst == dst &&
            (recv_side ? s->m[i].post_r : s->m[i].post_s) < 0.0)
            return i;
    msg *m = grow(s->m, &s->cap_m, s->n_m + 1, sizeof *m);
    if (!m) { s->oom = 1; return -1; }
    s->m = m;
    s->m[s->n_m] = (msg){src, dst, 0.0, -1.0, -1.0, -1.0, -1};
    return s->n_m++;
}

/* Starts message i at t (both sides posted by now). */
static void start(sched *s, int i, double t) {
    msg *m = &s->m[i];
    int a = s->node[m->src], b = s->node[m->dst];
    if (a == b) { /* the node link, unshared */
        m->in = t + (s->local_on ? het_netem_local_bcast_s(s->ne, (size_t)m->bytes, 2) : 0.0);
        return;
    }
    het_flows_advance(s->f, t);
    size_t bytes = (size_t)m->bytes;
    double lat = (s->ne.lat_s > 0.0 ? s->ne.lat_s : 0.0) *
                 het_netem_pw_at(&s->ne.lat_factor, m->bytes);
    const int route[4] = {2 * a, 2 * b + 1, 2 * b, 2 * a + 1};
    const double weight[4] = {1.0, 1.0, HET_NETEM_BACK, HET_NETEM_BACK};
    int id = het_flows_add_weighted(s->f, t, m->bytes, lat, 0.0,
                                    het_netem_pw_at(&s->ne.bw_factor, (double)bytes), route,
                                    weight, s->ne.crosstraffic ? 4 : 2);
    int *fm = id >= 0 ? grow(s->flow_msg, &s->cap_flows, id + 1, sizeof *fm) : NULL;
    if (!fm) { s->oom = 1; return; }
    s->flow_msg = fm;
    fm[id] = i;
    m->flow = id;
}

/* When request q (msg x 2 + recv) is complete, or a negative number while unknown. */
static double req_done(const sched *s, int q) {
    const msg *m = &s->m[q / 2];
    if (!(q & 1) && m->bytes < EAGER_LIMIT && m->post_s >= 0.0) return m->post_s;
    return m->in;
}

/* When wait o (one request, or all the rank's so far) entered at t ends: 1 and *until, or 0
 * while one of its requests is not known yet. */
static int wait_end(const sched *s, const prog *g, const op *o, double t, double *until) {
    int from = o->kind == OP_WAIT ? o->req : 0, to = o->kind == OP_WAIT ? o->req + 1 : g->n_req;
    *until = t;
    for (int j = from; j < to; j++) {
        double d = req_done(s, g->req[j]);
        if (d < 0.0) return 0;
        if (d > *until) *until = d;
    }
    return 1;
}

/* Runs rank k's program at its clock until it waits for something not yet in. */
static void step(sched *s, int k) {
    prog *g = &s->r[k];
    double t = g->t;
    while (g->pc < g->n_ops && !s->oom) {
        const op *o = &g->ops[g->pc];
        if (o->kind == OP_ISEND || o->kind == OP_IRECV) {
            int rs = o->kind == OP_IRECV;
            int i = rs ? msg_find(s, o->peer, k, 1) : msg_find(s, k, o->peer, 0);
            int *q = i >= 0 ? grow(g->req, &g->cap_req, g->n_req + 1, sizeof *q) : NULL;
            if (!q) { s->oom = 1; return; }
            g->req = q;
            g->req[g->n_req++] = 2 * i + rs;
            msg *m = &s->m[i];
            if (rs) m->post_r = t;
            else m->post_s = t, m->bytes = o->bytes;
            if (m->post_s >= 0.0 && m->post_r >= 0.0) start(s, i, t);
            g->pc++;
            continue;
        }
        double until;
        if (!wait_end(s, g, o, t, &until)) { g->t = INFINITY, g->since = t; return; }
        if (until > t) { g->t = until; g->pc++; return; } /* resumes then */
        g->pc++;
    }
    g->t = INFINITY;
    g->since = -1.0; /* finished */
}

/* A blocked rank whose wait has become known: its clock moves to the wait's end. */
static void wake(sched *s) {
    for (int k = 0; k < s->p; k++) {
        prog *g = &s->r[k];
        if (!(g->since >= 0.0) || g->pc >= g->n_ops) continue;
        const op *o = &g->ops[g->pc];
        if (o->kind != OP_WAIT && o->kind != OP_WAITALL) continue;
        double until;
        if (wait_end(s, g, o, g->since, &until)) g->t = until, g->since = -1.0, g->pc++;
    }
}

static double run(sched *s) {
    double end = 0.0;
    for (;;) {
        int k = -1;
        for (int i = 0; i < s->p; i++)
            if (!isinf(s->r[i].t) && (k < 0 || s->r[i].t < s->r[k].t)) k = i;
        double t_rank = k >= 0 ? s->r[k].t : INFINITY, t_flow = het_flows_next(s->f);
        if (s->oom || (isinf(t_rank) && isinf(t_flow))) break;
        if (t_flow <= t_rank) {
            het_flows_advance(s->f, t_flow);
            for (int i = 0; i < s->n_m; i++) {
                msg *m = &s->m[i];
                if (m->flow >= 0 && m->in < 0.0 && het_flows_done(s->f, m->flow) >= 0.0)
                    m->in = het_flows_done(s->f, m->flow);
            }
            wake(s);
            continue;
        }
        step(s, k);
        wake(s); /* a message inside a node is in at once (its arrival known) */
    }
    for (int i = 0; i < s->n_m && !s->oom; i++) {
        if (s->m[i].in < 0.0) return -1.0; /* a program waits for ever: a bug here */
        if (s->m[i].in > end) end = s->m[i].in;
    }
    return s->oom ? -1.0 : end;
}

typedef void (*builder)(writer *w, int x, size_t bytes, size_t seg);

static double sched_s(het_netem ne, const int *node, int p, int root, size_t bytes, int local_on,
                      builder build, size_t seg) {
    if (p <= 1 || bytes == 0 || root < 0 || root >= p) return 0.0;
    int n_nodes = 0;
    for (int r = 0; r < p; r++)
        if (node[r] + 1 > n_nodes) n_nodes = node[r] + 1;
    sched s = {.ne = ne, .node = node, .p = p};
    s.local_on = local_on;
    double cap = ne.bw_bytes_per_s > 0.0 ? ne.bw_bytes_per_s : 1e300; /* 0: infinite */
    double *caps = malloc((size_t)2 * (size_t)n_nodes * sizeof *caps);
    s.r = calloc((size_t)p, sizeof *s.r);
    double end = -1.0;
    if (!caps || !s.r) goto out;
    for (int i = 0; i < 2 * n_nodes; i++) caps[i] = cap;
    if (!(s.f = het_flows_new(2 * n_nodes, caps))) goto out;
    for (int x = 0; x < p && !s.oom; x++) {
        s.r[x].since = -1.0; /* runs from 0 */
        writer w = {&s, root, p, 0};
        build(&w, x, bytes, seg);
    }
    if (!s.oom) end = run(&s);
out:
    if (s.r)
        for (int k = 0; k < p; k++) free(s.r[k].ops), free(s.r[k].req);
    free(s.r);
    free(s.m);
    free(s.flow_msg);
    het_flows_free(s.f);
    free(caps);
    return end;
}

/* ---- the algorithms ---- */

static void chain(writer *w, int x, size_t bytes, size_t seg) {
    if (seg == 0 || seg > bytes) seg = bytes; /* one segment */
    size_t n = (bytes + seg - 1) / seg;
    double size = (double)seg, last = (double)bytes - (double)(n - 1) * size;
    int p = w->p, r_prev = -1;
    for (size_t k = 0; k < n; k++) {
        double b = k + 1 == n ? last : size;
        if (x == 0) { send(w, x, 1, b); continue; }
        int r = irecv(w, x, x - 1);
        if (k == 0) { r_prev = r; continue; }
        wait1(w, x, r_prev); /* segment k - 1 in: pass it on */
        if (x + 1 < p) send(w, x, x + 1, size);
        r_prev = r;
    }
    if (x == 0) return;
    wait1(w, x, r_prev);
    if (x + 1 < p) send(w, x, x + 1, last);
}

static long lmin(long a, long b) { return a < b ? a : b; }
/* The bytes of the blocks [t, t + m) of size sc (what a subtree rooted t of m ranks holds). */
static long span_bytes(long total, long sc, long t, long m) {
    long n = lmin(total, (t + m) * sc) - t * sc;
    return n > 0 ? n : 0;
}

static void scatter_allgather(writer *w, int x, size_t bytes, size_t seg) {
    (void)seg;
    long total = (long)bytes, p = w->p, sc = (total + p - 1) / p, curr = x == 0 ? total : 0;
    long mask = 1;
    for (; mask < p; mask <<= 1) /* from the parent: the subtree's blocks */
        if (x & mask) {
            if (total - x * sc > 0) {
                recv(w, x, (int)(x - mask));
                curr = span_bytes(total, sc, x, mask);
            }
            break;
        }
    for (mask >>= 1; mask > 0; mask >>= 1) /* to the children, the largest first */
        if (x + mask < p && curr - sc * mask > 0) {
            send(w, x, (int)(x + mask), (double)(curr - sc * mask));
            curr = sc * mask;
        }
    curr = span_bytes(total, sc, x, 1);
    for (mask = 1; mask < p; mask <<= 1) { /* recursive doubling */
        long y = x ^ mask, xt = x / mask * mask, yt = y / mask * mask, got = 0;
        if (y < p) {
            int r = irecv(w, x, (int)y);
            send(w, x, (int)y, (double)curr);
            wait1(w, x, r);
            got = span_bytes(total, sc, yt, mask);
            curr += got;
        }
        if (yt + mask <= p) continue;
        long have = p - xt - mask; /* ranks of x's subtree whose partner exists */
        for (long h = mask >> 1; h > 0; h >>= 1) { /* recursive halving to those without */
            long z = x ^ h, tr = x / (2 * h) * (2 * h);
            if (z > x && x < tr + have && z >= tr + have && z < p)
                send(w, x, (int)z, (double)got);
            else if (z < x && z < tr + have && x >= tr + have) {
                recv(w, x, (int)z);
                curr += span_bytes(total, sc, yt, mask);
            }
        }
    }
}

/* libnbc's vranks: 0 and the root swap places; the writer's relative ranks are rotated, so
 * this builder maps its vranks itself (w->root = 0 and the swap below). */
static int nbc_rank(int v, int root) { return v == 0 ? root : v == root ? 0 : v; }

/* The binomial tree of Open MPI's bmtree and libnbc: v receives from v with its highest bit
 * cleared, then posts its sends to v + 2^k for every 2^k > v (below p) at once, the nearest
 * first. swap: libnbc's vranks (ranks 0 and root swap places), else relative ranks. */
static void bmtree(writer *w, int v, size_t bytes, int swap) {
    int p = w->p, root = w->root;
    if (swap) w->root = 0; /* emit by real ranks */
#define VR(u) (swap ? nbc_rank((u), root) : (u))
    int hi = 1;
    while (hi * 2 <= v) hi *= 2;
    if (v != 0) recv(w, VR(v), VR(v - hi));
    for (int r = 1; r < p; r *= 2)
        if (v < r && v + r < p) isend(w, VR(v), VR(v + r), (double)bytes);
    waitall(w, VR(v));
#undef VR
    w->root = root;
}

static void nbc_binomial(writer *w, int v, size_t bytes, size_t seg) {
    (void)seg;
    bmtree(w, v, bytes, 1);
}

/* Open MPI's tree of fanout 2 (topo_build_tree): x's level, parent and i-th child (or -1). */
static int bt_level(int x) {
    int level = 0;
    for (long num = 0; num <= x; level++) num += 1L << level;
    return level - 1;
}

static int bt_parent(int x) {
    if (x < 2) return 0;
    int l = bt_level(x), y = x;
    while (y >= (1 << l) - 1) y -= 1 << (l - 1); /* back a level at a time */
    return y;
}

static int bt_child(int x, int i, int p) {
    int y = x + (1 << bt_level(x)) * (i + 1);
    return y < p ? y : -1;
}

static void bintree(writer *w, int x, size_t bytes, size_t seg) {
    (void)seg;
    if (x > 0) recv(w, x, bt_parent(x));
    for (int i = 0; i < 2; i++)
        if (bt_child(x, i, w->p) >= 0) isend(w, x, bt_child(x, i, w->p), (double)bytes);
    waitall(w, x);
}

/* The segments of one half: n of `size` bytes, the last `last`. */
typedef struct {
    size_t n;
    double size, last;
} segs;

static segs segs_of(double half, size_t seg) {
    if (seg == 0 || (double)seg >= half) return (segs){1, half, half};
    size_t n = (size_t)ceil(half / (double)seg);
    return (segs){n, (double)seg, half - (double)(n - 1) * (double)seg};
}

static void split_bintree(writer *w, int x, size_t bytes, size_t seg) {
    const double half[2] = {(double)((bytes + 1) / 2), (double)(bytes / 2)};
    if (half[1] < 1.0 || (double)seg > half[1]) { /* too small to split: the chain */
        chain(w, x, bytes, seg);
        return;
    }
    const segs sg[2] = {segs_of(half[0], seg), segs_of(half[1], seg)};
    int p = w->p, lr = (x + 1) % 2; /* 0: the left subtree (odd x), 1: the right (the root) */
    int kid[2] = {bt_child(x, 0, p), bt_child(x, 1, p)};
    if (x == 0) { /* segment by segment, one blocking send a child */
        for (size_t k = 0; k < sg[0].n; k++)
            for (int i = 0; i < 2; i++)
                if (kid[i] >= 0 && k < sg[i].n)
                    send(w, x, kid[i], k + 1 == sg[i].n ? sg[i].last : sg[i].size);
    } else if (kid[0] >= 0) { /* receive segment k + 1 while passing segment k on */
        int r = irecv(w, x, bt_parent(x));
        for (size_t k = 1; k < sg[lr].n; k++) {
            int next = irecv(w, x, bt_parent(x));
            wait1(w, x, r);
            for (int i = 0; i < 2; i++)
                if (kid[i] >= 0) send(w, x, kid[i], sg[lr].size);
            r = next;
        }
        wait1(w, x, r);
        for (int i = 0; i < 2; i++)
            if (kid[i] >= 0) send(w, x, kid[i], sg[lr].last);
    } else {
        for (size_t k = 0; k < sg[lr].n; k++) recv(w, x, bt_parent(x));
    }
    int pair = lr == 0 ? (x + 1) % p : (x + p - 1) % p;
    if (p % 2 == 0 && x == 0) {
        send(w, x, p - 1, half[1]);
    } else if (p % 2 == 0 && x == p - 1) {
        recv(w, x, 0);
    } else if (x != 0) { /* a send-receive with the pair: the whole halves */
        int r = irecv(w, x, pair);
        send(w, x, pair, half[lr]);
        wait1(w, x, r);
    }
}

/* Open MPI's binomial tree (coll/base's topo_build_bmtree, run by the generic tree broadcast):
 * x receives from x with its highest bit cleared and posts its sends to x + 2^k for every
 * 2^k > x at once, the nearest first (libnbc's tree without the root swap). */
static void ompi_binomial(writer *w, int x, size_t bytes, size_t seg) {
    (void)seg;
    bmtree(w, x, bytes, 0);
}

double het_netem_bcast_ompi_binomial_s(het_netem ne, const int *node, int p, int root,
                                       size_t bytes, int local_on) {
    return sched_s(ne, node, p, root, bytes, local_on, ompi_binomial, 0);
}

double het_netem_bcast_bintree_s(het_netem ne, const int *node, int p, int root, size_t bytes,
                                 int local_on) {
    return sched_s(ne, node, p, root, bytes, local_on, bintree, 0);
}

double het_netem_bcast_split_bintree_s(het_netem ne, const int *node, int p, int root,
                                       size_t bytes, int local_on, size_t seg) {
    return sched_s(ne, node, p, root, bytes, local_on, split_bintree, seg);
}

double het_netem_bcast_chain_s(het_netem ne, const int *node, int p, int root, size_t bytes,
                               int local_on, size_t seg) {
    return sched_s(ne, node, p, root, bytes, local_on, chain, seg);
}

double het_netem_bcast_scatter_allgather_s(het_netem ne, const int *node, int p, int root,
                                           size_t bytes, int local_on) {
    return sched_s(ne, node, p, root, bytes, local_on, scatter_allgather, 0);
}

double het_netem_bcast_nbc_binomial_s(het_netem ne, const int *node, int p, int root,
                                      size_t bytes, int local_on) {
    return sched_s(ne, node, p, root, bytes, local_on, nbc_binomial, 0);
}

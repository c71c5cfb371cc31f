/* The point-to-point layer's side of the arbiter (--p2p-model arbiter, the virtual clock): the
 * messages between nodes are flows that world rank 0's arbiter completes in virtual-time order
 * (comm/arb_svc.c, emul/arbiter.c), so a node's ranks share its way out, messages going
 * opposite ways take their cross-traffic from each other, and senders into one receiver share
 * its way in, whichever ranks they come from.
 *
 * DESIGN. Every message is named at the arbiter when sent, by its index on its stream (scope
 * and tag) to its receiver, carried in its header: one between nodes with a payload as a flow
 * that starts at its stamp (no queue of its own: the arbiter shares the way out), the others
 * (inside the node, no payload) as a message that arrives a fixed time after its start (the
 * node link's model), which the arbiter tells a receiver only once nothing else it waits for
 * can end earlier. Every payload is copied and a send's wait returns at once, its MPI requests
 * completed in the background: under a conservative rule a rank that blocked on its receiver
 * taking a message would hold that receiver, which may wait for the sender's promise. A
 * receive learns its message's arrival from the arbiter, and before it blocks it says what it
 * waits for (a report whenever that changes; the rank's promise follows it): its matched
 * message; a receive from one sender not matched yet, that sender's next message (the answer
 * is taken once it is matched); a receive from any sender, each sender's message there or
 * next. The arbiter's first answer is the earliest of them in virtual time (it makes ends final
 * in time order; at a tie by name: the sender's rank), which decides the receive. A test of a
 * receive takes an answer that is there and reports nothing (a receive that is only tested
 * never completes: no strategy does). Rendezvous (the model's rndv_bytes > 0): every receive is
 * told the arbiter when posted and, once its inbox takes a header, which message it took, so
 * that a message of that size moves from the later of its send and its receive; a receive from
 * any sender is matched by the arbiter (the message sent first: comm/arb_rdv.c), and its wait
 * names the receive. A wait may carry a time limit (het_comm_msg_wait_untimed_by: inhad's
 * server, which sends its push at a time of its own if nothing comes by then). Not carried:
 * lanes other than the rank's main one (qfb's threads, inhad's aggregator thread), waitany;
 * they are refused. */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/arb_svc.h"
#include "comm/p2p.h"

typedef struct detached { MPI_Request *reqs; int n; void *copy; } detached;

struct arb_side {
    detached *bg;             /* sends whose wait returned, still with MPI */
    int n_bg, cap_bg;
    het_arb_name *rep;        /* the wait reported last: its names, */
    int *owner;               /* the sender each stands for (-1: a hold) */
    int n_rep, cap_rep, number, valid;
    int rep_recv;             /* its receive from any sender for the arbiter to match, or -1 */
    double rep_until;         /* its time limit (INFINITY: none) */
    int has_limit, limit_hit; /* a wait with a time limit (het_p2p_arb_limit), and its answer */
    double limit;
    het_arb_name *nm;         /* scratch: the wait being built */
    int *own, cap_nm;
};

static struct arb_side *side(het_comm *c) {
    if (!c->p2p->arb) c->p2p->arb = calloc(1, sizeof *c->p2p->arb);
    if (!c->p2p->arb) het_error_set(HET_ENOMEM, "p2p: out of memory for the arbiter's side");
    return c->p2p->arb;
}

int het_p2p_arb_copy(het_msg *m, const void *buf, size_t bytes, const char *op) {
    if (!(m->copy = malloc(bytes ? bytes : 1)))
        return het_error_set(HET_ENOMEM, "%s: out of memory for a copy of %zu bytes", op, bytes);
    if (bytes) memcpy(m->copy, buf, bytes);
    return HET_OK;
}

int het_p2p_arb_detach(het_comm *c, het_msg *m) {
    struct arb_side *a = side(c);
    if (!a) return HET_ENOMEM;
    if (m->n_reqs > 0) {
        detached *bg = a->n_bg == a->cap_bg ? realloc(a->bg, (size_t)(a->cap_bg ? 2 * a->cap_bg
                                                                               : 16) * sizeof *bg)
                                            : a->bg;
        MPI_Request *q = bg ? malloc((size_t)m->n_reqs * sizeof *q) : NULL;
        if (bg && bg != a->bg) a->bg = bg, a->cap_bg = a->cap_bg ? 2 * a->cap_bg : 16;
        if (!q) return het_error_set(HET_ENOMEM, "p2p: out of memory for a send's requests");
        memcpy(q, m->reqs, (size_t)m->n_reqs * sizeof *q);
        a->bg[a->n_bg++] = (detached){q, m->n_reqs, m->copy};
        m->copy = NULL;
    }
    het_p2p_reqs_release(m);
    free(m->copy);
    m->copy = NULL;
    m->state = S_ARRIVED;
    return HET_OK;
}

void het_p2p_arb_reap(het_comm *c, int at_exit) {
    struct arb_side *a = c->p2p ? c->p2p->arb : NULL;
    int w = 0;
    for (int i = 0; a && i < a->n_bg; i++) {
        int flag = 0;
        het_mpi_testall(a->bg[i].n, a->bg[i].reqs, &flag);
        if (!flag && at_exit) { /* nobody took it: MPI keeps the request, the copy stays */
            for (int k = 0; k < a->bg[i].n; k++)
                if (a->bg[i].reqs[k] != MPI_REQUEST_NULL) MPI_Request_free(&a->bg[i].reqs[k]);
            free(a->bg[i].reqs);
            continue;
        }
        if (!flag) {
            a->bg[w++] = a->bg[i];
            continue;
        }
        free(a->bg[i].reqs);
        free(a->bg[i].copy);
    }
    if (a) a->n_bg = w;
}

void het_p2p_arb_free(het_comm *c) {
    struct arb_side *a = c->p2p ? c->p2p->arb : NULL;
    if (!a) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    /* a receiver may still be taking the last messages: up to 10 s for them, then MPI keeps
     * what is left (and its copy: MPI may still read it) */
    for (double t0 = het_now(); !finalized && a->n_bg > 0 && het_now() - t0 < 10.0;) {
        het_p2p_arb_reap(c, 0);
        if (a->n_bg > 0) sched_yield();
    }
    if (!finalized) het_p2p_arb_reap(c, 1);
    free(a->bg), free(a->rep), free(a->owner), free(a->nm), free(a->own);
    free(a);
    c->p2p->arb = NULL;
}

static inbox *box_of(het_comm *c, const het_msg *m) { return c->p2p->box[m->scope][m->tag]; }

/* Adds a name (owner: its sender, -1 a hold) to the wait being built. */
static int add(struct arb_side *a, int *n, het_arb_name nm, int owner) {
    if (*n == a->cap_nm) {
        int cap = a->cap_nm ? 2 * a->cap_nm : 16;
        het_arb_name *x = realloc(a->nm, (size_t)cap * sizeof *x);
        if (x) a->nm = x;
        int *o = x ? realloc(a->own, (size_t)cap * sizeof *o) : NULL;
        if (!o) return het_error_set(HET_ENOMEM, "p2p: out of memory for a wait's names");
        a->own = o, a->cap_nm = cap;
    }
    a->nm[*n] = nm, a->own[(*n)++] = owner;
    return HET_OK;
}

/* Sender j's message on inbox b with index k. */
static int add_msg(het_comm *c, struct arb_side *a, const inbox *b, int j, int k, int *n) {
    return add(a, n, (het_arb_name){c->p2p->peer[b->scope].world[j],
                                    het_p2p_stream(b->scope, b->tag), k}, j);
}

/* What receive m waits for now: names (a->nm, a->own, *n), and whether an answer would decide
 * it (*take: 1 its arrival, 2 the sender of a receive from any sender, 0 none: a report only:
 * a receive from one sender whose message is not here yet, whose answer its match takes);
 * *recv: the receive from any sender the arbiter matches (rendezvous), or -1. */
static int build(het_comm *c, struct arb_side *a, het_msg *m, int *n, int *take, int *recv) {
    *n = 0, *take = 0, *recv = -1;
    if (m->state >= S_XFER) {
        if (m->arb_next <= 0) return HET_OK;
        *take = 1;
        return add(a, n, (het_arb_name){m->peer_world, het_p2p_stream(m->scope, m->tag),
                                        m->arb_next - 1}, m->src);
    }
    const inbox *b = box_of(c, m);
    const het_msg *r = b->head ? b->head : m; /* the receive that holds the queue */
    if (r->want >= 0) return add_msg(c, a, b, r->want, b->next_k[r->want], n);
    if (b->decided >= 0) return HET_OK; /* decided: its header is on its way */
    *take = 2, *recv = r->arb_r;
    for (int j = 0; j < b->size; j++) {
        if (!b->in_set[j] || b->state[j] == CH_DONE) continue;
        int rc = add_msg(c, a, b, j, b->state[j] == CH_HELD ? b->hdr[j].arb_k : b->next_k[j], n);
        if (rc != HET_OK) return rc;
    }
    return HET_OK;
}

static double until_of(const struct arb_side *a) { return a->has_limit ? a->limit : INFINITY; }

static int same_wait(const struct arb_side *a, int n, int recv) {
    if (!a->valid || a->n_rep != n || a->rep_recv != recv || a->rep_until != until_of(a))
        return 0;
    for (int i = 0; i < n; i++)
        if (a->rep[i].src != a->nm[i].src || a->rep[i].stream != a->nm[i].stream ||
            a->rep[i].k != a->nm[i].k)
            return 0;
    return 1;
}

/* Reports the wait built in a->nm when it is not the one reported last. */
static int report(het_comm *c, struct arb_side *a, int n, int recv) {
    if (same_wait(a, n, recv)) return HET_OK;
    if (n > a->cap_rep) {
        het_arb_name *r = realloc(a->rep, (size_t)n * sizeof *r);
        if (r) a->rep = r;
        int *o = r ? realloc(a->owner, (size_t)n * sizeof *o) : NULL;
        if (!o) return het_error_set(HET_ENOMEM, "p2p: out of memory for a wait's names");
        a->owner = o, a->cap_rep = n;
    }
    if (n) memcpy(a->rep, a->nm, (size_t)n * sizeof *a->rep);
    if (n) memcpy(a->owner, a->own, (size_t)n * sizeof *a->owner);
    a->n_rep = n, a->valid = 1, a->rep_recv = recv, a->rep_until = until_of(a);
    double t = het_comm_arbiter_now(c), look = het_arb_svc_min_latency(c->arb);
    return recv >= 0 ? het_arb_svc_wait_recv(c->arb, t, n, a->rep, look, recv, a->rep_until,
                                             &a->number)
                     : het_arb_svc_wait_post(c->arb, t, n, a->rep, look, a->rep_until,
                                             &a->number);
}

/* Takes an answer for the wait reported last, if there is one: *got, and decides m. */
static int answer(het_comm *c, struct arb_side *a, het_msg *m, int take, int *got) {
    int which = -3;
    double end = -1.0;
    /* a report only (take 0): the time limit's answer alone, the names' stay for the match */
    *got = het_arb_svc_wait_test(c->arb, take ? a->n_rep : 0, a->rep, a->rep_until, a->number,
                                 &which, &end);
    if (!*got) return HET_OK;
    a->valid = 0; /* the next wait reports anew */
    if (which == -1) { /* the time limit came first: nothing it names ends by then */
        a->limit_hit = 1;
        return HET_OK;
    }
    if (take == 1) {
        m->deliver = end, m->arb_next = 0;
        return HET_OK;
    }
    inbox *b = box_of(c, m);
    b->decided = which >= 0 ? a->owner[which] : -1;
    b->decided_end = end;
    if (b->decided < 0)
        return het_error_set(HET_EINVAL, "p2p: the arbiter answered a hold (name %d)", which);
    return het_p2p_progress(c, b); /* takes it if its header is there */
}

int het_p2p_arb_poll(het_comm *c, het_msg *m, int *ready) {
    *ready = m->kind != M_RECV || (m->state >= S_XFER && m->arb_next <= 0);
    if (*ready || m->state == S_FINISHED) return HET_OK;
    struct arb_side *a = side(c);
    int n = 0, take = 0, got = 0, recv = -1;
    int rc = a ? build(c, a, m, &n, &take, &recv) : HET_ENOMEM;
    if (rc != HET_OK || n == 0) return rc;
    if ((rc = report(c, a, n, recv)) != HET_OK) return rc;
    if ((take || a->has_limit) && (rc = answer(c, a, m, take, &got)) != HET_OK) return rc;
    *ready = m->state >= S_XFER && m->arb_next <= 0;
    return HET_OK;
}

int het_p2p_arb_test(het_comm *c, het_msg *m, int *ready) {
    *ready = m->kind != M_RECV || m->arb_next <= 0;
    if (*ready || m->state < S_XFER) return HET_OK;
    het_arb_name nm = {m->peer_world, het_p2p_stream(m->scope, m->tag), m->arb_next - 1};
    int which = -3, rc = het_arb_svc_serve(c->arb);
    double end = -1.0;
    if (rc == HET_OK && het_arb_svc_wait_test(c->arb, 1, &nm, INFINITY, -1, &which, &end))
        m->deliver = end, m->arb_next = 0, *ready = 1;
    return rc;
}

int het_p2p_arb_choose(het_comm *c, inbox *b) {
    (void)c;
    if (b->decided >= 0 && b->state[b->decided] == CH_DONE) b->decided = -1; /* it said done */
    return b->decided >= 0 && b->state[b->decided] == CH_HELD ? b->decided : NOT_YET;
}

/* ---- rendezvous (the model's rndv_bytes > 0; comm/arb_rdv.c) ---- */

static int rdv_on(const het_comm *c) { return c->ne.rndv_bytes > 0.0; }

int het_p2p_arb_posted(het_comm *c, inbox *b, het_msg *m) {
    if (!rdv_on(c)) return HET_OK;
    int src = m->want >= 0 ? c->p2p->peer[b->scope].world[m->want] : -1;
    int rc = het_arb_svc_recv(c->arb, het_comm_arbiter_now(c), het_p2p_stream(b->scope, b->tag),
                              src, &m->arb_r);
    if (rc != HET_OK) { /* the arbiter would hold every rank for it: the job ends */
        fprintf(stderr, "hetrain: p2p receive: %s\n", het_error_msg());
        MPI_Abort(c->topo->world, 1);
    }
    return rc;
}

int het_p2p_arb_took(het_comm *c, inbox *b, het_msg *m, int j, const het_msg_hdr *h,
                     int decided) {
    if (!rdv_on(c) || m->arb_r < 0) return HET_OK;
    int stream = het_p2p_stream(b->scope, b->tag), rc = HET_OK;
    int waited = h && !h->done && (double)h->bytes >= c->ne.rndv_bytes && h->bytes > 0;
    if (decided && waited) return HET_OK; /* the arbiter matched it when it decided */
    het_arb_name nm = {j >= 0 ? c->p2p->peer[b->scope].world[j] : -1, stream,
                       h ? h->arb_k : -1};
    rc = het_arb_svc_match(c->arb, stream, m->arb_r, j >= 0 && h->arb_k >= 0 ? &nm : NULL);
    if (rc != HET_OK) {
        fprintf(stderr, "hetrain: p2p receive: %s\n", het_error_msg());
        MPI_Abort(c->topo->world, 1);
    }
    return rc;
}

void het_p2p_arb_progress_all(het_comm *c) {
    struct het_p2p *st = c && c->arb && rdv_on(c) ? c->p2p : NULL;
    for (int sc = 0; st && sc < N_SCOPES; sc++)
        for (int t = 0; t < HET_P2P_TAGS; t++) {
            inbox *b = st->box[sc][t];
            if (b && b->head && het_p2p_progress(c, b) != HET_OK) {
                fprintf(stderr, "hetrain: p2p: %s\n", het_error_msg());
                MPI_Abort(c->topo->world, 1);
            }
        }
}

void het_p2p_arb_limit(het_comm *c, int on, double limit) {
    struct arb_side *a = side(c);
    if (!a) return;
    a->has_limit = on, a->limit = limit, a->limit_hit = 0;
}

int het_p2p_arb_limit_hit(het_comm *c) { return c->p2p->arb && c->p2p->arb->limit_hit; }

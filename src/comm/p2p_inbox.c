/* The receiving side of point-to-point messages (p2p.c holds the sending side and the
 * waits): inboxes, the order in which receives take messages, probe, drain and shutdown.
 *
 * DESIGN. Receives go through an inbox per scope and tag: per sender a channel holding a
 * posted receive of its next header (IDLE: none posted, POSTED, HELD: a header is there,
 * DONE: a done message is there), and the queue of the receives posted on the inbox. A channel's
 * receive is posted only when the receive at the queue's head needs it, so a sender's later
 * messages wait inside MPI, in order, until they are wanted. The head is matched first
 * (receives match in posting order; one that cannot be matched holds back those behind it,
 * so that what a receive gets never depends on how far MPI got): a receive from one sender
 * takes its channel's header; a receive from any sender takes the HELD header with the
 * smallest (deliver, sender), on the virtual clock only once every other channel of the set
 * is HELD or DONE (Chandy-Misra-Bryant without lookahead: a done message is the null message
 * with an infinite time), and reports "every sender done" when all its channels are DONE.
 * Only then is the payload's receive posted, into the receive's buffer (the sender's chunks
 * from one sender and tag arrive in order, as the headers are taken in order).
 *
 * The way in. On the virtual clock the messages from other nodes that a receive from any
 * sender takes share the receiver's way in max-min fairly, as SimGrid's flow model shares a
 * link (emul/flows.c, one network of one resource per rank, in_net): N senders into one
 * receiver (a parameter server) each get 1/N of it while they overlap, not first come first
 * served. A message's flow starts when the sender's model has its bytes start to move (its
 * arrival less its transfer time: after the latency, behind the sender's earlier messages)
 * and its arrival is when its last byte is in. Exact under the same conservative rule as the
 * order: a flow is added once its header is there, and the network is moved only to the first
 * completion among the flows of an inbox whose every sender has a message there or is done,
 * so no flow that could still come starts before that time (a sender's next message to this
 * rank starts behind the one being taken; with one message a sender in flight, as the
 * parameter servers have, nothing is missed). What it leaves out: flows from one sender are
 * one after another here (one connection) where SimGrid would run them side by side; a flow
 * whose header comes after the network has moved past its start starts then (another tag's
 * inbox moved it). Receives from one sender match in posting order, not in arrival order, so
 * they keep the sender's arrival. The link counter gets the shares as they change.
 *
 * Rendezvous. On the virtual clock a payload of at least the model's rndv_bytes waits for its
 * receive, as MPI's rendezvous protocol (and SMPI, for every size by default) makes it: its
 * bytes move from the later of its header's arrival (its leaving + a header's time: the header
 * goes first, and the payload's receive is posted once it is in) and the receive's posting
 * (m->posted: the clock at the receive, or a lane's time), so its arrival moves by that much
 * (from one sender), or its flow on the way in starts then (from any sender). A receive from
 * any sender takes such messages in the order their envelopes come in (leave + a header's
 * time: MPI matches the first envelope; the payload then moves alone beside the eager flows in
 * flight), one per receive: a parameter server takes one gradient after each update, not all
 * at once. Between the two kinds the receive takes the earlier of an eager message's arrival
 * and a waiting message's envelope: the way in moves no further than that envelope. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/p2p.h"

static void inbox_free(inbox *b) {
    if (!b) return;
    free(b->hdr);
    free(b->req);
    free(b->state);
    free(b->idx);
    free(b->in_set);
    free(b->flow);
    free(b->next_k);
    free(b);
}

/* The inbox of (s, tag) into *out, made on first use with every other rank of the scope as
 * its set (and the scope's peers). */
static int inbox_get(het_comm *c, het_comm_scope s, int tag, const where *at, inbox **out) {
    inbox **slot = &c->p2p->box[s][tag];
    if ((*out = *slot)) return HET_OK;
    inbox *b = calloc(1, sizeof *b);
    int size = at->size;
    size_t n = (size_t)size;
    if (!b || !(b->hdr = calloc(n, sizeof *b->hdr)) || !(b->req = malloc(n * sizeof *b->req)) ||
        !(b->state = calloc(n, sizeof *b->state)) || !(b->idx = malloc(n * sizeof *b->idx)) ||
        !(b->in_set = malloc(n)) || !(b->flow = malloc(n * sizeof *b->flow)) ||
        !(b->next_k = calloc(n, sizeof *b->next_k))) {
        inbox_free(b);
        return het_error_set(HET_ENOMEM, "p2p: out of memory for an inbox of %d senders", size);
    }
    b->comm = at->comm, b->size = size, b->rank = at->rank, b->tag = tag, b->scope = (int)s;
    b->decided = -1;
    for (int j = 0; j < size; j++)
        b->req[j] = MPI_REQUEST_NULL, b->in_set[j] = j != at->rank, b->flow[j] = -1;
    *out = *slot = b;
    return HET_OK;
}

/* Posts sender j's header receive if none is (not for DONE: its next round waits in MPI). */
static int post_channel(inbox *b, int j) {
    if (b->state[j] != CH_IDLE) return HET_OK;
    int err = MPI_Irecv(&b->hdr[j], (int)sizeof b->hdr[j], MPI_BYTE, j, hdr_tag(b->tag), b->comm,
                        &b->req[j]);
    if (err != MPI_SUCCESS) return het_comm_mpi_error(err, "MPI_Irecv(p2p header)");
    b->state[j] = CH_POSTED;
    return HET_OK;
}

/* The channels a receive from `want` (a sender, or HET_ANY_SOURCE: the set) needs. */
static int post_for(inbox *b, int want) {
    if (want >= 0) return post_channel(b, want);
    for (int j = 0; j < b->size; j++) {
        int rc = b->in_set[j] ? post_channel(b, j) : HET_OK;
        if (rc != HET_OK) return rc;
    }
    return HET_OK;
}

/* ---- the way in (virtual clock; see DESIGN) ---- */

/* Whether sender j's held header is a message whose bytes come over this rank's way in. */
static int on_way_in(const het_comm *c, const inbox *b, int j) {
    const het_msg_hdr *h = &b->hdr[j];
    return het_clock_virtual() && c->ne.bw_bytes_per_s > 0.0 && !h->done && h->bytes > 0 &&
           !c->p2p->peer[b->scope].same[j];
}

/* Whether header h's payload waits for its receive (rendezvous, virtual clock): at least the
 * model's rndv_bytes, for a receive that says when it was posted (posted >= 0). */
static int waits(const het_comm *c, const het_msg_hdr *h, double posted) {
    return het_clock_virtual() && posted >= 0.0 && c->ne.rndv_bytes > 0.0 && !h->done &&
           (double)h->bytes >= c->ne.rndv_bytes;
}

/* When sender j's held message's envelope (its header) is in: its leaving + a header's time. */
static double envelope(const het_comm *c, const inbox *b, int j) {
    int same = c->p2p->peer[b->scope].same[j];
    return b->hdr[j].leave + het_p2p_msg_cost(c, same, sizeof(het_msg_hdr));
}

/* Adds sender j's message as a flow on the way in, `shift` seconds after its bytes would have
 * come (a payload that waited for its receive), into *id (the network made on first use, and
 * set back when a flow would start before its time with nothing in flight: the clock started
 * over, or nothing shares the link then). */
static int way_in_add(het_comm *c, inbox *b, int j, double shift, int *id_out) {
    struct het_p2p *st = c->p2p;
    const het_msg_hdr *h = &b->hdr[j];
    double wire = het_netem_wire_s(c->ne, (size_t)h->bytes), start = h->deliver - wire + shift;
    if (!st->in_net && !(st->in_net = het_flows_new(1, &c->ne.bw_bytes_per_s)))
        return HET_ENOMEM; /* its message is set */
    if (start < het_flows_now(st->in_net) && st->n_in_live == 0)
        het_flows_rewind(st->in_net, start);
    if (start < het_flows_now(st->in_net)) start = het_flows_now(st->in_net);
    if (st->n_in_live == st->cap_in_live) {
        int cap = st->cap_in_live ? 2 * st->cap_in_live : 16;
        int *l = realloc(st->in_live, (size_t)cap * sizeof *l), *nd;
        if (l) st->in_live = l;
        if (!l || !(nd = realloc(st->in_node, (size_t)cap * sizeof *nd)))
            return het_error_set(HET_ENOMEM, "p2p: out of memory for %d flows in", cap);
        st->in_node = nd, st->cap_in_live = cap;
    }
    const int route[1] = {0};
    int id = het_flows_add_weighted(st->in_net, start, (double)h->bytes, 0.0, 0.0,
                                    het_netem_pw_at(&c->ne.bw_factor, (double)h->bytes), route,
                                    NULL, 1);
    if (id < 0) return id;
    st->in_live[st->n_in_live] = id;
    st->in_node[st->n_in_live++] = c->world_node[c->p2p->peer[b->scope].world[j]];
    *id_out = id;
    return HET_OK;
}

/* Moves the way in to its next event, noting each flow's share of the link until then. */
static void way_in_step(het_comm *c) {
    struct het_p2p *st = c->p2p;
    double now = het_flows_now(st->in_net), e = het_flows_next(st->in_net);
    if (!isfinite(e)) return;
    for (int k = 0; k < st->n_in_live && e > now; k++) {
        double rate = het_flows_rate(st->in_net, st->in_live[k]);
        if (rate > 0.0)
            het_comm_link_note(c, st->in_node[k], c->topo->node_id, now, e,
                               rate / c->ne.bw_bytes_per_s);
    }
    het_flows_advance(st->in_net, e);
    int w = 0;
    for (int k = 0; k < st->n_in_live; k++)
        if (het_flows_done(st->in_net, st->in_live[k]) < 0.0)
            st->in_node[w] = st->in_node[k], st->in_live[w++] = st->in_live[k];
    st->n_in_live = w;
}

/* Moves the way in to its next event (e, not past `limit`: *moved 0 then). */
static int way_in_next(het_comm *c, double limit, int *moved) {
    double e = het_flows_next(c->p2p->in_net);
    *moved = 0;
    if (!isfinite(e)) /* cannot happen: capacity > 0 */
        return het_error_set(HET_EINVAL, "p2p: no flow on the way in can complete");
    if (e > limit) return HET_OK;
    way_in_step(c);
    *moved = 1;
    return HET_OK;
}

/* Every held message of the set on the way in that moves when sent has a flow; the way in
 * moved until one of them is complete, or past the first send of a message that waits for
 * the receive posted at `posted` (every channel of the set is HELD or DONE: nothing earlier
 * can still come). */
static int way_in_settle(het_comm *c, inbox *b, double posted) {
    int rc = HET_OK;
    double first = INFINITY; /* the earliest envelope among the messages that wait */
    for (int j = 0; rc == HET_OK && j < b->size; j++) {
        if (!b->in_set[j] || b->state[j] != CH_HELD || b->flow[j] >= 0) continue;
        if (waits(c, &b->hdr[j], posted)) first = fmin(first, envelope(c, b, j));
        else if (on_way_in(c, b, j)) rc = way_in_add(c, b, j, 0.0, &b->flow[j]);
    }
    while (rc == HET_OK) {
        int live = 0;
        for (int j = 0; j < b->size; j++) {
            if (!b->in_set[j] || b->state[j] != CH_HELD || b->flow[j] < 0) continue;
            if (het_flows_done(c->p2p->in_net, b->flow[j]) >= 0.0) return HET_OK;
            live = 1;
        }
        if (!live) return HET_OK;
        int moved = 0; /* not past a waiting message's envelope: it is matched before */
        if ((rc = way_in_next(c, first, &moved)) != HET_OK || !moved) return rc;
    }
    return rc;
}

/* Moves the way in until flow `id` is complete. */
static int way_in_finish(het_comm *c, int id) {
    int rc = HET_OK, moved = 1;
    while (rc == HET_OK && het_flows_done(c->p2p->in_net, id) < 0.0)
        rc = way_in_next(c, INFINITY, &moved);
    return rc;
}

/* Sender j's place in the order a receive from any sender (posted at `posted`) takes
 * messages: a message that waits for it by its send (MPI matches them in that order), else
 * its arrival: its flow's completion (INFINITY while it is not complete), else the sender's. */
static double arrival(const het_comm *c, const inbox *b, int j, double posted) {
    if (b->flow[j] < 0 && waits(c, &b->hdr[j], posted)) return envelope(c, b, j);
    if (b->flow[j] < 0) return b->hdr[j].deliver;
    double t = het_flows_done(c->p2p->in_net, b->flow[j]);
    return t >= 0.0 ? t : INFINITY;
}

/* What a receive from `want` posted at `posted` (< 0: none said) would get now: a sender,
 * ALL_DONE or NOT_YET (see DESIGN); a failure of the way in into *rc. */
static int choose(het_comm *c, inbox *b, int want, double posted, int *rc) {
    *rc = HET_OK;
    if (want >= 0) return b->state[want] >= CH_HELD ? want : NOT_YET;
    int best = -1, open = 0;
    for (int j = 0; j < b->size; j++) {
        if (!b->in_set[j] || b->state[j] == CH_DONE) continue;
        if (b->state[j] != CH_HELD) open++;
        else if (best < 0) best = j;
    }
    if (best < 0) return open ? NOT_YET : ALL_DONE;
    if (c->arb && het_clock_virtual()) return het_p2p_arb_choose(c, b); /* p2p_arb.c */
    if (het_clock_virtual()) { /* every sender there or done, the way in settled (no flows on
                                * the wall clock: the sender's arrival) */
        if (open) return NOT_YET;
        if ((*rc = way_in_settle(c, b, posted)) != HET_OK) return NOT_YET;
    }
    for (int j = best + 1; j < b->size; j++) /* ties: rank */
        if (b->in_set[j] && b->state[j] == CH_HELD &&
            arrival(c, b, j, posted) < arrival(c, b, best, posted))
            best = j;
    return best;
}

/* Gives receive m what choose() picked: the header, and posts the payload's receive. */
static int take(het_comm *c, inbox *b, het_msg *m, int j) {
    m->state = S_XFER;
    int rc = c->arb ? het_p2p_arb_took(c, b, m, j == ALL_DONE ? -1 : j,
                                       j == ALL_DONE ? NULL : &b->hdr[j],
                                       j != ALL_DONE && b->decided == j && m->want < 0)
                    : HET_OK;
    if (rc != HET_OK) return rc;
    if (j == ALL_DONE) { /* every sender of the set is done: a new round */
        int last = -1;
        for (int k = 0; k < b->size; k++)
            if (b->in_set[k] && b->state[k] == CH_DONE) {
                if (last < 0 || b->hdr[k].deliver > b->hdr[last].deliver) last = k;
                b->state[k] = CH_IDLE;
                if (b->hdr[k].arb_k >= 0) b->next_k[k] = b->hdr[k].arb_k + 1;
            }
        m->src = HET_ANY_SOURCE, m->done = 1, m->bytes = 0;
        m->stamp = last >= 0 ? b->hdr[last].stamp : het_lane_now(c->lane);
        m->deliver = last >= 0 ? b->hdr[last].deliver : m->stamp;
        m->peer_world = -1;
        return HET_OK;
    }
    het_msg_hdr h = b->hdr[j];
    int flow = b->flow[j], wait = flow < 0 && !c->arb && waits(c, &h, m->posted);
    /* a payload that waits for this receive moves from the later of its posting and its
     * header's arrival (the header comes first; its arrival posts the payload's receive) */
    double shift = wait ? fmax(envelope(c, b, j) - h.leave, m->posted - h.leave) : 0.0;
    if (wait && m->want < 0 && on_way_in(c, b, j) &&
        ((rc = way_in_add(c, b, j, shift, &flow)) != HET_OK || (rc = way_in_finish(c, flow))))
        return rc; /* a receive from any sender: its bytes share the way in from then */
    b->state[j] = CH_IDLE, b->flow[j] = -1;
    m->src = j, m->done = h.done != 0, m->stamp = h.stamp, m->deliver = h.deliver + shift;
    m->peer_world = c->p2p->peer[m->scope].world[j];
    if (h.arb_k >= 0) { /* the arbiter's: its arrival comes from there (p2p_arb.c) */
        b->next_k[j] = h.arb_k + 1;
        m->arb_next = h.arb_k + 1;
    }
    if (b->decided == j && m->want < 0) { /* a receive from any sender the arbiter decided */
        m->deliver = b->decided_end, m->arb_next = 0;
        b->decided = -1;
    }
    double in = flow >= 0 ? het_flows_done(c->p2p->in_net, flow) : -1.0;
    if (in > m->deliver) m->deliver = in; /* its flow on the way in (a receive from one sender
                                           * taking it before: the sender's arrival) */
    if (flow < 0 && !m->done && h.bytes > 0 && !c->p2p->peer[m->scope].same[j] &&
        h.arb_k < 0) /* the links it took, when its bytes moved (the arbiter's: its own) */
        het_comm_link_note(c, c->world_node[m->peer_world], c->topo->node_id,
                           m->deliver - het_netem_wire_s(c->ne, (size_t)h.bytes), m->deliver, 1.0);
    if (m->done || h.bytes == 0) return HET_OK;
    if (h.chunk == 0 || h.chunk > (uint64_t)INT_MAX || h.bytes > (uint64_t)SIZE_MAX)
        return het_error_set(HET_EMPI, "p2p receive: a bad header from rank %d (%llu bytes in "
                             "chunks of %llu)", j, (unsigned long long)h.bytes,
                             (unsigned long long)h.chunk);
    m->bytes = (size_t)h.bytes;
    size_t chunk = (size_t)h.chunk, n_chunks = (m->bytes - 1) / chunk + 1;
    unsigned char *dst = m->buf;
    if (m->bytes > m->cap && !(dst = m->scratch = malloc(m->bytes)))
        return het_error_set(HET_ENOMEM, "p2p receive: out of memory for a message of %zu bytes "
                             "from rank %d (the buffer holds %zu)", m->bytes, j, m->cap);
    if ((rc = het_p2p_reqs(m, n_chunks, "p2p receive")) != HET_OK) return rc;
    int err = MPI_SUCCESS;
    for (size_t i = 0; err == MPI_SUCCESS && i < n_chunks; i++, m->n_reqs++) {
        size_t off = i * chunk, cnt = m->bytes - off < chunk ? m->bytes - off : chunk;
        err = MPI_Irecv(dst + off, (int)cnt, MPI_BYTE, j, data_tag(b->tag), b->comm,
                        &m->reqs[i]);
    }
    return err == MPI_SUCCESS ? HET_OK : het_comm_mpi_error(err, "MPI_Irecv(p2p payload)");
}

int het_p2p_progress(het_comm *c, inbox *b) {
    int n = 0, err = het_mpi_testsome(b->size, b->req, &n, b->idx);
    if (err != MPI_SUCCESS) return het_comm_mpi_error(err, "MPI_Testsome(p2p headers)");
    for (int i = 0; n != MPI_UNDEFINED && i < n; i++)
        b->state[b->idx[i]] = b->hdr[b->idx[i]].done ? CH_DONE : CH_HELD;
    while (b->head) {
        het_msg *m = b->head;
        int rc = HET_OK, j = choose(c, b, m->want, m->posted, &rc);
        if (rc != HET_OK) return rc;
        if (j == NOT_YET) return post_for(b, m->want);
        b->head = m->next;
        if (!b->head) b->tail = NULL;
        m->next = NULL;
        if ((rc = take(c, b, m, j)) != HET_OK) {
            m->state = S_FINISHED; /* failed: its wait returns at once */
            return rc;
        }
    }
    return HET_OK;
}

int het_comm_irecv(het_comm *c, het_comm_scope s, int src, int tag, void *buf, size_t cap,
                   het_msg *m) {
    const double posted = c && het_clock_virtual() ? het_lane_now(c->lane) : -1.0;
    return het_comm_irecv_at(c, s, src, tag, buf, cap, posted, m);
}

int het_comm_irecv_at(het_comm *c, het_comm_scope s, int src, int tag, void *buf, size_t cap,
                      double posted, het_msg *m) {
    const char *op = "p2p receive";
    if (!m) return het_error_set(HET_EINVAL, "%s: NULL message", op);
    memset(m, 0, sizeof *m);
    where at;
    inbox *b = NULL;
    int rc = het_p2p_open(c, s, tag, src, 1, op, "src", &at);
    if (rc == HET_OK && cap > 0 && !buf)
        rc = het_error_set(HET_EINVAL, "%s: NULL buffer of %zu bytes", op, cap);
    if (rc != HET_OK || (rc = inbox_get(c, s, tag, &at, &b)) != HET_OK) return rc;
    m->kind = M_RECV, m->state = S_QUEUED, m->scope = s, m->tag = tag, m->want = src;
    m->src = src, m->dest = at.rank, m->buf = buf, m->cap = cap, m->peer_world = -1;
    m->posted = posted >= 0.0 ? posted : -1.0;
    m->arb_r = -1;
    if (c->arb && (rc = het_p2p_arb_posted(c, b, m)) != HET_OK) return rc;
    if (b->tail) b->tail->next = m;
    else b->head = m;
    b->tail = m;
    double t0 = het_now();
    rc = het_p2p_progress(c, b);
    c->st.comm_s += het_now() - t0;
    return rc;
}

int het_comm_p2p_senders(het_comm *c, het_comm_scope s, int tag, const int *ranks, int n) {
    const char *op = "p2p senders";
    where at;
    inbox *b = NULL;
    if (n < 0 || (n > 0 && !ranks))
        return het_error_set(HET_EINVAL, "%s: %d ranks at %p", op, n, (const void *)ranks);
    int rc = het_p2p_open(c, s, tag, 0, 0, op, NULL, &at);
    for (int i = 0; rc == HET_OK && i < n; i++)
        rc = het_p2p_open(c, s, tag, ranks[i], 0, op, "sender", &at);
    if (rc != HET_OK || (rc = inbox_get(c, s, tag, &at, &b)) != HET_OK) return rc;
    if (b->head)
        return het_error_set(HET_EINVAL, "%s: receives are pending on scope %d, tag %d", op,
                             (int)s, tag);
    for (int j = 0; j < at.size; j++) b->in_set[j] = !ranks && j != at.rank;
    for (int i = 0; i < n; i++) b->in_set[ranks[i]] = 1;
    return HET_OK;
}

int het_comm_probe(het_comm *c, het_comm_scope s, int src, int tag, int *flag, int *src_out,
                   size_t *bytes) {
    const char *op = "p2p probe";
    if (!flag) return het_error_set(HET_EINVAL, "%s: NULL flag", op);
    *flag = 0;
    where at;
    inbox *b = NULL;
    int rc = het_p2p_open(c, s, tag, src, 1, op, "src", &at);
    if (rc != HET_OK || (rc = inbox_get(c, s, tag, &at, &b)) != HET_OK) return rc;
    double t0 = het_now();
    if ((rc = het_p2p_progress(c, b)) == HET_OK && !b->head && (rc = post_for(b, src)) == HET_OK)
        rc = het_p2p_progress(c, b); /* a header already inside MPI lands in its new receive */
    c->st.comm_s += het_now() - t0;
    int j = rc == HET_OK && !b->head ? choose(c, b, src, -1.0, &rc) : NOT_YET;
    if (j == NOT_YET || rc != HET_OK) return rc;
    *flag = j == ALL_DONE || b->hdr[j].done ? 2 : 1;
    if (src_out) *src_out = j == ALL_DONE ? HET_ANY_SOURCE : j;
    if (bytes) *bytes = *flag == 1 ? (size_t)b->hdr[j].bytes : 0;
    return HET_OK;
}

int het_comm_p2p_pending(het_comm *c) {
    if (!c) return het_error_set(HET_EINVAL, "p2p pending: NULL comm");
    if (!c->p2p) return 0;
    int n = 0;
    for (int s = 0; s < N_SCOPES; s++) {
        MPI_Comm comm = s < HET_COMM_FIRST_GROUP + c->n_groups ? het_comm_mpi(c, s)
                                                              : MPI_COMM_NULL;
        for (int t = 0; comm != MPI_COMM_NULL && t < HET_P2P_TAGS; t++) {
            inbox *b = c->p2p->box[s][t];
            int rc = b ? het_p2p_progress(c, b) : HET_OK, flag = 0, err;
            if (rc != HET_OK) return rc;
            for (int j = 0; b && j < b->size; j++) n += b->state[j] >= CH_HELD;
            if ((err = MPI_Iprobe(MPI_ANY_SOURCE, hdr_tag(t), comm, &flag, MPI_STATUS_IGNORE)) !=
                MPI_SUCCESS)
                return het_comm_mpi_error(err, "MPI_Iprobe(p2p)");
            n += flag;
        }
    }
    return n;
}

void het_p2p_free(het_comm *c) {
    struct het_p2p *st = c->p2p;
    if (!st) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    for (int s = 0; s < N_SCOPES; s++) {
        for (int t = 0; t < HET_P2P_TAGS; t++) {
            inbox *b = st->box[s][t];
            for (int j = 0; b && !finalized && j < b->size; j++)
                if (b->req[j] != MPI_REQUEST_NULL) { /* a header receive nobody needs now */
                    MPI_Cancel(&b->req[j]);
                    MPI_Wait(&b->req[j], MPI_STATUS_IGNORE);
                }
            inbox_free(b);
        }
        free(st->peer[s].world);
        free(st->peer[s].same);
    }
    het_p2p_arb_free(c);
    het_flows_free(st->in_net);
    free(st->in_live);
    free(st->in_node);
    free(st->last);
    free(st->last_at);
    free(st->wait_peers);
    free(st);
    c->p2p = NULL;
}

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
 * from one sender and tag arrive in order, as the headers are taken in order). A receive from
 * any sender takes messages in arrival order, so on the virtual clock they also queue on the
 * receiver's way in from other nodes (nic_in_free): N senders into one receiver (a parameter
 * server) share its link, each message arriving no earlier than the one before it plus its
 * own transfer time. Receives from one sender match in posting order, not in arrival order,
 * so they do not queue (that would delay an earlier arrival behind a later one). */
#include <limits.h>
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
        !(b->in_set = malloc(n))) {
        inbox_free(b);
        return het_error_set(HET_ENOMEM, "p2p: out of memory for an inbox of %d senders", size);
    }
    b->comm = at->comm, b->size = size, b->rank = at->rank, b->tag = tag;
    for (int j = 0; j < size; j++) b->req[j] = MPI_REQUEST_NULL, b->in_set[j] = j != at->rank;
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

/* What a receive from `want` would get now: a sender, ALL_DONE or NOT_YET (see DESIGN). */
static int choose(const inbox *b, int want) {
    if (want >= 0) return b->state[want] >= CH_HELD ? want : NOT_YET;
    int best = -1, open = 0;
    for (int j = 0; j < b->size; j++) {
        if (!b->in_set[j] || b->state[j] == CH_DONE) continue;
        if (b->state[j] != CH_HELD) open++;
        else if (best < 0 || b->hdr[j].deliver < b->hdr[best].deliver) best = j; /* ties: rank */
    }
    if (best >= 0) return open && het_clock_virtual() ? NOT_YET : best;
    return open ? NOT_YET : ALL_DONE;
}

/* Gives receive m what choose() picked: the header, and posts the payload's receive. */
static int take(het_comm *c, inbox *b, het_msg *m, int j) {
    m->state = S_XFER;
    if (j == ALL_DONE) { /* every sender of the set is done: a new round */
        int last = -1;
        for (int k = 0; k < b->size; k++)
            if (b->in_set[k] && b->state[k] == CH_DONE) {
                if (last < 0 || b->hdr[k].deliver > b->hdr[last].deliver) last = k;
                b->state[k] = CH_IDLE;
            }
        m->src = HET_ANY_SOURCE, m->done = 1, m->bytes = 0;
        m->stamp = last >= 0 ? b->hdr[last].stamp : het_clock_now();
        m->deliver = last >= 0 ? b->hdr[last].deliver : m->stamp;
        m->peer_world = -1;
        return HET_OK;
    }
    het_msg_hdr h = b->hdr[j];
    b->state[j] = CH_IDLE;
    m->src = j, m->done = h.done != 0, m->stamp = h.stamp, m->deliver = h.deliver;
    m->peer_world = c->p2p->peer[m->scope].world[j];
    if (m->want < 0 && !m->done && h.bytes > 0 && het_clock_virtual() &&
        !c->p2p->peer[m->scope].same[j]) { /* senders into one receiver share its way in */
        struct het_p2p *st = c->p2p;
        const double in = st->nic_in_free + het_netem_wire_s(c->ne, (size_t)h.bytes);
        if (in > m->deliver) m->deliver = in;
        st->nic_in_free = m->deliver;
    }
    if (!m->done && h.bytes > 0 && !c->p2p->peer[m->scope].same[j]) /* the links it took, when
                                                                     * its bytes moved */
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
    int rc = het_p2p_reqs(m, n_chunks, "p2p receive");
    if (rc != HET_OK) return rc;
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
        int j = choose(b, m->want);
        if (j == NOT_YET) return post_for(b, m->want);
        b->head = m->next;
        if (!b->head) b->tail = NULL;
        m->next = NULL;
        int rc = take(c, b, m, j);
        if (rc != HET_OK) {
            m->state = S_FINISHED; /* failed: its wait returns at once */
            return rc;
        }
    }
    return HET_OK;
}

int het_comm_irecv(het_comm *c, het_comm_scope s, int src, int tag, void *buf, size_t cap,
                   het_msg *m) {
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
    int j = rc == HET_OK && !b->head ? choose(b, src) : NOT_YET;
    if (j == NOT_YET) return rc;
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
    free(st->last);
    free(st->last_at);
    free(st->wait_peers);
    free(st);
    c->p2p = NULL;
}

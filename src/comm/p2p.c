/* Point-to-point messages: tagged, non-blocking, charged by the emulated network, received in
 * virtual-time order on the virtual clock (comm.h states the contract).
 *
 * DESIGN. A message is a header (het_msg_hdr: the sender's clock at the send, the arrival,
 * the payload's size and chunk, a done flag) and its payload in chunks of at most the comm's
 * chunk (counts passed to MPI are ints). The send time travels in the header rather than
 * piggybacked on the payload: the receiver needs it before it posts the payload's receive
 * (the size, and on the virtual clock which sender goes first), and a done message is a
 * header alone. The sender computes the arrival, stamp + cost, from the receiver's node (the
 * scope's ranks translated to world ranks and to this rank's node, once per scope, with no
 * communication), and keeps it no earlier than the last arrival it gave that rank: MPI keeps
 * a sender's messages of one tag in order, and so must time, else the order in which
 * receives take messages (p2p_inbox.c, the receiving side) would see a later arrival first.
 * A rank's messages to other nodes also leave one after another (its way out is busy while
 * one's bytes go out, nic_free): M messages sent at once arrive M transfer times apart, so a
 * stream never exceeds the link's bandwidth. Stamped sends (het_comm_isend_at: a lane's, a
 * thread's) queue per tag instead: a tag's stamped messages are made in one program order,
 * while the order across tags depends on how threads interleave, so one queue for all would
 * not be reproducible; two tags' streams (qfb's activations and gradients) can still overlap
 * on the link, and the link counter (links.c) shows it. A receive from any sender moves the
 * arrival later where messages share the receiver's way in (p2p_inbox.c); a collective across
 * nodes starts behind this rank's messages on its way out (het_p2p_out_free, comm.c). What
 * this does not model yet: ranks of a node sharing their node's way out (issue #36).
 *
 * Waits run in the stall inspector's poll loop (het_stall_wait_poll: spin, yield, nap) and
 * name the world ranks they wait for: the senders a receive from any sender still needs, or
 * the peer of a matched receive or of a send. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/arb_svc.h"
#include "comm/p2p.h"
#include "emul/emul.h"

static struct het_p2p *state_of(het_comm *c) {
    if (c->p2p) return c->p2p;
    struct het_p2p *st = calloc(1, sizeof *st);
    int w = c->topo->size > 0 ? c->topo->size : 1;
    if (st && (st->last = calloc((size_t)w, sizeof *st->last)) &&
        (st->last_at = calloc((size_t)w * HET_P2P_TAGS, sizeof *st->last_at)) &&
        (st->wait_peers = calloc((size_t)w, sizeof *st->wait_peers))) {
        st->world_size = w;
        return c->p2p = st;
    }
    if (st) free(st->last), free(st->last_at);
    free(st);
    het_error_set(HET_ENOMEM, "p2p: out of memory for the state of %d ranks", w);
    return NULL;
}

/* The world ranks and nodes of scope s's ranks (made once per scope, no communication). */
static int scope_peers(het_comm *c, het_comm_scope s, where *at) {
    peers *p = &c->p2p->peer[s];
    at->pp = p;
    if (p->world) return HET_OK;
    size_t n = (size_t)at->size;
    int *idx = malloc(n * sizeof *idx), *w = malloc(n * sizeof *w), *nd = malloc(n * sizeof *nd);
    unsigned char *same = malloc(n);
    MPI_Group g = MPI_GROUP_NULL, gw = MPI_GROUP_NULL, gn = MPI_GROUP_NULL;
    int err = MPI_SUCCESS, ok = idx && w && nd && same, rc = HET_OK;
    if (!ok) rc = het_error_set(HET_ENOMEM, "p2p: out of memory for a scope of %zu ranks", n);
    for (int i = 0; ok && i < at->size; i++) idx[i] = i;
    if (ok && ((err = MPI_Comm_group(at->comm, &g)) != MPI_SUCCESS ||
               (err = MPI_Comm_group(c->topo->world, &gw)) != MPI_SUCCESS ||
               (err = MPI_Comm_group(c->topo->node, &gn)) != MPI_SUCCESS ||
               (err = MPI_Group_translate_ranks(g, at->size, idx, gw, w)) != MPI_SUCCESS ||
               (err = MPI_Group_translate_ranks(g, at->size, idx, gn, nd)) != MPI_SUCCESS))
        ok = 0, rc = het_comm_mpi_error(err, "p2p: MPI_Group_translate_ranks");
    for (int i = 0; ok && i < at->size; i++) same[i] = nd[i] != MPI_UNDEFINED;
    MPI_Group *gs[3] = {&g, &gw, &gn};
    for (int i = 0; i < 3; i++)
        if (*gs[i] != MPI_GROUP_NULL) MPI_Group_free(gs[i]);
    free(idx);
    free(nd);
    if (ok) p->size = at->size, p->world = w, p->same = same;
    else free(w), free(same);
    return rc;
}

int het_p2p_open(het_comm *c, het_comm_scope s, int tag, int peer, int any_ok, const char *op,
                 const char *who, where *at) {
    if (!c) return het_error_set(HET_EINVAL, "%s: NULL comm", op);
    if (tag < 0 || tag >= HET_P2P_TAGS)
        return het_error_set(HET_EINVAL, "%s: tag %d outside [0, %d)", op, tag, HET_P2P_TAGS);
    at->comm = het_comm_mpi(c, s);
    if (at->comm == MPI_COMM_NULL && s == HET_COMM_NONE)
        return het_error_set(HET_EINVAL, "%s: this rank is in no group (HET_COMM_NONE)", op);
    if (at->comm == MPI_COMM_NULL || (int)s < 0 || (int)s >= N_SCOPES)
        return het_error_set(HET_EINVAL, "%s: bad scope %d", op, (int)s);
    MPI_Comm_size(at->comm, &at->size);
    MPI_Comm_rank(at->comm, &at->rank);
    if (who && !(any_ok && peer == HET_ANY_SOURCE) && (peer < 0 || peer >= at->size))
        return het_error_set(HET_EINVAL, "%s: %s %d outside [0, %d)%s", op, who, peer, at->size,
                             any_ok ? " (or HET_ANY_SOURCE)" : "");
    if (who && peer == at->rank)
        return het_error_set(HET_EINVAL, "%s: %s %d is this rank", op, who, peer);
    return state_of(c) ? scope_peers(c, s, at) : HET_ENOMEM;
}

/* Counts one message of `bytes` at its sender, by the receiver's node. */
static void count_msg(het_comm *c, int same, uint64_t bytes) {
    c->st.bytes += bytes;
    c->st.calls++;
    if (same) c->st.bytes_node += bytes, c->st.calls_node++;
    else c->st.bytes_cross += bytes, c->st.calls_cross++;
}

/* The modeled time of one message: the network between nodes, the node link within one on
 * the virtual clock (on the wall clock the real shared-memory time is that cost). */
double het_p2p_msg_cost(const het_comm *c, int same, size_t bytes) {
    if (!same) return het_netem_p2p_s(c->ne, bytes);
    if (!het_clock_virtual()) return 0.0;
    het_netem_cost one = {.steps = 1.0, .load = 1.0, .load_x = 1.0, .n_groups = 1,
                          .g = {{1.0, 1.0, 1.0, 1.0}}};
    return het_netem_local_cost_s(c->ne, one, bytes);
}

static size_t chunk_bytes(const het_comm *c) {
    size_t b = c->chunk * sizeof(float);
    return b > (size_t)INT_MAX ? (size_t)INT_MAX : b;
}

int het_p2p_reqs(het_msg *m, size_t n, const char *op) {
    m->reqs = m->inline_reqs;
    if (n > HET_MSG_INLINE && !(m->reqs = malloc(n * sizeof *m->reqs))) {
        m->reqs = m->inline_reqs;
        return het_error_set(HET_ENOMEM, "%s: out of memory for %zu requests", op, n);
    }
    for (size_t i = 0; i < n; i++) m->reqs[i] = MPI_REQUEST_NULL;
    return HET_OK;
}

void het_p2p_reqs_release(het_msg *m) {
    if (m->reqs != m->inline_reqs) free(m->reqs);
    m->reqs = NULL;
    m->n_reqs = 0;
}

static int start_send(het_comm *c, het_comm_scope s, int dest, int tag, const void *buf,
                      size_t bytes, int done, double stamp, het_msg *m,
                      const char *op) {
    if (!m) return het_error_set(HET_EINVAL, "%s: NULL message", op);
    memset(m, 0, sizeof *m);
    where at;
    int rc = het_p2p_open(c, s, tag, dest, 0, op, "dest", &at);
    if (rc == HET_OK && bytes > 0 && !buf)
        rc = het_error_set(HET_EINVAL, "%s: NULL buffer of %zu bytes", op, bytes);
    if (rc != HET_OK) return rc;
    const peers *pp = at.pp;
    size_t chunk = chunk_bytes(c), n_chunks = bytes ? (bytes - 1) / chunk + 1 : 0;
    if (n_chunks >= (size_t)INT_MAX)
        return het_error_set(HET_EINVAL, "%s: %zu bytes in %zu chunks", op, bytes, n_chunks);
    if ((rc = het_p2p_reqs(m, n_chunks + 1, op)) != HET_OK) return rc;
    struct het_p2p *st = c->p2p;
    double t0 = het_now(), *last = &st->last[pp->world[dest]];
    m->kind = M_SEND, m->state = S_XFER, m->scope = s, m->tag = tag, m->src = at.rank;
    m->dest = dest, m->bytes = bytes, m->done = done, m->peer_world = pp->world[dest];
    m->stamp = het_lane_now(c->lane);
    if (m->stamp < st->last_stamp) { /* the clock was reset: earlier arrivals say nothing */
        memset(st->last, 0, (size_t)st->world_size * sizeof *st->last);
        memset(st->last_at, 0, (size_t)st->world_size * HET_P2P_TAGS * sizeof *st->last_at);
        st->nic_free = 0.0;
        memset(st->nic_free_at, 0, sizeof st->nic_free_at);
    }
    st->last_stamp = m->stamp;
    if (stamp >= 0.0 && het_clock_virtual()) { /* a stamp given: its own lane per tag */
        m->stamp = stamp;
        last = &st->last_at[(size_t)pp->world[dest] * HET_P2P_TAGS + (size_t)tag];
    }
    double leave = m->stamp; /* a message between nodes waits for the ones before it */
    int arb_k = -1;
    if (c->arb && bytes > 0 && (rc = het_p2p_arb_copy(m, buf, bytes, op)) == HET_OK)
        buf = m->copy; /* its wait returns at once (p2p_arb.c) */
    if (c->arb && rc == HET_OK) { /* every message is named at the arbiter; those between
                                   * nodes with a payload are flows that share the way out */
        int flow = !pp->same[dest] && !done && bytes > 0;
        rc = stamp >= 0.0 && m->stamp < het_lane_now(c->lane)
                 ? het_error_set(HET_EINVAL, "%s: a message at %.9g s, before this rank's clock "
                                 "(another lane's: not with --p2p-model arbiter yet)", op,
                                 m->stamp)
                 : het_arb_svc_post_env(c->arb, c->arb_hold >= 0.0 ? c->arb_hold : leave, bytes,
                                        pp->world[dest], het_p2p_stream(s, tag),
                                        flow ? -1.0 : het_p2p_msg_cost(c, pp->same[dest], bytes),
                                        het_p2p_msg_cost(c, pp->same[dest], sizeof(het_msg_hdr)),
                                        &arb_k);
        if (rc != HET_OK) { /* its receiver would wait for it at the arbiter: the job ends */
            fprintf(stderr, "hetrain: %s\n", het_error_msg());
            MPI_Abort(c->topo->world, 1);
        }
    }
    if (rc != HET_OK) {
        free(m->copy), m->copy = NULL;
        het_p2p_reqs_release(m), m->kind = M_NONE;
        return rc;
    }
    if (!pp->same[dest] && !c->arb) { /* the rank's own queue, or its tag's for stamped sends */
        double *q = stamp >= 0.0 && het_clock_virtual() ? &st->nic_free_at[tag] : &st->nic_free;
        if (*q > leave) leave = *q;
        *q = leave + het_netem_wire_s(c->ne, bytes);
    }
    m->deliver = leave + het_p2p_msg_cost(c, pp->same[dest], bytes); /* arbiter: alone */
    if (!c->arb && m->deliver < *last) m->deliver = *last; /* not before an earlier one */
    if (!c->arb) *last = m->deliver;
    m->hdr = (het_msg_hdr){m->stamp, m->deliver, leave, bytes, chunk, done, arb_k};
    int err = MPI_Isend(&m->hdr, (int)sizeof m->hdr, MPI_BYTE, dest, hdr_tag(tag), at.comm,
                        &m->reqs[0]);
    m->n_reqs = err == MPI_SUCCESS;
    for (size_t i = 0; err == MPI_SUCCESS && i < n_chunks; i++, m->n_reqs++) {
        size_t off = i * chunk, cnt = bytes - off < chunk ? bytes - off : chunk;
        err = MPI_Isend((const char *)buf + off, (int)cnt, MPI_BYTE, dest, data_tag(tag),
                        at.comm, &m->reqs[1 + i]);
    }
    c->st.comm_s += het_now() - t0;
    if (err != MPI_SUCCESS) { /* what was posted stays in m: a wait completes it */
        if (m->n_reqs == 0) het_p2p_reqs_release(m), m->kind = M_NONE;
        return het_comm_mpi_error(err, "MPI_Isend");
    }
    count_msg(c, pp->same[dest], bytes);
    return HET_OK;
}

int het_comm_isend(het_comm *c, het_comm_scope s, int dest, int tag, const void *buf,
                   size_t bytes, het_msg *m) {
    return start_send(c, s, dest, tag, buf, bytes, 0, -1.0, m, "p2p send");
}

int het_comm_isend_at(het_comm *c, het_comm_scope s, int dest, int tag, const void *buf,
                      size_t bytes, double stamp, het_msg *m) {
    if (!(stamp >= 0.0)) return het_error_set(HET_EINVAL, "p2p send at: stamp %g", stamp);
    return start_send(c, s, dest, tag, buf, bytes, 0, stamp, m, "p2p send at");
}

int het_comm_p2p_done(het_comm *c, het_comm_scope s, int dest, int tag, het_msg *m) {
    return start_send(c, s, dest, tag, NULL, 0, 1, -1.0, m, "p2p done");
}

double het_p2p_out_free(const het_comm *c) {
    return c && c->p2p && het_clock_virtual() ? c->p2p->nic_free : 0.0;
}

/* ---- completion ---- */

static inbox *box_of(het_comm *c, const het_msg *m) { return c->p2p->box[m->scope][m->tag]; }

/* Progresses m; *arrived = 1 once matched and its MPI part is complete. */
static int msg_progress(het_comm *c, het_msg *m, int *arrived) {
    *arrived = 0;
    if (m->state == S_QUEUED) {
        int rc = het_p2p_progress(c, box_of(c, m));
        if (rc != HET_OK || m->state == S_QUEUED) return rc;
    }
    if (m->state == S_XFER && m->n_reqs > 0) {
        int flag = 0, err = het_mpi_testall(m->n_reqs, m->reqs, &flag);
        if (err != MPI_SUCCESS) return het_comm_mpi_error(err, m->kind == M_SEND ? "MPI_Isend"
                                                          : "MPI_Irecv(p2p payload)");
        if (!flag) return HET_OK;
    }
    if (m->state == S_XFER) het_p2p_reqs_release(m), m->state = S_ARRIVED;
    *arrived = m->state >= S_ARRIVED;
    return HET_OK;
}

/* Whether the clock has reached a received message's arrival (a send: always). */
static int clock_reached(het_comm *c, const het_msg *m) {
    if (m->kind != M_RECV) return 1;
    if (het_clock_virtual()) return het_lane_now(c->lane) >= m->deliver;
    return !(m->deliver > m->stamp) || het_now() >= m->deliver; /* model off: no comparison */
}

/* Ends m once arrived: a receive's clock moved to its arrival (virtual: V = max(V, deliver),
 * booked as waiting up to the stamp and transfer after; wall: the rest slept), scratch freed. */
static int finish(het_comm *c, het_msg *m) {
    if (m->kind == M_RECV && het_clock_virtual()) {
        double v = het_lane_now(c->lane), w = m->stamp > v ? m->stamp - v : 0.0;
        if (m->deliver > v) {
            if (w > m->deliver - v) w = m->deliver - v;
            c->st.vwait_s += w;
            c->st.vnet_s += (m->deliver - v) - w;
            het_lane_advance_to(c->lane, m->deliver);
        }
    } else if (m->kind == M_RECV && m->deliver > m->stamp) {
        c->st.delay_s += het_sleep_until(m->deliver);
    }
    m->state = S_FINISHED;
    if (!m->scratch) return HET_OK;
    free(m->scratch);
    m->scratch = NULL;
    return het_error_set(HET_EINVAL, "p2p receive: a message of %zu bytes from rank %d (tag %d) "
                         "does not fit the buffer of %zu bytes: discarded", m->bytes, m->src,
                         m->tag, m->cap);
}

static int active(const het_msg *m) { return m->kind != M_NONE && m->state != S_FINISHED; }

int het_comm_msg_test(het_comm *c, het_msg *m, int *done) {
    if (!c || !m || !done) return het_error_set(HET_EINVAL, "p2p test: NULL argument");
    *done = 1;
    if (!active(m)) return HET_OK;
    if (c->arb && m->kind == M_SEND) return het_comm_msg_wait(c, m);
    *done = 0;
    int arrived = 0, ready = 1;
    double t0 = het_now();
    int rc = msg_progress(c, m, &arrived);
    if (rc == HET_OK && arrived && c->arb) rc = het_p2p_arb_test(c, m, &ready);
    arrived &= ready;
    c->st.comm_s += het_now() - t0;
    if (rc != HET_OK || !arrived || !clock_reached(c, m)) return rc;
    *done = 1;
    return finish(c, m);
}

/* The world ranks a wait on m names now, appended to out (n of cap). */
static int add_peers(het_comm *c, const het_msg *m, int *out, int n, int cap) {
    if (m->kind == M_RECV && m->state == S_QUEUED) {
        const inbox *b = box_of(c, m);
        const int *world = c->p2p->peer[m->scope].world;
        for (int j = 0; j < b->size && n < cap; j++)
            if (m->want >= 0 ? j == m->want
                             : b->in_set[j] && b->state[j] != CH_HELD && b->state[j] != CH_DONE)
                out[n++] = world[j];
    } else if (m->peer_world >= 0 && n < cap) {
        out[n++] = m->peer_world;
    }
    return n;
}

/* A wait in the poll loop: on msgs[0, n) until `pick` says which one (wall: one arrived;
 * virtual: every receive matched), or on one message until it arrived. */
typedef struct poll_arg {
    het_comm *c;
    het_msg *msgs;
    int n, any, pick;
    het_stall_poll *p;
} poll_arg;

static int poll_msgs(void *arg, int *done) {
    poll_arg *a = arg;
    het_comm *c = a->c;
    int n_peers = 0, unmatched = 0, cap = c->p2p->world_size;
    double best = 0.0;
    a->pick = -1;
    if (c->arb) het_p2p_arb_reap(c, 0);
    for (int i = 0; i < a->n; i++) {
        het_msg *m = &a->msgs[i];
        if (!active(m)) continue;
        int arrived = 0, ready = 1, rc = msg_progress(c, m, &arrived);
        if (rc == HET_OK && c->arb && a->n == 1) rc = het_p2p_arb_poll(c, m, &ready);
        if (rc != HET_OK) return rc;
        arrived &= ready;
        if (m->state == S_QUEUED) unmatched++;
        if (!arrived) n_peers = add_peers(c, m, c->p2p->wait_peers, n_peers, cap);
        double t = m->kind == M_SEND ? m->stamp : m->deliver;
        int eligible = a->any && het_clock_virtual() ? m->state != S_QUEUED : arrived;
        if (eligible && (a->pick < 0 || t < best)) a->pick = i, best = t;
    }
    a->p->peers = c->p2p->wait_peers;
    a->p->n_peers = n_peers;
    *done = a->pick >= 0 && !(a->any && het_clock_virtual() && unmatched);
    if (c->arb && het_p2p_arb_limit_hit(c)) *done = 1, a->pick = -1; /* its time limit */
    return HET_OK;
}

/* Blocks in the poll loop over msgs[0, n) (any: until one can be picked); sets a->pick. */
static int poll_wait(het_comm *c, het_msg *msgs, int n, int any, const char *op, poll_arg *a) {
    het_stall_poll p = {poll_msgs, a, op, NULL, 0};
    *a = (poll_arg){c, msgs, n, any, -1, &p};
    double t0 = het_now();
    int rc = het_stall_wait_poll(&p);
    c->st.comm_s += het_now() - t0;
    return rc;
}

int het_comm_msg_wait(het_comm *c, het_msg *m) {
    if (!c || !m) return het_error_set(HET_EINVAL, "p2p wait: NULL argument");
    if (!active(m)) return HET_OK;
    if (c->arb && m->kind == M_SEND) { /* it never waits for its receiver (p2p_arb.c) */
        int rc = het_p2p_arb_detach(c, m);
        return rc != HET_OK ? rc : finish(c, m);
    }
    poll_arg a;
    int rc = poll_wait(c, m, 1, 0, m->kind == M_SEND ? "send" : "recv", &a);
    return rc != HET_OK ? rc : finish(c, m);
}

int het_comm_msg_test_untimed(het_comm *c, het_msg *m, int *done) {
    if (!c || !m || !done) return het_error_set(HET_EINVAL, "p2p test untimed: NULL argument");
    *done = 1;
    if (!active(m)) return HET_OK;
    if (c->arb && m->kind == M_SEND) return het_comm_msg_wait(c, m);
    *done = 0;
    int arrived = 0, ready = 1;
    double t0 = het_now();
    int rc = msg_progress(c, m, &arrived);
    if (rc == HET_OK && arrived && c->arb) rc = het_p2p_arb_test(c, m, &ready);
    arrived &= ready;
    c->st.comm_s += het_now() - t0;
    if (rc != HET_OK || !arrived) return rc;
    *done = 1;
    int kind = m->kind;
    m->kind = M_SEND; /* finish() then moves no clock and sleeps nothing */
    rc = finish(c, m);
    m->kind = kind;
    return rc;
}

int het_comm_msg_wait_untimed(het_comm *c, het_msg *m) {
    int arrived = 1;
    return het_comm_msg_wait_untimed_by(c, m, INFINITY, &arrived);
}

int het_comm_msg_wait_untimed_by(het_comm *c, het_msg *m, double limit, int *arrived) {
    if (!c || !m || !arrived) return het_error_set(HET_EINVAL, "p2p wait untimed: NULL argument");
    *arrived = 1;
    if (!active(m)) return HET_OK;
    if (c->arb && m->kind == M_SEND) return het_comm_msg_wait(c, m);
    int limited = c->arb && m->kind == M_RECV && limit < INFINITY;
    if (limited) het_p2p_arb_limit(c, 1, limit);
    poll_arg a;
    int rc = poll_wait(c, m, 1, 0, m->kind == M_SEND ? "send" : "recv", &a);
    if (limited) {
        *arrived = !het_p2p_arb_limit_hit(c);
        het_p2p_arb_limit(c, 0, INFINITY);
    }
    if (rc != HET_OK || !*arrived) return rc;
    int kind = m->kind;
    m->kind = M_SEND; /* finish() then moves no clock and sleeps nothing */
    rc = finish(c, m);
    m->kind = kind;
    return rc;
}

void het_comm_clock_wait(het_comm *c, double t) {
    if (!c) return;
    if (het_clock_virtual()) {
        double v = het_lane_now(c->lane);
        if (t > v) c->st.vwait_s += t - v, het_lane_advance_to(c->lane, t);
    } else {
        c->st.delay_s += het_sleep_until(t);
    }
}

int het_comm_msg_waitany(het_comm *c, int n, het_msg *msgs, int *index) {
    if (!c || !index || n < 0 || (n > 0 && !msgs))
        return het_error_set(HET_EINVAL, "p2p waitany: NULL argument or %d messages", n);
    *index = -1;
    int any_active = 0;
    for (int i = 0; i < n; i++) any_active |= active(&msgs[i]);
    if (!any_active) return HET_OK;
    if (c->arb)
        return het_error_set(HET_EINVAL, "p2p waitany: not with --p2p-model arbiter yet");
    poll_arg a;
    int rc = poll_wait(c, msgs, n, 1, "waitany", &a);
    if (rc != HET_OK) return rc;
    *index = a.pick;
    return het_comm_msg_wait(c, &msgs[a.pick]);
}

int het_comm_msg_waitall(het_comm *c, int n, het_msg *msgs) {
    if (!c || n < 0 || (n > 0 && !msgs))
        return het_error_set(HET_EINVAL, "p2p waitall: NULL argument or %d messages", n);
    int first = HET_OK;
    for (int i = 0; i < n; i++) {
        int rc = het_comm_msg_wait(c, &msgs[i]);
        if (first == HET_OK) first = rc;
    }
    return first;
}

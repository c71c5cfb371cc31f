/* Rendezvous in the arbiter service (comm/arb_svc.c): messages that wait for their receive, as
 * MPI's rendezvous protocol makes them (SMPI: every size by default), so their bytes move from
 * the later of their header's arrival (the send + a header's time, the `env` of its post:
 * hetrain's payload follows its header, whose arrival posts the payload's receive) and the
 * receive's posting (issue #36).
 *
 * DESIGN. A message of at least the model's rndv_bytes is posted to the arbiter as pending
 * (het_arbiter_post_rdv). Every receive is reported when posted (K_RECV: the receiver's clock,
 * its stream and sender or any; numbered per stream on both sides), and once the receiver's
 * inbox knows which message it took, the match (K_MATCH: that message's name, or none: a
 * message that does not wait, or every sender done). The arbiter holds back what could start
 * after a pending message's earliest start (its send, and the first receive that can take it or
 * the receiver's promise), so a match told later in wall time is still in time. A match whose
 * message is not posted yet (the receiver's report came first) waits for its post. A receive
 * from any sender is matched here, as MPI matches it: to the message of its candidates (each
 * sender's next, as the receiver names them in its wait, K_WAIT with the receive's number)
 * whose envelope comes first (its start + a header's time on its path, as the local rules
 * order them: p2p_inbox.c; ties by sender, then index), once every candidate not posted yet
 * comes from a sender whose promise is past that time; the wait then names that message alone, and
 * nothing of it is answered before (its first answer decides the receive). A pending message
 * decided so is matched here (the receiver does not report it again); one that did not wait is
 * reported by the receiver like any other. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/arb_svc_int.h"
#include "hetrain/core.h"

int het_arb_svc_recv(het_arb_svc *s, double t, int stream, int src, int *r) {
    if (!s || !r || stream < 0 || stream >= 1 << 16 || src < -1 || src >= s->size ||
        src == s->rank)
        return het_error_set(HET_EINVAL, "arbiter service receive: stream %d from rank %d",
                             stream, src);
    uint64_t key = (uint32_t)stream;
    int next = het_map64_get(&s->rnext, key, 0);
    report m = {.kind = K_RECV, .stream = stream, .dest = src, .t = t, .recv = next};
    int rc = het_arb_report(s, &m, NULL);
    if (rc == HET_OK) rc = het_map64_put(&s->rnext, key, next + 1);
    if (rc == HET_OK) *r = next;
    return rc;
}

int het_arb_svc_match(het_arb_svc *s, int stream, int r, const het_arb_name *name) {
    if (!s || r < 0) return het_error_set(HET_EINVAL, "arbiter service match: receive %d", r);
    report m = {.kind = K_MATCH, .stream = stream, .recv = r, .n = name != NULL};
    return het_arb_report(s, &m, name);
}

int het_arb_svc_wait_recv(het_arb_svc *s, double t, int n, const het_arb_name *name,
                          double look, int recv, double until, int *number) {
    if (!s || n < 1 || !name || !number || recv < 0)
        return het_error_set(HET_EINVAL, "arbiter service wait: %d names, receive %d", n, recv);
    *number = isfinite(until) ? s->n_waits++ : -1;
    report m = {.kind = K_WAIT, .n = n, .seq = *number, .t = t, .look = look, .until = until,
                .recv = recv};
    return het_arb_report(s, &m, name);
}

/* ---- rank 0 ---- */

static int same(het_arb_name a, het_arb_name b) {
    return a.src == b.src && a.stream == b.stream && a.k == b.k;
}

static int before(het_arb_name a, het_arb_name b) {
    return a.src != b.src ? a.src < b.src : a.k < b.k;
}

/* Rank `rank`'s receive r on stream took message nm (NULL: none it waits for). */
static int match(het_arb_svc *s, int rank, int stream, int r, const het_arb_name *nm) {
    int id = nm ? het_arb_flow_of(s, rank, *nm) : -1;
    if (!nm || id >= 0) return het_arbiter_match(s->arb, rank, stream, r, id);
    umatch *u = het_arb_grow(s->um, &s->cap_um, s->n_um + 1, sizeof *u);
    if (!u) return het_error_set(HET_ENOMEM, "arbiter service: out of memory for matches");
    s->um = u;
    s->um[s->n_um++] = (umatch){rank, stream, r, *nm};
    return HET_OK;
}

int het_arb_rdv_apply(het_arb_svc *s, int r, const report *m, const void *ints) {
    if (m->kind == K_MATCH) return match(s, r, m->stream, m->recv, m->n ? ints : NULL);
    int got = het_arbiter_recv(s->arb, r, m->t, m->stream, m->dest);
    if (got >= 0 && got != m->recv)
        return het_error_set(HET_EINVAL, "arbiter service: rank %d's receive %d on stream %d "
                             "came as number %d", r, m->recv, m->stream, got);
    return got < 0 ? got : HET_OK;
}

int het_arb_rdv_posted(het_arb_svc *s, int src, int dest, int stream, int k, int id) {
    het_arb_name nm = {src, stream, k};
    for (int i = 0; i < s->n_um; i++) {
        umatch u = s->um[i];
        if (u.rank != dest || !same(u.name, nm)) continue;
        s->um[i] = s->um[--s->n_um];
        return het_arbiter_match(s->arb, dest, u.stream, u.r, id);
    }
    return HET_OK;
}

/* Which of waiting rank r's candidates its receive from any sender takes, or -1 while that
 * cannot be known yet (see DESIGN). */
static int pick(het_arb_svc *s, int r) {
    const waiting *w = &s->w[r];
    int best = -1;
    double t0 = INFINITY;
    if (w->dec_recv == w->recv && w->dec_stream == w->name[0].stream) { /* decided before */
        for (int i = 0; i < w->n; i++)
            if (same(w->name[i], w->dec_name)) return i;
        return -1;
    }
    for (int i = 0; i < w->n; i++) {
        int id = het_arb_flow_of(s, r, w->name[i]);
        double t = id >= 0 ? het_arbiter_start(s->arb, id) + s->info[id].env : INFINITY;
        if (id >= 0 && (best < 0 || t < t0 || (t == t0 && before(w->name[i], w->name[best]))))
            best = i, t0 = t;
    }
    for (int i = 0; best >= 0 && i < w->n; i++)
        if (het_arb_flow_of(s, r, w->name[i]) < 0 &&
            !(het_arbiter_promise(s->arb, w->name[i].src) > t0))
            return -1; /* its sender could still send one first */
    return best;
}

int het_arb_rdv_decide(het_arb_svc *s, int *changed) {
    *changed = 0;
    for (int r = 0; r < s->size; r++) {
        waiting *w = &s->w[r];
        if (!w->active || w->recv < 0 || w->decided || w->n < 1) continue;
        int i = pick(s, r), rc = HET_OK;
        if (i < 0) continue;
        het_arb_name nm = w->name[i];
        int id = het_arb_flow_of(s, r, nm);
        if (het_arbiter_pending(s->arb, id)) { /* matched here; the receiver will not */
            if ((rc = het_arbiter_match(s->arb, r, nm.stream, w->recv, id)) != HET_OK) return rc;
            w->dec_stream = nm.stream, w->dec_recv = w->recv, w->dec_name = nm;
        }
        w->name[0] = nm, w->told[0] = w->told[i], w->n = 1, w->decided = 1;
        if ((rc = het_arb_give_wait(s, r)) != HET_OK) return rc;
        *changed = 1;
    }
    return HET_OK;
}

void het_arb_rdv_free(het_arb_svc *s) {
    free(s->um);
    free(s->info);
    het_map64_free(&s->rnext);
}

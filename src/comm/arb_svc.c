/* The arbiter service: world rank 0 holds the arbiter of the messages between nodes, the ranks
 * report to it (arb_svc.h says what it models).
 *
 * DESIGN. Reports go to rank 0 as one message each (tag REPORT on a dup of the world: a header,
 * then its ints), posted non-blocking (the buffers are kept until their sends complete), so a
 * rank never blocks on rank 0 to report; MPI keeps one rank's reports in order, so a flow's
 * post comes before any wait of its sender. Rank 0's own reports are applied at once. Rank 0
 * serves when any of its service calls runs: it takes every report that came, applies it to the
 * arbiter (a wait by names: the flows posted by then, and for a name not posted yet its sender
 * with the lookahead; the wait is given again when a named flow is posted), settles, and sends
 * each waiting rank ONE answer with every flow of its wait that became final (its name and
 * end). One answer per settle matters: the arbiter makes ends final in time order, so the
 * first answer a wait gets holds its earliest end whatever wall time the messages take; the
 * waiting rank takes the smallest (end, sender, count) of it, the same in every run. Names told
 * but not taken stay known to the rank (a later wait for them returns at once). Leaving: a
 * rank reports it and takes answers until rank 0's goodbye, which comes after every answer to
 * it; rank 0 serves until every rank has left. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/arb_svc_int.h"
#include "hetrain/core.h"

void *het_arb_grow(void *p, int *cap, int need, size_t size) {
    if (need <= *cap) return p;
    int c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(p, (size_t)c * size);
    if (q) *cap = c;
    return q;
}

static int learn(het_arb_svc *s, het_arb_name name, double end) {
    known *a = het_arb_grow(s->ans, &s->cap_ans, s->n_ans + 1, sizeof *a);
    if (!a) return het_error_set(HET_ENOMEM, "arbiter service: out of memory for answers");
    s->ans = a;
    s->ans[s->n_ans++] = (known){name, end};
    return HET_OK;
}

static uint64_t stream_key(int src, int dest, int stream) {
    return (uint64_t)(uint32_t)src << 40 | (uint64_t)(uint32_t)dest << 16 | (uint32_t)stream;
}

/* Rank 0: the flow id of name as rank `dest` gives it, or -1 while not posted. */
int het_arb_flow_of(const het_arb_svc *s, int dest, het_arb_name nm) {
    if (nm.k < 0) return -1;
    int e = het_map64_get(&s->by_name, stream_key(nm.src, dest, nm.stream), -1);
    return e >= 0 && nm.k < s->streams[e].n ? s->streams[e].id[nm.k] : -1;
}

/* Posts buf (bytes, malloc'd; taken over) to `to` with tag; kept until sent. */
static int send_buf(het_arb_svc *s, void *buf, size_t bytes, int to, int tag) {
    pending *o = het_arb_grow(s->out, &s->cap_out, s->n_out + 1, sizeof *o);
    if (!o) {
        free(buf);
        return het_error_set(HET_ENOMEM, "arbiter service: out of memory for sends");
    }
    s->out = o;
    int err = MPI_Isend(buf, (int)bytes, MPI_BYTE, to, tag, s->comm, &s->out[s->n_out].req);
    if (err != MPI_SUCCESS) {
        free(buf);
        return het_error_set(HET_EMPI, "arbiter service: MPI_Isend to rank %d failed", to);
    }
    s->out[s->n_out++].buf = buf;
    return HET_OK;
}

/* ---- rank 0 ---- */

/* Gives the arbiter rank r's wait by names again (the flows posted by now; a name not posted:
 * its sender, with the lookahead). */
int het_arb_give_wait(het_arb_svc *s, int r) {
    waiting *w = &s->w[r];
    int *flows = malloc((size_t)(w->n + 1) * sizeof *flows);
    int *from = malloc((size_t)(w->n + 1) * sizeof *from);
    double *look = malloc((size_t)(w->n + 1) * sizeof *look);
    int nf = 0, nm = 0, rc = HET_OK;
    if (!flows || !from || !look) rc = het_error_set(HET_ENOMEM, "arbiter service: wait");
    for (int i = 0; rc == HET_OK && i < w->n; i++) {
        int id = het_arb_flow_of(s, r, w->name[i]);
        if (id >= 0) flows[nf++] = id;
        else /* not posted: its sender's promise + the lookahead (none for a hold: a message
              * inside the node takes less than one between nodes) */
            from[nm] = w->name[i].src, look[nm++] = w->name[i].k < 0 ? 0.0 : w->look;
    }
    if (rc == HET_OK)
        rc = het_arbiter_wait_until(s->arb, r, w->t, w->until, flows, nf, from, look, nm);
    free(flows), free(from), free(look);
    return rc;
}

static int apply_post(het_arb_svc *s, int r, const report *m) {
    int fixed = m->fixed >= 0.0;
    if (m->dest < 0 || m->dest >= s->size || (!fixed && s->node[m->dest] == s->node[r]))
        return het_error_set(HET_EINVAL, "arbiter service: rank %d posts a message to rank %d, "
                             "expected a rank on another node", r, m->dest);
    int a = s->node[r], b = s->node[m->dest];
    const int route[4] = {2 * a, 2 * b + 1, 2 * b, 2 * a + 1};
    const double weight[4] = {1.0, 1.0, HET_NETEM_BACK, HET_NETEM_BACK};
    double lat = fixed ? m->fixed
                       : (s->ne.lat_s > 0.0 ? s->ne.lat_s : 0.0) *
                             het_netem_pw_at(&s->ne.lat_factor, m->bytes);
    double bytes = fixed ? 0.0 : m->bytes, f = fixed ? 1.0 : het_netem_pw_at(&s->ne.bw_factor,
                                                                              m->bytes);
    int n_route = s->ne.crosstraffic && !fixed ? 4 : 2;
    int id = het_arb_rdv(s, m->bytes) /* it waits for its receive (arb_rdv.c) */
                 ? het_arbiter_post_rdv(s->arb, r, m->t, m->dest, m->stream, m->look, bytes, lat,
                                        f, route, weight, n_route)
                 : het_arbiter_post(s->arb, r, m->t, bytes, lat, f, route, weight, n_route);
    if (id < 0) return id;
    if (het_arbiter_find(s->arb, r, m->seq) != id)
        return het_error_set(HET_EINVAL, "arbiter service: rank %d's flow %d came out of order",
                             r, m->seq);
    uint64_t key = stream_key(r, m->dest, m->stream);
    int e = het_map64_get(&s->by_name, key, -1);
    if (e < 0) {
        flows_of *st = het_arb_grow(s->streams, &s->cap_streams, s->n_streams + 1, sizeof *st);
        if (!st) return het_error_set(HET_ENOMEM, "arbiter service: out of memory for streams");
        s->streams = st;
        s->streams[e = s->n_streams] = (flows_of){0};
        int rc = het_map64_put(&s->by_name, key, e);
        if (rc != HET_OK) return rc;
        s->n_streams++;
    }
    flows_of *st = &s->streams[e];
    if (m->k != st->n)
        return het_error_set(HET_EINVAL, "arbiter service: rank %d's message %d to rank %d on "
                             "stream %d came as number %d", r, m->k, m->dest, m->stream, st->n);
    int *ids = het_arb_grow(st->id, &st->cap, st->n + 1, sizeof *ids);
    if (!ids) return het_error_set(HET_ENOMEM, "arbiter service: out of memory for a stream");
    st->id = ids;
    st->id[st->n++] = id;
    struct flow_info *info = het_arb_grow(s->info, &s->cap_info, id + 1, sizeof *info);
    if (!info) return het_error_set(HET_ENOMEM, "arbiter service: out of memory for a stream");
    s->info = info;
    s->info[id] = (struct flow_info){m->look, a, b};
    int rc = het_arb_rdv_posted(s, r, m->dest, m->stream, m->k, id); /* a match came first */
    if (rc != HET_OK) return rc;
    const waiting *w = &s->w[m->dest]; /* its receiver's wait may name it: given again */
    for (int i = 0; w->active && i < w->n; i++)
        if (w->name[i].src == r && w->name[i].stream == m->stream && w->name[i].k == m->k)
            return het_arb_give_wait(s, m->dest);
    return HET_OK;
}

static int apply(het_arb_svc *s, int r, const report *m, const void *ints) {
    waiting *w = &s->w[r];
    if (s->debug) { /* every report, as rank 0 takes it */
        fprintf(stderr, "ARB r%d kind %d t %.9g n %d dest %d stream %d k %d fixed %g bytes %g |",
                r, m->kind, m->t, m->n, m->dest, m->stream, m->k, m->fixed, m->bytes);
        const het_arb_name *nm = ints;
        for (int i = 0; (m->kind == K_WAIT || m->kind == K_MATCH) && i < m->n; i++)
            fprintf(stderr, " (%d,%d,%d)", nm[i].src, nm[i].stream, nm[i].k);
        fprintf(stderr, "\n");
    }
    if (m->kind != K_MATCH) /* a match is told from inside a wait, which goes on */
        w->active = 0; /* a report says the rank goes on: its wait is over (K_WAIT: a new one) */
    switch (m->kind) {
    case K_POST: return apply_post(s, r, m);
    case K_RUN: return het_arbiter_run(s->arb, r, m->t);
    case K_GROUP:
        return het_arbiter_wait_group(s->arb, r, m->t, m->group, m->gseq, ints, m->n);
    case K_ENTER: return het_arbiter_enter(s->arb, r, m->t, m->group, m->gseq);
    case K_RECV:
    case K_MATCH: return het_arb_rdv_apply(s, r, m, ints);
    case K_LEAVE:
        s->n_left++;
        if (r != 0) { /* its goodbye, after every answer to it */
            report *b = calloc(1, sizeof *b);
            if (!b) return het_error_set(HET_ENOMEM, "arbiter service: goodbye");
            b->kind = K_BYE;
            int rc = send_buf(s, b, sizeof *b, r, TAG_ANSWER);
            if (rc != HET_OK) return rc;
        }
        return het_arbiter_leave(s->arb, r);
    case K_WAIT: {
        het_arb_name *nm = het_arb_grow(w->name, &w->cap, m->n, sizeof *nm);
        if (nm) w->name = nm;
        unsigned char *t = nm ? realloc(w->told, (size_t)m->n + 1) : NULL;
        if (!t) return het_error_set(HET_ENOMEM, "arbiter service: a wait for %d", m->n);
        w->told = t;
        if (m->n) memcpy(w->name, ints, (size_t)m->n * sizeof *w->name);
        memset(w->told, 0, (size_t)m->n);
        w->n = m->n, w->t = m->t, w->look = m->look, w->active = 1;
        w->until = m->until, w->number = m->seq, w->timer_told = 0;
        w->recv = m->n > 0 ? m->recv : -1, w->decided = 0;
        return het_arb_give_wait(s, r);
    }
    default:
        return het_error_set(HET_EINVAL, "arbiter service: rank %d sent report kind %d", r,
                             m->kind);
    }
}

/* One answer to each waiting rank with the flows of its wait that are final now, and its time
 * limit once nothing it names can end by then (named (-1, -1, the wait's number)). */
static int answer(het_arb_svc *s) {
    for (int r = 0; r < s->size; r++) {
        waiting *w = &s->w[r];
        int n = 0;
        /* a flow is told once it is done and nothing else of the wait can end before it (a
         * message the arbiter does not carry is done when posted); a receive from any sender
         * not decided yet: its time limit only (its match decides first) */
        double bound = w->active ? het_arbiter_wait_bound(s->arb, r) : 0.0;
        int names = !(w->recv >= 0 && !w->decided);
        for (int i = 0; w->active && names && i < w->n; i++) {
            int id = het_arb_flow_of(s, r, w->name[i]);
            double d = id >= 0 ? het_arbiter_done(s->arb, id) : -1.0;
            n += !w->told[i] && d >= 0.0 && d <= bound;
        }
        int timer = w->active && !w->timer_told && isfinite(w->until) && bound > w->until;
        n += timer;
        if (n == 0) continue;
        size_t bytes = sizeof(report) + (size_t)n * (sizeof(double) + sizeof(het_arb_name));
        report *m = r ? calloc(1, bytes) : NULL;
        if (r && !m) return het_error_set(HET_ENOMEM, "arbiter service: an answer");
        double *end = m ? (double *)(m + 1) : NULL;
        het_arb_name *name = m ? (het_arb_name *)(end + n) : NULL;
        int j = 0, rc = HET_OK;
        for (int i = 0; names && i < w->n && rc == HET_OK; i++) {
            int id = het_arb_flow_of(s, r, w->name[i]);
            double d = id >= 0 ? het_arbiter_done(s->arb, id) : -1.0;
            if (w->told[i] || d < 0.0 || d > bound) continue;
            w->told[i] = 1;
            if (m) end[j] = d, name[j++] = w->name[i];
            else rc = learn(s, w->name[i], d); /* rank 0 answers itself */
        }
        if (timer) {
            het_arb_name t = {-1, -1, w->number};
            w->timer_told = 1;
            if (m) end[j] = w->until, name[j++] = t;
            else if (rc == HET_OK) rc = learn(s, t, w->until);
        }
        if (m && rc == HET_OK) {
            m->kind = K_DONE, m->n = n;
            rc = send_buf(s, m, bytes, r, TAG_ANSWER);
        }
        if (rc != HET_OK) return rc;
    }
    return HET_OK;
}

/* The core's span callback: flow id's share of its nodes' link ways (and its cross-traffic's
 * on the way back). */
static void on_span(void *arg, int id, double t0, double t1, double rate) {
    het_arb_svc *s = arg;
    if (!s->span || id >= s->cap_info) return;
    double load = rate / s->ne.bw_bytes_per_s;
    int out = s->info[id].out, in = s->info[id].in;
    s->span(s->span_arg, out, in, t0, t1, load);
    if (s->ne.crosstraffic) s->span(s->span_arg, in, out, t0, t1, HET_NETEM_BACK * load);
}

void het_arb_svc_on_span(het_arb_svc *s, het_arb_span_fn fn, void *arg) {
    if (!s || !s->arb) return;
    s->span = fn, s->span_arg = arg;
    het_arbiter_on_span(s->arb, fn ? on_span : NULL, s);
}

/* ---- every rank ---- */

/* A failure of the service leaves ranks waiting for answers that never come: it ends the job
 * (every rank exits). */
static int fatal(het_arb_svc *s, int rc) {
    if (rc == HET_OK) return rc;
    fprintf(stderr, "hetrain: rank %d: arbiter service: %s\n", s->rank, het_error_msg());
    fflush(stderr);
    MPI_Abort(s->comm, 1);
    return rc;
}

int het_arb_report(het_arb_svc *s, const report *m, const void *ints) {
    if (s->rank == 0) {
        int rc = fatal(s, apply(s, 0, m, ints));
        return rc != HET_OK ? rc : het_arb_svc_serve(s);
    }
    size_t bytes = sizeof *m + (size_t)m->n * (m->kind == K_WAIT || m->kind == K_MATCH
                                                   ? sizeof(het_arb_name)
                                               : m->kind == K_GROUP ? sizeof(int) : 0);
    report *b = malloc(bytes);
    if (!b) return het_error_set(HET_ENOMEM, "arbiter service: a report");
    memcpy(b, m, sizeof *m);
    if (bytes > sizeof *m && ints) memcpy(b + 1, ints, bytes - sizeof *m);
    return send_buf(s, b, bytes, 0, TAG_REPORT);
}

/* Takes one message of tag from `from` if there is one: *got, into a malloc'd *buf. */
static int take(het_arb_svc *s, int from, int tag, int *got, void **buf, int *src) {
    MPI_Status st;
    int flag = 0, count = 0;
    *got = 0;
    if (MPI_Iprobe(from, tag, s->comm, &flag, &st) != MPI_SUCCESS)
        return het_error_set(HET_EMPI, "arbiter service: MPI_Iprobe failed");
    if (!flag) return HET_OK;
    MPI_Get_count(&st, MPI_BYTE, &count);
    if (count < (int)sizeof(report))
        return het_error_set(HET_EINVAL, "arbiter service: a message of %d bytes from rank %d, "
                             "expected at least %zu", count, st.MPI_SOURCE, sizeof(report));
    if (!(*buf = malloc((size_t)count)))
        return het_error_set(HET_ENOMEM, "arbiter service: a message of %d bytes", count);
    if (MPI_Recv(*buf, count, MPI_BYTE, st.MPI_SOURCE, tag, s->comm, MPI_STATUS_IGNORE) !=
        MPI_SUCCESS) {
        free(*buf);
        return het_error_set(HET_EMPI, "arbiter service: MPI_Recv failed");
    }
    *got = 1, *src = st.MPI_SOURCE;
    return HET_OK;
}

static int serve(het_arb_svc *s);

int het_arb_svc_serve(het_arb_svc *s) { return s ? fatal(s, serve(s)) : HET_EINVAL; }

static int serve(het_arb_svc *s) {
    int w = 0, rc = HET_OK;
    for (int i = 0; i < s->n_out; i++) { /* sends done: their buffers go */
        int flag = 0;
        MPI_Test(&s->out[i].req, &flag, MPI_STATUS_IGNORE);
        if (flag) free(s->out[i].buf);
        else s->out[w++] = s->out[i];
    }
    s->n_out = w;
    for (int got = 1; got && rc == HET_OK;) {
        void *buf = NULL;
        int src = 0;
        rc = take(s, s->rank == 0 ? MPI_ANY_SOURCE : 0, s->rank == 0 ? TAG_REPORT : TAG_ANSWER,
                  &got, &buf, &src);
        if (rc != HET_OK || !got) break;
        const report *m = buf;
        if (s->rank == 0) {
            rc = apply(s, src, m, m + 1);
        } else if (m->kind == K_BYE) {
            s->bye = 1;
        } else {
            const double *end = (const double *)(m + 1);
            const het_arb_name *name = (const het_arb_name *)(end + m->n);
            for (int i = 0; i < m->n && rc == HET_OK; i++) rc = learn(s, name[i], end[i]);
        }
        free(buf);
    }
    if (rc == HET_OK && s->rank == 0) {
        double now = het_arbiter_settle(s->arb);
        for (int changed = 1; changed && rc == HET_OK;) /* receives from any sender decided */
            if ((rc = het_arb_rdv_decide(s, &changed)) == HET_OK && changed)
                now = het_arbiter_settle(s->arb);
        if (s->debug) { /* the settle, when it changed: what holds it back */
            static char last[512];
            char buf[512];
            int o = snprintf(buf, sizeof buf, "SETTLE now %.9g promises", now);
            for (int r = 0; r < s->size && o < 400; r++)
                o += snprintf(buf + o, sizeof buf - (size_t)o, " %.9g",
                              het_arbiter_promise(s->arb, r));
            if (strcmp(buf, last)) {
                fprintf(stderr, "%s\n", buf);
                snprintf(last, sizeof last, "%s", buf);
            }
        }
        rc = answer(s);
    }
    return rc;
}

/* A short pause between polls: yield, then nap 20 us. */
static void pause_poll(int round) {
    if (round < 100) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
}

het_arb_svc *het_arb_svc_open(MPI_Comm world, const int *node, het_netem ne) {
    het_arb_svc *s = calloc(1, sizeof *s);
    int ok = s != NULL, all = 0;
    if (ok) {
        MPI_Comm_rank(world, &s->rank);
        MPI_Comm_size(world, &s->size);
        s->ne = ne;
        s->debug = getenv("HET_ARB_DEBUG") != NULL; /* read once: serve runs every poll */
        ok = (s->node = malloc((size_t)s->size * sizeof *s->node)) != NULL;
    }
    if (ok) {
        memcpy(s->node, node, (size_t)s->size * sizeof *node);
        for (int r = 0; r < s->size; r++)
            if (node[r] + 1 > s->n_nodes) s->n_nodes = node[r] + 1;
        ok = s->dup = ne.bw_bytes_per_s > 0.0 && MPI_Comm_dup(world, &s->comm) == MPI_SUCCESS;
    }
    if (ok && s->rank == 0) {
        double *cap = malloc((size_t)2 * (size_t)s->n_nodes * sizeof *cap);
        for (int i = 0; cap && i < 2 * s->n_nodes; i++) cap[i] = ne.bw_bytes_per_s;
        s->arb = cap ? het_arbiter_new(s->size, 2 * s->n_nodes, cap) : NULL;
        s->w = calloc((size_t)s->size, sizeof *s->w);
        for (int r = 0; s->w && r < s->size; r++) s->w[r].recv = s->w[r].dec_recv = -1;
        free(cap);
        ok = s->arb && s->w;
    }
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, world);
    if (all) return s;
    if (s && s->dup) MPI_Comm_free(&s->comm);
    if (s) {
        het_arbiter_free(s->arb);
        for (int r = 0; s->w && r < s->size; r++) free(s->w[r].name), free(s->w[r].told);
        free(s->w), free(s->node);
    }
    free(s);
    het_error_set(ne.bw_bytes_per_s > 0.0 ? HET_ENOMEM : HET_EINVAL, "arbiter service: %s",
                  ne.bw_bytes_per_s > 0.0 ? "could not start (out of memory, or on another "
                  "rank)" : "the network between nodes has no bandwidth (infinite)");
    return NULL;
}

int het_arb_svc_close(het_arb_svc *s) {
    if (!s) return HET_EINVAL;
    report m = {.kind = K_LEAVE};
    int rc = het_arb_report(s, &m, NULL);
    for (int round = 0; rc == HET_OK; round++) {
        if (s->rank == 0 ? s->n_left == s->size : s->bye) break;
        rc = het_arb_svc_serve(s);
        pause_poll(round);
    }
    for (int i = 0; i < s->n_out; i++) {
        if (rc == HET_OK) MPI_Wait(&s->out[i].req, MPI_STATUS_IGNORE);
        else MPI_Request_free(&s->out[i].req);
        free(s->out[i].buf);
    }
    MPI_Comm_free(&s->comm);
    het_arbiter_free(s->arb);
    for (int r = 0; s->w && r < s->size; r++) free(s->w[r].name), free(s->w[r].told);
    for (int e = 0; e < s->n_streams; e++) free(s->streams[e].id);
    free(s->w), free(s->node), free(s->out), free(s->ans), free(s->streams);
    het_map64_free(&s->next), het_map64_free(&s->by_name);
    het_arb_rdv_free(s);
    free(s);
    return rc;
}

int het_arb_svc_post(het_arb_svc *s, double start, size_t bytes, int dest, int stream,
                     double fixed, int *k) {
    return het_arb_svc_post_env(s, start, bytes, dest, stream, fixed, 0.0, k);
}

int het_arb_svc_post_env(het_arb_svc *s, double start, size_t bytes, int dest, int stream,
                         double fixed, double env, int *k) {
    if (!s || !k || stream < 0 || stream >= 1 << 16 || dest < 0 || dest >= s->size ||
        (fixed < 0.0 && s->node[dest] == s->node[s->rank]) || dest == s->rank)
        return het_error_set(HET_EINVAL, "arbiter service post: rank %d to rank %d (stream %d), "
                             "expected a rank on another node", s->rank, dest, stream);
    uint64_t key = (uint64_t)(uint32_t)dest << 32 | (uint32_t)stream;
    int next = het_map64_get(&s->next, key, 0);
    report m = {.kind = K_POST, .dest = dest, .stream = stream, .fixed = fixed, .k = next,
                .seq = s->seq, .t = start, .bytes = (double)bytes, .look = env};
    int rc = het_arb_report(s, &m, NULL);
    if (rc == HET_OK) rc = het_map64_put(&s->next, key, next + 1);
    if (rc == HET_OK) *k = next, s->seq++;
    return rc;
}

int het_arb_svc_run(het_arb_svc *s, double t) {
    if (!s) return het_error_set(HET_EINVAL, "arbiter service run: NULL");
    report m = {.kind = K_RUN, .t = t};
    return het_arb_report(s, &m, NULL);
}

int het_arb_svc_enter(het_arb_svc *s, double t, long long comm, long long seq) {
    if (!s) return het_error_set(HET_EINVAL, "arbiter service enter: NULL");
    report m = {.kind = K_ENTER, .t = t, .group = comm, .gseq = seq};
    return het_arb_report(s, &m, NULL);
}

int het_arb_svc_group(het_arb_svc *s, double t, long long comm, long long seq, int n,
                      const int *members) {
    if (!s || n < 0 || (n && !members))
        return het_error_set(HET_EINVAL, "arbiter service group: %d members", n);
    report m = {.kind = K_GROUP, .n = n, .t = t, .group = comm, .gseq = seq};
    return het_arb_report(s, &m, members);
}

static int same_name(het_arb_name a, het_arb_name b) {
    return a.src == b.src && a.stream == b.stream && a.k == b.k;
}

static int name_before(het_arb_name a, het_arb_name b) {
    return a.src != b.src ? a.src < b.src : a.stream != b.stream ? a.stream < b.stream : a.k < b.k;
}

/* The smallest (end, name) among the answers for the names and, with a time limit, for the
 * wait's own (-1, -1, number), none past the limit: the name's index (n: the limit), or -1. */
static int first_known(const het_arb_svc *s, int n, const het_arb_name *name, double until,
                       int number, int *at) {
    int best = -1, timer = isfinite(until) && number >= 0;
    for (int i = 0; i < n + timer; i++) {
        het_arb_name want = i < n ? name[i] : (het_arb_name){-1, -1, number};
        if (want.k < 0) continue; /* a hold, never answered */
        for (int k = 0; k < s->n_ans; k++) {
            const known *a = &s->ans[k];
            if (!same_name(a->name, want) || a->end > until) continue;
            const known *b = best >= 0 ? &s->ans[*at] : NULL;
            if (!b || a->end < b->end || (a->end == b->end && name_before(a->name, b->name)))
                best = i, *at = k;
        }
    }
    return best;
}

int het_arb_svc_wait_post(het_arb_svc *s, double t, int n, const het_arb_name *name,
                          double look, double until, int *number) {
    if (!s || n < 0 || (n && !name) || !number || (n == 0 && !isfinite(until)))
        return het_error_set(HET_EINVAL, "arbiter service wait: %d names", n);
    *number = isfinite(until) ? s->n_waits++ : -1;
    report m = {.kind = K_WAIT, .n = n, .seq = *number, .t = t, .look = look, .until = until,
                .recv = -1};
    return het_arb_report(s, &m, name);
}

int het_arb_svc_wait_test(het_arb_svc *s, int n, const het_arb_name *name, double until,
                          int number, int *which, double *end) {
    int at = -1, i = s ? first_known(s, n, name, until, number, &at) : -1;
    if (i < 0) return 0;
    *which = i < n ? i : -1, *end = s->ans[at].end;
    s->ans[at] = s->ans[--s->n_ans]; /* taken */
    return 1;
}

int het_arb_svc_wait(het_arb_svc *s, double t, int n, const het_arb_name *name, double look,
                     double until, het_arb_poll poll, void *arg, int *which, double *end) {
    if (!s || !which || !end) return het_error_set(HET_EINVAL, "arbiter service wait: NULL");
    if (het_arb_svc_wait_test(s, n, name, until, -1, which, end) && *which >= 0) return HET_OK;
    int number = -1, rc = het_arb_svc_wait_post(s, t, n, name, look, until, &number);
    for (int round = 0, stop = 0; rc == HET_OK; round++) {
        if (het_arb_svc_wait_test(s, n, name, until, number, which, end)) return HET_OK;
        rc = het_arb_svc_serve(s);
        if (rc == HET_OK && poll) rc = poll(arg, &stop);
        if (stop) {
            *which = -2, *end = -1.0;
            return rc;
        }
        pause_poll(round);
    }
    return rc;
}

double het_arb_svc_min_latency(const het_arb_svc *s) {
    if (!s || !(s->ne.lat_s > 0.0)) return 0.0;
    double f = het_netem_pw_identity(&s->ne.lat_factor) ? 1.0 : INFINITY;
    for (int i = 0; i < s->ne.lat_factor.n; i++)
        if (s->ne.lat_factor.val[i] < f) f = s->ne.lat_factor.val[i];
    return s->ne.lat_s * (isfinite(f) ? f : 1.0);
}

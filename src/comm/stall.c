/* The stall inspector (after Horovod's): a collective that rank 0 waits on longer than
 * --stall-warn seconds makes it name the ranks that have not arrived; --stall-abort ends the
 * job. Also the poll loop that completes every collective of comm/.
 *
 * DESIGN. Collectives are posted non-blocking and completed by het_stall_wait, a loop of
 * MPI_Testall on the calling (MPI) thread. It spins for SPIN_S, then yields the core
 * (sched_yield) until YIELD_S, then naps min(wait / 100, 1 ms) between tests, so that a rank
 * waiting for a slow or frozen peer no longer burns its core (Open MPI's blocking calls spin).
 * The naps cost a long wait at most ~1 % and a short one nothing. Point-to-point waits
 * (p2p.c) run the same loop through het_stall_wait_poll, which calls a test of their own
 * instead of MPI_Testall; their reports name the peers they wait for in place of a
 * communicator's members ("recv from rank 2"), and rank 0 follows those like members.
 *
 * Sequence numbers: het_stall_post counts the collectives started on each communicator (a
 * table of MAX_COMMS handles), at post time, so that a request completed by a test counts like
 * one completed by a wait; every member of a communicator starts its collectives in the same
 * order, so "#k" names the same collective on all of them. An attribute on each numbered
 * communicator removes its entry when it is freed: MPI reuses handles, and a new communicator
 * must not continue an old one's count (its members could have counted different ones).
 *
 * Side channel (het_stall_start dups world): a rank other than 0 whose wait passes
 * report_s = min(1 s, warn / 2) sends rank 0 one small message (tag STALL_TAG): where it
 * waits (#k, operation, label, epoch and step, and the communicator as the world ranks of its
 * members, in its rank order; none for one of the world's size, which holds every rank, nor
 * for one of more than MAX_MEMBERS, which is then not followed); when
 * that wait ends, a second saying it is done. Rank 0 reads them (MPI_Iprobe + MPI_Recv) while
 * it waits past report_s itself, and at warn seconds, then every warn seconds, prints
 *   hetrain: stall: rank 0 has waited 60 s in allreduce #1234 (gradients, epoch 2 step 17);
 *   not arrived: rank 2; waiting: ranks 1, 3
 * (one line): a member of its communicator that reported waiting in the same collective (the
 * same members, #k and operation) is "waiting", one waiting in another collective is
 * "elsewhere" (named), one without a report has "not arrived" (it has not waited report_s in
 * any collective: computing, frozen, gone). A rank elsewhere waits for the members of its own
 * collective, which rank 0 knows from its report, so rank 0 follows it: the members of that
 * collective without a report are "not arrived" too, as "rank 3 (where rank 1 waits)", and
 * those elsewhere are followed in turn (each rank once), so that a frozen rank is named
 * whatever communicator the others wait in: rank 0 waiting in its node's all-reduce for rank
 * 1, which waits in a cross-node one for rank 3 on another node, names rank 3. Past
 * --stall-abort seconds rank 0 prints the line with "; aborting (--stall-abort S)" and calls
 * MPI_Abort (exit status 1); any other rank does the same after ABORT_GRACE_S more, since
 * rank 0 may be the frozen one. Limits: only rank 0 prints warnings, and only while it waits
 * itself; a rank that arrives in the last report_s before the warning is listed as not
 * arrived; two communicators with the same members (a dup) are told apart by #k and the
 * operation only. Nothing of this runs on the fast path: a collective complete at its first
 * test costs one table look-up.
 *
 * Measured (2026-11-30, 2 ranks on the 2-core shared machine, load average 5-11 from other
 * users' builds). bench_allreduce --reps 41, methods interleaved per repetition, min µs of
 * plain MPI_Allreduce vs flat (MPI_Iallreduce, libnbc ring, + this loop), two runs:
 * 4 KiB 3.3 / 10.4 and 3.0 / 8.1; 16 KiB 11.1 / 12.4 and 10.9 / 11.7; 64 KiB 23.6 / 25.0 and
 * 21.8 / 22.8; 256 KiB 51.2 / 57.5 and 48.6 / 54.1; 1 MiB 200.5 / 200.6 and 217.4 / 209.7;
 * 4 MiB 732 / 734 and 685 / 705: a few µs per call below 1 MiB (+6 µs at LeNet-5's 240 KB,
 * under 1 % of its ~0.7 ms step), nothing above. With the inspector off (--stall-warn 0) the
 * float all-reduces call the blocking MPI_Allreduce (flat == plain within 0.5 µs) but spin.
 * Training, mpirun -np 2, Fashion-MNIST 30k samples, 1 epoch, 6 interleaved rounds, samples/s,
 * before this change / now (default) / now with --stall-warn 0: lenet5 9.6k / 14.6k / 10.8k,
 * 8.6k / 13.8k / 9.9k, 5.2k / 11.3k / 10.3k, 4.6k / 9.5k / 4.9k, 2.8k / 7.6k / 4.3k; mlp
 * 16.5k / 25.4k / 16.3k, 16.1k / 27.3k / 7.4k, 18.3k / 25.4k / 11.2k, 6.4k / 12.9k / 5.4k,
 * 6.1k / 10.3k / 4.8k: on busy cores the yielding wait is 1.4-2.7x faster than a spinning one;
 * on idle cores the difference is the few µs above. CPU used by ranks 0 and 2 in 10 s while
 * rank 1 of 3 was SIGSTOPped: 2.6 s each before (all the CPU the busy machine gave them),
 * 0.15 s and 0.25 s now. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/internal.h"

#define STALL_TAG 7355
#define MAX_COMMS 64
#define SPIN_S 1e-3
#define YIELD_S 20e-3
#define ABORT_GRACE_S 2.0
#define MAX_MEMBERS 512 /* a report names the members of communicators up to this size */

/* A report: this header, then n_members ints (the members' world ranks). */
typedef struct stall_msg {
    int rank, waiting;         /* waiting 0: the wait reported before has ended */
    int p2p;                   /* a point-to-point wait: the members are the peers it waits
                                  for (always listed), not a communicator's */
    int comm_size;             /* the communicator's size, or the peers (0: unknown) */
    int n_members;             /* ints that follow: comm_size, or 0 when the communicator
                                  holds every world rank or its members are unknown */
    long long seq, step;
    int epoch;
    double waited;
    char op[16], what[48];
} stall_msg;

/* A rank's latest report as rank 0 keeps it: the header and the members (owned). */
typedef struct stall_peer {
    stall_msg m;
    int *members;
    int cap;
} stall_peer;

static struct {
    int on, silent;
    MPI_Comm world, side;
    int rank, size;
    double warn_s, abort_s, report_s;
    struct { MPI_Comm comm; long long seq, hash, key; } comms[MAX_COMMS]; /* hash of its
                               * members, key: the arbiter's (comm_key) */
    int n_comms;
    const char *what;
    int epoch;
    long long step;
    stall_msg *out[2];         /* a rank's reports in flight (owned, out_cap[i] bytes) */
    size_t out_cap[2];
    MPI_Request out_req[2];
    int out_next;
    stall_peer *peer;          /* rank 0: every rank's latest report */
    unsigned char *in;         /* rank 0: the receive buffer (owned, in_cap bytes) */
    size_t in_cap;
} S = {0, 0, MPI_COMM_NULL, MPI_COMM_NULL, 0, 1, 0, 0, 0, {{0}}, 0, NULL, 0, 0, {NULL, NULL},
       {0, 0}, {MPI_REQUEST_NULL, MPI_REQUEST_NULL}, 0, NULL, NULL, 0};

static int start(MPI_Comm world, double warn_s, double abort_s, int silent) {
    het_stall_stop();
    if (!(warn_s >= 0.0) || !(abort_s >= 0.0))
        return het_error_set(HET_EINVAL, "stall inspector: --stall-warn %g and --stall-abort "
                             "%g must be >= 0", warn_s, abort_s);
    if (world == MPI_COMM_NULL) return het_error_set(HET_EINVAL, "stall inspector: no world");
    MPI_Comm_rank(world, &S.rank);
    MPI_Comm_size(world, &S.size);
    if ((warn_s == 0.0 && abort_s == 0.0 && !silent) || S.size < 2) return HET_OK;
#ifdef HET_SMPI /* under SMPI every MPI_Test costs simulated time, and no rank can be lost */
    return HET_OK;
#endif
    int err = MPI_Comm_dup(world, &S.side); /* every rank, whatever fails after it */
    if (err != MPI_SUCCESS) {
        S.side = MPI_COMM_NULL;
        return het_comm_mpi_error(err, "stall inspector: MPI_Comm_dup");
    }
    if (S.rank == 0 && !(S.peer = calloc((size_t)S.size, sizeof *S.peer)))
        return het_error_set(HET_ENOMEM, "stall inspector: out of memory for %d ranks", S.size);
    S.world = world;
    S.warn_s = warn_s;
    S.abort_s = abort_s;
    double first = warn_s > 0.0 ? warn_s : abort_s;
    S.report_s = silent ? INFINITY : first / 2 < 1.0 ? first / 2 : 1.0;
    S.on = 1;
    S.silent = silent;
    return HET_OK;
}

int het_stall_start(MPI_Comm world, double warn_s, double abort_s) {
    return start(world, warn_s, abort_s, 0);
}

int het_stall_start_silent(MPI_Comm world) { return start(world, 0.0, 0.0, 1); }

/* Rank 0: keeps report m (and its members) as rank m->rank's latest. A report whose members
 * cannot be kept (out of memory) is kept without them: it cannot be followed. */
static void keep(const stall_msg *m, const int *mem) {
    if (m->rank <= 0 || m->rank >= S.size) return;
    stall_peer *p = &S.peer[m->rank];
    p->m = *m;
    if (m->n_members > p->cap) {
        int *bigger = realloc(p->members, (size_t)m->n_members * sizeof *bigger);
        if (!bigger) {
            p->m.n_members = 0;
            p->m.comm_size = 0;
            return;
        }
        p->members = bigger;
        p->cap = m->n_members;
    }
    if (m->n_members > 0) memcpy(p->members, mem, (size_t)m->n_members * sizeof *mem);
}

/* Rank 0: reads every report that has arrived. */
static void drain(void) {
    int flag = 1;
    while (flag) {
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, STALL_TAG, S.side, &flag, &st) != MPI_SUCCESS) return;
        if (!flag) return;
        int bytes = 0;
        MPI_Get_count(&st, MPI_BYTE, &bytes);
        if (bytes < (int)sizeof(stall_msg)) bytes = (int)sizeof(stall_msg);
        if ((size_t)bytes > S.in_cap) {
            unsigned char *bigger = realloc(S.in, (size_t)bytes);
            if (!bigger) { /* take it off the channel; only a header fits */
                stall_msg m;
                MPI_Recv(&m, (int)sizeof m, MPI_BYTE, st.MPI_SOURCE, STALL_TAG, S.side,
                         MPI_STATUS_IGNORE);
                return;
            }
            S.in = bigger;
            S.in_cap = (size_t)bytes;
        }
        if (MPI_Recv(S.in, bytes, MPI_BYTE, st.MPI_SOURCE, STALL_TAG, S.side,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
        stall_msg m;
        memcpy(&m, S.in, sizeof m);
        size_t room = ((size_t)bytes - sizeof m) / sizeof(int);
        if (m.n_members < 0 || (size_t)m.n_members > room) m.n_members = 0, m.comm_size = 0;
        keep(&m, (const int *)(const void *)(S.in + sizeof m));
    }
}

void het_stall_stop(void) {
    for (int i = 0; i < 2; i++)
        if (S.out_req[i] != MPI_REQUEST_NULL) MPI_Wait(&S.out_req[i], MPI_STATUS_IGNORE);
    if (S.on && S.rank == 0) drain();
    S.on = 0;
    S.silent = 0;
    if (S.side != MPI_COMM_NULL) MPI_Comm_free(&S.side); /* also after a failed start */
    for (int r = 0; S.peer && r < S.size; r++) free(S.peer[r].members);
    free(S.peer);
    S.peer = NULL;
    for (int i = 0; i < 2; i++) {
        free(S.out[i]);
        S.out[i] = NULL;
        S.out_cap[i] = 0;
    }
    free(S.in);
    S.in = NULL;
    S.in_cap = 0;
}

int het_stall_on(void) { return S.on; }

int het_stall_blocking_model(void) { return !S.on || S.silent; }

void het_stall_where(const char *what, int epoch, long long step) {
    S.what = what;
    S.epoch = epoch;
    S.step = step;
}

/* MPI_Comm_free of a numbered communicator (the delete callback of its attribute): its entry
 * goes, so that a communicator made later with the same handle counts from 1 again. */
static int forget(MPI_Comm comm, int keyval, void *attr, void *extra) {
    (void)keyval, (void)attr, (void)extra;
    for (int i = 0; i < S.n_comms; i++)
        if (S.comms[i].comm == comm) {
            S.comms[i] = S.comms[--S.n_comms];
            break;
        }
    return MPI_SUCCESS;
}

static long long comm_key(int i);

long long het_stall_post(MPI_Comm comm) {
    static int keyval = MPI_KEYVAL_INVALID;
    for (int i = 0; i < S.n_comms; i++)
        if (S.comms[i].comm == comm) {
            ++S.comms[i].seq;
            if (het_stall_arb_on()) het_stall_arb_enter(comm_key(i), S.comms[i].seq);
            return S.comms[i].seq;
        }
    if (S.n_comms == MAX_COMMS) return 0; /* unnumbered */
    /* an attribute whose deletion tells when comm is freed (dups do not copy it) */
    if (keyval == MPI_KEYVAL_INVALID &&
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, forget, &keyval, NULL) != MPI_SUCCESS)
        keyval = MPI_KEYVAL_INVALID;
    if (keyval != MPI_KEYVAL_INVALID) MPI_Comm_set_attr(comm, keyval, NULL);
    S.comms[S.n_comms].comm = comm;
    S.comms[S.n_comms].seq = 1;
    S.comms[S.n_comms].key = 0;
    S.comms[S.n_comms].hash = S.world != MPI_COMM_NULL ? het_stall_arb_hash(comm) : 0;
    if (het_stall_arb_on()) het_stall_arb_enter(comm_key(S.n_comms), 1);
    return S.comms[S.n_comms++].seq;
}

/* The world ranks of comm's members into out (size entries); 0 on failure. */
int het_stall_members(MPI_Comm comm, int size, int *out) {
    MPI_Group g, gw;
    if (MPI_Comm_group(comm, &g) != MPI_SUCCESS) return 0;
    if (MPI_Comm_group(S.world, &gw) != MPI_SUCCESS) {
        MPI_Group_free(&g);
        return 0;
    }
    int *idx = malloc((size_t)size * sizeof *idx), ok = 0;
    if (idx) {
        for (int i = 0; i < size; i++) idx[i] = i;
        ok = MPI_Group_translate_ranks(g, size, idx, gw, out) == MPI_SUCCESS;
    }
    free(idx);
    MPI_Group_free(&g);
    MPI_Group_free(&gw);
    return ok;
}

/* What a rank waits in: a collective (#seq of operation op on comm), or with p2p a
 * point-to-point wait on the peers it names (comm MPI_COMM_NULL, seq 0). */
typedef struct stall_wait {
    MPI_Comm comm;
    long long seq;
    const char *op;
    const het_stall_poll *p2p;
} stall_wait;

/* Its members: the communicator's size, or the peers' number (at most MAX_MEMBERS). */
static int wait_size(const stall_wait *w) {
    int size = 0;
    if (w->p2p) size = w->p2p->n_peers < MAX_MEMBERS ? w->p2p->n_peers : MAX_MEMBERS;
    else if (w->comm != MPI_COMM_NULL) MPI_Comm_size(w->comm, &size);
    return size > 0 ? size : 0;
}

/* Their world ranks into out (size entries, wait_size); 0 on failure. */
static int wait_members(const stall_wait *w, int size, int *out) {
    if (!w->p2p) return het_stall_members(w->comm, size, out);
    if (size > 0) memcpy(out, w->p2p->peers, (size_t)size * sizeof *out);
    return 1;
}

/* This rank's current wait as a report; with `mem` (room for wait_size ints), the members
 * too, unless they are a communicator holding every world rank (n_members stays 0). */
static void describe(stall_msg *m, int *mem, const stall_wait *w, double waited, int waiting) {
    memset(m, 0, sizeof *m);
    m->rank = S.rank;
    m->waiting = waiting;
    m->p2p = w->p2p != NULL;
    m->comm_size = wait_size(w);
    if (mem && m->comm_size > 0 && (m->p2p || m->comm_size < S.size) &&
        m->comm_size <= MAX_MEMBERS) {
        if (wait_members(w, m->comm_size, mem)) m->n_members = m->comm_size;
        else m->comm_size = 0; /* members unknown: never the same as another's */
    }
    m->seq = w->seq;
    m->epoch = S.epoch;
    m->step = S.step;
    m->waited = waited;
    snprintf(m->op, sizeof m->op, "%s", w->op ? w->op : "collective");
    snprintf(m->what, sizeof m->what, "%s", S.what ? S.what : "");
}

/* Appends printf text to line (n bytes), truncating. */
static void append(char *line, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *line, size_t n, const char *fmt, ...) {
    size_t len = strlen(line);
    if (len + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + len, n - len, fmt, ap);
    va_end(ap);
}

/* A collective as rank 0 sees it: the report, and its n members' world ranks (mem NULL:
 * every world rank, in order; n 0: the members are unknown). */
typedef struct stall_view {
    const stall_msg *m;
    const int *mem;
    int n;
} stall_view;

/* Rank r's latest report as a view. */
static stall_view view_of(int r) {
    const stall_peer *p = &S.peer[r];
    stall_view v = {&p->m, NULL, 0};
    if (p->m.n_members > 0) v.mem = p->members, v.n = p->m.n_members;
    else if (p->m.comm_size == S.size) v.n = S.size;
    return v;
}

static int view_member(stall_view v, int i) { return v.mem ? v.mem[i] : i; }

/* "allreduce #12 (gradients, epoch 2 step 17)", with " of ranks 1, 3" (up to 8 of them, else
 * " of 12 ranks") after the number when v's communicator is smaller than the world; a
 * point-to-point wait names its peers: "recv from rank 2 (gradients, epoch 2 step 17)",
 * "send to rank 0" */
static void where_text(stall_view v, char *buf, size_t n) {
    const stall_msg *m = v.m;
    char seq[96] = "", ctx[96] = "";
    if (m->seq > 0) snprintf(seq, sizeof seq, " #%lld", m->seq);
    const char *of = !m->p2p ? "of" : strcmp(m->op, "send") == 0 ? "to" : "from";
    if (v.mem && v.n > 8) {
        append(seq, sizeof seq, " %s %d ranks", of, v.n);
    } else if (v.mem) {
        append(seq, sizeof seq, " %s rank%s", of, v.n > 1 ? "s" : "");
        for (int i = 0; i < v.n; i++) append(seq, sizeof seq, "%s %d", i ? "," : "", v.mem[i]);
    }
    if (m->epoch > 0)
        snprintf(ctx, sizeof ctx, " (%s%sepoch %d step %lld)", m->what, m->what[0] ? ", " : "",
                 m->epoch, m->step);
    else if (m->what[0])
        snprintf(ctx, sizeof ctx, " (%s)", m->what);
    snprintf(buf, n, "%s%s%s", m->op, seq, ctx);
}

/* Whether a and b are the same collective: #k, operation and members. */
static int same_wait(stall_view a, stall_view b) {
    if (a.n == 0 || a.n != b.n || a.m->seq != b.m->seq || strcmp(a.m->op, b.m->op) != 0)
        return 0;
    if (!a.mem || !b.mem) return !a.mem && !b.mem;
    return memcmp(a.mem, b.mem, (size_t)a.n * sizeof *a.mem) == 0;
}

/* Appends "; LABEL: rank 2" / "ranks 1, 3" for the k ranks in list to line; with `via`, a rank
 * r whose via[r] >= 0 is followed by " (where rank V waits)". */
static void add_list(char *line, size_t n, const char *label, const int *list, int k,
                     const int *via) {
    if (k == 0) return;
    append(line, n, "; %s: rank%s", label, k > 1 ? "s" : "");
    for (int i = 0; i < k; i++) {
        append(line, n, "%s %d", i ? "," : "", list[i]);
        if (via && via[list[i]] >= 0) append(line, n, " (where rank %d waits)", via[list[i]]);
    }
}

/* Rank 0: the stall line of its wait w; `tail` is appended (may be ""). Walks from rank 0's
 * collective to the collectives its members wait in elsewhere, and on (each rank once). */
static void print_line(const stall_msg *me, const stall_wait *w, const char *tail) {
    char where[256], line[2048];
    int size = me->comm_size, W = S.size;
    /* rank 0's members; per world rank: seen, and the rank whose collective it is missing
     * from; the lists; the queue of ranks elsewhere whose collectives are still to walk */
    int *mem = malloc(((size_t)(size > 0 ? size : 1) + 6 * (size_t)W) * sizeof *mem);
    int known = mem && size > 0 && wait_members(w, size, mem);
    stall_view mine = {me, known && (me->p2p || size < W) ? mem : NULL, known ? size : 0};
    where_text(mine, where, sizeof where);
    snprintf(line, sizeof line, "hetrain: stall: rank 0 has waited %.0f s in %s", me->waited,
             where);
    if (known) {
        int *seen = mem + size, *via = seen + W, *absent = via + W, *waiting = absent + W;
        int *queue = waiting + W, *elsewhere = queue + W, na = 0, nw = 0, ne = 0, qh = 0,
            qt = 0;
        for (int r = 0; r < W; r++) seen[r] = 0, via[r] = -1;
        seen[0] = 1; /* rank 0 waits here */
        for (int owner = -1;;) {
            stall_view v = owner < 0 ? mine : view_of(owner);
            for (int i = 0; i < v.n; i++) {
                int r = view_member(v, i);
                if (r <= 0 || r >= W || seen[r]) continue;
                seen[r] = 1;
                stall_view p = view_of(r);
                if (!p.m->waiting) {
                    via[r] = owner;
                    absent[na++] = r;
                } else if (same_wait(p, v)) {
                    if (owner < 0) waiting[nw++] = r; /* listed for rank 0's collective only */
                } else {
                    elsewhere[ne++] = r;
                    queue[qt++] = r;
                }
            }
            if (qh == qt) break;
            owner = queue[qh++];
        }
        add_list(line, sizeof line, "not arrived", absent, na, via);
        add_list(line, sizeof line, "waiting", waiting, nw, NULL);
        for (int i = 0; i < ne; i++) {
            char wt[256];
            where_text(view_of(elsewhere[i]), wt, sizeof wt);
            append(line, sizeof line, "%srank %d in %s", i ? ", " : "; elsewhere: ",
                   elsewhere[i], wt);
        }
    }
    free(mem);
    fprintf(stderr, "%s%s\n", line, tail);
    fflush(stderr);
}

/* A rank other than 0: sends its report (the older of two buffers is free by then: the
 * messages are small, a header and at most MAX_MEMBERS ints, so MPI sends them eagerly and
 * the wait returns at once). */
static void send_report(const stall_wait *w, double waited, int waiting) {
    int i = S.out_next;
    S.out_next ^= 1;
    if (S.out_req[i] != MPI_REQUEST_NULL) MPI_Wait(&S.out_req[i], MPI_STATUS_IGNORE);
    int size = wait_size(w);
    if (size > MAX_MEMBERS || (!w->p2p && size >= S.size)) size = 0; /* no members in it */
    size_t need = sizeof(stall_msg) + (waiting && size > 0 ? (size_t)size * sizeof(int) : 0);
    if (need > S.out_cap[i]) {
        stall_msg *bigger = realloc(S.out[i], need);
        if (bigger) {
            S.out[i] = bigger;
            S.out_cap[i] = need;
        }
    }
    if (!S.out[i]) return; /* out of memory: rank 0 hears nothing of this wait */
    int room = (int)((S.out_cap[i] - sizeof(stall_msg)) / sizeof(int));
    int *mem = (int *)(void *)(S.out[i] + 1);
    describe(S.out[i], waiting && room >= size ? mem : NULL, w, waited, waiting);
    int bytes = (int)(sizeof(stall_msg) + (size_t)S.out[i]->n_members * sizeof(int));
    if (MPI_Isend(S.out[i], bytes, MPI_BYTE, 0, STALL_TAG, S.side, &S.out_req[i]) !=
        MPI_SUCCESS)
        S.out_req[i] = MPI_REQUEST_NULL;
}

/* Sleeps ns nanoseconds. */
static void nap(long ns) {
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

/* Past --stall-abort: the line, then MPI_Abort. */
static void stall_abort(const stall_wait *w, double waited) {
    char tail[64];
    snprintf(tail, sizeof tail, "; aborting (--stall-abort %g)", S.abort_s);
    stall_msg me;
    describe(&me, NULL, w, waited, 1);
    if (S.rank == 0) {
        drain();
        print_line(&me, w, tail);
    } else {
        char where[256];
        int size = me.comm_size;
        int *mem = size > 0 && (me.p2p || size < S.size) ? malloc((size_t)size * sizeof *mem)
                                                          : NULL;
        stall_view v = {&me, mem && wait_members(w, size, mem) ? mem : NULL, size};
        where_text(v, where, sizeof where);
        free(mem);
        fprintf(stderr, "hetrain: stall: rank %d has waited %.0f s in %s%s\n", S.rank, waited,
                where, tail);
        fflush(stderr);
    }
    het_interrupt_leaving(1); /* the others' signal handlers: not a lost rank */
    MPI_Abort(S.world, 1);
}


/* The arbiter's key of the communicator in slot i: its members' hash and how many numbered
 * communicators with the same members came before it (the world, a dup of it, a group of all:
 * each its own), which every member counts alike as they number them in one program order. A
 * key two communicators share would make a member count as in a collective it is not in yet.
 * 0 when the members are unknown. */
static long long comm_key(int i) {
    if (S.comms[i].key) return S.comms[i].key;
    if (!S.comms[i].hash) S.comms[i].hash = het_stall_arb_hash(S.comms[i].comm);
    if (!S.comms[i].hash) return 0;
    long long dup = 0;
    for (int j = 0; j < i; j++) dup += S.comms[j].hash == S.comms[i].hash;
    unsigned long long k = (unsigned long long)S.comms[i].hash ^ (unsigned long long)dup *
                                                                 0x9e3779b97f4a7c15ULL;
    return S.comms[i].key = (long long)((k >> 1) | 1);
}

/* A collective's wait, to the arbiter (stall_arb.c). */
static void arb_report_group(const stall_wait *w) {
    long long key = 0;
    for (int i = 0; i < S.n_comms; i++)
        if (S.comms[i].comm == w->comm) key = comm_key(i);
    if (!key) key = het_stall_arb_hash(w->comm); /* not numbered (the table is full) */
    het_stall_arb_wait(key, w->seq, w->comm);
}

/* The poll loop of wait w: test(arg, &done) until done or a non-zero status (returned). With the
 * arbiter, a collective that does not end at its first test is reported as one, and every round
 * serves it (rank 0: the reports; the others: their answers). */
static int wait_loop(const stall_wait *w, int (*test)(void *arg, int *done), void *arg) {
    int flag = 0;
    int err = test(arg, &flag);
    if (err != 0 || flag) return err;
    if (het_stall_arb_on() && !w->p2p) arb_report_group(w);
    double t0 = het_now(), next_warn = S.warn_s;
    int reported = 0;
    for (;;) {
        het_stall_arb_serve(); /* with the arbiter; its failures abort */
        err = test(arg, &flag);
        if (err != 0 || flag) break;
        double waited = het_now() - t0;
#ifdef HET_SMPI /* each MPI_Test costs SimGrid's smpi/test seconds: the poll's granularity */
        continue;
#endif
        if (waited < SPIN_S) continue;
        if (waited < YIELD_S) sched_yield();
        else nap(waited < 0.1 ? (long)(waited * 1e7) : 1000000L); /* waited / 100, at most 1 ms */
        if (!S.on || waited < S.report_s) continue;
        if (S.rank != 0) {
            if (!reported) send_report(w, waited, 1);
            reported = 1;
            if (S.abort_s > 0.0 && waited >= S.abort_s + ABORT_GRACE_S) stall_abort(w, waited);
            continue;
        }
        drain();
        if (S.abort_s > 0.0 && waited >= S.abort_s) stall_abort(w, waited);
        if (S.warn_s > 0.0 && waited >= next_warn) {
            stall_msg me;
            describe(&me, NULL, w, waited, 1);
            print_line(&me, w, "");
            next_warn += S.warn_s;
        }
    }
    if (reported && S.on) send_report(w, het_now() - t0, 0);
    return err;
}

/* MPI_Testall of a collective's requests, for wait_loop. */
typedef struct testall_arg {
    int n;
    MPI_Request *reqs;
} testall_arg;

static int test_requests(void *arg, int *done) {
    testall_arg *a = arg;
    return het_mpi_testall(a->n, a->reqs, done);
}

int het_stall_wait(MPI_Comm comm, long long seq, const char *op, int n, MPI_Request *reqs) {
#ifdef HET_SMPI /* SimGrid wakes a blocked rank at the exact time, polling would not */
    (void)comm, (void)seq, (void)op;
    return MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
#endif
    stall_wait w = {comm, seq, op, NULL};
    testall_arg a = {n, reqs};
    return wait_loop(&w, test_requests, &a);
}

int het_stall_wait_poll(const het_stall_poll *p) {
    stall_wait w = {MPI_COMM_NULL, 0, p->op, p};
    return wait_loop(&w, p->fn, p->arg);
}

int het_stall_collective(MPI_Comm comm, const char *op, MPI_Request *req) {
    return het_stall_wait(comm, het_stall_post(comm), op, 1, req);
}

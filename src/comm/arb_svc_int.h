/* The arbiter service's inside (comm/arb_svc.c, and arb_rdv.c for rendezvous): its reports,
 * rank 0's record of every rank's wait, and the helpers both files use. Private to comm/. */
#ifndef HET_COMM_ARB_SVC_INT_H
#define HET_COMM_ARB_SVC_INT_H

#include "comm/arb_svc.h"
#include "core/map64.h"
#include "emul/arbiter.h"

enum { TAG_REPORT = 1, TAG_ANSWER = 2 };
enum { K_POST = 1, K_RUN, K_WAIT, K_GROUP, K_LEAVE, K_DONE, K_BYE, K_ENTER, K_RECV, K_MATCH };

typedef struct report {
    int kind, n;      /* n: WAIT: names (src, stream, k) after it; GROUP: members after it;
                       * DONE: answers (n doubles, then n names); MATCH: its message's name
                       * (1) or none (0) */
    int dest, stream; /* POST: the receiver and its stream; RECV, MATCH: the stream (RECV:
                       * dest the sender, -1 any) */
    int recv;         /* WAIT: a receive from any sender whose match the arbiter decides (its
                       * index on the stream of its names; -1: none); MATCH: the receive */
    double fixed;     /* POST: >= 0: a message the arbiter does not carry (inside the node, no
                       * payload), in that many seconds from its start; < 0: a flow */
    int k, seq;       /* POST: its index on the stream, the sender's count; WAIT: its number */
    double t, bytes;  /* POST: start, bytes; RUN, WAIT, GROUP: the clock */
    double look;      /* WAIT: the lookahead; POST: its envelope's time (arb_rdv.c) */
    double until;     /* WAIT: the time limit (INFINITY: none) */
    long long group;  /* ENTER, GROUP: the collective's communicator (a key) */
    long long gseq;   /* ENTER, GROUP: its number there */
} report;

typedef struct pending { MPI_Request req; void *buf; } pending;

typedef struct waiting { /* rank 0: a rank's wait by names */
    int active, n, cap, number, timer_told;
    het_arb_name *name;
    unsigned char *told;
    double t, look, until;
    int recv, decided;         /* rendezvous: a receive from any sender to decide (-1: none),
                                * and whether it is (its names then the one it takes) */
    int dec_stream, dec_recv;  /* the last one decided with a match, and for which message */
    het_arb_name dec_name;
} waiting;

typedef struct umatch { int rank, stream, r; het_arb_name name; } umatch; /* rank 0: a match
                               * whose message was not posted yet */

typedef struct known { het_arb_name name; double end; } known;

typedef struct flows_of { int *id, n, cap; } flows_of; /* rank 0: a stream's flows by index */

struct het_arb_svc {
    MPI_Comm comm;
    int rank, size, seq, n_nodes, bye, dup;
    int n_waits;             /* this rank's waits so far (a time limit's answer names one) */
    int debug;               /* HET_ARB_DEBUG set: rank 0 prints reports and settles */
    het_map64 next;          /* (dest, stream) -> the index of this rank's next message there */
    het_map64 by_name;       /* rank 0: (src, dest, stream) -> its entry in streams */
    flows_of *streams;       /* rank 0 */
    int n_streams, cap_streams;
    het_netem ne;
    int *node;
    het_arbiter *arb;        /* rank 0 */
    waiting *w;              /* rank 0: per rank */
    int n_left;              /* rank 0 */
    pending *out;
    int n_out, cap_out;
    known *ans;              /* answers not taken yet */
    int n_ans, cap_ans;
    het_map64 rnext;         /* rendezvous: (stream, 0) -> this rank's next receive there */
    umatch *um;              /* rank 0: matches waiting for their message */
    int n_um, cap_um;
    struct flow_info { double env; int out, in; } *info; /* rank 0, per flow id: its envelope's
                               * time from its start, its nodes */
    int cap_info;
    het_arb_span_fn span;    /* rank 0: told each flow's share of its links (arb_svc_on_span) */
    void *span_arg;
};

/* Whether a message of `bytes` waits for its receive (the model's rendezvous threshold). */
static inline int het_arb_rdv(const het_arb_svc *s, double bytes) {
    return s->ne.rndv_bytes > 0.0 && bytes > 0.0 && bytes >= s->ne.rndv_bytes;
}

/* A capacity of at least `need` for p (elements of `size` bytes): the block, or NULL. */
void *het_arb_grow(void *p, int *cap, int need, size_t size);
/* Rank 0: the arbiter's id of message `nm` to rank dest, or -1 while not posted. */
int het_arb_flow_of(const het_arb_svc *s, int dest, het_arb_name nm);
/* Rank 0: gives the arbiter rank r's wait by names again. */
int het_arb_give_wait(het_arb_svc *s, int r);
/* A report to rank 0 (rank 0: applied at once), `ints` after it (names or members). */
int het_arb_report(het_arb_svc *s, const report *m, const void *ints);
/* Rank 0, rendezvous (arb_rdv.c): a receive's posting or match (K_RECV, K_MATCH); a message
 * just posted that a match named before it came; the waits of receives from any sender
 * decided where they can be (*changed: one was). */
int het_arb_rdv_apply(het_arb_svc *s, int r, const report *m, const void *ints);
int het_arb_rdv_posted(het_arb_svc *s, int src, int dest, int stream, int k, int id);
int het_arb_rdv_decide(het_arb_svc *s, int *changed);
void het_arb_rdv_free(het_arb_svc *s);

#endif

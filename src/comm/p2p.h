/* Private to the point-to-point layer (p2p.c: sends, completion; p2p_inbox.c: receives and
 * their order). */
#ifndef HET_COMM_P2P_H
#define HET_COMM_P2P_H

#include "comm/internal.h"
#include "emul/flows.h"

#define N_SCOPES (HET_COMM_FIRST_GROUP + HET_COMM_MAX_GROUPS)
#define NOT_YET (-2)  /* choose(): nothing can be matched yet */
#define ALL_DONE (-1) /* choose(): every sender of the set is done */

enum { M_NONE = 0, M_SEND, M_RECV };                    /* het_msg.kind */
enum { S_QUEUED = 1, S_XFER, S_ARRIVED, S_FINISHED };  /* het_msg.state */
enum { CH_IDLE = 0, CH_POSTED, CH_HELD, CH_DONE };      /* a channel's state */

typedef struct inbox {
    MPI_Comm comm;
    int size, rank, tag, scope;
    het_msg_hdr *hdr;         /* per sender: the header received (HELD, DONE) */
    MPI_Request *req;         /* per sender: its posted header receive, or MPI_REQUEST_NULL */
    int *state, *idx;         /* per sender: CH_*; scratch of MPI_Testsome */
    unsigned char *in_set;    /* per sender: one a receive from any sender waits for */
    int *flow;                /* per sender: its HELD header's flow on the way in (in_net), or
                               * -1 (none yet, a node-local sender, no bytes, the wall clock) */
    int *next_k;              /* arbiter: per sender, the index of its next message here */
    int decided;              /* arbiter: the sender a receive from any sender takes (the
                               * arbiter said so), or -1 */
    double decided_end;       /* its message's arrival */
    het_msg *head, *tail;     /* receives waiting, in posting order */
} inbox;

typedef struct peers {
    int size;
    int *world;               /* a scope rank's world rank */
    unsigned char *same;      /* 1: on this rank's node */
} peers;

struct het_p2p {
    inbox *box[N_SCOPES][HET_P2P_TAGS];
    peers peer[N_SCOPES];
    double *last;             /* by world rank: the last arrival this rank gave it */
    double *last_at;          /* by world rank x tag: the same for sends with a stamp given
                               * (het_comm_isend_at: another lane, a thread's messages) */
    double last_stamp;        /* this rank's time at its last send: a lower one now means
                               * its lane was started over (last[] starts over) */
    het_flows *in_net;        /* virtual clock: this rank's way in from other nodes, which the
                               * messages a receive from any sender takes share max-min fairly
                               * (senders into one receiver: p2p_inbox.c) */
    int *in_live, *in_node;   /* the flows live on in_net, and their sender's node */
    int n_in_live, cap_in_live;
    double *in_prev;          /* by world rank: when its last flow on in_net completed (a
                               * sender's messages to this rank come one after another) */
    double nic_free;          /* when this rank's way out to other nodes is free again: its
                               * messages between nodes leave one after another (the rank's own
                               * clock's sends; a lane's, het_comm_isend_at, queue per tag in
                               * nic_free_at) */
    double nic_free_at[HET_P2P_TAGS]; /* the same per tag for stamped sends: a tag's stamped
                               * messages are made in one program order (one thread's), so
                               * their queue does not depend on how threads interleave */
    int *wait_peers;          /* the world ranks a wait names (world size entries) */
    int world_size;
    struct arb_side *arb;     /* the arbiter's side (p2p_arb.c), or NULL */
};

static inline int hdr_tag(int tag) { return HET_P2P_MPI_TAG_BASE + 2 * tag; }
static inline int data_tag(int tag) { return HET_P2P_MPI_TAG_BASE + 2 * tag + 1; }

/* Where a call runs: the scope's communicator, its size, this rank's rank in it, its peers. */
typedef struct where {
    MPI_Comm comm;
    int size, rank;
    const peers *pp;
} where;

/* Checks comm, scope, tag and a peer (`who`: NULL for none; HET_ANY_SOURCE allowed with
 * any_ok); fills *at. Makes the state and the scope's peers on first use. */
int het_p2p_open(het_comm *c, het_comm_scope s, int tag, int peer, int any_ok, const char *op,
                 const char *who, where *at);
/* m's request array for n requests (all MPI_REQUEST_NULL): inline up to HET_MSG_INLINE, else
 * allocated (HET_ENOMEM naming op); het_p2p_reqs_release frees it. */
int  het_p2p_reqs(het_msg *m, size_t n, const char *op);
void het_p2p_reqs_release(het_msg *m);
/* The modeled time of one message of `bytes` (same: inside the node): the network between
 * nodes, the node link within one on the virtual clock (nothing on the wall clock there). */
double het_p2p_msg_cost(const het_comm *c, int same, size_t bytes);
/* Takes the headers that have arrived at inbox b and matches its waiting receives in order. */
int  het_p2p_progress(het_comm *c, inbox *b);

/* ---- the arbiter's side (p2p_arb.c; c->arb: --p2p-model arbiter) ---- */
/* A message's stream at the arbiter: its scope and tag. */
static inline int het_p2p_stream(int scope, int tag) { return scope * HET_P2P_TAGS + tag; }
/* A send's payload copied (m->copy) so that its wait returns at once: a send never waits for
 * its receiver under the arbiter (its receiver may wait for this rank's promise). */
int  het_p2p_arb_copy(het_msg *m, const void *buf, size_t bytes, const char *op);
/* A send's wait: its requests go on in the background (reaped by het_p2p_arb_reap). */
int  het_p2p_arb_detach(het_comm *c, het_msg *m);
/* Completes what the background holds; at_exit: frees what can be, leaves the rest to MPI. */
void het_p2p_arb_reap(het_comm *c, int at_exit);
/* One poll of a receive's wait: reports what it waits for to the arbiter when that changed,
 * takes the arbiter's answer (*ready: its arrival known, or a receive from any sender
 * decided). */
int  het_p2p_arb_poll(het_comm *c, het_msg *m, int *ready);
/* A receive that tests: its arrival if an answer is there (no report), *ready. */
int  het_p2p_arb_test(het_comm *c, het_msg *m, int *ready);
/* choose() for a receive from any sender: the sender decided, NOT_YET, or (every sender there
 * with a message the arbiter does not carry) the earliest of them. */
int  het_p2p_arb_choose(het_comm *c, inbox *b);
/* Rendezvous (the model's rndv_bytes > 0): receive m, just posted on inbox b, told the arbiter
 * (its number in m->arb_r); receive m took sender j's header h (j < 0: every sender done;
 * decided: the arbiter chose j for a receive from any sender). */
int  het_p2p_arb_posted(het_comm *c, inbox *b, het_msg *m);
int  het_p2p_arb_took(het_comm *c, inbox *b, het_msg *m, int j, const het_msg_hdr *h,
                      int decided);
/* Takes what came at every inbox with receives waiting (a receive's match is told from there;
 * the arbiter may hold every rank until it is). */
void het_p2p_arb_progress_all(het_comm *c);
/* A receive's wait with a time limit (on: limit, off: none): its report says it, and the
 * limit's answer (nothing it waits for ends by then) sets het_p2p_arb_limit_hit. */
void het_p2p_arb_limit(het_comm *c, int on, double limit);
int  het_p2p_arb_limit_hit(het_comm *c);
void het_p2p_arb_free(het_comm *c);

#endif

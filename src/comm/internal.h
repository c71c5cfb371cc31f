/* Private helpers of comm/. */
#ifndef HET_COMM_INTERNAL_H
#define HET_COMM_INTERNAL_H

#include "hetrain/comm.h"

/* The first scope id of a group made by het_comm_split. */
#define HET_COMM_FIRST_GROUP 3
/* Emulated requests in flight at once whose last start is exchanged (het_req.t_slot): slots
 * are taken round-robin; buckets and chunks in flight stay far below this. */
#define HET_ARRIVE_SLOTS 512

/* A group made by het_comm_split. */
typedef struct het_comm_group {
    MPI_Comm comm; /* owned; MPI_ERRORS_RETURN */
    int span;      /* distinct nodes among its members */
    int on_node;   /* its members on this rank's node */
    het_netem_cost cost[HET_AR_N]; /* all-reduce over its members, by algorithm */
    het_netem_cost local[HET_AR_N]; /* its node-local part (virtual clock) */
} het_comm_group;

/* A span of virtual time during which a transfer occupies node links (links.c): node_out's way
 * out and node_in's way in (-1: none) at `load` (1: the whole link). */
typedef struct het_link_span {
    double t0, t1, load;
    int node_out, node_in;
} het_link_span;

typedef struct het_link_log {
    het_link_span *span;
    size_t n, cap;
    int lost;       /* a span could not be noted (out of memory) */
    double t_begin; /* the epoch's start on this rank's clock */
} het_link_log;

/* A collective's occupancy of this rank's node link: the wire time of its busiest link (the
 * model's time without latency) and this rank's share of the load (1 / the scope's ranks on its
 * node); 0 off the virtual clock or within one node. kind: how it runs. */
enum { HET_LINK_BLOCKING = 0, HET_LINK_NONBLOCKING = 1, HET_LINK_BCAST = 2 };
void het_comm_link_model(const het_comm *c, het_comm_scope s, size_t bytes, int kind,
                         double *wire, double *share);
/* Notes that a transfer occupies node_out's way out and node_in's way in (-1: none) over
 * [t0, t1) at `load` (1: the whole link); virtual clock only. */
void het_comm_link_note(het_comm *c, int node_out, int node_in, double t0, double t1,
                        double load);

/* The last start of an emulated blocking operation: its exchange and the value (comm.c). */
typedef struct het_arrival {
    double t;
    double wire, share; /* its node link's occupancy (het_comm_link_model) */
    MPI_Request req;
} het_arrival;
/* Posts the exchange of this rank's start (MAX over comm) when the clock needs it; kind: how
 * the operation runs on the link (HET_LINK_*). */
int het_arrival_post(het_comm *c, het_comm_scope s, size_t bytes, int kind, MPI_Comm comm,
                     double model, het_arrival *a);
/* Completes the exchange and ends the operation at the last start + model. */
int het_arrival_end(het_comm *c, MPI_Comm comm, double model, het_arrival *a);
/* Counts one operation of `bytes` on a scope spanning `span` nodes. */
void het_comm_count_op(het_comm *c, int span, uint64_t bytes);
/* Checks a collective's common arguments (op names it); sets *comm. */
int het_comm_check_op(const het_comm *c, het_comm_scope s, const void *buf, size_t n,
                      const char *op, MPI_Comm *comm);

struct het_comm {
    const het_topo *topo;
    het_netem ne;
    het_comm_stats st;
    size_t chunk;                                  /* elements per MPI call, 1..INT_MAX */
    het_comm_group group[HET_COMM_MAX_GROUPS];     /* scope HET_COMM_FIRST_GROUP + i */
    int n_groups;
    MPI_Op wire_op[3];                             /* by het_wire; MPI_OP_NULL until used */
    uint16_t *wire_buf;                            /* scratch of the wire all-reduce */
    size_t wire_cap;                               /* its capacity, elements */
    double *f64_buf;                               /* scratch of the double all-reduce */
    size_t f64_cap;                                /* its capacity, elements */
    int hier_ready;                                /* the two-level groups below exist */
    het_comm_scope hier_reduce, hier_bcast;        /* node groups of its first, last stage */
    het_comm_scope hier_leaders;                   /* the node leaders; NONE on other ranks */
    het_netem_cost world_cost[HET_AR_N];           /* all-reduce over the world, by algorithm */
    het_netem_cost world_local[HET_AR_N];          /* its node-local part (virtual clock) */
    het_netem_cost node_local[HET_AR_N];           /* all-reduce over this node (virtual clock) */
    double arrive[HET_ARRIVE_SLOTS];               /* last start of emulated requests (MAX) */
    int arrive_next;                               /* the slot the next one takes */
    struct het_p2p *p2p;                           /* point-to-point state (p2p.c), or NULL */
    struct het_arb_svc *arb;                       /* the arbiter service (arb_svc.c) with
                                                      --p2p-model arbiter, or NULL */
    double arb_hold;                               /* >= 0: inside work charged to no clock
                                                      (het_comm_arbiter_hold): the time told
                                                      the arbiter, which the clock returns to */
    int *world_node;                               /* node id of every world rank */
    MPI_Comm host;                                 /* this machine's ranks (aside.c), or NULL */
    het_link_log links;                            /* node link occupancy (links.c) */
    het_lane *lane;                                /* the lane its operations charge: the
                                                      rank's main lane (het_comm_set_lane) */
    het_lane own_lane;                             /* until one is set */
    het_comm_queue coll; /* virtual clock: when this rank's last collective across nodes has
                            moved its bytes (its start + wire time), and the clock when that
                            was noted (comm.c: coll_behind) */
};

/* MPI's operation for op into *out; HET_EINVAL naming `what` for an unknown one. */
static inline int het_comm_mpi_op(het_comm_op op, const char *what, MPI_Op *out) {
    *out = op == HET_OP_MIN ? MPI_MIN : op == HET_OP_MAX ? MPI_MAX : MPI_SUM;
    return op == HET_OP_MIN || op == HET_OP_MAX || op == HET_OP_SUM
               ? HET_OK
               : het_error_set(HET_EINVAL, "%s: unknown operation %d", what, (int)op);
}

/* Records "<what> failed: <MPI's text for err>" and returns HET_EMPI. */
int het_comm_mpi_error(int err, const char *what);

/* The modeled time of an all-reduce of `bytes` on scope s: the algorithm MPI runs for it
 * (blocking: MPI_Allreduce, else MPI_Iallreduce) over the scope's ranks and their nodes
 * (het_netem_mpi_allreduce_algo, het_netem_allreduce_cost); 0 on one node or with the model off. */
double het_comm_allreduce_model(const het_comm *c, het_comm_scope s, size_t bytes, int blocking);
/* The costs of every all-reduce algorithm over ranks on nodes node[0..p-1] (k[HET_AR_N]), and
 * their node-local parts (local[HET_AR_N]). */
void het_comm_costs(het_netem_cost *k, het_netem_cost *local, const int *node, int p);
/* The modeled time of a broadcast of `bytes` from root on scope s: between nodes, and on the
 * virtual clock within them; over the world, a binomial tree where MPI runs one
 * (het_netem_bcast_binomial_s), else a binomial tree over the nodes and one inside them. */
double het_comm_bcast_model(const het_comm *c, het_comm_scope s, size_t bytes, int root);
/* Virtual clock: makes r (just started by the caller, MPI part posted or not) end at the last
 * start over comm + model: posts the exchange of starts. Wall clock: as the non-blocking
 * all-reduce does, only when model > 0. */
int het_comm_req_clock(het_comm *c, MPI_Comm comm, het_req *r, double model);
/* Resets r to a request with nothing in flight, started now (comm.c; hier.c's stages too). */
void het_comm_req_begin(het_comm *c, het_req *r);

/* Frees the groups of c (MPI_Comm_free); used by het_comm_free. */
void het_comm_groups_free(het_comm *c);

/* Blocking in-place sum all-reduce whose emulated delay is deferred: completes the MPI part now
 * and fills r as a finished request (no MPI requests) that het_comm_wait / het_comm_test hold
 * until the modeled time has passed since now. Statistics as het_comm_iallreduce_sum. */
int het_comm_allreduce_deferred(het_comm *c, het_comm_scope s, float *buf, size_t n, het_req *r);

/* One buffer's two-level all-reduce (hier.c): the stage posted last and its request. */
enum { HET_HIER_IDLE, HET_HIER_REDUCE, HET_HIER_CROSS, HET_HIER_BCAST, HET_HIER_DONE };
typedef struct het_hier {
    float *buf;
    size_t n;
    int stage;   /* HET_HIER_*: posted (in flight or complete), or DONE */
    het_req req; /* its MPI requests; empty after a blocking stage */
    double comm_mark; /* comm_s when the broadcast stage was posted */
} het_hier;

/* Makes the two-level groups once (later calls return at once); collective over the world the
 * first time. Failures are agreed over the world. */
int het_hier_setup(het_comm *c);
/* Posts the first stage of h's all-reduce of buf[0, n) (non-blocking). */
int het_hier_start(het_comm *c, het_hier *h, float *buf, size_t n);
/* Tests h's stage in flight; when it is complete and may_post, posts the next stage. Stages
 * share communicators between buffers: a caller with several must post each stage in the
 * same buffer order on every rank (may_post only when the buffer before has gone further). */
int het_hier_advance(het_comm *c, het_hier *h, int may_post);
/* Completes h: waits for the stage in flight, then posts each remaining stage and waits for
 * it (non-blocking calls, as MPI needs when another rank posts it from advance). Then h is
 * DONE. */
int het_hier_finish(het_comm *c, het_hier *h);

/* Bytes per element of a wire type: 4 for FP32, 2 for FP16 / BF16. */
size_t het_wire_bytes(het_wire w);
/* The MPI_User_function that adds two arrays of wire values in float (inout = in + inout,
 * rounded to the wire type); NULL for FP32 (use MPI_FLOAT + MPI_SUM) and unknown types. */
MPI_User_function *het_wire_sum_fn(het_wire w);

/* A wait that is not a set of MPI requests (point-to-point, p2p.c), for the stall inspector's
 * poll loop: fn(arg, &done) tests it once and returns a status (non-zero ends the loop);
 * peers are the world ranks it waits for, which fn may change (a receive from any sender
 * waits for fewer as their messages arrive); the stall line names them as "op from rank R". */
typedef struct het_stall_poll {
    int (*fn)(void *arg, int *done);
    void *arg;
    const char *op;
    const int *peers;
    int n_peers;
} het_stall_poll;
/* Runs the poll loop of het_stall_wait on p until fn reports done (returns HET_OK) or fails
 * (returns its status). Never returns when --stall-abort ends the job. */
int het_stall_wait_poll(const het_stall_poll *p);
/* The world ranks of comm's members into out (size entries); 0 on failure (the stall
 * inspector not started). */
int het_stall_members(MPI_Comm comm, int size, int *out);
/* The arbiter's side of the stall inspector (stall_arb.c): the comm whose arbiter service
 * (c->arb) every wait serves and reports to, or NULL; whether there is one; a hash of a
 * communicator's members (0: unknown); a collective (the arbiter's key of its communicator, its
 * number) posted, waited for; one round of the service. Failures end the job. */
void het_stall_use_arbiter(het_comm *c);
int  het_stall_arb_on(void);
long long het_stall_arb_hash(MPI_Comm comm);
void het_stall_arb_enter(long long key, long long seq);
void het_stall_arb_wait(long long key, long long seq, MPI_Comm comm);
void het_stall_arb_serve(void);

/* Point-to-point state of a comm (p2p.c), made on first use; freed by het_comm_free: posted
 * receives are cancelled. */
struct het_p2p;
void het_p2p_free(het_comm *c);
/* Virtual clock: when this rank's own point-to-point messages to other nodes have left (its
 * way out is free again; 0 with none), so that a collective across nodes starts behind them. */
double het_p2p_out_free(const het_comm *c);

/* MPI_Testall ignoring the statuses. GCC 12 takes MPICH's MPI_STATUSES_IGNORE (a pointer
 * constant) for an array of size 0 that MPI_Testall would write (-Wstringop-overflow, an error
 * with HET_WERROR): a false positive, silenced here once for every caller. */
static inline int het_mpi_testall(int n, MPI_Request *reqs, int *flag) {
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
    return MPI_Testall(n, reqs, flag, MPI_STATUSES_IGNORE);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
}

/* MPI_Testsome ignoring the statuses: the same false positive (het_mpi_testall). */
static inline int het_mpi_testsome(int n, MPI_Request *reqs, int *outcount, int *indices) {
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
    return MPI_Testsome(n, reqs, outcount, indices, MPI_STATUSES_IGNORE);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
}

/* mpi_lib.c: under Open MPI, selects libnbc's ring for MPI_Iallreduce once per process
 * unless the user set coll_libnbc_iallreduce_algorithm (nothing under other MPIs or SMPI). */
void het_comm_prefer_nbc_ring(void);

#endif

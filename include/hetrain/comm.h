/* hetrain comm: the MPI layer. Topology (world, node-local and cross-node communicators, with
 * virtual nodes for one-machine runs), groups split from them, chunked blocking and
 * non-blocking float all-reduce, a two-level (node, then node leaders) all-reduce, an
 * all-reduce with a 16-bit wire type (bf16, fp16), a double all-reduce, bucketed gradient
 * all-reduce (flat or two-level) that overlaps backward, tagged point-to-point messages
 * (received in virtual-time order on the virtual clock), an emulated network delay
 * for cross-node traffic, and agreement on a status across ranks.
 *
 * Threads: MPI must be initialized with at least MPI_THREAD_FUNNELED (het_comm_create checks);
 * only the thread that initialized MPI may call comm/.
 *
 * comm/ sees float ranges, never layers. Plain MPI-3 (Open MPI or MPICH). Element counts, not
 * bytes, are passed to MPI; counts above the chunk size are split into several calls. */
#ifndef HETRAIN_COMM_H
#define HETRAIN_COMM_H

#include <mpi.h>

#include "hetrain/core.h"
#include "hetrain/emul.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- topology ---- */
typedef struct het_topo {
    MPI_Comm world;      /* dup of the world communicator */
    MPI_Comm node;       /* ranks of this (possibly virtual) node */
    MPI_Comm cross;      /* one rank per node: those with this rank's local rank */
    int rank, size;      /* in world */
    int node_id, n_nodes;
    int local_rank, local_size;
    int uniform;         /* 1 when every node has the same number of ranks */
} het_topo;

/* Builds the communicators from `world`. ranks_per_node > 0 emulates nodes of that many
 * consecutive ranks (block placement; the last node may be smaller); 0 uses the real nodes
 * (MPI_Comm_split_type SHARED), numbered by their lowest world rank. Collective over world. */
int  het_topo_init(het_topo *t, MPI_Comm world, int ranks_per_node);
/* Emulated nodes of any placement: the ranks passing the same node_color (>= 0) form one node
 * (interleaved placement: node_color = rank % 2). Nodes are numbered by their lowest world
 * rank, as het_topo_init. HET_EINVAL on a rank passing a negative color (after the collective
 * calls, so that nobody hangs). Collective over world. */
int  het_topo_init_nodes(het_topo *t, MPI_Comm world, int node_color);
void het_topo_free(het_topo *t);
/* One line such as "4 ranks on 2 nodes (2 ranks per node, emulated)". */
void het_topo_describe(const het_topo *t, char *buf, size_t n);

/* Which communicator an operation runs on: one of the topology's three, or a group made by
 * het_comm_split (ids 3 ... 3 + HET_COMM_MAX_GROUPS - 1, in the order this rank made
 * them). HET_COMM_NONE: this rank is in no group (an operation on it fails). */
typedef enum {
    HET_COMM_NONE = -1,
    HET_COMM_WORLD = 0,
    HET_COMM_NODE = 1,
    HET_COMM_CROSS = 2
} het_comm_scope;
#define HET_COMM_MAX_GROUPS 16

/* Time and traffic a rank spent in communication since the last reset. Every operation counts
 * once in the totals and once in either the cross-node or the node-local pair, by the span of
 * its scope (het_comm_span > 1: cross). */
typedef struct het_comm_stats {
    double comm_s;        /* inside MPI calls (blocking calls, waits and tests) */
    double delay_s;       /* extra time waited to honour the emulated network */
    /* virtual clock (het_clock_virtual): what the operations' ends added to this rank's
     * clock, split into waiting for the latest participant to post and the modeled transfer */
    double vwait_s;
    double vnet_s;
    uint64_t bytes;       /* payload bytes this rank contributed to collectives / sent (on the
                           * wire: 2 per element for bf16 / fp16) */
    uint64_t calls;       /* operations started */
    uint64_t bytes_cross; /* of `bytes`, on scopes spanning several nodes */
    uint64_t calls_cross; /* of `calls`, on scopes spanning several nodes */
    uint64_t bytes_node;  /* of `bytes`, on scopes within one node */
    uint64_t calls_node;  /* of `calls`, on scopes within one node */
} het_comm_stats;

typedef struct het_comm het_comm;

/* Returns HET_OK when MPI is initialized with at least thread level `required`
 * (MPI_THREAD_SINGLE ... MPI_THREAD_MULTIPLE, by MPI_Query_thread). Fails with HET_EMPI when
 * MPI is not initialized (or already finalized), or with a message naming both levels, e.g.
 * "MPI provides thread level SINGLE, hetrain needs FUNNELED: initialize MPI with
 * MPI_Init_thread". HET_EINVAL for an unknown level. */
int  het_comm_check_thread_level(int required);

/* The communication context of one rank: topology + emulated network + statistics + groups.
 * Borrows `topo` (must outlive the context). Fails with HET_EINVAL on a missing topology or a
 * bad network model, HET_EMPI when MPI runs below MPI_THREAD_FUNNELED (see
 * het_comm_check_thread_level), HET_ENOMEM. Local, except with the network model on: then
 * collective over the world (every rank's node, for the all-reduce model). */
int  het_comm_create(het_comm **out, const het_topo *topo, het_netem ne);
/* Frees the context, its groups (MPI_Comm_free), its reduction operators and scratch. Call it
 * before MPI_Finalize; NULL is a no-op. */
void het_comm_free(het_comm *c);
/* The lane (hetrain/emul.h) whose time the operations read and advance: the rank's main
 * loop's, owned by its caller (the trainer's het_strategy_ctx.lane), which must outlive c or
 * be replaced first; NULL: c's own, which it starts with (at time 0). A thread with a time of
 * its own passes its lane to the calls made for it (het_comm_isend_at, het_comm_irecv_at,
 * het_comm_lane_wait). */
void het_comm_set_lane(het_comm *c, het_lane *lane);
het_lane *het_comm_lane(het_comm *c);
const het_topo *het_comm_topo(const het_comm *c);
/* The node id of every world rank (topo's node_id of each, gathered once by het_comm_create):
 * world size entries, owned by c; NULL for a NULL comm. Local. */
const int *het_comm_world_nodes(const het_comm *c);
/* The number of ranks on the node that has fewest (1 for a NULL comm). Local. */
int het_comm_smallest_node(const het_comm *c);
/* 1 when the arbiter carries the point-to-point messages between nodes (--p2p-model arbiter). */
int het_comm_arbiter(const het_comm *c);
/* Work charged to no clock (het_step_aside: the lane's clock moves, then goes back to t): the
 * arbiter is told t for all of it (hold), then the lane's own time again (t < 0: release). */
void het_comm_arbiter_hold(het_comm *c, double t);
/* The time this rank tells the arbiter now: its lane's, or the hold's. */
double het_comm_arbiter_now(const het_comm *c);
/* The MPI communicator of a scope (a group's too); MPI_COMM_NULL for HET_COMM_NONE, an
 * unknown scope or a NULL comm. Owned by the topology or the comm: do not free it. */
MPI_Comm het_comm_mpi(const het_comm *c, het_comm_scope s);
/* Nodes spanned by a scope (1 for NODE; for a group, the distinct node ids of its members):
 * the emulated delay applies when it is > 1. 1 for an unknown scope or a NULL comm. */
int  het_comm_span(const het_comm *c, het_comm_scope s);
/* Number of ranks in scope s; 0 for HET_COMM_NONE; HET_EINVAL (negative) for an unknown scope
 * or a NULL comm. */
int  het_comm_scope_size(const het_comm *c, het_comm_scope s);
/* This rank's rank in scope s; HET_EINVAL (negative) for HET_COMM_NONE, an unknown scope or a
 * NULL comm. */
int  het_comm_scope_rank(const het_comm *c, het_comm_scope s);
/* Splits scope `parent` into groups, as MPI_Comm_split: the ranks passing the same color form
 * one group, ordered by key (ties by their rank in parent). Collective over parent. color < 0:
 * this rank joins no group and *out = HET_COMM_NONE. Otherwise *out is the new group's scope
 * id (3, 4, ... on this rank); the comm owns the group (freed by het_comm_free), and its span
 * (distinct nodes among its members, from an all-gather of the topology's node ids) sets its
 * emulated delay. Fails with HET_EINVAL (bad parent scope, or HET_COMM_MAX_GROUPS groups
 * already: this rank then joins no group, the others still get theirs, so nobody hangs),
 * HET_ENOMEM (likewise), HET_EMPI; *out is HET_COMM_NONE on failure. */
int  het_comm_split(het_comm *c, het_comm_scope parent, int color, int key,
                    het_comm_scope *out);
het_comm_stats het_comm_get_stats(const het_comm *c);
void het_comm_reset_stats(het_comm *c);
/* Elements per MPI call (default 1 << 24); for tests of the chunking. */
void het_comm_set_chunk(het_comm *c, size_t elements);

/* Blocking in-place sum all-reduce of n floats, chunked. With the emulated network on and a
 * scope spanning several nodes, returns no earlier than the last rank's start + the modeled
 * time (het_netem_ring_allreduce_s over the scope's ranks and their nodes). */
int het_comm_allreduce_sum(het_comm *c, het_comm_scope s, float *buf, size_t n);
/* Blocking in-place sum all-reduce of n doubles, chunked, with statistics (8 bytes per
 * element) and the emulated delay as het_comm_allreduce_sum. Every rank adds the ranks' values
 * in rank order (an all-gather, then a local sum), so the result is the same bits on every rank
 * and every run for a fixed number of ranks, whatever the chunk size or MPI's algorithm. Meant
 * for small vectors (sums of losses, counters): it moves P times the data of a ring. Fails with
 * HET_EINVAL (NULL comm or buffer, bad scope), HET_ENOMEM (scratch), HET_EMPI. */
int het_comm_allreduce_sum_f64(het_comm *c, het_comm_scope s, double *v, size_t n);
/* Blocking broadcast of n bytes from `root` (rank in the scope's communicator). */
int het_comm_bcast(het_comm *c, het_comm_scope s, void *buf, size_t bytes, int root);
/* Blocking in-place all-reduce of n ints (a few: flags, counts, ranks) with MIN, MAX or SUM,
 * charged and watched as the other collectives. */
typedef enum { HET_OP_SUM = 0, HET_OP_MIN = 1, HET_OP_MAX = 2 } het_comm_op;
int het_comm_allreduce_int(het_comm *c, het_comm_scope s, int *v, int n, het_comm_op op);

/* ---- bookkeeping (comm/aside.c) ----
 * Collectives that measure or record training rather than being part of it (an epoch's time
 * split, step logs, per-rank checkpoint sections): watched by the stall inspector, charged to
 * no clock. In place: v holds n ints or doubles; all-gather / gather: `bytes` per rank into
 * all (size x bytes; gather: at root only, elsewhere may be NULL). */
typedef enum { HET_T_INT = 0, HET_T_DOUBLE = 1 } het_comm_type;
int het_comm_allreduce_aside(het_comm *c, het_comm_scope s, void *v, int n, het_comm_type t,
                             het_comm_op op);
int het_comm_allgather_aside(het_comm *c, het_comm_scope s, const void *mine, void *all,
                             size_t bytes);
int het_comm_gather_aside(het_comm *c, het_comm_scope s, const void *mine, void *all,
                          size_t bytes, int root);
/* As het_comm_gather_aside with `bytes` of this rank's own: at root, rank q's land at
 * all + displs[q] (counts[q] bytes; counts, displs and all needed at root only). */
int het_comm_gatherv_aside(het_comm *c, het_comm_scope s, const void *mine, size_t bytes,
                           void *all, const int *counts, const int *displs, int root);
/* Every rank of scope s has reached it (a barrier), watched, charged to no clock. */
int het_comm_barrier_aside(het_comm *c, het_comm_scope s);
/* ---- link occupancy (comm/links.c): the network model's sanity counter ----
 * On the virtual clock every transfer across nodes notes when it occupies its node's link;
 * het_comm_links_epoch (collective over the world, charged to no clock; after
 * het_comm_links_begin at the epoch's start) reports, as shares of the epoch, how long this
 * rank's node link carried anything (busy) and how much load the model put on it beyond its
 * capacity (over: 0 on a link the model treats physically; a lower bound), per direction, and
 * the worst node link of the world. measured = 0 on the wall clock (nothing noted). */
typedef struct het_comm_links {
    int measured;
    double busy_out, busy_in, over_out, over_in; /* this rank's node link */
    double busy_max, over_max;                   /* the world's worst link, either way */
} het_comm_links;
void het_comm_links_begin(het_comm *c);
int  het_comm_links_epoch(het_comm *c, het_comm_links *out);
/* The spans noted so far, and forgetting those noted after a mark (work charged to no clock,
 * het_step_aside). */
size_t het_comm_link_mark(const het_comm *c);
void   het_comm_link_rewind(het_comm *c, size_t mark);
/* The virtual clock's queue of this rank's collectives across nodes (a collective starts its
 * transfer behind the earlier ones: comm.c), taken before work charged to no clock and put
 * back after it, with the clock (het_step_aside). */
typedef struct het_comm_queue {
    double free, stamp;
} het_comm_queue;
het_comm_queue het_comm_queue_get(const het_comm *c);
void           het_comm_queue_set(het_comm *c, het_comm_queue q);

/* hetrain calibrate --network: world ranks a and b send each size back and forth (MPI_Send /
 * MPI_Recv on the real network, no model; two rounds to warm up, then reps timed on the wall
 * clock); one_way[i] is half the median round trip of sizes[i] bytes, on every rank. The
 * other ranks only wait. Collective over the world. */
int het_comm_pingpong(het_comm *c, int a, int b, const size_t *sizes, int n, int reps,
                      double *one_way);
/* This rank's rank and the number of ranks on its machine (MPI_COMM_TYPE_SHARED; made on first
 * use, collective over the world then); 0 and 1 for a NULL comm. */
int het_comm_host(het_comm *c, int *rank, int *size);
/* A barrier of the machine's ranks that naps (1 ms, real) while it waits, so that ranks taking
 * turns leave the cores to the one working (after het_comm_host; none before). */
int het_comm_host_barrier(het_comm *c);

/* ---- two-level (hierarchical) all-reduce ----
 * Sums over the world in three stages: a reduce inside each node to its leader (local rank
 * 0), an all-reduce between the node leaders (one rank per node: the only stage that crosses
 * nodes), and a broadcast inside each node. Per node, the bytes over the network are those of
 * one all-reduce of the buffer between the nodes, whatever the number of ranks per node and
 * their placement; a flat all-reduce over all ranks sends up to P/N times that when ranks of
 * a node are interleaved with other nodes' (comm/hier.c explains the choice). Statistics: the
 * node stages count on every rank as node-local, the leaders' stage as cross-node on the
 * leaders only; the emulated network charges the leaders' stage alone (het_netem_allreduce_s
 * over the nodes). Every rank gets the same bits; against a flat all-reduce the sum is of the
 * same P floats in another order, so the two differ by at most 2 (P-1) 2^-24 sum_r |x_r| per
 * element. */
typedef enum { HET_ALLREDUCE_AUTO = 0, HET_ALLREDUCE_FLAT = 1, HET_ALLREDUCE_HIER = 2 }
    het_allreduce_algo;
/* "auto", "flat" or "hier" (static); "unknown" otherwise. */
const char *het_allreduce_algo_name(het_allreduce_algo a);
/* The algorithm a world all-reduce runs with `a`: AUTO is HIER when the topology has more than
 * one node (real or emulated) and FLAT otherwise; FLAT and HIER are themselves. FLAT for a
 * NULL comm or an unknown value. Local. */
het_allreduce_algo het_comm_allreduce_algo(const het_comm *c, het_allreduce_algo a);
/* Blocking in-place two-level sum all-reduce of n floats over HET_COMM_WORLD (chunked like the
 * flat one). The first call on a comm makes its communicators (groups of het_comm_split,
 * three of HET_COMM_MAX_GROUPS), so every rank of the world must make it. Fails with
 * HET_EINVAL (NULL comm or buffer), HET_ENOMEM, HET_EMPI. Collective over the world. */
int het_comm_allreduce_sum_hier(het_comm *c, float *buf, size_t n);

/* ---- wire types: what an all-reduce sends ---- */
typedef enum { HET_WIRE_FP32 = 0, HET_WIRE_FP16 = 1, HET_WIRE_BF16 = 2 } het_wire;

/* "fp32", "fp16" or "bf16" (static); "unknown" for any other value. */
const char *het_wire_name(het_wire w);
/* Parses "fp32", "fp16" or "bf16" into *out; HET_EINVAL with a message listing the three for
 * any other text (NULL included). */
int het_wire_parse(const char *text, het_wire *out);
/* Converts n floats to the wire type (round to nearest even; fp16 overflows to inf and has
 * subnormals; NaN stays NaN): dst holds n uint16_t (n floats for FP32). Cannot fail. */
void het_wire_pack(het_wire w, const float *src, void *dst, size_t n);
/* Converts n wire values back to float (exact). */
void het_wire_unpack(het_wire w, const void *src, float *dst, size_t n);
/* Scalar conversions used by pack / unpack: float -> bf16 / fp16 (round to nearest even) and
 * back (exact). */
uint16_t het_wire_bf16_from_float(float f);
float    het_wire_bf16_to_float(uint16_t h);
uint16_t het_wire_fp16_from_float(float f);
float    het_wire_fp16_to_float(uint16_t h);

/* Blocking in-place sum all-reduce of n floats sent as wire type w. FP32 is
 * het_comm_allreduce_sum. FP16 / BF16: each chunk (het_comm_set_chunk) is packed into
 * comm-owned scratch (grown when needed, then reused: no allocation per call), reduced by a
 * commutative user MPI_Op that adds two wire values in float and rounds back to the wire type,
 * and unpacked into buf. Every rank gets the same bits when MPI_Allreduce gives every rank the
 * same result, as Open MPI does (tested). Error against the exact sum over P ranks: each
 * operand and each partial sum is rounded once, so |err| <= P u sum_r |x_r| (+ u^2 terms;
 * + (2P-1) 2^-25 absolute for fp16 subnormals), u = 2^-8 (bf16) or 2^-11 (fp16).
 * Statistics and the emulated delay count 2 bytes per element. Fails with HET_EINVAL (as
 * het_comm_allreduce_sum, or an unknown wire type), HET_ENOMEM (scratch), HET_EMPI. */
int het_comm_allreduce_sum_wire(het_comm *c, het_comm_scope s, float *buf, size_t n,
                                het_wire w);

/* Non-blocking in-place sum all-reduce of n floats (chunked into several requests). Up to
 * HET_REQ_INLINE chunks the requests live inside the het_req (no allocation); more are
 * allocated. A het_req may be copied or moved while in flight (then test or wait one copy
 * only); het_comm_wait, or het_comm_test reporting MPI completion, frees what it holds. */
#define HET_REQ_INLINE 4
typedef struct het_req {
    MPI_Request *reqs;  /* owned heap array when n_reqs > HET_REQ_INLINE, else NULL */
    int n_reqs;
    double t_start;     /* when it was started (het_now: the time in MPI calls) */
    double t_clock;     /* when it was started, on the comm's lane (het_lane_now) */
    double t_model;     /* modeled network time (0 = none) */
    double link_wire, link_share; /* its occupancy of this rank's node link (comm/links.c) */
    int mpi_done;       /* all MPI requests completed */
    MPI_Comm comm;      /* where they run, and their collective's number (het_stall_post) */
    long long seq;
    int t_slot;         /* emulated network: the comm's slot receiving the last rank's start */
    MPI_Request t_req;  /* its all-reduce (MAX), MPI_REQUEST_NULL when none is in flight */
    long long t_seq;    /* and that all-reduce's collective number */
    MPI_Request inline_reqs[HET_REQ_INLINE]; /* the requests when n_reqs <= HET_REQ_INLINE */
    float *send;        /* the SMPI build: a copy of the buffer to send from (SMPI 3.32's
                           in-place MPI_Iallreduce corrupts 16384 floats and more); else NULL */
} het_req;
/* Fails as het_comm_allreduce_sum, or HET_ENOMEM for more than HET_REQ_INLINE chunks; after
 * a failure r holds what was posted (het_comm_wait completes it). */
int het_comm_iallreduce_sum(het_comm *c, het_comm_scope s, float *buf, size_t n, het_req *r);
/* Progresses r; *done = 1 once MPI completed AND the modeled time has passed since the last
 * rank's start (on the virtual clock: once this rank's V has reached that end). */
int het_comm_test(het_comm *c, het_req *r, int *done);
/* Blocks until r is done (as het_comm_test), then frees its requests; on the virtual clock
 * sets V = max(V, the end) instead of sleeping. */
int het_comm_wait(het_comm *c, het_req *r);

/* ---- bucketed gradient all-reduce ----
 * The gradient buffer [0, n) is cut into ranges (one per layer, in buffer order). Buckets group
 * consecutive ranges from the END of the buffer (backward produces the last layers first) up to
 * `bucket_bytes` each. het_buckets_ready() marks a range final; when all ranges of a bucket are
 * final its non-blocking all-reduce starts, and every call also tests the pending ones (MPI
 * only progresses inside MPI calls). het_buckets_wait() waits for all, so that the optimizer
 * sees the summed gradients. bucket_bytes = 0 means one bucket (flat, started by the last
 * ready range). An optional `extra` float array is appended to the last bucket's reduction
 * (e.g. per-rank timings piggybacked on the gradients). */
typedef struct het_buckets het_buckets;
int  het_buckets_create(het_buckets **out, het_comm *c, het_comm_scope s, float *grads, size_t n,
                        const size_t *range_offsets, int n_ranges, size_t bucket_bytes,
                        float *extra, size_t n_extra);
void het_buckets_free(het_buckets *b);
int  het_buckets_n(const het_buckets *b);  /* number of buckets */
/* The bucket holding the non-empty range that starts at `offset`; -1 when no non-empty range
 * starts there (an unknown offset, or an empty range at the end of the buffer) or b is NULL.
 * An empty range shares its offset with the next non-empty range: callers that know a range
 * is empty (count 0) should not ask. */
int  het_buckets_bucket_of(const het_buckets *b, size_t offset);
/* Element span [*lo, *hi) of bucket k (either pointer may be NULL). HET_EINVAL when k is
 * outside [0, het_buckets_n(b)) or b is NULL. */
int  het_buckets_span(const het_buckets *b, int k, size_t *lo, size_t *hi);
/* Marks [offset, offset+count) final (must be one whole range). */
int  het_buckets_ready(het_buckets *b, size_t offset, size_t count);
/* Waits for every bucket; afterwards the buffer holds the sum over ranks; resets for the next
 * step. Ranges never marked ready are started here. */
int  het_buckets_wait(het_buckets *b);
/* The algorithm of the buckets' reductions (default FLAT): HIER (or AUTO resolving to it, see
 * het_comm_allreduce_algo) reduces each bucket in two levels (het_comm_allreduce_sum_hier),
 * its stages started as non-blocking operations and advanced by later ready() calls, or
 * completed by wait(). The extra floats stay flat. HIER needs the scope HET_COMM_WORLD (AUTO on
 * another scope is FLAT). Call between steps (no bucket in flight). Fails with HET_EINVAL
 * (NULL, in flight, HIER on another scope), or as het_comm_allreduce_sum_hier's first call.
 * Collective over the world when the result is HIER. */
int  het_buckets_set_algo(het_buckets *b, het_allreduce_algo a);
/* The algorithm the buckets run (FLAT or HIER); FLAT for NULL. */
het_allreduce_algo het_buckets_algo(const het_buckets *b);
/* The wire type of the buckets' reductions (comm/buckets.c), FP32 by default: BF16 / FP16 sum
 * the elements [0, n_wire) of each bucket with het_comm_allreduce_sum_wire and the rest with
 * het_comm_allreduce_sum (flat and blocking, when the bucket starts; the algorithm is then
 * unused); the extra floats stay fp32. HET_EINVAL for an unknown type or with buckets in
 * flight. Local. */
int het_buckets_set_wire(het_buckets *b, het_wire w, size_t n_wire);
het_wire het_buckets_wire(const het_buckets *b);

/* ---- point-to-point messages (p2p.c) ----
 * Tagged messages between two ranks of a scope (ranks as in the scope's communicator, the
 * world's or a group's), for the strategies that do not share a collective step (parameter
 * servers, pipelines). Every call is non-blocking: het_comm_isend / het_comm_irecv start a
 * message in a het_msg the caller owns; het_comm_msg_test, _wait, _waitany, _waitall complete
 * it. A het_msg must stay where it is from its start until it is done (MPI and the queue of
 * receives hold its address); a zeroed one is inactive (waits return at once).
 *
 * Tags: one per message kind, 0 <= tag < HET_P2P_TAGS. A receive matches by scope, tag and
 * sender; messages of one sender, scope and tag arrive in the order they were sent. On the
 * wire a message is a small header (het_msg_hdr) with tag HET_P2P_MPI_TAG_BASE + 2 tag, then
 * its payload in messages of at most het_comm_set_chunk's floats' bytes (never above INT_MAX
 * bytes) with tag HET_P2P_MPI_TAG_BASE + 2 tag + 1: other code sending on the comm's
 * communicators must keep off MPI tags HET_P2P_MPI_TAG_BASE .. + 2 HET_P2P_TAGS - 1.
 *
 * The emulated network charges each message at its sender: between ranks of different
 * (emulated) nodes het_netem_p2p_s (lat + bytes / bw); between ranks of one node nothing on
 * the wall clock (the real shared-memory time is that cost) and the node link on the virtual
 * clock (node_lat + bytes / node_bw). A message never arrives before one sent earlier to the
 * same rank (an ordered link). A rank's messages to other nodes leave one after another (its
 * way out busy for each one's bytes / bw; sends with a stamp, het_comm_isend_at, excepted),
 * and on the virtual clock the messages a receive from any sender takes queue on the
 * receiver's way in from other nodes; otherwise links are not shared out between messages in
 * flight, nor collectives (issue #36). On the virtual clock a message of at least the model's
 * rndv_bytes waits for its receive (MPI's rendezvous): its bytes move from the later of its
 * leaving and the receive's posting, and a receive from any sender takes such messages in the
 * order their envelopes come in (as MPI matches them), not by arrival. The header carries the sender's clock at the send
 * (stamp) and the arrival (deliver = stamp + cost, or later behind the queue). Wall clock: a receive is not done before
 * het_now() >= deliver (CLOCK_MONOTONIC: one clock for the ranks of one machine, as the
 * collectives' emulation assumes); its wait sleeps the rest (delay_s); with the model off
 * nothing is compared across ranks. Virtual clock: a receive's wait sets V = max(V,
 * deliver) (vwait_s up to the stamp, vnet_s the rest) and a test is not done before V >=
 * deliver. A send is done when MPI is done with its buffer; it never moves the sender's
 * clock. Statistics count each message once at its sender (calls; payload bytes; cross-node
 * or node-local by the receiver's node; done messages as calls of 0 bytes); time inside MPI
 * calls and waits is comm_s on both sides.
 *
 * Receives from any sender (HET_ANY_SOURCE) on the virtual clock follow virtual time, not
 * the order messages happen to reach MPI, so that a run is the same bit for bit whatever
 * the host's load: the layer keeps a receive posted for every sender of the scope's set
 * (het_comm_p2p_senders; default every other rank of the scope) and gives the receive the
 * message with the smallest (deliver, sender rank) among those that have arrived, once every
 * other sender of the set has a message there too (necessarily not earlier: each sender's
 * messages arrive in order) or has sent a done message (het_comm_p2p_done); until then the
 * receive waits, in the stall inspector's poll loop, naming the senders it waits for. When
 * every sender of the set has sent a done message, the receive reports that instead (done 1,
 * src HET_ANY_SOURCE, the latest done message's times) and a new round starts: their later
 * messages are received again. On the wall clock a receive from any sender takes the
 * earliest-arriving of the messages already there. Receives of one scope and tag match in
 * the order they were posted: one waiting for a sender's message holds back those posted
 * after it. Conservative, as parallel discrete-event simulation without lookahead: a sender
 * of the set that neither sends nor says done stalls the receiver on the virtual clock, and
 * het_comm_msg_test / het_comm_probe answer from what has reached MPI (wall time), so a
 * strategy that branches on their "not yet" is not reproducible on the virtual clock: block
 * in a wait, a waitany or a receive from any sender instead. */
#define HET_P2P_TAGS 32
#define HET_P2P_MPI_TAG_BASE 30000
#define HET_ANY_SOURCE (-1)
/* Message kinds: the tags hetrain's strategies use. */
typedef enum {
    HET_TAG_TEST = 0,   /* tests and examples */
    HET_TAG_GRADS = 1,  /* gradients, or a node's aggregate of them, to a parameter server */
    HET_TAG_PARAMS = 2, /* parameters from a parameter server */
    HET_TAG_COUNT = 3,  /* iteration numbers and counters (inhad's IN messages) */
    HET_TAG_CTRL = 4,   /* control: stop, the end of an epoch */
    HET_TAG_USER = 8    /* the first kind free for a strategy's own, up to HET_P2P_TAGS - 1 */
} het_tag;

/* What travels ahead of a payload (private to p2p.c; both ends run the same build). */
typedef struct het_msg_hdr {
    double stamp;     /* the sender's time at the send (its lane's, het_lane_now) */
    double deliver;   /* when it arrives, on the same clock */
    double leave;     /* when its bytes leave (the stamp, or later behind the sender's queue) */
    uint64_t bytes;   /* payload bytes */
    uint64_t chunk;   /* payload bytes per MPI message (the last may be shorter) */
    int32_t done;     /* 1: a done message (no payload) */
    int32_t arb_k;    /* its index on its stream at the arbiter (--p2p-model arbiter: its
                       * arrival comes from there), or -1 */
} het_msg_hdr;

#define HET_MSG_INLINE 4
typedef struct het_msg {
    /* the outcome: a send's once started, a receive's once done */
    int src;          /* the sender's rank in the scope; HET_ANY_SOURCE when a receive from
                       * any sender reports that every sender is done */
    int dest;         /* the receiver's rank in the scope */
    int tag;
    size_t bytes;     /* payload bytes */
    int done;         /* 1: a done message (no payload) */
    double stamp;     /* sent, on the chosen clock */
    double deliver;   /* arrives, on the chosen clock */
    /* private to p2p.c */
    int kind, state, want, peer_world;
    double posted;           /* a receive's posting time on its lane's clock (< 0: none said) */
    het_comm_scope scope;
    void *buf;
    size_t cap;
    unsigned char *scratch;  /* a payload larger than cap lands here (then an error) */
    void *copy;              /* arbiter: a send's payload, copied (its wait returns at once) */
    int arb_next;            /* arbiter: a receive's message index on its stream + 1 while
                              * its arrival is not known yet, else 0 */
    int arb_r;               /* arbiter, rendezvous: a receive's number on its stream, or -1 */
    het_msg_hdr hdr;         /* a send's header */
    MPI_Request *reqs;       /* heap when n_reqs > HET_MSG_INLINE, else inline_reqs */
    int n_reqs;
    MPI_Request inline_reqs[HET_MSG_INLINE];
    struct het_msg *next;    /* the queue of receives waiting on one scope and tag */
} het_msg;

/* Starts sending `bytes` bytes of buf to rank dest of scope s with tag `tag` (buf must not
 * change until the send is done). Fails with HET_EINVAL (NULL comm or message, bad scope,
 * tag, or dest, dest this rank, NULL buf with bytes > 0), HET_ENOMEM (more than
 * HET_MSG_INLINE - 1 payload messages: their requests), HET_EMPI; m is inactive then, except
 * after an MPI failure mid-way (wait for what was posted). */
int het_comm_isend(het_comm *c, het_comm_scope s, int dest, int tag, const void *buf,
                   size_t bytes, het_msg *m);
/* As het_comm_isend, with the send's time given (virtual clock; on the wall clock it is
 * het_comm_isend): the time of another lane than the comm's (a thread of its own beside the
 * rank's main loop: qfb's forward and backward threads, inhad's aggregator), for which the
 * main thread makes the call, since MPI is called by it alone (MPI_THREAD_FUNNELED): the
 * message leaves at that lane's time when it was made (a qfb piece's end, the aggregator's
 * time after a pull). Such messages keep their order per destination and tag in a queue of
 * their own. HET_EINVAL for stamp < 0. */
int het_comm_isend_at(het_comm *c, het_comm_scope s, int dest, int tag, const void *buf,
                      size_t bytes, double stamp, het_msg *m);
/* Starts a done message to dest: this rank sends dest nothing more of this tag and scope
 * until dest's receive from any sender has reported that every sender is done (one round);
 * a receive from this rank alone gets it as done 1, 0 bytes. Completed like a send. Fails as
 * het_comm_isend. */
int het_comm_p2p_done(het_comm *c, het_comm_scope s, int dest, int tag, het_msg *m);
/* Starts receiving a message of tag `tag` from rank src of scope s, or from any sender of
 * the scope's set with HET_ANY_SOURCE, into buf (cap bytes). When done, m->src, bytes, done,
 * stamp and deliver say what came. A message larger than cap is received into scratch and
 * discarded: its wait returns HET_EINVAL naming both sizes. Fails with HET_EINVAL (NULL
 * comm or message, bad scope, tag or src, src this rank, NULL buf with cap > 0), HET_ENOMEM,
 * HET_EMPI; m is inactive then. */
int het_comm_irecv(het_comm *c, het_comm_scope s, int src, int tag, void *buf, size_t cap,
                   het_msg *m);
/* As het_comm_irecv, for another lane than the comm's (het_comm_isend_at's counterpart): the
 * receive counts as posted at `posted`, that lane's time, on the virtual clock (a payload that
 * waits for its receive, het_netem.rndv_bytes, moves from then); posted < 0: the payload
 * moves when it is sent, whatever its size. */
int het_comm_irecv_at(het_comm *c, het_comm_scope s, int src, int tag, void *buf, size_t cap,
                      double posted, het_msg *m);
/* The senders a receive from any sender waits for on scope s and tag `tag` (n ranks of the
 * scope, this rank excluded; NULL and 0: every other rank, the default). Call it with no
 * receive pending on (s, tag). HET_EINVAL for a bad rank, scope or tag, or receives pending. */
int het_comm_p2p_senders(het_comm *c, het_comm_scope s, int tag, const int *ranks, int n);
/* Progresses m; *done = 1 once it is done (see above: a receive matched, its payload in, and
 * the clock at its arrival; a send once MPI is done with it), and then m is complete as
 * after a wait (it returns a receive's error, such as a message too large). Never moves the
 * clock nor sleeps. */
int het_comm_msg_test(het_comm *c, het_msg *m, int *done);
/* Blocks until m is done, in the stall inspector's poll loop ("recv from rank 2" in a stall
 * line); a receive then sleeps until its arrival (wall clock) or moves V there (virtual). A
 * no-op for an inactive or completed m. Returns a receive's error, or HET_EMPI. */
int het_comm_msg_wait(het_comm *c, het_msg *m);
/* Waits for one of msgs[0, n) (inactive ones skipped): on the wall clock the first to have
 * arrived (the earliest deliver among those MPI completed, then index); on the virtual clock
 * the earliest in virtual time, a receive at its deliver, a send at its stamp, ties by index,
 * once every active receive among them has been matched (so the choice does not depend on
 * wall time). Completes it as het_comm_msg_wait and sets *index; -1 when none is active. */
int het_comm_msg_waitany(het_comm *c, int n, het_msg *msgs, int *index);
/* As het_comm_msg_wait, but the comm's lane neither moves nor sleeps: m->deliver says when
 * the message arrives, and the caller moves the lane it waits on (another lane's thread, for
 * which the main thread makes the call; information the rank would hold locally on a real
 * cluster). */
int het_comm_msg_wait_untimed(het_comm *c, het_msg *m);
/* The same for a receive that may give up at `limit` on the virtual clock (the caller has
 * something to do then): under --p2p-model arbiter, *arrived = 0 once nothing m may be can
 * end by then (m stays posted: wait for it again); otherwise, and with the local rules, as
 * het_comm_msg_wait_untimed, *arrived = 1 (compare m->deliver with the limit). */
int het_comm_msg_wait_untimed_by(het_comm *c, het_msg *m, double limit, int *arrived);
/* As het_comm_msg_test, untimed in the same way: *done = 1 once MPI has delivered m, whatever
 * the clock reads (m->deliver says when it arrives, for the caller's own clock). */
int het_comm_msg_test_untimed(het_comm *c, het_msg *m, int *done);
/* Moves the comm's lane to t if it is behind (virtual: V = t, booked as waiting; wall: sleeps
 * until het_now() = t, booked as delay). */
void het_comm_clock_wait(het_comm *c, double t);
/* Waits for every one of msgs[0, n) in index order; returns the first failure's status. */
int het_comm_msg_waitall(het_comm *c, int n, het_msg *msgs);
/* Whether a receive of (s, src or HET_ANY_SOURCE, tag) posted now would be matched without
 * waiting for another message (by the same rule: on the virtual clock every sender of the
 * set heard from): *flag 0 no (also while receives are pending on (s, tag): they come first),
 * 1 a message from *src_out of *bytes bytes, 2 a done message (from *src_out, or
 * HET_ANY_SOURCE: every sender is done). src_out and bytes may be NULL. Takes nothing. */
int het_comm_probe(het_comm *c, het_comm_scope s, int src, int tag, int *flag, int *src_out,
                   size_t *bytes);
/* Messages (done messages too) that have reached this rank and that no receive has taken,
 * counting one for each scope and tag with messages still inside MPI: 0 at a drain point
 * (the end of an epoch, before het_comm_free). Negative (HET_EMPI) when MPI fails. */
int het_comm_p2p_pending(het_comm *c);

/* ---- the stall inspector and the poll loop (stall.c) ----
 * Every collective of comm/ is posted non-blocking and completed by het_stall_wait: a loop of
 * MPI_Testall on the calling thread that spins for 1 ms, then yields the core, then naps
 * (at most 1 ms) between tests. With the inspector started, a rank whose wait passes
 * min(1 s, warn / 2) tells rank 0 where it waits through a side channel (a dup of world);
 * rank 0, waiting more than warn_s, prints one line on stderr naming the ranks of its
 * collective that have not arrived, those waiting in it and those waiting elsewhere, e.g.
 *   hetrain: stall: rank 0 has waited 60 s in allreduce #1234 (gradients, epoch 2 step 17);
 *   not arrived: rank 2; waiting: ranks 1, 3
 * and, following the ranks elsewhere to the collectives they wait in (on any communicator),
 * the ranks missing there ("not arrived: rank 3 (where rank 1 waits)"); again every warn_s; past abort_s (> 0) it prints the line with "; aborting" and calls
 * MPI_Abort (exit status 1); other ranks do the same 2 s later (rank 0 may be the frozen
 * one). Process-wide state, like MPI's: call from the MPI thread only. */
/* Starts the inspector on `world` (collective: MPI_Comm_dup). warn_s = abort_s = 0, or one
 * rank: off (nothing is dup'ed). HET_EINVAL for negative values, HET_ENOMEM, HET_EMPI. */
int  het_stall_start(MPI_Comm world, double warn_s, double abort_s);
/* Starts it silent (warn_s = abort_s = 0 and more than one rank): no reports and no lines,
 * but every collective still posted non-blocking and polled, so world rank 0 can serve the
 * arbiter inside them (--p2p-model arbiter with --stall-warn 0); the collectives' models stay
 * those of the blocking calls that --stall-warn 0 means (het_stall_blocking_model). */
int  het_stall_start_silent(MPI_Comm world);
/* The start a run's options ask for: silent with the arbiter (arbiter != 0) and both 0. */
int  het_stall_start_for(MPI_Comm world, double warn_s, double abort_s, int arbiter);
/* Stops it and frees the side channel; a no-op when it is off. Call before MPI_Finalize. */
void het_stall_stop(void);
/* 1 while the inspector runs. When it is off, the float all-reduces (plain and wire type)
 * call the blocking MPI_Allreduce, a few microseconds faster for small messages (stall.c). */
int  het_stall_on(void);
/* 1 when the collectives are charged as the blocking calls' algorithms (the library's rules for
 * MPI_Allreduce and MPI_Bcast): the inspector off, or started silent. */
int  het_stall_blocking_model(void);
/* What the process is doing, for the stall line: a static label ("gradients"), the 1-based
 * epoch (0: none) and the step. Three stores: cheap enough for every step. */
void het_stall_where(const char *what, int epoch, long long step);
/* Numbers a collective started on comm: 1, 2, ... per communicator, the same on every member
 * when they start their collectives in the same order (0 when more than 64 communicators). */
long long het_stall_post(MPI_Comm comm);
/* Completes the n requests of collective #seq on comm (op: "allreduce", ...) in the poll loop;
 * returns MPI's error code. Never returns when --stall-abort ends the job. */
int  het_stall_wait(MPI_Comm comm, long long seq, const char *op, int n, MPI_Request *reqs);
/* het_stall_post + het_stall_wait of one request that was just posted. */
int  het_stall_collective(MPI_Comm comm, const char *op, MPI_Request *req);

/* ---- agreement ----
 * Collective over world: every rank passes its status. If all are HET_OK, returns HET_OK.
 * Otherwise every rank returns the status of the lowest failing rank, and its error message
 * (het_error_msg) is copied to every rank, so that rank 0 can print it once. */
int het_comm_agree(MPI_Comm world, int status);

/* ---- agreement on values ----
 * Where ranks must hold the same inputs (configuration, data, checkpoint), each passes n
 * values (hashes or numbers, n <= HET_COMPARE_MAX) and learns whether every rank's equal rank
 * 0's. Collective over world, the same *d on every rank: d->rank is -1 when all agree;
 * otherwise the lowest rank that differs, d->index the first of its values that differs,
 * d->mine and d->theirs rank 0's and that rank's value there, d->n_ranks how many ranks
 * differ. Costs one all-reduce of 2n values when all agree (a few more calls otherwise).
 * Returns HET_OK, or HET_EMPI / HET_EINVAL (n out of range: the same on every rank). */
#define HET_COMPARE_MAX 128
typedef struct het_comm_diff {
    int rank, index, n_ranks;
    uint64_t mine, theirs;
} het_comm_diff;
int het_comm_compare(MPI_Comm world, const uint64_t *values, int n, het_comm_diff *d);

#ifdef __cplusplus
}
#endif
#endif

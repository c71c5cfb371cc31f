/* The communication context: chunked blocking and non-blocking float all-reduce, broadcast, the emulated network delay and per-rank
 * statistics. Scopes and groups are in group.c, the wire conversions in wire.c. The "blocking"
 * calls post non-blocking collectives and complete them in the stall inspector's poll loop
 * (stall.c), except the all-reduces and broadcasts while the inspector is off (blocking MPI
 * calls).
 *
 * DESIGN. Every operation is in place (MPI_IN_PLACE), MPI_FLOAT, MPI_SUM, and split into calls
 * of at most `chunk` elements (default 1 << 24, never above INT_MAX), so that counts passed to
 * MPI are ints and large buffers never overflow them. A non-blocking all-reduce posts one
 * MPI_Iallreduce per chunk; all ranks post the same chunks in the same order.
 *
 * Emulated network: when the model is on and the scope spans several nodes, an operation
 * completes no earlier than the LAST rank's start + the modeled time: a synchronous collective
 * cannot end before every rank joined, whichever rank is late (with each rank's own start, an
 * early rank finished before a late one had joined: a straggler moving between ranks was
 * charged up to 18 % too little). The ranks exchange their start times in an all-reduce (MAX)
 * posted before the operation's own calls: a blocking call completes it after them and sleeps
 * until the end; a non-blocking one keeps it in its request (the start lands in a slot of the
 * comm, as a het_req may be copied while in flight), het_comm_test reports done once both
 * completed and the end has passed, het_comm_wait completes both and sleeps the rest. So every
 * rank books the modeled time as `delay_s` (the time slept), whatever the arrival order, and
 * waiting for a late rank as `comm_s` (time inside MPI calls). Start times compare across
 * processes because het_now is CLOCK_MONOTONIC: the emulation is for the ranks of one machine.
 * The real (shared-memory) MPI time overlaps the modeled time rather than adding to it.
 *
 * Statistics: each operation counts once, when it is started (count_op), in the totals and in
 * the cross-node or node-local pair chosen by the span of its scope. The wire-type and double
 * all-reduces are in typed.c. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "comm/arb_svc.h"
#include "comm/internal.h"
#include "emul/emul.h"

#define HET_COMM_DEFAULT_CHUNK ((size_t)1 << 24)

int het_comm_mpi_error(int err, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS) len = 0;
    if (len < 0 || len >= MPI_MAX_ERROR_STRING) len = 0;
    msg[len] = '\0';
    return het_error_set(HET_EMPI, "%s failed: %s", what, len ? msg : "unknown MPI error");
}

/* Virtual clock: an operation whose latest participant posted at `last` ends at last + model;
 * this rank's clock moves there if it is behind, the move booked as waiting (up to `last`) and
 * transfer (the rest). */
static void virtual_end(het_comm *c, double last, double model, double wire, double share) {
    double v = het_lane_now(c->lane), end = last + model;
    het_comm_link_note(c, c->topo->node_id, c->topo->node_id, end - wire, end, share);
    if (!(end > v)) return;
    double w = last > v ? last - v : 0.0;
    c->st.vwait_s += w;
    c->st.vnet_s += (end - v) - w;
    het_lane_advance_to(c->lane, end);
}

/* Whether an operation exchanges its participants' starts: always on the virtual clock (a
 * rank's clock must not pass a late rank's), on the wall clock when the model charges time. */
static int exchanges_starts(double model) { return het_clock_virtual() || model > 0.0; }

/* Virtual clock: a collective across nodes whose bytes take `wire` on the busiest link starts
 * its transfer no earlier than t and behind this rank's earlier collectives across nodes, each
 * of which holds the link for its wire time from its start; returns that start and notes this
 * one. Collectives in flight together (gradient buckets) so share the link in turn rather than
 * each moving at its whole bandwidth: the last ends when all their bytes have moved, as when
 * they share it fairly (SimGrid's flows). Every participant applies it to its own start before
 * the starts' MAX exchange, so the exchanged start is behind every participant's earlier
 * collectives on that communicator (exact for back-to-back collectives of one communicator:
 * the MAX of the local starts is the previous one's start). A clock started over (an earlier
 * t than the last noted) forgets the earlier collectives; work charged to no clock puts the
 * queue back as it found it (het_comm_queue_get / _set, het_step_aside). */
static double coll_behind(het_comm *c, double t, double wire) {
    if (!(wire > 0.0) || !het_clock_virtual()) return t;
    het_comm_queue *q = &c->coll;
    if (t < q->stamp) q->free = 0.0;
    q->stamp = t;
    if (q->free > t) t = q->free;
    q->free = t + wire;
    return t;
}

het_comm_queue het_comm_queue_get(const het_comm *c) {
    return c ? c->coll : (het_comm_queue){0.0, 0.0};
}

void het_comm_queue_set(het_comm *c, het_comm_queue q) {
    if (c) c->coll = q;
}

/* Posts the exchange of this rank's start (MAX over comm, on the chosen clock) when needed. */
int het_arrival_post(het_comm *c, het_comm_scope s, size_t bytes, int kind, MPI_Comm comm,
                        double model, het_arrival *a) {
    het_comm_link_model(c, s, bytes, kind, &a->wire, &a->share);
    a->t = het_lane_now(c->lane);
    if (a->wire > 0.0 && het_p2p_out_free(c) > a->t) a->t = het_p2p_out_free(c); /* behind
                                                         * this rank's messages on the link */
    a->t = coll_behind(c, a->t, a->wire); /* and its earlier collectives */
    a->req = MPI_REQUEST_NULL;
    if (!exchanges_starts(model)) return HET_OK;
    int err = MPI_Iallreduce(MPI_IN_PLACE, &a->t, 1, MPI_DOUBLE, MPI_MAX, comm, &a->req);
    return err == MPI_SUCCESS ? HET_OK : het_comm_mpi_error(err, "MPI_Iallreduce(start times)");
}

/* Completes the exchange (time in MPI: comm_s) and ends the operation at the last start +
 * model: on the wall clock by sleeping (the time slept: delay_s), on the virtual clock by
 * moving the clock (vwait_s, vnet_s). */
int het_arrival_end(het_comm *c, MPI_Comm comm, double model, het_arrival *a) {
    if (!exchanges_starts(model)) return HET_OK;
    if (a->req != MPI_REQUEST_NULL) {
        double t1 = het_now();
        int err = het_stall_collective(comm, "start times", &a->req);
        c->st.comm_s += het_now() - t1;
        if (err != MPI_SUCCESS) return het_comm_mpi_error(err, "MPI_Iallreduce(start times)");
    }
    if (het_clock_virtual()) virtual_end(c, a->t, model, a->wire, a->share);
    else c->st.delay_s += het_sleep_until(a->t + model);
    return HET_OK;
}


/* Every rank's node (an all-gather over the world, kept: strategies place their roles by it),
 * and the costs of the world's all-reduce from them. */
static int gather_world_nodes(het_comm *c) {
    int p = c->topo->size;
    if (!(c->world_node = malloc((size_t)(p > 0 ? p : 1) * sizeof *c->world_node)))
        return het_error_set(HET_ENOMEM, "comm: out of memory for %d node ids", p);
    int err = MPI_Allgather(&c->topo->node_id, 1, MPI_INT, c->world_node, 1, MPI_INT,
                            c->topo->world);
    if (err != MPI_SUCCESS) return het_comm_mpi_error(err, "comm: MPI_Allgather(nodes)");
    het_comm_costs(c->world_cost, c->world_local, c->world_node, p);
    return HET_OK;
}

const int *het_comm_world_nodes(const het_comm *c) { return c ? c->world_node : NULL; }

int het_comm_smallest_node(const het_comm *c) {
    if (!c) return 1;
    int p = c->topo->size, least = p;
    for (int k = 0; k < c->topo->n_nodes; k++) {
        int n = 0;
        for (int r = 0; r < p; r++) n += c->world_node[r] == k;
        if (n > 0 && n < least) least = n;
    }
    return least > 0 ? least : 1;
}

int het_comm_arbiter(const het_comm *c) { return c && c->arb; }

void het_comm_arbiter_hold(het_comm *c, double t) {
    if (c) c->arb_hold = t;
}

double het_comm_arbiter_now(const het_comm *c) {
    double v = het_lane_now(c->lane);
    return c->arb_hold >= 0.0 && c->arb_hold < v ? c->arb_hold : v;
}

void het_comm_set_lane(het_comm *c, het_lane *lane) {
    if (c) c->lane = lane ? lane : &c->own_lane;
}

het_lane *het_comm_lane(het_comm *c) { return c ? c->lane : NULL; }

/* The arbiter's flows in the link counter (rank 0, arb_svc.c). */
static void note_span(void *arg, int out, int in, double t0, double t1, double load) {
    het_comm_link_note(arg, out, in, t0, t1, load);
}

int het_comm_create(het_comm **out, const het_topo *topo, het_netem ne) {
    if (!out) return het_error_set(HET_EINVAL, "comm: NULL output");
    *out = NULL;
    if (!topo || topo->world == MPI_COMM_NULL)
        return het_error_set(HET_EINVAL, "comm: no topology (call het_topo_init first)");
    int rc = het_comm_check_thread_level(MPI_THREAD_FUNNELED);
    if (rc != HET_OK) return rc;
    if (!(ne.lat_s >= 0.0) || !(ne.bw_bytes_per_s >= 0.0) || ne.lat_s > 1e6 ||
        ne.bw_bytes_per_s > 1e30)
        return het_error_set(HET_EINVAL, "emulated network: latency %g s and bandwidth %g B/s "
                             "must be finite and >= 0", ne.lat_s, ne.bw_bytes_per_s);
    het_comm *c = calloc(1, sizeof *c);
    if (!c) return het_error_set(HET_ENOMEM, "comm: out of memory");
    het_comm_prefer_nbc_ring();
    c->topo = topo;
    c->ne = ne;
    c->own_lane = HET_LANE_START;
    c->lane = &c->own_lane;
    c->arb_hold = -1.0;
    c->host = MPI_COMM_NULL;
    c->chunk = HET_COMM_DEFAULT_CHUNK;
    for (size_t i = 0; i < sizeof c->wire_op / sizeof c->wire_op[0]; i++)
        c->wire_op[i] = MPI_OP_NULL;
    /* this node's ranks as one node (the node scope's node-local costs) */
    int *same = calloc((size_t)(topo->local_size > 0 ? topo->local_size : 1), sizeof *same);
    if (!same) {
        free(c);
        return het_error_set(HET_ENOMEM, "comm: out of memory");
    }
    het_netem_cost k[HET_AR_N];
    het_comm_costs(k, c->node_local, same, topo->local_size);
    free(same);
    if ((rc = gather_world_nodes(c)) != HET_OK) {
        free(c->world_node);
        free(c);
        return rc;
    }
    if (ne.arbiter && het_clock_virtual() && topo->size > 1) { /* collective over the world */
        if (!(c->arb = het_arb_svc_open(topo->world, c->world_node, ne))) {
            free(c->world_node);
            free(c);
            return HET_EINVAL; /* the message says why */
        }
        het_stall_use_arbiter(c);
        het_arb_svc_on_span(c->arb, note_span, c); /* rank 0: its flows in the link counter */
    }
    *out = c;
    return HET_OK;
}

void het_comm_free(het_comm *c) {
    if (!c) return;
    int done = 0;
    MPI_Finalized(&done);
    if (c->arb) { /* collective: every rank leaves, rank 0 serves until they have */
        het_stall_use_arbiter(NULL);
        if (!done && het_arb_svc_close(c->arb) != HET_OK)
            fprintf(stderr, "hetrain: %s\n", het_error_msg());
        c->arb = NULL;
    }
    het_p2p_free(c); /* its receives are on the groups' communicators too */
    het_comm_groups_free(c);
    int finalized = 0;
    MPI_Finalized(&finalized);
    for (size_t i = 0; i < sizeof c->wire_op / sizeof c->wire_op[0]; i++)
        if (!finalized && c->wire_op[i] != MPI_OP_NULL) MPI_Op_free(&c->wire_op[i]);
    if (!finalized && c->host != MPI_COMM_NULL) MPI_Comm_free(&c->host);
    free(c->wire_buf);
    free(c->f64_buf);
    free(c->world_node);
    free(c->links.span);
    free(c);
}

const het_topo *het_comm_topo(const het_comm *c) { return c ? c->topo : NULL; }

het_comm_stats het_comm_get_stats(const het_comm *c) {
    static const het_comm_stats zero;
    return c ? c->st : zero;
}

void het_comm_reset_stats(het_comm *c) {
    static const het_comm_stats zero;
    if (c) c->st = zero;
}

/* Counts one operation of `bytes` on a scope spanning `span` nodes. */
void het_comm_count_op(het_comm *c, int span, uint64_t bytes) {
    c->st.bytes += bytes;
    c->st.calls++;
    if (span > 1) {
        c->st.bytes_cross += bytes;
        c->st.calls_cross++;
    } else {
        c->st.bytes_node += bytes;
        c->st.calls_node++;
    }
}

void het_comm_set_chunk(het_comm *c, size_t elements) {
    if (!c) return;
    if (elements == 0) elements = HET_COMM_DEFAULT_CHUNK;
    if (elements > (size_t)INT_MAX) elements = (size_t)INT_MAX;
    c->chunk = elements;
}

/* Checks the common arguments; sets *comm. */
int het_comm_check_op(const het_comm *c, het_comm_scope s, const void *buf, size_t n,
                    const char *op, MPI_Comm *comm) {
    if (!c) return het_error_set(HET_EINVAL, "%s: NULL comm", op);
    if (n > 0 && !buf) return het_error_set(HET_EINVAL, "%s: NULL buffer of %zu elements", op, n);
    *comm = het_comm_mpi(c, s);
    if (*comm == MPI_COMM_NULL && s == HET_COMM_NONE)
        return het_error_set(HET_EINVAL, "%s: this rank is in no group (HET_COMM_NONE)", op);
    if (*comm == MPI_COMM_NULL) return het_error_set(HET_EINVAL, "%s: bad scope %d", op, (int)s);
    return HET_OK;
}

/* The MPI part of a blocking all-reduce on scope s that started at t0, with statistics. */
static int allreduce_mpi(het_comm *c, het_comm_scope s, MPI_Comm comm, float *buf, size_t n,
                         double t0) {
    for (size_t off = 0; off < n; off += c->chunk) {
        size_t cnt = n - off < c->chunk ? n - off : c->chunk;
        MPI_Request req;
        int err;
        if (!het_stall_on()) { /* the blocking call: see stall.c for the figures */
            het_stall_post(comm);
            err = MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)cnt, MPI_FLOAT, MPI_SUM, comm);
        } else if ((err = MPI_Iallreduce(MPI_IN_PLACE, buf + off, (int)cnt, MPI_FLOAT, MPI_SUM,
                                         comm, &req)) == MPI_SUCCESS) {
            err = het_stall_collective(comm, "allreduce", &req);
        }
        if (err != MPI_SUCCESS) {
            c->st.comm_s += het_now() - t0;
            return het_comm_mpi_error(err, "MPI_Iallreduce");
        }
    }
    c->st.comm_s += het_now() - t0;
    het_comm_count_op(c, het_comm_span(c, s), (uint64_t)n * sizeof(float));
    return HET_OK;
}

int het_comm_allreduce_sum(het_comm *c, het_comm_scope s, float *buf, size_t n) {
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = het_comm_check_op(c, s, buf, n, "all-reduce", &comm);
    if (rc != HET_OK || n == 0) return rc;
    double t0 = het_now();
    const int blocking = het_stall_blocking_model();
    double model = het_comm_allreduce_model(c, s, n * sizeof(float), blocking);
    het_arrival a;
    if ((rc = het_arrival_post(c, s, n * sizeof(float),
                               blocking ? HET_LINK_BLOCKING : HET_LINK_NONBLOCKING, comm, model,
                               &a)) != HET_OK)
        return rc;
    rc = allreduce_mpi(c, s, comm, buf, n, t0);
    if (rc != HET_OK) return rc;
    return het_arrival_end(c, comm, model, &a);
}

/* A request with nothing in flight, started now (internal.h). */
void het_comm_req_begin(het_comm *c, het_req *r) {
    r->reqs = NULL;
    r->send = NULL;
    r->n_reqs = 0;
    r->t_start = het_now();
    r->t_clock = c ? het_lane_now(c->lane) : 0.0; /* a NULL c fails next */
    r->t_model = 0.0;
    r->link_wire = r->link_share = 0.0;
    r->mpi_done = 1;
    r->comm = MPI_COMM_NULL;
    r->seq = 0;
    r->t_slot = -1;
    r->t_req = MPI_REQUEST_NULL;
    r->t_seq = 0;
}

/* Posts the exchange of r's start (MAX over comm) into a slot of c when the model is on. */
static int req_arrival_post(het_comm *c, MPI_Comm comm, het_req *r) {
    if (!exchanges_starts(r->t_model)) return HET_OK;
    if (r->link_wire > 0.0 && het_p2p_out_free(c) > r->t_clock) /* behind this rank's messages
                                                                 * on the link */
        r->t_clock = het_p2p_out_free(c);
    r->t_clock = coll_behind(c, r->t_clock, r->link_wire); /* and its earlier collectives */
    r->t_slot = c->arrive_next;
    c->arrive_next = (c->arrive_next + 1) % HET_ARRIVE_SLOTS;
    c->arrive[r->t_slot] = r->t_clock;
    r->comm = comm;
    r->t_seq = het_stall_post(comm);
    int err = MPI_Iallreduce(MPI_IN_PLACE, &c->arrive[r->t_slot], 1, MPI_DOUBLE, MPI_MAX, comm,
                             &r->t_req);
    if (err == MPI_SUCCESS) return HET_OK;
    r->t_slot = -1;
    r->t_req = MPI_REQUEST_NULL;
    return het_comm_mpi_error(err, "MPI_Iallreduce(start times)");
}

/* The last rank's start of r (its own start until known), on the chosen clock. */
static double req_last(const het_comm *c, const het_req *r) {
    return r->t_slot >= 0 ? c->arrive[r->t_slot] : r->t_clock;
}

/* When r's emulated delay ends: the last rank's start + model. */
static double req_end(const het_comm *c, const het_req *r) { return req_last(c, r) + r->t_model; }

int het_comm_req_clock(het_comm *c, MPI_Comm comm, het_req *r, double model) {
    r->t_model = model > 0.0 ? model : 0.0;
    r->t_clock = het_lane_now(c->lane);
    return req_arrival_post(c, comm, r);
}

int het_comm_allreduce_deferred(het_comm *c, het_comm_scope s, float *buf, size_t n, het_req *r) {
    if (!r) return het_error_set(HET_EINVAL, "all-reduce: NULL request");
    het_comm_req_begin(c, r);
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = het_comm_check_op(c, s, buf, n, "all-reduce", &comm);
    if (rc != HET_OK || n == 0) return rc;
    r->t_model = het_comm_allreduce_model(c, s, n * sizeof(float), het_stall_blocking_model());
    het_comm_link_model(c, s, n * sizeof(float), het_stall_blocking_model() ? HET_LINK_BLOCKING
                        : HET_LINK_NONBLOCKING, &r->link_wire, &r->link_share);
    if ((rc = req_arrival_post(c, comm, r)) != HET_OK) return rc;
    return allreduce_mpi(c, s, comm, buf, n, r->t_start);
}

int het_comm_bcast(het_comm *c, het_comm_scope s, void *buf, size_t bytes, int root) {
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = het_comm_check_op(c, s, buf, bytes, "broadcast", &comm);
    if (rc != HET_OK) return rc;
    int size = 0;
    MPI_Comm_size(comm, &size);
    if (root < 0 || root >= size)
        return het_error_set(HET_EINVAL, "broadcast: root %d outside [0, %d)", root, size);
    if (bytes == 0) return HET_OK;
    size_t chunk = c->chunk * sizeof(float); /* same chunking in bytes as the float calls */
    if (chunk > (size_t)INT_MAX) chunk = (size_t)INT_MAX;
    double t0 = het_now();
    int span = het_comm_span(c, s);
    double model = het_comm_bcast_model(c, s, bytes, root);
    het_arrival a;
    if ((rc = het_arrival_post(c, s, bytes, HET_LINK_BCAST, comm, model, &a)) != HET_OK) return rc;
    for (size_t off = 0; off < bytes; off += chunk) {
        size_t cnt = bytes - off < chunk ? bytes - off : chunk;
        MPI_Request req;
        int err;
        if (!het_stall_on()) { /* the blocking call, as the all-reduce: the algorithm of the
                                * library's rules (SMPI's non-blocking one sends from the root
                                * to every rank) */
            het_stall_post(comm);
            err = MPI_Bcast((char *)buf + off, (int)cnt, MPI_BYTE, root, comm);
        } else if ((err = MPI_Ibcast((char *)buf + off, (int)cnt, MPI_BYTE, root, comm, &req)) ==
                   MPI_SUCCESS) {
            err = het_stall_collective(comm, "broadcast", &req);
        }
        if (err != MPI_SUCCESS) {
            c->st.comm_s += het_now() - t0;
            return het_comm_mpi_error(err, "MPI_Bcast");
        }
    }
    c->st.comm_s += het_now() - t0;
    het_comm_count_op(c, span, bytes);
    return het_arrival_end(c, comm, model, &a);
}

int het_comm_allreduce_int(het_comm *c, het_comm_scope s, int *v, int n, het_comm_op op) {
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = het_comm_check_op(c, s, v, n > 0 ? (size_t)n : 0, "int all-reduce", &comm);
    if (rc != HET_OK || n <= 0) return rc;
    MPI_Op mop;
    if ((rc = het_comm_mpi_op(op, "int all-reduce", &mop)) != HET_OK) return rc;
    double t0 = het_now();
    size_t bytes = (size_t)n * sizeof(int);
    double model = het_comm_allreduce_model(c, s, bytes, 0);
    het_arrival a;
    if ((rc = het_arrival_post(c, s, bytes, HET_LINK_NONBLOCKING, comm, model, &a)) != HET_OK)
        return rc;
    MPI_Request req;
    int err = MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_INT, mop, comm, &req);
    if (err == MPI_SUCCESS) err = het_stall_collective(comm, "allreduce", &req);
    c->st.comm_s += het_now() - t0;
    if (err != MPI_SUCCESS) return het_comm_mpi_error(err, "MPI_Iallreduce(int)");
    het_comm_count_op(c, het_comm_span(c, s), bytes);
    return het_arrival_end(c, comm, model, &a);
}

/* The requests of r: inline up to HET_REQ_INLINE, else the heap array. Chosen from n_reqs on
 * every use (never a pointer into r), so that a het_req copied while in flight still works. */
static MPI_Request *req_array(het_req *r) {
    return r->n_reqs > HET_REQ_INLINE ? r->reqs : r->inline_reqs;
}

int het_comm_iallreduce_sum(het_comm *c, het_comm_scope s, float *buf, size_t n, het_req *r) {
    if (!r) return het_error_set(HET_EINVAL, "non-blocking all-reduce: NULL request");
    het_comm_req_begin(c, r);
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = het_comm_check_op(c, s, buf, n, "non-blocking all-reduce", &comm);
    if (rc != HET_OK || n == 0) return rc;
    size_t n_chunks = (n - 1) / c->chunk + 1;
    if (n_chunks > (size_t)INT_MAX)
        return het_error_set(HET_EINVAL, "non-blocking all-reduce: %zu chunks", n_chunks);
    MPI_Request *reqs = r->inline_reqs;
    if (n_chunks > HET_REQ_INLINE) {
        r->reqs = reqs = malloc(n_chunks * sizeof *r->reqs);
        if (!reqs)
            return het_error_set(HET_ENOMEM, "non-blocking all-reduce: out of memory for %zu "
                                 "requests", n_chunks);
    }
    r->n_reqs = (int)n_chunks; /* selects the array; lowered below if a post fails */
    r->mpi_done = 0;
    int span = het_comm_span(c, s);
    r->t_model = het_comm_allreduce_model(c, s, n * sizeof(float), 0);
    het_comm_link_model(c, s, n * sizeof(float), HET_LINK_NONBLOCKING, &r->link_wire,
                        &r->link_share);
    double t0 = r->t_start;
    if ((rc = req_arrival_post(c, comm, r)) != HET_OK) {
        r->n_reqs = 0;
        r->mpi_done = 1;
        return rc;
    }
    r->comm = comm;
#ifdef HET_SMPI /* in place corrupts large buffers under SMPI 3.32: send from a copy */
    if (!(r->send = malloc(n * sizeof(float)))) {
        r->n_reqs = 0;
        r->mpi_done = 1;
        return het_error_set(HET_ENOMEM, "all-reduce: out of memory for SMPI's send copy");
    }
    memcpy(r->send, buf, n * sizeof(float));
#endif
    for (size_t i = 0; i < n_chunks; i++) {
        size_t off = i * c->chunk, cnt = n - off < c->chunk ? n - off : c->chunk;
        long long seq = het_stall_post(comm);
        if (i == 0) r->seq = seq;
        int err = MPI_Iallreduce(r->send ? (const void *)(r->send + off) : MPI_IN_PLACE,
                                 buf + off, (int)cnt, MPI_FLOAT, MPI_SUM, comm, &reqs[i]);
        if (err != MPI_SUCCESS) {
            /* the chunks already posted stay in r: het_comm_wait can still complete them */
            if (i <= HET_REQ_INLINE && r->reqs) { /* they fit inline: keep them there */
                for (size_t k = 0; k < i; k++) r->inline_reqs[k] = reqs[k];
                free(r->reqs);
                r->reqs = NULL;
            }
            r->n_reqs = (int)i;
            if (i == 0) r->mpi_done = 1;
            c->st.comm_s += het_now() - t0;
            return het_comm_mpi_error(err, "MPI_Iallreduce");
        }
    }
    c->st.comm_s += het_now() - t0;
    het_comm_count_op(c, span, (uint64_t)n * sizeof(float));
    return HET_OK;
}

static void req_release(het_req *r) {
    free(r->reqs);
    r->reqs = NULL;
    free(r->send);
    r->send = NULL;
    r->n_reqs = 0;
    r->mpi_done = 1;
}

int het_comm_test(het_comm *c, het_req *r, int *done) {
    if (!c || !r || !done) return het_error_set(HET_EINVAL, "comm test: NULL argument");
    *done = 0;
    if (!r->mpi_done) {
        int flag = 0;
        double t0 = het_now();
        int err = het_mpi_testall(r->n_reqs, req_array(r), &flag);
        c->st.comm_s += het_now() - t0;
        if (err != MPI_SUCCESS) return het_comm_mpi_error(err, "MPI_Testall");
        if (flag) req_release(r); /* the requests are MPI_REQUEST_NULL now */
    }
    if (r->t_req != MPI_REQUEST_NULL) {
        int flag = 0, err = het_mpi_testall(1, &r->t_req, &flag);
        if (err != MPI_SUCCESS) return het_comm_mpi_error(err, "MPI_Test(start times)");
    }
    *done = r->mpi_done && r->t_req == MPI_REQUEST_NULL && het_lane_now(c->lane) >= req_end(c, r);
    return HET_OK;
}

int het_comm_wait(het_comm *c, het_req *r) {
    if (!c || !r) return het_error_set(HET_EINVAL, "comm wait: NULL argument");
    if (!r->mpi_done) {
        double t0 = het_now();
        int err = het_stall_wait(r->comm, r->seq, "allreduce", r->n_reqs, req_array(r));
        c->st.comm_s += het_now() - t0;
        req_release(r);
        if (err != MPI_SUCCESS) return het_comm_mpi_error(err, "MPI_Testall");
    }
    if (r->t_req != MPI_REQUEST_NULL) {
        double t0 = het_now();
        int err = het_stall_wait(r->comm, r->t_seq, "start times", 1, &r->t_req);
        c->st.comm_s += het_now() - t0;
        if (err != MPI_SUCCESS) return het_comm_mpi_error(err, "MPI_Iallreduce(start times)");
    }
    if (het_clock_virtual())
        virtual_end(c, req_last(c, r), r->t_model, r->link_wire, r->link_share);
    else if (r->t_model > 0.0) c->st.delay_s += het_sleep_until(req_end(c, r));
    return HET_OK;
}

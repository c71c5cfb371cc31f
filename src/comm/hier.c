/* Two-level (hierarchical) sum all-reduce over the world: reduce inside the node, all-reduce
 * between the node leaders, broadcast inside the node.
 *
 * DESIGN. Which scheme. Of the two classic two-level schemes, (a) reduce to the node leader +
 * all-reduce between leaders + broadcast, and (b) reduce-scatter inside the node + each rank
 * all-reduces its shard with the ranks of the same local rank on the other nodes + all-gather
 * inside the node, neither sends fewer bytes across nodes: with a ring between N nodes, a
 * node sends 2 (N-1)/N of the buffer over its link in both ((b) as L shards of 1/L each).
 * We take (a) because (b) has no advantage on one link per node and three costs: L
 * concurrent cross-node rings instead of one, so L times the messages and latencies on the
 * link; shard boundaries that must agree between nodes, which nodes of unequal size (2 + 1)
 * do not give; and the cross group of the ranks with local rank L-1 missing on smaller nodes.
 * (a) works for any placement and node sizes, and its cross-node stage is exactly the ring
 * between N nodes that het_netem_allreduce_s models. A flat all-reduce over all P ranks, by
 * contrast, sends up to P/N times the bytes over each node's link when the ranks of a node are
 * interleaved with other nodes' (each ring neighbour on another node). Where (b) would win
 * (several NICs per node, or a node stage slower than the link) is not hetrain's case.
 *
 * Communicators: three groups of het_comm_split made once per comm: two duplicates of the node
 * (the reduce stage and the broadcast stage each have their own, so that a buffer's broadcast
 * may be posted while a later buffer's reduce is in flight without breaking MPI's rule that
 * collectives on one communicator are posted in the same order on every rank) and the node
 * leaders (local rank 0, one per node, ordered by node; a group of span N, so the comm layer's
 * statistics count it as cross-node and its emulated delay is the N-node ring's).
 *
 * Stages skip what has nothing to do: a node of one rank has no reduce and no broadcast; one
 * node has no leaders' stage, and only leaders run it. Every stage is non-blocking, also those
 * that het_hier_finish posts and waits for at once: whether a stage is posted by advance or by
 * finish depends on this rank's progress, and MPI does not match a blocking collective with a
 * non-blocking one on another rank. Every stage is chunked like the flat
 * all-reduce (c->chunk elements per MPI call). The emulated delay lies in the leaders' stage
 * (its request is not complete before the modeled time), so a broadcast starts only after it;
 * the other ranks of the node wait for it inside the broadcast, and book that wait, up to the
 * leaders' modeled time, as delay too: every rank's split shows the network, whatever its role
 * (waiting beyond that, for a late leader, stays 'comm'). */
#include <limits.h>
#include <stdlib.h>

#include "comm/internal.h"

const char *het_allreduce_algo_name(het_allreduce_algo a) {
    switch (a) {
    case HET_ALLREDUCE_AUTO: return "auto";
    case HET_ALLREDUCE_FLAT: return "flat";
    case HET_ALLREDUCE_HIER: return "hier";
    }
    return "unknown";
}

het_allreduce_algo het_comm_allreduce_algo(const het_comm *c, het_allreduce_algo a) {
    if (!c || (a != HET_ALLREDUCE_AUTO && a != HET_ALLREDUCE_HIER)) return HET_ALLREDUCE_FLAT;
    if (a == HET_ALLREDUCE_HIER) return a;
#ifdef HET_SMPI /* the two-level algorithm's in-place MPI_Ireduce: see het_req's send */
    return HET_ALLREDUCE_FLAT;
#endif
    return c->topo->n_nodes > 1 ? HET_ALLREDUCE_HIER : HET_ALLREDUCE_FLAT;
}

int het_hier_setup(het_comm *c) {
    if (c->hier_ready) return HET_OK;
    const het_topo *t = c->topo;
    het_comm_scope red = HET_COMM_NONE, bc = HET_COMM_NONE, lead = HET_COMM_NONE;
    /* each split is collective: all three are made even after one failed here */
    int rc = het_comm_split(c, HET_COMM_NODE, 0, t->local_rank, &red);
    int r2 = het_comm_split(c, HET_COMM_NODE, 0, t->local_rank, &bc);
    int r3 = het_comm_split(c, HET_COMM_WORLD, t->local_rank == 0 ? 0 : -1, t->node_id, &lead);
    if (rc == HET_OK) rc = r2;
    if (rc == HET_OK) rc = r3;
    rc = het_comm_agree(t->world, rc);
    if (rc != HET_OK) return rc; /* the groups made stay with the comm until it is freed */
    c->hier_reduce = red;
    c->hier_bcast = bc;
    c->hier_leaders = lead;
    c->hier_ready = 1;
    return HET_OK;
}

/* The stage after `s` on this rank (skipping those with nothing to do), or DONE. */
static int next_stage(const het_comm *c, int s) {
    const het_topo *t = c->topo;
    for (s = s + 1; s < HET_HIER_DONE; s++) {
        if (s == HET_HIER_CROSS && t->local_rank == 0 && t->n_nodes > 1) return s;
        if ((s == HET_HIER_REDUCE || s == HET_HIER_BCAST) && t->local_size > 1) return s;
    }
    return HET_HIER_DONE;
}

/* Counts a node-local operation of `bytes` (as the comm layer counts one on a node scope). */
static void count_node(het_comm *c, uint64_t bytes) {
    c->st.bytes += bytes;
    c->st.calls++;
    c->st.bytes_node += bytes;
    c->st.calls_node++;
}

/* Posts the node stage `stage` (REDUCE to local rank 0, or BCAST from it) of h, one request per
 * chunk, on the stage's own node group. */
static int post_node(het_comm *c, het_hier *h, int stage) {
    het_req *r = &h->req;
    het_comm_req_begin(c, r);
    MPI_Comm comm = het_comm_mpi(c, stage == HET_HIER_REDUCE ? c->hier_reduce : c->hier_bcast);
    size_t n_chunks = h->n ? (h->n - 1) / c->chunk + 1 : 0;
    if (n_chunks == 0) return HET_OK;
    if (n_chunks > (size_t)INT_MAX)
        return het_error_set(HET_EINVAL, "two-level all-reduce: %zu chunks", n_chunks);
    MPI_Request *reqs = r->inline_reqs;
    if (n_chunks > HET_REQ_INLINE && !(r->reqs = reqs = malloc(n_chunks * sizeof *reqs)))
        return het_error_set(HET_ENOMEM, "two-level all-reduce: out of memory for %zu requests",
                             n_chunks);
    /* virtual clock: the stage ends at its last rank's start + the node link's tree */
    int rc = het_comm_req_clock(c, comm, r, het_clock_virtual() ? het_netem_local_bcast_s(
                                    c->ne, h->n * sizeof(float), c->topo->local_size) : 0.0);
    if (rc != HET_OK) return rc;
    r->mpi_done = 0;
    r->comm = comm; /* for the stall inspector, which het_comm_wait's loop reports to */
    int leader = c->topo->local_rank == 0, err = MPI_SUCCESS;
    size_t i = 0;
    for (; i < n_chunks && err == MPI_SUCCESS; i++) {
        size_t off = i * c->chunk, cnt = h->n - off < c->chunk ? h->n - off : c->chunk;
        float *p = h->buf + off;
        long long seq = het_stall_post(comm);
        if (i == 0) r->seq = seq;
        if (stage == HET_HIER_BCAST)
            err = MPI_Ibcast(p, (int)cnt, MPI_FLOAT, 0, comm, &reqs[i]);
        else
            err = MPI_Ireduce(leader ? MPI_IN_PLACE : p, leader ? p : NULL, (int)cnt, MPI_FLOAT,
                              MPI_SUM, 0, comm, &reqs[i]);
    }
    /* on failure the chunks posted before stay in r (a wait completes them); the array
     * chosen by n_reqs must still be the one holding them */
    size_t posted = err == MPI_SUCCESS ? n_chunks : i - 1;
    if (posted <= HET_REQ_INLINE && r->reqs) {
        for (size_t k = 0; k < posted; k++) r->inline_reqs[k] = r->reqs[k];
        free(r->reqs);
        r->reqs = NULL;
    }
    r->n_reqs = (int)posted;
    if (posted == 0) r->mpi_done = 1;
    c->st.comm_s += het_now() - r->t_start;
    if (err != MPI_SUCCESS)
        return het_comm_mpi_error(err, stage == HET_HIER_BCAST ? "MPI_Ibcast" : "MPI_Ireduce");
    count_node(c, (uint64_t)h->n * sizeof(float));
    return HET_OK;
}

/* On a rank other than its node's leader whose broadcast stage completed: the time it waited
 * in it (comm_s since the post), up to the leaders' modeled time, moves from comm to delay. */
static void book_leaders_delay(het_comm *c, const het_hier *h) {
    const het_topo *t = c->topo;
    if (t->local_rank == 0 || t->n_nodes < 2) return;
    double m = het_netem_nodes_allreduce_s(c->ne, h->n * sizeof(float), t->n_nodes, 0);
    double w = c->st.comm_s - h->comm_mark, x = w < m ? w : m;
    if (x <= 0.0) return;
    c->st.comm_s -= x;
    c->st.delay_s += x;
}

/* Posts stage s of h non-blocking. */
static int post_stage(het_comm *c, het_hier *h, int s) {
    if (h->stage == HET_HIER_BCAST && s == HET_HIER_DONE) book_leaders_delay(c, h);
    if (s == HET_HIER_BCAST) h->comm_mark = c->st.comm_s;
    h->stage = s;
    if (s == HET_HIER_CROSS)
        return het_comm_iallreduce_sum(c, c->hier_leaders, h->buf, h->n, &h->req);
    if (s == HET_HIER_DONE) {
        het_comm_req_begin(c, &h->req);
        return HET_OK;
    }
    return post_node(c, h, s);
}

int het_hier_start(het_comm *c, het_hier *h, float *buf, size_t n) {
    if (!c || !h) return het_error_set(HET_EINVAL, "two-level all-reduce: NULL argument");
    h->buf = buf;
    h->n = n;
    h->stage = HET_HIER_IDLE;
    het_comm_req_begin(c, &h->req);
    if (n > 0 && !buf)
        return het_error_set(HET_EINVAL, "two-level all-reduce: NULL buffer of %zu elements", n);
    if (!c->hier_ready)
        return het_error_set(HET_EINVAL, "two-level all-reduce: groups not made "
                             "(het_hier_setup)");
    return post_stage(c, h, next_stage(c, HET_HIER_IDLE));
}

int het_hier_advance(het_comm *c, het_hier *h, int may_post) {
    if (h->stage == HET_HIER_IDLE || h->stage == HET_HIER_DONE) return HET_OK;
    int done = 0, rc = het_comm_test(c, &h->req, &done);
    if (rc != HET_OK || !done || !may_post) return rc;
    return post_stage(c, h, next_stage(c, h->stage));
}

int het_hier_finish(het_comm *c, het_hier *h) {
    int rc = HET_OK;
    while (h->stage != HET_HIER_IDLE && h->stage != HET_HIER_DONE) {
        int w = het_comm_wait(c, &h->req);
        if (rc == HET_OK) rc = w;
        if (rc != HET_OK) break;
        rc = post_stage(c, h, next_stage(c, h->stage));
    }
    if (rc != HET_OK) het_comm_wait(c, &h->req); /* what a failed post left in flight */
    h->stage = HET_HIER_DONE;
    return rc;
}

int het_comm_allreduce_sum_hier(het_comm *c, float *buf, size_t n) {
    if (!c) return het_error_set(HET_EINVAL, "two-level all-reduce: NULL comm");
    int rc = het_hier_setup(c);
    if (rc != HET_OK) return rc;
    het_hier h;
    rc = het_hier_start(c, &h, buf, n);
    int f = het_hier_finish(c, &h);
    return rc != HET_OK ? rc : f;
}

/* Broadcast models (issue #36): the algorithm the MPI library runs for MPI_Bcast, and for its
 * trees (binomial, linear, k-nomial) their messages placed on the nodes' links, where they
 * share bandwidth.
 *
 * Which algorithm: Open MPI 4.1's coll/tuned fixed rules (coll_tuned_decision_fixed.c, the
 * same table SMPI's "ompi" selector copies): by communicator size and message size, e.g. on
 * 16-31 ranks a binomial tree from 4 KiB to 1 MiB, on 4-15 ranks the linear one (SMPI: its
 * pipelined chain) for most sizes, k-nomial trees from 32 ranks; MPI_Ibcast is libnbc's, which
 * by default looks at the size of the communicator alone: the linear broadcast on up to 4
 * ranks, libnbc's binomial tree above. MPICH 4: a binomial tree below 12 KiB or on fewer than 8
 * ranks, scatter + all-gather above. The rows go on to 4096 ranks and more (the binary tree,
 * the split binary tree at 256-1023 ranks for 16-32 KiB, scatter + all-gather for large
 * messages). The chain, scatter + all-gather, libnbc's tree and the two binary trees run rank
 * by rank (bcast_sched.c); the trees below are computed here.
 *
 * The binomial tree (het_netem_bcast_binomial_s), as MPICH runs it (and SMPI 3.32, also where
 * Open MPI's rules choose Open MPI's binomial tree): ranks relative to the root, a rank receives
 * from its parent (its relative rank less its lowest bit) and then sends to its children, the
 * farthest first, one blocking send after another. Open MPI's own binomial tree is another
 * tree run another way (its parent clears the highest bit, not the lowest, and a rank posts its
 * sends to all children at once: het_netem_bcast_ompi_binomial_s, bcast_sched.c): on 4 + 4 +
 * 4 + 4 ranks from rank 0 eight messages leave node 0 together where MPICH's tree sends two,
 * one after the other; the model charges it where Open MPI runs it (het_netem_bcast_ompi_tree:
 * not with --coll-model smpi nor --bcast-model binomial, which stand for SMPI's runs, whose
 * binomial tree is MPICH's). Each message between
 * nodes is a flow from the sender's node uplink to the receiver's node downlink (emul/flows.c:
 * max-min fair sharing, latency x lat_factor(bytes), bytes at bw x bw_factor(bytes); with
 * cross-traffic it also takes 5 % of its rate on the receiver's uplink and the sender's
 * downlink, SimGrid's acknowledgements); a message
 * inside a node costs node_lat + bytes / node_bw (the node link, virtual clock), unshared, as
 * SMPI's loopback. A blocking send of 64 KiB or more (the eager limit of Open MPI's TCP
 * transport and SMPI's send-is-detached threshold) returns when its bytes are in; a smaller one
 * when it is posted. The broadcast ends when the last rank has the data. A root off the first
 * rank of its node makes the tree cross nodes more often than a tree over the nodes would
 * (2 + 2 ranks, root 1: two messages between nodes in a row instead of one).
 *
 * The linear broadcast (het_netem_bcast_linear_s), Open MPI's basic_linear: the root posts a
 * non-blocking send to every other rank at once and waits for all, so its messages to other
 * nodes share its node's uplink (2 + 2 ranks: two messages out of the root's node together, L
 * + 2 W, where a tree over the nodes crosses once). SMPI's "ompi" selector runs its pipelined
 * chain (bcast__NTSL) where Open MPI's rules say linear: with a root off rank 0 it first sends
 * the whole buffer to rank 0, then pipelines 8 KiB segments along ranks 0, 1, ..., which on
 * 2 + 2 ranks from root 3 also moves the buffer across the nodes twice (validation: asp's
 * epoch end). The model follows Open MPI, the library that runs on a cluster.
 *
 * The k-nomial tree (het_netem_bcast_knomial_s; Open MPI from 32 ranks, radix 4, unsegmented
 * in its fixed rules): rank x's children are x + j radix^l, and a rank posts its sends to all
 * of them at once when it has the data (the generic tree broadcast), so a root's children on
 * other nodes share its uplink. The binomial tree is radix 2 (one blocking send after another)
 * and the linear fan radix p. SMPI's "ompi" selector runs MVAPICH2's intra-node k-nomial in
 * its place, which waits for each level's sends before the next: another schedule. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include <mpi.h> /* which MPI library (OPEN_MPI): the algorithm its broadcast runs */

#include "emul/flows.h"
#include "hetrain/emul.h"

enum { EAGER_LIMIT = 65536 };

#if defined(OPEN_MPI)
/* One row of a decision table: messages below `below` bytes take `algo`. */
typedef struct {
    size_t below;
    het_bc_algo algo;
} bc_rule;

static het_bc_algo bc_pick(const bc_rule *r, size_t bytes) {
    while (bytes >= r->below) r++;
    return r->algo;
}
#endif

het_bc_algo het_netem_mpi_bcast_algo(int p, size_t bytes, int blocking) {
#if defined(OPEN_MPI)
    if (!blocking) return p <= 4 ? HET_BC_LINEAR : HET_BC_NBC_BINOMIAL; /* libnbc's default */
    /* the 4.1 table, a row per range of communicator sizes (the last rule of each: the rest) */
    static const bc_rule lt4[] = {
        {32, HET_BC_PIPELINE}, {256, HET_BC_BINTREE}, {512, HET_BC_PIPELINE},
        {1024, HET_BC_KNOMIAL}, {32768, HET_BC_LINEAR}, {131072, HET_BC_BINTREE},
        {262144, HET_BC_CHAIN}, {524288, HET_BC_LINEAR}, {1048576, HET_BC_BINOMIAL},
        {SIZE_MAX, HET_BC_BINTREE}};
    static const bc_rule lt8[] = {
        {64, HET_BC_BINTREE}, {128, HET_BC_BINOMIAL}, {2048, HET_BC_BINTREE},
        {8192, HET_BC_BINOMIAL}, {1048576, HET_BC_LINEAR}, {SIZE_MAX, HET_BC_CHAIN}};
    static const bc_rule lt16[] = {
        {8, HET_BC_KNOMIAL}, {64, HET_BC_BINTREE}, {4096, HET_BC_KNOMIAL},
        {16384, HET_BC_BINTREE}, {32768, HET_BC_BINOMIAL}, {SIZE_MAX, HET_BC_LINEAR}};
    static const bc_rule lt32[] = {
        {4096, HET_BC_KNOMIAL}, {1048576, HET_BC_BINOMIAL}, {SIZE_MAX, HET_BC_SCATTER_ALLGATHER}};
    static const bc_rule lt64[] = {{2048, HET_BC_BINOMIAL}, {SIZE_MAX, HET_BC_KNOMIAL}};
    static const bc_rule lt128[] = {{SIZE_MAX, HET_BC_KNOMIAL}};
    static const bc_rule lt256[] = {
        {2, HET_BC_BINOMIAL}, {16384, HET_BC_BINTREE}, {32768, HET_BC_LINEAR},
        {65536, HET_BC_BINTREE}, {SIZE_MAX, HET_BC_KNOMIAL}};
    static const bc_rule lt1024[] = {
        {16384, HET_BC_KNOMIAL}, {32768, HET_BC_SPLIT_BINTREE}, {SIZE_MAX, HET_BC_KNOMIAL}};
    static const bc_rule lt2048[] = {
        {524288, HET_BC_KNOMIAL}, {SIZE_MAX, HET_BC_SCATTER_ALLGATHER}};
    static const bc_rule lt4096[] = {
        {262144, HET_BC_KNOMIAL}, {SIZE_MAX, HET_BC_SCATTER_ALLGATHER}};
    static const bc_rule more[] = {
        {8192, HET_BC_KNOMIAL}, {16384, HET_BC_BINTREE}, {262144, HET_BC_KNOMIAL},
        {SIZE_MAX, HET_BC_SCATTER_ALLGATHER}};
    static const struct {
        int below;
        const bc_rule *rules;
    } rows[] = {{4, lt4},     {8, lt8},     {16, lt16},     {32, lt32},     {64, lt64},
                {128, lt128}, {256, lt256}, {1024, lt1024}, {2048, lt2048}, {4096, lt4096},
                {INT_MAX, more}};
    int i = 0;
    while (p >= rows[i].below) i++;
    return bc_pick(rows[i].rules, bytes);
#else
    (void)blocking;
    return bytes < 12288 || p < 8 ? HET_BC_BINOMIAL : HET_BC_SCATTER_ALLGATHER;
#endif
}

int het_netem_bcast_ompi_tree(het_netem ne) {
#if defined(OPEN_MPI)
    return !ne.coll_smpi && ne.bcast == HET_NETEM_BCAST_RULES;
#else
    (void)ne;
    return 0;
#endif
}

het_bc_algo het_netem_bcast_algo(het_netem ne, int p, size_t bytes, int blocking) {
    if (ne.bcast == HET_NETEM_BCAST_LINEAR) return HET_BC_LINEAR;
    if (ne.bcast == HET_NETEM_BCAST_BINOMIAL) return HET_BC_BINOMIAL;
    if (!blocking && ne.coll_smpi) return HET_BC_LINEAR;
    return het_netem_mpi_bcast_algo(p, bytes, blocking);
}

/* A rank of the tree (by relative rank) while the broadcast runs. */
typedef struct {
    double ready;   /* when it can post its next send (INFINITY: no data yet, or waiting) */
    int mask, j;    /* its next child: x + mask j (mask 0: none left) */
    int flow;       /* the flow of its blocking send in flight, or -1 */
    int pending;    /* level by level: its level's sends between nodes still in flight */
    double lvl_end; /* level by level: when its level's sends done so far were in */
} bc_rank;

/* Skips the levels of x's tree below `mask` that have no child (x + mask >= p). */
static int first_level(int x, int mask, int p, int radix) {
    while (mask > 0 && x + mask >= p) mask /= radix;
    return mask;
}

/* x's next child (relative ranks), its state moved on: children x + mask j, j = 1 .. radix - 1,
 * for mask = radix^l down to 1 (the farthest first). */
static int take_child(bc_rank *r, int x, int p, int radix) {
    int y = x + r->mask * r->j++;
    if (r->j == radix || x + r->mask * r->j >= p)
        r->mask = first_level(x, r->mask / radix, p, radix), r->j = 1;
    return y;
}

/* Level by level: x has posted a send of the level it is on; when that was the level's last,
 * x waits until the level's sends are in (at once when all are in already). */
static void level_posted(bc_rank *r, int level_before, double t_send) {
    if (r->mask == level_before && r->mask > 0) return; /* more of this level to post */
    if (r->pending > 0) {
        r->ready = INFINITY; /* its flows' completions set it */
        return;
    }
    r->ready = r->lvl_end > t_send ? r->lvl_end : t_send;
    r->lvl_end = 0.0;
}

/* The broadcast from root over p ranks as a k-nomial tree of messages (radix 2: the binomial
 * tree, one blocking send after another from 64 KiB; radix > 2: a rank's sends to all its
 * children posted at once, as Open MPI's generic tree broadcast, or with `levels` one level's
 * sends at once and all of them in before the next level's, as MVAPICH2's k-nomial (MPI_Isend
 * to the level's children, MPI_Waitall), which SMPI 3.32 runs for Open MPI's; radix p: the
 * linear one); see het_netem_bcast_binomial_s. */
static double tree_s(het_netem ne, const int *node, int p, int root, size_t bytes,
                     int local_on, int radix, int levels) {
    if (p <= 1 || bytes == 0 || root < 0 || root >= p) return 0.0;
    int n_nodes = 0;
    for (int r = 0; r < p; r++)
        if (node[r] + 1 > n_nodes) n_nodes = node[r] + 1;
    double cap = ne.bw_bytes_per_s > 0.0 ? ne.bw_bytes_per_s : 1e300; /* 0: infinite */
    double *caps = malloc((size_t)2 * (size_t)n_nodes * sizeof *caps);
    bc_rank *rk = malloc((size_t)p * sizeof *rk);
    int *dest = malloc((size_t)p * sizeof *dest); /* by flow id: the child's relative rank */
    int *from = malloc((size_t)p * sizeof *from); /* by flow id: the sender's */
    het_flows *f = NULL;
    double end = -1.0; /* negative: out of memory */
    if (!caps || !rk || !dest || !from) goto out;
    for (int i = 0; i < 2 * n_nodes; i++) caps[i] = cap;
    if (!(f = het_flows_new(2 * n_nodes, caps))) goto out;
    for (int x = 0; x < p; x++) { /* x's level: x < radix m, or x mod radix m != 0 */
        int m = 1;
        while (m < p && x % (radix * m) == 0) m *= radix;
        rk[x] = (bc_rank){x == 0 ? 0.0 : INFINITY, first_level(x, m / radix, p, radix), 1, -1,
                          0, 0.0};
    }
    double lat = (ne.lat_s > 0.0 ? ne.lat_s : 0.0) * het_netem_pw_at(&ne.lat_factor, (double)bytes);
    double bf = het_netem_pw_at(&ne.bw_factor, (double)bytes);
    /* a message inside a node: the node link's broadcast over 2 ranks, one round */
    double local = local_on ? het_netem_local_bcast_s(ne, bytes, 2) : 0.0;
    int blocking = radix == 2 && bytes >= EAGER_LIMIT, n_flows = 0;
    levels = levels && radix > 2 && !blocking;
    end = 0.0;
    for (;;) {
        int x = -1; /* the rank that posts the next send, earliest first (lowest rank on ties) */
        for (int i = 0; i < p; i++)
            if (rk[i].mask > 0 && rk[i].flow < 0 && (x < 0 || rk[i].ready < rk[x].ready))
                x = i;
        double t_send = x >= 0 ? rk[x].ready : INFINITY, t_flow = het_flows_next(f);
        if (isinf(t_send) && isinf(t_flow)) break;
        if (t_flow <= t_send) { /* the network first: the messages in by then */
            het_flows_advance(f, t_flow);
            for (int id = 0; id < n_flows; id++) {
                double done = het_flows_done(f, id);
                if (done < 0.0 || dest[id] < 0) continue;
                bc_rank *c = &rk[dest[id]];
                c->ready = done;
                if (done > end) end = done;
                bc_rank *s = &rk[from[id]];
                if (s->flow == id) s->flow = -1, s->ready = done;
                if (levels) {
                    if (done > s->lvl_end) s->lvl_end = done;
                    if (--s->pending == 0 && isinf(s->ready)) /* its level is in */
                        s->ready = s->lvl_end, s->lvl_end = 0.0;
                }
                dest[id] = -1;
            }
            continue;
        }
        int level_before = rk[x].mask;
        int y = take_child(&rk[x], x, p, radix);
        int a = node[(x + root) % p], b = node[(y + root) % p];
        if (a == b) { /* inside the node: unshared */
            double in = t_send + local;
            rk[y].ready = in;
            if (in > end) end = in;
            rk[x].ready = blocking ? in : t_send;
            if (levels) {
                if (in > rk[x].lvl_end) rk[x].lvl_end = in;
                level_posted(&rk[x], level_before, t_send);
            }
            continue;
        }
        het_flows_advance(f, t_send);
        /* a's uplink and b's downlink; with cross-traffic the back route too (b up, a down) */
        const int route[4] = {2 * a, 2 * b + 1, 2 * b, 2 * a + 1};
        const double weight[4] = {1.0, 1.0, HET_NETEM_BACK, HET_NETEM_BACK};
        int id = het_flows_add_weighted(f, t_send, (double)bytes, lat, 0.0, bf, route, weight,
                                        ne.crosstraffic ? 4 : 2);
        if (id < 0 || id >= p) { end = -1.0; goto out; } /* a tree has p - 1 messages */
        dest[id] = y, from[id] = x, n_flows = id + 1;
        if (blocking) rk[x].flow = id, rk[x].ready = INFINITY;
        if (levels) rk[x].pending++, level_posted(&rk[x], level_before, t_send);
    }
out:
    het_flows_free(f);
    free(caps);
    free(rk);
    free(dest);
    free(from);
    return end;
}

double het_netem_bcast_binomial_s(het_netem ne, const int *node, int p, int root, size_t bytes,
                                  int local_on) {
    return tree_s(ne, node, p, root, bytes, local_on, 2, 0);
}

double het_netem_bcast_linear_s(het_netem ne, const int *node, int p, int root, size_t bytes,
                                int local_on) {
    return tree_s(ne, node, p, root, bytes, local_on, p > 2 ? p : 2, 0);
}

double het_netem_bcast_knomial_s(het_netem ne, const int *node, int p, int root, size_t bytes,
                                 int local_on, int radix) {
    return tree_s(ne, node, p, root, bytes, local_on, radix > 2 ? radix : 2, ne.coll_smpi);
}

/* Emulated network: the time a collective would take between nodes joined by links of latency
 * lat_s and bandwidth bw_bytes_per_s. The comm layer waits until this time has passed since an
 * operation started when the operation spans more than one node (shared memory makes MPI nearly
 * free on one machine; the model puts the network back).
 *
 * All-reduce follows the algorithm the MPI library runs for the call (het_netem_mpi_allreduce_
 * algo) over the communicator's ranks and their nodes, step by step: a step costs one latency if
 * any message in it crosses between nodes, plus the bytes of the busiest link direction over the
 * bandwidth (full duplex; ranks of one node exchange for free). The ring: 2(p-1) steps in which
 * every rank sends bytes/p to the next, so a node's link carries (ring edges leaving it) x
 * bytes/p a step; with one rank per node 2(N-1) lat + 2(N-1)/N bytes/bw; ranks interleaved over
 * nodes cross more often (measured on a real 1 Gbit/s link between two hosts: lenet5's
 * gradients, 4 ranks, 6.05 ms interleaved, 2.06 ms between two node leaders). Rabenseifner's
 * algorithm, which Open MPI's blocking MPI_Allreduce runs for 4-7 ranks from 8 KiB, pairs
 * ranks at distance 1, 2, ...: with 2 + 2 ranks in block order only the distance-2 steps cross,
 * bytes/2 per node each way in all (the ring: 1.5 bytes); interleaved, 2 bytes (the ring: 3).
 * Measured on the virtual cluster (tools/vcluster, 1 Gbit/s tbf link, bench_allreduce, 4 ranks
 * in block order, 64 KiB): Open MPI's blocking all-reduce 551 us, the model's Rabenseifner
 * 524 us + latencies; libnbc's ring 826 us, the model's ring 786 us + latencies.
 * Broadcast follows a binomial tree: ceil(log2 N) rounds of one whole message.
 *
 * The node link (virtual clock only): the same algorithms' messages between ranks of one node,
 * a latency per step that has any and the busiest rank's bytes over the node bandwidth. */
#include <stdlib.h>
#include <string.h>

#include <mpi.h> /* which MPI library (OPEN_MPI): the algorithm its all-reduce runs */

#include "hetrain/emul.h"

static int netem_off(het_netem ne) { return !(ne.lat_s > 0.0) && !(ne.bw_bytes_per_s > 0.0); }

/* Seconds to push `bytes` through one link; 0 for an infinite (0) bandwidth. */
static double wire_s(het_netem ne, double bytes) {
    return ne.bw_bytes_per_s > 0.0 ? bytes / ne.bw_bytes_per_s : 0.0;
}

static double lat_of(het_netem ne) { return ne.lat_s > 0.0 ? ne.lat_s : 0.0; }

double het_netem_allreduce_s(het_netem ne, size_t bytes, int n_nodes) {
    if (n_nodes <= 1 || netem_off(ne)) return 0.0;
    double steps = 2.0 * (double)(n_nodes - 1);
    return steps * lat_of(ne) + wire_s(ne, steps / (double)n_nodes * (double)bytes);
}

double het_netem_ring_allreduce_s(het_netem ne, size_t bytes, int p, int crossings) {
    if (p <= 1 || crossings <= 0 || netem_off(ne)) return 0.0;
    double steps = 2.0 * (double)(p - 1);
    return steps * lat_of(ne) + wire_s(ne, steps / (double)p * (double)crossings * (double)bytes);
}

int het_netem_ring_crossings(const int *node, int n) {
    int most = 0;
    for (int k = 0; k < n; k++) { /* edges leaving node[k]'s node: n is small (ranks) */
        int out = 0;
        for (int i = 0; i < n; i++)
            if (node[i] == node[k] && node[(i + 1) % n] != node[i]) out++;
        if (out > most) most = out;
    }
    return most;
}

/* One step of an algorithm being costed: per-node bytes out and in, in buffers. */
typedef struct step_acc {
    const int *node;
    double *out, *in; /* by node id (cross-node), or by rank (local) */
    int n_ids;
    int local;        /* 1: count messages inside a node, by rank; 0: between nodes, by node */
    het_netem_cost k;
} step_acc;

static void xfer(step_acc *a, int from, int to, double buffers) {
    if (a->local) {
        if (a->node[from] != a->node[to]) return;
        a->out[from] += buffers;
        a->in[to] += buffers;
        return;
    }
    if (a->node[from] == a->node[to]) return;
    a->out[a->node[from]] += buffers;
    a->in[a->node[to]] += buffers;
}

/* Closes a step: a latency if anything crossed, and the busiest link direction. */
static void end_step(step_acc *a) {
    double most = 0.0;
    for (int i = 0; i < a->n_ids; i++) {
        if (a->out[i] > most) most = a->out[i];
        if (a->in[i] > most) most = a->in[i];
    }
    if (most > 0.0) {
        a->k.steps += 1.0;
        a->k.load += most;
    }
    memset(a->out, 0, (size_t)a->n_ids * sizeof *a->out);
    memset(a->in, 0, (size_t)a->n_ids * sizeof *a->in);
}

/* The largest power of two <= p (p >= 1). */
static int pof2_floor(int p) {
    int q = 1;
    while (2 * q <= p) q *= 2;
    return q;
}

/* The world rank of virtual rank v once the first 2 rem ranks are folded into their odd half. */
static int unfold(int v, int rem) { return v < rem ? 2 * v + 1 : v + rem; }

/* Recursive halving + doubling (rsag) or recursive doubling over p ranks. */
static void butterfly(step_acc *a, int p, int rsag) {
    int pof2 = pof2_floor(p), rem = p - pof2;
    for (int i = 0; i < rem; i++) xfer(a, 2 * i, 2 * i + 1, 1.0);
    if (rem > 0) end_step(a);
    double f = 1.0;
    for (int mask = 1; mask < pof2; mask <<= 1) { /* reduce-scatter (rsag) or exchange */
        if (rsag) f /= 2.0;
        for (int v = 0; v < pof2; v++) xfer(a, unfold(v, rem), unfold(v ^ mask, rem), f);
        end_step(a);
    }
    for (int mask = pof2 / 2; rsag && mask >= 1; mask >>= 1) { /* all-gather, sizes reversed */
        for (int v = 0; v < pof2; v++) xfer(a, unfold(v, rem), unfold(v ^ mask, rem), f);
        end_step(a);
        f *= 2.0;
    }
    for (int i = 0; i < rem; i++) xfer(a, 2 * i + 1, 2 * i, 1.0);
    if (rem > 0) end_step(a);
}

het_netem_cost het_netem_allreduce_cost(const int *node, int p, het_ar_algo algo) {
    het_netem_cost none = {0.0, 0.0};
    if (!node || p <= 1) return none;
    if (algo == HET_AR_RING) { /* every step: each rank sends 1/p of the buffer to the next */
        int c = het_netem_ring_crossings(node, p);
        return c > 0 ? (het_netem_cost){2.0 * (p - 1), 2.0 * (p - 1) / p * c} : none;
    }
    int ids = 0;
    for (int r = 0; r < p; r++)
        if (node[r] + 1 > ids) ids = node[r] + 1;
    step_acc a = {node, calloc((size_t)ids, sizeof(double)), calloc((size_t)ids, sizeof(double)),
                  ids, 0, none};
    int ok = a.out && a.in;
    if (ok) butterfly(&a, p, algo == HET_AR_RSAG);
    free(a.out);
    free(a.in);
    return ok ? a.k : het_netem_allreduce_cost(node, p, HET_AR_RING); /* no memory */
}

het_netem_cost het_netem_allreduce_cost_local(const int *node, int p, het_ar_algo algo) {
    het_netem_cost none = {0.0, 0.0};
    if (!node || p <= 1) return none;
    if (algo == HET_AR_RING) { /* each rank sends 1/p a step; local if the next shares its node */
        for (int i = 0; i < p; i++)
            if (node[i] == node[(i + 1) % p]) return (het_netem_cost){2.0 * (p - 1),
                                                                      2.0 * (p - 1) / p};
        return none;
    }
    step_acc a = {node, calloc((size_t)p, sizeof(double)), calloc((size_t)p, sizeof(double)), p,
                  1, none};
    int ok = a.out && a.in;
    if (ok) butterfly(&a, p, algo == HET_AR_RSAG);
    free(a.out);
    free(a.in);
    return ok ? a.k : het_netem_allreduce_cost_local(node, p, HET_AR_RING); /* no memory */
}

static int local_off(het_netem ne) {
    return !(ne.node_lat_s > 0.0) && !(ne.node_bw_bytes_per_s > 0.0);
}

double het_netem_local_cost_s(het_netem ne, het_netem_cost k, size_t bytes) {
    if (local_off(ne)) return 0.0;
    double wire = ne.node_bw_bytes_per_s > 0.0 ? k.load * (double)bytes / ne.node_bw_bytes_per_s
                                               : 0.0;
    return k.steps * (ne.node_lat_s > 0.0 ? ne.node_lat_s : 0.0) + wire;
}

double het_netem_local_bcast_s(het_netem ne, size_t bytes, int ranks) {
    if (ranks <= 1 || local_off(ne)) return 0.0;
    int rounds = 0;
    while ((1L << rounds) < (long)ranks) rounds++;
    het_netem_cost k = {(double)rounds, (double)rounds};
    return het_netem_local_cost_s(ne, k, bytes);
}

double het_netem_cost_s(het_netem ne, het_netem_cost k, size_t bytes) {
    if (netem_off(ne)) return 0.0;
    return k.steps * lat_of(ne) + wire_s(ne, k.load * (double)bytes);
}

het_ar_algo het_netem_mpi_allreduce_algo(int p, size_t bytes, int blocking) {
#if defined(OPEN_MPI)
    if (!blocking) return HET_AR_RING;
    if (p < 4) {
        if (bytes < 8) return HET_AR_RING;
        if (bytes < 4096) return HET_AR_RDBL;
        if (bytes < 8192) return HET_AR_RING;
        if (bytes < 16384) return HET_AR_RDBL;
        return bytes < 262144 ? HET_AR_RING : HET_AR_RSAG; /* ring, then segmented ring */
    }
    if (p < 8) return bytes < 16 ? HET_AR_RING : bytes < 8192 ? HET_AR_RDBL : HET_AR_RSAG;
    if (p < 16) return bytes < 8192 ? HET_AR_RDBL : HET_AR_RSAG;
    return bytes < 4096 ? HET_AR_RDBL : HET_AR_RSAG;
#else
    (void)blocking;
    return bytes <= 2048 || bytes / sizeof(float) < (size_t)pof2_floor(p) ? HET_AR_RDBL
                                                                           : HET_AR_RSAG;
#endif
}

double het_netem_nodes_allreduce_s(het_netem ne, size_t bytes, int n_nodes, int blocking) {
    if (n_nodes <= 1 || netem_off(ne)) return 0.0;
    int *id = malloc((size_t)n_nodes * sizeof *id);
    if (!id) return het_netem_allreduce_s(ne, bytes, n_nodes);
    for (int r = 0; r < n_nodes; r++) id[r] = r;
    het_ar_algo a = het_netem_mpi_allreduce_algo(n_nodes, bytes, blocking);
    double t = het_netem_cost_s(ne, het_netem_allreduce_cost(id, n_nodes, a), bytes);
    free(id);
    return t;
}

double het_netem_bcast_s(het_netem ne, size_t bytes, int n_nodes) {
    if (n_nodes <= 1 || netem_off(ne)) return 0.0;
    int rounds = 0;
    while ((1L << rounds) < (long)n_nodes) rounds++; /* ceil(log2 N) */
    return (double)rounds * (lat_of(ne) + wire_s(ne, (double)bytes));
}

double het_netem_p2p_s(het_netem ne, size_t bytes) {
    if (netem_off(ne)) return 0.0;
    return lat_of(ne) + wire_s(ne, (double)bytes);
}

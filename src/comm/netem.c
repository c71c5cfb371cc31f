/* Emulated network: the time a collective would take between nodes joined by links of latency
 * lat_s and bandwidth bw_bytes_per_s. The comm layer waits until this time has passed since an
 * operation started when the operation spans more than one node (shared memory makes MPI nearly
 * free on one machine; the model puts the network back).
 *
 * All-reduce follows the ring algorithm (reduce-scatter then all-gather), as MPI runs it: over
 * the p ranks of the communicator in rank order, 2(p-1) steps in which every rank sends bytes/p
 * to the next; a step costs one latency and, per node, the ring edges leaving that node times
 * bytes/p over its link (full duplex). With one rank per node that is 2(N-1) lat + 2(N-1)/N
 * bytes/bw; ranks interleaved over nodes cross more often (measured on a real 1 Gbit/s link
 * between two hosts: lenet5's gradients, 4 ranks, 6.05 ms interleaved, 2.06 ms between two
 * node leaders). Broadcast follows a binomial tree: ceil(log2 N) rounds of one whole message. */
#include "hetrain/comm.h"

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

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
 * a latency per step that has any and the busiest rank's bytes over the node bandwidth.
 *
 * Message-size factors (--net-factors smpi, a platform file's smpi/lat-factor and bw-factor):
 * SMPI multiplies each message's latency and bandwidth by piecewise factors of its size (its
 * calibration of MPI over TCP: eager below 64 kB, rendezvous above, per-message overheads). So
 * an algorithm's cost keeps its steps grouped by message size (a fraction of the buffer: 1/p
 * for the ring, halving for Rabenseifner), and each group is charged at its messages' factors.
 * Measured against SMPI 3.32 on 2 x 2 ranks at 1 Gbit/s (bench/validate_smpi.sh, lenet5's
 * blocking all-reduce): 0.989 of SMPI's epoch with them, 0.832 without. */
#include <limits.h>
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

const char het_netem_smpi_lat_factor[] =
    "65472:11.6436;15424:3.48845;9376:2.59299;5776:2.18796;3484:1.88101;1426:1.61075;"
    "732:1.9503;257:1.95341;0:2.01467";
const char het_netem_smpi_bw_factor[] =
    "65472:0.940694;15424:0.697866;9376:0.58729;5776:1.08739;3484:0.77493;1426:0.608902;"
    "732:0.341987;257:0.338112;0:0.812084";

int het_netem_pw_parse(het_netem_pw *pw, const char *text) {
    memset(pw, 0, sizeof *pw);
    for (const char *q = text; *q;) {
        char *end;
        double from = strtod(q, &end), v;
        if (end == q || *end != ':' || !(from >= 0) || from > 1e18) goto bad;
        q = end + 1;
        v = strtod(q, &end);
        if (end == q || !(v > 0) || v > 1e6 || (*end && *end != ';')) goto bad;
        if (pw->n == HET_NETEM_PIECES) goto bad;
        int i = pw->n++; /* insertion by `from`, ascending */
        for (; i > 0 && pw->from[i - 1] > from; i--)
            pw->from[i] = pw->from[i - 1], pw->val[i] = pw->val[i - 1];
        pw->from[i] = from, pw->val[i] = v;
        q = *end ? end + 1 : end;
    }
    return HET_OK;
bad:
    memset(pw, 0, sizeof *pw);
    return het_error_set(HET_EINVAL, "'%s': expected SIZE:FACTOR pairs separated by ';' (at "
                         "most %d; sizes >= 0, factors > 0), as 65472:0.94;0:0.81", text,
                         HET_NETEM_PIECES);
}

void het_netem_use_smpi_factors(het_netem *ne) { /* constants that parse (test_comm) */
    het_netem_pw_parse(&ne->lat_factor, het_netem_smpi_lat_factor);
    het_netem_pw_parse(&ne->bw_factor, het_netem_smpi_bw_factor);
    ne->crosstraffic = 1;
}

double het_netem_pw_at(const het_netem_pw *pw, double bytes) {
    double v = 1.0;
    for (int i = 0; i < pw->n && bytes >= pw->from[i]; i++) v = pw->val[i];
    return v;
}

/* One message of `bytes` on a link of latency lat and bandwidth bw, `load` bytes of it on the
 * busiest direction: lat x lat_factor + load / (bw x bw_factor), by the message's size. */
static double msg_s(het_netem ne, double lat, double bw, double bytes, double load) {
    double t = lat * het_netem_pw_at(&ne.lat_factor, bytes);
    if (bw > 0.0) t += load / (bw * het_netem_pw_at(&ne.bw_factor, bytes));
    return t;
}

int het_netem_pw_identity(const het_netem_pw *pw) {
    for (int i = 0; i < pw->n; i++)
        if (pw->val[i] != 1.0) return 0;
    return 1;
}

static int factored(het_netem ne) {
    return !het_netem_pw_identity(&ne.lat_factor) || !het_netem_pw_identity(&ne.bw_factor);
}

/* Adds `count` steps of messages of frac buffers, load buffers on the busiest link (load_x
 * with cross-traffic), to k. */
static void add_steps(het_netem_cost *k, double frac, double count, double load, double load_x) {
    k->steps += count;
    k->load += load;
    k->load_x += load_x;
    int i = 0;
    while (i < k->n_groups && k->g[i].frac != frac) i++;
    if (i == k->n_groups) {
        if (k->n_groups == HET_NETEM_GROUPS) i--; /* never with p <= 2^30; folded in */
        else k->g[k->n_groups++].frac = frac, k->g[i].count = k->g[i].load = k->g[i].load_x = 0.0;
    }
    k->g[i].count += count;
    k->g[i].load += load;
    k->g[i].load_x += load_x;
}

/* Seconds of cost k on a link (lat, bw) for a buffer of `bytes`, message by message; x: with
 * cross-traffic (load_x). */
static double cost_on(het_netem ne, het_netem_cost k, double lat, double bw, double bytes,
                      int x) {
    if (!factored(ne) || k.n_groups == 0)
        return k.steps * lat + (bw > 0.0 ? (x ? k.load_x : k.load) * bytes / bw : 0.0);
    double t = 0.0;
    for (int i = 0; i < k.n_groups; i++) {
        const double m = k.g[i].frac * bytes; /* the group's message size */
        t += k.g[i].count * lat * het_netem_pw_at(&ne.lat_factor, m);
        if (bw > 0.0)
            t += (x ? k.g[i].load_x : k.g[i].load) * bytes /
                 (bw * het_netem_pw_at(&ne.bw_factor, m));
    }
    return t;
}

/* The load of an exchange in which every node sends as much as it receives, with ne's
 * cross-traffic. */
static double both_ways(het_netem ne, double load) {
    return ne.crosstraffic ? load * (1.0 + HET_NETEM_BACK) : load;
}

double het_netem_allreduce_s(het_netem ne, size_t bytes, int n_nodes) {
    if (n_nodes <= 1 || netem_off(ne)) return 0.0;
    double steps = 2.0 * (double)(n_nodes - 1), m = (double)bytes / (double)n_nodes;
    if (factored(ne)) return steps * msg_s(ne, lat_of(ne), ne.bw_bytes_per_s, m, both_ways(ne, m));
    return steps * lat_of(ne) + wire_s(ne, both_ways(ne, steps / (double)n_nodes * (double)bytes));
}

double het_netem_ring_allreduce_s(het_netem ne, size_t bytes, int p, int crossings) {
    if (p <= 1 || crossings <= 0 || netem_off(ne)) return 0.0;
    double steps = 2.0 * (double)(p - 1), m = (double)bytes / (double)p;
    if (factored(ne))
        return steps * msg_s(ne, lat_of(ne), ne.bw_bytes_per_s, m, both_ways(ne, crossings * m));
    return steps * lat_of(ne) +
           wire_s(ne, both_ways(ne, steps / (double)p * (double)crossings * (double)bytes));
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

/* Closes a step whose messages are frac buffers each: a latency if anything crossed, and the
 * busiest link direction, without and with cross-traffic (between nodes: a node's way out
 * carries the back traffic of what comes in, and the other way round). */
static void end_step(step_acc *a, double frac) {
    double most = 0.0, most_x = 0.0, back = a->local ? 0.0 : HET_NETEM_BACK;
    for (int i = 0; i < a->n_ids; i++) {
        double o = a->out[i], n = a->in[i];
        if (o > most) most = o;
        if (n > most) most = n;
        if (o + back * n > most_x) most_x = o + back * n;
        if (n + back * o > most_x) most_x = n + back * o;
    }
    if (most > 0.0) add_steps(&a->k, frac, 1.0, most, most_x);
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
    if (rem > 0) end_step(a, 1.0);
    double f = 1.0;
    for (int mask = 1; mask < pof2; mask <<= 1) { /* reduce-scatter (rsag) or exchange */
        if (rsag) f /= 2.0;
        for (int v = 0; v < pof2; v++) xfer(a, unfold(v, rem), unfold(v ^ mask, rem), f);
        end_step(a, f);
    }
    for (int mask = pof2 / 2; rsag && mask >= 1; mask >>= 1) { /* all-gather, sizes reversed */
        for (int v = 0; v < pof2; v++) xfer(a, unfold(v, rem), unfold(v ^ mask, rem), f);
        end_step(a, f);
        f *= 2.0;
    }
    for (int i = 0; i < rem; i++) xfer(a, 2 * i + 1, 2 * i, 1.0);
    if (rem > 0) end_step(a, 1.0);
}

/* The linear exchange over p ranks: every rank's whole buffer to every other, in one step. */
static void linear(step_acc *a, int p) {
    for (int i = 0; i < p; i++)
        for (int j = 0; j < p; j++)
            if (i != j) xfer(a, i, j, 1.0);
    end_step(a, 1.0);
}

/* The steps of algo (not the ring) over a's ranks. */
static void run_algo(step_acc *a, int p, het_ar_algo algo) {
    if (algo == HET_AR_LINEAR) linear(a, p);
    else butterfly(a, p, algo == HET_AR_RSAG);
}

het_netem_cost het_netem_allreduce_cost(const int *node, int p, het_ar_algo algo) {
    het_netem_cost none = {0};
    if (!node || p <= 1) return none;
    if (algo == HET_AR_RING) { /* every step: each rank sends 1/p of the buffer to the next */
        int c = het_netem_ring_crossings(node, p);
        if (c > 0) /* a node's ring edges in and out are as many: load x (1 + back) */
            add_steps(&none, 1.0 / p, 2.0 * (p - 1), 2.0 * (p - 1) / p * c,
                      2.0 * (p - 1) / p * c * (1.0 + HET_NETEM_BACK));
        return none;
    }
    int ids = 0;
    for (int r = 0; r < p; r++)
        if (node[r] + 1 > ids) ids = node[r] + 1;
    step_acc a = {node, calloc((size_t)ids, sizeof(double)), calloc((size_t)ids, sizeof(double)),
                  ids, 0, none};
    int ok = a.out && a.in;
    if (ok) run_algo(&a, p, algo);
    free(a.out);
    free(a.in);
    return ok ? a.k : het_netem_allreduce_cost(node, p, HET_AR_RING); /* no memory */
}

het_netem_cost het_netem_allreduce_cost_local(const int *node, int p, het_ar_algo algo) {
    het_netem_cost none = {0};
    if (!node || p <= 1) return none;
    if (algo == HET_AR_RING) { /* each rank sends 1/p a step; local if the next shares its node */
        for (int i = 0; i < p; i++)
            if (node[i] == node[(i + 1) % p]) {
                add_steps(&none, 1.0 / p, 2.0 * (p - 1), 2.0 * (p - 1) / p, 2.0 * (p - 1) / p);
                break;
            }
        return none;
    }
    step_acc a = {node, calloc((size_t)p, sizeof(double)), calloc((size_t)p, sizeof(double)), p,
                  1, none};
    int ok = a.out && a.in;
    if (ok) run_algo(&a, p, algo);
    free(a.out);
    free(a.in);
    return ok ? a.k : het_netem_allreduce_cost_local(node, p, HET_AR_RING); /* no memory */
}

static int local_off(het_netem ne) {
    return !(ne.node_lat_s > 0.0) && !(ne.node_bw_bytes_per_s > 0.0);
}

double het_netem_local_cost_s(het_netem ne, het_netem_cost k, size_t bytes) {
    if (local_off(ne)) return 0.0;
    return cost_on(ne, k, ne.node_lat_s > 0.0 ? ne.node_lat_s : 0.0, ne.node_bw_bytes_per_s,
                   (double)bytes, 0); /* a node's shared memory: no back traffic */
}

double het_netem_local_bcast_s(het_netem ne, size_t bytes, int ranks) {
    if (ranks <= 1 || local_off(ne)) return 0.0;
    int rounds = 0;
    while ((1L << rounds) < (long)ranks) rounds++;
    het_netem_cost k = {0};
    add_steps(&k, 1.0, (double)rounds, (double)rounds, (double)rounds);
    return het_netem_local_cost_s(ne, k, bytes);
}

double het_netem_cost_s(het_netem ne, het_netem_cost k, size_t bytes) {
    if (netem_off(ne)) return 0.0;
    return cost_on(ne, k, lat_of(ne), ne.bw_bytes_per_s, (double)bytes, ne.crosstraffic);
}

#if defined(OPEN_MPI)
/* One row of a decision table: messages below `below` bytes take `algo`. */
typedef struct {
    size_t below;
    het_ar_algo algo;
} ar_rule;

static het_ar_algo ar_pick(const ar_rule *r, size_t bytes) {
    while (bytes >= r->below) r++;
    return r->algo;
}
#endif

het_ar_algo het_netem_mpi_allreduce_algo(int p, size_t bytes, int blocking) {
#if defined(OPEN_MPI)
    if (!blocking) return HET_AR_RING;
    /* coll/tuned 4.1's fixed rules for a commutative op, a row per range of communicator sizes
     * (SMPI's "ompi" selector copies them): the ring and the segmented ring as HET_AR_RING,
     * "nonoverlapping" (a reduce, then a broadcast: 128+ ranks, small sizes) as recursive
     * doubling, both log-step algorithms on whole buffers */
    static const size_t M = SIZE_MAX;
    static const ar_rule lt4[] = {{8, HET_AR_RING}, {4096, HET_AR_RDBL}, {8192, HET_AR_RING},
                                  {16384, HET_AR_RDBL}, {262144, HET_AR_RING}, {M, HET_AR_RSAG}};
    static const ar_rule lt8[] = {{16, HET_AR_RING}, {8192, HET_AR_RDBL}, {M, HET_AR_RSAG}};
    static const ar_rule lt16[] = {{8192, HET_AR_RDBL}, {M, HET_AR_RSAG}};
    static const ar_rule lt32[] = {{64, HET_AR_RING}, {4096, HET_AR_RDBL}, {M, HET_AR_RSAG}};
    static const ar_rule lt64[] = {{128, HET_AR_RING}, {M, HET_AR_RSAG}};
    static const ar_rule lt128[] = {{262144, HET_AR_RDBL}, {M, HET_AR_RSAG}};
    static const ar_rule lt256[] = {{262144, HET_AR_RDBL}, {M, HET_AR_RSAG}};
    static const ar_rule lt512[] = {{4096, HET_AR_RDBL}, {M, HET_AR_RSAG}};
    static const ar_rule lt2048[] = {{16384, HET_AR_RDBL}, {M, HET_AR_RSAG}};
    static const ar_rule lt4096[] = {{2048, HET_AR_RDBL}, {4096, HET_AR_RING},
                                     {16384, HET_AR_RDBL}, {M, HET_AR_RSAG}};
    static const ar_rule rest[] = {{2048, HET_AR_RDBL}, {16384, HET_AR_RING},
                                   {32768, HET_AR_RDBL}, {M, HET_AR_RSAG}};
    static const struct {
        int below;
        const ar_rule *rows;
    } by_size[] = {{4, lt4}, {8, lt8}, {16, lt16}, {32, lt32}, {64, lt64}, {128, lt128},
                   {256, lt256}, {512, lt512}, {2048, lt2048}, {4096, lt4096}, {INT_MAX, rest}};
    int i = 0;
    while (p >= by_size[i].below) i++;
    return ar_pick(by_size[i].rows, bytes);
#else
    (void)blocking;
    return bytes <= 2048 || bytes / sizeof(float) < (size_t)pof2_floor(p) ? HET_AR_RDBL
                                                                           : HET_AR_RSAG;
#endif
}

het_ar_algo het_netem_allreduce_algo(het_netem ne, int p, size_t bytes, int blocking) {
    return !blocking && ne.coll_smpi ? HET_AR_LINEAR
                                      : het_netem_mpi_allreduce_algo(p, bytes, blocking);
}

double het_netem_nodes_allreduce_s(het_netem ne, size_t bytes, int n_nodes, int blocking) {
    if (n_nodes <= 1 || netem_off(ne)) return 0.0;
    int *id = malloc((size_t)n_nodes * sizeof *id);
    if (!id) return het_netem_allreduce_s(ne, bytes, n_nodes);
    for (int r = 0; r < n_nodes; r++) id[r] = r;
    het_ar_algo a = het_netem_allreduce_algo(ne, n_nodes, bytes, blocking);
    double t = het_netem_cost_s(ne, het_netem_allreduce_cost(id, n_nodes, a), bytes);
    free(id);
    return t;
}

double het_netem_bcast_s(het_netem ne, size_t bytes, int n_nodes) {
    if (n_nodes <= 1 || netem_off(ne)) return 0.0;
    int rounds = 0;
    while ((1L << rounds) < (long)n_nodes) rounds++; /* ceil(log2 N) */
    return (double)rounds *
           msg_s(ne, lat_of(ne), ne.bw_bytes_per_s, (double)bytes, (double)bytes);
}

double het_netem_p2p_s(het_netem ne, size_t bytes) {
    if (netem_off(ne)) return 0.0;
    return msg_s(ne, lat_of(ne), ne.bw_bytes_per_s, (double)bytes, (double)bytes);
}

double het_netem_wire_s(het_netem ne, size_t bytes) {
    if (netem_off(ne) || !(ne.bw_bytes_per_s > 0.0)) return 0.0;
    return (double)bytes / (ne.bw_bytes_per_s * het_netem_pw_at(&ne.bw_factor, (double)bytes));
}

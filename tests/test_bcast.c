/* The broadcast model (src/emul/bcast.c) against hand-derived times. Links of 1 MB/s without
 * latency unless a case says otherwise, so a 100 kB message (blocking: 64 KiB or more) takes
 * T = 0.1 s between nodes:
 * - 2 + 2 ranks (nodes 0, 0, 1, 1), root 0: 0 -> 2 across, then 0 -> 1 and 2 -> 3 inside the
 *   nodes (free without the node link): T; root 1 (relative ranks 1, 2, 3 = ranks 2, 3, 0): the
 *   root sends to rank 3 and then to rank 2, both across (2 T), while rank 3 passes it to rank 0
 *   across (2 T): 2 T; root 3: 2 T; root 2: T;
 * - eager messages (1000 bytes, latency 1 ms): root 1 posts both sends at once, they share node
 *   0's uplink (each at half: 1 ms + 2 ms), then rank 3 sends to rank 0 (1 ms + 1 ms): 5 ms;
 * - the node link on: root 0 adds one message inside a node after the one across it;
 * - 16 ranks on 4 nodes, root 0: two messages across in a row (0 -> 8, then 8 -> 12 beside
 *   0 -> 4), as the tree over the nodes (het_netem_bcast_s): 2 T; root 1: more;
 * - the linear broadcast (Open MPI's basic_linear): the root's messages across nodes share its
 *   node's uplink, 2 T on 2 + 2 ranks from every root, 4 T on 4 + 4 from root 0;
 * - the k-nomial tree of radix 4: a rank's sends to all its children at once;
 * - SMPI's message-size factors: one message between 2 nodes is het_netem_p2p_s;
 * - Open MPI's binary tree and split binary tree (their own cases below);
 * - the algorithm Open MPI 4.1 picks (binomial on 16-31 ranks from 4 KiB, linear on 4-7 ranks
 *   from 8 KiB, the binary tree on 2-3 ranks from 32 KiB, ... up to 4096 ranks and more), or
 *   MPICH's. */
#include <math.h>
#include <mpi.h>
#include <string.h>

#include "hetrain/emul.h"
#include "test.h"

static const int two_by_two[4] = {0, 0, 1, 1};

static void test_roots(void) {
    het_netem ne = {.lat_s = 0.0, .bw_bytes_per_s = 1e6};
    double T = 0.1;
    CHECK_CLOSE(het_netem_bcast_binomial_s(ne, two_by_two, 4, 0, 100000, 0), T, 1e-12, "root 0");
    CHECK_CLOSE(het_netem_bcast_binomial_s(ne, two_by_two, 4, 1, 100000, 0), 2 * T, 1e-12,
                "root 1");
    CHECK_CLOSE(het_netem_bcast_binomial_s(ne, two_by_two, 4, 2, 100000, 0), T, 1e-12, "root 2");
    CHECK_CLOSE(het_netem_bcast_binomial_s(ne, two_by_two, 4, 3, 100000, 0), 2 * T, 1e-12,
                "root 3");
    CHECK(het_netem_bcast_binomial_s(ne, two_by_two, 1, 0, 100000, 0) == 0.0, "one rank");
    CHECK(het_netem_bcast_binomial_s(ne, two_by_two, 4, 4, 100000, 0) == 0.0, "root out of range");
}

/* The linear broadcast: the root's sends all posted at once; those between nodes share the
 * root node's uplink (and the other node's downlink): 2 + 2 ranks, 100 kB, from any root two
 * messages cross together (2 T), the one inside the node is free without the node link and
 * node_lat + bytes / node_bw with it; 8 ranks on 2 nodes from root 0: 4 across together (4 T);
 * latency 1 ms: paid once, the messages overlapping. */
static void test_linear(void) {
    het_netem ne = {.lat_s = 0.0, .bw_bytes_per_s = 1e6};
    double T = 0.1;
    for (int root = 0; root < 4; root++) {
        double t = het_netem_bcast_linear_s(ne, two_by_two, 4, root, 100000, 0);
        CHECK(fabs(t - 2 * T) < 1e-12, "linear, root %d: %.17g s, expected 2 T", root, t);
    }
    int eight[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    CHECK_CLOSE(het_netem_bcast_linear_s(ne, eight, 8, 0, 100000, 0), 4 * T, 1e-12,
                "linear, 8 ranks");
    het_netem lat = {.lat_s = 1e-3, .bw_bytes_per_s = 1e6};
    CHECK_CLOSE(het_netem_bcast_linear_s(lat, two_by_two, 4, 3, 100000, 0), 1e-3 + 2 * T, 1e-12,
                "linear, latency once");
    het_netem nl = {.bw_bytes_per_s = 1e6, .node_lat_s = 1e-6, .node_bw_bytes_per_s = 1e9};
    het_netem fast = {.bw_bytes_per_s = 1e9, .node_lat_s = 1e-2, .node_bw_bytes_per_s = 1e9};
    CHECK_CLOSE(het_netem_bcast_linear_s(nl, two_by_two, 4, 0, 100000, 1), 2 * T, 1e-12,
                "linear, the node link beside the slower link");
    CHECK_CLOSE(het_netem_bcast_linear_s(fast, two_by_two, 4, 0, 100000, 1), 1e-2 + 1e-4, 1e-12,
                "linear, a slow node link: the message inside the node ends last");
    CHECK(het_netem_bcast_linear_s(ne, two_by_two, 1, 0, 100000, 0) == 0.0, "linear, one rank");
    het_netem cx = ne; /* cross-traffic: the back route (node 1 up, node 0 down) carries only */
    cx.crosstraffic = 1; /* the two flows' 5 %: one way, the same 2 T */
    CHECK_CLOSE(het_netem_bcast_linear_s(cx, two_by_two, 4, 0, 100000, 0), 2 * T, 1e-12,
                "linear with cross-traffic, one way");
}

/* The k-nomial tree of radix 4 (Open MPI's knomial): 16 ranks on 4 nodes from root 0, the
 * root's children 4, 8, 12 (across, posted together: 3 T on node 0's uplink) and 1, 2, 3;
 * ranks 4, 8, 12 then pass it inside their nodes (free here): 3 T, where the binomial tree takes
 * 2 T. Radix 2 is the binomial tree (2 + 2 ranks, root 1: 2 T); 64 ranks on 8 nodes of 8 from
 * root 0: children 16, 32, 48 and 4, 8, 12 and 1, 2, 3, of which 8, 12, 16, 32, 48 cross (5 T
 * out of node 0), then 16, 32, 48 each send two across (24, 28 / 40, 44 / 56, 60) on their own
 * uplinks: 7 T (the binomial tree: 3 T; Open MPI runs it unsegmented, all children at once). */
static void test_knomial(void) {
    het_netem ne = {.lat_s = 0.0, .bw_bytes_per_s = 1e6};
    double T = 0.1;
    int node[64];
    for (int r = 0; r < 64; r++) node[r] = r / 4;
    CHECK_CLOSE(het_netem_bcast_knomial_s(ne, node, 16, 0, 100000, 0, 4), 3 * T, 1e-12,
                "k-nomial, 16 ranks");
    CHECK_CLOSE(het_netem_bcast_knomial_s(ne, two_by_two, 4, 1, 100000, 0, 2),
                het_netem_bcast_binomial_s(ne, two_by_two, 4, 1, 100000, 0), 1e-15,
                "k-nomial of radix 2 = binomial");
    for (int r = 0; r < 64; r++) node[r] = r / 8;
    CHECK_CLOSE(het_netem_bcast_knomial_s(ne, node, 64, 0, 100000, 0, 4), 7 * T, 1e-12,
                "k-nomial, 64 ranks");
    /* level by level (--coll-model smpi: MVAPICH2's k-nomial, SMPI 3.32's): the root's level
     * 16 (16, 32, 48: 3 T on node 0's uplink), then its level 4 (8, 12 across: 2 T more), while
     * 16, 32, 48 send two across each from 3 T (2 T on their own uplinks): 5 T */
    het_netem lv = ne;
    lv.coll_smpi = 1;
    CHECK_CLOSE(het_netem_bcast_knomial_s(lv, node, 64, 0, 100000, 0, 4), 5 * T, 1e-12,
                "k-nomial level by level, 64 ranks");
    for (int r = 0; r < 64; r++) node[r] = r / 4;
    CHECK_CLOSE(het_netem_bcast_knomial_s(lv, node, 16, 0, 100000, 0, 4), 3 * T, 1e-12,
                "k-nomial level by level, 16 ranks: the root's one level across, 3 T");
    /* the node link: a level's sends inside the node are waited for too (node_lat 10 ms) */
    het_netem slow_local = {.bw_bytes_per_s = 1e6, .node_lat_s = 1e-2, .node_bw_bytes_per_s = 1e12,
                            .coll_smpi = 1};
    int four[4] = {0, 0, 0, 0};
    double one = het_netem_local_bcast_s(slow_local, 100000, 2);
    CHECK_CLOSE(het_netem_bcast_knomial_s(slow_local, four, 4, 0, 100000, 1, 4), one, 1e-12,
                "k-nomial level by level, one node of 4: one level, one local time");
    int sixteen[16] = {0};
    CHECK_CLOSE(het_netem_bcast_knomial_s(slow_local, sixteen, 16, 0, 100000, 1, 4), 2 * one,
                1e-12, "k-nomial level by level, one node of 16: the root's two levels one "
                "after the other, 4's children beside the second");
}

static void test_eager_share(void) {
    het_netem ne = {.lat_s = 1e-3, .bw_bytes_per_s = 1e6};
    CHECK_CLOSE(het_netem_bcast_binomial_s(ne, two_by_two, 4, 1, 1000, 0), 5e-3, 1e-12,
                "eager, root 1: two sends at once share the uplink");
    CHECK_CLOSE(het_netem_bcast_binomial_s(ne, two_by_two, 4, 0, 1000, 0), 2e-3, 1e-12,
                "eager, root 0");
}

static void test_node_link(void) {
    het_netem ne = {.bw_bytes_per_s = 1e6, .node_lat_s = 1e-6, .node_bw_bytes_per_s = 1e9};
    CHECK_CLOSE(het_netem_bcast_binomial_s(ne, two_by_two, 4, 0, 100000, 1), 0.1 + 1e-6 + 1e-4,
                1e-12, "root 0 with the node link");
    CHECK_CLOSE(het_netem_bcast_binomial_s(ne, two_by_two, 4, 0, 100000, 0), 0.1, 1e-12,
                "root 0, node link off");
}

static void test_sixteen(void) {
    int node[16];
    for (int r = 0; r < 16; r++) node[r] = r / 4;
    het_netem ne = {.lat_s = 0.0, .bw_bytes_per_s = 1e6};
    double t0 = het_netem_bcast_binomial_s(ne, node, 16, 0, 100000, 0);
    CHECK_CLOSE(t0, 0.2, 1e-12, "16 ranks, root 0");
    CHECK_CLOSE(t0, het_netem_bcast_s(ne, 100000, 4), 1e-12, "root 0 = the tree over the nodes");
    double t1 = het_netem_bcast_binomial_s(ne, node, 16, 1, 100000, 0);
    CHECK(t1 > t0 + 0.05, "16 ranks, root 1: %.9g s, expected more than root 0's %.9g s", t1, t0);
}

static void test_factors(void) {
    het_netem ne = {.lat_s = 50e-6, .bw_bytes_per_s = 12.5e6};
    het_netem_use_smpi_factors(&ne);
    const int node[2] = {0, 1};
    for (size_t b = 1000; b <= 1000000; b *= 10)
        CHECK_CLOSE(het_netem_bcast_binomial_s(ne, node, 2, 0, b, 0), het_netem_p2p_s(ne, b), 1e-12,
                    "one message with SMPI's factors");
}

static void test_algo(void) {
#if defined(OPEN_MPI)
    static const struct {
        int p;
        size_t bytes;
        het_bc_algo want;
        const char *what;
    } rule[] = {
        {16, 247000, HET_BC_BINOMIAL, "16 ranks, 247 kB"},
        {16, 2000, HET_BC_KNOMIAL, "16 ranks, 2 kB"},
        {4, 247000, HET_BC_LINEAR, "4 ranks, 247 kB"},
        {4, 4000, HET_BC_BINOMIAL, "4 ranks, 4 kB"},
        {8, 247000, HET_BC_LINEAR, "8 ranks, 247 kB"},
        {64, 247000, HET_BC_KNOMIAL, "64 ranks"},
        {2, 600000, HET_BC_BINOMIAL, "2 ranks, 600 kB"},
        {4, 1078952, HET_BC_CHAIN, "4 ranks, 1.08 MB: chain"},
        {16, 1078952, HET_BC_SCATTER_ALLGATHER, "16 ranks, 1.08 MB: scatter + all-gather"},
        {3, 100000, HET_BC_BINTREE, "3 ranks, 100 kB"},
        {4, 1000, HET_BC_BINTREE, "4 ranks, 1 kB"},
        {100, 247000, HET_BC_KNOMIAL, "100 ranks"},
        {200, 20000, HET_BC_LINEAR, "200 ranks, 20 kB"},
        {200, 40000, HET_BC_BINTREE, "200 ranks, 40 kB"},
        {300, 20000, HET_BC_SPLIT_BINTREE, "300 ranks, 20 kB"},
        {1500, 600000, HET_BC_SCATTER_ALLGATHER, "1500 ranks"},
        {5000, 10000, HET_BC_BINTREE, "5000 ranks, 10 kB"},
        {5000, 300000, HET_BC_SCATTER_ALLGATHER, "5000 ranks, 300 kB"},
    };
    for (size_t i = 0; i < sizeof rule / sizeof rule[0]; i++)
        CHECK(het_netem_mpi_bcast_algo(rule[i].p, rule[i].bytes, 1) == rule[i].want, "%s",
              rule[i].what);
    /* MPI_Ibcast: libnbc's, by the communicator's size alone */
    CHECK(het_netem_mpi_bcast_algo(4, 1078952, 0) == HET_BC_LINEAR, "Ibcast, 4 ranks");
    CHECK(het_netem_mpi_bcast_algo(5, 100, 0) == HET_BC_NBC_BINOMIAL, "Ibcast, 5 ranks");
    CHECK(het_netem_mpi_bcast_algo(16, 1078952, 0) == HET_BC_NBC_BINOMIAL, "Ibcast, 16 ranks");
#else
    CHECK(het_netem_mpi_bcast_algo(4, 247000, 1) == HET_BC_BINOMIAL, "MPICH, 4 ranks");
    CHECK(het_netem_mpi_bcast_algo(16, 247000, 1) == HET_BC_SCATTER_ALLGATHER, "MPICH, 16 ranks");
#endif
    /* --bcast-model: the library's rules, or one algorithm for every size (SMPI's smpi/bcast) */
    het_netem ne = {.bw_bytes_per_s = 1.25e7, .lat_s = 5e-5};
    CHECK(het_netem_bcast_algo(ne, 4, 1078952, 1) == het_netem_mpi_bcast_algo(4, 1078952, 1),
          "rules: the library's algorithm");
    CHECK(het_netem_bcast_algo(ne, 16, 1078952, 0) == het_netem_mpi_bcast_algo(16, 1078952, 0),
          "rules: the library's non-blocking algorithm");
    ne.coll_smpi = 1; /* SMPI 3.32's MPI_Ibcast: the root sends to every rank */
    CHECK(het_netem_bcast_algo(ne, 16, 1078952, 0) == HET_BC_LINEAR, "SMPI's Ibcast: linear");
    CHECK(het_netem_bcast_algo(ne, 16, 1078952, 1) == het_netem_mpi_bcast_algo(16, 1078952, 1),
          "SMPI's Bcast: the rules");
    ne.coll_smpi = 0;
    ne.bcast = HET_NETEM_BCAST_LINEAR;
    CHECK(het_netem_bcast_algo(ne, 4, 1078952, 1) == HET_BC_LINEAR, "linear above 1 MiB");
    CHECK(het_netem_bcast_algo(ne, 16, 2000, 1) == HET_BC_LINEAR, "linear for 2 kB on 16 ranks");
    ne.bcast = HET_NETEM_BCAST_BINOMIAL;
    CHECK(het_netem_bcast_algo(ne, 4, 1078952, 1) == HET_BC_BINOMIAL, "binomial above 1 MiB");
    CHECK(het_netem_bcast_algo(ne, 64, 247000, 1) == HET_BC_BINOMIAL, "binomial on 64 ranks");
}

/* ResNet-20's parameters (1.08 MB) from the last of 4 ranks, one a node, 100 Mbit/s, as the
 * linear broadcast (--bcast-model linear; SMPI's flattree): the root's three messages share its
 * uplink and all end at lat + 3 bytes / bw. */
static void test_linear_big(void) {
    const int node[4] = {0, 1, 2, 3};
    het_netem ne = {.bw_bytes_per_s = 1.25e7, .lat_s = 5e-5};
    double b = 1078952.0, t = het_netem_bcast_linear_s(ne, node, 4, 3, (size_t)b, 1);
    CHECK(fabs(t - (5e-5 + 3 * b / 1.25e7)) < 1e-9, "linear, 1.08 MB to 3 nodes: %.6f s", t);
}

/* The chain (Open MPI's chain / pipeline): unsegmented, each hop waits for the whole buffer.
 * 2 + 2 ranks, 100 kB (T = 0.1 s across), node link off: root 0 goes 0 -> 1 (inside), 1 -> 2
 * (across), 2 -> 3 (inside): T; root 1 goes 1 -> 2 (across), 2 -> 3, 3 -> 0 (across): 2 T.
 * With the node link (1 ms + 100 kB at 100 MB/s = 2 ms a hop inside) root 0 adds two hops.
 * 3 ranks on 3 nodes in 2 segments of 50 kB (blocking from 64 KiB: 100 kB segments here, 200
 * kB in all): rank 1 passes segment 0 on (T to 2T) while the root sends segment 1 (T to 2T),
 * then segment 1 (2T to 3T): 3 T, where one segment takes 2 x 2 T. */
static void test_chain(void) {
    het_netem ne = {.lat_s = 0.0, .bw_bytes_per_s = 1e6};
    double T = 0.1;
    CHECK_CLOSE(het_netem_bcast_chain_s(ne, two_by_two, 4, 0, 100000, 0, 0), T, 1e-12,
                "chain, root 0");
    CHECK_CLOSE(het_netem_bcast_chain_s(ne, two_by_two, 4, 1, 100000, 0, 0), 2 * T, 1e-12,
                "chain, root 1");
    het_netem nl = {.bw_bytes_per_s = 1e6, .node_lat_s = 1e-3, .node_bw_bytes_per_s = 1e8};
    CHECK_CLOSE(het_netem_bcast_chain_s(nl, two_by_two, 4, 0, 100000, 1, 0), T + 2 * 2e-3, 1e-12,
                "chain, root 0, node link");
    const int three[3] = {0, 1, 2};
    CHECK_CLOSE(het_netem_bcast_chain_s(ne, three, 3, 0, 200000, 0, 0), 4 * T, 1e-12,
                "chain, one segment");
    CHECK_CLOSE(het_netem_bcast_chain_s(ne, three, 3, 0, 200000, 0, 100000), 3 * T, 1e-12,
                "chain, two segments");
    CHECK(het_netem_bcast_chain_s(ne, three, 1, 0, 200000, 0, 0) == 0.0, "chain, one rank");
}

/* Scatter + all-gather, 400 kB (blocks of 100 kB, T each across):
 * - 4 ranks on 4 nodes: the root sends 2 blocks to rank 2 (0 to 2T), then 1 to rank 1 (2T to
 *   3T) while rank 2 sends 1 to rank 3 (2T to 3T); recursive doubling: 1 block each way
 *   between 0-1 and 2-3 (3T to 4T), then 2 blocks between 0-2 and 1-3 (4T to 6T): 6 T;
 * - 2 + 2 ranks: 0 -> 2 (2T), the rest of the scatter and the first exchange inside the nodes
 *   (free), then 0 <-> 2 and 1 <-> 3 share the nodes' links, 2 blocks each at half: 6 T;
 * - 2 ranks of one node with the node link: a block there and a block back, each at its own
 *   size: 2 (node_lat + 200 kB / node_bw);
 * - 3 ranks on 3 nodes (not a power of two; blocks of 133334 bytes, the last 133332): 0 -> 2
 *   (the last block), 0 -> 1 (one), 0 <-> 1 (one each way), 0 <-> 2 (two out, one in), then
 *   rank 1, whose partner 3 does not exist, gets the last block from rank 0: 0.8 s. */
static void test_scatter_allgather(void) {
    het_netem ne = {.lat_s = 0.0, .bw_bytes_per_s = 1e6};
    double T = 0.1;
    const int four[4] = {0, 1, 2, 3};
    CHECK_CLOSE(het_netem_bcast_scatter_allgather_s(ne, four, 4, 0, 400000, 0), 6 * T, 1e-12,
                "scatter + all-gather, 4 nodes");
    CHECK_CLOSE(het_netem_bcast_scatter_allgather_s(ne, four, 4, 2, 400000, 0), 6 * T, 1e-12,
                "scatter + all-gather, 4 nodes, root 2");
    CHECK_CLOSE(het_netem_bcast_scatter_allgather_s(ne, two_by_two, 4, 0, 400000, 0), 6 * T,
                1e-12, "scatter + all-gather, 2 + 2");
    /* inside one node, with the node link: each message costs its own size (a block) */
    const int one_node[2] = {0, 0};
    het_netem nl = {.bw_bytes_per_s = 1e6, .node_lat_s = 1e-3, .node_bw_bytes_per_s = 1e8};
    CHECK_CLOSE(het_netem_bcast_scatter_allgather_s(nl, one_node, 2, 0, 400000, 1),
                2 * (1e-3 + 200000 / 1e8), 1e-12, "scatter + all-gather inside a node");
    const int three[3] = {0, 1, 2};
    double b = 133334e-6, last = 133332e-6; /* a block's seconds */
    double want = last + b + b + 2 * b + last;
    double got = het_netem_bcast_scatter_allgather_s(ne, three, 3, 0, 400000, 0);
    CHECK(fabs(got - want) < 1e-9, "scatter + all-gather, 3 ranks: %.9f s, expected %.9f", got,
          want);
}

/* libnbc's binomial tree (MPI_Ibcast), 8 ranks on 8 nodes, 100 kB: the root posts its sends to
 * 1, 2 and 4 at once (they share its uplink: 3 T), then rank 1 to 3 and 5 (3T to 5T) and rank
 * 2 to 6 (3T to 4T), then rank 3 to 7 (5T to 6T): 6 T. Root 5: ranks 0 and 5 swap places. */
static void test_nbc_binomial(void) {
    het_netem ne = {.lat_s = 0.0, .bw_bytes_per_s = 1e6};
    double T = 0.1;
    const int eight[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    CHECK_CLOSE(het_netem_bcast_nbc_binomial_s(ne, eight, 8, 0, 100000, 0), 6 * T, 1e-12,
                "libnbc binomial, root 0");
    CHECK_CLOSE(het_netem_bcast_nbc_binomial_s(ne, eight, 8, 5, 100000, 0), 6 * T, 1e-12,
                "libnbc binomial, root 5");
    /* 4 + 4 ranks: ranks 1, 2, 3 have the data at once (inside the node, free), and 0 -> 4,
     * 1 -> 5, 2 -> 6, 3 -> 7 all cross together on node 0's uplink: 4 T, where the binomial tree
     * of coll/tuned crosses once (0 -> 4, then inside node 1) */
    const int two_by_four[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    CHECK_CLOSE(het_netem_bcast_nbc_binomial_s(ne, two_by_four, 8, 0, 100000, 0), 4 * T, 1e-12,
                "libnbc binomial, 4 + 4");
    CHECK_CLOSE(het_netem_bcast_binomial_s(ne, two_by_four, 8, 0, 100000, 0), T, 1e-12,
                "coll/tuned binomial, 4 + 4");
}

/* Open MPI's binomial tree (parent: x with its highest bit cleared; sends to x + 2^k for every
 * 2^k > x posted at once), 100 kB (T = 0.1 s across):
 * - 2 + 2 ranks, root 0: 0 -> 2 and 1 -> 3 (1 has the data at once, inside the node) leave node
 *   0 together: 2 T (MPICH's tree: T, one message across);
 * - 4 x 4 ranks, root 0: ranks 0-3 have the data at once and send 8 messages across together
 *   (0 -> 4, 8; 1 -> 5, 9; 2 -> 6, 10; 3 -> 7, 11): 8 T; then 4-7 send to 12-15 from node 1: 4 T
 *   more, 12 T in all (MPICH's tree: 2 T);
 * - 8 ranks a node each: libnbc's tree from root 0 (the same tree), 6 T; 3 ranks: the root's
 *   two sends share its uplink, 2 T (no child past the last rank);
 * - which the model charges: Open MPI's tree under Open MPI's rules, MPICH's with --coll-model
 *   smpi or --bcast-model binomial (SMPI's binomial_tree). */
static void test_ompi_binomial(void) {
    het_netem ne = {.lat_s = 0.0, .bw_bytes_per_s = 1e6};
    double T = 0.1;
    CHECK_CLOSE(het_netem_bcast_ompi_binomial_s(ne, two_by_two, 4, 0, 100000, 0), 2 * T, 1e-12,
                "Open MPI's binomial tree, 2 + 2");
    int sixteen[16], eight[8];
    for (int r = 0; r < 16; r++) sixteen[r] = r / 4;
    for (int r = 0; r < 8; r++) eight[r] = r;
    CHECK_CLOSE(het_netem_bcast_ompi_binomial_s(ne, sixteen, 16, 0, 100000, 0), 12 * T, 1e-12,
                "Open MPI's binomial tree, 4 x 4");
    CHECK_CLOSE(het_netem_bcast_binomial_s(ne, sixteen, 16, 0, 100000, 0), 2 * T, 1e-12,
                "MPICH's binomial tree, 4 x 4");
    CHECK_CLOSE(het_netem_bcast_ompi_binomial_s(ne, eight, 8, 0, 100000, 0),
                het_netem_bcast_nbc_binomial_s(ne, eight, 8, 0, 100000, 0), 1e-15,
                "Open MPI's binomial tree = libnbc's from root 0");
    CHECK_CLOSE(het_netem_bcast_ompi_binomial_s(ne, eight, 8, 0, 100000, 0), 6 * T, 1e-12,
                "Open MPI's binomial tree, 8 nodes");
    /* 3 ranks (not a power of two): the root's two sends, nothing from rank 1 (1 + 2 = p) */
    CHECK_CLOSE(het_netem_bcast_ompi_binomial_s(ne, eight, 3, 0, 100000, 0), 2 * T, 1e-12,
                "Open MPI's binomial tree, 3 nodes");
    het_netem smpi = ne;
    smpi.coll_smpi = 1;
    CHECK(!het_netem_bcast_ompi_tree(smpi), "--coll-model smpi: MPICH's tree, as SMPI runs it");
    het_netem forced = ne;
    forced.bcast = HET_NETEM_BCAST_BINOMIAL;
    CHECK(!het_netem_bcast_ompi_tree(forced), "--bcast-model binomial: SMPI's binomial_tree");
#if defined(OPEN_MPI)
    CHECK(het_netem_bcast_ompi_tree(ne), "Open MPI: its own tree");
#else
    CHECK(!het_netem_bcast_ompi_tree(ne), "MPICH: its tree");
#endif
}

/* Open MPI's binary tree (levels {0}, {1, 2}, {3 .. 6}; x on level l sends to x + 2^l and
 * x + 2^(l+1) at once), 100 kB (T = 0.1 s across):
 * - 2 + 2 ranks, root 0: 0 -> 1 inside (free), then 0 -> 2 and 1 -> 3 both leave node 0: 2 T
 *   (the binomial tree: T, one message across);
 * - 8 ranks on 4 nodes (2 each), root 0: 0 -> 2, 1 -> 3 and 1 -> 5 share node 0's uplink
 *   (3 T), then 2 -> 4, 2 -> 6 and 3 -> 7 share node 1's (3 T more): 6 T. */
static void test_bintree(void) {
    het_netem ne = {.lat_s = 0.0, .bw_bytes_per_s = 1e6};
    double T = 0.1;
    CHECK_CLOSE(het_netem_bcast_bintree_s(ne, two_by_two, 4, 0, 100000, 0), 2 * T, 1e-12,
                "binary tree, 2 + 2");
    int eight[8];
    for (int r = 0; r < 8; r++) eight[r] = r / 2;
    CHECK_CLOSE(het_netem_bcast_bintree_s(ne, eight, 8, 0, 100000, 0), 6 * T, 1e-12,
                "binary tree, 8 ranks on 4 nodes");
    /* root 2 (relative ranks rotate): the same shape from ranks 2, 3, 0, 1 */
    CHECK_CLOSE(het_netem_bcast_bintree_s(ne, two_by_two, 4, 2, 100000, 0), 2 * T, 1e-12,
                "binary tree, 2 + 2, root 2");
    CHECK(het_netem_bcast_bintree_s(ne, two_by_two, 1, 0, 100000, 0) == 0.0, "one rank");
}

/* The split binary tree, 200 kB (halves of 100 kB: T each across), a rank a node:
 * - 4 ranks, root 0: the root sends half 0 to rank 1 (0 to T), then half 1 to rank 2 (T to
 *   2T) while rank 1 passes half 0 to rank 3 (T to 2T); then 1 <-> 2 exchange their halves and
 *   the root sends half 1 to rank 3 (the last rank of an even count), all on separate links:
 *   3 T, where the chain takes 6 T and the binary tree 6 T;
 * - 3 ranks: the root's two sends (2 T), then 1 <-> 2 exchange (the receive of rank 2 is
 *   posted at 2T): 3 T;
 * - latency 1 ms, 400 kB (halves of 2 T): in one segment the root's sends end at 2 L + 4 T (rank
 *   1's to rank 3 too, from L + 2 T), the root's half to rank 3 at 3 L + 6 T; in segments of
 *   100 kB the root sends 4 messages (4 L + 4 T), rank 1 passes each on behind it, and the
 *   exchange ends at 5 L + 6 T;
 * - 1 byte cannot be split, nor halves smaller than a segment: the chain's time. */
static void test_split_bintree(void) {
    het_netem ne = {.lat_s = 0.0, .bw_bytes_per_s = 1e6};
    double T = 0.1;
    const int four[4] = {0, 1, 2, 3};
    CHECK_CLOSE(het_netem_bcast_split_bintree_s(ne, four, 4, 0, 200000, 0, 0), 3 * T, 1e-12,
                "split binary tree, 4 nodes");
    CHECK_CLOSE(het_netem_bcast_chain_s(ne, four, 4, 0, 200000, 0, 0), 6 * T, 1e-12,
                "chain, 4 nodes, 200 kB");
    CHECK_CLOSE(het_netem_bcast_bintree_s(ne, four, 4, 0, 200000, 0), 6 * T, 1e-12,
                "binary tree, 4 nodes, 200 kB");
    CHECK_CLOSE(het_netem_bcast_split_bintree_s(ne, four, 3, 0, 200000, 0, 0), 3 * T, 1e-12,
                "split binary tree, 3 nodes");
    CHECK_CLOSE(het_netem_bcast_split_bintree_s(ne, four, 4, 3, 200000, 0, 0), 3 * T, 1e-12,
                "split binary tree, 4 nodes, root 3");
    het_netem lat = {.lat_s = 1e-3, .bw_bytes_per_s = 1e6};
    double L = 1e-3;
    CHECK_CLOSE(het_netem_bcast_split_bintree_s(lat, four, 4, 0, 400000, 0, 0), 3 * L + 6 * T,
                1e-12, "split binary tree, 400 kB in one segment a half");
    CHECK_CLOSE(het_netem_bcast_split_bintree_s(lat, four, 4, 0, 400000, 0, 100000),
                5 * L + 6 * T, 1e-12, "split binary tree, 400 kB in segments of 100 kB");
    CHECK_CLOSE(het_netem_bcast_split_bintree_s(lat, four, 4, 0, 400000, 0, 300000),
                het_netem_bcast_chain_s(lat, four, 4, 0, 400000, 0, 300000), 1e-15,
                "split binary tree, a segment larger than a half: the chain");
    CHECK_CLOSE(het_netem_bcast_split_bintree_s(lat, four, 3, 0, 1, 0, 0),
                het_netem_bcast_chain_s(lat, four, 3, 0, 1, 0, 0), 1e-15,
                "split binary tree of 1 byte: the chain");
}

int main(void) {
    test_ompi_binomial();
    test_bintree();
    test_split_bintree();
    test_chain();
    test_scatter_allgather();
    test_nbc_binomial();
    test_roots();
    test_linear();
    test_knomial();
    test_eager_share();
    test_node_link();
    test_sixteen();
    test_factors();
    test_algo();
    test_linear_big();
    return het_test_finish("test_bcast");
}

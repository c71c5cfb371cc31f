/* hetrain emul: how hetrain pretends to be another cluster. Three pieces live in src/emul/:
 *  - the network cost model (netem.c): what a collective costs between nodes joined by links of
 *    a given latency and bandwidth, for the algorithm the MPI library runs, and between the
 *    ranks of one node (the node link, charged under the virtual clock);
 *  - the per-rank slowdown (slowdown.c): a compute piece of a rank with factor f costs f times
 *    its own time (on the wall clock by sleeping, on the virtual clock by charging);
 *  - the clock (clock.c): wall (CLOCK_MONOTONIC, the emulation sleeps) or virtual (each lane,
 *    a thread of a rank, keeps a time V in seconds that compute pieces and communications
 *    advance; nothing sleeps, so time figures do not depend on how many cores the host has).
 * Below comm/ (which charges operations through the cost model and the clock) and beside it;
 * no MPI calls here (netem.c reads mpi.h only to know which library's algorithms to cost).
 * The clock's kind is process-wide, as MPI's settings are (one rank is one process); its time
 * is a value per thread (het_lane). */
#ifndef HETRAIN_EMUL_H
#define HETRAIN_EMUL_H

#include <stddef.h>

#include "hetrain/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- emulated network (off when bw_bytes_per_s == 0 and lat_s == 0) ---- */
/* A piecewise factor of the message size, as SMPI's smpi/lat-factor and smpi/bw-factor: a
 * message of s bytes takes the factor of the largest `from` <= s (1 below the first; n = 0:
 * 1 everywhere). SMPI's calibration of MPI over TCP: a message's latency x its lat factor, its
 * bandwidth x its bw factor (MPI's eager and rendezvous protocols, per-message overheads). */
enum { HET_NETEM_PIECES = 16 };
typedef struct het_netem_pw {
    int n;
    double from[HET_NETEM_PIECES], val[HET_NETEM_PIECES]; /* from ascending */
} het_netem_pw;
/* Parses SimGrid's "65472:0.94;15424:0.70;0:0.81" (any order; at most HET_NETEM_PIECES):
 * HET_OK, else HET_EINVAL with what was expected. */
int het_netem_pw_parse(het_netem_pw *pw, const char *text);
/* SMPI 3.32's default factors (its calibrated model; --cfg=smpi/lat-factor, bw-factor). */
extern const char het_netem_smpi_lat_factor[], het_netem_smpi_bw_factor[];
double het_netem_pw_at(const het_netem_pw *pw, double bytes);
/* 1 when pw is 1 at every size (n = 0, or every piece 1: "0:1", which a platform file holds to
 * tell SMPI to run the plain model): the model charges no factors then, to the last bit. */
int het_netem_pw_identity(const het_netem_pw *pw);

typedef struct het_netem {
    double lat_s;           /* per-message latency, seconds */
    double bw_bytes_per_s;  /* link bandwidth, bytes/s; 0 = infinite */
    /* The links between ranks of one node, charged under the virtual clock only (on the wall
     * clock the real shared-memory MPI time is that cost): 0 and 0 = free. The command line's
     * defaults (--node-bw 10G, --node-lat 1e-6) are the order of Open MPI's shared-memory
     * transport on one host (MEASURED.md: memcpy 11.4 GB/s on one core). */
    double node_lat_s;
    double node_bw_bytes_per_s;
    /* virtual clock: every message's latency x lat_factor(its bytes) and bandwidth x
     * bw_factor(its bytes), between nodes and inside one (a platform file's smpi/lat-factor
     * and smpi/bw-factor); n = 0: none */
    het_netem_pw lat_factor, bw_factor;
    /* virtual clock: a point-to-point message of at least rndv_bytes bytes moves only once
     * its receive is posted (MPI's rendezvous protocol: the payload waits for the receiver),
     * a smaller one when it is sent (eager); 0: every message when it is sent. A platform file
     * sets it from smpi/async-small-thresh as SMPI does (absent, SMPI's 0: every message with
     * a payload waits, rndv_bytes 1); the command line's model leaves it 0. */
    double rndv_bytes;
    /* virtual clock: 1 charges the collectives that SimGrid SMPI 3.32 runs with another
     * algorithm than Open MPI as SMPI runs them, for comparing with SMPI: a non-blocking
     * all-reduce as the linear exchange (HET_AR_LINEAR), the k-nomial broadcast level by level
     * (MVAPICH2's, which SMPI's "ompi" selector runs for Open MPI's k-nomial); 0 (default) as
     * the MPI library runs them. The calls themselves are not changed. */
    int coll_smpi;
    /* virtual clock: the broadcast algorithm charged, HET_NETEM_BCAST_*: the MPI library's
     * rules by size (0, default), or the linear one / the binomial tree for every size, as
     * SimGrid SMPI runs them under smpi/bcast:flattree / binomial_tree (which apply to every
     * size, where the library's rules change algorithm with it). The calls are not changed. */
    int bcast;
    /* virtual clock: 1 has every flow between nodes of a collective also take HET_NETEM_BACK
     * of its rate on the way back (SimGrid's network/crosstraffic, on in SMPI's default model:
     * TCP's acknowledgements), so an exchange in both directions at once runs 1 / 1.05 of the
     * link each way; 0 off. On with --net-factors smpi; a platform file's network/crosstraffic
     * (absent: on where the model has SMPI's factors). Point-to-point messages: with the
     * arbiter. */
    int crosstraffic;
    /* virtual clock: 1 has the arbiter (emul/arbiter.c, served by world rank 0:
     * comm/arb_svc.c) carry the point-to-point messages between nodes as flows that share the
     * nodes' links with every rank's (--p2p-model arbiter); 0 (default) the local rules. */
    int arbiter;
} het_netem;
/* Sets ne to SMPI's default network model: its factors (het_netem_smpi_lat_factor,
 * _bw_factor) and cross-traffic. */
void het_netem_use_smpi_factors(het_netem *ne);

/* Modeled time of an all-reduce of `bytes` across `n_nodes` nodes (ring: 2(N-1) messages of
 * bytes/N each way): 2(N-1) lat + 2(N-1)/N bytes/bw. 0 when n_nodes <= 1 or the model is off. */
double het_netem_allreduce_s(het_netem ne, size_t bytes, int n_nodes);
/* Modeled time of a ring all-reduce over p ranks in their order on the ring (what MPI runs for
 * these sizes), of which at most `crossings` ring edges leave any one node: 2(p-1) steps, each
 * rank sending bytes/p to the next, so a node's link carries crossings x bytes/p a step (full
 * duplex): 2(p-1) lat + 2(p-1)/p crossings bytes/bw. One rank per node (p = N, crossings 1) is
 * het_netem_allreduce_s; 2 + 2 ranks in block order cross once per node, interleaved twice.
 * 0 when p <= 1, crossings <= 0 or the model is off. */
double het_netem_ring_allreduce_s(het_netem ne, size_t bytes, int p, int crossings);
/* At most how many edges of the ring node[0] -> node[1] -> ... -> node[n-1] -> node[0] leave
 * one node (node ids of the members in ring order, 0 <= id < n). */
int het_netem_ring_crossings(const int *node, int n);
/* The all-reduce algorithms MPI libraries run, as the model charges them: the ring
 * (reduce-scatter + all-gather around the ranks in order; also the segmented ring), Rabenseifner's
 * recursive halving + doubling (reduce-scatter, then all-gather, partners at distance 1, 2, 4 ...
 * then back) and recursive doubling (whole buffers, partners at distance 1, 2, 4 ...). For p not
 * a power of two the last two first fold the p - 2^floor(log2 p) extra ranks in and send them
 * the result at the end (modeled as rank 2i sending its whole buffer to 2i + 1, and back).
 * The linear exchange: one step in which every rank sends its whole buffer to every other and
 * sums what it received (SimGrid SMPI 3.32's MPI_Iallreduce; Open MPI runs no such one). */
typedef enum { HET_AR_RING, HET_AR_RSAG, HET_AR_RDBL, HET_AR_LINEAR, HET_AR_N } het_ar_algo;
/* An algorithm's cost over given ranks: `steps` in which some message crosses between nodes
 * (each costs one latency) and `load`, the sum over those steps of the most any node's link
 * carries in one direction, in buffers (full duplex; bytes between ranks of a node are free);
 * `load_x` the same with cross-traffic (het_netem.crosstraffic): a node's way out also carries
 * HET_NETEM_BACK of what comes in, its way in HET_NETEM_BACK of what goes out. */
enum { HET_NETEM_GROUPS = 32 };
#define HET_NETEM_BACK 0.05 /* SimGrid's cross-traffic: a flow's weight on its back route */
typedef struct het_netem_cost {
    double steps, load, load_x;
    /* the same steps grouped by their messages' size (a fraction of the buffer), for the
     * size-dependent factors: count steps, their load in buffers */
    int n_groups;
    struct {
        double frac, count, load, load_x;
    } g[HET_NETEM_GROUPS];
} het_netem_cost;
/* The cost of algorithm a over p ranks, rank r on node node[r] (ids >= 0). */
het_netem_cost het_netem_allreduce_cost(const int *node, int p, het_ar_algo a);
/* The node-local part of the same algorithm: the steps in which a message moves between two
 * ranks of one node and, summed over them, the most one rank sends or receives in such
 * messages in one step, in buffers (each rank has its own path to the shared memory). Costed
 * with the node link, added to the cross-node cost (an upper bound where both overlap in one
 * step; the node link is the faster by far). */
het_netem_cost het_netem_allreduce_cost_local(const int *node, int p, het_ar_algo a);
/* Seconds of a node-local cost k: steps node_lat + load bytes/node_bw; 0 with the node link
 * off (both 0). */
double het_netem_local_cost_s(het_netem ne, het_netem_cost k, size_t bytes);
/* Seconds of cost k for a buffer of `bytes`: steps lat + load bytes/bw; 0 with the model off. */
double het_netem_cost_s(het_netem ne, het_netem_cost k, size_t bytes);
/* The algorithm this MPI library runs for an all-reduce (SUM, commutative) of `bytes` over p
 * ranks: blocking = MPI_Allreduce, else MPI_Iallreduce. Open MPI 4.1: the non-blocking one is
 * libnbc's ring (comm.c selects it); the blocking one follows coll/tuned's fixed rules, the
 * whole table (p = 4..7: recursive doubling below 8 KiB, Rabenseifner from there; p = 2, 3: by
 * the size table, Rabenseifner from 256 KiB; 16..31: Rabenseifner from 4 KiB; 32..63 from 128
 * bytes; 64..255: recursive doubling below 256 KiB; ...). MPICH 4: recursive doubling up to 2 KiB or fewer floats than ranks, else Rabenseifner. */
het_ar_algo het_netem_mpi_allreduce_algo(int p, size_t bytes, int blocking);
/* The algorithm the model charges: HET_AR_LINEAR for a non-blocking one when ne.coll_smpi,
 * else het_netem_mpi_allreduce_algo's. */
het_ar_algo het_netem_allreduce_algo(het_netem ne, int p, size_t bytes, int blocking);
/* Modeled time of the all-reduce MPI runs (het_netem_mpi_allreduce_algo) over n_nodes ranks,
 * one per node: under Open MPI the non-blocking one is het_netem_allreduce_s. */
double het_netem_nodes_allreduce_s(het_netem ne, size_t bytes, int n_nodes, int blocking);
/* Modeled time of a broadcast: ceil(log2 N) (lat + bytes/bw). */
double het_netem_bcast_s(het_netem ne, size_t bytes, int n_nodes);
/* The broadcast algorithms of MPI libraries (src/emul/bcast.c): the linear one (the root sends
 * to every rank; SMPI runs a pipelined chain for it), a chain and a segmented pipeline, the
 * split binary tree, the binary tree, the binomial tree, k-nomial trees, scatter + all-gather. */
typedef enum {
    HET_BC_LINEAR, HET_BC_CHAIN, HET_BC_PIPELINE, HET_BC_SPLIT_BINTREE, HET_BC_BINTREE,
    HET_BC_BINOMIAL, HET_BC_KNOMIAL, HET_BC_SCATTER_ALLGATHER,
    HET_BC_NBC_BINOMIAL, /* libnbc's binomial tree (Open MPI's MPI_Ibcast on more than 4 ranks) */
    HET_BC_N
} het_bc_algo;
/* The algorithm this MPI library runs for a broadcast of `bytes` over p ranks: blocking =
 * MPI_Bcast, else MPI_Ibcast. Open MPI 4.1: MPI_Bcast follows coll/tuned's fixed rules (as
 * SMPI's "ompi" selector), MPI_Ibcast libnbc's (its default skips the size: the linear one on up
 * to 4 ranks, its binomial tree above); MPICH 4's rule for both otherwise. */
het_bc_algo het_netem_mpi_bcast_algo(int p, size_t bytes, int blocking);
enum { HET_NETEM_BCAST_RULES, HET_NETEM_BCAST_LINEAR, HET_NETEM_BCAST_BINOMIAL };
/* The algorithm the model charges for that broadcast: ne.bcast's, else the library's (with
 * ne.coll_smpi a non-blocking one as SMPI 3.32 runs it: the linear one). */
het_bc_algo het_netem_bcast_algo(het_netem ne, int p, size_t bytes, int blocking);
/* Modeled time of a binomial-tree broadcast of `bytes` from root over p ranks, rank r on node
 * node[r] (ids >= 0): its messages between nodes as flows sharing the nodes' up- and downlinks
 * (max-min), those inside a node on the node link when local_on (virtual clock), blocking sends
 * from 64 KiB; until the last rank has the data. 0 for p <= 1; negative when out of memory. */
double het_netem_bcast_binomial_s(het_netem ne, const int *node, int p, int root, size_t bytes,
                                  int local_on);
/* The same for the linear broadcast (Open MPI's basic_linear): the root's non-blocking sends to
 * every other rank at once, those between nodes sharing the root node's uplink. */
double het_netem_bcast_linear_s(het_netem ne, const int *node, int p, int root, size_t bytes,
                                int local_on);
/* The same for a k-nomial tree of `radix` (Open MPI's knomial, radix 4 by default): rank x's
 * children are x + j radix^l (j = 1 .. radix - 1, the farthest level first), and a rank posts
 * its sends to all of them at once when it has the data (Open MPI's generic tree broadcast,
 * unsegmented); with ne.coll_smpi one level's sends at once, all of them in before the next
 * level's (MVAPICH2's, which SMPI 3.32 runs). Radix 2 is het_netem_bcast_binomial_s. */
double het_netem_bcast_knomial_s(het_netem ne, const int *node, int p, int root, size_t bytes,
                                 int local_on, int radix);
/* The same for the algorithms run rank by rank (src/emul/bcast_sched.c says how): the chain
 * (ranks root, root + 1, ... pass each segment of `seg` bytes on; 0: the whole buffer in one,
 * Open MPI 4.1's fixed rules), scatter + all-gather (a binomial scatter of blocks of
 * ceil(bytes / p), then recursive doubling) and libnbc's binomial tree (a rank's sends to all its
 * children posted at once). Negative when out of memory. */
double het_netem_bcast_chain_s(het_netem ne, const int *node, int p, int root, size_t bytes,
                               int local_on, size_t seg);
double het_netem_bcast_scatter_allgather_s(het_netem ne, const int *node, int p, int root,
                                           size_t bytes, int local_on);
double het_netem_bcast_nbc_binomial_s(het_netem ne, const int *node, int p, int root,
                                      size_t bytes, int local_on);
/* The same for Open MPI's binomial tree (topo_build_bmtree: x's parent is x with its highest
 * bit cleared, its children x + 2^k for 2^k > x, all posted at once), which is not MPICH's
 * (het_netem_bcast_binomial_s); het_netem_bcast_ompi_tree says which one the model charges. */
double het_netem_bcast_ompi_binomial_s(het_netem ne, const int *node, int p, int root,
                                       size_t bytes, int local_on);
/* 1: a binomial broadcast is Open MPI's (built with Open MPI, ne.coll_smpi off, ne.bcast the
 * library's rules); 0: MPICH's, as MPICH and SMPI 3.32 (smpi/bcast:binomial_tree, and its "ompi"
 * selector where Open MPI's rules say binomial) run it. */
int het_netem_bcast_ompi_tree(het_netem ne);
/* The same for Open MPI's binary tree (a rank's sends to both children posted at once) and its
 * split binary tree (each half down one subtree in segments of `seg` bytes, 0: one, then an
 * exchange of halves between pairs). */
double het_netem_bcast_bintree_s(het_netem ne, const int *node, int p, int root, size_t bytes,
                                 int local_on);
double het_netem_bcast_split_bintree_s(het_netem ne, const int *node, int p, int root,
                                       size_t bytes, int local_on, size_t seg);
/* Modeled time of one point-to-point message between nodes: lat + bytes/bw. */
double het_netem_p2p_s(het_netem ne, size_t bytes);
/* The time a message of `bytes` keeps the link busy: bytes / (bw x bw_factor); 0 with the model
 * off or an infinite bandwidth. */
double het_netem_wire_s(het_netem ne, size_t bytes);
/* The node link's broadcast over `ranks` ranks of one node: ceil(log2 ranks) (node_lat +
 * bytes/node_bw); 0 for one rank or the node link off. */
double het_netem_local_bcast_s(het_netem ne, size_t bytes, int ranks);

/* ---- platform files (platform.c) ----
 * A cluster described in SimGrid's platform XML (version 4; the subset platform.c's opening
 * comment lists), the same file smpirun takes. What hetrain keeps: the hosts and, for every
 * pair of hosts, the route's latency (sum of its links') and bandwidth (least of its links');
 * a host to itself is its loopback. A host is a node: the ranks on it share it. */
#define HET_PLAT_NAME 64
typedef struct het_plat_host {
    char name[HET_PLAT_NAME];
    double speed;  /* flop/s (its first power state) */
    int cores;     /* ranks it takes without a hostfile */
    int line;      /* where it was declared */
} het_plat_host;
typedef struct het_platform {
    char file[HET_PATH_LEN];
    int n_hosts;
    het_plat_host *hosts;
    double *lat, *bw; /* n_hosts x n_hosts: route latency (s) and bandwidth (bytes/s) */
    het_netem_pw lat_factor, bw_factor; /* <config>'s smpi/lat-factor, smpi/bw-factor (n = 0:
                                           not given) */
    double async_small;  /* <config>'s smpi/async-small-thresh: messages below it are sent
                          * without waiting for their receive (SMPI's default 0: none) */
    int crosstraffic;    /* <config>'s network/crosstraffic: 1 on, 0 off, -1 not given */
} het_platform;
/* Reads a platform file: HET_EIO (cannot open, not a regular file), HET_EFORMAT with
 * "FILE:LINE: <element>: ..." for what is not in the subset or is wrong. */
int  het_platform_read(het_platform *p, const char *path);
void het_platform_free(het_platform *p);
/* Ranks on hosts: a hostfile (one host name a line, or HOST:N for N ranks; rank r on the r-th
 * name, as smpirun's -hostfile) or, hostfile NULL or "", `cores` ranks to each host in the
 * order declared. host_of[0..n_ranks). HET_EFORMAT / HET_EINVAL with a line. */
int  het_platform_place(const het_platform *p, const char *hostfile, int n_ranks, int *host_of);
/* The network model's links for ranks placed on hosts: between nodes the slowest route any two
 * ranks on different hosts use (latency the most, bandwidth the least), inside a node the
 * slowest loopback. *uniform = 1 when every such route (and loopback) is the same, so that the
 * model's one link is exactly the platform's; 0 when the platform's routes differ. */
int  het_platform_netem(const het_platform *p, const int *host_of, int n_ranks, het_netem *ne,
                        int *uniform);
/* A speed as a platform file writes it ("74.6Gf", "1e9f", "2e9"): 0, or -1 if it is not one. */
int  het_platform_parse_speed(const char *text, double *flops);
/* Writes a platform of n_nodes hosts "node0" ... (speeds in flop/s, cores) in one Full zone:
 * each node a private split-duplex link of the model's bandwidth and half its latency (a route
 * between two nodes is two of them) and a loopback of the node link; and, if hostfile is not
 * NULL or "", a hostfile: rank r on node node_of_rank[r]. Both replaced durably (a temporary
 * file, fsynced, renamed, the directory fsynced). HET_EIO. */
int  het_platform_write(const char *path, const char *hostfile, const char *comment, int n_nodes,
                        const double *speed, const int *cores, het_netem ne,
                        const int *node_of_rank, int n_ranks);

/* ---- the clock (clock.c) ----
 * HET_CLOCK_WALL: every thread's time is het_now(); the emulation sleeps. HET_CLOCK_VIRTUAL:
 * time is a value each lane carries (het_lane below), seconds since it started; a compute
 * piece adds its cost x the rank's slowdown, an operation ends at (the latest participant's
 * time when it posted) + the cost model's time, and a wait sets the time to max(time, that
 * end). Virtual time never changes the arithmetic. Which of the two runs is a setting of the
 * process, as MPI's thread level is; the time itself is no global. */
typedef enum { HET_CLOCK_WALL = 0, HET_CLOCK_VIRTUAL = 1 } het_clock_kind;
/* Selects the clock of this process (before any lane reads it). */
void   het_clock_use(het_clock_kind k);
/* 1 under the virtual clock. */
int    het_clock_virtual(void);

/* A lane: a thread of a rank with a time of its own, passed to every call that reads or
 * advances that time. The rank's main loop has one (het_strategy_ctx.lane: the trainer's, which
 * its comm charges, het_comm_set_lane), so do each of qfb's forward and backward threads and
 * inhad's aggregator; each is owned by whoever runs that thread, and nothing else writes it.
 * `t` is the lane's virtual time V (starts at 0: HET_LANE_START); on the wall clock every
 * lane reads het_now() and t stays unused. `tid` is the thread's row in a trace (HET_TID_*). */
typedef struct het_lane {
    double t;
    int tid;
} het_lane;
#define HET_LANE_START ((het_lane){0.0, 0})
/* The lane's time in seconds: het_now() on the wall clock, V on the virtual one. */
double het_lane_now(const het_lane *l);
/* Virtual clock: V += dt (dt > 0); nothing on the wall clock. */
void   het_lane_advance(het_lane *l, double dt);
/* Virtual clock: V = max(V, t); nothing on the wall clock. */
void   het_lane_advance_to(het_lane *l, double t);
/* Virtual clock: V = t, also back in time: what ran since V was t is charged to no clock (the
 * test accuracy inside an epoch, --eval-every); nothing on the wall clock. */
void   het_lane_rewind(het_lane *l, double t);

#ifdef __cplusplus
}
#endif
#endif

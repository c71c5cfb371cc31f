/* The trainer's cluster (trainer.c's create calls these): this rank's slowdown, the topology
 * (real nodes, emulated ones, or a platform file's hosts), the comm with its network model,
 * how the wall clock's emulation waits, the compute-cost table and, on a platform, the virtual
 * clock's rescaling of compute by the hosts' speeds. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emul/emul.h"
#include "hetero/hetero.h"
#include "hetrain/tensor.h"
#include "train/trainer.h"

/* The compute-cost table: rank 0 measures it (file NULL) or reads it; every rank charges it. */
int het_trainer_costs_setup(het_trainer *t, const char *file, int shipped) {
    het_strategy_ctx *c = &t->ctx;
    double t0 = het_now();
    int st = het_step_costs_setup(c, &t->costs, file, shipped);
    if (st) return st;
    const het_costs *k = &t->costs;
    char from[HET_PATH_LEN + 32];
    if (shipped) snprintf(from, sizeof from, "the shipped table of %s", k->model);
    else if (file) snprintf(from, sizeof from, "read from %s", file);
    else snprintf(from, sizeof from, "measured on rank 0 in %.1f s (medians)", het_now() - t0);
    het_log(HET_LOG_INFO, "compute costs (virtual clock): %s, batch %d..%d: forward+backward "
            "%.3g ms + %.3g ms/sample, optimizer %.3g ms; measured at %.3g Gflop/s on the "
            "reference kernel\n", from, k->lo, k->hi, 1e3 * k->fb.a, 1e3 * k->fb.b,
            1e3 * k->opt.a, 1e-9 * k->ref_flops);
    if (k->threads != het_model_workers(t->model))
        het_log(HET_LOG_INFO, "note: compute costs: the table was measured with %d compute thread%s "
                "per rank, this run has %d: it charges the compute times of %d\n", k->threads,
                k->threads == 1 ? "" : "s", het_model_workers(t->model), k->threads);
    return HET_OK;
}

/* How the wall clock's emulation waits (slowdown.c): HET_EMUL_WAIT=auto (default) spins when
 * every compute thread of this host's ranks has a core of its own, else sleeps; "sleep" and
 * "spin" force it. The same on every rank of a host, as each reads the host's figures. */
int het_trainer_choose_wait(het_trainer *t) {
    const het_train_config *c = &t->cfg;
    const char *e = getenv("HET_EMUL_WAIT");
    int lanes = t->strat->lanes > 0 ? t->strat->lanes : 1;
    int threads = (c->threads > 0 ? c->threads : 1) * lanes;
    if (!e || !*e || strcmp(e, "auto") == 0)
        t->wait_spin = het_emul_wait_auto(t->have_host ? t->host_size : 1, threads,
                                          sysconf(_SC_NPROCESSORS_ONLN));
    else if (strcmp(e, "sleep") == 0 || strcmp(e, "spin") == 0)
        t->wait_spin = e[1] == 'p';
    else
        return het_error_set(HET_EINVAL, "HET_EMUL_WAIT=%.40s: expected auto, sleep or spin", e);
    if (c->clock != HET_CLOCK_WALL) t->wait_spin = 0; /* nothing waits on the virtual clock */
    het_emul_wait_set(t->wait_spin);
    return HET_OK;
}

/* --platform: every rank reads the file and places the ranks on its hosts; a rank's slowdown
 * is the fastest used host's speed over its own host's (the virtual clock's scale takes the
 * rest: trainer_create), its node the host, the network model the hosts' routes. */
static int platform_setup(het_trainer *t, int *host_of, het_netem *ne) {
    const het_train_config *cfg = &t->cfg;
    het_platform p;
    int st = het_platform_read(&p, cfg->platform), uniform = 1;
    if (!st) st = het_platform_place(&p, cfg->hostfile, t->size, host_of);
    if (!st) st = het_platform_netem(&p, host_of, t->size, ne, &uniform);
    if (st) {
        het_platform_free(&p);
        return st;
    }
    double smax = 0;
    for (int r = 0; r < t->size; r++)
        if (p.hosts[host_of[r]].speed > smax) smax = p.hosts[host_of[r]].speed;
    t->plat_speed_max = smax;
    t->base_factor = smax / p.hosts[host_of[t->rank]].speed;
    if (t->rank == 0) {
        char line[1024];
        size_t o = (size_t)snprintf(line, sizeof line, "platform: %s, %d host%s: ranks on hosts",
                                    cfg->platform, p.n_hosts, p.n_hosts == 1 ? "" : "s");
        for (int r = 0; r < t->size && o < sizeof line; r++) {
            if (r == 24 && t->size > 25) {
                o += (size_t)snprintf(line + o, sizeof line - o, " ...");
                break;
            }
            o += (size_t)snprintf(line + o, sizeof line - o, " %d:%s(%.3gGf)", r,
                                  p.hosts[host_of[r]].name, 1e-9 * p.hosts[host_of[r]].speed);
        }
        het_log(HET_LOG_INFO, "%s\n", line);
        het_log(HET_LOG_INFO, "platform: between nodes %.3g s + bytes / %.4g B/s, inside a node "
                "%.3g s + bytes / %.4g B/s%s\n", ne->lat_s, ne->bw_bytes_per_s, ne->node_lat_s,
                ne->node_bw_bytes_per_s, uniform ? "" : " (the routes differ: the network model "
                "charges every pair of nodes the slowest route, every node the slowest loopback)");
    }
    het_platform_free(&p);
    return HET_OK;
}

/* --platform on the virtual clock: a piece's cost (a table's seconds, or this rank's CPU time)
 * is charged x ref / fastest host speed, ref the cost's reference rate (the table's, or this
 * host's measured now), and x the rank's slowdown (fastest / own host speed): x ref / own. On
 * the wall clock the speeds can only slow ranks down: the fastest host is this machine. */
void het_trainer_platform_scale(het_trainer *t) {
    het_strategy_ctx *c = &t->ctx;
    if (t->cfg.clock != HET_CLOCK_VIRTUAL) {
        if (t->rank == 0)
            het_log(HET_LOG_INFO, "platform: on the wall clock the hosts' speeds slow ranks "
                    "down relative to the fastest host, which computes at this machine's "
                    "speed (--clock virtual charges their speeds in flop/s)\n");
        return;
    }
    const int table = c->pace.costs != NULL;
    const double ref = table ? t->costs.ref_flops : het_blas_reference_flops();
    c->pace.scale = ref > 0 ? ref / t->plat_speed_max : 1.0;
    if (t->rank == 0)
        het_log(HET_LOG_INFO, "platform: compute costs rescaled x %.4g (%s %.4g Gflop/s on the "
                "reference kernel, the fastest host %.4g Gflop/s)\n", c->pace.scale,
                table ? "the table's host" : "this host", 1e-9 * ref, 1e-9 * t->plat_speed_max);
}

/* The distributed part of create: topology, comm, slowdown. */
int het_trainer_create_mpi(het_trainer *t) {
    const het_train_config *cfg = &t->cfg;
    double factors[1024];
    int nf = cfg->slowdown[0] ? het_slowdown_parse(cfg->slowdown, factors, 1024) : 0;
    if (nf < 0) return nf;
    if (nf > 0 && nf != t->size)
        return het_error_set(HET_EINVAL, "slowdown: %d factor%s for %d rank%s, expected one "
                             "per rank", nf, nf == 1 ? "" : "s", t->size, t->size == 1 ? "" :
                             "s");
    t->base_factor = nf > 0 ? factors[t->rank] : 1.0;
    het_netem ne = {.lat_s = cfg->net_lat, .bw_bytes_per_s = cfg->net_bw,
                    .node_lat_s = cfg->node_lat, .node_bw_bytes_per_s = cfg->node_bw,
                    .coll_smpi = cfg->coll_model == 1, .bcast = cfg->bcast_model,
                    .arbiter = cfg->p2p_model == 1};
    int *host_of = NULL, st = HET_OK;
    if (cfg->net_factors == 1) het_netem_use_smpi_factors(&ne);
    if (cfg->platform[0]) {
        host_of = malloc((size_t)t->size * sizeof *host_of);
        st = host_of ? platform_setup(t, host_of, &ne)
                     : het_error_set(HET_ENOMEM, "out of memory placing %d ranks", t->size);
        if (t->mpi) st = het_trainer_agree(t, st);
        if (st) {
            free(host_of);
            return st;
        }
    }
    het_clock_use((het_clock_kind)cfg->clock); /* before any lane reads it */
    t->ctx.lane = HET_LANE_START;               /* the rank's main lane: V = 0 */
    t->ctx.lane.tid = HET_TID_COMPUTE;
    het_pace_init(&t->ctx.pace, &t->ctx.lane, t->base_factor);
    if (cfg->slowdown_at[0]) {
        int n = het_slowdown_at_parse(cfg->slowdown_at, t->changes, HET_MAX_CHANGES);
        if (n < 0) return n;
        if (n > HET_MAX_CHANGES)
            return het_error_set(HET_EINVAL, "slowdown-at: %d changes, at most %d", n,
                                 HET_MAX_CHANGES);
        for (int i = 0; i < n; i++)
            if (t->changes[i].rank >= t->size)
                return het_error_set(HET_EINVAL, "slowdown-at: rank %d in '%s', but the run "
                                     "has %d rank%s", t->changes[i].rank, cfg->slowdown_at,
                                     t->size, t->size == 1 ? "" : "s");
        t->n_changes = n;
    }
    if (!t->mpi) {
        free(host_of);
        return HET_OK;
    }
    if (host_of) { /* a platform: a node is a host */
        st = het_topo_init_nodes(&t->topo, MPI_COMM_WORLD, host_of[t->rank]);
        free(host_of);
    } else if (cfg->ranks_per_node > 0 && cfg->placement == 1) { /* cyclic: rank r on node r mod N */
        int nodes = (t->size + cfg->ranks_per_node - 1) / cfg->ranks_per_node;
        st = het_topo_init_nodes(&t->topo, MPI_COMM_WORLD, t->rank % nodes);
    } else {
        st = het_topo_init(&t->topo, MPI_COMM_WORLD, cfg->ranks_per_node);
    }
    t->have_topo = st == HET_OK;
    if ((st = het_trainer_agree(t, st))) return st;
    st = het_trainer_agree(t, het_comm_create(&t->comm, &t->topo, ne));
    het_comm_set_lane(t->comm, &t->ctx.lane); /* the comm charges the main lane */
    t->ctx.world = het_comm_mpi(t->comm, HET_COMM_WORLD);
    return st;
}


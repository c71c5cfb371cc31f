/* hetrain platform: the emulated cluster that the shorthand options describe, written as a
 * SimGrid platform file and a hostfile (emul/platform.c's writer), so that one description runs
 * under hetrain's virtual clock (--platform FILE --hostfile HOSTS) and under smpirun
 * (-platform FILE -hostfile HOSTS). And `hetrain info --platform FILE`: what a file holds.
 *
 * The shorthand's cluster: P ranks (--ranks, else one per --slowdown factor, else 2) on nodes
 * of --ranks-per-node ranks (block or --placement cyclic; 0: one node), every node a host of
 * speed R / its ranks' slowdown (a host has one speed: ranks of one node with different
 * factors are refused) and as many cores as ranks, joined by links of --net-bw / --net-lat,
 * inside a node --node-bw / --node-lat. R (--host-speed) is the speed the shorthand's hosts
 * compute at: a speed (74.6Gf), a cost table's reference rate (shipped: the shipped table of
 * --model; or a table file), or `measured` (the default: this host's rate on the reference
 * kernel, het_blas_reference_flops). With R the table's rate, --platform charges the very
 * times the shorthand options do. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "emul/emul.h"

static struct {
    int ranks;
    char out[HET_PATH_LEN], hostfile[HET_PATH_LEN], speed[HET_PATH_LEN],
        factors[HET_PATH_LEN];
} g_plat;

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    het_error_set(HET_EINVAL, "hetrain platform: %s", msg);
    return CLI_USAGE;
}

int cli_platform_options(int argc, char **argv, int *n_rest) {
    static const char *const own[] = {"ranks", "out", "hostfile", "host-speed", "factors"};
    int kept = 0;
    snprintf(g_plat.speed, sizeof g_plat.speed, "measured");
    for (int i = 0; i < argc; i++) {
        const char *v;
        int k = cli_own_option(argc, argv, &i, own, (int)(sizeof own / sizeof own[0]), &v);
        if (k < 0) {
            argv[kept++] = argv[i];
            continue;
        }
        if (!v || !*v) return usage("--%s: missing value", own[k]);
        if (k == 0) {
            char *end;
            errno = 0;
            long x = strtol(v, &end, 10);
            if (end == v || *end || errno || x < 1 || x > 4096)
                return usage("--ranks: '%s' is not an integer in 1..4096", v);
            g_plat.ranks = (int)x;
            continue;
        }
        char *dst = k == 1 ? g_plat.out : k == 2 ? g_plat.hostfile : k == 3 ? g_plat.speed
                                                                             : g_plat.factors;
        if (strlen(v) >= HET_PATH_LEN) return usage("--%s: '%.40s...' is too long", own[k], v);
        snprintf(dst, HET_PATH_LEN, "%s", v);
    }
    if (!g_plat.out[0]) return usage("--out FILE is required (the platform file to write)");
    *n_rest = kept;
    return CLI_OK;
}

void cli_platform_help(void) {
    printf("  --ranks N            the ranks (default: one per --slowdown factor, else 2)\n"
           "  --out FILE           the platform file to write (SimGrid XML, version 4.1)\n"
           "  --hostfile FILE      also a hostfile: rank r on the host named on line r\n"
           "  --host-speed SPEED   what a host of slowdown 1 computes, flop/s: a speed (74.6Gf),\n"
           "                       shipped (the shipped cost table of --model's reference rate),\n"
           "                       a cost table file's rate, or measured (this host's; default)\n"
           "  --factors FILE       MPI's message-size factors (and the link, where --net-lat /\n"
           "                       --net-bw are not given) from hetrain calibrate --network\n");
}

/* R: the speed a host of slowdown 1 computes at, and what it is, for the file's comment. */
static int host_speed(const het_train_config *c, double *R, char *what, size_t n) {
    const char *s = g_plat.speed;
    if (!strcmp(s, "measured")) {
        *R = het_blas_reference_flops();
        snprintf(what, n, "this host's reference rate (measured)");
        return *R > 0 ? HET_OK : het_error_set(HET_EIO, "hetrain platform: the reference "
                                               "kernel could not be timed");
    }
    if (!het_platform_parse_speed(s, R)) {
        snprintf(what, n, "--host-speed %s", s);
        return HET_OK;
    }
    het_costs k;
    int st;
    if (!strcmp(s, "shipped")) {
        het_net net;
        het_model *m = NULL;
        st = cli_build_model(c, &net, &m);
        if (!st) st = het_costs_shipped(&k, het_step_costs_net(m));
        het_net_free(&net);
        het_model_free(m);
    } else {
        st = het_costs_read(&k, s);
    }
    if (st) return st;
    *R = k.ref_flops;
    snprintf(what, n, "the reference rate of %s%s", strcmp(s, "shipped") ? "" : "the shipped "
             "table of ", strcmp(s, "shipped") ? s : k.model);
    het_costs_free(&k);
    return HET_OK;
}

int cli_platform(const het_train_config *c) {
    double factors[4096];
    int nf = c->slowdown[0] ? het_slowdown_parse(c->slowdown, factors, 4096) : 0;
    if (nf < 0) return cli_fail();
    const int P = g_plat.ranks ? g_plat.ranks : nf > 0 ? nf : 2;
    if (nf > 0 && nf != P) {
        het_error_set(HET_EINVAL, "hetrain platform: --slowdown gives %d factors for --ranks "
                      "%d, expected one per rank", nf, P);
        return cli_fail();
    }
    if (c->platform[0]) {
        het_error_set(HET_EINVAL, "hetrain platform: writes the cluster of the shorthand "
                      "options; --platform reads one (see hetrain info --platform)");
        return cli_fail();
    }
    const int rpn = c->ranks_per_node > 0 ? c->ranks_per_node : P;
    const int N = (P + rpn - 1) / rpn;
    int *node = malloc((size_t)P * sizeof *node), *cores = calloc((size_t)N, sizeof *cores);
    double *speed = calloc((size_t)N, sizeof *speed), *fac = calloc((size_t)N, sizeof *fac);
    int st = node && cores && speed && fac ? HET_OK
                                           : het_error_set(HET_ENOMEM, "out of memory");
    for (int r = 0; !st && r < P; r++) {
        node[r] = c->placement == 1 ? r % N : r / rpn;
        double f = nf > 0 ? factors[r] : 1.0;
        if (cores[node[r]]++ && fac[node[r]] != f)
            st = het_error_set(HET_EINVAL, "hetrain platform: node %d holds ranks of slowdown "
                               "%g and %g, but a platform's host has one speed: give the "
                               "ranks of a node one factor, or write the file by hand with a "
                               "host per rank", node[r], fac[node[r]], f);
        fac[node[r]] = f;
    }
    double R = 0, lat = c->net_lat, bw = c->net_bw;
    het_netem_pw fl = {0}, fb = {0};
    if (!st && g_plat.factors[0]) { /* calibrate --network's file */
        double flat = 0, fbw = 0;
        st = het_netfit_read(g_plat.factors, &flat, &fbw, &fl, &fb);
        if (!(lat > 0)) lat = flat;
        if (!(bw > 0)) bw = fbw;
    }
    char what[HET_PATH_LEN + 64] = "";
    if (!st) st = host_speed(c, &R, what, sizeof what);
    for (int i = 0; !st && i < N; i++) speed[i] = R / fac[i];
    char comment[2 * HET_PATH_LEN + 512];
    snprintf(comment, sizeof comment, "written by hetrain platform: %d ranks on %d node%s of "
             "%d (%s), slowdown %s, between nodes %g s + bytes / %g B/s, inside a node %g s + "
             "bytes / %g B/s; a host of slowdown 1 computes at %.6g flop/s (%s)", P, N,
             N == 1 ? "" : "s", rpn, c->placement == 1 ? "cyclic" : "block",
             c->slowdown[0] ? c->slowdown : "none", lat, bw, (double)c->node_lat, c->node_bw,
             R, what);
    het_netem ne = {.lat_s = lat, .bw_bytes_per_s = bw, .node_lat_s = c->node_lat,
                    .node_bw_bytes_per_s = c->node_bw};
    if (c->net_factors == 1) het_netem_use_smpi_factors(&ne); /* into the file's <config> */
    if (g_plat.factors[0]) ne.lat_factor = fl, ne.bw_factor = fb; /* measured: they win */
    if (!st) st = het_platform_write(g_plat.out, g_plat.hostfile, comment, N, speed, cores, ne,
                                     node, P);
    free(node);
    free(cores);
    free(speed);
    free(fac);
    if (st) return cli_fail();
    het_log(HET_LOG_INFO, "platform: %s (%d host%s)%s%s; run it with --platform %s%s%s, or "
            "smpirun -platform %s%s%s\n", g_plat.out, N, N == 1 ? "" : "s",
            g_plat.hostfile[0] ? " and hostfile " : "", g_plat.hostfile, g_plat.out,
            g_plat.hostfile[0] ? " --hostfile " : "", g_plat.hostfile, g_plat.out,
            g_plat.hostfile[0] ? " -hostfile " : "", g_plat.hostfile);
    return CLI_OK;
}

int cli_platform_describe(const het_train_config *c) {
    het_platform p;
    if (het_platform_read(&p, c->platform)) return cli_fail();
    int cores = 0;
    for (int h = 0; h < p.n_hosts; h++) cores += p.hosts[h].cores;
    int P = cores;
    if (c->hostfile[0]) { /* as many ranks as the hostfile names */
        FILE *f = fopen(c->hostfile, "r");
        char line[512];
        P = 0;
        while (f && fgets(line, sizeof line, f)) {
            char *s = line + strspn(line, " \t");
            if (*s && *s != '\n' && *s != '#') {
                const char *colon = strchr(s, ':');
                P += colon ? atoi(colon + 1) : 1;
            }
        }
        if (f) fclose(f);
    }
    int *host_of = malloc((size_t)(P > 0 ? P : 1) * sizeof *host_of), uniform = 1;
    het_netem ne = {0};
    int st = host_of ? het_platform_place(&p, c->hostfile, P, host_of) : HET_ENOMEM;
    if (!st) st = het_platform_netem(&p, host_of, P, &ne, &uniform);
    if (st) {
        free(host_of);
        het_platform_free(&p);
        return cli_fail();
    }
    het_log(HET_LOG_QUIET, "platform %s: %d host%s, %d cores\n", p.file, p.n_hosts,
            p.n_hosts == 1 ? "" : "s", cores);
    het_log(HET_LOG_QUIET, "  %-24s %14s %6s %6s  %s\n", "host", "speed (flop/s)", "cores",
            "line", "ranks");
    for (int h = 0; h < p.n_hosts; h++) {
        char ranks[256] = "";
        size_t o = 0;
        for (int r = 0; r < P && o < sizeof ranks - 8; r++)
            if (host_of[r] == h) o += (size_t)snprintf(ranks + o, sizeof ranks - o, "%s%d",
                                                      o ? "," : "", r);
        het_log(HET_LOG_QUIET, "  %-24s %14.6g %6d %6d  %s\n", p.hosts[h].name, p.hosts[h].speed,
                p.hosts[h].cores, p.hosts[h].line, ranks[0] ? ranks : "-");
    }
    const int n = p.n_hosts;
    if (n <= 16) {
        het_log(HET_LOG_QUIET, "routes (latency s / bandwidth B/s; the diagonal: loopback):\n");
        for (int a = 0; a < n; a++) {
            het_log(HET_LOG_QUIET, "  %-24s", p.hosts[a].name);
            for (int b = 0; b < n; b++)
                het_log(HET_LOG_QUIET, " %.3g/%.3g", p.lat[a * n + b], p.bw[a * n + b]);
            het_log(HET_LOG_QUIET, "\n");
        }
    }
    het_log(HET_LOG_QUIET, "%d ranks (%s): the network model charges between nodes %.4g s + "
            "bytes / %.4g B/s, inside a node %.4g s + bytes / %.4g B/s%s\n", P,
            c->hostfile[0] ? c->hostfile : "each host's cores in turn", ne.lat_s,
            ne.bw_bytes_per_s, ne.node_lat_s, ne.node_bw_bytes_per_s,
            uniform ? "" : " (routes differ: the slowest)");
    const het_netem_pw *pw[2] = {&p.lat_factor, &p.bw_factor};
    for (int k = 0; k < 2; k++) { /* <config>'s message-size factors, smallest size first */
        if (!pw[k]->n) continue;
        het_log(HET_LOG_QUIET, "%s factor by message size:", k ? "bandwidth" : "latency");
        for (int i = 0; i < pw[k]->n; i++)
            het_log(HET_LOG_QUIET, " %.0f:%.4g", pw[k]->from[i], pw[k]->val[i]);
        het_log(HET_LOG_QUIET, "\n");
    }
    free(host_of);
    het_platform_free(&p);
    return CLI_OK;
}

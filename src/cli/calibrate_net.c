/* hetrain calibrate --network: the link between two ranks measured by a ping-pong, and MPI's
 * message-size factors fitted to it (emul/netfit.c), written for `hetrain platform --factors`,
 * which puts them into a platform file's <config> (smpi/lat-factor, smpi/bw-factor): the file
 * that both hetrain's virtual clock and SimGrid's SMPI then read.
 *
 * Run it under the launcher on the link to measure: `mpirun -np 2 --host a,b hetrain calibrate
 * --network --out net.factors` on a cluster (or in the virtual cluster, bench/vcluster). Rank
 * 0 and the lowest rank on another node (by the topology: real nodes, or --ranks-per-node)
 * exchange each size, two rounds to warm up and --reps timed; on one node it measures the
 * shared-memory transport and says so. The reference link is --net-lat / --net-bw when given
 * (the platform's link, so that the factors say how MPI departs from it), else fitted too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "emul/emul.h"

static struct {
    int network, reps;
} g_cal = {0, 20};

int cli_calibrate_options(int argc, char **argv, int *n_rest) {
    static const char *const own[] = {"reps"};
    int kept = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--network")) {
            g_cal.network = 1;
            continue;
        }
        const char *v;
        int k = cli_own_option(argc, argv, &i, own, 1, &v);
        if (k < 0) {
            argv[kept++] = argv[i];
            continue;
        }
        char *end;
        long x = v ? strtol(v, &end, 10) : 0;
        if (!v || end == v || *end || x < 1 || x > 100000) {
            het_error_set(HET_EINVAL, "hetrain calibrate: --reps: '%s' is not an integer in "
                          "1..100000", v ? v : "");
            return CLI_USAGE;
        }
        g_cal.reps = (int)x;
    }
    *n_rest = kept;
    return CLI_OK;
}

void cli_calibrate_help(void) {
    printf("  --network            measure the link between rank 0 and a rank of another node\n"
           "                       (a ping-pong of 8 B .. 4 MiB) and fit MPI's message-size\n"
           "                       factors: --out FILE for hetrain platform --factors FILE;\n"
           "                       --net-lat / --net-bw: the link they are relative to\n"
           "  --reps N             timed round trips per size (default 20)\n");
}

int cli_calibrate_wants_network(void) { return g_cal.network; }

int cli_calibrate_network(const het_train_config *c) {
    static const size_t sizes[] = {8,     64,    256,    1024,   4096,   8192,   16384,   32768,
                                   49152, 65536, 98304,  131072, 262144, 524288, 1048576,
                                   4194304};
    enum { N = (int)(sizeof sizes / sizeof sizes[0]) };
    het_topo t;
    het_comm *comm = NULL;
    int st = het_topo_init(&t, MPI_COMM_WORLD, c->ranks_per_node);
    if (st) return cli_fail();
    if (t.size < 2) {
        het_topo_free(&t);
        het_error_set(HET_EINVAL, "calibrate --network: %d rank; run it under the launcher on "
                      "2 ranks or more (mpirun -np 2 --host A,B hetrain calibrate --network)",
                      t.size);
        return cli_fail();
    }
    if ((st = het_comm_create(&comm, &t, (het_netem){0}))) {
        het_topo_free(&t);
        return cli_fail();
    }
    const int *node = het_comm_world_nodes(comm);
    int b = 1;
    for (int r = t.size - 1; r > 0; r--)
        if (node[r] != node[0]) b = r; /* the lowest rank on another node */
    const int cross = node[b] != node[0];
    het_log(HET_LOG_INFO, "calibrate --network: ranks 0 and %d (%s), %d sizes from %zu B to %zu "
            "B, %d timed round trips each\n", b, cross ? "on two nodes" : "on one node: this "
            "measures its shared-memory transport, not a network", N, sizes[0], sizes[N - 1],
            g_cal.reps);
    double one_way[N], size[N];
    st = het_comm_pingpong(comm, 0, b, sizes, N, g_cal.reps, one_way);
    double lat = c->net_lat, bw = c->net_bw;
    het_netem_pw lf, bf;
    for (int i = 0; i < N; i++) size[i] = (double)sizes[i];
    if (!st) st = het_netfit(size, one_way, N, &lat, &bw, &lf, &bf);
    if (!st) {
        het_log(HET_LOG_INFO, "reference link: %g s + bytes / %g B/s (%s)\n%10s %12s %12s %10s "
                "%10s\n", lat, bw, c->net_lat > 0 || c->net_bw > 0 ? "given" : "fitted",
                "bytes", "one way s", "fitted s", "lat x", "bw x");
        for (int i = 0; i < N; i++) {
            double lx = het_netem_pw_at(&lf, size[i]), bx = het_netem_pw_at(&bf, size[i]);
            het_log(HET_LOG_INFO, "%10zu %12.4g %12.4g %10.4g %10.4g\n", sizes[i], one_way[i],
                    lat * lx + size[i] / (bw * bx), lx, bx);
        }
    }
    if (!st && c->out[0]) {
        char note[512], day[32] = "";
        time_t now = time(NULL);
        strftime(day, sizeof day, "%Y-%m-%d", gmtime(&now));
        snprintf(note, sizeof note, "hetrain calibrate --network, %s: ping-pong of ranks 0 and "
                 "%d (%s), median of %d round trips per size; for hetrain platform --factors",
                 day, b, cross ? "two nodes" : "one node", g_cal.reps);
        st = het_log_rank() == 0 ? het_netfit_write(c->out, note, lat, bw, &lf, &bf) : HET_OK;
        st = cli_agree(st);
        if (!st) het_log(HET_LOG_INFO, "factors: %s (hetrain platform --factors %s ...)\n",
                         c->out, c->out);
    }
    het_comm_free(comm);
    het_topo_free(&t);
    return st ? cli_fail() : CLI_OK;
}

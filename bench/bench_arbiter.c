/* The arbiter's own cost (emul/arbiter.c, no MPI): what completing flows in virtual-time order
 * costs per flow as lanes grow, before it carries every message of a run (issue #36 allows a
 * 64-rank virtual epoch 1.5x today's run time).
 *
 *   bench_arbiter [--rounds R] [--lanes "4 16 64"]
 *
 * P lanes on P/8 nodes of 8 (one node below 8), each node a way out and a way in with
 * cross-traffic (0.05 on the back route): in each of R rounds every lane sends 100 kB to its
 * right neighbour and 100 kB to the lane P/2 away (across nodes), then waits for the two
 * messages to it, computes 1 ms x (1 + lane % 3) and goes on. The lanes report in turn (lane 0,
 * 1, ...), a settle after every report. Prints per lane count: flows, settles, wall seconds,
 * microseconds per flow and per settle, and the virtual end (a check that the runs agree). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emul/arbiter.h"
#include "hetrain/core.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct lane_st { int round, left, in[2]; double clock; } lane_st;

static void run(int P, int R) {
    int nodes = P >= 8 ? P / 8 : 1, per = P / nodes;
    double *cap = malloc((size_t)2 * (size_t)nodes * sizeof *cap);
    for (int i = 0; i < 2 * nodes; i++) cap[i] = 125e6;
    het_arbiter *a = het_arbiter_new(P, 2 * nodes, cap);
    lane_st *ln = calloc((size_t)P, sizeof *ln);
    int *msg = malloc((size_t)P * (size_t)R * 2 * sizeof *msg); /* round, receiver, 2 */
    for (int i = 0; i < P * R * 2; i++) msg[i] = -1;
    const double weight[4] = {1.0, 1.0, 0.05, 0.05};
    long flows = 0, settles = 0;
    double t0 = now_s();
    for (int busy = 1; busy;) {
        busy = 0;
        for (int i = 0; i < P; i++) {
            lane_st *l = &ln[i];
            if (l->left) continue;
            busy = 1;
            int k = l->round;
            if (k > 0) {
                int *m = &msg[((k - 1) * P + i) * 2];
                double d0 = het_arbiter_done(a, m[0]), d1 = het_arbiter_done(a, m[1]);
                if (m[0] < 0 || m[1] < 0 || d0 < 0 || d1 < 0) {
                    int fl[2], n = 0, from[2], nf = 0;
                    double look[2] = {50e-6, 50e-6};
                    if (m[0] >= 0 && d0 < 0) fl[n++] = m[0];
                    if (m[0] < 0) from[nf++] = (i + P - 1) % P;
                    if (m[1] >= 0 && d1 < 0) fl[n++] = m[1];
                    if (m[1] < 0) from[nf++] = (i + P / 2) % P;
                    het_arbiter_wait(a, i, l->clock, fl, n, from, look, nf);
                    het_arbiter_settle(a), settles++;
                    continue;
                }
                l->clock = fmax(l->clock, fmax(d0, d1)) + 1e-3 * (1 + i % 3);
            }
            if (k == R) {
                het_arbiter_leave(a, i);
                l->left = 1;
                het_arbiter_settle(a), settles++;
                continue;
            }
            int to[2] = {(i + 1) % P, (i + P / 2) % P};
            for (int j = 0; j < 2; j++) {
                int x = i / per < nodes ? i / per : nodes - 1, y = to[j] / per;
                if (y >= nodes) y = nodes - 1;
                int route[4] = {2 * x, 2 * y + 1, 2 * y, 2 * x + 1};
                int same = x == y;
                int id = het_arbiter_post(a, i, l->clock, 1e5, 50e-6, 1.0, route, weight,
                                          same ? 1 : 4); /* inside a node: its way out only */
                msg[(k * P + to[j]) * 2 + j] = id;
                flows++;
            }
            l->round++;
            het_arbiter_settle(a), settles++;
        }
    }
    double wall = now_s() - t0, end = 0.0;
    for (int i = 0; i < P; i++) end = fmax(end, ln[i].clock);
    printf("lanes %3d  flows %7ld  settles %8ld  wall %8.3f s  %8.2f us/flow  %7.2f us/settle"
           "  virtual end %.9g s\n", P, flows, settles, wall, 1e6 * wall / (double)flows,
           1e6 * wall / (double)settles, end);
    het_arbiter_free(a);
    free(cap), free(ln), free(msg);
}

int main(int argc, char **argv) {
    int R = 50;
    const char *lanes = "4 16 64";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) R = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lanes") && i + 1 < argc) lanes = argv[++i];
        else {
            fprintf(stderr, "usage: bench_arbiter [--rounds R] [--lanes \"4 16 64\"]\n");
            return 2;
        }
    }
    if (R < 1) R = 1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", lanes);
    for (char *tok = strtok(buf, " ,"); tok; tok = strtok(NULL, " ,")) {
        int P = atoi(tok);
        if (P >= 2) run(P, R);
    }
    return 0;
}

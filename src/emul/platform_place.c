/* Platform files, the rest of them (the reader is platform.c): ranks on the hosts (a hostfile or
 * each host's cores in turn), the network model's links for ranks so placed, and the writer of
 * the shorthand options' cluster (`hetrain platform`). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/outfile.h"
#include "emul/emul.h"

#define DEFAULT_LOOPBACK_BW 10e9 /* SimGrid's network/loopback-bw */
#define DEFAULT_LOOPBACK_LAT 0.0

/* ---------------------------------------------------------------- ranks on hosts */

int het_platform_place(const het_platform *p, const char *hostfile, int n_ranks, int *host_of) {
    if (hostfile && hostfile[0]) {
        char *text;
        size_t len;
        int st = het_platform_slurp(hostfile, &text, &len);
        if (st) return st;
        int lines = 0, line = 0;
        for (char *save = NULL, *s = strtok_r(text, "\n", &save); s;
             s = strtok_r(NULL, "\n", &save)) {
            line++;
            while (*s == ' ' || *s == '\t') s++;
            size_t k = strlen(s);
            while (k && (s[k - 1] == ' ' || s[k - 1] == '\t' || s[k - 1] == '\r')) s[--k] = 0;
            if (!*s || *s == '#') continue;
            char *colon = strchr(s, ':'); /* smpirun's "host:N": N ranks there */
            long reps = 1;
            if (colon) {
                char *end;
                *colon = 0;
                reps = strtol(colon + 1, &end, 10);
                if (end == colon + 1 || *end || reps < 1 || reps > 4096) {
                    free(text);
                    return het_error_set(HET_EFORMAT, "%s:%d: expected HOST or HOST:N (N ranks "
                                         "on it, 1..4096)", hostfile, line);
                }
            }
            int h = het_platform_host(p, s);
            if (h < 0) {
                st = het_error_set(HET_EFORMAT, "%s:%d: host '%s' is not in the platform %s",
                                   hostfile, line, s, p->file);
                free(text);
                return st;
            }
            for (long i = 0; i < reps && lines < n_ranks; i++) host_of[lines++] = h;
        }
        free(text);
        if (lines < n_ranks)
            return het_error_set(HET_EFORMAT, "%s: %d host line%s for %d ranks, expected one "
                                 "a rank", hostfile, lines, lines == 1 ? "" : "s", n_ranks);
        return HET_OK;
    }
    int r = 0;
    for (int h = 0; h < p->n_hosts && r < n_ranks; h++)
        for (int c = 0; c < p->hosts[h].cores && r < n_ranks; c++) host_of[r++] = h;
    if (r < n_ranks)
        return het_error_set(HET_EINVAL, "%s: %d cores in all for %d ranks: give a hostfile "
                             "(--hostfile) to put more ranks on a host", p->file, r, n_ranks);
    return HET_OK;
}

/* Whether ne has message-size factors other than 1 (SMPI's, the mark of its default model: a
 * reader of a platform file infers cross-traffic from them; its writer leaves it out then). */
static int smpi_model(het_netem ne) {
    return !het_netem_pw_identity(&ne.lat_factor) || !het_netem_pw_identity(&ne.bw_factor);
}

int het_platform_netem(const het_platform *p, const int *host_of, int n_ranks, het_netem *ne,
                       int *uniform) {
    const int n = p->n_hosts;
    int first = 1, first_lo = 1;
    *uniform = 1;
    for (int i = 0; i < n_ranks; i++)
        for (int j = i; j < n_ranks; j++) {
            int a = host_of[i], b = host_of[j];
            double lat = p->lat[a * n + b], bw = p->bw[a * n + b];
            if (a == b) {
                if (first_lo) ne->node_lat_s = lat, ne->node_bw_bytes_per_s = bw, first_lo = 0;
                else if (lat != ne->node_lat_s || bw != ne->node_bw_bytes_per_s) *uniform = 0;
                if (lat > ne->node_lat_s) ne->node_lat_s = lat;
                if (bw < ne->node_bw_bytes_per_s) ne->node_bw_bytes_per_s = bw;
                continue;
            }
            if (first) ne->lat_s = lat, ne->bw_bytes_per_s = bw, first = 0;
            else if (lat != ne->lat_s || bw != ne->bw_bytes_per_s) *uniform = 0;
            if (lat > ne->lat_s) ne->lat_s = lat;
            if (bw < ne->bw_bytes_per_s) ne->bw_bytes_per_s = bw;
        }
    if (p->lat_factor.n) ne->lat_factor = p->lat_factor; /* the file's, else the options' */
    if (p->bw_factor.n) ne->bw_factor = p->bw_factor;
    ne->rndv_bytes = p->async_small > 0.0 ? p->async_small : 1.0; /* as SMPI sends them */
    /* cross-traffic: the file's, else on with SMPI's factors (its default model), off without */
    ne->crosstraffic = p->crosstraffic >= 0 ? p->crosstraffic : smpi_model(*ne);
    if (first) ne->lat_s = 0, ne->bw_bytes_per_s = 0; /* one host: no network between nodes */
    if (first_lo) ne->node_lat_s = DEFAULT_LOOPBACK_LAT, ne->node_bw_bytes_per_s = DEFAULT_LOOPBACK_BW;
    return HET_OK;
}

/* ---------------------------------------------------------------- the writer */

static void put_rate(FILE *f, const char *name, double v, const char *u) {
    fprintf(f, " %s=\"%.17g%s\"", name, v, u);
}

/* A latency: the options hold them as floats, so 7 digits give them back exactly. */
static void put_time(FILE *f, const char *name, double v) {
    fprintf(f, " %s=\"%.7gs\"", name, v);
}

int het_platform_write(const char *path, const char *hostfile, const char *comment, int n_nodes,
                       const double *speed, const int *cores, het_netem ne,
                       const int *node_of_rank, int n_ranks) {
    het_outfile o;
    int st = het_outfile_open(&o, path, "platform file");
    if (st) return st;
    FILE *f = o.f;
    fprintf(f, "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM "
            "\"https://simgrid.org/simgrid.dtd\">\n<platform version=\"4.1\">\n");
    fputs("  <!-- ", f); /* XML forbids "--" inside a comment: "- -" (e.g. an option's name) */
    for (const char *q = comment; *q; q++) {
        fputc(*q, f);
        if (*q == '-' && (q[1] == '-' || !q[1])) fputc(' ', f);
    }
    fputs(" -->\n", f);
    /* The file says what the model charges, to hetrain's reader and to SMPI's alike: without
     * factors it holds factors of 1 ("0:1"), since SMPI would run its calibrated ones where
     * the file names none; cross-traffic is written unless both infer it (on, beside factors
     * that are not 1: SMPI's default model) */
    int implied = smpi_model(ne);
    fprintf(f, "  <config>\n"); /* before the zone */
    if (!implied || !ne.crosstraffic)
        fprintf(f, "    <prop id=\"network/crosstraffic\" value=\"%s\"/>\n",
                ne.crosstraffic ? "yes" : "no");
    if (ne.rndv_bytes > 1.0) /* SMPI's default (every message waits) needs no line */
        fprintf(f, "    <prop id=\"smpi/async-small-thresh\" value=\"%.0f\"/>\n",
                ne.rndv_bytes);
    const het_netem_pw *pw[2] = {&ne.lat_factor, &ne.bw_factor};
    const char *id[2] = {"smpi/lat-factor", "smpi/bw-factor"};
    for (int k = 0; k < 2; k++) {
        if (!pw[k]->n) {
            fprintf(f, "    <prop id=\"%s\" value=\"0:1\"/>\n", id[k]);
            continue;
        }
        fprintf(f, "    <prop id=\"%s\" value=\"", id[k]);
        for (int i = pw[k]->n - 1; i >= 0; i--) /* SimGrid lists them largest first */
            fprintf(f, "%s%.15g:%.15g", i == pw[k]->n - 1 ? "" : ";", pw[k]->from[i],
                    pw[k]->val[i]);
        fprintf(f, "\"/>\n");
    }
    fprintf(f, "  </config>\n");
    fprintf(f, "  <zone id=\"world\" routing=\"Full\">\n");
    for (int i = 0; i < n_nodes; i++) {
        fprintf(f, "    <host id=\"node%d\"", i);
        put_rate(f, "speed", speed[i], "f");
        fprintf(f, " core=\"%d\"/>\n", cores[i]);
    }
    /* each node's private link carries half the route's latency (a route is two of them) */
    const double bw = ne.bw_bytes_per_s > 0 ? ne.bw_bytes_per_s : 1e15;
    const double lo_bw = ne.node_bw_bytes_per_s > 0 ? ne.node_bw_bytes_per_s : 1e15;
    for (int i = 0; i < n_nodes; i++) {
        fprintf(f, "    <link id=\"node%d_link\"", i);
        put_rate(f, "bandwidth", bw, "Bps");
        put_time(f, "latency", ne.lat_s / 2);
        fprintf(f, " sharing_policy=\"SPLITDUPLEX\"/>\n");
        fprintf(f, "    <link id=\"node%d_loopback\"", i);
        put_rate(f, "bandwidth", lo_bw, "Bps");
        put_time(f, "latency", ne.node_lat_s);
        fprintf(f, " sharing_policy=\"FATPIPE\"/>\n");
    }
    for (int i = 0; i < n_nodes; i++) {
        fprintf(f, "    <route src=\"node%d\" dst=\"node%d\"><link_ctn id=\"node%d_loopback\"/>"
                "</route>\n", i, i, i);
        for (int j = i + 1; j < n_nodes; j++)
            fprintf(f, "    <route src=\"node%d\" dst=\"node%d\"><link_ctn id=\"node%d_link\" "
                    "direction=\"UP\"/><link_ctn id=\"node%d_link\" direction=\"DOWN\"/>"
                    "</route>\n", i, j, i, j);
    }
    fprintf(f, "  </zone>\n</platform>\n");
    if ((st = het_outfile_commit(&o))) return st;
    if (!hostfile || !hostfile[0]) return HET_OK;
    if ((st = het_outfile_open(&o, hostfile, "hostfile"))) return st;
    for (int r = 0; r < n_ranks; r++) fprintf(o.f, "node%d\n", node_of_rank[r]);
    return het_outfile_commit(&o);
}

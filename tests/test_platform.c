/* Platform files (emul/platform.c) against hand-derived descriptions:
 * - a file written by het_platform_write (as `hetrain platform` writes it) reads back to the
 *   hosts, speeds, cores and routes it was written from, and SMPI's message-size factors in
 *   its <config> exactly (a model without factors: factors of 1 and no cross-traffic, said for
 *   SMPI, charged as none); the hostfile puts the ranks where it was written;
 * - a hand-written heterogeneous platform (two clusters of different speeds, one with a
 *   backbone, joined by a slow link through their routers) gives every host its cluster's
 *   speed and every pair its route (private links + backbones + the slow link; the loopback
 *   from loopback_bw / loopback_lat or SimGrid's default), and the network model charges the
 *   slowest route and says the routes differ;
 * - units as SimGrid's (Gf, MBps, Gbps, GiBps, us, ms, a bare number);
 * - ranks on hosts: each host's cores in turn without a hostfile, HOST:N lines, too few cores;
 * - broken files: one line naming the file, the line and the element, for each. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emul/emul.h"
#include "test.h"

static char dir[] = "/tmp/het_platform_XXXXXX";

static const char *put(const char *name, const char *text) {
    static char path[4][512];
    static int k;
    char *p = path[k++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
    return p;
}

/* Whether the file at path holds the text `piece`. */
static int file_has(const char *path, const char *piece) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, piece) != NULL;
}

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-12 * fabs(b))

static void written_reads_back(void) {
    double speed[3] = {7.5e10, 2.5e10, 7.5e10};
    int cores[3] = {2, 2, 1};
    int node_of[5] = {0, 0, 1, 1, 2};
    het_netem ne = {.lat_s = 50e-6, .bw_bytes_per_s = 125e6,
                    .node_lat_s = 1e-6, .node_bw_bytes_per_s = 10e9};
    char path[512], hosts[512];
    snprintf(path, sizeof path, "%s/w.xml", dir);
    snprintf(hosts, sizeof hosts, "%s/w.hosts", dir);
    CHECK(het_platform_write(path, hosts, "a test", 3, speed, cores, ne, node_of, 5) == HET_OK,
          "%s", het_error_msg());
    het_platform p;
    CHECK(het_platform_read(&p, path) == HET_OK, "%s", het_error_msg());
    CHECK(p.n_hosts == 3, "%d hosts", p.n_hosts);
    for (int h = 0; h < p.n_hosts && h < 3; h++) {
        char name[16];
        snprintf(name, sizeof name, "node%d", h);
        CHECK(!strcmp(p.hosts[h].name, name), "host %d: %s", h, p.hosts[h].name);
        CHECK(p.hosts[h].speed == speed[h], "host %d: speed %.17g", h, p.hosts[h].speed);
        CHECK(p.hosts[h].cores == cores[h], "host %d: %d cores", h, p.hosts[h].cores);
        for (int g = 0; g < 3; g++) {
            double lat = p.lat[h * 3 + g], bw = p.bw[h * 3 + g];
            if (g == h) {
                CHECK(NEAR(lat, 1e-6) && bw == 10e9, "loopback %d: %g s, %g B/s", h, lat, bw);
            } else {
                CHECK(NEAR(lat, 50e-6) && bw == 125e6, "route %d-%d: %g s, %g B/s", h, g, lat,
                      bw);
            }
        }
    }
    int host_of[5];
    CHECK(het_platform_place(&p, hosts, 5, host_of) == HET_OK, "%s", het_error_msg());
    for (int r = 0; r < 5; r++) CHECK(host_of[r] == node_of[r], "rank %d on %d", r, host_of[r]);
    het_netem got = {0};
    int uniform = 0;
    het_platform_netem(&p, host_of, 5, &got, &uniform);
    CHECK(uniform && NEAR(got.lat_s, 50e-6) && got.bw_bytes_per_s == 125e6 &&
          NEAR(got.node_lat_s, 1e-6) && got.node_bw_bytes_per_s == 10e9,
          "netem %g %g %g %g, uniform %d", got.lat_s, got.bw_bytes_per_s, got.node_lat_s,
          got.node_bw_bytes_per_s, uniform);
    /* a model without factors: the file tells SMPI so (factors of 1, no cross-traffic), where
     * SMPI would otherwise run its calibrated defaults; hetrain reads them as no factors, and
     * charges what the model without them charges, to the last bit */
    CHECK(het_netem_pw_identity(&got.lat_factor) && het_netem_pw_identity(&got.bw_factor) &&
              got.lat_factor.n == 1 && got.bw_factor.n == 1,
          "factors of 1 written and read: %d, %d pieces", got.lat_factor.n, got.bw_factor.n);
    CHECK(file_has(path, "<prop id=\"smpi/lat-factor\" value=\"0:1\"/>") &&
              file_has(path, "<prop id=\"smpi/bw-factor\" value=\"0:1\"/>") &&
              file_has(path, "<prop id=\"network/crosstraffic\" value=\"no\"/>"),
          "no factors, no cross-traffic: both said in the file for SMPI");
    for (size_t b = 100; b <= 10000000; b *= 10) {
        het_netem plain = got;
        memset(&plain.lat_factor, 0, sizeof plain.lat_factor);
        memset(&plain.bw_factor, 0, sizeof plain.bw_factor);
        CHECK(het_netem_p2p_s(got, b) == het_netem_p2p_s(plain, b) &&
                  het_netem_allreduce_s(got, b, 3) == het_netem_allreduce_s(plain, b, 3),
              "factors of 1 charge what none do, %zu bytes: %.17g / %.17g", b,
              het_netem_allreduce_s(got, b, 3), het_netem_allreduce_s(plain, b, 3));
    }
    CHECK(got.rndv_bytes == 1.0, "no smpi/async-small-thresh: every message waits for its "
          "receive as under SMPI (rndv_bytes 1), got %g", got.rndv_bytes);
    CHECK(p.crosstraffic == 0 && got.crosstraffic == 0, "no cross-traffic, no factors: "
          "written, read (%d, %d)", p.crosstraffic, got.crosstraffic);
    het_platform_free(&p);
    /* SMPI's message-size factors: written into <config>, read back exactly, and the network
     * model gets them */
    het_netem fx = ne;
    fx.rndv_bytes = 65536; /* Open MPI's eager limit over TCP: smpi/async-small-thresh */
    fx.crosstraffic = 1;   /* SMPI's default model: with its factors, not written */
    CHECK(het_netem_pw_parse(&fx.lat_factor, het_netem_smpi_lat_factor) == HET_OK &&
              het_netem_pw_parse(&fx.bw_factor, het_netem_smpi_bw_factor) == HET_OK,
          "SMPI's factors parse");
    CHECK(het_platform_write(path, hosts, "factors", 3, speed, cores, fx, node_of, 5) == HET_OK,
          "%s", het_error_msg());
    CHECK(het_platform_read(&p, path) == HET_OK, "%s", het_error_msg());
    CHECK(p.lat_factor.n == 9 && p.bw_factor.n == 9 &&
              !memcmp(&p.lat_factor, &fx.lat_factor, sizeof p.lat_factor) &&
              !memcmp(&p.bw_factor, &fx.bw_factor, sizeof p.bw_factor),
          "the factors read back: %d, %d", p.lat_factor.n, p.bw_factor.n);
    memset(&got, 0, sizeof got);
    het_platform_netem(&p, host_of, 5, &got, &uniform);
    CHECK(het_netem_pw_at(&got.lat_factor, 70000) == 11.6436 &&
              het_netem_pw_at(&got.bw_factor, 100) == 0.812084,
          "the model takes the file's factors");
    CHECK(p.async_small == 65536 && got.rndv_bytes == 65536, "smpi/async-small-thresh read "
          "back: %g, the model's rndv_bytes %g", p.async_small, got.rndv_bytes);
    CHECK(p.crosstraffic == -1 && got.crosstraffic == 1, "SMPI's factors and no "
          "network/crosstraffic: on, as in SMPI's default model (%d, %d)", p.crosstraffic,
          got.crosstraffic);
    het_platform_free(&p);
    /* cross-traffic off beside the factors: written (not what a reader infers), read back */
    fx.crosstraffic = 0;
    CHECK(het_platform_write(path, hosts, "no back traffic", 3, speed, cores, fx, node_of, 5) ==
              HET_OK, "%s", het_error_msg());
    CHECK(het_platform_read(&p, path) == HET_OK, "%s", het_error_msg());
    memset(&got, 0, sizeof got);
    het_platform_netem(&p, host_of, 5, &got, &uniform);
    CHECK(p.crosstraffic == 0 && got.crosstraffic == 0, "network/crosstraffic no: written and "
          "read (%d, %d)", p.crosstraffic, got.crosstraffic);
    /* without the hostfile: 2 + 2 + 1 cores in turn, the same placement */
    CHECK(het_platform_place(&p, NULL, 5, host_of) == HET_OK, "%s", het_error_msg());
    for (int r = 0; r < 5; r++) CHECK(host_of[r] == node_of[r], "rank %d on %d", r, host_of[r]);
    CHECK(het_platform_place(&p, NULL, 6, host_of) != HET_OK &&
          strstr(het_error_msg(), "5 cores in all for 6 ranks"), "%s", het_error_msg());
    het_platform_free(&p);
}

static const char *two_clusters =
    "<?xml version='1.0'?>\n"
    "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
    "<platform version=\"4.1\">\n"
    "  <zone id=\"world\" routing=\"Full\">\n"
    "    <cluster id=\"fast\" prefix=\"f-\" suffix=\".a\" radical=\"0-1\" speed=\"100Gf\"\n"
    "             core=\"2\" bw=\"10Gbps\" lat=\"10us\" loopback_bw=\"20GBps\"\n"
    "             loopback_lat=\"500ns\"/>\n"
    "    <cluster id=\"slow\" prefix=\"s-\" suffix=\"\" radical=\"0,3\" speed=\"25e9f\" core=\"1\"\n"
    "             bw=\"125MBps\" lat=\"25us\" bb_bw=\"1GiBps\" bb_lat=\"0.1ms\">\n"
    "      <prop id=\"note\" value=\"ignored\"/>\n"
    "    </cluster>\n"
    "    <link id=\"wan\" bandwidth=\"12.5MBps\" latency=\"2ms\"/>\n"
    "    <zoneRoute src=\"fast\" dst=\"slow\" gw_src=\"f-fast_router.a\" gw_dst=\"s-slow_router\">\n"
    "      <link_ctn id=\"wan\"/>\n"
    "    </zoneRoute>\n"
    "  </zone>\n"
    "</platform>\n";

static void heterogeneous(void) {
    het_platform p;
    const char *f = put("two.xml", two_clusters);
    CHECK(het_platform_read(&p, f) == HET_OK, "%s", het_error_msg());
    if (p.n_hosts != 4) {
        CHECK(0, "%d hosts, expected 4", p.n_hosts);
        het_platform_free(&p);
        return;
    }
    const char *names[4] = {"f-0.a", "f-1.a", "s-0", "s-3"};
    const double sp[4] = {100e9, 100e9, 25e9, 25e9};
    for (int h = 0; h < 4; h++)
        CHECK(!strcmp(p.hosts[h].name, names[h]) && p.hosts[h].speed == sp[h] &&
              p.hosts[h].cores == (h < 2 ? 2 : 1), "host %d: %s %g %d", h, p.hosts[h].name,
              p.hosts[h].speed, p.hosts[h].cores);
    /* fast <-> fast: two private links; slow <-> slow: private + backbone + private; fast <->
     * slow: private, the wan, the slow cluster's backbone, private */
    const double gib = 1024.0 * 1024.0 * 1024.0;
    struct { int a, b; double lat, bw; } want[] = {
        {0, 0, 500e-9, 20e9},     {2, 2, 0.0, 10e9},
        {0, 1, 20e-6, 1.25e9},    {2, 3, 50e-6 + 1e-4, 125e6},
        {0, 2, 10e-6 + 2e-3 + 1e-4 + 25e-6, 12.5e6}, {3, 1, 10e-6 + 2e-3 + 1e-4 + 25e-6, 12.5e6},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        double lat = p.lat[want[i].a * 4 + want[i].b], bw = p.bw[want[i].a * 4 + want[i].b];
        CHECK(fabs(lat - want[i].lat) <= 1e-15 && NEAR(bw, want[i].bw),
              "route %d-%d: %.9g s %.9g B/s, expected %.9g s %.9g B/s", want[i].a, want[i].b,
              lat, bw, want[i].lat, want[i].bw);
    }
    CHECK(gib > 125e6, "the backbone (1 GiBps) is not the bottleneck");
    /* 6 ranks: 2 + 2 on the fast hosts, one on each slow one */
    int host_of[6];
    CHECK(het_platform_place(&p, NULL, 6, host_of) == HET_OK, "%s", het_error_msg());
    const int where[6] = {0, 0, 1, 1, 2, 3};
    for (int r = 0; r < 6; r++) CHECK(host_of[r] == where[r], "rank %d on %d", r, host_of[r]);
    het_netem ne = {0};
    int uniform = 1;
    het_platform_netem(&p, host_of, 6, &ne, &uniform);
    CHECK(!uniform && NEAR(ne.lat_s, 10e-6 + 2e-3 + 1e-4 + 25e-6) && ne.bw_bytes_per_s == 12.5e6,
          "netem: the slowest route, said (uniform %d, %g s, %g B/s)", uniform, ne.lat_s,
          ne.bw_bytes_per_s);
    /* a hostfile with HOST:N */
    const char *hf = put("two.hosts", "# ranks\ns-3:2\n\nf-0.a\n");
    CHECK(het_platform_place(&p, hf, 3, host_of) == HET_OK && host_of[0] == 3 &&
          host_of[1] == 3 && host_of[2] == 0, "%s", het_error_msg());
    CHECK(het_platform_place(&p, hf, 4, host_of) != HET_OK &&
          strstr(het_error_msg(), "3 host lines for 4 ranks"), "%s", het_error_msg());
    hf = put("bad.hosts", "f-0.a\nnowhere\n");
    CHECK(het_platform_place(&p, hf, 2, host_of) != HET_OK &&
          strstr(het_error_msg(), "bad.hosts:2: host 'nowhere' is not in the platform"), "%s",
          het_error_msg());
    het_platform_free(&p);
}

/* A broken file: refused, and the message holds each of the expected pieces. */
static void refused(const char *text, const char *piece1, const char *piece2) {
    const char *f = put("bad.xml", text);
    het_platform p;
    int st = het_platform_read(&p, f);
    const char *m = het_error_msg();
    CHECK(st != HET_OK && strstr(m, piece1) && (!piece2 || strstr(m, piece2)) &&
          !strchr(m, '\n'), "expected '%s'%s%s, got: %s", piece1, piece2 ? " and " : "",
          piece2 ? piece2 : "", st ? m : "accepted");
    if (!st) het_platform_free(&p);
}

#define HEAD "<?xml version='1.0'?>\n<platform version=\"4.1\">\n"

static void broken(void) {
    refused("", "bad.xml:", "expected a SimGrid platform file");
    refused("<platform version=\"4.1\"><zone", "bad.xml:1:", NULL);
    refused(HEAD "<cluster id=\"c\" prefix=\"n\" radical=\"0-1\" speed=\"1Gf\" bw=\"1Gbps\"/>"
            "</platform>", "bad.xml:3: <cluster>: expected attribute lat", NULL);
    refused(HEAD "<cluster id=\"c\" radical=\"0-1\" speed=\"fast\" bw=\"1Gbps\" lat=\"1us\"/>"
            "</platform>", "bad.xml:3: <cluster>: speed=\"fast\": expected a speed", NULL);
    refused(HEAD "<cluster id=\"c\" radical=\"1-0\" speed=\"1Gf\" bw=\"1Gbps\" lat=\"1us\"/>"
            "</platform>", "bad.xml:3: <cluster>: radical=\"1-0\"", NULL);
    refused(HEAD "<cluster id=\"c\" radical=\"0-1\" speed=\"1Gf\" bw=\"1Gbps\" lat=\"1 parsec\"/>"
            "</platform>", "bad.xml:3: <cluster>: lat=\"1 parsec\": expected a time", NULL);
    refused(HEAD "<zone id=\"z\" routing=\"Floyd\"/></platform>",
            "bad.xml:3: <zone>: routing=\"Floyd\": hetrain reads Full routing", NULL);
    refused(HEAD "<zone id=\"z\" routing=\"Full\">\n<host id=\"a\" speed=\"1Gf\"/>\n"
            "<host id=\"a\" speed=\"2Gf\"/></zone></platform>",
            "bad.xml:5: <host>: host 'a' declared twice", NULL);
    refused(HEAD "<zone id=\"z\" routing=\"Full\">\n<host id=\"a\" speed=\"1Gf\"/>\n"
            "<host id=\"b\" speed=\"1Gf\"/>\n</zone></platform>",
            "no route between hosts a (line 4) and b (line 5)", NULL);
    refused(HEAD "<zone id=\"z\" routing=\"Full\">\n<host id=\"a\" speed=\"1Gf\"/>\n"
            "<host id=\"b\" speed=\"1Gf\"/>\n<route src=\"a\" dst=\"b\"><link_ctn id=\"l\"/>"
            "</route></zone></platform>", "bad.xml:6: <link_ctn>: link 'l' is not declared",
            NULL);
    refused(HEAD "<zone id=\"z\" routing=\"Full\"><trace id=\"t\"/></zone></platform>",
            "bad.xml:3: <trace>: not in the subset hetrain reads", NULL);
    refused(HEAD "<zone id=\"z\" routing=\"Full\">\n<host id=\"a\" speed=\"1Gf\" "
            "availability_file=\"x\"/></zone></platform>",
            "bad.xml:4: <host>: attribute 'availability_file' is not in the subset", NULL);
    refused("<?xml version='1.0'?>\n<platform version=\"3\"/>", "bad.xml:2: <platform>: "
            "version=\"3\": expected version 4", NULL);
    refused("<?xml version='1.0'?>\n<html/>", "bad.xml:2: <html>: expected <platform", NULL);
    refused(HEAD "</platform>", "bad.xml: no host in the platform", NULL);
    refused(HEAD "<config>\n<prop id=\"network/crosstraffic\" value=\"maybe\"/></config>"
            "</platform>", "bad.xml:4: <prop>: network/crosstraffic: \"maybe\" (expected yes "
            "or no", NULL);
    refused(HEAD "<config>\n<prop id=\"smpi/async-small-thresh\" value=\"64k\"/></config>"
            "</platform>", "bad.xml:4: <prop>: smpi/async-small-thresh: \"64k\" (expected a "
            "number of bytes", NULL);
    /* a zone route whose gateway is not the cluster's router */
    char *t = strdup(two_clusters);
    char *g = strstr(t, "f-fast_router.a");
    memcpy(g, "f-fast_ROUTER.a", 15);
    refused(t, "bad.xml:13: <zoneRoute>: gw_src=\"f-fast_ROUTER.a\": expected cluster fast's "
            "router 'f-fast_router.a'", NULL);
    free(t);
    /* not a regular file: refused before any read (a FIFO would block) */
    het_platform p;
    CHECK(het_platform_read(&p, dir) != HET_OK && strstr(het_error_msg(), "not a regular file"),
          "%s", het_error_msg());
    CHECK(het_platform_read(&p, "/nonexistent/p.xml") != HET_OK &&
          strstr(het_error_msg(), "/nonexistent/p.xml: cannot open"), "%s", het_error_msg());
}

static void units(void) {
    double v;
    CHECK(!het_platform_parse_speed("74.6Gf", &v) && NEAR(v, 74.6e9), "74.6Gf: %g", v);
    CHECK(!het_platform_parse_speed("1e9", &v) && v == 1e9, "1e9: %g", v);
    CHECK(!het_platform_parse_speed("2megaflops", &v) && v == 2e6, "2megaflops: %g", v);
    CHECK(het_platform_parse_speed("1GBps", &v) != 0, "a bandwidth is not a speed");
    CHECK(het_platform_parse_speed("0f", &v) != 0, "0 is not a speed");
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    written_reads_back();
    heterogeneous();
    broken();
    units();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "test_platform: could not remove %s\n", dir);
    return het_test_finish("test_platform");
}

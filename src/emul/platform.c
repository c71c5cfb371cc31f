/* Platform files: one description of an emulated cluster, in SimGrid's platform XML (version 4),
 * so that the same cluster runs under hetrain's virtual clock and under SimGrid's smpirun.
 *
 * The subset read (libxml2, no DTD or network access), enough for a cluster study:
 *   <platform version="4.1">            the root; its children:
 *   <zone id routing="Full">            hosts, links and routes, clusters, zone routes; zones nest
 *   <cluster id prefix suffix radical speed core bw lat sharing_policy bb_bw bb_lat
 *            loopback_bw loopback_lat/> a flat cluster: host i (prefix i suffix) has a private
 *                                       link of bw and lat to the cluster's router, the backbone
 *                                       (if bb_bw) joins the private links
 *   <host id speed core/>               one host (a node: its ranks share it)
 *   <link id bandwidth latency sharing_policy/>
 *   <route src dst><link_ctn id/></route>            between two hosts of a Full zone (src =
 *                                                    dst: the host's loopback)
 *   <zoneRoute src dst gw_src gw_dst><link_ctn id/></zoneRoute>   between two clusters, their
 *                                                    routers as gateways
 *   <prop/> anywhere (ignored)
 * Units as SimGrid's (units.c). A host's speed is its first power state (SimGrid reads
 * "1Gf,2Gf" as power states, not as one speed per host). Anything else is refused with "FILE:LINE: <element>: ...".
 *
 * What hetrain keeps of it: the hosts (name, speed, cores) and, for every pair of hosts, the
 * route's latency (the sum of its links') and bandwidth (the least of its links'), a host to
 * itself through its loopback (the cluster's loopback_bw / loopback_lat, a self route, or
 * SimGrid's default: 10 GBps, 0 s). Routes are symmetric. Ranks on hosts, the network model's
 * links and the writer are platform_place.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "emul/emul.h"

#define PLAT_MAX_HOSTS 1024
#define PLAT_MAX_BYTES (64L << 20)
#define DEFAULT_LOOPBACK_BW 10e9 /* SimGrid's network/loopback-bw */
#define DEFAULT_LOOPBACK_LAT 0.0

/* ---------------------------------------------------------------- the reader */

typedef struct plink {
    char id[HET_PLAT_NAME];
    double bw, lat;
} plink;

typedef struct cluster {
    char id[HET_PLAT_NAME], router[2 * HET_PLAT_NAME];
    double bw, lat, bb_bw, bb_lat, lo_bw, lo_lat;
    int has_bb, has_lo;
} cluster;

typedef struct route {
    int a, b;        /* hosts, or clusters for a zone route */
    int zone_route;  /* 1: between clusters a and b */
    double bw, lat;  /* of its links */
    int line;
} route;

typedef struct reader {
    const char *file;
    het_platform *p;
    int *host_cluster; /* per host: its cluster or -1 */
    plink *links;
    int n_links, cap_links;
    cluster *clusters;
    int n_clusters, cap_clusters;
    route *routes;
    int n_routes, cap_routes;
} reader;

static int fail(reader *r, xmlNode *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(reader *r, xmlNode *n, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return het_error_set(HET_EFORMAT, "%s:%ld: <%s>: %s", r->file, n ? xmlGetLineNo(n) : 0L,
                         n ? (const char *)n->name : "?", msg);
}

static const char *attr(xmlNode *n, const char *name) {
    for (xmlAttr *a = n->properties; a; a = a->next)
        if (!strcmp((const char *)a->name, name) && a->children && a->children->content)
            return (const char *)a->children->content;
    return NULL;
}

static int is(xmlNode *n, const char *name) {
    return n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, name);
}

/* Checks that n has no attribute outside `allowed` (NULL-terminated). */
static int only_attrs(reader *r, xmlNode *n, const char *const *allowed) {
    for (xmlAttr *a = n->properties; a; a = a->next) {
        int ok = 0;
        for (int i = 0; allowed[i] && !ok; i++) ok = !strcmp((const char *)a->name, allowed[i]);
        if (!ok)
            return fail(r, n, "attribute '%s' is not in the subset hetrain reads", a->name);
    }
    return HET_OK;
}

static int need(reader *r, xmlNode *n, const char *name, const char **out) {
    *out = attr(n, name);
    return *out && **out ? HET_OK : fail(r, n, "expected attribute %s", name);
}

static int value(reader *r, xmlNode *n, const char *name, const het_unit *u, const char *what,
                 int required, double dflt, double *out) {
    const char *s = attr(n, name);
    if (!s) {
        if (required) return fail(r, n, "expected attribute %s (%s)", name, what);
        *out = dflt;
        return HET_OK;
    }
    char first[128];
    snprintf(first, sizeof first, "%s", s);
    char *comma = strchr(first, ','); /* power states: the first */
    if (comma) *comma = 0;
    char *t = first;
    while (*t == ' ') t++;
    if (het_unit_parse(t, u, out)) return fail(r, n, "%s=\"%s\": expected %s", name, s, what);
    return HET_OK;
}

static int grow(void **v, int *cap, int n, size_t size) {
    if (n < *cap) return 0;
    int c = *cap ? 2 * *cap : 16;
    void *x = realloc(*v, (size_t)c * size);
    if (!x) return -1;
    *v = x;
    *cap = c;
    return 0;
}

int het_platform_host(const het_platform *p, const char *name) {
    for (int i = 0; i < p->n_hosts; i++)
        if (!strcmp(p->hosts[i].name, name)) return i;
    return -1;
}

static int add_host(reader *r, xmlNode *n, const char *name, double speed, int cores, int cl) {
    het_platform *p = r->p;
    if (strlen(name) >= HET_PLAT_NAME)
        return fail(r, n, "host name '%.40s...' longer than %d characters", name,
                    HET_PLAT_NAME - 1);
    if (het_platform_host(p, name) >= 0) return fail(r, n, "host '%s' declared twice", name);
    if (p->n_hosts >= PLAT_MAX_HOSTS)
        return fail(r, n, "more than %d hosts", PLAT_MAX_HOSTS);
    if (!(speed > 0)) return fail(r, n, "host '%s': speed must be above 0", name);
    if (cores < 1 || cores > 4096) return fail(r, n, "host '%s': core must be 1..4096", name);
    het_plat_host *h = &p->hosts[p->n_hosts];
    snprintf(h->name, sizeof h->name, "%s", name);
    h->speed = speed;
    h->cores = cores;
    h->line = (int)xmlGetLineNo(n);
    r->host_cluster[p->n_hosts++] = cl;
    return HET_OK;
}

static int read_cores(reader *r, xmlNode *n, int *cores) {
    const char *c = attr(n, "core");
    *cores = 1;
    if (!c) return HET_OK;
    char *end;
    long v = strtol(c, &end, 10);
    if (end == c || *end || v < 1 || v > 4096)
        return fail(r, n, "core=\"%s\": expected an integer 1..4096", c);
    *cores = (int)v;
    return HET_OK;
}

static int sharing_ok(reader *r, xmlNode *n, const char *name) {
    const char *s = attr(n, name);
    if (!s || !strcmp(s, "SHARED") || !strcmp(s, "SPLITDUPLEX") || !strcmp(s, "FATPIPE"))
        return HET_OK;
    return fail(r, n, "%s=\"%s\": expected SHARED, SPLITDUPLEX or FATPIPE", name, s);
}

static int read_cluster(reader *r, xmlNode *n) {
    static const char *const ok[] = {"id", "prefix", "suffix", "radical", "speed", "core", "bw",
                                     "lat", "sharing_policy", "bb_bw", "bb_lat",
                                     "bb_sharing_policy", "loopback_bw", "loopback_lat",
                                     "topology", "router_id", NULL};
    const char *id = NULL, *radical = NULL;
    int st = only_attrs(r, n, ok);
    if (!st) st = need(r, n, "id", &id);
    if (!st) st = need(r, n, "radical", &radical);
    const char *topo = attr(n, "topology");
    if (!st && topo && strcmp(topo, "FLAT") != 0)
        st = fail(r, n, "topology=\"%s\": hetrain reads FLAT clusters only", topo);
    if (!st) st = sharing_ok(r, n, "sharing_policy");
    if (!st) st = sharing_ok(r, n, "bb_sharing_policy");
    if (st) return st;
    if (grow((void **)&r->clusters, &r->cap_clusters, r->n_clusters, sizeof *r->clusters))
        return het_error_set(HET_ENOMEM, "%s: out of memory", r->file);
    cluster *c = &r->clusters[r->n_clusters];
    memset(c, 0, sizeof *c);
    if (strlen(id) >= HET_PLAT_NAME) return fail(r, n, "id longer than %d characters",
                                                 HET_PLAT_NAME - 1);
    snprintf(c->id, sizeof c->id, "%s", id);
    for (int i = 0; i < r->n_clusters; i++)
        if (!strcmp(r->clusters[i].id, id)) return fail(r, n, "cluster '%s' declared twice", id);
    const char *prefix = attr(n, "prefix"), *suffix = attr(n, "suffix");
    prefix = prefix ? prefix : "";
    suffix = suffix ? suffix : "";
    const char *rid = attr(n, "router_id");
    if (rid) snprintf(c->router, sizeof c->router, "%s", rid);
    else snprintf(c->router, sizeof c->router, "%s%s_router%s", prefix, id, suffix);
    double speed;
    int cores;
    if ((st = value(r, n, "speed", het_speed_units, "a speed (e.g. 1Gf)", 1, 0, &speed)) ||
        (st = read_cores(r, n, &cores)) ||
        (st = value(r, n, "bw", het_bw_units(), "a bandwidth (e.g. 125MBps)", 1, 0, &c->bw)) ||
        (st = value(r, n, "lat", het_time_units, "a time (e.g. 50us)", 1, 0, &c->lat)) ||
        (st = value(r, n, "bb_bw", het_bw_units(), "a bandwidth", 0, 0, &c->bb_bw)) ||
        (st = value(r, n, "bb_lat", het_time_units, "a time", 0, 0, &c->bb_lat)) ||
        (st = value(r, n, "loopback_bw", het_bw_units(), "a bandwidth", 0, 0, &c->lo_bw)) ||
        (st = value(r, n, "loopback_lat", het_time_units, "a time", 0, 0, &c->lo_lat)))
        return st;
    if (!(c->bw > 0)) return fail(r, n, "bw must be above 0");
    c->has_bb = attr(n, "bb_bw") != NULL;
    if (c->has_bb && !(c->bb_bw > 0)) return fail(r, n, "bb_bw must be above 0");
    c->has_lo = attr(n, "loopback_bw") || attr(n, "loopback_lat");
    if (!attr(n, "loopback_bw")) c->lo_bw = DEFAULT_LOOPBACK_BW;
    if (c->has_lo && !(c->lo_bw > 0)) return fail(r, n, "loopback_bw must be above 0");
    const int cl = r->n_clusters++;
    /* radical: "0-7" or "0-3,5,8-9" */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", radical);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long lo = strtol(tok, &end, 10), hi = lo;
        if (end != tok && *end == '-') {
            char *e2;
            hi = strtol(end + 1, &e2, 10);
            end = e2 == end + 1 ? end : e2;
        }
        if (end == tok || *end || lo < 0 || hi < lo || hi - lo >= PLAT_MAX_HOSTS)
            return fail(r, n, "radical=\"%s\": expected ranges such as 0-7 or 0-3,5", radical);
        for (long i = lo; i <= hi; i++) {
            char name[3 * HET_PLAT_NAME];
            snprintf(name, sizeof name, "%s%ld%s", prefix, i, suffix);
            if ((st = add_host(r, n, name, speed, cores, cl))) return st;
        }
    }
    return HET_OK;
}

static int read_host(reader *r, xmlNode *n) {
    static const char *const ok[] = {"id", "speed", "core", "pstate", NULL};
    const char *id;
    double speed;
    int cores, st = only_attrs(r, n, ok);
    if (!st) st = need(r, n, "id", &id);
    if (!st) st = value(r, n, "speed", het_speed_units, "a speed (e.g. 1Gf)", 1, 0, &speed);
    if (!st) st = read_cores(r, n, &cores);
    for (xmlNode *c = n->children; !st && c; c = c->next)
        if (c->type == XML_ELEMENT_NODE && !is(c, "prop"))
            st = fail(r, c, "not in the subset hetrain reads inside <host>");
    return st ? st : add_host(r, n, id, speed, cores, -1);
}

static int read_link(reader *r, xmlNode *n) {
    static const char *const ok[] = {"id", "bandwidth", "latency", "sharing_policy", NULL};
    const char *id;
    int st = only_attrs(r, n, ok);
    if (!st) st = need(r, n, "id", &id);
    if (!st) st = sharing_ok(r, n, "sharing_policy");
    if (st) return st;
    if (strlen(id) >= HET_PLAT_NAME)
        return fail(r, n, "id longer than %d characters", HET_PLAT_NAME - 1);
    for (int i = 0; i < r->n_links; i++)
        if (!strcmp(r->links[i].id, id)) return fail(r, n, "link '%s' declared twice", id);
    if (grow((void **)&r->links, &r->cap_links, r->n_links, sizeof *r->links))
        return het_error_set(HET_ENOMEM, "%s: out of memory", r->file);
    plink *l = &r->links[r->n_links];
    snprintf(l->id, sizeof l->id, "%s", id);
    if ((st = value(r, n, "bandwidth", het_bw_units(), "a bandwidth (e.g. 125MBps)", 1, 0, &l->bw)) ||
        (st = value(r, n, "latency", het_time_units, "a time (e.g. 50us)", 0, 0, &l->lat)))
        return st;
    if (!(l->bw > 0)) return fail(r, n, "bandwidth must be above 0");
    r->n_links++;
    return HET_OK;
}

static int find_cluster(const reader *r, const char *id) {
    for (int i = 0; i < r->n_clusters; i++)
        if (!strcmp(r->clusters[i].id, id)) return i;
    return -1;
}

/* <route> between hosts or <zoneRoute> between clusters: its links' latency and bandwidth. */
static int read_route(reader *r, xmlNode *n, int zone_route) {
    static const char *const ok_r[] = {"src", "dst", "symmetrical", NULL};
    static const char *const ok_z[] = {"src", "dst", "gw_src", "gw_dst", "symmetrical", NULL};
    const char *src, *dst;
    int st = only_attrs(r, n, zone_route ? ok_z : ok_r);
    if (!st) st = need(r, n, "src", &src);
    if (!st) st = need(r, n, "dst", &dst);
    if (st) return st;
    const char *sym = attr(n, "symmetrical");
    if (sym && strcmp(sym, "YES") != 0 && strcmp(sym, "yes") != 0)
        return fail(r, n, "symmetrical=\"%s\": hetrain reads symmetric routes only", sym);
    route x = {0};
    x.zone_route = zone_route;
    x.line = (int)xmlGetLineNo(n);
    x.bw = INFINITY;
    if (zone_route) {
        x.a = find_cluster(r, src);
        x.b = find_cluster(r, dst);
        if (x.a < 0 || x.b < 0)
            return fail(r, n, "%s '%s' is not a cluster declared before it (hetrain reads zone "
                        "routes between clusters)", x.a < 0 ? "src" : "dst", x.a < 0 ? src : dst);
        const char *gs = attr(n, "gw_src"), *gd = attr(n, "gw_dst");
        if (!gs || strcmp(gs, r->clusters[x.a].router) != 0)
            return fail(r, n, "gw_src=\"%s\": expected cluster %s's router '%s'", gs ? gs : "",
                        src, r->clusters[x.a].router);
        if (!gd || strcmp(gd, r->clusters[x.b].router) != 0)
            return fail(r, n, "gw_dst=\"%s\": expected cluster %s's router '%s'", gd ? gd : "",
                        dst, r->clusters[x.b].router);
    } else {
        x.a = het_platform_host(r->p, src);
        x.b = het_platform_host(r->p, dst);
        if (x.a < 0 || x.b < 0)
            return fail(r, n, "%s '%s' is not a host declared before it",
                        x.a < 0 ? "src" : "dst", x.a < 0 ? src : dst);
    }
    for (xmlNode *c = n->children; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE) continue;
        if (!is(c, "link_ctn")) return fail(r, c, "expected <link_ctn id=...> inside a route");
        const char *id;
        if ((st = need(r, c, "id", &id))) return st;
        int k = -1;
        for (int i = 0; i < r->n_links && k < 0; i++)
            if (!strcmp(r->links[i].id, id)) k = i;
        if (k < 0) return fail(r, c, "link '%s' is not declared before it", id);
        const char *dir = attr(c, "direction");
        if (dir && strcmp(dir, "UP") && strcmp(dir, "DOWN") && strcmp(dir, "NONE"))
            return fail(r, c, "direction=\"%s\": expected UP, DOWN or NONE", dir);
        x.lat += r->links[k].lat;
        if (r->links[k].bw < x.bw) x.bw = r->links[k].bw;
    }
    if (grow((void **)&r->routes, &r->cap_routes, r->n_routes, sizeof *r->routes))
        return het_error_set(HET_ENOMEM, "%s: out of memory", r->file);
    r->routes[r->n_routes++] = x;
    return HET_OK;
}

static int read_zone(reader *r, xmlNode *z) {
    static const char *const ok[] = {"id", "routing", NULL};
    const char *id, *routing;
    int st = only_attrs(r, z, ok);
    if (!st) st = need(r, z, "id", &id);
    if (!st) st = need(r, z, "routing", &routing);
    if (!st && strcmp(routing, "Full") != 0)
        st = fail(r, z, "routing=\"%s\": hetrain reads Full routing (routes given for each "
                  "pair) only", routing);
    for (xmlNode *n = z->children; !st && n; n = n->next) {
        if (n->type != XML_ELEMENT_NODE || is(n, "prop")) continue;
        if (is(n, "zone")) st = read_zone(r, n);
        else if (is(n, "cluster")) st = read_cluster(r, n);
        else if (is(n, "host")) st = read_host(r, n);
        else if (is(n, "link")) st = read_link(r, n);
        else if (is(n, "route")) st = read_route(r, n, 0);
        else if (is(n, "zoneRoute")) st = read_route(r, n, 1);
        else st = fail(r, n, "not in the subset hetrain reads (zone, cluster, host, link, "
                       "route, zoneRoute, prop)");
    }
    return st;
}

/* Route latency and bandwidth between hosts a and b (a == b: the loopback). */
static int pair(reader *r, int a, int b, double *lat, double *bw) {
    const het_platform *p = r->p;
    const int ca = r->host_cluster[a], cb = r->host_cluster[b];
    if (a == b) {
        *lat = DEFAULT_LOOPBACK_LAT;
        *bw = DEFAULT_LOOPBACK_BW;
        if (ca >= 0 && r->clusters[ca].has_lo) {
            *lat = r->clusters[ca].lo_lat;
            *bw = r->clusters[ca].lo_bw;
        }
        for (int i = 0; ca < 0 && i < r->n_routes; i++)
            if (!r->routes[i].zone_route && r->routes[i].a == a && r->routes[i].b == a)
                *lat = r->routes[i].lat, *bw = r->routes[i].bw;
        return HET_OK;
    }
    if (ca >= 0 && cb >= 0) { /* private links, backbones, and between clusters a zone route */
        const cluster *x = &r->clusters[ca], *y = &r->clusters[cb];
        *lat = x->lat + y->lat;
        *bw = x->bw < y->bw ? x->bw : y->bw;
        if (x->has_bb) {
            *lat += x->bb_lat;
            if (x->bb_bw < *bw) *bw = x->bb_bw;
        }
        if (ca == cb) return HET_OK;
        if (y->has_bb) {
            *lat += y->bb_lat;
            if (y->bb_bw < *bw) *bw = y->bb_bw;
        }
        for (int i = 0; i < r->n_routes; i++) {
            const route *z = &r->routes[i];
            if (z->zone_route && ((z->a == ca && z->b == cb) || (z->a == cb && z->b == ca))) {
                *lat += z->lat;
                if (z->bw < *bw) *bw = z->bw;
                return HET_OK;
            }
        }
        return het_error_set(HET_EFORMAT, "%s: no zoneRoute between clusters %s and %s (hosts "
                             "%s and %s)", r->file, x->id, y->id, p->hosts[a].name,
                             p->hosts[b].name);
    }
    for (int i = 0; ca < 0 && cb < 0 && i < r->n_routes; i++) {
        const route *z = &r->routes[i];
        if (!z->zone_route && ((z->a == a && z->b == b) || (z->a == b && z->b == a))) {
            if (!isfinite(z->bw))
                return het_error_set(HET_EFORMAT, "%s:%d: <route>: the route between %s and %s "
                                     "has no link", r->file, z->line, p->hosts[a].name,
                                     p->hosts[b].name);
            *lat = z->lat;
            *bw = z->bw;
            return HET_OK;
        }
    }
    return het_error_set(HET_EFORMAT, "%s: no route between hosts %s (line %d) and %s (line %d)%s",
                         r->file, p->hosts[a].name, p->hosts[a].line, p->hosts[b].name,
                         p->hosts[b].line, (ca >= 0) != (cb >= 0) ? ": hetrain reads routes "
                         "between hosts of a zone and zone routes between clusters" : "");
}

/* The file's bytes, at most PLAT_MAX_BYTES, from a regular file only (a FIFO would block). */
int het_platform_slurp(const char *path, char **out, size_t *len) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return het_error_set(HET_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    int st = HET_OK;
    if (fstat(fd, &sb) != 0) st = het_error_set(HET_EIO, "%s: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = het_error_set(HET_EIO, "%s: not a regular file (a platform file is XML)", path);
    else if (sb.st_size > PLAT_MAX_BYTES)
        st = het_error_set(HET_EFORMAT, "%s: %lld bytes, a platform file is at most %ld", path,
                           (long long)sb.st_size, PLAT_MAX_BYTES);
    char *buf = st ? NULL : malloc((size_t)sb.st_size + 1);
    if (!st && !buf) st = het_error_set(HET_ENOMEM, "%s: out of memory", path);
    size_t got = 0;
    while (!st && got < (size_t)sb.st_size) {
        ssize_t k = read(fd, buf + got, (size_t)sb.st_size - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) st = het_error_set(HET_EIO, "%s: read failed at byte %zu", path, got);
        else got += (size_t)k;
    }
    close(fd);
    if (st) {
        free(buf);
        return st;
    }
    buf[got] = 0;
    *out = buf;
    *len = got;
    return HET_OK;
}

void het_platform_free(het_platform *p) {
    if (!p) return;
    free(p->hosts);
    free(p->lat);
    free(p->bw);
    memset(p, 0, sizeof *p);
}

/* libxml2's first error, for the message. */
static void quiet_errors(void *ctx, const char *msg, ...) {
    (void)ctx;
    (void)msg;
}

/* <config>: SMPI's message-size factors (smpi/lat-factor, smpi/bw-factor), the size below
 * which a message does not wait for its receive (smpi/async-small-thresh) and whether flows
 * carry cross-traffic (network/crosstraffic: yes/no, on/off, true/false, 1/0, as SimGrid reads
 * a boolean), which hetrain's network model applies as SMPI does; other settings are
 * SimGrid's alone. */
static int read_config(reader *r, xmlNode *n) {
    for (xmlNode *c = n->children; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || !is(c, "prop")) continue;
        const char *id = attr(c, "id"), *v = attr(c, "value");
        if (id && !strcmp(id, "smpi/async-small-thresh")) {
            char *end = NULL;
            double x = v ? strtod(v, &end) : -1.0;
            if (!v || end == v || *end || !(x >= 0.0 && x <= 2147483647.0) || x != (long)x)
                return fail(r, c, "%s: \"%s\" (expected a number of bytes, 0..2147483647)", id,
                            v ? v : "");
            r->p->async_small = x;
            continue;
        }
        if (id && !strcmp(id, "network/crosstraffic")) {
            static const char *const on[] = {"yes", "on", "true", "1"}, *const off[] = {
                "no", "off", "false", "0"};
            r->p->crosstraffic = -1;
            for (int k = 0; v && k < 4; k++)
                if (!strcmp(v, on[k])) r->p->crosstraffic = 1;
                else if (!strcmp(v, off[k])) r->p->crosstraffic = 0;
            if (r->p->crosstraffic < 0)
                return fail(r, c, "%s: \"%s\" (expected yes or no: on/off, true/false, 1/0)",
                            id, v ? v : "");
            continue;
        }
        het_netem_pw *pw = !id ? NULL : !strcmp(id, "smpi/lat-factor") ? &r->p->lat_factor
                                      : !strcmp(id, "smpi/bw-factor")  ? &r->p->bw_factor
                                                                        : NULL;
        if (!pw) continue;
        if (!v || het_netem_pw_parse(pw, v))
            return fail(r, c, "%s: %s", id, v ? het_error_msg() : "no value=");
    }
    return HET_OK;
}

int het_platform_read(het_platform *p, const char *path) {
    memset(p, 0, sizeof *p);
    p->crosstraffic = -1;
    char *text;
    size_t len;
    int st = het_platform_slurp(path, &text, &len);
    if (st) return st;
    xmlSetGenericErrorFunc(NULL, quiet_errors);
    xmlDoc *doc = xmlReadMemory(text, (int)len, path, NULL, XML_PARSE_NONET | XML_PARSE_NOERROR |
                                XML_PARSE_NOWARNING);
    free(text);
    if (!doc) {
        const xmlError *e = xmlGetLastError();
        char msg[256] = "not well-formed XML";
        if (e && e->message) {
            snprintf(msg, sizeof msg, "%s", e->message);
            size_t k = strlen(msg);
            while (k && (msg[k - 1] == '\n' || msg[k - 1] == ' ')) msg[--k] = 0;
        }
        int line = e ? e->line : 0;
        xmlResetLastError();
        return het_error_set(HET_EFORMAT, "%s:%d: %s (expected a SimGrid platform file)", path,
                             line, msg);
    }
    reader r = {.file = path, .p = p};
    snprintf(p->file, sizeof p->file, "%s", path);
    p->hosts = calloc(PLAT_MAX_HOSTS, sizeof *p->hosts);
    r.host_cluster = calloc(PLAT_MAX_HOSTS, sizeof *r.host_cluster);
    if (!p->hosts || !r.host_cluster) st = het_error_set(HET_ENOMEM, "%s: out of memory", path);
    xmlNode *root = xmlDocGetRootElement(doc);
    if (!st && (!root || !is(root, "platform")))
        st = fail(&r, root, "expected <platform version=\"4.1\"> as the root element");
    const char *ver = st ? NULL : attr(root, "version");
    if (!st && (!ver || strncmp(ver, "4", 1) != 0))
        st = fail(&r, root, "version=\"%s\": expected version 4 (4.1)", ver ? ver : "");
    for (xmlNode *n = st ? NULL : root->children; !st && n; n = n->next) {
        if (n->type == XML_ELEMENT_NODE && is(n, "config")) st = read_config(&r, n);
        if (n->type != XML_ELEMENT_NODE || is(n, "prop") || is(n, "config")) continue;
        if (is(n, "zone")) st = read_zone(&r, n);
        else if (is(n, "cluster")) st = read_cluster(&r, n);
        else st = fail(&r, n, "not in the subset hetrain reads (zone, cluster)");
    }
    if (!st && p->n_hosts == 0) st = het_error_set(HET_EFORMAT, "%s: no host in the platform",
                                                   path);
    const int n = p->n_hosts;
    if (!st) {
        p->lat = malloc((size_t)n * (size_t)n * sizeof *p->lat);
        p->bw = malloc((size_t)n * (size_t)n * sizeof *p->bw);
        if (!p->lat || !p->bw) st = het_error_set(HET_ENOMEM, "%s: out of memory for %d hosts' "
                                                  "routes", path, n);
    }
    for (int a = 0; !st && a < n; a++)
        for (int b = a; !st && b < n; b++) {
            double lat = 0, bw = 0;
            st = pair(&r, a, b, &lat, &bw);
            p->lat[a * n + b] = p->lat[b * n + a] = lat;
            p->bw[a * n + b] = p->bw[b * n + a] = bw;
        }
    xmlFreeDoc(doc);
    free(r.host_cluster);
    free(r.links);
    free(r.clusters);
    free(r.routes);
    if (st) het_platform_free(p);
    return st;
}


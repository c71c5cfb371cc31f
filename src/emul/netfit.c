/* MPI's message-size factors fitted from a ping-pong (`hetrain calibrate --network`), in SMPI's
 * form: a message of s bytes takes lat x lat_factor(s) + s / (bw x bw_factor(s)), each factor
 * constant between two sizes (emul.h: het_netem_pw).
 *
 * DESIGN. The sizes measured are the pieces' bounds: between two consecutive sizes s_i < s_i+1
 * the line through their one-way times (t_i, t_i+1) gives the piece starting at s_i (the first
 * piece starts at 0, the last runs on past the largest size): slope b_i, intercept a_i =
 * t_i - b_i s_i, so bw_factor = 1 / (b_i bw) and lat_factor = a_i / lat, and the fitted model
 * passes through every measured time exactly. This is the shape of SMPI's own calibration
 * (a piece per protocol regime, the eager / rendezvous break near 64 kB among them), with a
 * piece per measured interval rather than one per regime found by hand. The reference link is
 * the platform's (lat, bw) when given; else the first piece's intercept (the latency of the
 * smallest messages) and the last piece's slope (the bandwidth of the largest), so that the
 * factors say how each size departs from those. Noise can make a piece's slope or intercept
 * not positive (a measured time lower than a smaller size's): the factor is then clamped to
 * [1e-3, 1e3] of the reference, and the fit no longer passes through that time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emul/emul.h"
#include "hetrain/core.h"

static double clamp(double x) { return x < 1e-3 ? 1e-3 : x > 1e3 ? 1e3 : x; }

int het_netfit(const double *size, const double *t, int n, double *lat, double *bw,
               het_netem_pw *lat_factor, het_netem_pw *bw_factor) {
    if (n < 2 || n - 1 > HET_NETEM_PIECES)
        return het_error_set(HET_EINVAL, "network fit: %d sizes, expected 2..%d", n,
                             HET_NETEM_PIECES + 1);
    for (int i = 0; i < n; i++) {
        if (!(t[i] > 0.0) || !isfinite(t[i]) || !(size[i] >= 0.0))
            return het_error_set(HET_EINVAL, "network fit: size %g took %g s: expected a "
                                 "size >= 0 and a time > 0", size[i], t[i]);
        if (i > 0 && !(size[i] > size[i - 1]))
            return het_error_set(HET_EINVAL, "network fit: sizes must grow (%g after %g)",
                                 size[i], size[i - 1]);
    }
    double a[HET_NETEM_PIECES], b[HET_NETEM_PIECES];
    for (int i = 0; i + 1 < n; i++) {
        b[i] = (t[i + 1] - t[i]) / (size[i + 1] - size[i]);
        a[i] = t[i] - b[i] * size[i];
    }
    if (!(*bw > 0.0)) {
        if (!(b[n - 2] > 0.0))
            return het_error_set(HET_EINVAL, "network fit: the largest messages (%g, %g bytes) "
                                 "took %g and %g s: no bandwidth to fit (larger sizes, or "
                                 "--net-bw)", size[n - 2], size[n - 1], t[n - 2], t[n - 1]);
        *bw = 1.0 / b[n - 2];
    }
    if (!(*lat > 0.0)) *lat = a[0] > 0.0 ? a[0] : t[0];
    memset(lat_factor, 0, sizeof *lat_factor);
    memset(bw_factor, 0, sizeof *bw_factor);
    for (int i = 0; i + 1 < n; i++) {
        double from = i == 0 ? 0.0 : size[i];
        lat_factor->from[i] = bw_factor->from[i] = from;
        lat_factor->val[i] = clamp(a[i] / *lat);
        bw_factor->val[i] = b[i] > 0.0 ? clamp(1.0 / (b[i] * *bw)) : 1e3;
    }
    lat_factor->n = bw_factor->n = n - 1;
    return HET_OK;
}

/* "65472:0.94;0:0.81": largest first, as SimGrid writes them. */
static void pw_text(const het_netem_pw *pw, char *dst, size_t cap) {
    size_t len = 0;
    dst[0] = '\0';
    for (int i = pw->n - 1; i >= 0 && len < cap; i--) {
        int k = snprintf(dst + len, cap - len, "%s%.10g:%.10g", i == pw->n - 1 ? "" : ";",
                         pw->from[i], pw->val[i]);
        if (k < 0) break;
        len += (size_t)k;
    }
}

int het_netfit_write(const char *path, const char *comment, double lat, double bw,
                     const het_netem_pw *lat_factor, const het_netem_pw *bw_factor) {
    char tmp[HET_PATH_LEN + 8], lf[1024], bf[1024];
    if (snprintf(tmp, sizeof tmp, "%s.new", path) >= (int)sizeof tmp)
        return het_error_set(HET_EINVAL, "%s: path too long", path);
    pw_text(lat_factor, lf, sizeof lf);
    pw_text(bw_factor, bf, sizeof bf);
    FILE *f = fopen(tmp, "w");
    if (!f) return het_error_set(HET_EIO, "%s: cannot write", tmp);
    fprintf(f, "# %s\nnet-lat=%.9g\nnet-bw=%.9g\nsmpi/lat-factor=%s\nsmpi/bw-factor=%s\n",
            comment, lat, bw, lf, bf);
    int bad = fflush(f) != 0 || ferror(f);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        remove(tmp);
        return het_error_set(HET_EIO, "%s: write failed", path);
    }
    return HET_OK;
}

int het_netfit_read(const char *path, double *lat, double *bw, het_netem_pw *lat_factor,
                    het_netem_pw *bw_factor) {
    FILE *f = fopen(path, "r");
    if (!f) return het_error_set(HET_EIO, "%s: cannot open", path);
    char line[2048];
    int ln = 0, seen = 0, rc = HET_OK;
    memset(lat_factor, 0, sizeof *lat_factor);
    memset(bw_factor, 0, sizeof *bw_factor);
    while (rc == HET_OK && fgets(line, sizeof line, f)) {
        ln++;
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || line[0] == '#') continue;
        char *eq = strchr(line, '=');
        if (!eq) {
            rc = het_error_set(HET_EFORMAT, "%s:%d: expected KEY=VALUE (net-lat, net-bw, "
                               "smpi/lat-factor, smpi/bw-factor)", path, ln);
            break;
        }
        *eq = '\0';
        const char *k = line, *v = eq + 1;
        char *end;
        if (!strcmp(k, "net-lat") || !strcmp(k, "net-bw")) {
            double x = strtod(v, &end);
            if (end == v || *end || !(x > 0.0) || !isfinite(x))
                rc = het_error_set(HET_EFORMAT, "%s:%d: %s: expected a number > 0, got '%s'",
                                   path, ln, k, v);
            else *(!strcmp(k, "net-lat") ? lat : bw) = x, seen |= !strcmp(k, "net-lat") ? 1 : 2;
        } else if (!strcmp(k, "smpi/lat-factor") || !strcmp(k, "smpi/bw-factor")) {
            int lf = !strcmp(k, "smpi/lat-factor");
            if (het_netem_pw_parse(lf ? lat_factor : bw_factor, v) != HET_OK) {
                char why[384];
                snprintf(why, sizeof why, "%s", het_error_msg());
                rc = het_error_set(HET_EFORMAT, "%s:%d: %s: %s", path, ln, k, why);
            } else seen |= lf ? 4 : 8;
        } else {
            rc = het_error_set(HET_EFORMAT, "%s:%d: unknown key '%s' (expected net-lat, net-bw, "
                               "smpi/lat-factor, smpi/bw-factor)", path, ln, k);
        }
    }
    fclose(f);
    if (rc == HET_OK && seen != 15)
        rc = het_error_set(HET_EFORMAT, "%s: expected net-lat, net-bw, smpi/lat-factor and "
                           "smpi/bw-factor (hetrain calibrate --network writes them)", path);
    return rc;
}

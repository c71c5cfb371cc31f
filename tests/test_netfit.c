/* MPI's message-size factors fitted from a ping-pong (src/emul/netfit.c) against hand-derived
 * numbers: a continuous piecewise-linear one-way time with kinks at the measured sizes (60 us
 * at 8 B, 70 us at 1 KiB, 1 ms at 64 KiB, 9 ms at 1 MiB) gives one piece per interval whose
 * factors are the intercepts / slopes relative to the reference link, and the model through
 * them returns every measured time; the reference link estimated when not given (the first
 * piece's intercept, the last piece's slope); a time below a smaller size's clamps the
 * bandwidth factor; refusals (one size, too many, sizes not growing, a time not > 0, no
 * bandwidth to fit); the factors file written and read back bit for bit, and read errors with
 * the file and line. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "emul/emul.h"
#include "test.h"

static const double S[4] = {8, 1024, 65536, 1048576};
static const double T[4] = {60e-6, 70e-6, 1e-3, 9e-3};

/* The model's time of s bytes: lat x lat factor + s / (bw x bw factor). */
static double model(double lat, double bw, const het_netem_pw *lf, const het_netem_pw *bf,
                    double s) {
    return lat * het_netem_pw_at(lf, s) + s / (bw * het_netem_pw_at(bf, s));
}

static void test_given_link(void) {
    double lat = 50e-6, bw = 125e6;
    het_netem_pw lf, bf;
    CHECK(het_netfit(S, T, 4, &lat, &bw, &lf, &bf) == HET_OK, "%s", het_error_msg());
    CHECK(lat == 50e-6 && bw == 125e6, "the given link changed: %g %g", lat, bw);
    CHECK(lf.n == 3 && bf.n == 3 && lf.from[0] == 0 && lf.from[1] == 1024 &&
              lf.from[2] == 65536 && bf.from[2] == 65536,
          "pieces: %d %d from %g %g %g", lf.n, bf.n, lf.from[0], lf.from[1], lf.from[2]);
    for (int i = 0; i < 3; i++) { /* slope b = dt / ds, intercept a = t - b s */
        double b = (T[i + 1] - T[i]) / (S[i + 1] - S[i]), a = T[i] - b * S[i];
        CHECK_CLOSE(lf.val[i], a / 50e-6, 1e-12, "lat factor");
        CHECK_CLOSE(bf.val[i], 1 / (b * 125e6), 1e-12, "bw factor");
    }
    for (int i = 0; i < 4; i++)
        CHECK(fabs(model(lat, bw, &lf, &bf, S[i]) - T[i]) <= 1e-12 * T[i] + 1e-18,
              "the fit at %g bytes: %.17g s, measured %.17g", S[i],
              model(lat, bw, &lf, &bf, S[i]), T[i]);
}

static void test_fitted_link(void) {
    double lat = 0, bw = 0;
    het_netem_pw lf, bf;
    CHECK(het_netfit(S, T, 4, &lat, &bw, &lf, &bf) == HET_OK, "%s", het_error_msg());
    double b0 = (T[1] - T[0]) / (S[1] - S[0]), b2 = (T[3] - T[2]) / (S[3] - S[2]);
    CHECK_CLOSE(lat, T[0] - b0 * S[0], 1e-12, "fitted latency: the first piece's intercept");
    CHECK_CLOSE(bw, 1 / b2, 1e-12, "fitted bandwidth: the last piece's slope");
    CHECK_CLOSE(lf.val[0], 1.0, 1e-12, "the first piece's latency factor");
    CHECK_CLOSE(bf.val[2], 1.0, 1e-12, "the last piece's bandwidth factor");
    /* noise: 1 KiB measured faster than 8 B */
    double t[4] = {60e-6, 50e-6, 1e-3, 9e-3};
    lat = 50e-6, bw = 125e6;
    CHECK(het_netfit(S, t, 4, &lat, &bw, &lf, &bf) == HET_OK, "%s", het_error_msg());
    CHECK(bf.val[0] == 1e3 && lf.val[0] > 0, "a falling piece: bw factor %g (expected the "
          "clamp 1e3), lat factor %g", bf.val[0], lf.val[0]);
}

static void test_refusals(void) {
    double lat = 1e-5, bw = 1e9, s[18], t[18];
    het_netem_pw lf, bf;
    for (int i = 0; i < 18; i++) s[i] = 8.0 * (i + 1), t[i] = 1e-5 * (i + 1);
    CHECK(het_netfit(s, t, 1, &lat, &bw, &lf, &bf) == HET_EINVAL, "one size accepted");
    CHECK(het_netfit(s, t, 18, &lat, &bw, &lf, &bf) == HET_EINVAL, "18 sizes accepted");
    double s2[3] = {8, 8, 16}, t2[3] = {1e-5, 2e-5, 3e-5}, t3[3] = {1e-5, 0, 3e-5};
    CHECK(het_netfit(s2, t2, 3, &lat, &bw, &lf, &bf) == HET_EINVAL &&
              strstr(het_error_msg(), "must grow"), "sizes not growing: %s", het_error_msg());
    CHECK(het_netfit(s, t3, 3, &lat, &bw, &lf, &bf) == HET_EINVAL, "a time of 0 accepted");
    double t4[3] = {1e-5, 3e-5, 2e-5};
    bw = 0;
    CHECK(het_netfit(s, t4, 3, &lat, &bw, &lf, &bf) == HET_EINVAL &&
              strstr(het_error_msg(), "no bandwidth"), "no bandwidth to fit: %s", het_error_msg());
}

static void test_file(void) {
    char path[] = "/tmp/het_netfit_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    close(fd);
    double lat = 50e-6, bw = 125e6, lat2 = 0, bw2 = 0;
    het_netem_pw lf, bf, lf2, bf2;
    CHECK(het_netfit(S, T, 4, &lat, &bw, &lf, &bf) == HET_OK, "%s", het_error_msg());
    CHECK(het_netfit_write(path, "test", lat, bw, &lf, &bf) == HET_OK, "%s", het_error_msg());
    CHECK(het_netfit_read(path, &lat2, &bw2, &lf2, &bf2) == HET_OK, "%s", het_error_msg());
    CHECK(lat2 == lat && bw2 == bw && lf2.n == lf.n && bf2.n == bf.n, "read back: %g %g %d %d",
          lat2, bw2, lf2.n, bf2.n);
    for (int i = 0; i < lf.n && i < lf2.n; i++)
        CHECK(fabs(lf2.val[i] / lf.val[i] - 1) < 1e-9 && fabs(bf2.val[i] / bf.val[i] - 1) < 1e-9 &&
                  lf2.from[i] == lf.from[i],
              "piece %d read back: %.10g %.10g vs %.10g %.10g", i, lf2.val[i], bf2.val[i],
              lf.val[i], bf.val[i]);
    static const char *const bad[] = {"net-lat=1e-5\nnet-bw=1e9\nsmpi/lat-factor=0:1\n",
                                      "net-lat=1e-5\nwhat\n",
                                      "net-lat=-1\n",
                                      "net-lat=1e-5\nnet-bw=1e9\nsmpi/lat-factor=0:x\n",
                                      "colour=red\n"};
    static const char *const want[] = {"expected net-lat, net-bw", ":2: expected KEY=VALUE",
                                       ":1: net-lat: expected a number", ":3: smpi/lat-factor",
                                       ":1: unknown key 'colour'"};
    for (int k = 0; k < 5; k++) {
        FILE *f = fopen(path, "w");
        if (!f) continue;
        fputs(bad[k], f);
        fclose(f);
        CHECK(het_netfit_read(path, &lat2, &bw2, &lf2, &bf2) == HET_EFORMAT &&
                  strstr(het_error_msg(), path) && strstr(het_error_msg(), want[k]),
              "bad file %d: '%s', expected '%s'", k, het_error_msg(), want[k]);
    }
    remove(path);
}

int main(void) {
    test_given_link();
    test_fitted_link();
    test_refusals();
    test_file();
    return het_test_finish("test_netfit");
}

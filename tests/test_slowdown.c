/* The emulated slowdown (src/hetero): parsing of --slowdown lists, and the achieved factor. A
 * fixed compute (a floating-point loop of ~15 ms) runs paced with factor 1 and factor 2, in
 * pieces as a step's layers are; the wall time with f = 2 over the time with f = 1 (the best of
 * 5 tries each, the machine is shared) must be 2 within 15 %, and so must each paced piece's
 * stretched time over its raw time. */
#include <string.h>

#include "hetero/hetero.h"
#include "hetrain.h"
#include "test.h"

static volatile double sink;

static void work(int n) {
    double a = 1.0;
    for (int i = 0; i < n; i++) a = a * 1.0000001 + 1e-9;
    sink = a;
}

/* Wall seconds of 8 pieces of work, each paced with factor f. */
static double run(double f, int n, double *raw, double *stretched) {
    het_pace p;
    het_pace_init(&p, f);
    double t0 = het_now();
    *raw = 0;
    for (int k = 0; k < 8; k++) {
        het_pace_begin(&p);
        double a = het_now();
        work(n);
        *raw += het_now() - a;
        het_pace_mark(&p);
    }
    *stretched = p.compute_s;
    return het_now() - t0;
}

int main(void) {
    double f[8];
    CHECK(het_slowdown_parse("1,1,2,4", f, 8) == 4 && f[2] == 2.0 && f[3] == 4.0, "list");
    CHECK(het_slowdown_parse(" 1.5 , 3", f, 8) == 2 && f[0] == 1.5 && f[1] == 3.0, "blanks");
    CHECK(het_slowdown_parse("1,2,3", NULL, 0) == 3, "count only");
    CHECK(het_slowdown_parse("0.5", f, 8) == HET_EINVAL && strstr(het_error_msg(), "range"),
          "below 1: %s", het_error_msg());
    CHECK(het_slowdown_parse("1,,2", f, 8) == HET_EINVAL, "empty item");
    CHECK(het_slowdown_parse("1,x", f, 8) == HET_EINVAL && strstr(het_error_msg(), "'x'"),
          "not a number: %s", het_error_msg());
    CHECK(het_slowdown_parse("2abc", f, 8) == HET_EINVAL, "trailing text");
    CHECK(het_slowdown_parse("nan", f, 8) == HET_EINVAL, "nan");
    CHECK(het_slowdown_parse("", f, 8) == HET_EINVAL, "empty list");

    /* size the work to ~2 ms a piece */
    int n = 1 << 20;
    double t = het_now();
    work(n);
    t = het_now() - t;
    if (t > 0 && t < 2e-3) n = (int)(n * (2e-3 / t));
    double best1 = 1e9, best2 = 1e9, worst_piece = 2.0;
    for (int rep = 0; rep < 5; rep++) {
        double raw, st;
        double w1 = run(1.0, n, &raw, &st);
        if (w1 < best1) best1 = w1;
        double w2 = run(2.0, n, &raw, &st);
        if (w2 < best2) best2 = w2;
        double piece = st / raw;
        if (fabs(piece - 2.0) > fabs(worst_piece - 2.0)) worst_piece = piece;
    }
    double achieved = best2 / best1;
    printf("slowdown 2: achieved %.3f (wall %.1f ms vs %.1f ms), stretched/raw %.3f\n", achieved,
           best2 * 1e3, best1 * 1e3, worst_piece);
    CHECK(fabs(achieved - 2.0) <= 0.3, "achieved factor %.3f, expected 2 within 15%%", achieved);
    CHECK(fabs(worst_piece - 2.0) <= 0.3, "stretched/raw %.3f, expected 2 within 15%%",
          worst_piece);
    /* factor 1 never sleeps */
    het_pace p;
    het_pace_init(&p, 1.0);
    work(n / 4);
    het_pace_mark(&p);
    CHECK(p.slept_s == 0.0, "factor 1 slept %g s", p.slept_s);
    return het_test_finish("test_slowdown");
}

/* The emulated slowdown (src/hetero): parsing of --slowdown lists, and the achieved factor. A
 * fixed compute (8 pieces of a ~5 ms floating-point loop, as a step's layers are) runs paced with
 * factor 2; its wall time over the raw compute time measured in the same run (median of 5 runs)
 * must be 2 within 15 %, and so must the pacer's stretched time over the raw time; the same
 * with the waits spinning (het_emul_wait_set(1), a core per compute thread), where a wait of
 * 2 ms also ends within 1 ms of its time. het_emul_wait_auto spins only when the host's
 * ranks x threads fit its cores. The test runs alone (RUN_SERIAL) so that other tests do not
 * delay its wake-ups. */
#include <string.h>

#include "emul/emul.h"
#include "hetero/hetero.h"
#include "hetrain.h"
#include "test.h"

static volatile double sink;

static void work(int n) {
    double a = 1.0;
    for (int i = 0; i < n; i++) a = a * 1.0000001 + 1e-9;
    sink = a;
}

/* Sorts 5 values in place and returns their median. */
static double median5(double *a) {
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (a[j] < a[i]) { double x = a[i]; a[i] = a[j]; a[j] = x; }
    return a[2];
}

/* Wall seconds of 8 pieces of work, each paced with factor f. */
static double run(double f, int n, double *raw, double *stretched) {
    het_pace p;
    het_lane lane = HET_LANE_START;
    het_pace_init(&p, &lane, f);
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

    /* size the work to ~5 ms a piece */
    int n = 1 << 20;
    double t = het_now();
    work(n);
    t = het_now() - t;
    if (t > 0 && t < 5e-3) n = (int)(n * (5e-3 / t));
    /* The achieved factor of a run is its wall time over the raw compute time measured in the
     * same run, so that other load on the machine (which slows the compute itself) cancels
     * out; the median of 5 runs must be 2 within 15 %. */
    double achieved[5], pieces[5];
    for (int rep = 0; rep < 5; rep++) {
        double raw, st;
        double w2 = run(2.0, n, &raw, &st);
        achieved[rep] = w2 / raw;
        pieces[rep] = st / raw;
    }
    median5(achieved);
    median5(pieces);
    printf("slowdown 2: achieved (wall / raw compute) median %.3f [%.3f .. %.3f], stretched/raw "
           "median %.3f\n", achieved[2], achieved[0], achieved[4], pieces[2]);
    CHECK(fabs(achieved[2] - 2.0) <= 0.3, "achieved factor %.3f, expected 2 within 15%%", achieved[2]);
    CHECK(fabs(pieces[2] - 2.0) <= 0.3, "stretched/raw %.3f, expected 2 within 15%%", pieces[2]);
    /* spinning: the same factor, and a wait ends on time */
    het_emul_wait_set(1);
    CHECK(het_emul_wait_spin() == 1, "wait mode not set");
    for (int rep = 0; rep < 5; rep++) {
        double raw, st;
        achieved[rep] = run(2.0, n, &raw, &st) / raw;
    }
    median5(achieved);
    double late[5];
    for (int rep = 0; rep < 5; rep++) {
        double until = het_now() + 2e-3, slept = het_sleep_until(until);
        late[rep] = het_now() - until;
        CHECK(slept >= 2e-3 * 0.99, "a spinning wait of 2 ms took %g s", slept);
    }
    median5(late);
    het_emul_wait_set(0);
    printf("slowdown 2, spinning: achieved median %.3f [%.3f .. %.3f]; a 2 ms wait ends %.0f us "
           "late (median)\n", achieved[2], achieved[0], achieved[4], late[2] * 1e6);
    CHECK(fabs(achieved[2] - 2.0) <= 0.3, "spinning: achieved factor %.3f, expected 2 within "
          "15%%", achieved[2]);
    CHECK(late[2] < 1e-3, "spinning: a 2 ms wait ended %g s late", late[2]);
    /* auto: spin when ranks x threads fit the cores */
    CHECK(het_emul_wait_auto(2, 1, 2) == 1 && het_emul_wait_auto(1, 1, 1) == 1, "a core each");
    CHECK(het_emul_wait_auto(3, 1, 2) == 0 && het_emul_wait_auto(2, 2, 2) == 0 &&
              het_emul_wait_auto(1, 2, 1) == 0, "shared cores must sleep");
    CHECK(het_emul_wait_auto(0, 0, 4) == 1 && het_emul_wait_auto(1, 1, -1) == 0,
          "unknown host size counts 1; unknown cores sleep");
    /* factor 1 never sleeps */
    het_pace p;
    het_lane lane = HET_LANE_START;
    het_pace_init(&p, &lane, 1.0);
    work(n / 4);
    het_pace_mark(&p);
    CHECK(p.slept_s == 0.0, "factor 1 slept %g s", p.slept_s);
    return het_test_finish("test_slowdown");
}

/* Partitions of hetero/partition.c: even and speed-weighted splits sum exactly, every part of a
 * weighted split is >= 1, the rounding residue goes to the largest weight, parts follow the
 * weights within one sample, offsets tile [0, n); bad weights and n < parts are refused. */
#include <string.h>

#include "hetero/hetero.h"
#include "test.h"

static void check_weighted(int64_t n, const double *w, int P) {
    int64_t sizes[16];
    CHECK(het_partition_weighted(n, w, P, sizes) == HET_OK, "n %lld: %s", (long long)n,
          het_error_msg());
    double sw = 0;
    int largest = 0, forced = 0;
    for (int r = 0; r < P; r++) {
        sw += w[r];
        if (w[r] > w[largest]) largest = r;
    }
    for (int r = 0; r < P; r++) forced |= (double)n * w[r] / sw < 0.5; /* raised to 1 */
    int64_t sum = 0, next = 0;
    for (int r = 0; r < P; r++) {
        sum += sizes[r];
        CHECK(sizes[r] >= 1, "n %lld: part %d has %lld samples", (long long)n, r,
              (long long)sizes[r]);
        double ideal = (double)n * w[r] / sw;
        if (r != largest && !forced)
            CHECK(fabs((double)sizes[r] - ideal) <= 0.5 + 1e-9, "n %lld: part %d = %lld, ideal "
                  "%.2f", (long long)n, r, (long long)sizes[r], ideal);
        int64_t lo, len;
        het_partition_offsets(sizes, r, &lo, &len);
        CHECK(lo == next && len == sizes[r], "offsets of part %d: %lld+%lld, expected %lld",
              r, (long long)lo, (long long)len, (long long)next);
        next += len;
    }
    CHECK(sum == n, "n %lld: parts sum to %lld", (long long)n, (long long)sum);
}

int main(void) {
    /* even */
    for (int64_t n = 0; n < 50; n++)
        for (int P = 1; P <= 5; P++) {
            int64_t next = 0;
            for (int r = 0; r < P; r++) {
                int64_t lo, len;
                het_partition_even(n, P, r, &lo, &len);
                CHECK(lo == next && len >= n / P && len <= n / P + 1, "even %lld/%d part %d",
                      (long long)n, P, r);
                next += len;
            }
            CHECK(next == n, "even %lld/%d covers %lld", (long long)n, P, (long long)next);
        }
    /* weighted */
    const double w3[] = {4, 2, 1}, w2[] = {0.667, 0.333}, w4[] = {0.4, 0.4, 0.19, 0.01};
    const double skew[] = {0.98, 0.01, 0.01};
    for (int64_t n = 4; n < 300; n += 7) {
        check_weighted(n, w3, 3);
        check_weighted(n, w2, 2);
        check_weighted(n, w4, 4);
        check_weighted(n, skew, 3);
    }
    int64_t s[3];
    CHECK(het_partition_weighted(64, w3, 3, s) == HET_OK && s[0] == 37 && s[1] == 18 && s[2] == 9,
          "64 by 4:2:1 = %lld/%lld/%lld, expected 37/18/9 (residue on the fastest)",
          (long long)s[0], (long long)s[1], (long long)s[2]);
    CHECK(het_partition_weighted(2, w3, 3, s) == HET_EINVAL &&
          strstr(het_error_msg(), "at least one"), "n < parts: %s", het_error_msg());
    const double bad[] = {1, 0, 1};
    CHECK(het_partition_weighted(10, bad, 3, s) == HET_EINVAL, "zero weight accepted");
    const double nan_w[] = {1, NAN};
    CHECK(het_partition_weighted(10, nan_w, 2, s) == HET_EINVAL, "NaN weight accepted");
    /* slowdown changes: the latest started change of that rank wins */
    het_slowdown_change c[4];
    int n = het_slowdown_at_parse("2:1:3, 4:1:1.5,3:0:2", c, 4);
    CHECK(n == 3, "parsed %d changes: %s", n, het_error_msg());
    CHECK(het_slowdown_factor_at(c, n, 1, 1, 1.0) == 1.0, "epoch 1 rank 1");
    CHECK(het_slowdown_factor_at(c, n, 2, 1, 1.0) == 3.0, "epoch 2 rank 1");
    CHECK(het_slowdown_factor_at(c, n, 5, 1, 1.0) == 1.5, "epoch 5 rank 1");
    CHECK(het_slowdown_factor_at(c, n, 3, 0, 1.25) == 2.0, "epoch 3 rank 0");
    CHECK(het_slowdown_factor_at(c, n, 2, 0, 1.25) == 1.25, "epoch 2 rank 0 keeps its base");
    CHECK(het_slowdown_at_parse("2:1", NULL, 0) == HET_EINVAL, "2:1 accepted");
    CHECK(het_slowdown_at_parse("0:1:2", NULL, 0) == HET_EINVAL, "epoch 0 accepted");
    CHECK(het_slowdown_at_parse("1:0:0.5", NULL, 0) == HET_EINVAL, "factor 0.5 accepted");
    CHECK(het_slowdown_at_parse("1:0:2x", NULL, 0) == HET_EINVAL, "2x accepted");
    double sp[3];
    CHECK(het_speeds_parse("0.4, 0.4,0.2", sp, 3) == 3 && sp[2] == 0.2, "speeds list");
    CHECK(het_speeds_parse("1,0", sp, 3) == HET_EINVAL, "speed 0 accepted");
    return het_test_finish("test_partition");
}

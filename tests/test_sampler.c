/* Sampler: permutations are a pure function of (seed, epoch), uniform, and shards tile them. */
#include <string.h>

#include "hetrain/data.h"
#include "test.h"

static int is_perm(const int64_t *p, int64_t n) {
    char *seen = calloc((size_t)n, 1);
    int ok = seen != NULL;
    for (int64_t i = 0; ok && i < n; i++) {
        if (p[i] < 0 || p[i] >= n || seen[p[i]]) ok = 0;
        else seen[p[i]] = 1;
    }
    free(seen);
    return ok;
}

int main(void) {
    enum { N = 1000 };
    het_sampler a, b;
    CHECK(het_sampler_init(&a, N, 42, 1) == HET_OK, "init a");
    CHECK(het_sampler_init(&b, N, 42, 1) == HET_OK, "init b");
    CHECK(a.epoch == -1, "epoch before the first: %d", a.epoch);

    het_sampler_set_epoch(&a, 3);
    het_sampler_set_epoch(&b, 3);
    CHECK(memcmp(a.perm, b.perm, N * sizeof(int64_t)) == 0, "same seed+epoch, same perm");
    CHECK(is_perm(a.perm, N), "epoch 3 is a permutation");
    int64_t e3[N];
    memcpy(e3, a.perm, sizeof e3);
    het_sampler_set_epoch(&a, 4);
    CHECK(is_perm(a.perm, N), "epoch 4 is a permutation");
    CHECK(memcmp(a.perm, e3, sizeof e3) != 0, "different epochs differ");
    int moved = 0;
    for (int i = 0; i < N; i++) moved += a.perm[i] != i;
    CHECK(moved > N / 2, "shuffled: only %d of %d moved", moved, N);
    het_sampler_set_epoch(&a, 3); /* going back replays the epoch exactly */
    CHECK(memcmp(a.perm, e3, sizeof e3) == 0, "epoch 3 again");

    /* exactly the documented algorithm: Fisher-Yates with het_rng_seed2(seed, epoch) */
    int64_t ref[N];
    for (int i = 0; i < N; i++) ref[i] = i;
    het_rng r;
    het_rng_seed2(&r, 42, 3);
    for (int64_t i = N - 1; i > 0; i--) {
        int64_t j = het_rng_below(&r, (uint32_t)(i + 1)), t = ref[i];
        ref[i] = ref[j];
        ref[j] = t;
    }
    CHECK(memcmp(ref, e3, sizeof e3) == 0, "matches the reference Fisher-Yates");

    het_sampler c;
    CHECK(het_sampler_init(&c, N, 43, 1) == HET_OK, "init c");
    het_sampler_set_epoch(&c, 3);
    CHECK(memcmp(c.perm, e3, sizeof e3) != 0, "different seeds differ");
    het_sampler_free(&c);

    het_sampler id;
    CHECK(het_sampler_init(&id, N, 42, 0) == HET_OK, "init identity");
    het_sampler_set_epoch(&id, 5);
    int ident = 1;
    for (int i = 0; i < N; i++) ident &= id.perm[i] == i;
    CHECK(ident, "shuffle=0 gives the identity");
    het_sampler_free(&id);

    /* uniform over the 6 permutations of 3 (an off-by-one gives only cycles) */
    het_sampler s3;
    CHECK(het_sampler_init(&s3, 3, 9, 1) == HET_OK, "init 3");
    int hist[9] = {0};
    for (int e = 0; e < 6000; e++) {
        het_sampler_set_epoch(&s3, e);
        hist[s3.perm[0] * 3 + s3.perm[1]]++;
    }
    for (int k = 0; k < 9; k++) {
        if (k / 3 == k % 3) CHECK(hist[k] == 0, "impossible prefix %d seen %d times", k, hist[k]);
        else CHECK(hist[k] > 850 && hist[k] < 1150, "permutation %d seen %d of 6000", k, hist[k]);
    }
    het_sampler_free(&s3);

    /* shards of sizes summing to n cover each element exactly once, contiguously */
    int64_t sizes[4] = {100, 250, 400, 250};
    int hits[N] = {0};
    int64_t expect_start = 0;
    for (int k = 0; k < 4; k++) {
        const int64_t *beg = NULL;
        int64_t len = -1;
        CHECK(het_sampler_shard(&a, sizes, 4, k, &beg, &len) == HET_OK, "shard %d: %s", k,
              het_error_msg());
        if (!beg) continue;
        CHECK(len == sizes[k] && beg == a.perm + expect_start, "shard %d len %lld start %td", k,
              (long long)len, beg - a.perm);
        for (int64_t i = 0; i < len; i++) hits[beg[i]]++;
        expect_start += sizes[k];
    }
    int once = 1;
    for (int i = 0; i < N; i++) once &= hits[i] == 1;
    CHECK(once, "every element in exactly one shard");

    const int64_t *beg;
    int64_t len;
    int64_t over[3] = {500, 400, 101};
    CHECK(het_sampler_shard(&a, over, 3, 0, &beg, &len) == HET_EINVAL, "sizes exceed n");
    CHECK(strstr(het_error_msg(), "exceed") != NULL, "message: %s", het_error_msg());
    int64_t neg[2] = {-1, 10};
    CHECK(het_sampler_shard(&a, neg, 2, 1, &beg, &len) == HET_EINVAL, "negative size");
    CHECK(het_sampler_shard(&a, sizes, 4, 4, &beg, &len) == HET_EINVAL, "shard out of range");
    int64_t part[2] = {10, 20};
    CHECK(het_sampler_shard(&a, part, 2, 1, &beg, &len) == HET_OK && len == 20 &&
              beg == a.perm + 10, "sizes below n are fine");
    CHECK(het_sampler_init(&c, 0, 1, 1) == HET_EINVAL && c.perm == NULL, "n = 0 rejected");

    het_sampler_free(&a);
    het_sampler_free(&b);
    return het_test_finish("test_sampler");
}

/* The map from 64-bit keys to ints (core/map64.c): 100000 keys spread over the high and low
 * bits (as the arbiter service packs ranks and streams) read back after growing many times; a
 * key set again keeps one entry; a key never set gives `missing`; an empty map too. */
#include <stdint.h>

#include "core/map64.h"
#include "hetrain/core.h"
#include "test.h"

static uint64_t key_of(int i) { return (uint64_t)(i % 97) << 40 | (uint64_t)i << 16 | (i % 7); }

int main(void) {
    het_map64 m = {0};
    CHECK(het_map64_get(&m, 42, -7) == -7, "an empty map");
    int n = 100000, bad = 0;
    for (int i = 0; i < n; i++) bad += het_map64_put(&m, key_of(i), i) != HET_OK;
    CHECK(bad == 0 && m.n == (size_t)n, "%d puts failed, %zu entries", bad, m.n);
    for (int i = 0; i < n; i++) bad += het_map64_get(&m, key_of(i), -1) != i;
    CHECK(bad == 0, "%d keys read back wrong", bad);
    het_map64_put(&m, key_of(5), 55);
    CHECK(het_map64_get(&m, key_of(5), -1) == 55 && m.n == (size_t)n, "set again: %d, %zu",
          het_map64_get(&m, key_of(5), -1), m.n);
    CHECK(het_map64_get(&m, key_of(n + 3), -1) == -1, "a key never set");
    het_map64_free(&m);
    CHECK(m.n == 0 && het_map64_get(&m, key_of(1), -3) == -3, "freed");
    return het_test_finish("test_map64");
}

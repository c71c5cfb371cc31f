/* A map from 64-bit keys to ints (core/map64.c): open addressing, linear probing, doubled at half
 * full. For look-ups by a name made of a few small numbers (the arbiter service's message
 * streams). */
#ifndef HET_CORE_MAP64_H
#define HET_CORE_MAP64_H

#include <stddef.h>
#include <stdint.h>

typedef struct het_map64 {
    uint64_t *key;
    int *val;
    unsigned char *used;
    size_t cap, n;
} het_map64;

/* The value of key, or `missing`. */
int het_map64_get(const het_map64 *m, uint64_t key, int missing);
/* Sets key to val: HET_OK, or HET_ENOMEM (the map unchanged). */
int het_map64_put(het_map64 *m, uint64_t key, int val);
void het_map64_free(het_map64 *m);

#endif

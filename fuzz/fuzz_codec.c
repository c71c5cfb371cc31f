/* libFuzzer target: the pipelines' message decoders (tensor/codec.c), which read what another
 * rank sent: het_q8_unpack (int8 activations) and het_gradc_decode (2-Step GC gradients, written
 * or added). The first byte picks the decoder (bit 0) and the mode (bit 1: add), the next two
 * the element count the receiver expects (1..4096, little-endian); the rest is the message.
 * A decoder must succeed with every value finite, or fail with one line and leave the output
 * as it was (its canary). */
#include <math.h>

#include "fuzz_file.h"

enum { ROOM = 4096 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    const int gc = data[0] & 1, add = (data[0] >> 1) & 1;
    size_t n = ((size_t)data[1] | (size_t)data[2] << 8) % ROOM + 1;
    static float out[ROOM + 1];
    for (size_t i = 0; i <= ROOM; i++) out[i] = 0.5f; /* the canary, and add's start */
    het_error_clear();
    int st = gc ? het_gradc_decode(out, n, data + 3, size - 3, add)
                : het_q8_unpack(out, n, data + 3, size - 3);
    fuzz_check_status(st);
    for (size_t i = 0; i <= ROOM; i++) {
        if (st != HET_OK || i >= n) {
            if (out[i] != 0.5f) {
                fprintf(stderr, "fuzz: element %zu written (status %d, n %zu)\n", i, st, n);
                abort();
            }
        } else if (!isfinite(out[i])) {
            fprintf(stderr, "fuzz: element %zu decoded as %g\n", i, (double)out[i]);
            abort();
        }
    }
    return 0;
}

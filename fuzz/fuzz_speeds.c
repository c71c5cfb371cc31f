/* libFuzzer target: speeds files (het_speeds_read_file, what hgc's --speeds-file and hetrain
 * calibrate's output go through) and the same bytes as a --speeds list (het_speeds_parse). The
 * first byte picks how many speeds the caller has room for (0..15), as a run of that many
 * ranks does. Every speed stored must be finite and > 0, a count must be at least 1, and no
 * more than the room is written (the spare slots after it keep their canary). */
#include <math.h>
#include <string.h>

#include "fuzz_file.h"

/* internal, from src/hetero/hetero.h (not a public header) */
int het_speeds_read_file(const char *path, double *out, int cap);
int het_speeds_parse(const char *text, double *out, int cap);

enum { ROOM = 16 };

static void check_speeds(int n, const double *v, int cap) {
    fuzz_check_status(n < 0 ? n : HET_OK);
    if (n == 0) abort(); /* a file or list without speeds is an error, not 0 of them */
    for (int i = 0; n > 0 && i < n && i < cap; i++)
        if (!isfinite(v[i]) || !(v[i] > 0.0)) {
            fprintf(stderr, "fuzz: speed %d is %g\n", i, v[i]);
            abort();
        }
    for (int i = cap; i < ROOM; i++)
        if (v[i] != -1.0) {
            fprintf(stderr, "fuzz: slot %d past the room of %d was written\n", i, cap);
            abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int cap = data[0] % ROOM;
    double v[ROOM];
    for (int i = 0; i < ROOM; i++) v[i] = -1.0;
    const char *path = fuzz_file(0, data + 1, size - 1);
    check_speeds(het_speeds_read_file(path, v, cap), v, cap);
    /* the same bytes as the text of --speeds */
    static char text[1 << 16];
    size_t n = size - 1 < sizeof text - 1 ? size - 1 : sizeof text - 1;
    memcpy(text, data + 1, n);
    text[n] = '\0';
    for (int i = 0; i < ROOM; i++) v[i] = -1.0;
    check_speeds(het_speeds_parse(text, v, cap), v, cap);
    return 0;
}

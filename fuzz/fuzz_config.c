/* libFuzzer target: config files (het_train_config_load, then het_train_config_check as the
 * command does), and the same text as a checkpoint's config section
 * (het_train_config_apply_text). A configuration that loads must echo and load back to the
 * same text. */
#include <string.h>

#include "fuzz_file.h"

/* internal, from src/train/internal.h (not a public header) */
int het_train_config_apply_text(het_train_config *c, const char *path, uint64_t off,
                                const void *text, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(0, data, size);
    het_train_config c = het_train_config_defaults();
    int st = het_train_config_load(&c, path);
    fuzz_check_status(st);
    if (st == HET_OK) {
        fuzz_check_status(het_train_config_check(&c));
        /* the echo (what a checkpoint stores) reads back to itself */
        static char a[1 << 16], b[1 << 16];
        size_t n = het_train_config_format(&c, 1, a, sizeof a);
        if (n >= sizeof a) abort();
        het_train_config r = het_train_config_defaults();
        if (het_train_config_apply_text(&r, "echo", 0, a, n) != HET_OK) abort();
        het_train_config_format(&r, 1, b, sizeof b);
        if (strcmp(a, b) != 0) abort();
    }
    het_train_config k = het_train_config_defaults();
    fuzz_check_status(het_train_config_apply_text(&k, "fuzz.ckpt", 16, data, size));
    return 0;
}

/* libFuzzer target: the checkpoint reader (het_ckpt_reader_open and section lookups), the
 * configuration stored in a checkpoint (het_train_config_from_checkpoint) and loading weights
 * into a model as `hetrain eval` does (het_checkpoint_load_weights, an mlp). The first input
 * byte chooses whether the CRC is fixed up before the file is written: with it, the fuzzer
 * reaches the sections behind the checksum. */
#include <string.h>

#include "fuzz_file.h"

static het_model *model;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    het_log_set_level(HET_LOG_QUIET);
    if (het_zoo_build(&model, "mlp", (het_shape){1, 28, 28}, 10, 1, 1) != HET_OK) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int fix_crc = data[0] & 1;
    size_t n = size - 1;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) return 0;
    memcpy(buf, data + 1, n);
    if (fix_crc && n >= 44) {
        uint32_t crc = het_crc32(0, buf, n - 4);
        for (int i = 0; i < 4; i++) buf[n - 4 + i] = (uint8_t)(crc >> (8 * i));
    }
    const char *path = fuzz_file(0, buf, n);
    free(buf);
    het_ckpt_reader *r = NULL;
    int st = het_ckpt_reader_open(&r, path);
    fuzz_check_status(st);
    if (st == HET_OK) {
        static const char *const tags[] = {"config", "meta", "params", "state", "optim", "end"};
        for (int i = 0; i < 6; i++) {
            const void *p;
            size_t len;
            uint64_t off;
            int s = het_ckpt_find(r, tags[i], &p, &len, &off);
            fuzz_check_status(s);
            if (s == HET_OK && len) {
                volatile uint8_t x = ((const uint8_t *)p)[0]; /* in bounds */
                x = ((const uint8_t *)p)[len - 1];
                (void)x;
            }
        }
        het_ckpt_reader_close(r);
        het_train_config c = het_train_config_defaults();
        fuzz_check_status(het_train_config_from_checkpoint(&c, path));
        fuzz_check_status(het_checkpoint_load_weights(model, "mlp", path));
    } else if (r) {
        abort();
    }
    return 0;
}

/* libFuzzer target: the model text format (het_net_read on a file, as --model-file reads it).
 * A network that reads must build for a small input or fail with a status, and its canonical
 * text must read back to the same text. */
#include <hetrain/netfile.h>

#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 0 && data[0] == 0x08) return 0; /* an ONNX file: fuzz_onnx.c's */
    const char *path = fuzz_file(0, data, size);
    static het_net net, again;
    int st = het_net_read(&net, path);
    fuzz_check_status(st);
    if (st != HET_OK) return 0;
    static char a[1 << 16], b[1 << 16];
    size_t la = het_net_format(&net, a, sizeof a);
    if (la >= sizeof a) abort(); /* 256 layers of at most ~80 bytes each */
    if (het_net_parse(&again, a, la, "canonical") != HET_OK) abort();
    size_t lb = het_net_format(&again, b, sizeof b);
    if (la != lb || memcmp(a, b, la) != 0) abort();
    het_net_free(&again);
    for (int i = 0; i < net.n; i++)
        if (net.layer[i].out > 4096) { /* a valid but large model: memory, not parsing */
            het_net_free(&net);
            return 0;
        }
    het_model *m = NULL;
    st = het_net_build(&m, &net, (het_shape){1, 12, 12}, 3, 2, 1);
    fuzz_check_status(st);
    if ((st == HET_OK) != (m != NULL)) abort();
    het_model_free(m);
    het_net_free(&net);
    return 0;
}

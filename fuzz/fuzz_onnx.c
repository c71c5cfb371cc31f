/* libFuzzer target: the ONNX reader (het_net_read_onnx: protobuf-c's unpacking, the folding of
 * constant sub-graphs, the walk that matches layers and residual blocks, the weights). A read
 * either fails with a one-line message naming the file and leaves the net empty, or gives
 * 1..HET_NET_MAX_LAYERS layers whose weights are all readable. */
#include "fuzz_file.h"

#include <hetrain/netfile.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(0, data, size);
    het_net net;
    int st = het_net_read_onnx(&net, path);
    fuzz_check_status(st);
    if (st == HET_OK) {
        if (net.n < 1 || net.n > HET_NET_MAX_LAYERS || strcmp(net.file, path) != 0) abort();
        if ((net.n_params > 0) != (net.params != NULL)) abort();
        float sum = 0; /* every float readable (ASan checks the bounds) */
        for (size_t i = 0; i < net.n_params; i++) sum += net.params[i];
        for (size_t i = 0; i < net.n_state; i++) sum += net.state[i];
        (void)sum;
        for (int i = 0; i < net.n; i++)
            if ((unsigned)net.layer[i].kind >= HET_NL_COUNT || !memchr(net.layer[i].node, 0, 64))
                abort();
        free(net.params);
        free(net.state);
    } else if (net.n || net.params || net.state || !strstr(het_error_msg(), path)) {
        abort(); /* a failed read leaves the net empty and names the file */
    }
    return 0;
}

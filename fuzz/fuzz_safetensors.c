/* libFuzzer target: the safetensors reader (het_safetensors_read on a file, as --init-from
 * reads it) into a tiny model with every kind of tensor the reader maps (convolution, batch
 * norm and its statistics, a residual block, dense), so that valid files stay small enough for
 * the fuzzer to reach the data. A read succeeds or fails with one line; a failed read leaves
 * the model's parameters and state as they were. The seeds (fuzz/mkcorpus.sh) are the model's
 * file as hetrain exports it (1x4x4 input, 3 classes) and variants with PyTorch's names. */
#include <hetrain/netfile.h>

#include "fuzz_file.h"

static const char tiny[] = "conv out=2 k=3 stride=1 pad=1\n"
                           "batchnorm momentum=0.1 eps=1e-5\n"
                           "relu\n"
                           "resblock out=2 stride=1\n"
                           "flatten\n"
                           "dense out=classes\n";
static het_model *model;
static float *before;
static size_t n_params, n_state;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    het_log_set_level(HET_LOG_QUIET);
    het_net net;
    if (het_net_parse(&net, tiny, sizeof tiny - 1, "tiny") != HET_OK ||
        het_net_build(&model, &net, (het_shape){1, 4, 4}, 3, 1, 1) != HET_OK)
        abort();
    het_net_free(&net);
    het_model_init_params(model, 1);
    n_params = het_model_n_params(model);
    n_state = het_model_n_state(model);
    before = malloc((n_params + n_state) * sizeof *before);
    if (!before) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    memcpy(before, het_model_params(model), n_params * sizeof *before);
    memcpy(before + n_params, het_model_state(model), n_state * sizeof *before);
    const char *path = fuzz_file(0, data, size);
    int st = het_safetensors_read(model, path);
    fuzz_check_status(st);
    if (st != HET_OK &&
        (memcmp(before, het_model_params(model), n_params * sizeof *before) != 0 ||
         memcmp(before + n_params, het_model_state(model), n_state * sizeof *before) != 0)) {
        fprintf(stderr, "fuzz: a failed read changed the model: %s\n", het_error_msg());
        abort();
    }
    return 0;
}

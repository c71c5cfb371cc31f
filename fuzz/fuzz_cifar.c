/* libFuzzer target: the CIFAR-10 reader (het_dataset_load_cifar), raw or gzip: records of one
 * label byte and 3072 pixel bytes. */
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(0, data, size);
    const char *paths[1] = {path};
    het_dataset d;
    int st = het_dataset_load_cifar(&d, paths, 1);
    fuzz_check_status(st);
    if (st == HET_OK) {
        if (d.n < 1 || d.shape.c != 3 || d.shape.h != 32 || d.shape.w != 32) abort();
        for (int64_t i = 0; i < d.n; i++)
            if (d.labels[i] >= 10) abort();
    } else if (d.images || d.labels || d.n) {
        abort();
    }
    het_dataset_free(&d);
    return 0;
}

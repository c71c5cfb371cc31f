/* libFuzzer target: the IDX reader (het_dataset_load_idx), raw or gzip. The first input byte
 * chooses which file the rest is: even, the images file (beside a valid 2-label file); odd,
 * the labels file (beside a valid 2-image file). */
#include "fuzz_file.h"

static const uint8_t images[] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3,
                                 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
static const uint8_t labels[] = {0, 0, 8, 1, 0, 0, 0, 2, 3, 7};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int lab = data[0] & 1;
    const char *fuzzed = fuzz_file(0, data + 1, size - 1);
    const char *fixed = lab ? fuzz_file(1, images, sizeof images) : fuzz_file(1, labels,
                                                                               sizeof labels);
    het_dataset d;
    int st = lab ? het_dataset_load_idx(&d, fixed, fuzzed, 10)
                 : het_dataset_load_idx(&d, fuzzed, fixed, 10);
    fuzz_check_status(st);
    if (st == HET_OK) {
        /* a loaded set is whole: every label in range, every byte readable */
        unsigned sum = 0;
        size_t pix = (size_t)d.shape.c * d.shape.h * d.shape.w;
        for (int64_t i = 0; i < d.n; i++) {
            if (d.labels[i] >= 10) abort();
            sum += d.images[(size_t)i * pix + pix - 1];
        }
        (void)sum;
    } else if (d.images || d.labels || d.n) {
        abort(); /* a failed load leaves the dataset empty */
    }
    het_dataset_free(&d);
    return 0;
}

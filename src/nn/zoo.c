/* Model zoo: named architectures.
 *   mlp        784-256-128-10 with ReLU (any input is flattened)
 *   lenet5     conv 6@5x5 pad 2, max-pool 2, conv 16@5x5, max-pool 2, fc 120, fc 84, fc 10, ReLU
 *              (after each pooling and hidden fc layer)
 *   cifar-cnn  2x conv 32@3x3, pool, 2x conv 64@3x3, pool, fc 256, dropout 0.5, fc 10 (ReLU)
 *   resnet20   He et al. 2016 CIFAR ResNet-20: conv 16@3x3 + BN + ReLU, 3 stages of 3 basic
 *              blocks (16, 32, 64 channels, stride 2 between stages, option A shortcuts),
 *              global average pool, fc 10 */
#include <stdlib.h>
#include <string.h>

#include "hetrain/nn.h"

#define MAX_LAYERS 64

static const char *const zoo_names[] = {"mlp", "lenet5", "cifar-cnn", "resnet20", NULL};

const char *const *het_zoo_names(void) { return zoo_names; }

/* The layers of `name` into L (room for MAX_LAYERS); the count, or -1 for an unknown name. */
static int zoo_list(const char *name, int n_classes, het_layer **L) {
    int n = 0;
    if (strcmp(name, "mlp") == 0) {
        L[n++] = het_dense_new(256);
        L[n++] = het_relu_new();
        L[n++] = het_dense_new(128);
        L[n++] = het_relu_new();
        L[n++] = het_dense_new(n_classes);
    } else if (strcmp(name, "lenet5") == 0) {
        /* max-pool before ReLU: the same function and gradients as conv-ReLU-pool (ReLU is
         * monotone, so it commutes with max, and the gradient reaches the same first maximum
         * or nothing), with the ReLU on a quarter of the values */
        L[n++] = het_conv2d_new(6, 5, 1, 2);
        L[n++] = het_maxpool_new(2, 2);
        L[n++] = het_relu_new();
        L[n++] = het_conv2d_new(16, 5, 1, 0);
        L[n++] = het_maxpool_new(2, 2);
        L[n++] = het_relu_new();
        L[n++] = het_flatten_new();
        L[n++] = het_dense_new(120);
        L[n++] = het_relu_new();
        L[n++] = het_dense_new(84);
        L[n++] = het_relu_new();
        L[n++] = het_dense_new(n_classes);
    } else if (strcmp(name, "cifar-cnn") == 0) {
        L[n++] = het_conv2d_new(32, 3, 1, 1);
        L[n++] = het_relu_new();
        L[n++] = het_conv2d_new(32, 3, 1, 1);
        L[n++] = het_relu_new();
        L[n++] = het_maxpool_new(2, 2);
        L[n++] = het_conv2d_new(64, 3, 1, 1);
        L[n++] = het_relu_new();
        L[n++] = het_conv2d_new(64, 3, 1, 1);
        L[n++] = het_relu_new();
        L[n++] = het_maxpool_new(2, 2);
        L[n++] = het_flatten_new();
        L[n++] = het_dense_new(256);
        L[n++] = het_relu_new();
        L[n++] = het_dropout_new(0.5f);
        L[n++] = het_dense_new(n_classes);
    } else if (strcmp(name, "resnet20") == 0) {
        L[n++] = het_conv2d_new(16, 3, 1, 1);
        L[n++] = het_batchnorm_new(0.1f, 1e-5f);
        L[n++] = het_relu_new();
        static const int widths[3] = {16, 32, 64};
        for (int s = 0; s < 3; s++)
            for (int b = 0; b < 3; b++) L[n++] = het_resblock_new(widths[s], (s > 0 && b == 0) ? 2 : 1);
        L[n++] = het_avgpool_new(0, 0);
        L[n++] = het_dense_new(n_classes);
    } else {
        return -1;
    }
    return n;
}

static void destroy_list(het_layer **L, int n) {
    for (int i = 0; i < n; i++)
        if (L[i]) L[i]->ops->destroy(L[i]);
}

int het_zoo_layers(const char *name, het_shape in, int n_classes, het_layer ***layers, int *n) {
    (void)in; /* no zoo model depends on the input shape today: the layers' plan() adapts */
    *layers = NULL;
    *n = 0;
    if (n_classes <= 0) return het_error_set(HET_EINVAL, "model %s: n_classes must be > 0", name);
    het_layer *L[MAX_LAYERS];
    int k = zoo_list(name, n_classes, L);
    if (k < 0)
        return het_error_set(HET_EINVAL, "unknown model '%s', expected one of: mlp, lenet5, "
                                         "cifar-cnn, resnet20", name);
    int made = 1;
    for (int i = 0; i < k; i++) made &= L[i] != NULL;
    het_layer **out = made ? malloc((size_t)k * sizeof *out) : NULL;
    if (!out) {
        destroy_list(L, k);
        return het_error_set(HET_ENOMEM, "out of memory creating model %s", name);
    }
    memcpy(out, L, (size_t)k * sizeof *out);
    *layers = out;
    *n = k;
    return HET_OK;
}

int het_zoo_build(het_model **out, const char *name, het_shape in, int n_classes, int max_batch,
                  int workers) {
    *out = NULL;
    het_layer **L;
    int n;
    int st = het_zoo_layers(name, in, n_classes, &L, &n);
    if (st != HET_OK) return st;
    st = het_model_create(out, in, L, n, max_batch, workers); /* takes the layers */
    free(L);
    return st;
}

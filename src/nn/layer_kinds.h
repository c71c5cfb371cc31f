/* Internal to nn/: which built-in type a layer is, by the identity of its ops table (a user
 * layer that calls itself "dense" is not nn/dense.c's dense). For executors that replace a
 * layer's math with their own (nn/dense_stack.c). */
#ifndef HET_NN_LAYER_KINDS_H
#define HET_NN_LAYER_KINDS_H

#include "hetrain/nn.h"

int het_nn_is_dense(const het_layer *l);   /* nn/dense.c */
int het_nn_is_relu(const het_layer *l);    /* nn/relu.c */
int het_nn_is_flatten(const het_layer *l); /* nn/flatten.c */
/* A convolution that runs on oneDNN's bf16 kernels, so it can read and write bf16
 * activations (het_layer.in_lp / out_lp) on its blocked sides (nn/conv2d.c). */
int het_nn_conv_lp(const het_layer *l);

#endif

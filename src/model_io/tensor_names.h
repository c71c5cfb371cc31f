/* The model's tensors as safetensors names them, shared by the writer (safetensors.c) and the
 * reader (safetensors_read.c), so that both use one table of names and shapes. Internal to
 * src/train. */
#ifndef HET_TRAIN_SAFETENSORS_H
#define HET_TRAIN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "hetrain/nn.h"

/* One tensor: floats [off, off + count) of the model's parameters (state 0) or of its
 * non-trainable state (state 1), named "layers.<layer>.<rest>" in PyTorch's shape dims. */
typedef struct het_st_tensor {
    char name[64];
    int layer;
    int state;
    size_t off, count;
    int rank;
    int64_t dims[4];
} het_st_tensor;

/* The model's tensors in file order: every layer's parameters, then every layer's state.
 * *out is malloc'ed (the caller frees it; NULL when there are none). Returns their count, or
 * HET_ENOMEM. */
int het_st_tensors(const het_model *m, het_st_tensor **out);

/* The tensor of t that a file's tensor `name` is: "layers.<i>.<rest>" matches
 * "<prefix><i>.<rest>", <i> being the last component of `name` made of digits only (so "0.weight",
 * "net.0.weight" and "layers.0.weight" all name layer 0's weight). Its index, or -1; *prefix_len
 * gets the length of the prefix. */
int het_st_find(const het_st_tensor *t, int nt, const char *name, size_t *prefix_len);

#endif

/* The model's tensors by name: the one table of names, shapes and places in the flat buffers
 * that every model file uses (model_io/tensor_names.c). The safetensors writer and reader
 * (safetensors.c, safetensors_read.c) and the ONNX writer (onnx_write.c: its initializers)
 * name the same tensor the same way; the run's checkpoint sections (train/run_state.c) use it
 * to name a layer's tensor in messages. The ONNX reader takes the names a graph gives. Internal
 * to the library. */
#ifndef HET_MODEL_IO_TENSOR_NAMES_H
#define HET_MODEL_IO_TENSOR_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "hetrain/nn.h"

/* One tensor: floats [off, off + count) of the model's parameters (state 0) or of its
 * non-trainable state (state 1), named "layers.<layer>.<rest>" in PyTorch's shape dims. */
typedef struct het_tensor_name {
    char name[64];
    int layer;
    int state;
    size_t off, count;
    int rank;
    int64_t dims[4];
} het_tensor_name;

/* The model's tensors in file order: every layer's parameters, then every layer's state.
 * Names and shapes follow PyTorch (nn.Sequential indices):
 *   dense      layers.i.weight [out, in], layers.i.bias [out]
 *   conv2d     layers.i.weight [oc, ic, k, k], layers.i.bias [oc]
 *   batchnorm  layers.i.weight [C], layers.i.bias [C]
 *   resblock   layers.i.{conv1,bn1,conv2,bn2}.{weight,bias}
 *   other      layers.i.params [n]
 * followed by the non-trainable state (the model's state buffer):
 *   batchnorm  layers.i.running_mean [C], layers.i.running_var [C]
 *   resblock   layers.i.{bn1,bn2}.{running_mean,running_var}
 *   other      layers.i.state [n]
 * *out is malloc'ed (the caller frees it; NULL when there are none). Returns their count, or
 * HET_ENOMEM. */
int het_tensor_names(const het_model *m, het_tensor_name **out);

/* The tensor of t that a file's tensor `name` is: "layers.<i>.<rest>" matches
 * "<prefix><i>.<rest>", <i> being the last component of `name` made of digits only (so "0.weight",
 * "net.0.weight" and "layers.0.weight" all name layer 0's weight). Its index, or -1; *prefix_len
 * gets the length of the prefix. */
int het_tensor_names_find(const het_tensor_name *t, int nt, const char *name, size_t *prefix_len);

/* The tensors of layer `layer` in t (parameters when state is 0, else its state), in order:
 * their indices into idx[0 .. cap), the count returned (at most cap). */
int het_tensor_names_of_layer(const het_tensor_name *t, int nt, int layer, int state, int *idx,
                              int cap);

#endif

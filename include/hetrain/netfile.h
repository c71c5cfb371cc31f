/* hetrain model files (src/model_io/): a network described outside the code, in one of two
 * formats that read into one description (het_net), and a model's weights as safetensors:
 *  - hetrain's text format (netfile.c, grammar in docs/MODELS.md): one layer a line,
 *        conv out=32 k=3 stride=1 pad=1
 *        batchnorm
 *        relu
 *        maxpool k=2
 *        resblock out=64 stride=2
 *        avgpool
 *        flatten
 *        dense out=classes
 *        dropout p=0.5
 *    with # comments; "out=classes" is the dataset's class count. The zoo models ship as such
 *    files (models/NAME.net, built into the library) and the zoo builds from this parser.
 *  - ONNX (onnx_read.c, protobuf-c with onnx.proto): the operators hetrain trains, mapped to
 *    the same layers, with the graph's initializers as initial weights (het_net.params/state).
 *  - safetensors (safetensors.c, safetensors_read.c): the weights of a built model, by the
 *    names of the one table in src/model_io/tensor_names.h.
 * A het_net builds a het_model (het_net_build); het_net_write_onnx writes a model back as an
 * ONNX inference graph with the safetensors names. */
#ifndef HETRAIN_NETFILE_H
#define HETRAIN_NETFILE_H

#include "hetrain/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    HET_NL_CONV,      /* out k stride pad: het_conv2d_new */
    HET_NL_BATCHNORM, /* momentum eps: het_batchnorm_new */
    HET_NL_RELU,
    HET_NL_MAXPOOL,   /* k stride (stride 0 in the text = k) */
    HET_NL_AVGPOOL,   /* k stride; k 0 = global average pool */
    HET_NL_FLATTEN,
    HET_NL_DENSE,     /* out */
    HET_NL_DROPOUT,   /* p */
    HET_NL_RESBLOCK,  /* out stride: het_resblock_new */
    HET_NL_COUNT
} het_net_kind;

#define HET_NET_CLASSES (-1) /* het_net_layer.out: the dataset's class count */
#define HET_NET_MAX_LAYERS 256

typedef struct het_net_layer {
    het_net_kind kind;
    int out;             /* conv, resblock: output channels; dense: features; HET_NET_CLASSES */
    int k, stride, pad;  /* conv; maxpool and avgpool (k, stride) */
    float p;             /* dropout probability */
    float momentum, eps; /* batchnorm */
    int line;            /* where it was read: 1-based line of a text file; 0 otherwise */
    char node[64];       /* ONNX: the name of the node it was read from; "" otherwise */
} het_net_layer;

typedef struct het_net {
    char name[32];       /* zoo name, or the file's name without directory and suffix */
    char file[HET_PATH_LEN]; /* the file it was read from; "" for the zoo */
    int n;
    het_net_layer layer[HET_NET_MAX_LAYERS];
    /* Initial weights read with the network (ONNX), in the model's flat layout (parameters in
     * layer order, as het_model_params; batch-norm statistics as het_model_state), or NULL:
     * the model's own initialization. Owned by the het_net (het_net_free). */
    float *params, *state;
    size_t n_params, n_state;
    /* ONNX: the graph's input per sample, which the data must match (rank 4 [N, C, H, W]: CxHxW;
     * rank 2 [N, F]: F values a sample, as Fx1x1); rank 0: any input (the text format). */
    het_shape input;
    int input_rank;
} het_net;

/* The names of the layer kinds in the text format ("conv", "batchnorm", ...). */
const char *het_net_kind_name(het_net_kind k);

/* Parses the text format; `file` names the source in errors: "FILE: line N: ...". */
int het_net_parse(het_net *net, const char *text, size_t len, const char *file);
/* Reads a model file: ONNX (by content: a protobuf ModelProto) or the text format. */
int het_net_read(het_net *net, const char *path);
/* The zoo model `name` (the built-in copy of models/NAME.net). */
int het_net_zoo(het_net *net, const char *name);
/* Frees the initial weights, if any (the rest is plain data). */
void het_net_free(het_net *net);

/* The canonical text of net (one layer a line, every argument written): the same network
 * gives the same bytes, and het_net_parse reads it back. Returns the length; writes at most
 * cap bytes with a terminating NUL when cap > 0 (snprintf-like). */
size_t het_net_format(const het_net *net, char *buf, size_t cap);

/* The layers of net for an input of shape `in` and n_classes classes (caller-owned, as
 * het_zoo_layers). A shape error names the layer (its line or node) and the shapes. */
int het_net_layers(const het_net *net, het_shape in, int n_classes, het_layer ***layers,
                   int *n);
/* het_model_create of net's layers; with initial weights, het_model_init_params(seed) must not
 * be called after it: het_net_build leaves the weights to het_net_load_weights. */
int het_net_build(het_model **out, const het_net *net, het_shape in, int n_classes,
                  int max_batch, int workers);
/* Copies net's initial weights into m (a model built from net): HET_EINVAL when their counts
 * differ from the model's; nothing to do without weights. */
int het_net_load_weights(const het_net *net, het_model *m);

/* ONNX (src/model_io/onnx_read.c; export: onnx_write.c). Reads an ONNX file into net (layers
 * and initial weights). An operator or attribute hetrain cannot train fails with its node
 * name. */
int het_net_read_onnx(het_net *net, const char *path);
/* Writes model m (built from net) as an ONNX inference graph (opset 13, input "input" of
 * [N, C, H, W], output "logits" [N, classes]), replaced durably (core/outfile.c). */
int het_net_write_onnx(const het_net *net, het_model *m, const char *path);

/* ---- model zoo: models/NAME.net, built into the library, read by het_net_parse ---- */
/* The layer list of a named model ("mlp", "lenet5", "cifar-cnn", "resnet20") with `n_classes`
 * outputs, for input shape `in` (no zoo model depends on it today). On success *layers is a
 * malloc'ed array of *n new layers, all owned by the caller: pass them to het_model_create
 * (which takes the layers, then free(*layers)), or destroy each with l->ops->destroy(l) and
 * free(*layers). Unknown names: HET_EINVAL with a message listing the known ones; HET_ENOMEM;
 * on failure *layers is NULL and *n is 0. */
int het_zoo_layers(const char *name, het_shape in, int n_classes, het_layer ***layers, int *n);
/* Builds a named model (het_zoo_layers + het_model_create). Errors as het_zoo_layers. */
int het_zoo_build(het_model **out, const char *name, het_shape in, int n_classes, int max_batch,
                  int workers);
/* NULL-terminated list of zoo names. */
const char *const *het_zoo_names(void);

/* ---- safetensors ----
 * Writes the model's trainable parameters as F32 tensors named "layers.<i>.weight" /
 * "layers.<i>.bias" (ResNet blocks: "layers.<i>.conv1.weight", "layers.<i>.bn1.weight", ...)
 * in PyTorch shapes (the names of src/model_io/tensor_names.h, which the ONNX export shares),
 * replaced durably (core/outfile.c: temporary file, fsync, rename). */
int het_safetensors_write(het_model *m, const char *path);

/* Reads every parameter and batch-norm statistic of m from a safetensors file, by the names
 * and shapes het_safetensors_write gives them; the names may carry one common prefix other
 * than "layers." before the layer index ("0.weight", "net.0.weight": docs/SAFETENSORS.md).
 * dtype F32, or F16 / BF16 / F64 converted to float. PyTorch's "*.num_batches_tracked" and
 * "__metadata__" are skipped; any other tensor the model lacks, one it needs that the file
 * lacks, a shape or dtype that differs, a truncated file or a malformed header fails with a
 * one-line message (HET_EFORMAT; HET_EIO, HET_ENOMEM), and then m is unchanged: nothing is
 * copied unless the whole file checks out. HET_OK once every tensor is copied. */
int het_safetensors_read(het_model *m, const char *path);
/* The number of tensors het_safetensors_write writes for m and het_safetensors_read reads
 * (skipped ones not counted), or HET_ENOMEM. */
int het_safetensors_count(const het_model *m);

#ifdef __cplusplus
}
#endif
#endif

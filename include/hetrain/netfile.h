/* hetrain model files: a network described outside the code, in one of two formats that read
 * into one description (het_net):
 *  - hetrain's text format (src/nn/netfile.c, grammar in docs/MODELS.md): one layer a line,
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
 *  - ONNX (src/nn/onnx_read.c, protobuf-c with onnx.proto): the operators hetrain trains, mapped to
 *    the same layers, with the graph's initializers as initial weights (het_net.params/state).
 * A het_net builds a het_model (het_net_build); het_net_write_onnx writes a model back as an
 * ONNX inference graph. */
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

/* ONNX (src/nn/onnx_read.c; export: onnx_write.c). Reads an ONNX file into net (layers and initial weights). An operator
 * or attribute hetrain cannot train fails with its node name. */
int het_net_read_onnx(het_net *net, const char *path);
/* Writes model m (built from net) as an ONNX inference graph (opset 13, input "input" of
 * [N, C, H, W], output "logits" [N, classes]), written to "<path>.tmp" and renamed. */
int het_net_write_onnx(const het_net *net, het_model *m, const char *path);

#ifdef __cplusplus
}
#endif
#endif

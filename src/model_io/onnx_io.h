/* Internal to model_io/: the ONNX reader's state and what reads it (onnx_io.c: messages,
 * node inputs and attributes, tensors and their elements, initializers taken as weights, the
 * graph's input and names). The reader's files form a line, each using only those before it:
 * onnx_io.c, then onnx_const.c (constants and their folding, onnx_const.h), then onnx_read.c
 * (the walk from input to output). */
#ifndef HET_MODEL_IO_ONNX_IO_H
#define HET_MODEL_IO_ONNX_IO_H

#include "hetrain/netfile.h"
#include "model_io/onnx_bytes.h"
#include "onnx/onnx.pb-c.h"

#define HET_ONNX_SYM_N (-((int64_t)1 << 62)) /* the batch size N in a folded shape */
#define KT_MAX 4096                          /* elements of a folded constant */
#define ONNX_MAX_BYTES HET_ONNX_MAX_BYTES

typedef struct kt { /* a constant: numbers, or an alias of a float initializer */
    const char *name;
    int rank;
    int64_t dims[4];
    size_t n;
    int64_t *iv; /* integers (floats truncated) */
    double *fv;  /* the same values as doubles */
    const Onnx__TensorProto *alias;
} kt;

typedef struct rd {
    const char *path;
    Onnx__GraphProto *g;
    kt *k;
    size_t nk, cap_k;
    char *used; /* per node: 1 folded or walked */
    het_net *net;
    float *params, *state;
    size_t np, ns, cap_p, cap_s;
    het_shape sh; /* the current value's shape per sample */
    int rank;     /* and its rank, 4 or 2 */
} rd;

/* "FILE: node 'NAME' (OpType): MESSAGE" (without a node: "FILE: MESSAGE"); returns st. */
int het_onnx_fail(rd *r, const Onnx__NodeProto *nd, int st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Input i of nd, or NULL when absent or "" (an omitted optional input). */
const char *het_onnx_in(const Onnx__NodeProto *nd, size_t i);
/* nd's attribute `name`, or NULL. */
const Onnx__AttributeProto *het_onnx_attr(const Onnx__NodeProto *nd, const char *name);
/* The initializer `name` (or an Identity's alias of one), or NULL. */
const Onnx__TensorProto *het_onnx_init(const rd *r, const char *name);
/* Elements of t from its dims into *n: HET_EFORMAT past rank 8 or 2^31 elements. */
int het_onnx_count(rd *r, const Onnx__TensorProto *t, size_t *n);
/* HET_OK when t holds n numbers of a type het_onnx_get reads (float32 only when want_float);
 * else HET_EFORMAT naming the tensor. */
int het_onnx_data_ok(rd *r, const Onnx__TensorProto *t, size_t n, int want_float);
/* Element i of a tensor het_onnx_data_ok accepted, as a double. */
double het_onnx_get(const Onnx__TensorProto *t, size_t i);
/* The same as an integer: int64 elements exactly, others as het_onnx_to_i64 makes them. */
int64_t het_onnx_get_i(const Onnx__TensorProto *t, size_t i);
/* x as an integer: truncated, clamped to int64's range, NaN as 0. */
int64_t het_onnx_to_i64(double x);
/* Attribute `name` of nd as an int (def when absent); with n > 0 an INTS attribute of n equal
 * values (else HET_EINVAL naming the attribute and its values). */
int het_onnx_attr_int(rd *r, const Onnx__NodeProto *nd, const char *name, int n, int64_t def,
                      int64_t *v);
int het_onnx_attr_float(rd *r, const Onnx__NodeProto *nd, const char *name, float def, float *v);
/* HET_EINVAL naming the first attribute of nd not in the space-separated list `known` (and an
 * auto_pad other than NOTSET). */
int het_onnx_known_attrs(rd *r, const Onnx__NodeProto *nd, const char *known);
/* "d0, d1, ..." (at most 8) into buf. */
void het_onnx_fmt_dims(char *buf, size_t cap, const int64_t *d, size_t n);
/* Appends input `in` of nd, a float32 initializer of shape dims (rank 1, 2 or 4), to the
 * parameters (state: to the state); tr: stored transposed ([in, out] for [out, in], rank 2);
 * an absent input appends zeros when zero_ok. A wrong shape names the tensor and both shapes. */
int het_onnx_take(rd *r, const Onnx__NodeProto *nd, size_t in, int state, int rank,
                  const int64_t *dims, int tr, int zero_ok);
/* Every value defined once (onnx.checker's rule): HET_EFORMAT naming a name two initializers
 * share, or a node output that is also an initializer or another node's output. */
int het_onnx_unique_names(rd *r);
/* The graph's one input that is no initializer: r->sh and r->rank from its dims [N, C, H, W]
 * or [N, F], its name in *name. */
int het_onnx_graph_input(rd *r, const char **name);
#endif

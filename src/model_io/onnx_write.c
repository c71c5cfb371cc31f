/* ONNX export (het_net_write_onnx): a model built from a het_net as an ONNX inference graph.
 *
 * DESIGN. The graph is opset 13, IR version 8 (what python3-onnx 1.12's checker accepts), one
 * node per operator, named after the layer as torch.onnx.export names a module's nodes
 * ("/layers.3/Conv"), so that het_net_read_onnx (onnx_read.c) reads the same layers back:
 *   conv       Conv (kernel, strides, pads, dilations 1, group 1)
 *   batchnorm  BatchNormalization (epsilon; momentum in ONNX's convention, 1 - hetrain's)
 *   relu       Relu;  maxpool MaxPool;  avgpool AveragePool, or GlobalAveragePool for k 0
 *   flatten    Flatten (axis 1)
 *   dense      Gemm (transB 1, PyTorch's Linear), after a Flatten of the same name prefix when
 *              its input is not flat yet (hetrain's dense flattens by itself; the shared prefix
 *              tells the reader that this Flatten is the dense's, not a flatten layer)
 *   dropout    nothing (an inference graph)
 *   resblock   Conv-BatchNormalization-Relu-Conv-BatchNormalization-Add-Relu, the shortcut the
 *              block's input or option A: Slice (steps s on H and W) then Pad (channels, zeros)
 * Initializers carry the names of the one table of tensor names that the safetensors export
 * uses too (tensor_names.c: layers.i.weight, layers.i.conv1.weight, layers.i.bn1.running_mean,
 * ...) and point straight at the model's buffers (raw_data is little-endian float32, the
 * host's order). The protobuf structures live in an arena freed in one go; the packed bytes
 * replace path durably (core/outfile.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/outfile.h"
#include "hetrain/netfile.h"
#include "model_io/tensor_names.h"
#include "onnx/onnx.pb-c.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "onnx_write.c writes float32 raw_data in host order: a little-endian host is assumed"
#endif

typedef struct wr {
    void **blk; /* the arena: every allocation, freed by wr_free */
    size_t n_blk, cap_blk;
    int oom;
    Onnx__NodeProto **node;
    size_t n_node, cap_node;
    Onnx__TensorProto **init;
    size_t n_init, cap_init;
    const char *cur; /* the value the next node reads */
    int rank;        /* its rank: 4 (N, C, H, W) or 2 (N, F) */
} wr;

static void *az(wr *w, size_t size) {
    if (w->oom) return NULL;
    if (w->n_blk == w->cap_blk) {
        size_t cap = w->cap_blk ? 2 * w->cap_blk : 256;
        void **b = realloc(w->blk, cap * sizeof *b);
        if (!b) {
            w->oom = 1;
            return NULL;
        }
        w->blk = b;
        w->cap_blk = cap;
    }
    void *p = calloc(1, size ? size : 1);
    if (!p) {
        w->oom = 1;
        return NULL;
    }
    w->blk[w->n_blk++] = p;
    return p;
}

static char *astr(wr *w, const char *fmt, ...) {
    char buf[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *s = az(w, strlen(buf) + 1);
    if (s) strcpy(s, buf);
    return s;
}

static void wr_free(wr *w) {
    for (size_t i = 0; i < w->n_blk; i++) free(w->blk[i]);
    free(w->blk);
}

/* Appends a float initializer viewing data (not copied: the model outlives the packing). */
static const char *init_f(wr *w, const char *name, const float *data, int rank,
                          const int64_t *dims) {
    Onnx__TensorProto *t = az(w, sizeof *t);
    int64_t *d = az(w, (size_t)rank * sizeof *d);
    if (!t || !d || w->n_init == w->cap_init) return w->oom = 1, "";
    onnx__tensor_proto__init(t);
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)(d[i] = dims[i]);
    t->n_dims = (size_t)rank;
    t->dims = d;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->name = astr(w, "%s", name);
    t->has_raw_data = 1;
    t->raw_data.len = n * sizeof(float);
    t->raw_data.data = (uint8_t *)data;
    w->init[w->n_init++] = t;
    return t->name ? t->name : "";
}

/* Appends a 1-D int64 initializer (copied). */
static const char *init_i(wr *w, const char *name, const int64_t *v, size_t n) {
    Onnx__TensorProto *t = az(w, sizeof *t);
    int64_t *d = az(w, sizeof *d), *data = az(w, n * sizeof *data);
    if (!t || !d || !data || w->n_init == w->cap_init) return w->oom = 1, "";
    onnx__tensor_proto__init(t);
    *d = (int64_t)n;
    memcpy(data, v, n * sizeof *data);
    t->n_dims = 1;
    t->dims = d;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    t->name = astr(w, "%s", name);
    t->n_int64_data = n;
    t->int64_data = data;
    w->init[w->n_init++] = t;
    return t->name ? t->name : "";
}

/* Appends node `name` of type op reading n_in inputs (the first w->cur when in[0] is NULL);
 * its output becomes w->cur. Room for 6 attributes. */
static Onnx__NodeProto *node(wr *w, const char *name, const char *op, int n_in,
                             const char *const *in) {
    Onnx__NodeProto *nd = az(w, sizeof *nd);
    char **ins = az(w, (size_t)n_in * sizeof *ins), **outs = az(w, sizeof *outs);
    Onnx__AttributeProto **at = az(w, 6 * sizeof *at);
    if (!nd || !ins || !outs || !at || w->n_node == w->cap_node) {
        w->oom = 1;
        return NULL;
    }
    onnx__node_proto__init(nd);
    for (int i = 0; i < n_in; i++) ins[i] = astr(w, "%s", i == 0 && !in[0] ? w->cur : in[i]);
    outs[0] = astr(w, "%s_output_0", name);
    nd->n_input = (size_t)n_in;
    nd->input = ins;
    nd->n_output = 1;
    nd->output = outs;
    nd->name = astr(w, "%s", name);
    nd->op_type = astr(w, "%s", op);
    nd->attribute = at;
    w->node[w->n_node++] = nd;
    w->cur = outs[0] ? outs[0] : "";
    return nd;
}

static Onnx__AttributeProto *attr(wr *w, Onnx__NodeProto *nd, const char *name,
                                  Onnx__AttributeProto__AttributeType type) {
    Onnx__AttributeProto *a = nd ? az(w, sizeof *a) : NULL;
    if (!a || nd->n_attribute == 6) return w->oom = 1, NULL;
    onnx__attribute_proto__init(a);
    a->name = astr(w, "%s", name);
    a->has_type = 1;
    a->type = type;
    nd->attribute[nd->n_attribute++] = a;
    return a;
}

static void attr_i(wr *w, Onnx__NodeProto *nd, const char *name, int64_t v) {
    Onnx__AttributeProto *a = attr(w, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) a->has_i = 1, a->i = v;
}

static void attr_f(wr *w, Onnx__NodeProto *nd, const char *name, float v) {
    Onnx__AttributeProto *a = attr(w, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) a->has_f = 1, a->f = v;
}

/* An INTS attribute of n copies of v. */
static void attr_is(wr *w, Onnx__NodeProto *nd, const char *name, int n, int64_t v) {
    Onnx__AttributeProto *a = attr(w, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *x = az(w, (size_t)n * sizeof *x);
    if (!a || !x) return;
    for (int i = 0; i < n; i++) x[i] = v;
    a->n_ints = (size_t)n;
    a->ints = x;
}

static void conv_node(wr *w, const char *name, const char *wname, const char *bname, int k,
                      int stride, int pad) {
    const char *in[3] = {NULL, wname, bname};
    Onnx__NodeProto *nd = node(w, name, "Conv", bname ? 3 : 2, in);
    attr_is(w, nd, "dilations", 2, 1);
    attr_i(w, nd, "group", 1);
    attr_is(w, nd, "kernel_shape", 2, k);
    attr_is(w, nd, "pads", 4, pad);
    attr_is(w, nd, "strides", 2, stride);
}

/* hetrain's momentum (weight of the batch) <-> ONNX's (weight of the running value), rounded
 * to 6 significant digits so that 0.1 and 0.9 map to each other exactly as floats. */
static float flip_momentum(float m) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.6g", 1.0 - (double)m);
    return strtof(buf, NULL);
}

static void bn_node(wr *w, const char *name, const char *const names[4], float eps, float mom) {
    const char *in[5] = {NULL, names[0], names[1], names[2], names[3]};
    Onnx__NodeProto *nd = node(w, name, "BatchNormalization", 5, in);
    attr_f(w, nd, "epsilon", eps);
    attr_f(w, nd, "momentum", flip_momentum(mom));
}

static Onnx__NodeProto *unary(wr *w, const char *name, const char *op) {
    const char *in[1] = {NULL};
    return node(w, name, op, 1, in);
}

/* The initializers of layer i's tensors, named and shaped by the one table of tensor names
 * (tensor_names.c, the safetensors names): its parameters into p[0 .. np), its state into
 * st[0 .. ns), each viewing the model's buffers. */
typedef struct layer_inits {
    const char *p[6], *st[4];
    int np, ns;
} layer_inits;

static layer_inits inits_of(wr *w, het_model *m, const het_tensor_name *t, int nt, int i) {
    layer_inits li = {0};
    int idx[6];
    li.np = het_tensor_names_of_layer(t, nt, i, 0, idx, 6);
    for (int k = 0; k < li.np; k++)
        li.p[k] = init_f(w, t[idx[k]].name, het_model_params(m) + t[idx[k]].off, t[idx[k]].rank,
                         t[idx[k]].dims);
    li.ns = het_tensor_names_of_layer(t, nt, i, 1, idx, 4);
    for (int k = 0; k < li.ns; k++)
        li.st[k] = init_f(w, t[idx[k]].name, het_model_state(m) + t[idx[k]].off, t[idx[k]].rank,
                          t[idx[k]].dims);
    return li;
}

/* The nodes of resblock layer i (x: its input value; C -> oc channels, stride s; li: its
 * conv1, bn1, conv2, bn2 weights and biases and bn1's, bn2's statistics). */
static void resblock(wr *w, int i, const layer_inits *li, het_shape in, het_shape out, int s) {
    const int64_t C = in.c, oc = out.c;
    const char *x = w->cur;
    char nm[8][64];
    snprintf(nm[0], sizeof nm[0], "/layers.%d/conv1/Conv", i);
    conv_node(w, nm[0], li->p[0], NULL, 3, s, 1);
    snprintf(nm[0], sizeof nm[0], "/layers.%d/bn1/BatchNormalization", i);
    bn_node(w, nm[0], (const char *const[4]){li->p[1], li->p[2], li->st[0], li->st[1]}, 1e-5f,
            0.1f);
    snprintf(nm[0], sizeof nm[0], "/layers.%d/Relu", i);
    unary(w, nm[0], "Relu");
    snprintf(nm[0], sizeof nm[0], "/layers.%d/conv2/Conv", i);
    conv_node(w, nm[0], li->p[3], NULL, 3, 1, 1);
    snprintf(nm[0], sizeof nm[0], "/layers.%d/bn2/BatchNormalization", i);
    bn_node(w, nm[0], (const char *const[4]){li->p[4], li->p[5], li->st[2], li->st[3]}, 1e-5f,
            0.1f);
    const char *y = w->cur, *sc = x;
    if (s != 1 || C != oc) { /* option A: x[:, :, ::s, ::s], channels zero-padded */
        int64_t zero[2] = {0, 0}, big[2] = {INT64_MAX, INT64_MAX}, axes[2] = {2, 3};
        int64_t steps[2] = {s, s}, before = (oc - C) / 2;
        int64_t pads[8] = {0, before, 0, 0, 0, oc - C - before, 0, 0};
        const char *sl[5];
        sl[0] = x;
        static const char *const what[4] = {"starts", "ends", "axes", "steps"};
        const int64_t *vals[4] = {zero, big, axes, steps};
        for (int k = 0; k < 4; k++) {
            snprintf(nm[1 + k], sizeof nm[1 + k], "layers.%d.shortcut.%s", i, what[k]);
            sl[1 + k] = init_i(w, nm[1 + k], vals[k], 2);
        }
        snprintf(nm[0], sizeof nm[0], "/layers.%d/Slice", i);
        node(w, nm[0], "Slice", 5, sl);
        snprintf(nm[5], sizeof nm[5], "layers.%d.shortcut.pads", i);
        const char *pin[2] = {NULL, init_i(w, nm[5], pads, 8)};
        snprintf(nm[0], sizeof nm[0], "/layers.%d/Pad", i);
        Onnx__NodeProto *pd = node(w, nm[0], "Pad", 2, pin);
        Onnx__AttributeProto *a =
            attr(w, pd, "mode", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
        if (a) a->has_s = 1, a->s.len = 8, a->s.data = (uint8_t *)"constant";
        sc = w->cur;
    }
    snprintf(nm[0], sizeof nm[0], "/layers.%d/Add", i);
    node(w, nm[0], "Add", 2, (const char *const[2]){y, sc});
    snprintf(nm[0], sizeof nm[0], "/layers.%d/Relu_1", i);
    unary(w, nm[0], "Relu");
}

/* Per layer kind: the model layer's ops name and how many parameter and state tensors the
 * name table gives it. */
static const struct {
    const char *model_kind;
    int np, ns;
} kinds[HET_NL_COUNT] = {
    [HET_NL_CONV] = {"conv2d", 2, 0},       [HET_NL_BATCHNORM] = {"batchnorm", 2, 2},
    [HET_NL_RELU] = {"relu", 0, 0},         [HET_NL_MAXPOOL] = {"maxpool", 0, 0},
    [HET_NL_AVGPOOL] = {"avgpool", 0, 0},   [HET_NL_FLATTEN] = {"flatten", 0, 0},
    [HET_NL_DENSE] = {"dense", 2, 0},       [HET_NL_DROPOUT] = {"dropout", 0, 0},
    [HET_NL_RESBLOCK] = {"resblock", 6, 4}};

/* The nodes of layer i; HET_EINVAL when the model's layer is not the net's. */
static int layer_nodes(wr *w, const het_net *net, het_model *m, const het_tensor_name *t, int nt,
                       int i, const char *path) {
    const het_net_layer *L = &net->layer[i];
    const het_layer *ml = het_model_layer(m, i);
    if ((unsigned)L->kind >= HET_NL_COUNT || strcmp(ml->ops->name, kinds[L->kind].model_kind) != 0)
        return het_error_set(HET_EINVAL, "%s: layer %d of the net is not the model's (%s)", path, i,
                             ml->ops->name);
    layer_inits li = inits_of(w, m, t, nt, i);
    if (li.np != kinds[L->kind].np || li.ns != kinds[L->kind].ns)
        return het_error_set(HET_EINVAL, "%s: layer %d (%s) has %d parameter and %d state "
                             "tensors, expected %d and %d", path, i, ml->ops->name, li.np, li.ns,
                             kinds[L->kind].np, kinds[L->kind].ns);
    char name[64];
    switch (L->kind) {
    case HET_NL_CONV:
        snprintf(name, sizeof name, "/layers.%d/Conv", i);
        conv_node(w, name, li.p[0], li.p[1], L->k, L->stride, L->pad);
        break;
    case HET_NL_BATCHNORM:
        snprintf(name, sizeof name, "/layers.%d/BatchNormalization", i);
        bn_node(w, name, (const char *const[4]){li.p[0], li.p[1], li.st[0], li.st[1]}, L->eps,
                L->momentum);
        break;
    case HET_NL_RELU:
        snprintf(name, sizeof name, "/layers.%d/Relu", i);
        unary(w, name, "Relu");
        break;
    case HET_NL_MAXPOOL:
    case HET_NL_AVGPOOL: {
        int g = L->kind == HET_NL_AVGPOOL && L->k == 0;
        const char *op = g                           ? "GlobalAveragePool"
                         : L->kind == HET_NL_MAXPOOL ? "MaxPool"
                                                     : "AveragePool";
        snprintf(name, sizeof name, "/layers.%d/%s", i, op);
        Onnx__NodeProto *nd = unary(w, name, op);
        if (!g) {
            attr_is(w, nd, "kernel_shape", 2, L->k);
            attr_is(w, nd, "strides", 2, L->stride > 0 ? L->stride : L->k);
        }
        break;
    }
    case HET_NL_FLATTEN:
    case HET_NL_DENSE:
        if (w->rank != 2) {
            snprintf(name, sizeof name, "/layers.%d/Flatten", i);
            attr_i(w, unary(w, name, "Flatten"), "axis", 1);
            w->rank = 2;
        }
        if (L->kind == HET_NL_DENSE) {
            snprintf(name, sizeof name, "/layers.%d/Gemm", i);
            Onnx__NodeProto *nd = node(w, name, "Gemm", 3, (const char *const[3]){NULL, li.p[0],
                                                                                   li.p[1]});
            attr_f(w, nd, "alpha", 1.0f);
            attr_f(w, nd, "beta", 1.0f);
            attr_i(w, nd, "transB", 1);
        }
        break;
    case HET_NL_DROPOUT: break; /* inference graph */
    case HET_NL_RESBLOCK: resblock(w, i, &li, ml->in, ml->out, L->stride); break;
    default: break;
    }
    return HET_OK;
}

static Onnx__ValueInfoProto *value_info(wr *w, const char *name, int rank, const int64_t *dims) {
    Onnx__ValueInfoProto *v = az(w, sizeof *v);
    Onnx__TypeProto *t = az(w, sizeof *t);
    Onnx__TypeProto__Tensor *tt = az(w, sizeof *tt);
    Onnx__TensorShapeProto *sh = az(w, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **dd = az(w, (size_t)rank * sizeof *dd);
    if (!v || !t || !tt || !sh || !dd) return NULL;
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(t);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    for (int i = 0; i < rank; i++) {
        dd[i] = az(w, sizeof *dd[i]);
        if (!dd[i]) return NULL;
        onnx__tensor_shape_proto__dimension__init(dd[i]);
        if (i == 0) {
            dd[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dd[i]->dim_param = astr(w, "N");
        } else {
            dd[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dd[i]->dim_value = dims[i];
        }
    }
    sh->n_dim = (size_t)rank;
    sh->dim = dd;
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = sh;
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    v->name = astr(w, "%s", name);
    v->type = t;
    return v;
}

static int write_file(const char *path, const uint8_t *buf, size_t n) {
    het_outfile o;
    int st = het_outfile_open(&o, path, "ONNX export");
    if (st) return st;
    if (fwrite(buf, 1, n, o.f) != n) {
        st = het_error_set(HET_EIO, "%s: write failed: %s", path, strerror(errno));
        het_outfile_abort(&o);
        return st;
    }
    return het_outfile_commit(&o);
}

int het_net_write_onnx(const het_net *net, het_model *m, const char *path) {
    int n = het_model_n_layers(m);
    if (net->n != n)
        return het_error_set(HET_EINVAL, "%s: the net has %d layers, the model %d", path, net->n,
                             n);
    wr w = {0};
    w.cap_node = w.cap_init = 16 * (size_t)n + 8;
    w.node = az(&w, w.cap_node * sizeof *w.node);
    w.init = az(&w, w.cap_init * sizeof *w.init);
    w.cur = "input";
    w.rank = 4;
    het_tensor_name *t = NULL;
    int nt = het_tensor_names(m, &t);
    int st = nt < 0 ? nt : HET_OK;
    for (int i = 0; i < n && st == HET_OK && !w.oom; i++)
        st = layer_nodes(&w, net, m, t, nt, i, path);
    free(t);
    if (st == HET_OK && w.n_node == 0) st = het_error_set(HET_EINVAL, "%s: no operator", path);
    if (st != HET_OK) {
        wr_free(&w);
        return st;
    }
    if (!w.oom) w.node[w.n_node - 1]->output[0] = astr(&w, "logits");
    het_shape in = het_model_in_shape(m), out = het_model_layer(m, n - 1)->out;
    int64_t di[4] = {0, in.c, in.h, in.w}, dout[4] = {0, out.c, out.h, out.w};
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    Onnx__OperatorSetIdProto ops = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsp = &ops;
    Onnx__ValueInfoProto *vin = value_info(&w, "input", 4, di);
    Onnx__ValueInfoProto *vout = value_info(&w, "logits", w.rank, dout);
    g.name = (char *)(net->name[0] ? net->name : "hetrain");
    g.n_node = w.n_node;
    g.node = w.node;
    g.n_initializer = w.n_init;
    g.initializer = w.init;
    g.n_input = 1;
    g.input = &vin;
    g.n_output = 1;
    g.output = &vout;
    ops.domain = "";
    ops.has_version = 1;
    ops.version = 13;
    mp.has_ir_version = 1;
    mp.ir_version = 8;
    mp.n_opset_import = 1;
    mp.opset_import = &opsp;
    mp.producer_name = "hetrain";
    mp.graph = &g;
    uint8_t *buf = NULL;
    size_t len = 0;
    if (!w.oom) {
        len = onnx__model_proto__get_packed_size(&mp);
        buf = malloc(len ? len : 1);
    }
    if (!buf) {
        wr_free(&w);
        return het_error_set(HET_ENOMEM, "%s: out of memory building the ONNX graph", path);
    }
    size_t packed = onnx__model_proto__pack(&mp, buf);
    st = packed == len ? write_file(path, buf, len)
                       : het_error_set(HET_EIO, "%s: protobuf packing wrote %zu of %zu bytes", path,
                                       packed, len);
    free(buf);
    wr_free(&w);
    return st;
}

/* ONNX import and export (src/model_io/onnx_read.c, onnx_write.c): every zoo model exported and read
 * back gives the zoo's layers (dropout aside: an inference graph has none) and the model's
 * weights bit for bit, and models built from both give the same logits and, after a training
 * step, the same gradients, bit for bit. Then broken files: truncated, garbage, an operator
 * hetrain cannot train (a Sigmoid, written here with protobuf-c), a wrong initializer shape, a
 * huge length field, each a one-line error naming the file (and the node), no crash.
 * With HET_ONNX_OUT=DIR the exported models are left in DIR (for python3-onnx's checker). */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "hetrain/netfile.h"
#include "hetrain/nn.h"
#include "onnx/onnx.pb-c.h"
#include "test.h"

/* The zoo's layer lists (src/nn/zoo.c, models/NAME.net) with 10 classes, as a het_net. */
static void zoo_net(het_net *net, const char *name) {
    memset(net, 0, sizeof *net);
    snprintf(net->name, sizeof net->name, "%s", name);
#define L(...)                                                                                     \
    net->layer[net->n++] = (het_net_layer) { .kind = __VA_ARGS__ }
    if (strcmp(name, "mlp") == 0) {
        L(HET_NL_DENSE, .out = 256);
        L(HET_NL_RELU);
        L(HET_NL_DENSE, .out = 128);
        L(HET_NL_RELU);
        L(HET_NL_DENSE, .out = 10);
    } else if (strcmp(name, "lenet5") == 0) {
        L(HET_NL_CONV, .out = 6, .k = 5, .stride = 1, .pad = 2);
        L(HET_NL_MAXPOOL, .k = 2, .stride = 2);
        L(HET_NL_RELU);
        L(HET_NL_CONV, .out = 16, .k = 5, .stride = 1, .pad = 0);
        L(HET_NL_MAXPOOL, .k = 2, .stride = 2);
        L(HET_NL_RELU);
        L(HET_NL_FLATTEN);
        L(HET_NL_DENSE, .out = 120);
        L(HET_NL_RELU);
        L(HET_NL_DENSE, .out = 84);
        L(HET_NL_RELU);
        L(HET_NL_DENSE, .out = 10);
    } else if (strcmp(name, "cifar-cnn") == 0) {
        for (int b = 0; b < 2; b++) {
            L(HET_NL_CONV, .out = 32 << b, .k = 3, .stride = 1, .pad = 1);
            L(HET_NL_RELU);
            L(HET_NL_CONV, .out = 32 << b, .k = 3, .stride = 1, .pad = 1);
            L(HET_NL_RELU);
            L(HET_NL_MAXPOOL, .k = 2, .stride = 2);
        }
        L(HET_NL_FLATTEN);
        L(HET_NL_DENSE, .out = 256);
        L(HET_NL_RELU);
        L(HET_NL_DROPOUT, .p = 0.5f);
        L(HET_NL_DENSE, .out = 10);
    } else if (strcmp(name, "tiny-cnn") == 0) { /* small seeds for fuzz/corpus/onnx too */
        L(HET_NL_CONV, .out = 2, .k = 3, .stride = 1, .pad = 1);
        L(HET_NL_BATCHNORM, .momentum = 0.2f, .eps = 1e-3f);
        L(HET_NL_RELU);
        L(HET_NL_AVGPOOL, .k = 2, .stride = 2);
        L(HET_NL_CONV, .out = 3, .k = 2, .stride = 1, .pad = 0);
        L(HET_NL_MAXPOOL, .k = 2, .stride = 1);
        L(HET_NL_FLATTEN);
        L(HET_NL_DENSE, .out = 4);
        L(HET_NL_BATCHNORM, .momentum = 0.1f, .eps = 1e-5f);
        L(HET_NL_RELU);
        L(HET_NL_DROPOUT, .p = 0.25f);
        L(HET_NL_DENSE, .out = 10);
    } else if (strcmp(name, "tiny-res") == 0) { /* every shortcut: identity, option A s 2 and 1 */
        L(HET_NL_RESBLOCK, .out = 2, .stride = 1, .k = 3, .pad = 1);
        L(HET_NL_RESBLOCK, .out = 4, .stride = 2, .k = 3, .pad = 1);
        L(HET_NL_RESBLOCK, .out = 6, .stride = 1, .k = 3, .pad = 1);
        L(HET_NL_RESBLOCK, .out = 9, .stride = 2, .k = 3, .pad = 1);
        L(HET_NL_AVGPOOL, .k = 0, .stride = 0);
        L(HET_NL_DENSE, .out = 10);
    } else { /* resnet20 */
        L(HET_NL_CONV, .out = 16, .k = 3, .stride = 1, .pad = 1);
        L(HET_NL_BATCHNORM, .momentum = 0.1f, .eps = 1e-5f);
        L(HET_NL_RELU);
        for (int s = 0; s < 3; s++)
            for (int b = 0; b < 3; b++)
                L(HET_NL_RESBLOCK, .out = 16 << s, .stride = s > 0 && b == 0 ? 2 : 1, .k = 3,
                  .pad = 1);
        L(HET_NL_AVGPOOL, .k = 0, .stride = 0);
        L(HET_NL_DENSE, .out = 10);
    }
#undef L
}

static het_layer *make_layer(const het_net_layer *L) {
    switch (L->kind) {
    case HET_NL_CONV: return het_conv2d_new(L->out, L->k, L->stride, L->pad);
    case HET_NL_BATCHNORM: return het_batchnorm_new(L->momentum, L->eps);
    case HET_NL_RELU: return het_relu_new();
    case HET_NL_MAXPOOL: return het_maxpool_new(L->k, L->stride);
    case HET_NL_AVGPOOL: return het_avgpool_new(L->k, L->stride);
    case HET_NL_FLATTEN: return het_flatten_new();
    case HET_NL_DENSE: return het_dense_new(L->out);
    case HET_NL_DROPOUT: return het_dropout_new(L->p);
    case HET_NL_RESBLOCK: return het_resblock_new(L->out, L->stride);
    default: return NULL;
    }
}

/* A model of net's layers (no weights set), or NULL with a failed check. */
static het_model *build(const het_net *net, het_shape in, int batch) {
    het_layer *ls[HET_NET_MAX_LAYERS];
    for (int i = 0; i < net->n; i++) ls[i] = make_layer(&net->layer[i]);
    het_model *m = NULL;
    int st = het_model_create(&m, in, ls, net->n, batch, 1);
    CHECK(st == HET_OK, "build %s: %s", net->name, het_error_msg());
    return m;
}

static void without_dropout(het_net *dst, const het_net *src) {
    *dst = *src;
    dst->n = 0;
    for (int i = 0; i < src->n; i++)
        if (src->layer[i].kind != HET_NL_DROPOUT) dst->layer[dst->n++] = src->layer[i];
}

static void fill(float *x, size_t n, uint64_t seed) {
    het_rng r;
    het_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * het_rng_uniform(&r) - 1.0f;
}

static char dir[256];

static void path_of(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s.onnx", dir, name);
}

static void roundtrip(const char *name, het_shape in) {
    const int batch = 6;
    het_net zn, ref, imp;
    zoo_net(&zn, name);
    without_dropout(&ref, &zn);
    het_model *a = NULL;
    if (strncmp(name, "tiny", 4) == 0)
        a = build(&zn, in, batch);
    else
        CHECK(het_zoo_build(&a, name, in, 10, batch, 1) == HET_OK, "%s: %s", name, het_error_msg());
    if (!a) return;
    CHECK(het_model_n_layers(a) == zn.n, "%s: zoo has %d layers, the test's list %d", name,
          het_model_n_layers(a), zn.n);
    het_model_init_params(a, 1234);
    /* batch-norm statistics that are not the initial 0 and 1: blocks of C means, C variances */
    fill(het_model_state(a), het_model_n_state(a), 99);
    for (int i = 0; i < het_model_n_layers(a); i++) {
        size_t off, cnt, C = (size_t)het_model_layer(a, i)->out.c;
        het_model_layer_state(a, i, &off, &cnt);
        for (size_t j = 0; j < cnt; j++) {
            float *v = het_model_state(a) + off + j;
            *v = (j / C) % 2 ? 0.5f + fabsf(*v) : 0.1f * *v;
        }
    }
    char path[512];
    path_of(path, sizeof path, name);
    int st = het_net_write_onnx(&zn, a, path);
    CHECK(st == HET_OK, "%s: write: %s", name, het_error_msg());
    st = het_net_read_onnx(&imp, path);
    CHECK(st == HET_OK, "%s: read: %s", name, het_error_msg());
    if (st != HET_OK) {
        het_model_free(a);
        return;
    }
    CHECK(strcmp(imp.name, name) == 0 && strcmp(imp.file, path) == 0, "name '%s', file '%s'",
          imp.name, imp.file);
    CHECK(imp.n == ref.n, "%s: %d layers read, %d expected", name, imp.n, ref.n);
    for (int i = 0; i < imp.n && i < ref.n; i++) {
        const het_net_layer *x = &imp.layer[i], *y = &ref.layer[i];
        int same = x->kind == y->kind;
        switch (y->kind) {
        case HET_NL_CONV:
            same &= x->out == y->out && x->k == y->k && x->stride == y->stride && x->pad == y->pad;
            break;
        case HET_NL_MAXPOOL:
        case HET_NL_AVGPOOL:
            same &=
                x->k == y->k && (x->stride ? x->stride : x->k) == (y->stride ? y->stride : y->k);
            break;
        case HET_NL_DENSE: same &= x->out == y->out; break;
        case HET_NL_BATCHNORM: same &= x->eps == y->eps && x->momentum == y->momentum; break;
        case HET_NL_RESBLOCK: same &= x->out == y->out && x->stride == y->stride; break;
        default: break;
        }
        CHECK(same,
              "%s: layer %d (node '%s'): kind %d out %d k %d stride %d pad %d eps %g mom %g, "
              "expected kind %d out %d k %d stride %d pad %d",
              name, i, x->node, x->kind, x->out, x->k, x->stride, x->pad, (double)x->eps,
              (double)x->momentum, y->kind, y->out, y->k, y->stride, y->pad);
        CHECK(x->node[0] != 0, "%s: layer %d has no node name", name, i);
    }
    CHECK(imp.n_params == het_model_n_params(a) && imp.n_state == het_model_n_state(a),
          "%s: %zu params, %zu state read; the model has %zu, %zu", name, imp.n_params, imp.n_state,
          het_model_n_params(a), het_model_n_state(a));
    int wsame = imp.n_params == het_model_n_params(a) &&
                memcmp(imp.params, het_model_params(a), imp.n_params * sizeof(float)) == 0 &&
                imp.n_state == het_model_n_state(a) &&
                (imp.n_state == 0 ||
                 memcmp(imp.state, het_model_state(a), imp.n_state * sizeof(float)) == 0);
    CHECK(wsame, "%s: weights differ from the model's", name);
    if (imp.n == ref.n && wsame) {
        /* b from the file, c from the zoo's list (without dropout) with a's weights */
        het_model *b = build(&imp, in, batch), *c = build(&ref, in, batch);
        if (b && c) {
            memcpy(het_model_params(b), imp.params, imp.n_params * sizeof(float));
            memcpy(het_model_params(c), het_model_params(a), imp.n_params * sizeof(float));
            if (imp.n_state) {
                memcpy(het_model_state(b), imp.state, imp.n_state * sizeof(float));
                memcpy(het_model_state(c), het_model_state(a), imp.n_state * sizeof(float));
            }
            size_t nx = het_shape_size(in) * batch;
            float *x = malloc(nx * sizeof *x);
            uint8_t y[6] = {1, 3, 5, 7, 9, 0};
            fill(x, nx, 7);
            const float *la = het_model_forward(a, x, batch, 0, 1);
            float *keep = malloc(10 * batch * sizeof *keep);
            memcpy(keep, la, 10 * batch * sizeof *keep);
            const float *lb = het_model_forward(b, x, batch, 0, 1);
            CHECK(lb && memcmp(keep, lb, 10 * batch * sizeof *keep) == 0, "%s: logits differ",
                  name);
            het_model_zero_grads(b);
            het_model_zero_grads(c);
            CHECK(het_model_train_batch(b, x, y, batch, 1.0f / batch, 5, NULL) == HET_OK, "%s",
                  het_error_msg());
            CHECK(het_model_train_batch(c, x, y, batch, 1.0f / batch, 5, NULL) == HET_OK, "%s",
                  het_error_msg());
            CHECK(memcmp(het_model_grads(b), het_model_grads(c), imp.n_params * sizeof(float)) == 0,
                  "%s: gradients after a training step differ", name);
            CHECK(imp.n_state == 0 || memcmp(het_model_state(b), het_model_state(c),
                                             imp.n_state * sizeof(float)) == 0,
                  "%s: running statistics after a training step differ", name);
            free(keep);
            free(x);
        }
        het_model_free(b);
        het_model_free(c);
    }
    free(imp.params), free(imp.state);
    het_model_free(a);
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(p, 1, n, f) == n, "cannot write %s", path);
    if (f) fclose(f);
}

/* Reading path must fail with a one-line message naming the file and containing want. */
static void expect_fail(const char *path, const char *want) {
    het_net net;
    int st = het_net_read_onnx(&net, path);
    const char *m = het_error_msg();
    CHECK(st < 0, "%s: read succeeded", path);
    CHECK(m && strstr(m, path) && !strchr(m, '\n'), "%s: message '%s'", path, m ? m : "");
    CHECK(!want || (m && strstr(m, want)), "%s: message '%s' lacks '%s'", path, m ? m : "", want);
    CHECK(net.n == 0 && !net.params && !net.state, "%s: a failed read leaves a net", path);
    if (st == HET_OK) free(net.params), free(net.state);
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    uint8_t *b = malloc(*n);
    if (b && fread(b, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return b;
}

/* A graph input [N, 4] -> Sigmoid -> output. */
static void write_sigmoid(const char *path) {
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__NodeProto nd = ONNX__NODE_PROTO__INIT, *ndp = &nd;
    Onnx__ValueInfoProto vi = ONNX__VALUE_INFO_PROTO__INIT, vo = ONNX__VALUE_INFO_PROTO__INIT;
    Onnx__ValueInfoProto *vip = &vi, *vop = &vo;
    Onnx__TypeProto t = ONNX__TYPE_PROTO__INIT;
    Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
    Onnx__TensorShapeProto sh = ONNX__TENSOR_SHAPE_PROTO__INIT;
    Onnx__TensorShapeProto__Dimension d0 = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT, d1 = d0;
    Onnx__TensorShapeProto__Dimension *dims[2] = {&d0, &d1};
    d0.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    d0.dim_param = "N";
    d1.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d1.dim_value = 4;
    sh.n_dim = 2;
    sh.dim = dims;
    tt.has_elem_type = 1;
    tt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt.shape = &sh;
    t.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t.tensor_type = &tt;
    vi.name = "x";
    vi.type = &t;
    vo.name = "y";
    vo.type = &t;
    char *in[1] = {"x"}, *out[1] = {"y"};
    nd.n_input = 1;
    nd.input = in;
    nd.n_output = 1;
    nd.output = out;
    nd.name = "squash";
    nd.op_type = "Sigmoid";
    g.n_node = 1;
    g.node = &ndp;
    g.n_input = 1;
    g.input = &vip;
    g.n_output = 1;
    g.output = &vop;
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.graph = &g;
    size_t n = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(n);
    onnx__model_proto__pack(&m, buf);
    write_bytes(path, buf, n);
    free(buf);
}

/* lenet5's file with layers.0.bias given 5 elements instead of 6. */
/* Writes src's model, changed by edit (with arg), to path. */
static void mutate(const char *src, const char *path, void (*edit)(Onnx__GraphProto *, int),
                   int arg) {
    size_t n = 0;
    uint8_t *b = slurp(src, &n);
    Onnx__ModelProto *m = b ? onnx__model_proto__unpack(NULL, n, b) : NULL;
    CHECK(m != NULL, "cannot unpack %s", src);
    if (!m) {
        free(b);
        return;
    }
    edit(m->graph, arg);
    size_t k = onnx__model_proto__get_packed_size(m);
    uint8_t *o = malloc(k);
    onnx__model_proto__pack(m, o);
    write_bytes(path, o, k);
    free(o);
    onnx__model_proto__free_unpacked(m, NULL);
    free(b);
}

/* lenet5's layers.0.bias with 5 elements instead of 6 */
static void bad_shape(Onnx__GraphProto *g, int arg) {
    (void)arg;
    for (size_t i = 0; i < g->n_initializer; i++) {
        Onnx__TensorProto *t = g->initializer[i];
        if (strcmp(t->name, "layers.0.bias") == 0) t->dims[0] = 5, t->raw_data.len = 20;
    }
}

/* lenet5's initializers: arg 0: layers.0.weight renamed layers.0.bias (a name given twice);
 * 1: element 2 of layers.0.bias NaN; 2: element 7 of layers.0.weight infinite; 3: the second
 * node's output renamed as the first's (a value defined twice) */
static void bad_init(Onnx__GraphProto *g, int arg) {
    for (size_t i = 0; arg < 3 && i < g->n_initializer; i++) {
        Onnx__TensorProto *t = g->initializer[i];
        float v = arg == 1 ? NAN : INFINITY;
        if (arg == 0 && strcmp(t->name, "layers.0.weight") == 0) strcpy(t->name, "layers.0.bias");
        if (arg == 1 && strcmp(t->name, "layers.0.bias") == 0) memcpy(t->raw_data.data + 8, &v, 4);
        if (arg == 2 && strcmp(t->name, "layers.0.weight") == 0)
            memcpy(t->raw_data.data + 28, &v, 4);
    }
    if (arg == 3 && g->n_node > 1 && strlen(g->node[1]->output[0]) >= strlen(g->node[0]->output[0]))
        strcpy(g->node[1]->output[0], g->node[0]->output[0]);
}

/* tiny-cnn's first Conv: arg 0 group 2, 1 pads [1, 1, 1, 0], 2 dilations [2, 2]; 3: its
 * first Relu becomes an Add; tiny-res's option-A pads arg 4: [0, 2, 0, 0, 0, 0, 0, 0] */
static void bad_node(Onnx__GraphProto *g, int arg) {
    static const char *const attr[3] = {"group", "pads", "dilations"};
    for (size_t i = 0; i < g->n_node; i++) {
        Onnx__NodeProto *nd = g->node[i];
        if (arg == 3 && strcmp(nd->name, "/layers.2/Relu") == 0) strcpy(nd->op_type, "Add");
        for (size_t a = 0;
             arg < 3 && strcmp(nd->name, "/layers.0/Conv") == 0 && a < nd->n_attribute; a++) {
            Onnx__AttributeProto *at = nd->attribute[a];
            if (strcmp(at->name, attr[arg]) != 0) continue;
            if (arg == 0) at->i = 2;
            if (arg == 1) at->ints[3] = 0;
            if (arg == 2) at->ints[0] = at->ints[1] = 2;
        }
    }
    for (size_t i = 0; arg == 4 && i < g->n_initializer; i++)
        if (strcmp(g->initializer[i]->name, "layers.1.shortcut.pads") == 0) {
            int64_t *v = g->initializer[i]->int64_data;
            for (int k = 0; k < 8; k++) v[k] = k == 1 ? 2 : 0;
        }
}

/* The other ways to write a dense layer: tiny-cnn's last Gemm with transB 0 (the weight
 * stored [in, out]), or a MatMul then an Add of the bias; both read as the same layer and
 * weights. */
static void dense_forms(void) {
    char src[512], p[512];
    path_of(src, sizeof src, "tiny-cnn");
    het_net ref;
    CHECK(het_net_read_onnx(&ref, src) == HET_OK, "%s", het_error_msg());
    for (int form = 0; form < 2; form++) {
        size_t n = 0;
        uint8_t *b = slurp(src, &n);
        Onnx__ModelProto *m = b ? onnx__model_proto__unpack(NULL, n, b) : NULL;
        CHECK(m != NULL, "cannot unpack %s", src);
        if (!m) {
            free(b);
            continue;
        }
        Onnx__GraphProto *g = m->graph;
        Onnx__NodeProto *gemm = g->node[g->n_node - 1];
        Onnx__TensorProto *w = NULL;
        for (size_t i = 0; i < g->n_initializer; i++)
            if (strcmp(g->initializer[i]->name, gemm->input[1]) == 0) w = g->initializer[i];
        CHECK(strcmp(gemm->op_type, "Gemm") == 0 && w && w->n_dims == 2, "tiny-cnn's last node");
        if (!w || w->n_dims != 2) break;
        /* the weight transposed to [in, out] */
        size_t O = (size_t)w->dims[0], I = (size_t)w->dims[1];
        float *t = malloc(O * I * sizeof *t), *x = (float *)w->raw_data.data;
        for (size_t o = 0; o < O; o++)
            for (size_t i = 0; i < I; i++) t[i * O + o] = x[o * I + i];
        memcpy(x, t, O * I * sizeof *t);
        free(t);
        w->dims[0] = (int64_t)I, w->dims[1] = (int64_t)O;
        Onnx__NodeProto add = ONNX__NODE_PROTO__INIT, **nodes = NULL, **old_nodes = NULL;
        char *add_in[2], *add_out[1] = {"logits"}, *mm_out = "mm_out";
        char *keep_out = gemm->output[0];
        size_t keep_n = gemm->n_input, keep_attr = gemm->n_attribute;
        char *keep_op = gemm->op_type;
        if (form == 0) {
            for (size_t i = 0; i < gemm->n_attribute; i++)
                if (strcmp(gemm->attribute[i]->name, "transB") == 0) gemm->attribute[i]->i = 0;
        } else { /* MatMul(x, W) -> Add(., bias) */
            gemm->op_type = "MatMul";
            gemm->n_input = 2;
            gemm->n_attribute = 0;
            gemm->output[0] = mm_out;
            add_in[0] = mm_out;
            add_in[1] = gemm->input[2];
            add.name = "bias_add";
            add.op_type = "Add";
            add.n_input = 2;
            add.input = add_in;
            add.n_output = 1;
            add.output = add_out;
            old_nodes = g->node;
            nodes = malloc((g->n_node + 1) * sizeof *nodes);
            memcpy(nodes, g->node, g->n_node * sizeof *nodes);
            nodes[g->n_node] = &add;
            g->node = nodes, g->n_node++;
        }
        size_t k = onnx__model_proto__get_packed_size(m);
        uint8_t *o = malloc(k);
        onnx__model_proto__pack(m, o);
        path_of(p, sizeof p, form ? "matmul-add" : "gemm-transb0");
        write_bytes(p, o, k);
        free(o);
        if (form == 1) { /* give protobuf-c back what it allocated */
            g->n_node--;
            g->node = old_nodes;
            free(nodes);
            gemm->op_type = keep_op, gemm->n_input = keep_n, gemm->n_attribute = keep_attr;
            gemm->output[0] = keep_out;
        }
        onnx__model_proto__free_unpacked(m, NULL);
        free(b);
        het_net imp;
        int st = het_net_read_onnx(&imp, p);
        CHECK(st == HET_OK, "%s: %s", p, het_error_msg());
        if (st != HET_OK) continue;
        CHECK(imp.n == ref.n && imp.layer[imp.n - 1].kind == HET_NL_DENSE &&
                  imp.layer[imp.n - 1].out == 10,
              "%s: %d layers", p, imp.n);
        CHECK(imp.n_params == ref.n_params &&
                  memcmp(imp.params, ref.params, ref.n_params * sizeof(float)) == 0,
              "%s: weights differ from tiny-cnn's", p);
        free(imp.params), free(imp.state);
    }
    free(ref.params), free(ref.state);
}

static void corrupt(void) {
    char good[512], p[512];
    path_of(good, sizeof good, "lenet5");
    size_t n = 0;
    uint8_t *b = slurp(good, &n);
    CHECK(b && n > 1000, "no exported lenet5 at %s", good);
    if (!b) return;
    path_of(p, sizeof p, "truncated");
    write_bytes(p, b, n / 2);
    expect_fail(p, NULL);
    path_of(p, sizeof p, "truncated-end");
    write_bytes(p, b, n - 3);
    expect_fail(p, NULL);
    het_rng r;
    het_rng_seed(&r, 5);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(het_rng_uniform(&r) * 256);
    path_of(p, sizeof p, "garbage");
    write_bytes(p, b, n);
    expect_fail(p, NULL);
    path_of(p, sizeof p, "empty");
    write_bytes(p, b, 0);
    expect_fail(p, NULL);
    /* field 7 (graph), length-delimited, length 2^40 */
    static const uint8_t huge[] = {0x08, 0x08, 0x3a, 0x80, 0x80, 0x80,
                                   0x80, 0x80, 0x20, 0x0a, 0x00};
    path_of(p, sizeof p, "huge-length");
    write_bytes(p, huge, sizeof huge);
    expect_fail(p, NULL);
    path_of(p, sizeof p, "sigmoid");
    write_sigmoid(p);
    expect_fail(p, "node 'squash' (Sigmoid): operator hetrain cannot train");
    path_of(p, sizeof p, "bad-shape");
    mutate(good, p, bad_shape, 0);
    expect_fail(p, "initializer 'layers.0.bias' has shape [5], expected [6]");
    static const char *const want[5] = {
        "node '/layers.0/Conv' (Conv): attribute group = 2: hetrain trains 1",
        "node '/layers.0/Conv' (Conv): attribute pads = [1, 1, 1, 0]",
        "node '/layers.0/Conv' (Conv): attribute dilations = 2: hetrain trains 1",
        "node '/layers.2/Relu' (Add): operator hetrain cannot train outside a residual block",
        "node '/layers.1/Pad' (Pad): pads [0, 2, 0, 0, 0, 0, 0, 0]: hetrain's option A shortcut "
        "pads [0, 1, 0, 0, 0, 1, 0, 0]"};
    for (int k = 0; k < 5; k++) {
        char src[512];
        path_of(src, sizeof src, k < 4 ? "tiny-cnn" : "tiny-res");
        path_of(p, sizeof p, "bad-node");
        mutate(src, p, bad_node, k);
        expect_fail(p, want[k]);
    }
    static const char *const init_want[4] = {
        "initializer 'layers.0.bias' given twice",
        "initializer 'layers.0.bias': element 2 (byte 8 of its data) is NaN, expected finite",
        "initializer 'layers.0.weight': element 7 (byte 28 of its data) is infinite",
        "is also an output of node"};
    for (int k = 0; k < 4; k++) {
        path_of(p, sizeof p, "bad-init");
        mutate(good, p, bad_init, k);
        expect_fail(p, init_want[k]);
    }
    /* the graph's input shape against the data's, before any layer is planned */
    het_net net;
    CHECK(het_net_read_onnx(&net, good) == HET_OK, "%s: %s", good, het_error_msg());
    het_model *m = NULL;
    int st = het_net_build(&m, &net, (het_shape){3, 32, 32}, 10, 8, 1);
    const char *msg = het_error_msg();
    CHECK(st == HET_ESHAPE && strstr(msg, good) &&
              strstr(msg, "the graph's input is 1x28x28 a sample, expected the data's 3x32x32"),
          "lenet5's ONNX on 3x32x32: status %d, '%s'", st, msg);
    het_model_free(m);
    het_net_free(&net);
    path_of(p, sizeof p, "missing");
    unlink(p);
    expect_fail(p, NULL);
    expect_fail(dir, "not a regular file"); /* a directory */
    path_of(p, sizeof p, "too-big");        /* 1 GiB + 1 byte, sparse: refused before reading */
    FILE *f = fopen(p, "wb");
    CHECK(f && ftruncate(fileno(f), ((off_t)1 << 30) + 1) == 0, "cannot make %s", p);
    if (f) fclose(f);
    expect_fail(p, "at most 1073741824 bytes");
    unlink(p);
    free(b);
}

/* The fuzzer's seeds and every input it ever crashed on (fuzz/corpus/onnx/): a read succeeds
 * or fails with a one-line message naming the file. */
static void corpus(void) {
    static const char *const seeds[] = {
        "tiny-cnn", "tiny-res", "torch-tiny-res-preserve", "torch-tiny-res-training",
        "torch-tiny-res-view", "sigmoid", "huge-length", "crash-scalar-constant",
        "crash-reshape-overflow", "crash-nan-to-int"};
    static const int ok[] = {1, 1, 1, 1, 1, 0, 0, -1, -1, -1}; /* 1 reads, 0 fails, -1 either */
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/fuzz/corpus/onnx/%s.onnx", HET_SOURCE_DIR, seeds[i]);
        het_net net;
        int st = het_net_read_onnx(&net, p);
        const char *m = het_error_msg();
        int failed_well = st < 0 && m && strstr(m, p) && !strchr(m, '\n');
        CHECK(ok[i] == 1   ? st == HET_OK
              : ok[i] == 0 ? failed_well
                           : st == HET_OK || failed_well,
              "%s: status %d, message '%s'", p, st, st ? m : "");
        if (st == HET_OK) free(net.params), free(net.state);
    }
}

int main(void) {
    const char *out = getenv("HET_ONNX_OUT");
    char tmpl[] = "/tmp/test_onnx.XXXXXX";
    if (out && *out)
        snprintf(dir, sizeof dir, "%s", out);
    else if (mkdtemp(tmpl))
        snprintf(dir, sizeof dir, "%s", tmpl);
    else
        return fprintf(stderr, "mkdtemp failed\n"), 1;
    roundtrip("mlp", (het_shape){1, 28, 28});
    roundtrip("lenet5", (het_shape){1, 28, 28});
    roundtrip("cifar-cnn", (het_shape){3, 32, 32});
    roundtrip("resnet20", (het_shape){3, 32, 32});
    roundtrip("tiny-cnn", (het_shape){1, 6, 6});
    roundtrip("tiny-res", (het_shape){2, 5, 5});
    dense_forms();
    corpus();
    corrupt();
    if (!(out && *out)) { /* leave nothing behind */
        static const char *const names[] = {
            "mlp",          "lenet5",     "cifar-cnn", "resnet20",      "tiny-cnn", "tiny-res",
            "gemm-transb0", "matmul-add", "truncated", "truncated-end", "garbage",  "empty",
            "huge-length",  "sigmoid",    "bad-shape", "bad-node",      "bad-init"};
        char p[512];
        for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
            path_of(p, sizeof p, names[i]);
            unlink(p);
        }
        rmdir(dir);
    }
    return het_test_finish("test_onnx");
}

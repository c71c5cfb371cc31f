/* ONNX import, part 1 (see onnx_read.c): messages, node inputs and attributes, tensors and
 * their elements (read as protobuf-c unpacked them, every element count checked against the
 * data present), initializers taken as weights, the graph's input and names. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_io/onnx_io.h"

int het_onnx_fail(rd *r, const Onnx__NodeProto *nd, int st, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (nd)
        return het_error_set(st, "%s: node '%.64s' (%.32s): %s", r->path, nd->name ? nd->name : "",
                             nd->op_type ? nd->op_type : "", msg);
    return het_error_set(st, "%s: %s", r->path, msg);
}

const char *het_onnx_in(const Onnx__NodeProto *nd, size_t i) {
    return i < nd->n_input && nd->input[i] && nd->input[i][0] ? nd->input[i] : NULL;
}

const Onnx__AttributeProto *het_onnx_attr(const Onnx__NodeProto *nd, const char *name) {
    for (size_t i = 0; i < nd->n_attribute; i++)
        if (nd->attribute[i]->name && strcmp(nd->attribute[i]->name, name) == 0)
            return nd->attribute[i];
    return NULL;
}

const Onnx__TensorProto *het_onnx_init(const rd *r, const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < r->g->n_initializer; i++)
        if (r->g->initializer[i]->name && strcmp(r->g->initializer[i]->name, name) == 0)
            return r->g->initializer[i];
    for (size_t i = 0; i < r->nk; i++)
        if (r->k[i].alias && strcmp(r->k[i].name, name) == 0) return r->k[i].alias;
    return NULL;
}

/* ---- tensors ---- */

/* Elements of t from its dims (HET_EFORMAT past 2^31). */
int het_onnx_count(rd *r, const Onnx__TensorProto *t, size_t *n) {
    size_t c = 1;
    if (t->n_dims > 8)
        return het_onnx_fail(r, NULL, HET_EFORMAT, "tensor '%.64s' of rank %zu", t->name,
                             t->n_dims);
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || t->dims[i] > ((int64_t)1 << 31) ||
            (c *= (size_t)t->dims[i]) > ((size_t)1 << 31))
            return het_onnx_fail(r, NULL, HET_EFORMAT, "tensor '%.64s': bad dims",
                                 t->name ? t->name : "");
    }
    *n = c;
    return HET_OK;
}

/* Element i of a numeric tensor as a double (float, double, int32, int64, bool); the caller
 * checked the count (het_onnx_data_ok). */
double het_onnx_get(const Onnx__TensorProto *t, size_t i) {
    const uint8_t *raw = t->has_raw_data ? t->raw_data.data : NULL;
    switch (t->data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: {
        float f;
        if (raw)
            memcpy(&f, raw + 4 * i, 4);
        else
            f = t->float_data[i];
        return f;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: {
        double d;
        if (raw)
            memcpy(&d, raw + 8 * i, 8);
        else
            d = t->double_data[i];
        return d;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: {
        int32_t v;
        if (raw)
            memcpy(&v, raw + 4 * i, 4);
        else
            v = t->int32_data[i];
        return v;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return raw ? raw[i] : t->int32_data[i];
    default: { /* INT64 */
        int64_t v;
        if (raw)
            memcpy(&v, raw + 8 * i, 8);
        else
            v = t->int64_data[i];
        return (double)v;
    }
    }
}

/* x as an integer: truncated, clamped to int64's range, NaN as 0. */
int64_t het_onnx_to_i64(double x) {
    if (!(x == x)) return 0;
    if (x <= -9223372036854775808.0) return INT64_MIN;
    if (x >= 9223372036854775808.0) return INT64_MAX;
    return (int64_t)x;
}

int64_t het_onnx_get_i(const Onnx__TensorProto *t, size_t i) {
    if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
        return het_onnx_to_i64(het_onnx_get(t, i));
    int64_t v;
    if (t->has_raw_data)
        memcpy(&v, t->raw_data.data + 8 * i, 8);
    else
        v = t->int64_data[i];
    return v;
}

/* Whether t holds n elements of a type het_onnx_get reads (float when want_float). */
int het_onnx_data_ok(rd *r, const Onnx__TensorProto *t, size_t n, int want_float) {
    size_t sz = 0, have = 0;
    switch (t->data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: sz = 4, have = t->n_float_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: sz = 8, have = t->n_double_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: sz = 4, have = t->n_int32_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: sz = 8, have = t->n_int64_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: sz = 1, have = t->n_int32_data; break;
    default: break;
    }
    const char *nm = t->name ? t->name : "";
    if (!sz || (want_float && t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT))
        return het_onnx_fail(r, NULL, HET_EFORMAT, "tensor '%.64s': data type %d, expected %s", nm,
                             t->data_type, want_float ? "float32 (1)" : "a number");
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return het_onnx_fail(r, NULL, HET_EFORMAT, "tensor '%.64s': external data is not read", nm);
    if (t->has_raw_data ? t->raw_data.len != n * sz : have != n)
        return het_onnx_fail(r, NULL, HET_EFORMAT,
                             "tensor '%.64s': %zu bytes of data for %zu elements", nm,
                             t->has_raw_data ? t->raw_data.len : have * sz, n);
    return HET_OK;
}

/* ---- attributes ---- */

/* Attribute `name` as an int (def when absent); the INTS form must hold n equal values. */
int het_onnx_attr_int(rd *r, const Onnx__NodeProto *nd, const char *name, int n, int64_t def,
                      int64_t *v) {
    const Onnx__AttributeProto *a = het_onnx_attr(nd, name);
    *v = def;
    if (!a) return HET_OK;
    if (n == 0) {
        if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
            return het_onnx_fail(r, nd, HET_EFORMAT, "attribute %s is not an int", name);
        *v = a->i;
        return HET_OK;
    }
    int same = a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS && a->n_ints == (size_t)n;
    for (size_t i = 1; same && i < a->n_ints; i++) same = a->ints[i] == a->ints[0];
    if (!same) {
        char buf[96] = "";
        for (size_t i = 0; i < a->n_ints && i < 8; i++)
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%lld", i ? ", " : "",
                     (long long)a->ints[i]);
        return het_onnx_fail(r, nd, HET_EINVAL,
                             "attribute %s = [%s]: hetrain trains %d equal values "
                             "(square kernels, symmetric padding)",
                             name, buf, n);
    }
    *v = a->ints[0];
    return HET_OK;
}

int het_onnx_attr_float(rd *r, const Onnx__NodeProto *nd, const char *name, float def, float *v) {
    const Onnx__AttributeProto *a = het_onnx_attr(nd, name);
    *v = def;
    if (a && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)
        return het_onnx_fail(r, nd, HET_EFORMAT, "attribute %s is not a float", name);
    if (a) *v = a->f;
    return HET_OK;
}

/* Every attribute of nd must be in the space-separated list known, and auto_pad NOTSET. */
int het_onnx_known_attrs(rd *r, const Onnx__NodeProto *nd, const char *known) {
    for (size_t i = 0; i < nd->n_attribute; i++) {
        const Onnx__AttributeProto *a = nd->attribute[i];
        const char *nm = a->name ? a->name : "", *p = strstr(known, nm);
        size_t l = strlen(nm);
        if (!*nm || !p || (p != known && p[-1] != ' ') || (p[l] && p[l] != ' '))
            return het_onnx_fail(r, nd, HET_EINVAL, "attribute %.32s: hetrain cannot train with it",
                                 nm);
        if (strcmp(nm, "auto_pad") == 0 && !(a->s.len == 6 && memcmp(a->s.data, "NOTSET", 6) == 0))
            return het_onnx_fail(r, nd, HET_EINVAL,
                                 "attribute auto_pad = %.*s: hetrain trains NOTSET "
                                 "(explicit pads) only",
                                 (int)(a->s.len > 16 ? 16 : a->s.len), (const char *)a->s.data);
    }
    return HET_OK;
}

void het_onnx_fmt_dims(char *buf, size_t cap, const int64_t *d, size_t n) {
    buf[0] = 0;
    for (size_t i = 0; i < n && i < 8; i++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%lld", i ? ", " : "", (long long)d[i]);
}

/* ---- weights ---- */

static float *grow(rd *r, int state, size_t n) {
    float **b = state ? &r->state : &r->params;
    size_t *len = state ? &r->ns : &r->np, *cap = state ? &r->cap_s : &r->cap_p;
    if (*len + n > *cap) {
        size_t c = (*len + n) * 2;
        float *p = realloc(*b, c * sizeof *p);
        if (!p) return NULL;
        *b = p, *cap = c;
    }
    *len += n;
    return *b + *len - n;
}

/* Appends input `in` of nd (a float32 initializer of shape dims, rank 1, 2 or 4; transposed
 * when tr, for a [in, out] matrix stored as [out, in]) to the parameters (or the state); an
 * absent input appends zeros when zero_ok. */
int het_onnx_take(rd *r, const Onnx__NodeProto *nd, size_t in, int state, int rank,
                  const int64_t *dims, int tr, int zero_ok) {
    const char *nm = het_onnx_in(nd, in);
    const Onnx__TensorProto *t = het_onnx_init(r, nm);
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    if (!nm && !zero_ok) return het_onnx_fail(r, nd, HET_EFORMAT, "input %zu missing", in);
    if (nm && !t)
        return het_onnx_fail(r, nd, HET_EINVAL,
                             "input '%.64s' is not an initializer: hetrain "
                             "trains weights that the graph holds",
                             nm);
    if (!t) {
        float *z = grow(r, state, n);
        if (!z) return het_onnx_fail(r, NULL, HET_ENOMEM, "out of memory");
        return memset(z, 0, n * sizeof *z), HET_OK;
    }
    int ok = t->n_dims == (size_t)rank;
    for (int i = 0; ok && i < rank; i++) ok = t->dims[tr ? rank - 1 - i : i] == dims[i];
    if (!ok) {
        char want[96], have[96];
        int64_t w[4];
        for (int i = 0; i < rank; i++) w[i] = dims[tr ? rank - 1 - i : i];
        het_onnx_fmt_dims(want, sizeof want, w, (size_t)rank);
        het_onnx_fmt_dims(have, sizeof have, t->dims, t->n_dims);
        return het_onnx_fail(r, nd, HET_ESHAPE, "initializer '%.64s' has shape [%s], expected [%s]",
                             nm, have, want);
    }
    int st = het_onnx_data_ok(r, t, n, 1);
    if (st != HET_OK) return st;
    float *dst = grow(r, state, n); /* after the checks: n matches the data present */
    if (!dst) return het_onnx_fail(r, NULL, HET_ENOMEM, "out of memory");
    if (!tr && t->has_raw_data)
        memcpy(dst, t->raw_data.data, n * sizeof *dst); /* n >= 1: layers have no empty tensor */
    else if (!tr)
        memcpy(dst, t->float_data, n * sizeof *dst);
    else
        for (size_t o = 0; o < (size_t)dims[0]; o++)
            for (size_t i = 0; i < (size_t)dims[1]; i++)
                dst[o * (size_t)dims[1] + i] = (float)het_onnx_get(t, i * (size_t)dims[0] + o);
    /* a NaN or infinity would train as a divergence far from its cause: refused here */
    for (size_t j = 0; j < n; j++)
        if (!isfinite(dst[j])) {
            size_t at = tr ? (j % (size_t)dims[1]) * (size_t)dims[0] + j / (size_t)dims[1] : j;
            return het_onnx_fail(r, nd, HET_EFORMAT, "initializer '%.64s': element %zu (byte "
                                 "%zu of its data) is %s, expected finite weights", nm, at,
                                 at * sizeof(float), isnan(dst[j]) ? "NaN" : "infinite");
        }
    /* BatchNormalization's input 4 is the running variance: batch norm takes its square root */
    for (size_t j = 0; state && in == 4 && j < n; j++)
        if (dst[j] < 0.0f)
            return het_onnx_fail(r, nd, HET_EFORMAT, "initializer '%.64s': element %zu is %g, "
                                 "expected a variance >= 0", nm, j, (double)dst[j]);
    return HET_OK;
}

/* ---- the graph ---- */

/* A name the graph defines: an initializer (node NULL) or an output of a node. */
typedef struct def_name {
    const char *name;
    const Onnx__NodeProto *node;
} def_name;

static int def_cmp(const void *a, const void *b) {
    const def_name *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    return (x->node != NULL) - (y->node != NULL); /* an initializer first */
}

/* Every value is defined once (onnx.checker's rule): no two initializers of one name, no node
 * output that is also an initializer or another node's output. */
int het_onnx_unique_names(rd *r) {
    const Onnx__GraphProto *g = r->g;
    size_t cap = g->n_initializer, n = 0;
    for (size_t i = 0; i < g->n_node; i++) cap += g->node[i]->n_output;
    def_name *d = malloc((cap ? cap : 1) * sizeof *d);
    if (!d) return het_onnx_fail(r, NULL, HET_ENOMEM, "out of memory");
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i]->name && *g->initializer[i]->name)
            d[n++] = (def_name){g->initializer[i]->name, NULL};
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t k = 0; k < g->node[i]->n_output; k++)
            if (g->node[i]->output[k] && *g->node[i]->output[k])
                d[n++] = (def_name){g->node[i]->output[k], g->node[i]};
    qsort(d, n, sizeof *d, def_cmp);
    int e = HET_OK;
    for (size_t i = 1; i < n && !e; i++) {
        if (strcmp(d[i - 1].name, d[i].name) != 0) continue;
        if (!d[i - 1].node && !d[i].node)
            e = het_onnx_fail(r, NULL, HET_EFORMAT, "initializer '%.64s' given twice, expected "
                              "each name once", d[i].name);
        else if (!d[i - 1].node)
            e = het_onnx_fail(r, d[i].node, HET_EFORMAT, "output '%.64s' is also an "
                              "initializer, expected each value defined once", d[i].name);
        else
            e = het_onnx_fail(r, d[i].node, HET_EFORMAT, "output '%.64s' is also an output of "
                              "node '%.64s', expected each value defined once", d[i].name,
                              d[i - 1].node->name ? d[i - 1].node->name : "");
    }
    free(d);
    return e;
}


/* The graph's input (its one input that is no initializer): shape and rank. */
int het_onnx_graph_input(rd *r, const char **name) {
    const Onnx__ValueInfoProto *in = NULL;
    for (size_t i = 0; i < r->g->n_input; i++) {
        const char *nm = r->g->input[i]->name;
        if (!nm || het_onnx_init(r, nm)) continue;
        if (in)
            return het_onnx_fail(r, NULL, HET_EINVAL,
                                 "graph inputs '%.64s' and '%.64s': hetrain reads one", in->name,
                                 nm);
        in = r->g->input[i];
    }
    if (!in) return het_onnx_fail(r, NULL, HET_EFORMAT, "the graph has no input");
    const Onnx__TypeProto *t = in->type;
    const Onnx__TensorShapeProto *s =
        t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && t->tensor_type
            ? t->tensor_type->shape
            : NULL;
    if (!s || t->tensor_type->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
        (s->n_dim != 4 && s->n_dim != 2))
        return het_onnx_fail(r, NULL, HET_EINVAL,
                             "input '%.64s': hetrain reads float32 [N, C, H, W] or [N, F]",
                             in->name);
    int64_t d[4] = {1, 1, 1, 1};
    for (size_t i = 1; i < s->n_dim; i++) {
        if (s->dim[i]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
            s->dim[i]->dim_value < 1 || s->dim[i]->dim_value > 65536)
            return het_onnx_fail(r, NULL, HET_EINVAL, "input '%.64s': dimension %zu is not a size",
                                 in->name, i);
        d[i] = s->dim[i]->dim_value;
    }
    r->sh = (het_shape){(int)d[1], (int)d[2], (int)d[3]};
    if (het_shape_size(r->sh) > ((size_t)1 << 28))
        return het_onnx_fail(r, NULL, HET_EINVAL, "input too large");
    r->rank = (int)s->n_dim;
    *name = in->name;
    return HET_OK;
}

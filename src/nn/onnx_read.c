/* ONNX import (het_net_read_onnx): an ONNX model file into a het_net and its initial weights.
 *
 * DESIGN. The file is unpacked by protobuf-c (code generated from Debian's onnx.proto), so
 * every length in it is checked against the bytes that remain before anything is read.
 * Then:
 *  1. Constants. Constant nodes and the small integer sub-graphs that compute shapes and pads
 *     (torch.onnx.export writes F.pad's pads as Constant, ConstantOfShape, Concat, Reshape,
 *     Slice, Transpose and Cast) are evaluated at once (fold(): at most KT_MAX elements each),
 *     and Identity nodes on initializers become aliases. What stays are the graph's operators.
 *  2. The walk. From the graph's one input that is not an initializer, each value must feed
 *     one operator (a chain of layers), or a residual block: the block's input feeds its first
 *     Conv and its shortcut (the Add itself, identity, or Slice steps s on H and W then Pad of
 *     channels, option A), matched as Conv-BatchNormalization-Relu-Conv-BatchNormalization-
 *     Add-Relu. The walk ends at the graph's output, and every operator must have been on it.
 *     Shapes are followed along (from the input's dims [N, C, H, W] or [N, F]) so that every
 *     initializer's shape is checked against the layer's, and the weights are appended in the
 *     model's flat layout (parameters then state, layer by layer) as they are read.
 * A Flatten directly before a Gemm or MatMul whose node name has the same prefix ("/layers.3/"
 * of "/layers.3/Flatten", "/layers.3/Gemm") is the dense layer's own flattening (onnx_write.c
 * writes one where a dense reads a map): hetrain's dense flattens by itself, so it is no layer.
 * Errors are one line: "FILE: node 'NAME' (OpType): ...". */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hetrain/netfile.h"
#include "onnx/onnx.pb-c.h"

#define ONNX_MAX_BYTES ((size_t)1 << 30) /* larger files are refused (protobuf's limit is 2 GiB) */
#define ONNX_MAX_NODES 16384
#define KT_MAX 4096 /* elements of a folded constant */

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

static int fail(rd *r, const Onnx__NodeProto *nd, int st, const char *fmt, ...) {
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

static const char *opt(const Onnx__NodeProto *nd, size_t i) {
    return i < nd->n_input && nd->input[i] && nd->input[i][0] ? nd->input[i] : NULL;
}

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *nd, const char *name) {
    for (size_t i = 0; i < nd->n_attribute; i++)
        if (nd->attribute[i]->name && strcmp(nd->attribute[i]->name, name) == 0)
            return nd->attribute[i];
    return NULL;
}

static const Onnx__TensorProto *initializer(const rd *r, const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < r->g->n_initializer; i++)
        if (r->g->initializer[i]->name && strcmp(r->g->initializer[i]->name, name) == 0)
            return r->g->initializer[i];
    for (size_t i = 0; i < r->nk; i++)
        if (r->k[i].alias && strcmp(r->k[i].name, name) == 0) return r->k[i].alias;
    return NULL;
}

/* Elements of t from its dims (HET_EFORMAT past 2^31). */
static int t_count(rd *r, const Onnx__TensorProto *t, size_t *n) {
    size_t c = 1;
    if (t->n_dims > 8) return fail(r, NULL, HET_EFORMAT, "tensor '%.64s' of rank %zu", t->name, t->n_dims);
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || t->dims[i] > ((int64_t)1 << 31) || (c *= (size_t)t->dims[i]) > ((size_t)1 << 31))
            return fail(r, NULL, HET_EFORMAT, "tensor '%.64s': bad dims", t->name ? t->name : "");
    }
    *n = c;
    return HET_OK;
}

/* Element i of a numeric tensor as a double (types float, double, int32, int64), or 0 with
 * *ok = 0. The caller checked the count (t_data_ok). */
static double t_get(const Onnx__TensorProto *t, size_t i) {
    const uint8_t *raw = t->has_raw_data ? t->raw_data.data : NULL;
    switch (t->data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: {
        float f;
        if (raw) memcpy(&f, raw + 4 * i, 4);
        else f = t->float_data[i];
        return f;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: {
        double d;
        if (raw) memcpy(&d, raw + 8 * i, 8);
        else d = t->double_data[i];
        return d;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: {
        int32_t v;
        if (raw) memcpy(&v, raw + 4 * i, 4);
        else v = t->int32_data[i];
        return v;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
        return raw ? raw[i] : t->int32_data[i];
    default: { /* INT64 */
        int64_t v;
        if (raw) memcpy(&v, raw + 8 * i, 8);
        else v = t->int64_data[i];
        return (double)v;
    }
    }
}

static int64_t t_get_i(const Onnx__TensorProto *t, size_t i) {
    if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64) return (int64_t)t_get(t, i);
    int64_t v;
    if (t->has_raw_data) memcpy(&v, t->raw_data.data + 8 * i, 8);
    else v = t->int64_data[i];
    return v;
}

/* Whether t holds n elements of a type t_get reads (float when want_float). */
static int t_data_ok(rd *r, const Onnx__TensorProto *t, size_t n, int want_float) {
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
        return fail(r, NULL, HET_EFORMAT, "tensor '%.64s': data type %d, expected %s", nm,
                    t->data_type, want_float ? "float32 (1)" : "a number");
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return fail(r, NULL, HET_EFORMAT, "tensor '%.64s': external data is not read", nm);
    if (t->has_raw_data ? t->raw_data.len != n * sz : have != n)
        return fail(r, NULL, HET_EFORMAT, "tensor '%.64s': %zu bytes of data for %zu elements", nm,
                    t->has_raw_data ? t->raw_data.len : have * sz, n);
    return HET_OK;
}

static kt *find_k(rd *r, const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < r->nk; i++)
        if (!r->k[i].alias && strcmp(r->k[i].name, name) == 0) return &r->k[i];
    return NULL;
}

/* A new constant of n elements named name (room for it is there: one per node at most). */
static kt *new_k(rd *r, const char *name, int rank, const int64_t *dims, size_t n) {
    if (r->nk >= r->cap_k) return NULL;
    kt *k = &r->k[r->nk];
    memset(k, 0, sizeof *k);
    k->iv = calloc(n ? n : 1, sizeof *k->iv);
    k->fv = calloc(n ? n : 1, sizeof *k->fv);
    if (!k->iv || !k->fv) {
        free(k->iv);
        free(k->fv);
        return NULL;
    }
    r->nk++;
    k->name = name;
    k->rank = rank;
    memcpy(k->dims, dims, (size_t)rank * sizeof *dims);
    k->n = n;
    return k;
}

/* The constant `name`: folded, or a numeric initializer of at most KT_MAX elements and rank
 * <= 4 (made a constant on first use); NULL otherwise. */
static kt *konst(rd *r, const char *name) {
    kt *k = find_k(r, name);
    if (k || !name) return k;
    const Onnx__TensorProto *t = NULL;
    for (size_t i = 0; i < r->g->n_initializer && !t; i++)
        if (r->g->initializer[i]->name && strcmp(r->g->initializer[i]->name, name) == 0)
            t = r->g->initializer[i];
    size_t n = 0;
    if (!t || t->n_dims > 4 || t_count(r, t, &n) != HET_OK || n > KT_MAX ||
        t_data_ok(r, t, n, 0) != HET_OK)
        return NULL;
    k = new_k(r, name, (int)t->n_dims, t->dims, n);
    for (size_t i = 0; k && i < n; i++) k->fv[i] = t_get(t, i), k->iv[i] = t_get_i(t, i);
    return k;
}


/* ---- 1. constants ---- */

static void strides_of(const kt *k, size_t *st) {
    size_t s = 1;
    for (int i = k->rank - 1; i >= 0; i--) st[i] = s, s *= (size_t)k->dims[i];
}

/* The output of a foldable node nd (all its inputs constants): HET_OK with *out set, or
 * *out NULL when nd is not foldable (an operator the walk reads); errors for bad constants. */
static int fold_node(rd *r, const Onnx__NodeProto *nd, kt **out) {
    const char *op = nd->op_type;
    *out = NULL;
    if (nd->n_output < 1 || !nd->output[0] || !op) return HET_OK;
    const char *o = nd->output[0];
    kt *a = NULL;
    if (strcmp(op, "Constant") == 0) {
        const Onnx__AttributeProto *v = nd->n_attribute == 1 ? nd->attribute[0] : NULL;
        if (!v || !v->name) return fail(r, nd, HET_EFORMAT, "a Constant needs one attribute");
        size_t n = 0;
        if (strcmp(v->name, "value") == 0 && v->t) {
            if (v->t->n_dims > 4 || t_count(r, v->t, &n) || n > KT_MAX || t_data_ok(r, v->t, n, 0))
                return fail(r, nd, HET_EFORMAT, "value: not a small numeric tensor");
            if (!(*out = new_k(r, o, (int)v->t->n_dims, v->t->dims, n))) return HET_ENOMEM;
            for (size_t i = 0; i < n; i++) (*out)->fv[i] = t_get(v->t, i), (*out)->iv[i] = t_get_i(v->t, i);
            return HET_OK;
        }
        int ints = strcmp(v->name, "value_ints") == 0, flts = strcmp(v->name, "value_floats") == 0;
        int one = strcmp(v->name, "value_int") == 0 || strcmp(v->name, "value_float") == 0;
        n = ints ? v->n_ints : flts ? v->n_floats : 1;
        if ((!ints && !flts && !one) || n > KT_MAX)
            return fail(r, nd, HET_EINVAL, "attribute %.32s: hetrain reads value, value_int(s), value_float(s)", v->name);
        int64_t d = (int64_t)n;
        if (!(*out = new_k(r, o, one ? 0 : 1, &d, n))) return HET_ENOMEM;
        for (size_t i = 0; i < n; i++) {
            double x = ints ? (double)v->ints[i] : flts ? v->floats[i] : v->name[6] == 'i' ? (double)v->i : v->f;
            (*out)->fv[i] = x;
            (*out)->iv[i] = ints ? v->ints[i] : v->name[6] == 'i' && one ? v->i : (int64_t)x;
        }
        return HET_OK;
    }
    if (nd->n_input < 1 || !(a = find_k(r, opt(nd, 0)))) {
        if (strcmp(op, "Identity") == 0 && nd->n_input == 1) { /* an initializer's alias */
            const Onnx__TensorProto *t = initializer(r, opt(nd, 0));
            if (t && r->nk < r->cap_k) {
                kt *k = &r->k[r->nk++];
                memset(k, 0, sizeof *k);
                k->name = o;
                k->alias = t;
                *out = k;
            }
        }
        return HET_OK;
    }
    for (size_t i = 1; i < nd->n_input; i++)
        if (opt(nd, i) && !konst(r, opt(nd, i))) return HET_OK;
    if (strcmp(op, "Identity") == 0 || strcmp(op, "Cast") == 0) {
        if (!(*out = new_k(r, o, a->rank, a->dims, a->n))) return HET_ENOMEM;
        const Onnx__AttributeProto *to = attr(nd, "to");
        int toint = to && to->i != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT &&
                    to->i != ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
        for (size_t i = 0; i < a->n; i++)
            (*out)->iv[i] = a->iv[i], (*out)->fv[i] = toint ? (double)a->iv[i] : a->fv[i];
        return HET_OK;
    }
    if (strcmp(op, "ConstantOfShape") == 0) {
        size_t n = 1;
        int64_t d[4];
        if (a->rank != 1 || a->n > 4) return fail(r, nd, HET_EINVAL, "shape of rank %d", a->rank);
        for (size_t i = 0; i < a->n; i++) {
            if (a->iv[i] < 0 || (n *= (size_t)(d[i] = a->iv[i])) > KT_MAX)
                return fail(r, nd, HET_EINVAL, "a constant of more than %d elements", KT_MAX);
        }
        const Onnx__AttributeProto *v = attr(nd, "value");
        size_t vn = 0;
        double x = 0;
        int64_t xi = 0;
        if (v && v->t) {
            if (t_count(r, v->t, &vn) || vn != 1 || t_data_ok(r, v->t, 1, 0))
                return fail(r, nd, HET_EFORMAT, "value: not one number");
            x = t_get(v->t, 0), xi = t_get_i(v->t, 0);
        }
        if (!(*out = new_k(r, o, (int)a->n, d, n))) return HET_ENOMEM;
        for (size_t i = 0; i < n; i++) (*out)->fv[i] = x, (*out)->iv[i] = xi;
        return HET_OK;
    }
    if (strcmp(op, "Concat") == 0) {
        size_t n = 0;
        for (size_t i = 0; i < nd->n_input; i++) {
            kt *b = konst(r, opt(nd, i));
            if (!b || b->rank != 1) return fail(r, nd, HET_EINVAL, "hetrain folds Concat of 1-D constants only");
            n += b->n;
        }
        if (n > KT_MAX) return fail(r, nd, HET_EINVAL, "a constant of more than %d elements", KT_MAX);
        int64_t d = (int64_t)n;
        if (!(*out = new_k(r, o, 1, &d, n))) return HET_ENOMEM;
        size_t j = 0;
        for (size_t i = 0; i < nd->n_input; i++) {
            kt *b = konst(r, opt(nd, i));
            memcpy((*out)->iv + j, b->iv, b->n * sizeof *b->iv);
            memcpy((*out)->fv + j, b->fv, b->n * sizeof *b->fv);
            j += b->n;
        }
        return HET_OK;
    }
    if (strcmp(op, "Reshape") == 0) {
        kt *s = konst(r, opt(nd, 1));
        int64_t d[4], known = 1;
        int neg = -1;
        if (!s || s->rank != 1 || s->n > 4) return fail(r, nd, HET_EINVAL, "shape: not a 1-D constant of rank <= 4");
        for (size_t i = 0; i < s->n; i++) {
            d[i] = s->iv[i] == 0 && (int)i < a->rank ? a->dims[i] : s->iv[i];
            if (d[i] == -1 && neg < 0) neg = (int)i;
            else if (d[i] < 1) return fail(r, nd, HET_EINVAL, "shape: bad dimension %lld", (long long)d[i]);
            else known *= d[i];
        }
        if (neg >= 0) d[neg] = (int64_t)a->n / known;
        if ((neg >= 0 ? known * d[neg] : known) != (int64_t)a->n)
            return fail(r, nd, HET_EINVAL, "shape: %zu elements do not fit", a->n);
        if (!(*out = new_k(r, o, (int)s->n, d, a->n))) return HET_ENOMEM;
        memcpy((*out)->iv, a->iv, a->n * sizeof *a->iv);
        memcpy((*out)->fv, a->fv, a->n * sizeof *a->fv);
        return HET_OK;
    }
    int tr = strcmp(op, "Transpose") == 0, sl = strcmp(op, "Slice") == 0;
    if (!tr && !sl) return HET_OK;
    /* both map each output element to an input element: index arithmetic over rank <= 4 */
    int64_t beg[4] = {0}, step[4] = {1, 1, 1, 1}, d[4];
    int perm[4] = {0, 1, 2, 3};
    size_t ist[4], n = 1;
    strides_of(a, ist);
    if (a->rank < 1) return fail(r, nd, HET_EINVAL, "a scalar");
    for (int i = 0; i < a->rank; i++) d[i] = a->dims[i];
    if (tr) {
        const Onnx__AttributeProto *p = attr(nd, "perm");
        if (p && p->n_ints != (size_t)a->rank) return fail(r, nd, HET_EINVAL, "perm of %zu axes", p->n_ints);
        int seen = 0;
        for (int i = 0; i < a->rank; i++) {
            int64_t v = p ? p->ints[i] : a->rank - 1 - i;
            if (v < 0 || v >= a->rank || (seen & (1 << v))) return fail(r, nd, HET_EINVAL, "bad perm");
            seen |= 1 << v;
            perm[i] = (int)v;
            d[i] = a->dims[v];
        }
    } else {
        kt *st = konst(r, opt(nd, 1)), *en = konst(r, opt(nd, 2)), *ax = konst(r, opt(nd, 3)),
           *sp = konst(r, opt(nd, 4));
        if (!st || !en || st->n != en->n || (ax && ax->n != st->n) || (sp && sp->n != st->n))
            return fail(r, nd, HET_EINVAL, "starts, ends, axes and steps of different lengths");
        for (size_t i = 0; i < st->n; i++) {
            int64_t x = ax ? ax->iv[i] : (int64_t)i, s = sp ? sp->iv[i] : 1;
            if (x < 0) x += a->rank;
            if (x < 0 || x >= a->rank || s == 0 || s == INT64_MIN)
                return fail(r, nd, HET_EINVAL, "bad axis or step");
            int64_t D = a->dims[x], b = st->iv[i], e = en->iv[i];
            b = b < 0 ? b + D : b, e = e < 0 ? (e < -D ? -1 : e + D) : e;
            if (s > 0) b = b < 0 ? 0 : b > D ? D : b, e = e < 0 ? 0 : e > D ? D : e;
            else b = b < 0 ? 0 : b > D - 1 ? D - 1 : b, e = e < -1 ? -1 : e > D - 1 ? D - 1 : e;
            beg[x] = b, step[x] = s;
            d[x] = s > 0 ? (e > b ? (e - b - 1) / s + 1 : 0) : (b > e ? (b - e - 1) / -s + 1 : 0);
        }
    }
    for (int i = 0; i < a->rank; i++) n *= (size_t)d[i];
    if (!(*out = new_k(r, o, a->rank, d, n))) return HET_ENOMEM;
    for (size_t j = 0; j < n; j++) {
        size_t rem = j, src = 0;
        for (int i = a->rank - 1; i >= 0; i--) {
            int64_t idx = (int64_t)(rem % (size_t)d[i]);
            rem /= (size_t)d[i];
            src += tr ? (size_t)idx * ist[perm[i]] : (size_t)(beg[i] + idx * step[i]) * ist[i];
        }
        (*out)->iv[j] = a->iv[src], (*out)->fv[j] = a->fv[src];
    }
    return HET_OK;
}

/* Folds every constant node, in order (ONNX lists nodes in topological order). */
static int fold(rd *r) {
    for (size_t i = 0; i < r->g->n_node; i++) {
        kt *k;
        int st = fold_node(r, r->g->node[i], &k);
        if (st == HET_ENOMEM) return fail(r, NULL, st, "out of memory");
        if (st != HET_OK) return st;
        if (k) r->used[i] = 1;
    }
    return HET_OK;
}

/* ---- 2. the walk ---- */

/* How many operators not yet taken read value v; the first cap of them into idx. */
static int consumers(rd *r, const char *v, size_t *idx, int cap) {
    int c = 0;
    for (size_t i = 0; i < r->g->n_node; i++) {
        const Onnx__NodeProto *nd = r->g->node[i];
        if (r->used[i]) continue;
        for (size_t j = 0; j < nd->n_input; j++)
            if (nd->input[j] && strcmp(nd->input[j], v) == 0) {
                if (c < cap) idx[c] = i;
                c++;
                break;
            }
    }
    return c;
}

static int is_op(const Onnx__NodeProto *nd, const char *op) {
    return nd && nd->op_type && strcmp(nd->op_type, op) == 0;
}

/* The one operator that reads v (taken), or NULL when none or several do. */
static Onnx__NodeProto *sole(rd *r, const char *v) {
    size_t i;
    if (!v || consumers(r, v, &i, 1) != 1) return NULL;
    Onnx__NodeProto *nd = r->g->node[i];
    if (strcmp(nd->input[0], v) != 0 && !is_op(nd, "Add")) return NULL; /* v is no weight */
    r->used[i] = 1;
    return nd;
}

/* nd's outputs after the first must be unused (Dropout's mask, MaxPool's indices, ...). */
static int extra_outputs_unused(rd *r, const Onnx__NodeProto *nd) {
    size_t i;
    for (size_t o = 1; o < nd->n_output; o++)
        if (nd->output[o] && nd->output[o][0] && consumers(r, nd->output[o], &i, 1))
            return fail(r, nd, HET_EINVAL, "output %zu is used: hetrain computes the first only", o);
    return nd->n_output >= 1 && nd->output[0] ? HET_OK : fail(r, nd, HET_EFORMAT, "no output");
}

/* Attribute `name` as an int (def when absent); the INTS form must hold n equal values. */
static int a_int(rd *r, const Onnx__NodeProto *nd, const char *name, int n, int64_t def, int64_t *v) {
    const Onnx__AttributeProto *a = attr(nd, name);
    *v = def;
    if (!a) return HET_OK;
    if (n == 0) {
        if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
            return fail(r, nd, HET_EFORMAT, "attribute %s is not an int", name);
        *v = a->i;
        return HET_OK;
    }
    int same = a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS && a->n_ints == (size_t)n;
    for (size_t i = 1; same && i < a->n_ints; i++) same = a->ints[i] == a->ints[0];
    if (!same) {
        char buf[96] = "";
        for (size_t i = 0; i < a->n_ints && i < 8; i++)
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%lld", i ? ", " : "", (long long)a->ints[i]);
        return fail(r, nd, HET_EINVAL, "attribute %s = [%s]: hetrain trains %d equal values "
                    "(square kernels, symmetric padding)", name, buf, n);
    }
    *v = a->ints[0];
    return HET_OK;
}

static int a_float(rd *r, const Onnx__NodeProto *nd, const char *name, float def, float *v) {
    const Onnx__AttributeProto *a = attr(nd, name);
    *v = def;
    if (a && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)
        return fail(r, nd, HET_EFORMAT, "attribute %s is not a float", name);
    if (a) *v = a->f;
    return HET_OK;
}

/* Every attribute of nd must be in the space-separated list known, and auto_pad NOTSET. */
static int known_attrs(rd *r, const Onnx__NodeProto *nd, const char *known) {
    for (size_t i = 0; i < nd->n_attribute; i++) {
        const Onnx__AttributeProto *a = nd->attribute[i];
        const char *nm = a->name ? a->name : "", *p = strstr(known, nm);
        size_t l = strlen(nm);
        if (!*nm || !p || (p != known && p[-1] != ' ') || (p[l] && p[l] != ' '))
            return fail(r, nd, HET_EINVAL, "attribute %.32s: hetrain cannot train with it", nm);
        if (strcmp(nm, "auto_pad") == 0 &&
            !(a->s.len == 6 && memcmp(a->s.data, "NOTSET", 6) == 0))
            return fail(r, nd, HET_EINVAL, "attribute auto_pad = %.*s: hetrain trains NOTSET "
                        "(explicit pads) only", (int)(a->s.len > 16 ? 16 : a->s.len), (const char *)a->s.data);
    }
    return HET_OK;
}

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

static void fmt_dims(char *buf, size_t cap, const int64_t *d, size_t n) {
    buf[0] = 0;
    for (size_t i = 0; i < n && i < 8; i++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%lld", i ? ", " : "", (long long)d[i]);
}

/* Appends input `in` of nd (a float32 initializer of shape dims, rank 1, 2 or 4; transposed
 * when tr, for a [in, out] matrix stored as [out, in]) to the parameters (or the state); an
 * absent input appends zeros when zero_ok. */
static int take(rd *r, const Onnx__NodeProto *nd, size_t in, int state, int rank,
                const int64_t *dims, int tr, int zero_ok) {
    const char *nm = opt(nd, in);
    const Onnx__TensorProto *t = initializer(r, nm);
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    if (!nm && !zero_ok) return fail(r, nd, HET_EFORMAT, "input %zu missing", in);
    if (nm && !t) return fail(r, nd, HET_EINVAL, "input '%.64s' is not an initializer: hetrain "
                              "trains weights that the graph holds", nm);
    float *dst = grow(r, state, n);
    if (!dst) return fail(r, NULL, HET_ENOMEM, "out of memory");
    if (!t) return memset(dst, 0, n * sizeof *dst), HET_OK;
    int ok = t->n_dims == (size_t)rank;
    for (int i = 0; ok && i < rank; i++) ok = t->dims[tr ? rank - 1 - i : i] == dims[i];
    if (!ok) {
        char want[96], have[96];
        int64_t w[4];
        for (int i = 0; i < rank; i++) w[i] = dims[tr ? rank - 1 - i : i];
        fmt_dims(want, sizeof want, w, (size_t)rank);
        fmt_dims(have, sizeof have, t->dims, t->n_dims);
        return fail(r, nd, HET_ESHAPE, "initializer '%.64s' has shape [%s], expected [%s]", nm, have, want);
    }
    int st = t_data_ok(r, t, n, 1);
    if (st != HET_OK) return st;
    if (!tr && t->has_raw_data) memcpy(dst, t->raw_data.data, n * sizeof *dst);
    else if (!tr) memcpy(dst, t->float_data, n * sizeof *dst);
    else
        for (size_t o = 0; o < (size_t)dims[0]; o++)
            for (size_t i = 0; i < (size_t)dims[1]; i++)
                dst[o * (size_t)dims[1] + i] = (float)t_get(t, i * (size_t)dims[0] + o);
    return HET_OK;
}

static het_net_layer *add_layer(rd *r, const Onnx__NodeProto *nd, het_net_kind kind) {
    if (r->net->n >= HET_NET_MAX_LAYERS) {
        fail(r, nd, HET_EINVAL, "more than %d layers", HET_NET_MAX_LAYERS);
        return NULL;
    }
    het_net_layer *L = &r->net->layer[r->net->n++];
    memset(L, 0, sizeof *L);
    L->kind = kind;
    snprintf(L->node, sizeof L->node, "%s", nd->name ? nd->name : "");
    return L;
}

/* A Conv's arguments (weights not taken); the shape moves on to its output. */
static int conv_args(rd *r, const Onnx__NodeProto *nd, int *oc, int *k, int *s, int *p) {
    const Onnx__TensorProto *w = initializer(r, opt(nd, 1));
    int64_t ks, st, pd, dil, grp;
    int e = known_attrs(r, nd, "kernel_shape strides pads dilations group auto_pad");
    if (e) return e;
    if (r->rank != 4) return fail(r, nd, HET_ESHAPE, "a convolution of a flat value");
    if (!w || w->n_dims != 4 || w->dims[2] != w->dims[3] || w->dims[0] < 1 ||
        w->dims[0] > 65536 || w->dims[2] < 1 || w->dims[2] > 64)
        return fail(r, nd, HET_ESHAPE, "weight '%.64s': not an initializer of [out, %d, k, k]",
                    opt(nd, 1) ? opt(nd, 1) : "", r->sh.c);
    if ((e = a_int(r, nd, "kernel_shape", 2, w->dims[2], &ks)) || (e = a_int(r, nd, "strides", 2, 1, &st)) ||
        (e = a_int(r, nd, "pads", 4, 0, &pd)) || (e = a_int(r, nd, "dilations", 2, 1, &dil)) ||
        (e = a_int(r, nd, "group", 0, 1, &grp)))
        return e;
    if (ks != w->dims[2]) return fail(r, nd, HET_ESHAPE, "kernel_shape %lld, weight's %lld", (long long)ks, (long long)w->dims[2]);
    if (dil != 1) return fail(r, nd, HET_EINVAL, "attribute dilations = %lld: hetrain trains 1", (long long)dil);
    if (grp != 1) return fail(r, nd, HET_EINVAL, "attribute group = %lld: hetrain trains 1", (long long)grp);
    if (st < 1 || st > 64 || pd < 0 || pd > 64) return fail(r, nd, HET_EINVAL, "stride %lld, pad %lld", (long long)st, (long long)pd);
    int64_t oh = (r->sh.h + 2 * pd - ks) / st + 1, ow = (r->sh.w + 2 * pd - ks) / st + 1;
    if (r->sh.h + 2 * pd < ks || r->sh.w + 2 * pd < ks) return fail(r, nd, HET_ESHAPE, "kernel larger than the input");
    *oc = (int)w->dims[0], *k = (int)ks, *s = (int)st, *p = (int)pd;
    r->sh = (het_shape){*oc, (int)oh, (int)ow};
    return HET_OK;
}

/* A BatchNormalization over the current value: its eps and (hetrain's) momentum; parameters
 * and state appended when take_now (a batchnorm layer) or left to the caller. */
static int bn_args(rd *r, const Onnx__NodeProto *nd, float *eps, float *mom) {
    int e = known_attrs(r, nd, "epsilon momentum spatial training_mode");
    float m;
    if (e || (e = a_float(r, nd, "epsilon", 1e-5f, eps)) || (e = a_float(r, nd, "momentum", 0.9f, &m)))
        return e;
    if (nd->n_input != 5) return fail(r, nd, HET_EFORMAT, "%zu inputs, expected 5", nd->n_input);
    if (!(m >= 0.0f && m <= 1.0f) || !(*eps > 0.0f) || !isfinite(*eps))
        return fail(r, nd, HET_EINVAL, "momentum %g, epsilon %g", (double)m, (double)*eps);
    char buf[32];
    snprintf(buf, sizeof buf, "%.6g", 1.0 - (double)m);
    *mom = strtof(buf, NULL);
    return extra_outputs_unused(r, nd);
}

static int bn_take(rd *r, const Onnx__NodeProto *nd, int part) {
    int64_t C = r->sh.c;
    int e = HET_OK;
    for (int i = 0; i < 2 && !e; i++) e = take(r, nd, (size_t)(part ? 3 + i : 1 + i), part, 1, &C, 0, 0);
    return e;
}

/* Whether a and b share a non-empty name prefix up to their last '/' ("/layers.3/"). */
static int same_prefix(const char *a, const char *b) {
    const char *sa = a ? strrchr(a, '/') : NULL, *sb = b ? strrchr(b, '/') : NULL;
    return sa && sb && sa > a && sa - a == sb - b && memcmp(a, b, (size_t)(sa - a)) == 0;
}

/* The shortcut of a residual block from x, starting at node sc (a Slice or a Pad; the Add is
 * the identity): steps s on H and W, then zero channels as option A; *out its value. */
static int shortcut(rd *r, Onnx__NodeProto *sc, const char *x, het_shape in, int oc, int s,
                    const char **out) {
    int64_t step[4] = {1, 1, 1, 1}, D[4] = {0, in.c, in.h, in.w};
    const char *v = x;
    while (is_op(sc, "Slice")) {
        kt *st = konst(r, opt(sc, 1)), *en = konst(r, opt(sc, 2)), *ax = konst(r, opt(sc, 3)),
           *sp = konst(r, opt(sc, 4));
        if (strcmp(sc->input[0], v) != 0 || !st || !en || st->n != en->n ||
            (ax && ax->n != st->n) || (sp && sp->n != st->n) || sc->n_attribute)
            return fail(r, sc, HET_EINVAL, "a residual shortcut's Slice needs constant starts, ends, axes, steps");
        for (size_t i = 0; i < st->n; i++) {
            int64_t a = ax ? ax->iv[i] : (int64_t)i, stp = sp ? sp->iv[i] : 1;
            a += a < 0 ? 4 : 0;
            if (a < 0 || a > 3 || st->iv[i] != 0 || (a > 0 && en->iv[i] < D[a]) ||
                stp < 1 || stp > 64 || (a < 2 && stp != 1))
                return fail(r, sc, HET_EINVAL, "a residual shortcut slices x[:, :, ::s, ::s] only");
            step[a] *= stp;
        }
        v = sc->output[0];
        sc = sole(r, v);
    }
    if (!is_op(sc, "Pad") || strcmp(sc->input[0], v) != 0 || step[2] != s || step[3] != s)
        return fail(r, sc, HET_EINVAL, "a residual shortcut of stride %d must be x[:, :, ::%d, ::%d] "
                    "then a Pad of channels", s, s, s);
    const Onnx__AttributeProto *mode = attr(sc, "mode");
    kt *pads = konst(r, opt(sc, 1)), *cv = opt(sc, 2) ? konst(r, opt(sc, 2)) : NULL;
    int64_t before = (oc - in.c) / 2;
    int64_t want[8] = {0, before, 0, 0, 0, oc - in.c - before, 0, 0};
    int e = known_attrs(r, sc, "mode");
    if (e) return e;
    if (mode && !(mode->s.len == 8 && memcmp(mode->s.data, "constant", 8) == 0))
        return fail(r, sc, HET_EINVAL, "attribute mode: hetrain pads with zeros (constant)");
    if ((opt(sc, 2) && (!cv || cv->n != 1 || cv->fv[0] != 0)) || sc->n_input > 3)
        return fail(r, sc, HET_EINVAL, "a residual shortcut pads with zeros");
    if (!pads || pads->n != 8 || memcmp(pads->iv, want, sizeof want) != 0) {
        char have[96] = "?", w[96];
        if (pads) fmt_dims(have, sizeof have, pads->iv, pads->n);
        fmt_dims(w, sizeof w, want, 8);
        return fail(r, sc, HET_EINVAL, "pads [%s]: hetrain's option A shortcut pads [%s]", have, w);
    }
    *out = sc->output[0];
    return HET_OK;
}

/* A residual block from value x, which feeds cand[0] and cand[1]; *cur moves to its output. */
static int resblock(rd *r, const size_t *cand, const char **cur) {
    size_t i1 = cand[0], i2 = cand[1];
    if (!is_op(r->g->node[i1], "Conv")) i1 = cand[1], i2 = cand[0];
    Onnx__NodeProto *c1 = r->g->node[i1], *other = r->g->node[i2];
    if (!is_op(c1, "Conv") || !(is_op(other, "Add") || is_op(other, "Slice") || is_op(other, "Pad")))
        return fail(r, r->g->node[cand[0]], HET_EINVAL, "value '%.64s' feeds two operators: hetrain "
                    "reads a chain of layers and residual blocks (Conv-BatchNormalization-Relu-Conv-"
                    "BatchNormalization-Add-Relu)", *cur);
    const char *x = *cur;
    het_shape in = r->sh;
    int oc, k, s, p, oc2, k2, s2, p2, e;
    float eps[2], mom[2];
    r->used[i1] = 1;
    if ((e = conv_args(r, c1, &oc, &k, &s, &p))) return e;
    if (opt(c1, 2))
        return fail(r, c1, HET_EINVAL, "a residual block's Conv has a bias: batch norm folded "
                    "into it? (torch.onnx.export in eval mode does that; export with "
                    "training=torch.onnx.TrainingMode.PRESERVE)");
    if (k != 3 || p != 1 || oc < in.c)
        return fail(r, c1, HET_EINVAL, "a residual block's first Conv must be 3x3, pad 1, "
                    "widening or keeping the channels");
    Onnx__NodeProto *b1 = sole(r, c1->output[0]), *r1 = b1 ? sole(r, b1->output[0]) : NULL;
    Onnx__NodeProto *c2 = r1 ? sole(r, r1->output[0]) : NULL;
    if (!is_op(b1, "BatchNormalization") || !is_op(r1, "Relu") || !is_op(c2, "Conv"))
        return fail(r, c1, HET_EINVAL, "a residual block continues BatchNormalization-Relu-Conv");
    if ((e = bn_args(r, b1, &eps[0], &mom[0])) || (e = conv_args(r, c2, &oc2, &k2, &s2, &p2)))
        return e;
    if (k2 != 3 || p2 != 1 || s2 != 1 || opt(c2, 2) || oc2 != oc)
        return fail(r, c2, HET_EINVAL, "a residual block's second Conv must be 3x3, stride 1, pad 1, "
                    "without bias, %d channels", oc);
    Onnx__NodeProto *b2 = sole(r, c2->output[0]), *add = b2 ? sole(r, b2->output[0]) : NULL;
    if (!is_op(b2, "BatchNormalization") || !is_op(add, "Add") || add->n_input != 2)
        return fail(r, c2, HET_EINVAL, "a residual block continues BatchNormalization-Add");
    if ((e = bn_args(r, b2, &eps[1], &mom[1]))) return e;
    for (int i = 0; i < 2; i++)
        if (eps[i] != 1e-5f || mom[i] != 0.1f)
            return fail(r, i ? b2 : b1, HET_EINVAL, "epsilon %g, momentum %g: hetrain's residual "
                        "block has 1e-05 and 0.9 (PyTorch's defaults)", (double)eps[i], 1.0 - mom[i]);
    const char *sc = x, *y = b2->output[0];
    if (other != add) {
        r->used[i2] = 1;
        if ((e = shortcut(r, other, x, in, oc, s, &sc))) return e;
    } else if (s != 1 || oc != in.c) {
        return fail(r, add, HET_EINVAL, "an identity shortcut with stride %d, %d -> %d channels", s, in.c, oc);
    }
    if (!((strcmp(add->input[0], y) == 0 && strcmp(add->input[1], sc) == 0) ||
          (strcmp(add->input[1], y) == 0 && strcmp(add->input[0], sc) == 0)))
        return fail(r, add, HET_EINVAL, "a residual block adds its second BatchNormalization and its shortcut");
    Onnx__NodeProto *r2 = add->n_output == 1 ? sole(r, add->output[0]) : NULL;
    if (!is_op(r2, "Relu")) return fail(r, add, HET_EINVAL, "a residual block ends with a Relu");
    het_net_layer *L = add_layer(r, c1, HET_NL_RESBLOCK);
    if (!L) return HET_EINVAL;
    L->out = oc, L->stride = s, L->k = 3, L->pad = 1;
    L->momentum = 0.1f, L->eps = 1e-5f;
    int64_t w1[4] = {oc, in.c, 3, 3}, w2[4] = {oc, oc, 3, 3};
    if ((e = take(r, c1, 1, 0, 4, w1, 0, 0)) || (e = bn_take(r, b1, 0)) ||
        (e = take(r, c2, 1, 0, 4, w2, 0, 0)) || (e = bn_take(r, b2, 0)) || (e = bn_take(r, b1, 1)) ||
        (e = bn_take(r, b2, 1)))
        return e;
    *cur = r2->output[0];
    return HET_OK;
}

/* Pool attributes: square kernel (k 0 for global), stride, no padding. */
static int pool(rd *r, const Onnx__NodeProto *nd, het_net_kind kind, int global) {
    int64_t k = 0, s = 0, pd, dil, ceil;
    int e = known_attrs(r, nd, global ? "" : "kernel_shape strides pads dilations ceil_mode "
                        "auto_pad storage_order count_include_pad");
    if (e || (!global && ((e = a_int(r, nd, "kernel_shape", 2, 0, &k)) || (e = a_int(r, nd, "strides", 2, 1, &s)) ||
                          (e = a_int(r, nd, "pads", 4, 0, &pd)) || (e = a_int(r, nd, "dilations", 2, 1, &dil)) ||
                          (e = a_int(r, nd, "ceil_mode", 0, 0, &ceil)))))
        return e;
    if (r->rank != 4) return fail(r, nd, HET_ESHAPE, "pooling a flat value");
    if (!global && (pd != 0 || dil != 1 || ceil != 0))
        return fail(r, nd, HET_EINVAL, "pads %lld, dilations %lld, ceil_mode %lld: hetrain pools "
                    "without padding, dilation or ceil mode", (long long)pd, (long long)dil, (long long)ceil);
    if (!global && (k < 1 || k > r->sh.h || k > r->sh.w || s < 1 || s > 64))
        return fail(r, nd, HET_ESHAPE, "kernel %lld, stride %lld on %dx%d", (long long)k, (long long)s, r->sh.h, r->sh.w);
    het_net_layer *L = add_layer(r, nd, kind);
    if (!L) return HET_EINVAL;
    L->k = (int)k, L->stride = (int)s;
    r->sh = global ? (het_shape){r->sh.c, 1, 1}
                   : (het_shape){r->sh.c, (int)((r->sh.h - k) / s + 1), (int)((r->sh.w - k) / s + 1)};
    return extra_outputs_unused(r, nd);
}

/* A dense layer from a Gemm, or a MatMul and the Add of a bias after it; *cur moves on. */
static int dense(rd *r, const Onnx__NodeProto *nd, const char **cur) {
    int gemm = is_op(nd, "Gemm");
    const Onnx__TensorProto *w = initializer(r, opt(nd, 1));
    int64_t ta, tb = 0, F = (int64_t)het_shape_size(r->sh);
    float al, be;
    int e = known_attrs(r, nd, gemm ? "alpha beta transA transB" : "");
    if (e || (e = a_int(r, nd, "transA", 0, 0, &ta)) || (e = a_int(r, nd, "transB", 0, 0, &tb)) ||
        (e = a_float(r, nd, "alpha", 1.0f, &al)) || (e = a_float(r, nd, "beta", 1.0f, &be)))
        return e;
    if (r->rank != 2) return fail(r, nd, HET_ESHAPE, "a matrix product of a 4-D value: hetrain "
                                  "needs a Flatten before it");
    if (ta != 0 || al != 1.0f || be != 1.0f || (tb != 0 && tb != 1))
        return fail(r, nd, HET_EINVAL, "transA %lld, transB %lld, alpha %g, beta %g: hetrain trains "
                    "transA 0, alpha 1, beta 1", (long long)ta, (long long)tb, (double)al, (double)be);
    if (!w || w->n_dims != 2 || w->dims[tb ? 0 : 1] < 1 || w->dims[tb ? 0 : 1] > ((int64_t)1 << 24))
        return fail(r, nd, HET_ESHAPE, "weight '%.64s': not an initializer of %s",
                    opt(nd, 1) ? opt(nd, 1) : "", tb ? "[out, in]" : "[in, out]");
    int64_t O = w->dims[tb ? 0 : 1], d[2] = {O, F};
    const Onnx__NodeProto *bias = nd;
    size_t bi = 2;
    *cur = nd->output[0];
    if (!gemm) { /* MatMul: the bias is a following Add's initializer */
        size_t i = 0;
        if (nd->n_input != 2) return fail(r, nd, HET_EFORMAT, "%zu inputs", nd->n_input);
        Onnx__NodeProto *add = consumers(r, *cur, &i, 1) == 1 ? r->g->node[i] : NULL;
        bias = NULL;
        if (is_op(add, "Add") && add->n_input == 2 && add->n_output == 1) {
            bi = strcmp(add->input[0], *cur) == 0 ? 1 : 0;
            if (initializer(r, add->input[bi])) bias = add, r->used[i] = 1, *cur = add->output[0];
        }
    }
    het_net_layer *L = add_layer(r, nd, HET_NL_DENSE);
    if (!L) return HET_EINVAL;
    L->out = (int)O;
    if ((e = take(r, nd, 1, 0, 2, d, !tb, 0)) || (e = take(r, bias ? bias : nd, bias ? bi : 99, 0, 1, &O, 0, 1)))
        return e;
    r->sh = (het_shape){(int)O, 1, 1};
    return HET_OK;
}

/* One operator of the chain reading *cur; *cur moves to its output. */
static int chain(rd *r, Onnx__NodeProto *nd, const char **cur) {
    const char *op = nd->op_type ? nd->op_type : "";
    int e;
    if (nd->n_input < 1 || !nd->input[0] || strcmp(nd->input[0], *cur) != 0 ||
        nd->n_output < 1 || !nd->output[0])
        return fail(r, nd, HET_EINVAL, "reads '%.64s' other than as its data input", *cur);
    if (strcmp(op, "Gemm") == 0 || strcmp(op, "MatMul") == 0) return dense(r, nd, cur);
    *cur = nd->output[0];
    if (strcmp(op, "Identity") == 0) return HET_OK;
    if (strcmp(op, "Relu") == 0)
        return (e = known_attrs(r, nd, "")) ? e : add_layer(r, nd, HET_NL_RELU) ? HET_OK : HET_EINVAL;
    if (strcmp(op, "MaxPool") == 0) return pool(r, nd, HET_NL_MAXPOOL, 0);
    if (strcmp(op, "AveragePool") == 0) return pool(r, nd, HET_NL_AVGPOOL, 0);
    if (strcmp(op, "GlobalAveragePool") == 0) return pool(r, nd, HET_NL_AVGPOOL, 1);
    if (strcmp(op, "Conv") == 0) {
        het_net_layer *L;
        int oc, k, s, p, C = r->sh.c;
        if ((e = conv_args(r, nd, &oc, &k, &s, &p)) || !(L = add_layer(r, nd, HET_NL_CONV)))
            return e ? e : HET_EINVAL;
        L->out = oc, L->k = k, L->stride = s, L->pad = p;
        int64_t d[4] = {oc, C, k, k}, O = oc;
        return (e = take(r, nd, 1, 0, 4, d, 0, 0)) ? e : take(r, nd, 2, 0, 1, &O, 0, 1);
    }
    if (strcmp(op, "BatchNormalization") == 0) {
        het_net_layer *L;
        float eps, mom;
        if ((e = bn_args(r, nd, &eps, &mom)) || !(L = add_layer(r, nd, HET_NL_BATCHNORM)))
            return e ? e : HET_EINVAL;
        L->eps = eps, L->momentum = mom;
        return (e = bn_take(r, nd, 0)) ? e : bn_take(r, nd, 1);
    }
    if (strcmp(op, "Dropout") == 0) {
        float p = 0.5f;
        kt *k = opt(nd, 1) ? konst(r, opt(nd, 1)) : NULL;
        if ((e = known_attrs(r, nd, "ratio seed")) || (e = a_float(r, nd, "ratio", 0.5f, &p)) ||
            (e = extra_outputs_unused(r, nd)))
            return e;
        if (opt(nd, 1) && (!k || k->n != 1)) return fail(r, nd, HET_EINVAL, "ratio: not a constant");
        if (k) p = (float)k->fv[0];
        if (!(p >= 0.0f && p < 1.0f)) return fail(r, nd, HET_EINVAL, "ratio %g outside [0, 1)", (double)p);
        het_net_layer *L = add_layer(r, nd, HET_NL_DROPOUT);
        if (L) L->p = p;
        return L ? HET_OK : HET_EINVAL;
    }
    if (strcmp(op, "Flatten") == 0 || strcmp(op, "Reshape") == 0) {
        int64_t ax = 1, F = (int64_t)het_shape_size(r->sh);
        if (op[0] == 'F' && ((e = known_attrs(r, nd, "axis")) || (e = a_int(r, nd, "axis", 0, 1, &ax))))
            return e;
        if (op[0] == 'F' && ax != 1) return fail(r, nd, HET_EINVAL, "attribute axis = %lld: hetrain flattens from axis 1", (long long)ax);
        if (op[0] == 'R') {
            kt *s = konst(r, opt(nd, 1));
            if ((e = known_attrs(r, nd, "allowzero"))) return e;
            if (!s || s->n != 2 || !((s->iv[1] == -1 && s->iv[0] != -1 && s->iv[0] >= -1) ||
                                     (s->iv[1] == F && (s->iv[0] == 0 || s->iv[0] == -1))))
                return fail(r, nd, HET_EINVAL, "shape: hetrain reshapes to [N, -1] only (a constant shape)");
        }
        size_t i = 0;
        Onnx__NodeProto *nx = consumers(r, *cur, &i, 1) == 1 ? r->g->node[i] : NULL;
        int own = (is_op(nx, "Gemm") || is_op(nx, "MatMul")) && same_prefix(nd->name, nx->name);
        r->rank = 2;
        if (!own && !add_layer(r, nd, HET_NL_FLATTEN)) return HET_EINVAL;
        r->sh = (het_shape){(int)F, 1, 1};
        return HET_OK;
    }
    if (strcmp(op, "Add") == 0)
        return fail(r, nd, HET_EINVAL, "operator hetrain cannot train outside a residual block "
                    "(Conv-BatchNormalization-Relu-Conv-BatchNormalization-Add-Relu)");
    return fail(r, nd, HET_EINVAL, "operator hetrain cannot train (it reads Conv, "
                "BatchNormalization, Relu, MaxPool, AveragePool, GlobalAveragePool, Flatten, Reshape, "
                "Gemm, MatMul + Add, Dropout, Identity and residual blocks)");
}

/* The graph's input (its one input that is no initializer): shape and rank. */
static int graph_input(rd *r, const char **name) {
    const Onnx__ValueInfoProto *in = NULL;
    for (size_t i = 0; i < r->g->n_input; i++) {
        const char *nm = r->g->input[i]->name;
        if (!nm || initializer(r, nm)) continue;
        if (in) return fail(r, NULL, HET_EINVAL, "graph inputs '%.64s' and '%.64s': hetrain reads one", in->name, nm);
        in = r->g->input[i];
    }
    if (!in) return fail(r, NULL, HET_EFORMAT, "the graph has no input");
    const Onnx__TypeProto *t = in->type;
    const Onnx__TensorShapeProto *s = t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
                                              t->tensor_type ? t->tensor_type->shape : NULL;
    if (!s || t->tensor_type->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || (s->n_dim != 4 && s->n_dim != 2))
        return fail(r, NULL, HET_EINVAL, "input '%.64s': hetrain reads float32 [N, C, H, W] or [N, F]", in->name);
    int64_t d[4] = {1, 1, 1, 1};
    for (size_t i = 1; i < s->n_dim; i++) {
        if (s->dim[i]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
            s->dim[i]->dim_value < 1 || s->dim[i]->dim_value > 65536)
            return fail(r, NULL, HET_EINVAL, "input '%.64s': dimension %zu is not a size", in->name, i);
        d[i] = s->dim[i]->dim_value;
    }
    r->sh = (het_shape){(int)d[1], (int)d[2], (int)d[3]};
    if (het_shape_size(r->sh) > ((size_t)1 << 28)) return fail(r, NULL, HET_EINVAL, "input too large");
    r->rank = (int)s->n_dim;
    *name = in->name;
    return HET_OK;
}

static int walk(rd *r) {
    const char *cur = NULL, *end;
    int e = graph_input(r, &cur);
    if (e) return e;
    if (r->g->n_output != 1 || !r->g->output[0]->name)
        return fail(r, NULL, HET_EINVAL, "%zu graph outputs: hetrain reads one", r->g->n_output);
    end = r->g->output[0]->name;
    while (strcmp(cur, end) != 0) {
        size_t c[2];
        int n = consumers(r, cur, c, 2);
        if (n == 0) return fail(r, NULL, HET_EINVAL, "value '%.64s' leads nowhere: the graph's output '%.64s' is not reached", cur, end);
        e = n == 2 ? resblock(r, c, &cur)
            : n == 1 ? (r->used[c[0]] = 1, chain(r, r->g->node[c[0]], &cur))
                     : fail(r, r->g->node[c[0]], HET_EINVAL, "value '%.64s' feeds %d operators", cur, n);
        if (e) return e;
    }
    for (size_t i = 0; i < r->g->n_node; i++)
        if (!r->used[i]) return fail(r, r->g->node[i], HET_EINVAL, "not on the way from the input to the output");
    if (r->net->n == 0) return fail(r, NULL, HET_EINVAL, "no layer");
    return HET_OK;
}

static int read_all(const char *path, uint8_t **buf, size_t *n) {
    FILE *f = fopen(path, "rb");
    struct stat st;
    *buf = NULL;
    if (!f) return het_error_set(HET_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 ||
        (size_t)st.st_size > ONNX_MAX_BYTES) {
        fclose(f);
        return het_error_set(HET_EFORMAT, "%s: not a regular file of at most %zu bytes", path, ONNX_MAX_BYTES);
    }
    *n = (size_t)st.st_size;
    *buf = malloc(*n ? *n : 1);
    int ok = *buf && fread(*buf, 1, *n, f) == *n;
    fclose(f);
    if (!ok) {
        free(*buf);
        *buf = NULL;
        return het_error_set(HET_EIO, "%s: read failed", path);
    }
    return HET_OK;
}

int het_net_read_onnx(het_net *net, const char *path) {
    memset(net, 0, sizeof *net);
    uint8_t *buf;
    size_t n = 0;
    int e = read_all(path, &buf, &n);
    if (e) return e;
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, n, buf);
    free(buf);
    if (!m) return het_error_set(HET_EFORMAT, "%s: not an ONNX model (the protobuf does not parse: truncated or corrupt)", path);
    rd r = {.path = path, .g = m->graph, .net = net};
    if (!r.g || r.g->n_node == 0) e = fail(&r, NULL, HET_EFORMAT, "not an ONNX model (no graph)");
    else if (r.g->n_node > ONNX_MAX_NODES) e = fail(&r, NULL, HET_EINVAL, "%zu nodes (at most %d)", r.g->n_node, ONNX_MAX_NODES);
    for (size_t i = 0; !e && i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if ((!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0) && o->version > 0 && o->version < 7)
            e = fail(&r, NULL, HET_EINVAL, "opset %lld: hetrain reads opset 7 and later", (long long)o->version);
    }
    for (size_t i = 0; !e && i < r.g->n_node; i++) {
        const Onnx__NodeProto *nd = r.g->node[i];
        if (nd->domain && *nd->domain && strcmp(nd->domain, "ai.onnx") != 0)
            e = fail(&r, nd, HET_EINVAL, "operator of domain '%.32s' hetrain cannot train", nd->domain);
        else if (!nd->op_type || nd->n_output < 1 || !nd->output[0] || nd->n_input > 64)
            e = fail(&r, nd, HET_EFORMAT, "no operator type or output");
    }
    if (!e) {
        r.cap_k = r.g->n_node + r.g->n_initializer;
        r.k = calloc(r.cap_k + 1, sizeof *r.k);
        r.used = calloc(r.g->n_node + 1, 1);
        e = !r.k || !r.used ? fail(&r, NULL, HET_ENOMEM, "out of memory") : fold(&r);
    }
    if (!e) e = walk(&r);
    for (size_t i = 0; i < r.nk; i++) free(r.k[i].iv), free(r.k[i].fv);
    free(r.k);
    free(r.used);
    onnx__model_proto__free_unpacked(m, NULL);
    if (e) {
        free(r.params);
        free(r.state);
        memset(net, 0, sizeof *net);
        return e;
    }
    net->params = r.params, net->n_params = r.np;
    net->state = r.state, net->n_state = r.ns;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    snprintf(net->name, sizeof net->name, "%.*s", (int)(len < sizeof net->name ? len : sizeof net->name - 1), base);
    snprintf(net->file, sizeof net->file, "%s", path);
    return HET_OK;
}

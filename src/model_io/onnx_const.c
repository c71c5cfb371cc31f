/* ONNX import, part 1 (see onnx_read.c): tensors and constants. Tensors are read as
 * protobuf-c unpacked them, every element count checked against the data present; constant
 * sub-graphs (the shapes and pads torch.onnx.export computes with Constant, ConstantOfShape,
 * Concat, Reshape, Slice, Transpose, Cast, Gather and Unsqueeze) are evaluated here, each
 * result at most KT_MAX elements, so that the walk sees plain numbers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/onnx_internal.h"

/* Elements of t from its dims (HET_EFORMAT past 2^31). */
static int t_count(rd *r, const Onnx__TensorProto *t, size_t *n) {
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
static int64_t to_i64(double x) {
    if (!(x == x)) return 0;
    if (x <= -9223372036854775808.0) return INT64_MIN;
    if (x >= 9223372036854775808.0) return INT64_MAX;
    return (int64_t)x;
}

static int64_t t_get_i(const Onnx__TensorProto *t, size_t i) {
    if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64) return to_i64(het_onnx_get(t, i));
    int64_t v;
    if (t->has_raw_data)
        memcpy(&v, t->raw_data.data + 8 * i, 8);
    else
        v = t->int64_data[i];
    return v;
}

/* Whether t holds n elements of a type t_get reads (float when want_float). */
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
    if (rank > 0) memcpy(k->dims, dims, (size_t)rank * sizeof *dims);
    k->n = n;
    return k;
}

/* The constant `name`: folded, or a numeric initializer of at most KT_MAX elements and rank
 * <= 4 (made a constant on first use); NULL otherwise. */
kt *het_onnx_const(rd *r, const char *name) {
    kt *k = find_k(r, name);
    if (k || !name) return k;
    const Onnx__TensorProto *t = NULL;
    for (size_t i = 0; i < r->g->n_initializer && !t; i++)
        if (r->g->initializer[i]->name && strcmp(r->g->initializer[i]->name, name) == 0)
            t = r->g->initializer[i];
    size_t n = 0;
    if (!t || t->n_dims > 4 || t_count(r, t, &n) != HET_OK || n > KT_MAX ||
        het_onnx_data_ok(r, t, n, 0) != HET_OK)
        return NULL;
    k = new_k(r, name, (int)t->n_dims, t->dims, n);
    for (size_t i = 0; k && i < n; i++) k->fv[i] = het_onnx_get(t, i), k->iv[i] = t_get_i(t, i);
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
        if (!v || !v->name)
            return het_onnx_fail(r, nd, HET_EFORMAT, "a Constant needs one attribute");
        size_t n = 0;
        if (strcmp(v->name, "value") == 0 && v->t) {
            if (v->t->n_dims > 4 || t_count(r, v->t, &n) || n > KT_MAX ||
                het_onnx_data_ok(r, v->t, n, 0))
                return het_onnx_fail(r, nd, HET_EFORMAT, "value: not a small numeric tensor");
            if (!(*out = new_k(r, o, (int)v->t->n_dims, v->t->dims, n))) return HET_ENOMEM;
            for (size_t i = 0; i < n; i++)
                (*out)->fv[i] = het_onnx_get(v->t, i), (*out)->iv[i] = t_get_i(v->t, i);
            return HET_OK;
        }
        int ints = strcmp(v->name, "value_ints") == 0, flts = strcmp(v->name, "value_floats") == 0;
        int one = strcmp(v->name, "value_int") == 0 || strcmp(v->name, "value_float") == 0;
        n = ints ? v->n_ints : flts ? v->n_floats : 1;
        if ((!ints && !flts && !one) || n > KT_MAX)
            return het_onnx_fail(
                r, nd, HET_EINVAL,
                "attribute %.32s: hetrain reads value, value_int(s), value_float(s)", v->name);
        int64_t d = (int64_t)n;
        if (!(*out = new_k(r, o, one ? 0 : 1, &d, n))) return HET_ENOMEM;
        for (size_t i = 0; i < n; i++) {
            double x = ints                ? (double)v->ints[i]
                       : flts              ? v->floats[i]
                       : v->name[6] == 'i' ? (double)v->i
                                           : v->f;
            (*out)->fv[i] = x;
            (*out)->iv[i] = ints ? v->ints[i] : v->name[6] == 'i' && one ? v->i : to_i64(x);
        }
        return HET_OK;
    }
    if (nd->n_input < 1 || !(a = find_k(r, het_onnx_in(nd, 0)))) {
        if (strcmp(op, "Identity") == 0 && nd->n_input == 1) { /* an initializer's alias */
            const Onnx__TensorProto *t = het_onnx_init(r, het_onnx_in(nd, 0));
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
        if (het_onnx_in(nd, i) && !het_onnx_const(r, het_onnx_in(nd, i))) return HET_OK;
    if (strcmp(op, "Identity") == 0 || strcmp(op, "Cast") == 0) {
        if (!(*out = new_k(r, o, a->rank, a->dims, a->n))) return HET_ENOMEM;
        const Onnx__AttributeProto *to = het_onnx_attr(nd, "to");
        int toint = to && to->i != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT &&
                    to->i != ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
        for (size_t i = 0; i < a->n; i++)
            (*out)->iv[i] = a->iv[i], (*out)->fv[i] = toint ? (double)a->iv[i] : a->fv[i];
        return HET_OK;
    }
    if (strcmp(op, "ConstantOfShape") == 0) {
        size_t n = 1;
        int64_t d[4];
        if (a->rank != 1 || a->n > 4)
            return het_onnx_fail(r, nd, HET_EINVAL, "shape of rank %d", a->rank);
        for (size_t i = 0; i < a->n; i++) {
            if (a->iv[i] < 0 || a->iv[i] > KT_MAX || (n *= (size_t)(d[i] = a->iv[i])) > KT_MAX)
                return het_onnx_fail(r, nd, HET_EINVAL, "a constant of more than %d elements",
                                     KT_MAX);
        }
        const Onnx__AttributeProto *v = het_onnx_attr(nd, "value");
        size_t vn = 0;
        double x = 0;
        int64_t xi = 0;
        if (v && v->t) {
            if (t_count(r, v->t, &vn) || vn != 1 || het_onnx_data_ok(r, v->t, 1, 0))
                return het_onnx_fail(r, nd, HET_EFORMAT, "value: not one number");
            x = het_onnx_get(v->t, 0), xi = t_get_i(v->t, 0);
        }
        if (!(*out = new_k(r, o, (int)a->n, d, n))) return HET_ENOMEM;
        for (size_t i = 0; i < n; i++) (*out)->fv[i] = x, (*out)->iv[i] = xi;
        return HET_OK;
    }
    if (strcmp(op, "Gather") == 0) { /* elements of a 1-D constant */
        kt *ix = het_onnx_const(r, het_onnx_in(nd, 1));
        const Onnx__AttributeProto *ax = het_onnx_attr(nd, "axis");
        if (!ix || ix->rank > 1 || a->rank != 1 || (ax && ax->i != 0))
            return het_onnx_fail(r, nd, HET_EINVAL, "hetrain folds Gather of a 1-D constant only");
        if (!(*out = new_k(r, o, ix->rank, ix->dims, ix->n))) return HET_ENOMEM;
        for (size_t i = 0; i < ix->n; i++) {
            int64_t j = ix->iv[i] < 0 ? ix->iv[i] + (int64_t)a->n : ix->iv[i];
            if (j < 0 || j >= (int64_t)a->n)
                return het_onnx_fail(r, nd, HET_EINVAL, "index %lld out of range",
                                     (long long)ix->iv[i]);
            (*out)->iv[i] = a->iv[j], (*out)->fv[i] = a->fv[j];
        }
        return HET_OK;
    }
    if (strcmp(op, "Unsqueeze") == 0) { /* axes: an input (opset 13) or an attribute */
        kt *ax = het_onnx_const(r, het_onnx_in(nd, 1));
        const Onnx__AttributeProto *at = het_onnx_attr(nd, "axes");
        size_t na = ax ? ax->n : at ? at->n_ints : 0;
        int64_t d[4];
        int rank = a->rank + (int)na, set = 0;
        if (na < 1 || rank > 4)
            return het_onnx_fail(r, nd, HET_EINVAL, "hetrain folds Unsqueeze up to rank 4");
        for (size_t i = 0; i < na; i++) {
            int64_t x = ax ? ax->iv[i] : at->ints[i];
            x += x < 0 ? rank : 0;
            if (x < 0 || x >= rank || (set & (1 << x)))
                return het_onnx_fail(r, nd, HET_EINVAL, "bad axes");
            set |= 1 << x;
        }
        for (int i = 0, j = 0; i < rank; i++) d[i] = set & (1 << i) ? 1 : a->dims[j++];
        if (!(*out = new_k(r, o, rank, d, a->n))) return HET_ENOMEM;
        memcpy((*out)->iv, a->iv, a->n * sizeof *a->iv);
        memcpy((*out)->fv, a->fv, a->n * sizeof *a->fv);
        return HET_OK;
    }
    if (strcmp(op, "Concat") == 0) {
        size_t n = 0;
        for (size_t i = 0; i < nd->n_input; i++) {
            kt *b = het_onnx_const(r, het_onnx_in(nd, i));
            if (!b || b->rank != 1)
                return het_onnx_fail(r, nd, HET_EINVAL,
                                     "hetrain folds Concat of 1-D constants only");
            n += b->n;
        }
        if (n > KT_MAX)
            return het_onnx_fail(r, nd, HET_EINVAL, "a constant of more than %d elements", KT_MAX);
        int64_t d = (int64_t)n;
        if (!(*out = new_k(r, o, 1, &d, n))) return HET_ENOMEM;
        size_t j = 0;
        for (size_t i = 0; i < nd->n_input; i++) {
            kt *b = het_onnx_const(r, het_onnx_in(nd, i));
            memcpy((*out)->iv + j, b->iv, b->n * sizeof *b->iv);
            memcpy((*out)->fv + j, b->fv, b->n * sizeof *b->fv);
            j += b->n;
        }
        return HET_OK;
    }
    if (strcmp(op, "Reshape") == 0) {
        kt *s = het_onnx_const(r, het_onnx_in(nd, 1));
        int64_t d[4], known = 1;
        int neg = -1;
        if (!s || s->rank != 1 || s->n > 4)
            return het_onnx_fail(r, nd, HET_EINVAL, "shape: not a 1-D constant of rank <= 4");
        for (size_t i = 0; i < s->n; i++) {
            d[i] = s->iv[i] == 0 && (int)i < a->rank ? a->dims[i] : s->iv[i];
            if (d[i] == -1 && neg < 0)
                neg = (int)i;
            else if (d[i] < 1 || d[i] > KT_MAX)
                return het_onnx_fail(r, nd, HET_EINVAL, "shape: bad dimension %lld",
                                     (long long)d[i]);
            else
                known *= d[i];
        }
        if (neg >= 0) d[neg] = (int64_t)a->n / known;
        if ((neg >= 0 ? known * d[neg] : known) != (int64_t)a->n)
            return het_onnx_fail(r, nd, HET_EINVAL, "shape: %zu elements do not fit", a->n);
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
    if (a->rank < 1) return het_onnx_fail(r, nd, HET_EINVAL, "a scalar");
    for (int i = 0; i < a->rank; i++) d[i] = a->dims[i];
    if (tr) {
        const Onnx__AttributeProto *p = het_onnx_attr(nd, "perm");
        if (p && p->n_ints != (size_t)a->rank)
            return het_onnx_fail(r, nd, HET_EINVAL, "perm of %zu axes", p->n_ints);
        int seen = 0;
        for (int i = 0; i < a->rank; i++) {
            int64_t v = p ? p->ints[i] : a->rank - 1 - i;
            if (v < 0 || v >= a->rank || (seen & (1 << v)))
                return het_onnx_fail(r, nd, HET_EINVAL, "bad perm");
            seen |= 1 << v;
            perm[i] = (int)v;
            d[i] = a->dims[v];
        }
    } else {
        kt *st = het_onnx_const(r, het_onnx_in(nd, 1)), *en = het_onnx_const(r, het_onnx_in(nd, 2)),
           *ax = het_onnx_const(r, het_onnx_in(nd, 3)), *sp = het_onnx_const(r, het_onnx_in(nd, 4));
        if (!st || !en || st->n != en->n || (ax && ax->n != st->n) || (sp && sp->n != st->n))
            return het_onnx_fail(r, nd, HET_EINVAL,
                                 "starts, ends, axes and steps of different lengths");
        for (size_t i = 0; i < st->n; i++) {
            int64_t x = ax ? ax->iv[i] : (int64_t)i, s = sp ? sp->iv[i] : 1;
            if (x < 0) x += a->rank;
            if (x < 0 || x >= a->rank || s == 0 || s == INT64_MIN)
                return het_onnx_fail(r, nd, HET_EINVAL, "bad axis or step");
            int64_t D = a->dims[x], b = st->iv[i], e = en->iv[i];
            b = b < 0 ? b + D : b, e = e < 0 ? (e < -D ? -1 : e + D) : e;
            if (s > 0)
                b = b < 0 ? 0 : b > D ? D : b, e = e < 0 ? 0 : e > D ? D : e;
            else
                b = b < 0 ? 0 : b > D - 1 ? D - 1 : b, e = e < -1 ? -1 : e > D - 1 ? D - 1 : e;
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
int het_onnx_fold(rd *r) {
    for (size_t i = 0; i < r->g->n_node; i++) {
        kt *k;
        if (r->used[i]) continue;
        int st = fold_node(r, r->g->node[i], &k);
        if (st == HET_ENOMEM) return het_onnx_fail(r, NULL, st, "out of memory");
        if (st != HET_OK) return st;
        if (k) r->used[i] = 1;
    }
    return HET_OK;
}

int het_onnx_fold_shape(rd *r, size_t i) {
    const Onnx__NodeProto *nd = r->g->node[i];
    int64_t d = r->rank, v[4] = {HET_ONNX_SYM_N, r->sh.c, r->sh.h, r->sh.w};
    if (r->rank == 2) v[1] = (int64_t)het_shape_size(r->sh);
    if (nd->n_attribute || nd->n_input != 1)
        return het_onnx_fail(r, nd, HET_EINVAL, "hetrain reads a Shape of a whole value only");
    kt *k = new_k(r, nd->output[0], 1, &d, (size_t)d);
    if (!k) return het_onnx_fail(r, NULL, HET_ENOMEM, "out of memory");
    for (int j = 0; j < r->rank; j++) k->iv[j] = v[j], k->fv[j] = (double)v[j];
    r->used[i] = 1;
    return het_onnx_fold(r);
}

/* ONNX import, part 2 (see onnx_read.c): constants. Constant sub-graphs (the shapes and pads
 * torch.onnx.export computes with Constant, ConstantOfShape, Concat, Reshape, Slice,
 * Transpose, Cast, Gather and Unsqueeze) are evaluated here, each result at most KT_MAX
 * elements, so that the walk sees plain numbers. Each operator is one function of the table
 * fold_ops; fold_node finds it and checks that the inputs are constants. Tensors themselves
 * are read by onnx_io.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_io/onnx_const.h"

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
    if (!t || t->n_dims > 4 || het_onnx_count(r, t, &n) != HET_OK || n > KT_MAX ||
        het_onnx_data_ok(r, t, n, 0) != HET_OK)
        return NULL;
    k = new_k(r, name, (int)t->n_dims, t->dims, n);
    for (size_t i = 0; k && i < n; i++)
        k->fv[i] = het_onnx_get(t, i), k->iv[i] = het_onnx_get_i(t, i);
    return k;
}

/* ---- the operators: one function each ---- */

/* A folding function: nd's output o from its first input a (a constant; NULL for Constant,
 * which has none) and its other inputs, all constants: HET_OK with *out set, HET_ENOMEM, or
 * an error naming nd. */
typedef int (*fold_fn)(rd *r, const Onnx__NodeProto *nd, const kt *a, const char *o, kt **out);

/* A copy of a's values (and dims when d is NULL) under the name o, of the given rank. */
static int copy_k(rd *r, const char *o, const kt *a, int rank, const int64_t *d, kt **out) {
    if (!(*out = new_k(r, o, rank, d ? d : a->dims, a->n))) return HET_ENOMEM;
    memcpy((*out)->iv, a->iv, a->n * sizeof *a->iv);
    memcpy((*out)->fv, a->fv, a->n * sizeof *a->fv);
    return HET_OK;
}

/* Constant: attribute value (a small numeric tensor), value_int(s) or value_float(s). */
static int fold_constant(rd *r, const Onnx__NodeProto *nd, const kt *a, const char *o,
                         kt **out) {
    (void)a;
    const Onnx__AttributeProto *v = nd->n_attribute == 1 ? nd->attribute[0] : NULL;
    if (!v || !v->name)
        return het_onnx_fail(r, nd, HET_EFORMAT, "a Constant needs one attribute");
    size_t n = 0;
    if (strcmp(v->name, "value") == 0 && v->t) {
        if (v->t->n_dims > 4 || het_onnx_count(r, v->t, &n) || n > KT_MAX ||
            het_onnx_data_ok(r, v->t, n, 0))
            return het_onnx_fail(r, nd, HET_EFORMAT, "value: not a small numeric tensor");
        if (!(*out = new_k(r, o, (int)v->t->n_dims, v->t->dims, n))) return HET_ENOMEM;
        for (size_t i = 0; i < n; i++)
            (*out)->fv[i] = het_onnx_get(v->t, i), (*out)->iv[i] = het_onnx_get_i(v->t, i);
        return HET_OK;
    }
    int ints = strcmp(v->name, "value_ints") == 0, flts = strcmp(v->name, "value_floats") == 0;
    int one = strcmp(v->name, "value_int") == 0 || strcmp(v->name, "value_float") == 0;
    n = ints ? v->n_ints : flts ? v->n_floats : 1;
    if ((!ints && !flts && !one) || n > KT_MAX)
        return het_onnx_fail(r, nd, HET_EINVAL,
                             "attribute %.32s: hetrain reads value, value_int(s), value_float(s)",
                             v->name);
    int64_t d = (int64_t)n;
    if (!(*out = new_k(r, o, one ? 0 : 1, &d, n))) return HET_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        double x = ints                ? (double)v->ints[i]
                   : flts              ? v->floats[i]
                   : v->name[6] == 'i' ? (double)v->i
                                       : v->f;
        (*out)->fv[i] = x;
        (*out)->iv[i] = ints ? v->ints[i] : v->name[6] == 'i' && one ? v->i : het_onnx_to_i64(x);
    }
    return HET_OK;
}

/* Identity and Cast: the same values; a Cast to an integer type truncates the doubles. */
static int fold_cast(rd *r, const Onnx__NodeProto *nd, const kt *a, const char *o, kt **out) {
    if (!(*out = new_k(r, o, a->rank, a->dims, a->n))) return HET_ENOMEM;
    const Onnx__AttributeProto *to = het_onnx_attr(nd, "to");
    int toint = to && to->i != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT &&
                to->i != ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    for (size_t i = 0; i < a->n; i++)
        (*out)->iv[i] = a->iv[i], (*out)->fv[i] = toint ? (double)a->iv[i] : a->fv[i];
    return HET_OK;
}

/* An Identity of an initializer that is no constant (a weight): an alias of it, so that the
 * walk finds the weight under either name. */
static int fold_alias(rd *r, const Onnx__NodeProto *nd, const char *o, kt **out) {
    const Onnx__TensorProto *t = nd->n_input == 1 ? het_onnx_init(r, het_onnx_in(nd, 0)) : NULL;
    if (t && r->nk < r->cap_k) {
        kt *k = &r->k[r->nk++];
        memset(k, 0, sizeof *k);
        k->name = o;
        k->alias = t;
        *out = k;
    }
    return HET_OK;
}

static int fold_constant_of_shape(rd *r, const Onnx__NodeProto *nd, const kt *a, const char *o,
                                  kt **out) {
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
        if (het_onnx_count(r, v->t, &vn) || vn != 1 || het_onnx_data_ok(r, v->t, 1, 0))
            return het_onnx_fail(r, nd, HET_EFORMAT, "value: not one number");
        x = het_onnx_get(v->t, 0), xi = het_onnx_get_i(v->t, 0);
    }
    if (!(*out = new_k(r, o, (int)a->n, d, n))) return HET_ENOMEM;
    for (size_t i = 0; i < n; i++) (*out)->fv[i] = x, (*out)->iv[i] = xi;
    return HET_OK;
}

/* Gather: elements of a 1-D constant. */
static int fold_gather(rd *r, const Onnx__NodeProto *nd, const kt *a, const char *o, kt **out) {
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

/* Unsqueeze: axes an input (opset 13) or an attribute (before). */
static int fold_unsqueeze(rd *r, const Onnx__NodeProto *nd, const kt *a, const char *o,
                          kt **out) {
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
    return copy_k(r, o, a, rank, d, out);
}

/* Concat of 1-D constants (a is the first of them). */
static int fold_concat(rd *r, const Onnx__NodeProto *nd, const kt *a, const char *o, kt **out) {
    (void)a;
    size_t n = 0;
    for (size_t i = 0; i < nd->n_input; i++) {
        kt *b = het_onnx_const(r, het_onnx_in(nd, i));
        if (!b || b->rank != 1)
            return het_onnx_fail(r, nd, HET_EINVAL, "hetrain folds Concat of 1-D constants only");
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

/* Reshape: 0 keeps a dimension, one -1 takes what is left. */
static int fold_reshape(rd *r, const Onnx__NodeProto *nd, const kt *a, const char *o, kt **out) {
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
            return het_onnx_fail(r, nd, HET_EINVAL, "shape: bad dimension %lld", (long long)d[i]);
        else
            known *= d[i];
    }
    if (neg >= 0) d[neg] = (int64_t)a->n / known;
    if ((neg >= 0 ? known * d[neg] : known) != (int64_t)a->n)
        return het_onnx_fail(r, nd, HET_EINVAL, "shape: %zu elements do not fit", a->n);
    return copy_k(r, o, a, (int)s->n, d, out);
}

/* Transpose and Slice map each output element to one input element: output dims d, and the
 * input element of output index (i0, i1, ...) is at sum over axes of perm's stride (Transpose)
 * or (beg + i * step) times the axis's stride (Slice). Rank <= 4. */
typedef struct index_map {
    int64_t d[4], beg[4], step[4];
    int perm[4];
    int transpose;
} index_map;

static int gather_map(rd *r, const kt *a, const index_map *m, const char *o, kt **out) {
    size_t ist[4], n = 1, s = 1;
    for (int i = a->rank - 1; i >= 0; i--) ist[i] = s, s *= (size_t)a->dims[i];
    for (int i = 0; i < a->rank; i++) n *= (size_t)m->d[i];
    if (!(*out = new_k(r, o, a->rank, m->d, n))) return HET_ENOMEM;
    for (size_t j = 0; j < n; j++) {
        size_t rem = j, src = 0;
        for (int i = a->rank - 1; i >= 0; i--) {
            int64_t idx = (int64_t)(rem % (size_t)m->d[i]);
            rem /= (size_t)m->d[i];
            src += m->transpose ? (size_t)idx * ist[m->perm[i]]
                                : (size_t)(m->beg[i] + idx * m->step[i]) * ist[i];
        }
        (*out)->iv[j] = a->iv[src], (*out)->fv[j] = a->fv[src];
    }
    return HET_OK;
}

/* An index map of a's whole extent, no permutation. */
static index_map map_of(const kt *a) {
    index_map m = {.step = {1, 1, 1, 1}, .perm = {0, 1, 2, 3}};
    for (int i = 0; i < a->rank; i++) m.d[i] = a->dims[i];
    return m;
}

static int fold_transpose(rd *r, const Onnx__NodeProto *nd, const kt *a, const char *o,
                          kt **out) {
    if (a->rank < 1) return het_onnx_fail(r, nd, HET_EINVAL, "a scalar");
    index_map m = map_of(a);
    m.transpose = 1;
    const Onnx__AttributeProto *p = het_onnx_attr(nd, "perm");
    if (p && p->n_ints != (size_t)a->rank)
        return het_onnx_fail(r, nd, HET_EINVAL, "perm of %zu axes", p->n_ints);
    int seen = 0;
    for (int i = 0; i < a->rank; i++) {
        int64_t v = p ? p->ints[i] : a->rank - 1 - i;
        if (v < 0 || v >= a->rank || (seen & (1 << v)))
            return het_onnx_fail(r, nd, HET_EINVAL, "bad perm");
        seen |= 1 << v;
        m.perm[i] = (int)v;
        m.d[i] = a->dims[v];
    }
    return gather_map(r, a, &m, o, out);
}

/* Slice: starts, ends, axes, steps (inputs 1-4), clamped as ONNX defines. */
static int fold_slice(rd *r, const Onnx__NodeProto *nd, const kt *a, const char *o, kt **out) {
    if (a->rank < 1) return het_onnx_fail(r, nd, HET_EINVAL, "a scalar");
    index_map m = map_of(a);
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
        m.beg[x] = b, m.step[x] = s;
        m.d[x] = s > 0 ? (e > b ? (e - b - 1) / s + 1 : 0) : (b > e ? (b - e - 1) / -s + 1 : 0);
    }
    return gather_map(r, a, &m, o, out);
}

/* The operators folded when all their inputs are constants (ggml's way: a table of per-op
 * functions). Any other operator is one the walk reads. */
static const struct fold_op {
    const char *op;
    fold_fn fold;
    int nullary; /* no input: folded from its attributes (Constant) */
} fold_ops[] = {
    {"Constant", fold_constant, 1},
    {"Identity", fold_cast, 0},
    {"Cast", fold_cast, 0},
    {"ConstantOfShape", fold_constant_of_shape, 0},
    {"Gather", fold_gather, 0},
    {"Unsqueeze", fold_unsqueeze, 0},
    {"Concat", fold_concat, 0},
    {"Reshape", fold_reshape, 0},
    {"Transpose", fold_transpose, 0},
    {"Slice", fold_slice, 0},
};

/* The output of node nd when it is foldable (an operator of fold_ops whose inputs are all
 * constants): HET_OK with *out set, or *out NULL when nd is not foldable (an operator the walk
 * reads); errors for bad constants. */
static int fold_node(rd *r, const Onnx__NodeProto *nd, kt **out) {
    *out = NULL;
    if (nd->n_output < 1 || !nd->output[0] || !nd->op_type) return HET_OK;
    const struct fold_op *f = NULL;
    for (size_t i = 0; i < sizeof fold_ops / sizeof *fold_ops && !f; i++)
        if (strcmp(nd->op_type, fold_ops[i].op) == 0) f = &fold_ops[i];
    if (!f) return HET_OK;
    const char *o = nd->output[0];
    if (f->nullary) return f->fold(r, nd, NULL, o, out);
    kt *a = nd->n_input >= 1 ? find_k(r, het_onnx_in(nd, 0)) : NULL;
    if (!a) return strcmp(f->op, "Identity") == 0 ? fold_alias(r, nd, o, out) : HET_OK;
    for (size_t i = 1; i < nd->n_input; i++)
        if (het_onnx_in(nd, i) && !het_onnx_const(r, het_onnx_in(nd, i))) return HET_OK;
    return f->fold(r, nd, a, o, out);
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

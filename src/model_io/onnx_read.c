/* ONNX import (het_net_read_onnx): an ONNX model file into a het_net and its initial weights.
 *
 * DESIGN. The file is unpacked by protobuf-c (code generated from Debian's onnx.proto), so
 * every length in it is checked against the bytes that remain before anything is read.
 * Then:
 *  1. Constants (onnx_const.c, one folding function per operator; onnx_io.c has the tensors,
 *     attributes and weights, and uses neither of the other two files). Constant nodes
 *     and the small integer sub-graphs that compute shapes and pads (torch.onnx.export writes
 *     F.pad's pads as Constant, ConstantOfShape, Concat, Reshape, Slice, Transpose and Cast)
 *     are evaluated at once (at most KT_MAX elements each), and Identity nodes on
 *     initializers become aliases. What stays are the graph's operators. A Shape of the
 *     walk's current value (torch's x.view(x.size(0), -1): Shape, Gather, Unsqueeze, Concat,
 *     Reshape) is a constant [N, C, H, W] with a symbolic N, folded when the walk gets there.
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
 * A Pad of zeros (torch's F.avg_pool2d writes one) is nothing.
 * Errors are one line: "FILE: node 'NAME' (OpType): ...". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/infile.h"
#include "model_io/onnx_const.h"

#define ONNX_MAX_NODES 16384

/* ---- 2. the walk (this file) ---- */

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
            return het_onnx_fail(r, nd, HET_EINVAL,
                                 "output %zu is used: hetrain computes the first only", o);
    return nd->n_output >= 1 && nd->output[0] ? HET_OK
                                              : het_onnx_fail(r, nd, HET_EFORMAT, "no output");
}

static het_net_layer *add_layer(rd *r, const Onnx__NodeProto *nd, het_net_kind kind) {
    if (r->net->n >= HET_NET_MAX_LAYERS) {
        het_onnx_fail(r, nd, HET_EINVAL, "more than %d layers", HET_NET_MAX_LAYERS);
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
    const Onnx__TensorProto *w = het_onnx_init(r, het_onnx_in(nd, 1));
    int64_t ks, st, pd, dil, grp;
    int e = het_onnx_known_attrs(r, nd, "kernel_shape strides pads dilations group auto_pad");
    if (e) return e;
    if (r->rank != 4) return het_onnx_fail(r, nd, HET_ESHAPE, "a convolution of a flat value");
    if (!w || w->n_dims != 4 || w->dims[2] != w->dims[3] || w->dims[0] < 1 || w->dims[0] > 65536 ||
        w->dims[2] < 1 || w->dims[2] > 64)
        return het_onnx_fail(r, nd, HET_ESHAPE,
                             "weight '%.64s': not an initializer of [out, %d, k, k]",
                             het_onnx_in(nd, 1) ? het_onnx_in(nd, 1) : "", r->sh.c);
    if ((e = het_onnx_attr_int(r, nd, "kernel_shape", 2, w->dims[2], &ks)) ||
        (e = het_onnx_attr_int(r, nd, "strides", 2, 1, &st)) ||
        (e = het_onnx_attr_int(r, nd, "pads", 4, 0, &pd)) ||
        (e = het_onnx_attr_int(r, nd, "dilations", 2, 1, &dil)) ||
        (e = het_onnx_attr_int(r, nd, "group", 0, 1, &grp)))
        return e;
    if (ks != w->dims[2])
        return het_onnx_fail(r, nd, HET_ESHAPE, "kernel_shape %lld, weight's %lld", (long long)ks,
                             (long long)w->dims[2]);
    if (dil != 1)
        return het_onnx_fail(r, nd, HET_EINVAL, "attribute dilations = %lld: hetrain trains 1",
                             (long long)dil);
    if (grp != 1)
        return het_onnx_fail(r, nd, HET_EINVAL, "attribute group = %lld: hetrain trains 1",
                             (long long)grp);
    if (st < 1 || st > 64 || pd < 0 || pd > 64)
        return het_onnx_fail(r, nd, HET_EINVAL, "stride %lld, pad %lld", (long long)st,
                             (long long)pd);
    int64_t oh = (r->sh.h + 2 * pd - ks) / st + 1, ow = (r->sh.w + 2 * pd - ks) / st + 1;
    if (r->sh.h + 2 * pd < ks || r->sh.w + 2 * pd < ks)
        return het_onnx_fail(r, nd, HET_ESHAPE, "kernel larger than the input");
    if ((double)w->dims[0] * (double)oh * (double)ow > (double)(1 << 28))
        return het_onnx_fail(r, nd, HET_ESHAPE, "an output of %lld x %lld x %lld",
                             (long long)w->dims[0], (long long)oh, (long long)ow);
    *oc = (int)w->dims[0], *k = (int)ks, *s = (int)st, *p = (int)pd;
    r->sh = (het_shape){*oc, (int)oh, (int)ow};
    return HET_OK;
}

/* A BatchNormalization over the current value: its eps and (hetrain's) momentum; parameters
 * and state appended when take_now (a batchnorm layer) or left to the caller. */
static int bn_args(rd *r, const Onnx__NodeProto *nd, float *eps, float *mom) {
    int e = het_onnx_known_attrs(r, nd, "epsilon momentum spatial training_mode");
    float m;
    if (e || (e = het_onnx_attr_float(r, nd, "epsilon", 1e-5f, eps)) ||
        (e = het_onnx_attr_float(r, nd, "momentum", 0.9f, &m)))
        return e;
    if (nd->n_input != 5)
        return het_onnx_fail(r, nd, HET_EFORMAT, "%zu inputs, expected 5", nd->n_input);
    if (!(m >= 0.0f && m <= 1.0f) || !(*eps > 0.0f) || !isfinite(*eps))
        return het_onnx_fail(r, nd, HET_EINVAL, "momentum %g, epsilon %g", (double)m, (double)*eps);
    char buf[32];
    snprintf(buf, sizeof buf, "%.6g", 1.0 - (double)m);
    *mom = strtof(buf, NULL);
    return extra_outputs_unused(r, nd);
}

static int bn_take(rd *r, const Onnx__NodeProto *nd, int part) {
    int64_t C = r->sh.c;
    int e = HET_OK;
    for (int i = 0; i < 2 && !e; i++)
        e = het_onnx_take(r, nd, (size_t)(part ? 3 + i : 1 + i), part, 1, &C, 0, 0);
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
        kt *st = het_onnx_const(r, het_onnx_in(sc, 1)), *en = het_onnx_const(r, het_onnx_in(sc, 2)),
           *ax = het_onnx_const(r, het_onnx_in(sc, 3)), *sp = het_onnx_const(r, het_onnx_in(sc, 4));
        if (strcmp(sc->input[0], v) != 0 || !st || !en || st->n != en->n ||
            (ax && ax->n != st->n) || (sp && sp->n != st->n) || sc->n_attribute)
            return het_onnx_fail(
                r, sc, HET_EINVAL,
                "a residual shortcut's Slice needs constant starts, ends, axes, steps");
        for (size_t i = 0; i < st->n; i++) {
            int64_t a = ax ? ax->iv[i] : (int64_t)i, stp = sp ? sp->iv[i] : 1;
            a += a < 0 ? 4 : 0;
            if (a < 0 || a > 3 || st->iv[i] != 0 || (a > 0 && en->iv[i] < D[a]) || stp < 1 ||
                stp > 64 || (a < 2 && stp != 1))
                return het_onnx_fail(r, sc, HET_EINVAL,
                                     "a residual shortcut slices x[:, :, ::s, ::s] only");
            step[a] *= stp;
        }
        v = sc->output[0];
        sc = sole(r, v);
    }
    if (!is_op(sc, "Pad") || strcmp(sc->input[0], v) != 0 || step[2] != s || step[3] != s)
        return het_onnx_fail(r, sc, HET_EINVAL,
                             "a residual shortcut of stride %d must be x[:, :, ::%d, ::%d] "
                             "then a Pad of channels",
                             s, s, s);
    const Onnx__AttributeProto *mode = het_onnx_attr(sc, "mode");
    kt *pads = het_onnx_const(r, het_onnx_in(sc, 1)),
       *cv = het_onnx_in(sc, 2) ? het_onnx_const(r, het_onnx_in(sc, 2)) : NULL;
    int64_t before = (oc - in.c) / 2;
    int64_t want[8] = {0, before, 0, 0, 0, oc - in.c - before, 0, 0};
    int e = het_onnx_known_attrs(r, sc, "mode");
    if (e) return e;
    if (mode && !(mode->s.len == 8 && memcmp(mode->s.data, "constant", 8) == 0))
        return het_onnx_fail(r, sc, HET_EINVAL,
                             "attribute mode: hetrain pads with zeros (constant)");
    if ((het_onnx_in(sc, 2) && (!cv || cv->n != 1 || cv->fv[0] != 0)) || sc->n_input > 3)
        return het_onnx_fail(r, sc, HET_EINVAL, "a residual shortcut pads with zeros");
    if (!pads || pads->n != 8 || memcmp(pads->iv, want, sizeof want) != 0) {
        char have[96] = "?", w[96];
        if (pads) het_onnx_fmt_dims(have, sizeof have, pads->iv, pads->n);
        het_onnx_fmt_dims(w, sizeof w, want, 8);
        return het_onnx_fail(r, sc, HET_EINVAL, "pads [%s]: hetrain's option A shortcut pads [%s]",
                             have, w);
    }
    *out = sc->output[0];
    return HET_OK;
}

/* A residual block from value x, which feeds cand[0] and cand[1]; *cur moves to its output. */
static int resblock(rd *r, const size_t *cand, const char **cur) {
    size_t i1 = cand[0], i2 = cand[1];
    if (!is_op(r->g->node[i1], "Conv")) i1 = cand[1], i2 = cand[0];
    Onnx__NodeProto *c1 = r->g->node[i1], *other = r->g->node[i2];
    if (!is_op(c1, "Conv") ||
        !(is_op(other, "Add") || is_op(other, "Slice") || is_op(other, "Pad")))
        return het_onnx_fail(
            r, r->g->node[cand[0]], HET_EINVAL,
            "value '%.64s' feeds two operators: hetrain "
            "reads a chain of layers and residual blocks (Conv-BatchNormalization-Relu-Conv-"
            "BatchNormalization-Add-Relu)",
            *cur);
    const char *x = *cur;
    het_shape in = r->sh;
    int oc, k, s, p, oc2, k2, s2, p2, e;
    float eps[2], mom[2];
    r->used[i1] = 1;
    if ((e = conv_args(r, c1, &oc, &k, &s, &p))) return e;
    if (het_onnx_in(c1, 2))
        return het_onnx_fail(r, c1, HET_EINVAL,
                             "a residual block's Conv has a bias: batch norm folded "
                             "into it? (torch.onnx.export in eval mode does that; export with "
                             "training=torch.onnx.TrainingMode.PRESERVE)");
    if (k != 3 || p != 1 || oc < in.c)
        return het_onnx_fail(r, c1, HET_EINVAL,
                             "a residual block's first Conv must be 3x3, pad 1, "
                             "widening or keeping the channels");
    Onnx__NodeProto *b1 = sole(r, c1->output[0]), *r1 = b1 ? sole(r, b1->output[0]) : NULL;
    Onnx__NodeProto *c2 = r1 ? sole(r, r1->output[0]) : NULL;
    if (!is_op(b1, "BatchNormalization") || !is_op(r1, "Relu") || !is_op(c2, "Conv"))
        return het_onnx_fail(r, c1, HET_EINVAL,
                             "a residual block continues BatchNormalization-Relu-Conv");
    if ((e = bn_args(r, b1, &eps[0], &mom[0])) || (e = conv_args(r, c2, &oc2, &k2, &s2, &p2)))
        return e;
    if (k2 != 3 || p2 != 1 || s2 != 1 || het_onnx_in(c2, 2) || oc2 != oc)
        return het_onnx_fail(r, c2, HET_EINVAL,
                             "a residual block's second Conv must be 3x3, stride 1, pad 1, "
                             "without bias, %d channels",
                             oc);
    Onnx__NodeProto *b2 = sole(r, c2->output[0]), *add = b2 ? sole(r, b2->output[0]) : NULL;
    if (!is_op(b2, "BatchNormalization") || !is_op(add, "Add") || add->n_input != 2)
        return het_onnx_fail(r, c2, HET_EINVAL,
                             "a residual block continues BatchNormalization-Add");
    if ((e = bn_args(r, b2, &eps[1], &mom[1]))) return e;
    for (int i = 0; i < 2; i++)
        if (eps[i] != 1e-5f || mom[i] != 0.1f)
            return het_onnx_fail(r, i ? b2 : b1, HET_EINVAL,
                                 "epsilon %g, momentum %g: hetrain's residual "
                                 "block has 1e-05 and 0.9 (PyTorch's defaults)",
                                 (double)eps[i], 1.0 - mom[i]);
    const char *sc = x, *y = b2->output[0];
    if (other != add) {
        r->used[i2] = 1;
        if ((e = shortcut(r, other, x, in, oc, s, &sc))) return e;
    } else if (s != 1 || oc != in.c) {
        return het_onnx_fail(r, add, HET_EINVAL,
                             "an identity shortcut with stride %d, %d -> %d channels", s, in.c, oc);
    }
    if (!((strcmp(add->input[0], y) == 0 && strcmp(add->input[1], sc) == 0) ||
          (strcmp(add->input[1], y) == 0 && strcmp(add->input[0], sc) == 0)))
        return het_onnx_fail(
            r, add, HET_EINVAL,
            "a residual block adds its second BatchNormalization and its shortcut");
    Onnx__NodeProto *r2 = add->n_output == 1 ? sole(r, add->output[0]) : NULL;
    if (!is_op(r2, "Relu"))
        return het_onnx_fail(r, add, HET_EINVAL, "a residual block ends with a Relu");
    het_net_layer *L = add_layer(r, c1, HET_NL_RESBLOCK);
    if (!L) return HET_EINVAL;
    L->out = oc, L->stride = s, L->k = 3, L->pad = 1;
    L->momentum = 0.1f, L->eps = 1e-5f;
    int64_t w1[4] = {oc, in.c, 3, 3}, w2[4] = {oc, oc, 3, 3};
    if ((e = het_onnx_take(r, c1, 1, 0, 4, w1, 0, 0)) || (e = bn_take(r, b1, 0)) ||
        (e = het_onnx_take(r, c2, 1, 0, 4, w2, 0, 0)) || (e = bn_take(r, b2, 0)) ||
        (e = bn_take(r, b1, 1)) || (e = bn_take(r, b2, 1)))
        return e;
    *cur = r2->output[0];
    return HET_OK;
}

/* Pool attributes: square kernel (k 0 for global), stride, no padding. */
static int pool(rd *r, const Onnx__NodeProto *nd, het_net_kind kind, int global) {
    int64_t k = 0, s = 0, pd, dil, ceil;
    int e = het_onnx_known_attrs(r, nd,
                                 global ? ""
                                        : "kernel_shape strides pads dilations ceil_mode "
                                          "auto_pad storage_order count_include_pad");
    if (e || (!global && ((e = het_onnx_attr_int(r, nd, "kernel_shape", 2, 0, &k)) ||
                          (e = het_onnx_attr_int(r, nd, "strides", 2, 1, &s)) ||
                          (e = het_onnx_attr_int(r, nd, "pads", 4, 0, &pd)) ||
                          (e = het_onnx_attr_int(r, nd, "dilations", 2, 1, &dil)) ||
                          (e = het_onnx_attr_int(r, nd, "ceil_mode", 0, 0, &ceil)))))
        return e;
    if (r->rank != 4) return het_onnx_fail(r, nd, HET_ESHAPE, "pooling a flat value");
    if (!global && (pd != 0 || dil != 1 || ceil != 0))
        return het_onnx_fail(r, nd, HET_EINVAL,
                             "pads %lld, dilations %lld, ceil_mode %lld: hetrain pools "
                             "without padding, dilation or ceil mode",
                             (long long)pd, (long long)dil, (long long)ceil);
    if (!global && (k < 1 || k > r->sh.h || k > r->sh.w || s < 1 || s > 64))
        return het_onnx_fail(r, nd, HET_ESHAPE, "kernel %lld, stride %lld on %dx%d", (long long)k,
                             (long long)s, r->sh.h, r->sh.w);
    het_net_layer *L = add_layer(r, nd, kind);
    if (!L) return HET_EINVAL;
    L->k = (int)k, L->stride = (int)s;
    r->sh = global
                ? (het_shape){r->sh.c, 1, 1}
                : (het_shape){r->sh.c, (int)((r->sh.h - k) / s + 1), (int)((r->sh.w - k) / s + 1)};
    return extra_outputs_unused(r, nd);
}

/* A dense layer from a Gemm, or a MatMul and the Add of a bias after it; *cur moves on. */
static int dense(rd *r, const Onnx__NodeProto *nd, const char **cur) {
    int gemm = is_op(nd, "Gemm");
    const Onnx__TensorProto *w = het_onnx_init(r, het_onnx_in(nd, 1));
    int64_t ta, tb = 0, F = (int64_t)het_shape_size(r->sh);
    float al, be;
    int e = het_onnx_known_attrs(r, nd, gemm ? "alpha beta transA transB" : "");
    if (e || (e = het_onnx_attr_int(r, nd, "transA", 0, 0, &ta)) ||
        (e = het_onnx_attr_int(r, nd, "transB", 0, 0, &tb)) ||
        (e = het_onnx_attr_float(r, nd, "alpha", 1.0f, &al)) ||
        (e = het_onnx_attr_float(r, nd, "beta", 1.0f, &be)))
        return e;
    if (r->rank != 2)
        return het_onnx_fail(r, nd, HET_ESHAPE,
                             "a matrix product of a 4-D value: hetrain "
                             "needs a Flatten before it");
    if (ta != 0 || al != 1.0f || be != 1.0f || (tb != 0 && tb != 1))
        return het_onnx_fail(r, nd, HET_EINVAL,
                             "transA %lld, transB %lld, alpha %g, beta %g: hetrain trains "
                             "transA 0, alpha 1, beta 1",
                             (long long)ta, (long long)tb, (double)al, (double)be);
    if (!w || w->n_dims != 2 || w->dims[tb ? 0 : 1] < 1 || w->dims[tb ? 0 : 1] > ((int64_t)1 << 24))
        return het_onnx_fail(r, nd, HET_ESHAPE, "weight '%.64s': not an initializer of %s",
                             het_onnx_in(nd, 1) ? het_onnx_in(nd, 1) : "",
                             tb ? "[out, in]" : "[in, out]");
    int64_t O = w->dims[tb ? 0 : 1], d[2] = {O, F};
    const Onnx__NodeProto *bias = nd;
    size_t bi = 2;
    *cur = nd->output[0];
    if (!gemm) { /* MatMul: the bias is a following Add's initializer */
        size_t i = 0;
        if (nd->n_input != 2) return het_onnx_fail(r, nd, HET_EFORMAT, "%zu inputs", nd->n_input);
        Onnx__NodeProto *add = consumers(r, *cur, &i, 1) == 1 ? r->g->node[i] : NULL;
        bias = NULL;
        if (is_op(add, "Add") && add->n_input == 2 && add->n_output == 1) {
            bi = strcmp(add->input[0], *cur) == 0 ? 1 : 0;
            if (het_onnx_init(r, add->input[bi])) bias = add, r->used[i] = 1, *cur = add->output[0];
        }
    }
    het_net_layer *L = add_layer(r, nd, HET_NL_DENSE);
    if (!L) return HET_EINVAL;
    L->out = (int)O;
    if ((e = het_onnx_take(r, nd, 1, 0, 2, d, !tb, 0)) ||
        (e = het_onnx_take(r, bias ? bias : nd, bias ? bi : 99, 0, 1, &O, 0, 1)))
        return e;
    r->sh = (het_shape){(int)O, 1, 1};
    return HET_OK;
}

/* One operator of the chain reading *cur; *cur moves to its output. */
static int chain(rd *r, Onnx__NodeProto *nd, const char **cur) {
    const char *op = nd->op_type ? nd->op_type : "";
    int e;
    if (nd->n_input < 1 || !nd->input[0] || strcmp(nd->input[0], *cur) != 0 || nd->n_output < 1 ||
        !nd->output[0])
        return het_onnx_fail(r, nd, HET_EINVAL, "reads '%.64s' other than as its data input", *cur);
    if (strcmp(op, "Gemm") == 0 || strcmp(op, "MatMul") == 0) return dense(r, nd, cur);
    *cur = nd->output[0];
    if (strcmp(op, "Identity") == 0) return HET_OK;
    if (strcmp(op, "Relu") == 0)
        return (e = het_onnx_known_attrs(r, nd, "")) ? e
               : add_layer(r, nd, HET_NL_RELU)       ? HET_OK
                                                     : HET_EINVAL;
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
        return (e = het_onnx_take(r, nd, 1, 0, 4, d, 0, 0))
                   ? e
                   : het_onnx_take(r, nd, 2, 0, 1, &O, 0, 1);
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
        kt *k = het_onnx_in(nd, 1) ? het_onnx_const(r, het_onnx_in(nd, 1)) : NULL;
        if ((e = het_onnx_known_attrs(r, nd, "ratio seed")) ||
            (e = het_onnx_attr_float(r, nd, "ratio", 0.5f, &p)) ||
            (e = extra_outputs_unused(r, nd)))
            return e;
        if (het_onnx_in(nd, 1) && (!k || k->n != 1))
            return het_onnx_fail(r, nd, HET_EINVAL, "ratio: not a constant");
        if (k) p = (float)k->fv[0];
        if (!(p >= 0.0f && p < 1.0f))
            return het_onnx_fail(r, nd, HET_EINVAL, "ratio %g outside [0, 1)", (double)p);
        het_net_layer *L = add_layer(r, nd, HET_NL_DROPOUT);
        if (L) L->p = p;
        return L ? HET_OK : HET_EINVAL;
    }
    if (strcmp(op, "Flatten") == 0 || strcmp(op, "Reshape") == 0) {
        int64_t ax = 1, F = (int64_t)het_shape_size(r->sh);
        if (op[0] == 'F' && ((e = het_onnx_known_attrs(r, nd, "axis")) ||
                             (e = het_onnx_attr_int(r, nd, "axis", 0, 1, &ax))))
            return e;
        if (op[0] == 'F' && ax != 1)
            return het_onnx_fail(r, nd, HET_EINVAL,
                                 "attribute axis = %lld: hetrain flattens from axis 1",
                                 (long long)ax);
        if (op[0] == 'R') {
            kt *s = het_onnx_const(r, het_onnx_in(nd, 1));
            if ((e = het_onnx_known_attrs(r, nd, "allowzero"))) return e;
            if (!s || s->n != 2 ||
                !((s->iv[1] == -1 && (s->iv[0] >= 0 || s->iv[0] == HET_ONNX_SYM_N)) ||
                  (s->iv[1] == F && (s->iv[0] == 0 || s->iv[0] == -1))))
                return het_onnx_fail(r, nd, HET_EINVAL,
                                     "shape: hetrain reshapes to [N, -1] only (a constant shape)");
        }
        size_t i = 0;
        Onnx__NodeProto *nx = consumers(r, *cur, &i, 1) == 1 ? r->g->node[i] : NULL;
        int own = (is_op(nx, "Gemm") || is_op(nx, "MatMul")) && same_prefix(nd->name, nx->name);
        r->rank = 2;
        if (!own && !add_layer(r, nd, HET_NL_FLATTEN)) return HET_EINVAL;
        r->sh = (het_shape){(int)F, 1, 1};
        return HET_OK;
    }
    if (strcmp(op, "Pad") == 0) { /* torch's F.avg_pool2d writes one of zero pads: nothing */
        kt *p = het_onnx_const(r, het_onnx_in(nd, 1));
        for (size_t i = 0; p && i < p->n; i++)
            if (p->iv[i] != 0) p = NULL;
        return p ? HET_OK
                 : het_onnx_fail(r, nd, HET_EINVAL,
                                 "a Pad hetrain cannot train (it pads in a "
                                 "Conv, or in a residual block's shortcut)");
    }
    if (strcmp(op, "Add") == 0)
        return het_onnx_fail(r, nd, HET_EINVAL,
                             "operator hetrain cannot train outside a residual block "
                             "(Conv-BatchNormalization-Relu-Conv-BatchNormalization-Add-Relu)");
    return het_onnx_fail(
        r, nd, HET_EINVAL,
        "operator hetrain cannot train (it reads Conv, "
        "BatchNormalization, Relu, MaxPool, AveragePool, GlobalAveragePool, Flatten, Reshape, "
        "Gemm, MatMul + Add, Dropout, Identity and residual blocks)");
}

static int walk(rd *r) {
    const char *cur = NULL, *end;
    int e = het_onnx_graph_input(r, &cur);
    if (e) return e;
    r->net->input = r->sh; /* checked against the data's shape when the model is built */
    r->net->input_rank = r->rank;
    if (r->g->n_output != 1 || !r->g->output[0]->name)
        return het_onnx_fail(r, NULL, HET_EINVAL, "%zu graph outputs: hetrain reads one",
                             r->g->n_output);
    end = r->g->output[0]->name;
    while (strcmp(cur, end) != 0) {
        size_t c[2];
        int n = consumers(r, cur, c, 2);
        for (int i = 0; i < n && i < 2; i++) /* torch's x.view(x.size(0), -1): Shape(x) */
            if (is_op(r->g->node[c[i]], "Shape")) {
                if ((e = het_onnx_fold_shape(r, c[i]))) return e;
                n = consumers(r, cur, c, 2), i = -1;
            }
        if (n == 0)
            return het_onnx_fail(
                r, NULL, HET_EINVAL,
                "value '%.64s' leads nowhere: the graph's output '%.64s' is not reached", cur, end);
        e = n == 2   ? resblock(r, c, &cur)
            : n == 1 ? (r->used[c[0]] = 1, chain(r, r->g->node[c[0]], &cur))
                     : het_onnx_fail(r, r->g->node[c[0]], HET_EINVAL,
                                     "value '%.64s' feeds %d operators", cur, n);
        if (e) return e;
    }
    for (size_t i = 0; i < r->g->n_node; i++)
        if (!r->used[i])
            return het_onnx_fail(r, r->g->node[i], HET_EINVAL,
                                 "not on the way from the input to the output");
    if (r->net->n == 0) return het_onnx_fail(r, NULL, HET_EINVAL, "no layer");
    return HET_OK;
}

int het_net_read_onnx(het_net *net, const char *path) {
    memset(net, 0, sizeof *net);
    uint8_t *buf;
    size_t n = 0;
    int e = het_infile_load(path, "an ONNX model file", ONNX_MAX_BYTES, &buf, &n);
    if (e) return e;
    e = het_net_parse_onnx(net, buf, n, path);
    free(buf);
    return e;
}

int het_net_parse_onnx(het_net *net, const uint8_t *buf, size_t n, const char *path) {
    memset(net, 0, sizeof *net);
    int e = HET_OK;
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, n, buf);
    if (!m)
        return het_error_set(
            HET_EFORMAT,
            "%s: not an ONNX model (the protobuf does not parse: truncated or corrupt)", path);
    rd r = {.path = path, .g = m->graph, .net = net};
    if (!r.g || r.g->n_node == 0)
        e = het_onnx_fail(&r, NULL, HET_EFORMAT, "not an ONNX model (no graph)");
    else if (r.g->n_node > ONNX_MAX_NODES)
        e = het_onnx_fail(&r, NULL, HET_EINVAL, "%zu nodes (at most %d)", r.g->n_node,
                          ONNX_MAX_NODES);
    for (size_t i = 0; !e && i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if ((!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0) && o->version > 0 &&
            o->version < 7)
            e = het_onnx_fail(&r, NULL, HET_EINVAL, "opset %lld: hetrain reads opset 7 and later",
                              (long long)o->version);
    }
    if (!e) e = het_onnx_unique_names(&r);
    for (size_t i = 0; !e && i < r.g->n_node; i++) {
        const Onnx__NodeProto *nd = r.g->node[i];
        if (nd->domain && *nd->domain && strcmp(nd->domain, "ai.onnx") != 0)
            e = het_onnx_fail(&r, nd, HET_EINVAL, "operator of domain '%.32s' hetrain cannot train",
                              nd->domain);
        else if (!nd->op_type || nd->n_output < 1 || !nd->output[0] || nd->n_input > 64)
            e = het_onnx_fail(&r, nd, HET_EFORMAT, "no operator type or output");
    }
    if (!e) {
        r.cap_k = r.g->n_node + r.g->n_initializer;
        r.k = calloc(r.cap_k + 1, sizeof *r.k);
        r.used = calloc(r.g->n_node + 1, 1);
        e = !r.k || !r.used ? het_onnx_fail(&r, NULL, HET_ENOMEM, "out of memory")
                            : het_onnx_fold(&r);
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
    snprintf(net->name, sizeof net->name, "%.*s",
             (int)(len < sizeof net->name ? len : sizeof net->name - 1), base);
    snprintf(net->file, sizeof net->file, "%s", path);
    return HET_OK;
}

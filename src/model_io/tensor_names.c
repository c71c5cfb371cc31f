/* The one table of the model's tensor names (see tensor_names.h): the layer kinds hetrain
 * knows are recognized by their ops' name and their sizes; anything else is one flat tensor
 * of parameters and one of state, so that every float has a name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_io/tensor_names.h"

/* A growing list of tensors; `oom` once an allocation failed. */
typedef struct tlist {
    het_tensor_name *t;
    int n, cap, oom;
} tlist;

static void add(tlist *l, int layer, int state, size_t off, size_t count, int rank,
                const int *dims, const char *part) {
    if (l->oom) return;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 32;
        het_tensor_name *t = realloc(l->t, (size_t)cap * sizeof *t);
        if (!t) {
            l->oom = 1;
            return;
        }
        l->t = t;
        l->cap = cap;
    }
    het_tensor_name *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "layers.%d.%s", layer, part);
    t->layer = layer;
    t->state = state;
    t->off = off;
    t->count = count;
    t->rank = rank;
    for (int d = 0; d < rank; d++) t->dims[d] = dims[d];
}

/* The parameter tensors of layer i (params [off, off + n)). */
static void layer_tensors(tlist *b, const het_layer *l, int i, size_t off, size_t n) {
    const char *kind = l->ops->name;
    int in = (int)het_shape_size(l->in), out = (int)het_shape_size(l->out);
    int ic = l->in.c, oc = l->out.c;
    if (strcmp(kind, "dense") == 0 && n == (size_t)out * (size_t)in + (size_t)out) {
        int w[2] = {out, in};
        add(b, i, 0, off, (size_t)out * (size_t)in, 2, w, "weight");
        add(b, i, 0, off + (size_t)out * (size_t)in, (size_t)out, 1, &out, "bias");
        return;
    }
    if (strcmp(kind, "conv2d") == 0 && oc > 0 && ic > 0 && n > (size_t)oc &&
        (n - (size_t)oc) % ((size_t)oc * (size_t)ic) == 0) {
        size_t kk = (n - (size_t)oc) / ((size_t)oc * (size_t)ic);
        int k = (int)lround(sqrt((double)kk));
        if ((size_t)k * (size_t)k == kk) {
            int w[4] = {oc, ic, k, k};
            add(b, i, 0, off, n - (size_t)oc, 4, w, "weight");
            add(b, i, 0, off + n - (size_t)oc, (size_t)oc, 1, &oc, "bias");
            return;
        }
    }
    if (strcmp(kind, "batchnorm") == 0 && n == 2 * (size_t)ic) {
        add(b, i, 0, off, (size_t)ic, 1, &ic, "weight");
        add(b, i, 0, off + (size_t)ic, (size_t)ic, 1, &ic, "bias");
        return;
    }
    size_t w1 = (size_t)oc * (size_t)ic * 9, w2 = (size_t)oc * (size_t)oc * 9;
    if (strcmp(kind, "resblock") == 0 && n == w1 + w2 + 4 * (size_t)oc) {
        int d1[4] = {oc, ic, 3, 3}, d2[4] = {oc, oc, 3, 3};
        static const char *const part[6] = {"conv1.weight", "bn1.weight", "bn1.bias",
                                            "conv2.weight", "bn2.weight", "bn2.bias"};
        size_t cnt[6] = {w1, (size_t)oc, (size_t)oc, w2, (size_t)oc, (size_t)oc};
        for (int p = 0; p < 6; p++) {
            add(b, i, 0, off, cnt[p], p == 0 || p == 3 ? 4 : 1, p == 0 ? d1 : p == 3 ? d2 : &oc,
                part[p]);
            off += cnt[p];
        }
        return;
    }
    int flat = (int)n;
    add(b, i, 0, off, n, 1, &flat, "params");
}

/* The non-trainable state tensors of layer i (state [off, off + n)). */
static void layer_state_tensors(tlist *b, const het_layer *l, int i, size_t off, size_t n) {
    const char *kind = l->ops->name;
    if (strcmp(kind, "batchnorm") == 0 && n % 2 == 0) {
        int c = (int)(n / 2);
        add(b, i, 1, off, (size_t)c, 1, &c, "running_mean");
        add(b, i, 1, off + (size_t)c, (size_t)c, 1, &c, "running_var");
        return;
    }
    if (strcmp(kind, "resblock") == 0 && n % 4 == 0) {
        int c = (int)(n / 4);
        static const char *const part[4] = {"bn1.running_mean", "bn1.running_var",
                                            "bn2.running_mean", "bn2.running_var"};
        for (int p = 0; p < 4; p++)
            add(b, i, 1, off + (size_t)p * (size_t)c, (size_t)c, 1, &c, part[p]);
        return;
    }
    int flat = (int)n;
    add(b, i, 1, off, n, 1, &flat, "state");
}

int het_tensor_names(const het_model *m, het_tensor_name **out) {
    tlist l = {0};
    for (int i = 0; i < het_model_n_layers(m); i++) {
        size_t off, n;
        het_model_layer_params(m, i, &off, &n);
        if (n > 0) layer_tensors(&l, het_model_layer(m, i), i, off, n);
    }
    for (int i = 0; i < het_model_n_layers(m); i++) {
        size_t off, n;
        het_model_layer_state(m, i, &off, &n);
        if (n > 0) layer_state_tensors(&l, het_model_layer(m, i), i, off, n);
    }
    if (l.oom) {
        free(l.t);
        *out = NULL;
        return het_error_set(HET_ENOMEM, "out of memory listing the model's tensors");
    }
    *out = l.t;
    return l.n;
}

int het_tensor_names_find(const het_tensor_name *t, int nt, const char *name, size_t *prefix_len) {
    const char *idx = NULL, *rest = NULL;
    for (const char *s = name; *s;) { /* the last component of digits only */
        const char *dot = strchr(s, '.');
        size_t k = dot ? (size_t)(dot - s) : strlen(s);
        if (dot && k > 0 && strspn(s, "0123456789") == k) idx = s, rest = dot + 1;
        s += k + (dot != NULL);
    }
    *prefix_len = idx ? (size_t)(idx - name) : 0;
    if (!idx || !*rest) return -1;
    for (int k = 0; k < nt; k++) {
        size_t n = (size_t)(rest - idx); /* "<i>." */
        if (strncmp(t[k].name, "layers.", 7) == 0 && strncmp(t[k].name + 7, idx, n) == 0 &&
            strcmp(t[k].name + 7 + n, rest) == 0)
            return k;
    }
    return -1;
}

int het_tensor_names_of_layer(const het_tensor_name *t, int nt, int layer, int state, int *idx,
                              int cap) {
    int n = 0;
    for (int k = 0; k < nt && n < cap; k++)
        if (t[k].layer == layer && t[k].state == state) idx[n++] = k;
    return n;
}

/* safetensors export (https://github.com/huggingface/safetensors), and the table of the model's
 * tensor names and shapes (het_st_tensors, het_st_find) that the reader for --init-from
 * (safetensors_read.c, docs/SAFETENSORS.md) shares with it. The format: a u64 little-endian header
 * length, a JSON header {"name":{"dtype":"F32","shape":[...],"data_offsets":[begin,end]},...,
 * "__metadata__":{...}} padded with spaces to a multiple of 8, then the tensor bytes. Offsets
 * are relative to the byte after the header. The model's parameters are one flat buffer in
 * layer order with weights before biases, so the data section is that buffer as it is and each
 * tensor is a slice of it. Names and shapes follow PyTorch (nn.Sequential indices):
 *   dense      layers.i.weight [out, in], layers.i.bias [out]
 *   conv2d     layers.i.weight [oc, ic, k, k], layers.i.bias [oc]
 *   batchnorm  layers.i.weight [C], layers.i.bias [C]
 *   resblock   layers.i.{conv1,bn1,conv2,bn2}.{weight,bias}
 *   other      layers.i.params [n]
 * followed by the non-trainable state (the model's state buffer, after the parameters):
 *   batchnorm  layers.i.running_mean [C], layers.i.running_var [C]
 *   resblock   layers.i.{bn1,bn2}.{running_mean,running_var}
 *   other      layers.i.state [n] */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/outfile.h"
#include "train/internal.h"
#include "train/safetensors.h"

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 1024;
        while (cap <= b->n + (size_t)k) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
}

/* A growing list of tensors; `oom` once an allocation failed. */
typedef struct tlist {
    het_st_tensor *t;
    int n, cap, oom;
} tlist;

static void add(tlist *l, int layer, int state, size_t off, size_t count, int rank,
                const int *dims, const char *part) {
    if (l->oom) return;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 32;
        het_st_tensor *t = realloc(l->t, (size_t)cap * sizeof *t);
        if (!t) {
            l->oom = 1;
            return;
        }
        l->t = t;
        l->cap = cap;
    }
    het_st_tensor *t = &l->t[l->n++];
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

int het_st_tensors(const het_model *m, het_st_tensor **out) {
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

int het_safetensors_count(const het_model *m) {
    het_st_tensor *t;
    int n = het_st_tensors(m, &t);
    free(t);
    return n;
}

int het_st_find(const het_st_tensor *t, int nt, const char *name, size_t *prefix_len) {
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

int het_safetensors_write(het_model *m, const char *path) {
    het_st_tensor *t;
    int nt = het_st_tensors(m, &t);
    if (nt < 0) return nt;
    size_t n_params = het_model_n_params(m), n_state = het_model_n_state(m);
    sbuf b = {0};
    int first = 1;
    sb_printf(&b, "{");
    for (int k = 0; k < nt; k++) {
        size_t begin = (t[k].state ? n_params : 0) + t[k].off;
        sb_printf(&b, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[", first ? "" : ",", t[k].name);
        for (int d = 0; d < t[k].rank; d++)
            sb_printf(&b, "%s%lld", d ? "," : "", (long long)t[k].dims[d]);
        sb_printf(&b, "],\"data_offsets\":[%zu,%zu]}", begin * 4, (begin + t[k].count) * 4);
        first = 0;
    }
    free(t);
    sb_printf(&b, "%s\"__metadata__\":{\"format\":\"pt\",\"producer\":\"hetrain\"}}",
              first ? "" : ",");
    while (!b.oom && (8 + b.n) % 8 != 0) sb_printf(&b, " ");
    if (b.oom) {
        free(b.p);
        return het_error_set(HET_ENOMEM, "%s: out of memory building the header", path);
    }
    het_outfile o;
    int st = het_outfile_open(&o, path, "safetensors export");
    if (st) {
        free(b.p);
        return st;
    }
    FILE *f = o.f;
    uint8_t len[8];
    het_put_u64(len, (uint64_t)b.n);
    int ok = fwrite(len, 1, 8, f) == 8 && fwrite(b.p, 1, b.n, f) == b.n &&
             fwrite(het_model_params(m), sizeof(float), n_params, f) == n_params &&
             (n_state == 0 ||
              fwrite(het_model_state(m), sizeof(float), n_state, f) == n_state);
    int err = errno;
    free(b.p);
    if (!ok) {
        het_outfile_abort(&o);
        return het_error_set(HET_EIO, "%s: write failed: %s", path, strerror(err));
    }
    return het_outfile_commit(&o);
}

/* safetensors export (https://github.com/huggingface/safetensors): a u64 little-endian header
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

#include "train/internal.h"

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

/* One tensor entry; `first` tracks the comma. dims: rank entries. */
static void tensor(sbuf *b, int *first, const char *name, size_t begin, size_t count, int rank,
                   const int *dims) {
    sb_printf(b, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[", *first ? "" : ",", name);
    for (int i = 0; i < rank; i++) sb_printf(b, "%s%d", i ? "," : "", dims[i]);
    sb_printf(b, "],\"data_offsets\":[%zu,%zu]}", begin * 4, (begin + count) * 4);
    *first = 0;
}

/* Emits the tensors of layer i (params [off, off + n)). */
static void layer_tensors(sbuf *b, int *first, const het_layer *l, int i, size_t off, size_t n) {
    char name[96];
    const char *kind = l->ops->name;
    int in = (int)het_shape_size(l->in), out = (int)het_shape_size(l->out);
    int ic = l->in.c, oc = l->out.c;
    if (strcmp(kind, "dense") == 0 && n == (size_t)out * (size_t)in + (size_t)out) {
        int w[2] = {out, in};
        snprintf(name, sizeof name, "layers.%d.weight", i);
        tensor(b, first, name, off, (size_t)out * (size_t)in, 2, w);
        snprintf(name, sizeof name, "layers.%d.bias", i);
        tensor(b, first, name, off + (size_t)out * (size_t)in, (size_t)out, 1, &out);
        return;
    }
    if (strcmp(kind, "conv2d") == 0 && oc > 0 && ic > 0 && n > (size_t)oc &&
        (n - (size_t)oc) % ((size_t)oc * (size_t)ic) == 0) {
        size_t kk = (n - (size_t)oc) / ((size_t)oc * (size_t)ic);
        int k = (int)lround(sqrt((double)kk));
        if ((size_t)k * (size_t)k == kk) {
            int w[4] = {oc, ic, k, k};
            snprintf(name, sizeof name, "layers.%d.weight", i);
            tensor(b, first, name, off, n - (size_t)oc, 4, w);
            snprintf(name, sizeof name, "layers.%d.bias", i);
            tensor(b, first, name, off + n - (size_t)oc, (size_t)oc, 1, &oc);
            return;
        }
    }
    if (strcmp(kind, "batchnorm") == 0 && n == 2 * (size_t)ic) {
        snprintf(name, sizeof name, "layers.%d.weight", i);
        tensor(b, first, name, off, (size_t)ic, 1, &ic);
        snprintf(name, sizeof name, "layers.%d.bias", i);
        tensor(b, first, name, off + (size_t)ic, (size_t)ic, 1, &ic);
        return;
    }
    size_t w1 = (size_t)oc * (size_t)ic * 9, w2 = (size_t)oc * (size_t)oc * 9;
    if (strcmp(kind, "resblock") == 0 && n == w1 + w2 + 4 * (size_t)oc) {
        int d1[4] = {oc, ic, 3, 3}, d2[4] = {oc, oc, 3, 3};
        static const char *const part[6] = {"conv1.weight", "bn1.weight", "bn1.bias",
                                            "conv2.weight", "bn2.weight", "bn2.bias"};
        size_t cnt[6] = {w1, (size_t)oc, (size_t)oc, w2, (size_t)oc, (size_t)oc};
        for (int p = 0; p < 6; p++) {
            snprintf(name, sizeof name, "layers.%d.%s", i, part[p]);
            tensor(b, first, name, off, cnt[p], p == 0 || p == 3 ? 4 : 1,
                   p == 0 ? d1 : p == 3 ? d2 : &oc);
            off += cnt[p];
        }
        return;
    }
    int flat = (int)n;
    snprintf(name, sizeof name, "layers.%d.params", i);
    tensor(b, first, name, off, n, 1, &flat);
}

/* Emits the non-trainable state tensors of layer i (state [off, off + n) of the state buffer,
 * which follows the parameters in the data section: `base` = number of parameters). */
static void layer_state_tensors(sbuf *b, int *first, const het_layer *l, int i, size_t base,
                                size_t off, size_t n) {
    char name[96];
    const char *kind = l->ops->name;
    if (strcmp(kind, "batchnorm") == 0 && n % 2 == 0) {
        int c = (int)(n / 2);
        snprintf(name, sizeof name, "layers.%d.running_mean", i);
        tensor(b, first, name, base + off, (size_t)c, 1, &c);
        snprintf(name, sizeof name, "layers.%d.running_var", i);
        tensor(b, first, name, base + off + (size_t)c, (size_t)c, 1, &c);
        return;
    }
    if (strcmp(kind, "resblock") == 0 && n % 4 == 0) {
        int c = (int)(n / 4);
        static const char *const part[4] = {"bn1.running_mean", "bn1.running_var",
                                            "bn2.running_mean", "bn2.running_var"};
        for (int p = 0; p < 4; p++) {
            snprintf(name, sizeof name, "layers.%d.%s", i, part[p]);
            tensor(b, first, name, base + off + (size_t)p * (size_t)c, (size_t)c, 1, &c);
        }
        return;
    }
    int flat = (int)n;
    snprintf(name, sizeof name, "layers.%d.state", i);
    tensor(b, first, name, base + off, n, 1, &flat);
}

int het_safetensors_write(het_model *m, const char *path) {
    sbuf b = {0};
    int first = 1;
    sb_printf(&b, "{");
    for (int i = 0; i < het_model_n_layers(m); i++) {
        size_t off, n;
        het_model_layer_params(m, i, &off, &n);
        if (n > 0) layer_tensors(&b, &first, het_model_layer(m, i), i, off, n);
    }
    size_t n_params = het_model_n_params(m), n_state = het_model_n_state(m);
    for (int i = 0; i < het_model_n_layers(m); i++) {
        size_t off, n;
        het_model_layer_state(m, i, &off, &n);
        if (n > 0) layer_state_tensors(&b, &first, het_model_layer(m, i), i, n_params, off, n);
    }
    sb_printf(&b, "%s\"__metadata__\":{\"format\":\"pt\",\"producer\":\"hetrain\"}}",
              first ? "" : ",");
    while (!b.oom && (8 + b.n) % 8 != 0) sb_printf(&b, " ");
    if (b.oom) {
        free(b.p);
        return het_error_set(HET_ENOMEM, "%s: out of memory building the header", path);
    }
    char tmp[HET_PATH_LEN + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(b.p);
        return het_error_set(HET_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    }
    uint8_t len[8];
    het_put_u64(len, (uint64_t)b.n);
    int ok = fwrite(len, 1, 8, f) == 8 && fwrite(b.p, 1, b.n, f) == b.n &&
             fwrite(het_model_params(m), sizeof(float), n_params, f) == n_params &&
             (n_state == 0 ||
              fwrite(het_model_state(m), sizeof(float), n_state, f) == n_state) &&
             fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = errno;
    free(b.p);
    if (fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        if (ok) err = errno;
        remove(tmp);
        return het_error_set(HET_EIO, "%s: write failed: %s", path, strerror(err));
    }
    return HET_OK;
}

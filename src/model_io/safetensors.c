/* safetensors export (https://github.com/huggingface/safetensors); the reader for --init-from
 * is safetensors_read.c (docs/SAFETENSORS.md); the tensors' names are the one table of
 * tensor_names.c, which the ONNX export uses too. The format: a u64 little-endian header
 * length, a JSON header {"name":{"dtype":"F32","shape":[...],"data_offsets":[begin,end]},...,
 * "__metadata__":{...}} padded with spaces to a multiple of 8, then the tensor bytes. Offsets
 * are relative to the byte after the header. The model's parameters are one flat buffer in
 * layer order with weights before biases, so the data section is that buffer as it is and each
 * tensor is a slice of it; the non-trainable state (the model's state buffer) follows the
 * parameters. Names and shapes follow PyTorch (tensor_names.h lists them). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bytes.h"
#include "core/outfile.h"
#include "hetrain/netfile.h"
#include "model_io/tensor_names.h"

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

int het_safetensors_count(const het_model *m) {
    het_tensor_name *t;
    int n = het_tensor_names(m, &t);
    free(t);
    return n;
}

int het_safetensors_write(het_model *m, const char *path) {
    het_tensor_name *t;
    int nt = het_tensor_names(m, &t);
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

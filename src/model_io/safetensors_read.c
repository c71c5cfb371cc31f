/* DESIGN: safetensors import (het_safetensors_read; the format is in safetensors.c and
 * docs/SAFETENSORS.md, the names in tensor_names.h).
 *
 * The file is checked whole before anything reaches the model: the 8-byte header length
 * against the file's size and a 100 MB cap (the reference implementation's), the JSON header
 * by a small strict reader of the format's flat grammar (safetensors_json.c), every tensor's
 * dtype, shape and data_offsets (inside the data, the byte count of its dtype and shape, no
 * two overlapping), each model tensor present once, no tensor the model lacks. Only
 * then are the tensors read into a staging copy of the parameters and state, and that copy
 * into the model. Every message is one line: "FILE: offset N: ...", N the file offset of the
 * byte or the tensor's name in the header.
 *
 * Names: hetrain's are "layers.<i>.<rest>"; a file's name is "<prefix><i>.<rest>", the layer
 * index <i> being its last component of digits only, and every tensor of a file must have
 * the same prefix ("", "layers.", "net.", "features.", ...). The data is taken as
 * little-endian, as the writer writes it (hetrain's hosts are). */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/stat.h>

#include "core/bytes.h"
#include "core/infile.h"
#include "hetrain/comm.h" /* het_wire_fp16_to_float, het_wire_bf16_to_float */
#include "hetrain/netfile.h"
#include "model_io/safetensors_json.h"
#include "model_io/tensor_names.h"

#define ST_MAX_HEADER 100000000ull /* bytes */
#define ST_MAX_DIMS 8
#define ST_MAX_NAME 256 /* bytes of a tensor's name, NUL included */

/* ------------------------------------------------------------------------ tensors */

/* One header entry as read. */
typedef struct st_entry {
    char dtype[16];
    int rank;
    uint64_t dims[ST_MAX_DIMS];
    uint64_t begin, end;
} st_entry;

/* A tensor's bytes in the data section, and where its name is in the header. */
typedef struct st_span {
    uint64_t begin, end;
    size_t name_at;
} st_span;

/* What the reader knows while it checks the header. */
typedef struct st_read {
    const char *path;
    het_tensor_name *t; /* the model's tensors */
    int nt;
    int *het_json_found;       /* per model tensor: 0, or 1 + its dtype code (dtype_size's index) */
    uint64_t *begin;  /* per model tensor: its data offset */
    st_span *span;
    size_t n_span, cap_span;
    uint64_t data_len;
    char prefix[ST_MAX_NAME], prefix_of[ST_MAX_NAME]; /* the first tensor's prefix and name */
    int have_prefix;
} st_read;

static const struct {
    const char *name;
    unsigned size;
} dtypes[] = {{"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F64", 8}, /* the four read as floats */
              {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2},
              {"U16", 2}, {"I32", 4}, {"U32", 4}, {"I64", 8}, {"U64", 8}};
#define ST_N_FLOAT 4

static int dtype_index(const char *s) {
    for (int k = 0; k < (int)(sizeof dtypes / sizeof dtypes[0]); k++)
        if (strcmp(s, dtypes[k].name) == 0) return k;
    return -1;
}

/* "[120, 400]" */
static void fmt_shape(char *b, size_t n, int rank, const uint64_t *u, const int64_t *s) {
    size_t k = (size_t)snprintf(b, n, "[");
    for (int d = 0; d < rank && k < n; d++)
        k += (size_t)snprintf(b + k, n - k, "%s%llu", d ? ", " : "",
                              u ? (unsigned long long)u[d] : (unsigned long long)s[d]);
    if (k < n) snprintf(b + k, n - k, "]");
}

/* The entry's value: {"dtype": ..., "shape": [...], "data_offsets": [b, e]}, each once. */
static int jentry(het_json *c, const char *name, st_entry *e) {
    static const char *const field[3] = {"dtype", "shape", "data_offsets"};
    int seen[3] = {0, 0, 0};
    char key[32];
    if (het_json_expect(c, '{', "to open a tensor's entry")) return HET_EFORMAT;
    for (;;) {
        size_t at = c->i;
        if (het_json_string(c, key, sizeof key) || het_json_expect(c, ':', "after a key"))
            return HET_EFORMAT;
        int f = 0;
        while (f < 3 && strcmp(key, field[f]) != 0) f++;
        if (f == 3 || seen[f]) {
            c->i = at;
            het_json_ws(c);
            return HET_JSON_ERR(c, "tensor '%.96s': %s field '%s'", name,
                                f == 3 ? "unknown" : "repeated", key);
        }
        seen[f] = 1;
        if (f == 0 && het_json_string(c, e->dtype, sizeof e->dtype)) return HET_EFORMAT;
        if (f == 1) {
            if (het_json_expect(c, '[', "to open a shape")) return HET_EFORMAT;
            het_json_ws(c);
            e->rank = 0;
            if (c->i < c->n && c->p[c->i] == ']') c->i++;
            else
                for (;;) {
                    if (e->rank == ST_MAX_DIMS)
                        return HET_JSON_ERR(c, "tensor '%.96s': more than %d dimensions", name,
                                    ST_MAX_DIMS);
                    if (het_json_uint(c, &e->dims[e->rank++])) return HET_EFORMAT;
                    het_json_ws(c);
                    if (c->i < c->n && c->p[c->i] == ',') c->i++;
                    else if (het_json_expect(c, ']', "or ',' in a shape")) return HET_EFORMAT;
                    else break;
                }
        }
        if (f == 2 &&
            (het_json_expect(c, '[', "to open data_offsets") || het_json_uint(c, &e->begin) ||
             het_json_expect(c, ',', "between the two data_offsets") || het_json_uint(c, &e->end) ||
             het_json_expect(c, ']', "after the two data_offsets")))
            return HET_EFORMAT;
        het_json_ws(c);
        if (c->i < c->n && c->p[c->i] == ',') {
            c->i++;
            continue;
        }
        if (het_json_expect(c, '}', "or ',' in a tensor's entry")) return HET_EFORMAT;
        break;
    }
    for (int f = 0; f < 3; f++)
        if (!seen[f]) {
            c->i--;
            return HET_JSON_ERR(c, "tensor '%.96s': no %s", name, field[f]);
        }
    return HET_OK;
}

/* Checks one tensor entry (its name at header position `at`) against the data and the model. */
static int check_entry(st_read *r, const char *name, size_t at, const st_entry *e) {
    uint64_t off = 8 + (uint64_t)at;
    int dt = dtype_index(e->dtype);
    if (dt < 0)
        return het_json_fail(r->path, off, "tensor '%.96s': unknown dtype '%s'", name, e->dtype);
    uint64_t bytes = dtypes[dt].size;
    for (int d = 0; d < e->rank; d++) {
        if (e->dims[d] && bytes > UINT64_MAX / e->dims[d]) {
            bytes = UINT64_MAX; /* more than any file holds: the size check below fails */
            break;
        }
        bytes *= e->dims[d];
    }
    char sh[160];
    fmt_shape(sh, sizeof sh, e->rank, e->dims, NULL);
    if (e->begin > e->end)
        return het_json_fail(r->path, off,
                             "tensor '%.96s': data_offsets [%llu, %llu] end before they "
                             "begin",
                             name, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > r->data_len)
        return het_json_fail(r->path, off,
                             "tensor '%.96s': data_offsets [%llu, %llu] beyond the %llu "
                             "bytes of data (a truncated file?)",
                             name, (unsigned long long)e->begin, (unsigned long long)e->end,
                             (unsigned long long)r->data_len);
    if (e->end - e->begin != bytes)
        return het_json_fail(r->path, off,
                             "tensor '%.96s': data_offsets [%llu, %llu] hold %llu bytes, "
                             "dtype %s shape %s needs %s%llu",
                             name, (unsigned long long)e->begin, (unsigned long long)e->end,
                             (unsigned long long)(e->end - e->begin), e->dtype, sh,
                             bytes == UINT64_MAX ? "more than " : "", (unsigned long long)bytes);
    if (r->n_span == r->cap_span) {
        size_t cap = r->cap_span ? 2 * r->cap_span : 64;
        st_span *s = realloc(r->span, cap * sizeof *s);
        if (!s) return het_error_set(HET_ENOMEM, "%s: out of memory reading the header", r->path);
        r->span = s;
        r->cap_span = cap;
    }
    r->span[r->n_span++] = (st_span){e->begin, e->end, at};
    /* PyTorch's BatchNorm counter (I64): not hetrain's */
    size_t len = strlen(name);
    if (len >= 19 && strcmp(name + len - 19, "num_batches_tracked") == 0 &&
        (len == 19 || name[len - 20] == '.'))
        return HET_OK;
    size_t plen;
    int k = het_tensor_names_find(r->t, r->nt, name, &plen);
    if (k < 0)
        return het_json_fail(r->path, off, "tensor '%.96s' is not a tensor of this model (another "
                    "network? names: docs/SAFETENSORS.md)", name);
    if (!r->have_prefix) {
        memcpy(r->prefix, name, plen);
        r->prefix[plen] = '\0';
        snprintf(r->prefix_of, sizeof r->prefix_of, "%s", name);
        r->have_prefix = 1;
    } else if (strlen(r->prefix) != plen || memcmp(r->prefix, name, plen) != 0) {
        return het_json_fail(r->path, off,
                             "tensor '%.96s' has the prefix '%.*s' before its layer index, "
                             "but '%.96s' has '%s' (one common prefix: docs/SAFETENSORS.md)",
                             name, (int)plen, name, r->prefix_of, r->prefix);
    }
    if (r->het_json_found[k])
        return het_json_fail(r->path, off, "tensor '%.96s' given twice", name);
    char want[160];
    fmt_shape(want, sizeof want, r->t[k].rank, NULL, r->t[k].dims);
    int same = e->rank == r->t[k].rank;
    for (int d = 0; same && d < e->rank; d++) same = e->dims[d] == (uint64_t)r->t[k].dims[d];
    if (!same)
        return het_json_fail(r->path, off, "tensor '%.96s': shape %s, expected %s", name, sh, want);
    if (dt >= ST_N_FLOAT)
        return het_json_fail(r->path, off,
                             "tensor '%.96s': dtype %s, expected F32 (or F16, BF16, F64)", name,
                             e->dtype);
    r->het_json_found[k] = 1 + dt;
    r->begin[k] = e->begin;
    return HET_OK;
}

/* The header: one object of tensor entries and at most one "__metadata__". */
static int check_header(st_read *r, het_json *c) {
    char name[ST_MAX_NAME], b[16];
    int meta = 0;
    if (het_json_expect(c, '{', "to open the header")) return HET_EFORMAT;
    het_json_ws(c);
    if (c->i < c->n && c->p[c->i] == '}') c->i++;
    else
        for (;;) {
            het_json_ws(c);
            size_t at = c->i;
            if (het_json_string(c, name, sizeof name) ||
                het_json_expect(c, ':', "after a tensor's name"))
                return HET_EFORMAT;
            if (strcmp(name, "__metadata__") == 0) {
                het_json_ws(c);
                if (meta) return het_json_fail(r->path, 8 + at, "\"__metadata__\" given twice");
                if (c->i >= c->n || c->p[c->i] != '{')
                    return HET_JSON_ERR(c, "\"__metadata__\" is not an object");
                if (het_json_skip(c, 1)) return HET_EFORMAT;
                meta = 1;
            } else {
                st_entry e;
                memset(&e, 0, sizeof e);
                int st = jentry(c, name, &e);
                if (!st) st = check_entry(r, name, at, &e);
                if (st) return st;
            }
            het_json_ws(c);
            if (c->i < c->n && c->p[c->i] == ',') {
                c->i++;
                continue;
            }
            if (het_json_expect(c, '}', "or ',' after a tensor")) return HET_EFORMAT;
            break;
        }
    het_json_ws(c);
    if (c->i < c->n)
        return HET_JSON_ERR(c, "%s after the header's object", het_json_found(c, b, sizeof b));
    return HET_OK;
}

static int span_cmp(const void *a, const void *b) {
    const st_span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* No two tensors share a byte; each tensor of the model is there. */
static int check_whole(st_read *r, het_json *c) {
    if (r->n_span) qsort(r->span, r->n_span, sizeof *r->span, span_cmp);
    size_t last = 0; /* the non-empty span that ends furthest so far */
    int have = 0;
    for (size_t s = 0; s < r->n_span; s++) {
        const st_span *x = &r->span[s];
        if (x->begin == x->end) continue;
        if (have && x->begin < r->span[last].end) {
            char a[ST_MAX_NAME], b2[ST_MAX_NAME];
            c->i = r->span[last].name_at;
            het_json_string(c, a, sizeof a);
            c->i = x->name_at;
            het_json_string(c, b2, sizeof b2);
            return het_json_fail(r->path, 8 + (uint64_t)x->name_at,
                                 "tensors '%.96s' [%llu, %llu] and "
                                 "'%.96s' [%llu, %llu] overlap",
                                 b2, (unsigned long long)x->begin, (unsigned long long)x->end, a,
                                 (unsigned long long)r->span[last].begin,
                                 (unsigned long long)r->span[last].end);
        }
        if (!have || x->end > r->span[last].end) last = s;
        have = 1;
    }
    for (int k = 0; k < r->nt; k++)
        if (!r->het_json_found[k]) {
            char want[160];
            fmt_shape(want, sizeof want, r->t[k].rank, NULL, r->t[k].dims);
            const char *rest = r->t[k].name + 7; /* after "layers." */
            return het_error_set(HET_EFORMAT, "%s: no tensor '%s%s' (shape %s), which the model "
                                 "needs", r->path, r->have_prefix ? r->prefix : "layers.",
                                 rest, want);
        }
    return HET_OK;
}

/* Reads tensor k's bytes into dst (its count floats), converting from its dtype. */
static int read_tensor(st_read *r, FILE *f, uint64_t data_at, int k, float *dst, void *tmp) {
    const het_tensor_name *t = &r->t[k];
    int dt = r->het_json_found[k] - 1;
    size_t bytes = t->count * dtypes[dt].size;
    if (fseeko(f, (off_t)(data_at + r->begin[k]), SEEK_SET) != 0 ||
        fread(dt == 0 ? (void *)dst : tmp, 1, bytes, f) != bytes)
        return het_error_set(HET_EIO, "%s: offset %llu: tensor '%s': read failed: %s", r->path,
                             (unsigned long long)(data_at + r->begin[k]), t->name,
                             ferror(f) ? strerror(errno) : "end of file");
    const unsigned char *p = tmp;
    for (size_t j = 0; dt && j < t->count; j++) {
        if (dt == 3) {
            double v;
            memcpy(&v, p + 8 * j, 8);
            dst[j] = (float)v;
        } else {
            uint16_t h = (uint16_t)(p[2 * j] | p[2 * j + 1] << 8);
            dst[j] = dt == 1 ? het_wire_fp16_to_float(h) : het_wire_bf16_to_float(h);
        }
    }
    /* a NaN or infinity would train as a divergence, far from its cause: refused here */
    for (size_t j = 0; j < t->count; j++)
        if (!isfinite(dst[j])) {
            uint64_t at = data_at + r->begin[k] + j * dtypes[dt].size;
            double v = 0;
            if (dt == 3) memcpy(&v, p + 8 * j, 8);
            const char *what = isnan(dst[j])             ? "NaN"
                               : dt == 3 && isfinite(v) ? "beyond float32's range"
                                                        : "infinite";
            return het_json_fail(r->path, at,
                                 "tensor '%s%s': element %zu is %s, expected finite weights",
                                 r->have_prefix ? r->prefix : "layers.", t->name + 7, j, what);
        }
    /* a negative running variance makes batch norm's evaluation take a square root of it */
    const size_t nl = strlen(t->name);
    for (size_t j = 0; nl >= 11 && !strcmp(t->name + nl - 11, "running_var") && j < t->count; j++)
        if (dst[j] < 0.0f)
            return het_json_fail(r->path, data_at + r->begin[k] + j * dtypes[dt].size,
                                 "tensor '%s%s': "
                                 "element %zu is %g, expected a variance >= 0",
                                 r->have_prefix ? r->prefix : "layers.", t->name + 7, j,
                                 (double)dst[j]);
    return HET_OK;
}

int het_safetensors_read(het_model *m, const char *path) {
    st_read r;
    memset(&r, 0, sizeof r);
    r.path = path;
    char *hdr = NULL;
    float *stage = NULL;
    void *tmp = NULL;
    int st = HET_OK;
    FILE *f = NULL;
    uint64_t size = 0;
    uint8_t len8[8];
    if ((st = het_infile_fopen(path, "a safetensors file", 0, &f, &size))) return st;
    if (size < 8 || fread(len8, 1, 8, f) != 8) {
        st = het_json_fail(path, 0,
                           "%llu bytes, too short for a safetensors file (an 8-byte header "
                           "length first)",
                           (unsigned long long)size);
        goto done;
    }
    uint64_t hlen = het_get_u64(len8);
    if (hlen > ST_MAX_HEADER) {
        st = het_json_fail(path, 0, "header length %llu, over the limit of 100 MB",
                  (unsigned long long)hlen);
        goto done;
    }
    if (hlen > size - 8) {
        st = het_json_fail(path, 0,
                           "header length %llu, but only %llu bytes follow (a truncated file?)",
                           (unsigned long long)hlen, (unsigned long long)(size - 8));
        goto done;
    }
    r.data_len = size - 8 - hlen;
    if ((r.nt = het_tensor_names(m, &r.t)) < 0) {
        st = r.nt;
        goto done;
    }
    size_t np = het_model_n_params(m), ns = het_model_n_state(m), maxc = 1;
    hdr = malloc(hlen ? hlen : 1);
    r.het_json_found = calloc((size_t)r.nt + 1, sizeof *r.het_json_found);
    r.begin = calloc((size_t)r.nt + 1, sizeof *r.begin);
    for (int k = 0; k < r.nt; k++) maxc = r.t[k].count > maxc ? r.t[k].count : maxc;
    stage = malloc((np + ns + 1) * sizeof *stage);
    tmp = malloc(maxc * 8);
    if (!hdr || !r.het_json_found || !r.begin || !stage || !tmp) {
        st = het_error_set(HET_ENOMEM, "%s: out of memory reading it", path);
        goto done;
    }
    if (fread(hdr, 1, hlen, f) != hlen) {
        st = het_error_set(HET_EIO, "%s: offset 8: reading the header failed: %s", path,
                           ferror(f) ? strerror(errno) : "end of file");
        goto done;
    }
    het_json c = {hdr, hlen, 0, path};
    if ((st = check_header(&r, &c)) || (st = check_whole(&r, &c))) goto done;
    for (int k = 0; k < r.nt && !st; k++)
        st = read_tensor(&r, f, 8 + hlen, k, stage + (r.t[k].state ? np : 0) + r.t[k].off, tmp);
    if (st) goto done;
    memcpy(het_model_params(m), stage, np * sizeof *stage);
    if (ns) memcpy(het_model_state(m), stage + np, ns * sizeof *stage);
done:
    fclose(f);
    free(hdr);
    free(stage);
    free(tmp);
    free(r.t);
    free(r.het_json_found);
    free(r.begin);
    free(r.span);
    return st;
}

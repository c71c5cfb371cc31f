/* DESIGN: safetensors import (het_safetensors_read; the format is in safetensors.c and
 * docs/SAFETENSORS.md, the names in tensor_names.h).
 *
 * The file is checked whole before anything reaches the model: the 8-byte header length
 * against the file's size and a 100 MB cap (the reference implementation's), the JSON header
 * by a small strict reader of the format's flat grammar below (no JSON reader sits below
 * train/: cli/jsonl.c is above it, and a dependency for ~150 lines was not worth it), every
 * tensor's dtype, shape and data_offsets (inside the data, the byte count of its dtype and
 * shape, no two overlapping), each model tensor present once, no tensor the model lacks. Only
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
#include "model_io/tensor_names.h"

#define ST_MAX_HEADER 100000000ull /* bytes */
#define ST_MAX_DIMS 8
#define ST_MAX_NAME 256 /* bytes of a tensor's name, NUL included */
#define ST_MAX_DEPTH 64 /* nesting inside "__metadata__" */

/* A cursor over the header; positions are reported as file offsets (8 + i). */
typedef struct jcur {
    const char *p;
    size_t n, i;
    const char *path;
} jcur;

/* HET_EFORMAT, "path: offset off: ..." */
static int ferr(const char *path, uint64_t off, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int ferr(const char *path, uint64_t off, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return het_error_set(HET_EFORMAT, "%s: offset %llu: %s", path, (unsigned long long)off, msg);
}
/* The same at the cursor. */
#define jerr(c, ...) ferr((c)->path, 8 + (uint64_t)(c)->i, __VA_ARGS__)

/* What is at the cursor, for messages: "'x'", "byte 0x01" or "the header's end". */
static const char *found(const jcur *c, char *buf, size_t n) {
    if (c->i >= c->n) return "the header's end";
    unsigned char ch = (unsigned char)c->p[c->i];
    if (ch >= 0x20 && ch < 0x7f) snprintf(buf, n, "'%c'", ch);
    else snprintf(buf, n, "byte 0x%02x", ch);
    return buf;
}

static void ws(jcur *c) {
    while (c->i < c->n && (c->p[c->i] == ' ' || c->p[c->i] == '\t' || c->p[c->i] == '\n' ||
                           c->p[c->i] == '\r'))
        c->i++;
}

/* Skips white space, then consumes ch or fails saying what was expected `where`. */
static int expect(jcur *c, char ch, const char *where) {
    char b[16];
    ws(c);
    if (c->i < c->n && c->p[c->i] == ch) {
        c->i++;
        return HET_OK;
    }
    return jerr(c, "expected '%c' %s, found %s", ch, where, found(c, b, sizeof b));
}

static int hex4(jcur *c, unsigned *v) {
    *v = 0;
    for (int k = 0; k < 4; k++, c->i++) {
        char ch = c->i < c->n ? c->p[c->i] : '\0';
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0) return jerr(c, "bad \\u escape: 4 hex digits expected");
        *v = *v * 16 + (unsigned)d;
    }
    return HET_OK;
}

/* A JSON string (after white space) into out[cap] (NUL-terminated), or skipped if out is
 * NULL. Escapes are decoded (\u as UTF-8, surrogate pairs joined); raw control characters,
 * \u0000 and lone surrogates are refused. */
static int jstring(jcur *c, char *out, size_t cap) {
    static const char esc_in[] = "\"\\/bfnrt", esc_out[] = "\"\\/\b\f\n\r\t";
    char b[16];
    size_t k = 0;
    ws(c);
    if (c->i >= c->n || c->p[c->i] != '"')
        return jerr(c, "expected a string, found %s", found(c, b, sizeof b));
    c->i++;
    for (;;) {
        if (c->i >= c->n) return jerr(c, "unterminated string");
        unsigned char ch = (unsigned char)c->p[c->i];
        char u8[4];
        size_t nu = 1;
        if (ch == '"') {
            c->i++;
            break;
        }
        if (ch < 0x20) return jerr(c, "control byte 0x%02x in a string", ch);
        u8[0] = (char)ch;
        if (ch == '\\') {
            c->i++;
            const char *e = c->i < c->n && c->p[c->i] ? strchr(esc_in, c->p[c->i]) : NULL;
            if (c->i < c->n && c->p[c->i] == 'u') {
                c->i++;
                unsigned v, lo;
                if (hex4(c, &v)) return HET_EFORMAT;
                if (v >= 0xdc00 && v < 0xe000) return jerr(c, "lone low surrogate in \\u");
                if (v >= 0xd800 && v < 0xdc00) {
                    if (c->i + 1 >= c->n || c->p[c->i] != '\\' || c->p[c->i + 1] != 'u')
                        return jerr(c, "high surrogate without its low half");
                    c->i += 2;
                    if (hex4(c, &lo)) return HET_EFORMAT;
                    if (lo < 0xdc00 || lo >= 0xe000)
                        return jerr(c, "high surrogate without its low half");
                    v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
                }
                if (v == 0) return jerr(c, "\\u0000 in a string");
                if (v < 0x80) u8[0] = (char)v;
                else if (v < 0x800) {
                    u8[0] = (char)(0xc0 | v >> 6), u8[1] = (char)(0x80 | (v & 0x3f)), nu = 2;
                } else if (v < 0x10000) {
                    u8[0] = (char)(0xe0 | v >> 12), u8[1] = (char)(0x80 | (v >> 6 & 0x3f));
                    u8[2] = (char)(0x80 | (v & 0x3f)), nu = 3;
                } else {
                    u8[0] = (char)(0xf0 | v >> 18), u8[1] = (char)(0x80 | (v >> 12 & 0x3f));
                    u8[2] = (char)(0x80 | (v >> 6 & 0x3f)), u8[3] = (char)(0x80 | (v & 0x3f));
                    nu = 4;
                }
                c->i--; /* hex4 left the cursor after the digits; the common step follows */
            } else if (e) {
                u8[0] = esc_out[e - esc_in];
            } else {
                return jerr(c, "bad escape in a string");
            }
        }
        c->i++;
        if (out) {
            if (k + nu >= cap) return jerr(c, "string longer than %zu bytes", cap - 1);
            memcpy(out + k, u8, nu);
        }
        k += nu;
    }
    if (out) out[k] = '\0';
    return HET_OK;
}

/* A non-negative integer (after white space) without sign, fraction or exponent. */
static int juint(jcur *c, uint64_t *v) {
    char b[16];
    ws(c);
    size_t s = c->i;
    *v = 0;
    while (c->i < c->n && c->p[c->i] >= '0' && c->p[c->i] <= '9') {
        unsigned d = (unsigned)(c->p[c->i] - '0');
        if (*v > (UINT64_MAX - d) / 10) return jerr(c, "integer too large");
        *v = *v * 10 + d;
        c->i++;
    }
    if (c->i == s)
        return jerr(c, "expected a non-negative integer, found %s", found(c, b, sizeof b));
    if (c->i - s > 1 && c->p[s] == '0') return jerr(c, "integer with a leading zero");
    if (c->i < c->n && (c->p[c->i] == '.' || c->p[c->i] == 'e' || c->p[c->i] == 'E'))
        return jerr(c, "expected an integer, found a fraction or an exponent");
    return HET_OK;
}

/* Skips decimal digits; returns how many. */
static size_t digits(jcur *c) {
    size_t s = c->i;
    while (c->i < c->n && c->p[c->i] >= '0' && c->p[c->i] <= '9') c->i++;
    return c->i - s;
}

/* Any JSON value (after white space), skipped: the contents of "__metadata__". */
static int jskip(jcur *c, int depth) {
    char b[16];
    ws(c);
    if (depth > ST_MAX_DEPTH) return jerr(c, "values nested deeper than %d", ST_MAX_DEPTH);
    if (c->i >= c->n) return jerr(c, "expected a value, found the header's end");
    char ch = c->p[c->i];
    if (ch == '"') return jstring(c, NULL, 0);
    if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        c->i++;
        ws(c);
        if (c->i < c->n && c->p[c->i] == close) {
            c->i++;
            return HET_OK;
        }
        for (;;) {
            if (ch == '{' && (jstring(c, NULL, 0) || expect(c, ':', "after a key")))
                return HET_EFORMAT;
            if (jskip(c, depth + 1)) return HET_EFORMAT;
            ws(c);
            if (c->i < c->n && c->p[c->i] == ',') {
                c->i++;
                continue;
            }
            return expect(c, close, ch == '{' ? "or ',' in an object" : "or ',' in an array");
        }
    }
    static const char *const lit[3] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++)
        if (c->n - c->i >= strlen(lit[k]) && memcmp(c->p + c->i, lit[k], strlen(lit[k])) == 0) {
            c->i += strlen(lit[k]);
            return HET_OK;
        }
    if (ch == '-' || (ch >= '0' && ch <= '9')) { /* -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)? */
        c->i += ch == '-';
        if (c->i < c->n && c->p[c->i] == '0') c->i++;
        else if (!digits(c)) return jerr(c, "bad number");
        if (c->i < c->n && c->p[c->i] == '.') {
            c->i++;
            if (!digits(c)) return jerr(c, "bad number: no digit after '.'");
        }
        if (c->i < c->n && (c->p[c->i] == 'e' || c->p[c->i] == 'E')) {
            c->i++;
            if (c->i < c->n && (c->p[c->i] == '+' || c->p[c->i] == '-')) c->i++;
            if (!digits(c)) return jerr(c, "bad number: no digit in the exponent");
        }
        return HET_OK;
    }
    return jerr(c, "expected a value, found %s", found(c, b, sizeof b));
}

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
    int *found;       /* per model tensor: 0, or 1 + its dtype code (dtype_size's index) */
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
static int jentry(jcur *c, const char *name, st_entry *e) {
    static const char *const field[3] = {"dtype", "shape", "data_offsets"};
    int seen[3] = {0, 0, 0};
    char key[32];
    if (expect(c, '{', "to open a tensor's entry")) return HET_EFORMAT;
    for (;;) {
        size_t at = c->i;
        if (jstring(c, key, sizeof key) || expect(c, ':', "after a key")) return HET_EFORMAT;
        int f = 0;
        while (f < 3 && strcmp(key, field[f]) != 0) f++;
        if (f == 3 || seen[f]) {
            c->i = at;
            ws(c);
            return jerr(c, "tensor '%.96s': %s field '%s'", name, f == 3 ? "unknown" : "repeated",
                        key);
        }
        seen[f] = 1;
        if (f == 0 && jstring(c, e->dtype, sizeof e->dtype)) return HET_EFORMAT;
        if (f == 1) {
            if (expect(c, '[', "to open a shape")) return HET_EFORMAT;
            ws(c);
            e->rank = 0;
            if (c->i < c->n && c->p[c->i] == ']') c->i++;
            else
                for (;;) {
                    if (e->rank == ST_MAX_DIMS)
                        return jerr(c, "tensor '%.96s': more than %d dimensions", name,
                                    ST_MAX_DIMS);
                    if (juint(c, &e->dims[e->rank++])) return HET_EFORMAT;
                    ws(c);
                    if (c->i < c->n && c->p[c->i] == ',') c->i++;
                    else if (expect(c, ']', "or ',' in a shape")) return HET_EFORMAT;
                    else break;
                }
        }
        if (f == 2 && (expect(c, '[', "to open data_offsets") || juint(c, &e->begin) ||
                       expect(c, ',', "between the two data_offsets") || juint(c, &e->end) ||
                       expect(c, ']', "after the two data_offsets")))
            return HET_EFORMAT;
        ws(c);
        if (c->i < c->n && c->p[c->i] == ',') {
            c->i++;
            continue;
        }
        if (expect(c, '}', "or ',' in a tensor's entry")) return HET_EFORMAT;
        break;
    }
    for (int f = 0; f < 3; f++)
        if (!seen[f]) {
            c->i--;
            return jerr(c, "tensor '%.96s': no %s", name, field[f]);
        }
    return HET_OK;
}

/* Checks one tensor entry (its name at header position `at`) against the data and the model. */
static int check_entry(st_read *r, const char *name, size_t at, const st_entry *e) {
    uint64_t off = 8 + (uint64_t)at;
    int dt = dtype_index(e->dtype);
    if (dt < 0) return ferr(r->path, off, "tensor '%.96s': unknown dtype '%s'", name, e->dtype);
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
        return ferr(r->path, off, "tensor '%.96s': data_offsets [%llu, %llu] end before they "
                    "begin", name, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > r->data_len)
        return ferr(r->path, off, "tensor '%.96s': data_offsets [%llu, %llu] beyond the %llu "
                    "bytes of data (a truncated file?)", name, (unsigned long long)e->begin,
                    (unsigned long long)e->end, (unsigned long long)r->data_len);
    if (e->end - e->begin != bytes)
        return ferr(r->path, off, "tensor '%.96s': data_offsets [%llu, %llu] hold %llu bytes, "
                    "dtype %s shape %s needs %s%llu", name, (unsigned long long)e->begin,
                    (unsigned long long)e->end, (unsigned long long)(e->end - e->begin),
                    e->dtype, sh, bytes == UINT64_MAX ? "more than " : "",
                    (unsigned long long)bytes);
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
        return ferr(r->path, off, "tensor '%.96s' is not a tensor of this model (another "
                    "network? names: docs/SAFETENSORS.md)", name);
    if (!r->have_prefix) {
        memcpy(r->prefix, name, plen);
        r->prefix[plen] = '\0';
        snprintf(r->prefix_of, sizeof r->prefix_of, "%s", name);
        r->have_prefix = 1;
    } else if (strlen(r->prefix) != plen || memcmp(r->prefix, name, plen) != 0) {
        return ferr(r->path, off, "tensor '%.96s' has the prefix '%.*s' before its layer index, "
                    "but '%.96s' has '%s' (one common prefix: docs/SAFETENSORS.md)", name,
                    (int)plen, name, r->prefix_of, r->prefix);
    }
    if (r->found[k]) return ferr(r->path, off, "tensor '%.96s' given twice", name);
    char want[160];
    fmt_shape(want, sizeof want, r->t[k].rank, NULL, r->t[k].dims);
    int same = e->rank == r->t[k].rank;
    for (int d = 0; same && d < e->rank; d++) same = e->dims[d] == (uint64_t)r->t[k].dims[d];
    if (!same)
        return ferr(r->path, off, "tensor '%.96s': shape %s, expected %s", name, sh, want);
    if (dt >= ST_N_FLOAT)
        return ferr(r->path, off, "tensor '%.96s': dtype %s, expected F32 (or F16, BF16, F64)",
                    name, e->dtype);
    r->found[k] = 1 + dt;
    r->begin[k] = e->begin;
    return HET_OK;
}

/* The header: one object of tensor entries and at most one "__metadata__". */
static int check_header(st_read *r, jcur *c) {
    char name[ST_MAX_NAME], b[16];
    int meta = 0;
    if (expect(c, '{', "to open the header")) return HET_EFORMAT;
    ws(c);
    if (c->i < c->n && c->p[c->i] == '}') c->i++;
    else
        for (;;) {
            ws(c);
            size_t at = c->i;
            if (jstring(c, name, sizeof name) || expect(c, ':', "after a tensor's name"))
                return HET_EFORMAT;
            if (strcmp(name, "__metadata__") == 0) {
                ws(c);
                if (meta) return ferr(r->path, 8 + at, "\"__metadata__\" given twice");
                if (c->i >= c->n || c->p[c->i] != '{')
                    return jerr(c, "\"__metadata__\" is not an object");
                if (jskip(c, 1)) return HET_EFORMAT;
                meta = 1;
            } else {
                st_entry e;
                memset(&e, 0, sizeof e);
                int st = jentry(c, name, &e);
                if (!st) st = check_entry(r, name, at, &e);
                if (st) return st;
            }
            ws(c);
            if (c->i < c->n && c->p[c->i] == ',') {
                c->i++;
                continue;
            }
            if (expect(c, '}', "or ',' after a tensor")) return HET_EFORMAT;
            break;
        }
    ws(c);
    if (c->i < c->n) return jerr(c, "%s after the header's object", found(c, b, sizeof b));
    return HET_OK;
}

static int span_cmp(const void *a, const void *b) {
    const st_span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* No two tensors share a byte; each tensor of the model is there. */
static int check_whole(st_read *r, jcur *c) {
    if (r->n_span) qsort(r->span, r->n_span, sizeof *r->span, span_cmp);
    size_t last = 0; /* the non-empty span that ends furthest so far */
    int have = 0;
    for (size_t s = 0; s < r->n_span; s++) {
        const st_span *x = &r->span[s];
        if (x->begin == x->end) continue;
        if (have && x->begin < r->span[last].end) {
            char a[ST_MAX_NAME], b2[ST_MAX_NAME];
            c->i = r->span[last].name_at;
            jstring(c, a, sizeof a);
            c->i = x->name_at;
            jstring(c, b2, sizeof b2);
            return ferr(r->path, 8 + (uint64_t)x->name_at, "tensors '%.96s' [%llu, %llu] and "
                        "'%.96s' [%llu, %llu] overlap", b2, (unsigned long long)x->begin,
                        (unsigned long long)x->end, a, (unsigned long long)r->span[last].begin,
                        (unsigned long long)r->span[last].end);
        }
        if (!have || x->end > r->span[last].end) last = s;
        have = 1;
    }
    for (int k = 0; k < r->nt; k++)
        if (!r->found[k]) {
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
    int dt = r->found[k] - 1;
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
            return ferr(r->path, at, "tensor '%s%s': element %zu is %s, expected finite weights",
                        r->have_prefix ? r->prefix : "layers.", t->name + 7, j, what);
        }
    /* a negative running variance makes batch norm's evaluation take a square root of it */
    const size_t nl = strlen(t->name);
    for (size_t j = 0; nl >= 11 && !strcmp(t->name + nl - 11, "running_var") && j < t->count; j++)
        if (dst[j] < 0.0f)
            return ferr(r->path, data_at + r->begin[k] + j * dtypes[dt].size, "tensor '%s%s': "
                        "element %zu is %g, expected a variance >= 0",
                        r->have_prefix ? r->prefix : "layers.", t->name + 7, j, (double)dst[j]);
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
        st = ferr(path, 0, "%llu bytes, too short for a safetensors file (an 8-byte header "
                  "length first)", (unsigned long long)size);
        goto done;
    }
    uint64_t hlen = het_get_u64(len8);
    if (hlen > ST_MAX_HEADER) {
        st = ferr(path, 0, "header length %llu, over the limit of 100 MB",
                  (unsigned long long)hlen);
        goto done;
    }
    if (hlen > size - 8) {
        st = ferr(path, 0, "header length %llu, but only %llu bytes follow (a truncated file?)",
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
    r.found = calloc((size_t)r.nt + 1, sizeof *r.found);
    r.begin = calloc((size_t)r.nt + 1, sizeof *r.begin);
    for (int k = 0; k < r.nt; k++) maxc = r.t[k].count > maxc ? r.t[k].count : maxc;
    stage = malloc((np + ns + 1) * sizeof *stage);
    tmp = malloc(maxc * 8);
    if (!hdr || !r.found || !r.begin || !stage || !tmp) {
        st = het_error_set(HET_ENOMEM, "%s: out of memory reading it", path);
        goto done;
    }
    if (fread(hdr, 1, hlen, f) != hlen) {
        st = het_error_set(HET_EIO, "%s: offset 8: reading the header failed: %s", path,
                           ferror(f) ? strerror(errno) : "end of file");
        goto done;
    }
    jcur c = {hdr, hlen, 0, path};
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
    free(r.found);
    free(r.begin);
    free(r.span);
    return st;
}

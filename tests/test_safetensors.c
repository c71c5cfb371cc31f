/* safetensors import (het_safetensors_read): a write -> read round trip bitwise for every zoo
 * model, PyTorch-style names (a common prefix, num_batches_tracked, metadata), F16 / BF16 / F64
 * converted, and refusals with one precise line that leave the model unchanged: another
 * network's file (the tensor and both shapes), truncated files, a header length past the file
 * or the limit, bad JSON, offsets out of range, reversed or overlapping, a missing tensor, an
 * extra tensor, a repeated one, a dtype that is not a float, two prefixes. */
#define _POSIX_C_SOURCE 200809L
#include <hetrain.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "train/internal.h"

static char dir[64];

static char *path_in(const char *name) {
    static char buf[8][256];
    static int k = 0;
    char *p = buf[k++ % 8];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

static unsigned char *read_all(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(len > 0 ? (size_t)len : 1);
    if (b) *n = fread(b, 1, (size_t)len, f);
    fclose(f);
    return b;
}

static void write_all(const char *path, const void *a, size_t na, const void *b, size_t nb) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    if (na) fwrite(a, 1, na, f);
    if (nb) fwrite(b, 1, nb, f);
    fclose(f);
}

/* A file of the header text `hdr` (its length prepended) + data + extra. */
static const char *make(const char *name, const char *hdr, const void *data, size_t n,
                        const void *extra, size_t n_extra) {
    const char *p = path_in(name);
    size_t hl = strlen(hdr);
    unsigned char *b = malloc(8 + hl + n + n_extra);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, hdr, hl);
    if (n) memcpy(b + 8 + hl, data, n);
    if (n_extra) memcpy(b + 8 + hl + n, extra, n_extra);
    write_all(p, b, 8 + hl + n + n_extra, NULL, 0);
    free(b);
    return p;
}

/* s with the first (all: every) `from` replaced by `to`; malloc'ed. */
static char *replace(const char *s, const char *from, const char *to, int all) {
    size_t nf = strlen(from), nt = strlen(to), cap = strlen(s) + 1;
    for (const char *q = s; (q = strstr(q, from)); q += nf) cap += nt;
    char *out = malloc(cap), *o = out;
    const char *q;
    int done = 0;
    while ((q = strstr(s, from)) && (all || !done)) {
        memcpy(o, s, (size_t)(q - s));
        o += q - s;
        memcpy(o, to, nt);
        o += nt;
        s = q + nf;
        done = 1;
    }
    strcpy(o, s);
    return out;
}

static het_model *build(const char *name, het_shape in) {
    het_model *m = NULL;
    int st = het_zoo_build(&m, name, in, 10, 2, 1);
    CHECK(st == HET_OK, "build %s: %s", name, het_error_msg());
    return m;
}

/* Parameters and state of m, concatenated (malloc'ed). */
static float *snapshot(het_model *m, size_t *n) {
    size_t np = het_model_n_params(m), ns = het_model_n_state(m);
    float *s = malloc((np + ns + 1) * sizeof *s);
    memcpy(s, het_model_params(m), np * sizeof *s);
    if (ns) memcpy(s + np, het_model_state(m), ns * sizeof *s);
    *n = np + ns;
    return s;
}

static int same_as(het_model *m, const float *s) {
    size_t n;
    float *now = snapshot(m, &n);
    int same = memcmp(now, s, n * sizeof *s) == 0;
    free(now);
    return same;
}

/* Every parameter and state value of m set from seed (state too, which init leaves at 0/1). */
static void scramble(het_model *m, uint64_t seed) {
    het_model_init_params(m, seed);
    float *st = het_model_state(m);
    for (size_t i = 0; i < het_model_n_state(m); i++) st[i] = (float)(seed % 7) + 0.25f * (float)i;
}

/* The reader must fail with a message holding every one of the NULL-ended `want`, and leave
 * the model as it was. */
static void refused(het_model *m, const char *path, const char *what, ...) {
    size_t n;
    float *before = snapshot(m, &n);
    het_error_clear();
    int st = het_safetensors_read(m, path);
    const char *msg = het_error_msg();
    if (getenv("HET_TEST_VERBOSE")) printf("%-28.28s %s\n", what, msg);
    CHECK(st < 0, "%s: status %d, expected a failure", what, st);
    CHECK(msg[0] && !strchr(msg, '\n') && strstr(msg, path), "%s: message '%s'", what, msg);
    va_list ap;
    va_start(ap, what);
    for (const char *w; (w = va_arg(ap, const char *));)
        CHECK(strstr(msg, w) != NULL, "%s: message '%s' lacks '%s'", what, msg, w);
    va_end(ap);
    CHECK(same_as(m, before), "%s: the model changed although the read failed", what);
    free(before);
}

static int n_tensors(const char *hdr) {
    int n = 0;
    for (const char *q = hdr; (q = strstr(q, "\"dtype\"")); q++) n++;
    return n;
}

/* ---- round trips ---- */
static void test_round_trip(void) {
    static const struct {
        const char *name;
        het_shape in;
    } zoo[] = {{"mlp", {1, 28, 28}}, {"lenet5", {1, 28, 28}}, {"cifar-cnn", {3, 32, 32}},
               {"resnet20", {3, 32, 32}}};
    for (int z = 0; z < 4; z++) {
        het_model *a = build(zoo[z].name, zoo[z].in), *b = build(zoo[z].name, zoo[z].in);
        if (!a || !b) continue;
        scramble(a, 11);
        scramble(b, 12);
        const char *p = path_in("a.st"), *q = path_in("b.st");
        CHECK(het_safetensors_write(a, p) == HET_OK, "%s", het_error_msg());
        size_t n, nb;
        float *want = snapshot(a, &n);
        CHECK(!same_as(b, want), "%s: the two models start equal", zoo[z].name);
        unsigned char *fa = read_all(p, &nb);
        uint64_t hl = 0;
        for (int i = 0; i < 8 && nb >= 8; i++) hl |= (uint64_t)fa[i] << (8 * i);
        char *hdr = strndup((const char *)fa + 8, (size_t)hl);
        int st = het_safetensors_read(b, p);
        CHECK(st == HET_OK, "%s: read returned %d (%s)", zoo[z].name, st, het_error_msg());
        CHECK(het_safetensors_count(b) == n_tensors(hdr), "%s: %d tensors counted, the file "
              "has %d", zoo[z].name, het_safetensors_count(b), n_tensors(hdr));
        CHECK(same_as(b, want), "%s: parameters or state differ after the round trip",
              zoo[z].name);
        CHECK(het_safetensors_write(b, q) == HET_OK, "%s", het_error_msg());
        size_t nq;
        unsigned char *fb = read_all(q, &nq);
        CHECK(nq == nb && memcmp(fa, fb, nb) == 0, "%s: rewritten file differs", zoo[z].name);
        /* PyTorch's names: "net.<i>.", "<i>." and PyTorch's batch-norm counters */
        static const char *const prefix[3] = {"\"net.", "\"", "\"features.block."};
        for (int k = 0; k < 3; k++) {
            char *h2 = replace(hdr, "\"layers.", prefix[k], 1);
            scramble(b, 13);
            st = het_safetensors_read(b, make("p.st", h2, fa + 8 + hl, nb - 8 - hl, NULL, 0));
            CHECK(st == HET_OK && same_as(b, want), "%s: prefix %s: %d %s", zoo[z].name,
                  prefix[k], st, het_error_msg());
            free(h2);
        }
        if (het_model_n_state(a)) {
            char entry[200];
            snprintf(entry, sizeof entry, "{\"0.num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":"
                     "[],\"data_offsets\":[%zu,%zu]},", nb - 8 - (size_t)hl, nb - (size_t)hl);
            char *h2 = replace(hdr, "\"layers.", "\"", 1), *h3 = replace(h2, "{", entry, 0);
            int64_t count = 390;
            scramble(b, 14);
            st = het_safetensors_read(b, make("p.st", h3, fa + 8 + hl, nb - 8 - hl, &count, 8));
            CHECK(st == HET_OK && same_as(b, want), "%s: num_batches_tracked: %d %s",
                  zoo[z].name, st, het_error_msg());
            free(h2);
            free(h3);
        }
        free(hdr);
        free(fa);
        free(fb);
        free(want);
        het_model_free(a);
        het_model_free(b);
    }
}

/* ---- F16 / BF16 / F64: layers.0.bias of an mlp moved past the F32 data, converted ---- */
static void test_dtypes(void) {
    het_model *a = build("mlp", (het_shape){1, 28, 28}), *b = build("mlp", (het_shape){1, 28, 28});
    if (!a || !b) return;
    size_t off, cnt; /* layers.0: weight [256, 784] then bias [256] */
    het_model_layer_params(a, 0, &off, &cnt);
    size_t nbias = het_shape_size(het_model_layer(a, 0)->out);
    float *bias = het_model_params(a) + off + cnt - nbias;
    for (size_t i = 0; i < nbias; i++) bias[i] = (float)i * 0.5f - 3.0f; /* exact in all three */
    const char *p = path_in("a.st");
    CHECK(het_safetensors_write(a, p) == HET_OK, "%s", het_error_msg());
    size_t nb, n;
    unsigned char *fa = read_all(p, &nb);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)fa[i] << (8 * i);
    char *hdr = strndup((const char *)fa + 8, (size_t)hl);
    size_t data = nb - 8 - (size_t)hl;
    float *want = snapshot(a, &n);
    static const char *const dt[3] = {"F16", "BF16", "F64"};
    for (int k = 0; k < 3; k++) {
        unsigned char extra[256 * 8];
        size_t w = k == 2 ? 8 : 2;
        for (size_t i = 0; i < nbias; i++) {
            if (k == 2) {
                double v = bias[i];
                memcpy(extra + 8 * i, &v, 8);
                continue;
            }
            uint16_t h = k == 0 ? het_wire_fp16_from_float(bias[i])
                                : het_wire_bf16_from_float(bias[i]);
            extra[2 * i] = (unsigned char)h, extra[2 * i + 1] = (unsigned char)(h >> 8);
        }
        char from[128], to[128];
        snprintf(from, sizeof from, "\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[%zu],"
                 "\"data_offsets\":[%zu,%zu]}", nbias, (off + cnt - nbias) * 4, (off + cnt) * 4);
        snprintf(to, sizeof to, "\"layers.0.bias\":{\"dtype\":\"%s\",\"shape\":[%zu],"
                 "\"data_offsets\":[%zu,%zu]}", dt[k], nbias, data, data + w * nbias);
        CHECK(strstr(hdr, from) != NULL, "header lacks %s", from);
        char *h2 = replace(hdr, from, to, 0);
        scramble(b, 5);
        int st = het_safetensors_read(b, make("d.st", h2, fa + 8 + hl, data, extra, w * nbias));
        CHECK(st == HET_OK && same_as(b, want), "dtype %s: %d %s", dt[k], st, het_error_msg());
        free(h2);
    }
    free(want);
    free(hdr);
    free(fa);
    het_model_free(a);
    het_model_free(b);
}

/* ---- refusals, each naming what is wrong ---- */
static void test_refusals(void) {
    het_model *m = build("mlp", (het_shape){1, 28, 28});
    het_model *other = build("mlp", (het_shape){3, 32, 32});
    het_model *lenet = build("lenet5", (het_shape){1, 28, 28});
    if (!m || !other || !lenet) return;
    scramble(m, 3);
    const char *po = path_in("other.st"), *pl = path_in("lenet.st"), *pm = path_in("m.st");
    CHECK(het_safetensors_write(other, po) == HET_OK, "%s", het_error_msg());
    CHECK(het_safetensors_write(lenet, pl) == HET_OK, "%s", het_error_msg());
    CHECK(het_safetensors_write(m, pm) == HET_OK, "%s", het_error_msg());
    scramble(m, 4);
    refused(m, po, "another input shape", "tensor 'layers.0.weight': shape [256, 3072], "
            "expected [256, 784]", NULL);
    refused(m, pl, "lenet5 into mlp", "tensor 'layers.0.weight': shape [6, 1, 5, 5], "
            "expected [256, 784]", NULL);
    refused(lenet, pm, "mlp into lenet5", "tensor 'layers.0.weight': shape [256, 784], "
            "expected [6, 1, 5, 5]", NULL);
    refused(m, path_in("absent.st"), "no file", "cannot open", NULL);
    refused(m, dir, "a folder", "not a regular file", NULL);

    size_t nb;
    unsigned char *f = read_all(pm, &nb);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)f[i] << (8 * i);
    char *hdr = strndup((const char *)f + 8, (size_t)hl);
    const unsigned char *data = f + 8 + hl;
    size_t nd = nb - 8 - (size_t)hl;
    char num[64];

    /* truncated: in the length, in the header, in the data */
    write_all(path_in("t.st"), f, 5, NULL, 0);
    refused(m, path_in("t.st"), "5 bytes", "offset 0: 5 bytes, too short", NULL);
    write_all(path_in("t.st"), f, 8 + hl / 2, NULL, 0);
    snprintf(num, sizeof num, "header length %llu, but only %llu bytes follow",
             (unsigned long long)hl, (unsigned long long)hl / 2);
    refused(m, path_in("t.st"), "half a header", num, NULL);
    write_all(path_in("t.st"), f, nb - 1, NULL, 0);
    snprintf(num, sizeof num, "beyond the %zu bytes of data", nd - 1);
    refused(m, path_in("t.st"), "one byte short", num, "layers.4.bias", NULL);
    write_all(path_in("t.st"), f, 8 + hl, NULL, 0);
    refused(m, path_in("t.st"), "no data", "beyond the 0 bytes of data", "layers.0.weight", NULL);

    /* header lengths past the file and past the limit */
    unsigned char len[8];
    uint64_t big[3] = {nb - 7, 100000001ull, UINT64_MAX};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 8; i++) len[i] = (unsigned char)(big[k] >> (8 * i));
        write_all(path_in("h.st"), len, 8, f + 8, nb - 8);
        snprintf(num, sizeof num, "offset 0: header length %llu", (unsigned long long)big[k]);
        refused(m, path_in("h.st"), "header length", num, k ? "limit of 100 MB" : "truncated",
                NULL);
    }

    /* bad JSON */
    static const struct {
        const char *from, *to, *want;
    } bad[] = {
        {"\"layers.0.weight\":", "\"layers.0.weight\";", "expected ':' after a tensor's name"},
        {"{\"layers.0.weight\"", "[\"layers.0.weight\"",
         "offset 8: expected '{' to open the header"},
        {"\"dtype\":\"F32\"", "\"dtype\":F32", "expected a string, found 'F'"},
        {"\"shape\":[256,784]", "\"shape\":[256,-784]", "expected a non-negative integer"},
        {"\"shape\":[256,784]", "\"shape\":[256,784.0]", "fraction or an exponent"},
        {"\"shape\":[256,784]", "\"shape\":[256,0784]", "leading zero"},
        {"\"shape\":[256,784]", "\"shape\":[256 784]", "expected ']' or ',' in a shape"},
        {"\"shape\":[256,784]", "\"shape\":[256,784,1,1,1,1,1,1,1]", "more than 8 dimensions"},
        {"\"data_offsets\":[0,802816]", "\"data_offsets\":[0,802816,3]",
         "after the two data_offsets"},
        {"\"data_offsets\":[0,802816]", "\"data_offsets\":[0,99999999999999999999]", "too large"},
        {"\"dtype\":\"F32\",", "", "tensor 'layers.0.weight': no dtype"},
        {"\"dtype\":\"F32\",", "\"dtype\":\"F32\",\"dtype\":\"F32\",", "repeated field 'dtype'"},
        {"\"dtype\":\"F32\",", "\"dtype\":\"F32\",\"scale\":1,", "unknown field 'scale'"},
        {"\"producer\":\"hetrain\"}", "\"producer\":\"hetrain\"", "expected '}' or ','"},
        {"\"producer\":\"hetrain\"}", "\"producer\":[1,{\"a\":null},-2.5e3,true]}", NULL},
        {"\"producer\":\"hetrain\"}", "\"producer\":01}", "expected '}' or ','"},
        {"\"producer\":\"hetrain\"}", "\"producer\":\"het\x01rain\"}", "control byte 0x01"},
        {"\"producer\":\"hetrain\"}", "\"producer\":\"\\ud800\"}", "surrogate"},
        {"\"producer\":\"hetrain\"}", "\"producer\":\"\\q\"}", "bad escape"},
        {"\"__metadata__\":{", "\"__metadata__\":7,\"x\":{", "\"__metadata__\" is not an object"},
        {"\"layers.0.weight\"", "\"layers.\\u0030.weight\"", NULL}, /* "0" escaped: fine */
        {"\"layers.0.weight\"", "\"layers.0.weight\\u0000\"", "\\u0000 in a string"},
        {"\"layers.0.weight\"", "\"layers.0.weight", "expected ':' after a tensor's name"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char *h2 = replace(hdr, bad[k].from, bad[k].to, 0);
        CHECK(strcmp(h2, hdr) != 0, "case %zu: '%s' not in the header", k, bad[k].from);
        const char *p = make("j.st", h2, data, nd, NULL, 0);
        if (bad[k].want) refused(m, p, bad[k].from, bad[k].want, NULL);
        else {
            int st = het_safetensors_read(m, p);
            CHECK(st == HET_OK, "case %zu (valid): %d %s", k, st, het_error_msg());
            scramble(m, 4);
        }
        free(h2);
    }
    /* garbage after the object, an empty header, a header of spaces, deep metadata */
    char *h2 = replace(hdr, "}} ", "}}x", 0);
    if (strcmp(h2, hdr) == 0) { /* no padding to spend: append */
        free(h2);
        h2 = malloc(strlen(hdr) + 2);
        strcpy(h2, hdr);
        strcat(h2, "x");
    }
    refused(m, make("j.st", h2, data, nd, NULL, 0), "trailing x", "'x' after the header's object",
            NULL);
    free(h2);
    refused(m, make("j.st", "{}", data, nd, NULL, 0), "{}", "no tensor 'layers.0.weight' "
            "(shape [256, 784]), which the model needs", NULL);
    refused(m, make("j.st", "        ", data, nd, NULL, 0), "spaces", "offset 16: expected '{' "
            "to open the header, found the header's end", NULL);
    char deep[200] = "{\"__metadata__\":{\"a\":";
    for (int i = 0; i < 70; i++) strcat(deep, "[");
    refused(m, make("j.st", deep, data, nd, NULL, 0), "deep", "nested deeper than 64", NULL);

    /* offsets: out of range, reversed, a size that does not fit the shape, overlapping */
    snprintf(num, sizeof num, "\"data_offsets\":[0,%zu]", nd + 4);
    struct {
        const char *from;
        char to[96];
        const char *want;
    } off[4] = {
        {"\"data_offsets\":[0,802816]", "", "beyond the"},
        {"\"data_offsets\":[0,802816]", "\"data_offsets\":[802816,0]", "end before they begin"},
        {"\"data_offsets\":[0,802816]", "\"data_offsets\":[0,802812]",
         "hold 802812 bytes, dtype F32 shape [256, 784] needs 802816"},
        {"\"data_offsets\":[802816,803840]", "\"data_offsets\":[4,1028]", "overlap"},
    };
    snprintf(off[0].to, sizeof off[0].to, "\"data_offsets\":[%zu,%zu]", nd - 4, nd + 802812);
    for (int k = 0; k < 4; k++) {
        h2 = replace(hdr, off[k].from, off[k].to, 0);
        CHECK(strcmp(h2, hdr) != 0, "offsets %d: '%s' not in the header", k, off[k].from);
        refused(m, make("o.st", h2, data, nd, NULL, 0), off[k].to, off[k].want, NULL);
        free(h2);
    }

    /* a missing tensor, an extra one, a repeated one, two prefixes, a dtype not a float */
    const char *bias0 = strstr(hdr, ",\"layers.0.bias\":");
    const char *end0 = bias0 ? strchr(bias0 + 1, '}') : NULL;
    if (bias0 && end0) {
        char *cut = malloc(strlen(hdr) + 1);
        snprintf(cut, strlen(hdr) + 1, "%.*s%s", (int)(bias0 - hdr), hdr, end0 + 1);
        refused(m, make("x.st", cut, data, nd, NULL, 0), "missing",
                "no tensor 'layers.0.bias' (shape [256]), which the model needs", NULL);
        h2 = replace(cut, "\"layers.", "\"net.", 1);
        refused(m, make("x.st", h2, data, nd, NULL, 0), "missing, named with the prefix",
                "no tensor 'net.0.bias' (shape [256])", NULL);
        free(h2);
        free(cut);
    } else {
        CHECK(0, "header lacks layers.0.bias: %s", hdr);
    }
    h2 = replace(hdr, "{", "{\"layers.9.weight\":{\"dtype\":\"F32\",\"shape\":[1],"
                 "\"data_offsets\":[0,4]},", 0);
    refused(m, make("x.st", h2, data, nd, NULL, 0), "extra", "tensor 'layers.9.weight' is not "
            "a tensor of this model", NULL);
    free(h2);
    h2 = replace(hdr, "{", "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":"
                 "[0,4]},", 0);
    refused(m, make("x.st", h2, data, nd, NULL, 0), "extra", "'fc.weight' is not a tensor", NULL);
    free(h2);
    h2 = replace(hdr, "{", "{\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[256],"
                 "\"data_offsets\":[0,1024]},", 0);
    refused(m, make("x.st", h2, data, nd, NULL, 0), "twice", "'layers.0.bias' given twice",
            NULL);
    free(h2);
    h2 = replace(hdr, "\"layers.0.bias\"", "\"net.0.bias\"", 0);
    refused(m, make("x.st", h2, data, nd, NULL, 0), "two prefixes", "tensor 'net.0.bias' has "
            "the prefix 'net.' before its layer index, but 'layers.0.weight' has 'layers.'", NULL);
    free(h2);
    h2 = replace(hdr, "\"layers.0.bias\":{\"dtype\":\"F32\"", "\"layers.0.bias\":{\"dtype\":"
                 "\"I32\"", 0);
    refused(m, make("x.st", h2, data, nd, NULL, 0), "I32", "tensor 'layers.0.bias': dtype I32, "
            "expected F32 (or F16, BF16, F64)", NULL);
    free(h2);
    h2 = replace(hdr, "\"layers.0.bias\":{\"dtype\":\"F32\"", "\"layers.0.bias\":{\"dtype\":"
                 "\"Q4\"", 0);
    refused(m, make("x.st", h2, data, nd, NULL, 0), "Q4", "tensor 'layers.0.bias': unknown "
            "dtype 'Q4'", NULL);
    free(h2);

    /* non-finite values: refused on reading, naming the tensor and the element's offset */
    unsigned char *d2 = malloc(nd);
    const char *bias_at = strstr(hdr, "\"layers.0.bias\"");
    unsigned long long b0 = 0;
    CHECK(bias_at && sscanf(strstr(bias_at, "data_offsets"), "data_offsets\":[%llu", &b0) == 1,
          "no data_offsets of layers.0.bias in %s", hdr);
    const float bad_v[2] = {NAN, -INFINITY};
    const char *bad_name[2] = {"NaN", "infinite"};
    for (int k = 0; k < 2 && d2; k++) {
        memcpy(d2, data, nd);
        memcpy(d2 + b0 + 4 * (3 + k), &bad_v[k], 4);
        snprintf(num, sizeof num, "offset %llu: tensor 'layers.0.bias': element %d is %s",
                 (unsigned long long)(8 + hl + b0 + 4 * (3 + k)), 3 + k, bad_name[k]);
        refused(m, make("n.st", hdr, d2, nd, NULL, 0), bad_name[k], num, NULL);
    }
    free(d2);
    free(hdr);
    free(f);
    het_model_free(m);
    het_model_free(other);
    het_model_free(lenet);
}

int main(void) {
    het_log_set_level(HET_LOG_QUIET);
    snprintf(dir, sizeof dir, "/tmp/het_st_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_dtypes();
    test_refusals();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return het_test_finish("test_safetensors");
}

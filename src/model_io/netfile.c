/* hetrain's model text format (include/hetrain/netfile.h; grammar in docs/MODELS.md) and what
 * every het_net shares: the zoo (models/NAME.net, built in by cmake/embed_nets.cmake), the
 * canonical text, the layers of a network with its shape errors, and initial weights.
 *
 * A file is lines of `kind key=value ...`; `#` starts a comment; blank lines are skipped. Each
 * kind takes a fixed set of keys, some required, the rest with defaults (table `kinds`).
 * Errors are one line: "FILE: line N: what was found, expected what". */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/infile.h"
#include "hetrain/netfile.h"
#include "model_io/onnx_bytes.h"

#define MAX_FILE_BYTES (1 << 20) /* a model file of 256 layers is a few KiB */
#define MAX_LINE 256

/* cmake/embed_nets.cmake: the zoo's files, in zoo order */
extern const char *const het_zoo_net_names[];
extern const char *const het_zoo_net_texts[];

enum { A_OUT, A_K, A_STRIDE, A_PAD, A_P, A_MOMENTUM, A_EPS, A_COUNT };
static const char *const arg_names[A_COUNT] = {"out", "k", "stride", "pad", "p", "momentum", "eps"};

/* For each kind: the keys it takes (bit set), those it needs, its name. */
typedef struct kind_def {
    const char *name;
    unsigned takes, needs;
} kind_def;
#define B(a) (1u << (a))
static const kind_def kinds[HET_NL_COUNT] = {
    [HET_NL_CONV] = {"conv", B(A_OUT) | B(A_K) | B(A_STRIDE) | B(A_PAD), B(A_OUT) | B(A_K)},
    [HET_NL_BATCHNORM] = {"batchnorm", B(A_MOMENTUM) | B(A_EPS), 0},
    [HET_NL_RELU] = {"relu", 0, 0},
    [HET_NL_MAXPOOL] = {"maxpool", B(A_K) | B(A_STRIDE), B(A_K)},
    [HET_NL_AVGPOOL] = {"avgpool", B(A_K) | B(A_STRIDE), 0},
    [HET_NL_FLATTEN] = {"flatten", 0, 0},
    [HET_NL_DENSE] = {"dense", B(A_OUT), B(A_OUT)},
    [HET_NL_DROPOUT] = {"dropout", B(A_P), B(A_P)},
    [HET_NL_RESBLOCK] = {"resblock", B(A_OUT) | B(A_STRIDE), B(A_OUT)},
};

const char *het_net_kind_name(het_net_kind k) {
    return k >= 0 && k < HET_NL_COUNT ? kinds[k].name : "?";
}

static void kind_list(char *buf, size_t n) {
    size_t used = 0;
    buf[0] = 0;
    for (int k = 0; k < HET_NL_COUNT && used < n; k++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", k ? ", " : "", kinds[k].name);
}

static void arg_list(unsigned takes, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = 0;
    for (int a = 0; a < A_COUNT && used < n; a++)
        if (takes & B(a))
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? ", " : "", arg_names[a]);
    if (!used) snprintf(buf, n, "none");
}

/* An integer in [lo, hi] that is the whole of v. */
static int read_int(const char *v, long lo, long hi, int *out) {
    if (!*v || (!isdigit((unsigned char)*v) && *v != '-')) return 0;
    errno = 0;
    char *end;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < lo || x > hi) return 0;
    *out = (int)x;
    return 1;
}

/* A finite number in (lo, hi) or [lo, hi) (lo_closed) that is the whole of v. The range is
 * checked on the float the layer keeps, so that a value that rounds onto a bound (eps=1e-50 is
 * 0 as a float, 0.999999999 is 1) is refused rather than written back as one the reader refuses. */
static int read_float(const char *v, double lo, double hi, int lo_closed, float *out) {
    if (!*v) return 0;
    errno = 0;
    char *end;
    double x = strtod(v, &end);
    if (errno || *end) return 0;
    float f = (float)x;
    if (!(f < hi) || !(lo_closed ? f >= lo : f > lo)) return 0;
    *out = f;
    return 1;
}

/* Sets argument `a` of layer L from text v; 0 with the expected form in `want` if v is bad. */
static int set_arg(het_net_layer *L, int a, const char *v, const char **want) {
    switch (a) {
    case A_OUT:
        if (L->kind == HET_NL_DENSE && strcmp(v, "classes") == 0) {
            L->out = HET_NET_CLASSES;
            return 1;
        }
        *want = L->kind == HET_NL_DENSE ? "an integer in [1, 1048576] or 'classes'"
                                        : "an integer in [1, 65536]";
        return read_int(v, 1, L->kind == HET_NL_DENSE ? 1048576 : 65536, &L->out);
    case A_K:
        *want = L->kind == HET_NL_AVGPOOL ? "an integer in [0, 1024] (0: global)"
                                          : "an integer in [1, 1024]";
        return read_int(v, L->kind == HET_NL_AVGPOOL ? 0 : 1, 1024, &L->k);
    case A_STRIDE: *want = "an integer in [1, 1024]"; return read_int(v, 1, 1024, &L->stride);
    case A_PAD: *want = "an integer in [0, 1024]"; return read_int(v, 0, 1024, &L->pad);
    case A_P: *want = "a number in [0, 1)"; return read_float(v, 0, 1, 1, &L->p);
    case A_MOMENTUM: *want = "a number in (0, 1]"; return read_float(v, 0, 1.0000001, 0, &L->momentum);
    case A_EPS: *want = "a number in (0, 1)"; return read_float(v, 0, 1, 0, &L->eps);
    }
    return 0;
}

static void set_defaults(het_net_layer *L) {
    L->stride = 1;
    L->momentum = 0.1f;
    L->eps = 1e-5f;
}

/* One non-empty line (comment removed, NUL-terminated, modifiable) into L. */
static int parse_line(het_net_layer *L, char *s, const char *file, int line) {
    char *save = NULL, *tok = strtok_r(s, " \t\r", &save);
    memset(L, 0, sizeof *L);
    L->line = line;
    int kind = -1;
    for (int k = 0; k < HET_NL_COUNT; k++)
        if (strcmp(tok, kinds[k].name) == 0) kind = k;
    if (kind < 0) {
        char list[160];
        kind_list(list, sizeof list);
        return het_error_set(HET_EFORMAT, "%s: line %d: unknown layer '%.40s', expected one "
                             "of: %s", file, line, tok, list);
    }
    L->kind = (het_net_kind)kind;
    set_defaults(L);
    const kind_def *d = &kinds[kind];
    unsigned seen = 0;
    char list[96];
    arg_list(d->takes, list, sizeof list);
    while ((tok = strtok_r(NULL, " \t\r", &save))) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok)
            return het_error_set(HET_EFORMAT, "%s: line %d: %s: '%.40s', expected key=value "
                                 "(keys: %s)", file, line, d->name, tok, list);
        *eq = 0;
        int a = -1;
        for (int i = 0; i < A_COUNT; i++)
            if (strcmp(tok, arg_names[i]) == 0) a = i;
        if (a < 0 || !(d->takes & B(a)))
            return het_error_set(HET_EFORMAT, "%s: line %d: %s: unknown key '%.40s', expected "
                                 "%s", file, line, d->name, tok, list);
        if (seen & B(a))
            return het_error_set(HET_EFORMAT, "%s: line %d: %s: %s given twice", file, line,
                                 d->name, tok);
        seen |= B(a);
        const char *want = "";
        if (!set_arg(L, a, eq + 1, &want))
            return het_error_set(HET_EFORMAT, "%s: line %d: %s: %s=%.40s, expected %s", file,
                                 line, d->name, tok, eq + 1, want);
    }
    for (int a = 0; a < A_COUNT; a++)
        if ((d->needs & B(a)) && !(seen & B(a)))
            return het_error_set(HET_EFORMAT, "%s: line %d: %s: missing %s=", file, line,
                                 d->name, arg_names[a]);
    if ((L->kind == HET_NL_MAXPOOL || L->kind == HET_NL_AVGPOOL) && !(seen & B(A_STRIDE)))
        L->stride = L->k; /* pooling steps by its kernel unless told */
    if (L->kind == HET_NL_AVGPOOL && L->k == 0 && (seen & B(A_STRIDE)))
        return het_error_set(HET_EFORMAT, "%s: line %d: avgpool: stride= with a global pool "
                             "(k=0), expected no stride or k >= 1", file, line);
    if (L->kind == HET_NL_CONV && L->pad >= L->k)
        return het_error_set(HET_EFORMAT, "%s: line %d: conv: pad=%d, expected less than k=%d",
                             file, line, L->pad, L->k);
    return HET_OK;
}

/* name: the file's base name without its last suffix, at most 31 bytes. */
static void base_name(char *name, size_t n, const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    const char *dot = strrchr(b, '.');
    size_t len = dot && dot > b ? (size_t)(dot - b) : strlen(b);
    if (len >= n) len = n - 1;
    memcpy(name, b, len);
    name[len] = 0;
}

int het_net_parse(het_net *net, const char *text, size_t len, const char *file) {
    memset(net, 0, sizeof *net);
    if (!file) file = "model";
    int line = 1;
    size_t i = 0;
    while (i < len) {
        size_t start = i;
        while (i < len && text[i] != '\n') i++;
        size_t n = i - start;
        if (i < len) i++; /* the newline */
        char buf[MAX_LINE + 1];
        if (n > MAX_LINE)
            return het_error_set(HET_EFORMAT, "%s: line %d: %zu bytes, expected at most %d",
                                 file, line, n, MAX_LINE);
        for (size_t k = 0; k < n; k++) {
            unsigned char c = (unsigned char)text[start + k];
            if (c == '#') {
                n = k;
                break;
            }
            if ((c < 0x20 && c != '\t' && c != '\r') || c >= 0x7f)
                return het_error_set(HET_EFORMAT, "%s: line %d: byte 0x%02x at column %zu, "
                                     "expected text", file, line, c, k + 1);
        }
        memcpy(buf, text + start, n);
        buf[n] = 0;
        size_t sp = strspn(buf, " \t\r");
        if (buf[sp]) {
            if (net->n == HET_NET_MAX_LAYERS)
                return het_error_set(HET_EFORMAT, "%s: line %d: more than %d layers", file, line,
                                     HET_NET_MAX_LAYERS);
            int st = parse_line(&net->layer[net->n], buf + sp, file, line);
            if (st) return st;
            net->n++;
        }
        line++;
    }
    if (net->n == 0)
        return het_error_set(HET_EFORMAT, "%s: no layers, expected one layer a line (e.g. "
                             "'dense out=classes')", file);
    base_name(net->name, sizeof net->name, file);
    snprintf(net->file, sizeof net->file, "%s", file);
    return HET_OK;
}

/* ONNX files are protobuf: their first byte is a field tag (ir_version: 0x08) and text model
 * files begin with a letter, '#' or space. Judged from the bytes read, never by a second open. */
static int looks_like_onnx(const char *path, const uint8_t *b, size_t n) {
    size_t len = strlen(path);
    return (n > 0 && b[0] == 0x08) || (len > 5 && strcmp(path + len - 5, ".onnx") == 0);
}

int het_net_read(het_net *net, const char *path) {
    memset(net, 0, sizeof *net);
    static const char what[] = "a model file (hetrain's text format or ONNX)";
    int fd;
    uint64_t size;
    /* one open, one read: a FIFO or a device is refused before anything blocks on it */
    int st = het_infile_open(path, what, HET_ONNX_MAX_BYTES, &fd, &size);
    if (st) return st;
    uint8_t first = 0, *buf = NULL;
    size_t got = 0, n = 0;
    st = het_infile_pread(path, fd, 0, &first, 1, &got);
    const int onnx = !st && looks_like_onnx(path, &first, got);
    if (!st && !onnx && size > MAX_FILE_BYTES)
        st = het_error_set(HET_EFORMAT, "%s: file of %llu bytes, expected a model file in "
                           "hetrain's text format of at most %d bytes", path,
                           (unsigned long long)size, MAX_FILE_BYTES);
    if (!st) st = het_infile_read_all(path, fd, size, what, &buf, &n);
    close(fd);
    if (st) return st;
    if (onnx) {
        st = het_net_parse_onnx(net, buf, n, path);
    } else {
        st = het_net_parse(net, (const char *)buf, n, path);
        if (!st) snprintf(net->file, sizeof net->file, "%s", path);
    }
    free(buf);
    return st;
}

int het_net_zoo(het_net *net, const char *name) {
    memset(net, 0, sizeof *net);
    for (int i = 0; het_zoo_net_names[i]; i++)
        if (strcmp(het_zoo_net_names[i], name) == 0) {
            char file[64];
            snprintf(file, sizeof file, "models/%s.net", name);
            int st = het_net_parse(net, het_zoo_net_texts[i], strlen(het_zoo_net_texts[i]), file);
            snprintf(net->name, sizeof net->name, "%s", name);
            return st;
        }
    char list[128];
    size_t used = 0;
    list[0] = 0;
    for (int i = 0; het_zoo_net_names[i] && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 het_zoo_net_names[i]);
    return het_error_set(HET_EINVAL, "unknown model '%s', expected one of: %s", name, list);
}

const char *const *het_zoo_names(void) { return het_zoo_net_names; }

void het_net_free(het_net *net) {
    if (!net) return;
    free(net->params);
    free(net->state);
    net->params = net->state = NULL;
    net->n_params = net->n_state = 0;
}

/* The shortest text of x that reads back as the same float ("0.1", not "0.100000001"). */
static void fmt_float(char *v, size_t n, float x) {
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(v, n, "%.*g", digits, (double)x);
        if (strtof(v, NULL) == x) return;
    }
}

/* One layer in canonical form: every key it takes, in table order. */
static int format_layer(const het_net_layer *L, char *buf, size_t cap) {
    const kind_def *d = &kinds[L->kind];
    int n = snprintf(buf, cap, "%s", d->name);
    for (int a = 0; a < A_COUNT; a++) {
        if (!(d->takes & B(a))) continue;
        char v[32];
        switch (a) {
        case A_OUT:
            if (L->out == HET_NET_CLASSES) snprintf(v, sizeof v, "classes");
            else snprintf(v, sizeof v, "%d", L->out);
            break;
        case A_K: snprintf(v, sizeof v, "%d", L->k); break;
        case A_STRIDE: snprintf(v, sizeof v, "%d", L->stride); break;
        case A_PAD: snprintf(v, sizeof v, "%d", L->pad); break;
        case A_P: fmt_float(v, sizeof v, L->p); break;
        case A_MOMENTUM: fmt_float(v, sizeof v, L->momentum); break;
        default: fmt_float(v, sizeof v, L->eps); break;
        }
        if (a == A_STRIDE && L->kind == HET_NL_AVGPOOL && L->k == 0) continue;
        n += snprintf(buf + n, (size_t)n < cap ? cap - (size_t)n : 0, " %s=%s", arg_names[a], v);
    }
    return n;
}

size_t het_net_format(const het_net *net, char *buf, size_t cap) {
    size_t used = 0;
    if (cap) buf[0] = 0;
    for (int i = 0; i < net->n; i++) {
        char line[MAX_LINE];
        int k = format_layer(&net->layer[i], line, sizeof line);
        if (used + (size_t)k + 1 < cap) {
            memcpy(buf + used, line, (size_t)k);
            buf[used + (size_t)k] = '\n';
            buf[used + (size_t)k + 1] = 0;
        } else if (cap) {
            cap = 0; /* truncated: keep counting */
        }
        used += (size_t)k + 1;
    }
    return used;
}

static het_layer *make_layer(const het_net_layer *L, int n_classes) {
    switch (L->kind) {
    case HET_NL_CONV: return het_conv2d_new(L->out, L->k, L->stride, L->pad);
    case HET_NL_BATCHNORM: return het_batchnorm_new(L->momentum, L->eps);
    case HET_NL_RELU: return het_relu_new();
    case HET_NL_MAXPOOL: return het_maxpool_new(L->k, L->stride);
    case HET_NL_AVGPOOL: return het_avgpool_new(L->k, L->stride);
    case HET_NL_FLATTEN: return het_flatten_new();
    case HET_NL_DENSE: return het_dense_new(L->out == HET_NET_CLASSES ? n_classes : L->out);
    case HET_NL_DROPOUT: return het_dropout_new(L->p);
    case HET_NL_RESBLOCK: return het_resblock_new(L->out, L->stride);
    default: return NULL;
    }
}

/* Where layer i was read from, for errors: "FILE: line N" / "FILE: node 'X'" / "model". */
static void where(const het_net *net, int i, char *buf, size_t n) {
    const het_net_layer *L = &net->layer[i];
    const char *file = net->file[0] ? net->file : net->name;
    if (L->node[0]) snprintf(buf, n, "%s: node '%s'", file, L->node);
    else if (L->line) snprintf(buf, n, "%s: line %d", file, L->line);
    else snprintf(buf, n, "%s: layer %d", file, i);
}

static void destroy_list(het_layer **L, int n) {
    for (int i = 0; i < n; i++)
        if (L[i]) L[i]->ops->destroy(L[i]);
}

/* The memory a model of these layers will ask for, in bytes, up to layer i: parameters,
 * gradients (one copy per worker) and state, and per sample of the batch each layer's output,
 * cache and scratch. Doubles: no overflow whatever a file asks for. */
typedef struct net_bytes {
    double fixed, per_sample, work;
} net_bytes;

static double add_plan(net_bytes *b, const het_layer_plan *p, int max_batch, int workers) {
    b->fixed += 4.0 * ((1.0 + workers) * (double)p->n_params + (double)p->n_state);
    b->fixed += 4.0 * (double)p->work_fixed;
    b->per_sample += 4.0 * ((double)het_shape_size(p->out) + (double)p->cache_per_sample);
    if (4.0 * (double)p->work_per_sample > b->work) b->work = 4.0 * (double)p->work_per_sample;
    return b->fixed + (double)max_batch * (b->per_sample + b->work);
}

/* "4.4 TB", "512.0 MB": bytes for messages. */
static void fmt_bytes(char *buf, size_t n, double b) {
    static const char *const unit[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB"};
    int u = 0;
    double v = b;
    while (v >= 1000.0 && u < 6) v /= 1000.0, u++;
    if (u == 0) snprintf(buf, n, "%.0f bytes", b);
    else snprintf(buf, n, "%.1f %s (%.0f bytes)", v, unit[u], b);
}

/* The layers, each planned on its input (the shape check), and the memory the model will take
 * checked against the machine's after each layer, before anything of that size is allocated:
 * the first layer past it is named, with the bytes. */
static int net_layers(const het_net *net, het_shape in, int n_classes, int max_batch,
                      int workers, het_layer ***layers, int *n) {
    *layers = NULL;
    *n = 0;
    if (n_classes <= 0)
        return het_error_set(HET_EINVAL, "model %s: n_classes must be > 0", net->name);
    if (net->n <= 0 || net->n > HET_NET_MAX_LAYERS)
        return het_error_set(HET_EINVAL, "model %s: %d layers", net->name, net->n);
    const het_shape g = net->input;
    if ((net->input_rank == 4 && (g.c != in.c || g.h != in.h || g.w != in.w)) ||
        (net->input_rank == 2 && het_shape_size(g) != het_shape_size(in)))
        return het_error_set(HET_ESHAPE, "%s: the graph's input is %s%dx%dx%d a sample, expected "
                             "the data's %dx%dx%d (%zu values): the network was made for other "
                             "inputs", net->file[0] ? net->file : net->name,
                             net->input_rank == 2 ? "[N, F] of " : "", g.c, g.h, g.w, in.c, in.h,
                             in.w, het_shape_size(in));
    het_layer **L = calloc((size_t)net->n, sizeof *L);
    if (!L) return het_error_set(HET_ENOMEM, "out of memory creating model %s", net->name);
    het_shape s = in;
    char at[HET_PATH_LEN + 96];
    net_bytes bytes = {0, 4.0 * (double)het_shape_size(in), 0};
    const double limit = het_infile_memory();
    for (int i = 0; i < net->n; i++) {
        L[i] = make_layer(&net->layer[i], n_classes);
        int st = L[i] ? HET_OK : HET_ENOMEM;
        het_layer_plan p;
        memset(&p, 0, sizeof p);
        if (!st) st = L[i]->ops->plan(L[i], s, &p); /* the shape check; the model plans again */
        char msg[512], text[MAX_LINE];
        if (st) snprintf(msg, sizeof msg, "%s", het_error_msg());
        double total = st ? 0 : add_plan(&bytes, &p, max_batch, workers);
        if (!st && total > limit) {
            char need[64], have[64];
            fmt_bytes(need, sizeof need, total);
            fmt_bytes(have, sizeof have, limit);
            snprintf(msg, sizeof msg, "the model needs %s up to here (weights, gradients and "
                     "the activations of a batch of %d), expected at most the %s of memory "
                     "here", need, max_batch, have);
            st = HET_ENOMEM;
        }
        if (st) {
            format_layer(&net->layer[i], text, sizeof text);
            where(net, i, at, sizeof at);
            destroy_list(L, i + 1);
            free(L);
            return het_error_set(st, "%s: %s on input %dx%dx%d: %s", at, text, s.c, s.h, s.w,
                                 msg);
        }
        s = p.out;
    }
    if ((int64_t)het_shape_size(s) != n_classes) {
        destroy_list(L, net->n);
        free(L);
        where(net, net->n - 1, at, sizeof at);
        return het_error_set(HET_ESHAPE, "%s: the network ends in %dx%dx%d values, expected %d "
                             "(one per class: 'dense out=classes')", at, s.c, s.h, s.w,
                             n_classes);
    }
    *layers = L;
    *n = net->n;
    return HET_OK;
}

int het_net_layers(const het_net *net, het_shape in, int n_classes, het_layer ***layers,
                   int *n) {
    return net_layers(net, in, n_classes, 1, 1, layers, n);
}

int het_net_build(het_model **out, const het_net *net, het_shape in, int n_classes,
                  int max_batch, int workers) {
    *out = NULL;
    het_layer **L;
    int n;
    int st = net_layers(net, in, n_classes, max_batch > 0 ? max_batch : 1,
                        workers > 0 ? workers : 1, &L, &n);
    if (st) return st;
    st = het_model_create(out, in, L, n, max_batch, workers); /* takes the layers */
    free(L);
    return st;
}

int het_net_load_weights(const het_net *net, het_model *m) {
    if (!net->params) return HET_OK;
    if (net->n_params != het_model_n_params(m) || net->n_state != het_model_n_state(m))
        return het_error_set(HET_EINVAL, "%s: %zu parameters and %zu state values, the model "
                             "has %zu and %zu", net->file[0] ? net->file : net->name,
                             net->n_params, net->n_state, het_model_n_params(m),
                             het_model_n_state(m));
    memcpy(het_model_params(m), net->params, net->n_params * sizeof(float));
    if (net->n_state) memcpy(het_model_state(m), net->state, net->n_state * sizeof(float));
    return HET_OK;
}

/* ---- the zoo, built from its files ---- */

int het_zoo_layers(const char *name, het_shape in, int n_classes, het_layer ***layers, int *n) {
    *layers = NULL;
    *n = 0;
    if (n_classes <= 0) return het_error_set(HET_EINVAL, "model %s: n_classes must be > 0", name);
    het_net net;
    int st = het_net_zoo(&net, name);
    return st ? st : het_net_layers(&net, in, n_classes, layers, n);
}

int het_zoo_build(het_model **out, const char *name, het_shape in, int n_classes, int max_batch,
                  int workers) {
    *out = NULL;
    het_layer **L;
    int n;
    int st = het_zoo_layers(name, in, n_classes, &L, &n);
    if (st != HET_OK) return st;
    st = het_model_create(out, in, L, n, max_batch, workers); /* takes the layers */
    free(L);
    return st;
}

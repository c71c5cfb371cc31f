/* hetrain compare: reading a run's --metrics file back (the writer is src/train/metrics.c).
 *
 * DESIGN. A strict reader: every line must be one JSON object (RFC 8259 grammar: strings
 * with their escapes, numbers, true / false / null, nested arrays and objects up to a depth of
 * 32), nothing after it. Of "eval" objects (--eval-every) it takes test_acc and time_s. Of
 * "epoch" objects it takes test_acc (a number or null), samples_per_s and elapsed_s (numbers),
 * vtime_s when the run was on the virtual clock, link_over_max when present, and the per-rank arrays compute_s, comm_s,
 * wait_s, delay_s, bytes_node and bytes_cross (each `ranks` numbers, all four time arrays or none); members it
 * does not know, such as a strategy's "hgc":{...}, are checked and skipped. The first problem
 * is the error, one line: "FILE:LINE: column C: what was expected". */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

typedef struct jr {
    const char *s, *p; /* the line, the position */
    char err[160];
} jr;

static int fail(jr *j, const char *what) {
    if (!j->err[0])
        snprintf(j->err, sizeof j->err, "column %d: %s", (int)(j->p - j->s) + 1, what);
    return -1;
}

static void ws(jr *j) {
    while (*j->p == ' ' || *j->p == '\t' || *j->p == '\r' || *j->p == '\n') j->p++;
}

static int expect(jr *j, char ch, const char *what) {
    ws(j);
    if (*j->p != ch) return fail(j, what);
    j->p++;
    return 0;
}

static int literal(jr *j, const char *word) {
    size_t n = strlen(word);
    if (strncmp(j->p, word, n) != 0) return fail(j, "expected a JSON value");
    j->p += n;
    return 0;
}

/* A string into out (truncated to n - 1 bytes; escapes other than \" and \\ kept as is). */
static int string(jr *j, char *out, size_t n) {
    size_t len = 0;
    if (expect(j, '"', "expected a string")) return -1;
    for (;;) {
        unsigned char ch = (unsigned char)*j->p;
        if (ch == '"') break;
        if (ch < 0x20) return fail(j, ch ? "control character in a string" : "unterminated string");
        if (ch == '\\') {
            const char *e = j->p + 1;
            if (*e == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", e[i]) || !e[i])
                        return fail(j, "bad \\u escape");
                j->p += 5;
            } else if (*e && strchr("\"\\/bfnrt", *e)) {
                ch = (unsigned char)*e;
                j->p++;
            } else {
                return fail(j, "bad escape in a string");
            }
        }
        if (len + 1 < n) out[len++] = (char)ch;
        j->p++;
    }
    j->p++;
    if (n) out[len] = '\0';
    return 0;
}

/* A number, or null (NaN) if null_ok. */
static int number(jr *j, double *v, int null_ok) {
    ws(j);
    if (null_ok && strncmp(j->p, "null", 4) == 0) {
        j->p += 4;
        *v = NAN;
        return 0;
    }
    const char *q = j->p;
    if (*q == '-') q++;
    if (*q == '0') q++;
    else if (*q >= '1' && *q <= '9') while (*q >= '0' && *q <= '9') q++;
    else return fail(j, null_ok ? "expected a number or null" : "expected a number");
    if (*q == '.') {
        if (*++q < '0' || *q > '9') return fail(j, "bad number");
        while (*q >= '0' && *q <= '9') q++;
    }
    if (*q == 'e' || *q == 'E') {
        if (*++q == '+' || *q == '-') q++;
        if (*q < '0' || *q > '9') return fail(j, "bad number");
        while (*q >= '0' && *q <= '9') q++;
    }
    char buf[64];
    if ((size_t)(q - j->p) >= sizeof buf) return fail(j, "number too long");
    memcpy(buf, j->p, (size_t)(q - j->p));
    buf[q - j->p] = '\0';
    *v = strtod(buf, NULL);
    j->p = q;
    return 0;
}

static int value(jr *j, int depth);

/* The members of an object or the items of an array, after its opening bracket. */
static int items(jr *j, char close, int depth) {
    ws(j);
    if (*j->p == close) {
        j->p++;
        return 0;
    }
    for (;;) {
        if (close == '}' && (string(j, NULL, 0) || expect(j, ':', "expected ':'"))) return -1;
        if (value(j, depth + 1)) return -1;
        ws(j);
        if (*j->p == close) {
            j->p++;
            return 0;
        }
        if (expect(j, ',', close == '}' ? "expected ',' or '}'" : "expected ',' or ']'"))
            return -1;
    }
}

static int value(jr *j, int depth) {
    double v;
    ws(j);
    if (depth > 32) return fail(j, "nested too deeply");
    switch (*j->p) {
    case '{': j->p++; return items(j, '}', depth);
    case '[': j->p++; return items(j, ']', depth);
    case '"': return string(j, NULL, 0);
    case 't': return literal(j, "true");
    case 'f': return literal(j, "false");
    case 'n': return literal(j, "null");
    default: return number(j, &v, 0);
    }
}

/* An array of numbers: their sum, and how many (which must be `want`). */
static int num_array(jr *j, int want, double *sum) {
    int n = 0;
    *sum = 0;
    if (expect(j, '[', "expected an array of numbers")) return -1;
    ws(j);
    if (*j->p == ']') j->p++;
    else
        for (;;) {
            double v;
            if (number(j, &v, 0)) return -1;
            *sum += v;
            n++;
            ws(j);
            if (*j->p == ']') {
                j->p++;
                break;
            }
            if (expect(j, ',', "expected ',' or ']'")) return -1;
        }
    if (n != want) {
        char msg[96];
        snprintf(msg, sizeof msg, "an array of %d value%s ends here, expected %d (one per rank)",
                 n, n == 1 ? "" : "s", want);
        return fail(j, msg);
    }
    return 0;
}

static const char *const arrays[6] = {"compute_s", "comm_s", "wait_s", "delay_s", "bytes_node",
                                      "bytes_cross"};
static const char *const scalars[4] = {"epoch", "test_acc", "samples_per_s", "elapsed_s"};

/* One line: its type, and for an epoch object its record and number. */
static int line_object(jr *j, int ranks, char *type, size_t n_type, cli_jsonl_epoch *ep,
                       double *epoch, double *time_s) {
    double num[4] = {NAN, NAN, NAN, NAN}, vtime = NAN;
    *time_s = NAN;
    unsigned seen = 0; /* bits: scalars, then arrays << 4 */
    type[0] = '\0';
    for (int k = 0; k < 4; k++) ep->t[k] = NAN;
    ep->bytes[0] = ep->bytes[1] = NAN;
    ep->link_over = NAN;
    if (expect(j, '{', "expected '{' (one JSON object per line)")) return -1;
    ws(j);
    if (*j->p == '}') j->p++;
    else
        for (;;) {
            char key[64];
            if (string(j, key, sizeof key) || expect(j, ':', "expected ':'")) return -1;
            int done = 0;
            if (strcmp(key, "type") == 0) {
                if (string(j, type, n_type)) return -1;
                done = 1;
            } else if (strcmp(key, "vtime_s") == 0) { /* a run on the virtual clock */
                if (number(j, &vtime, 0)) return -1;
                done = 1;
            } else if (strcmp(key, "time_s") == 0) { /* a step's or an evaluation's time */
                if (number(j, time_s, 0)) return -1;
                done = 1;
            } else if (strcmp(key, "link_over_max") == 0) { /* the model's sanity counter */
                if (number(j, &ep->link_over, 0)) return -1;
                done = 1;
            }
            for (int k = 0; !done && k < 4; k++)
                if (strcmp(key, scalars[k]) == 0) {
                    if (number(j, &num[k], k == 1)) return -1;
                    seen |= 1u << k;
                    done = 1;
                }
            for (int k = 0; !done && k < 6; k++)
                if (strcmp(key, arrays[k]) == 0) {
                    if (num_array(j, ranks, k < 4 ? &ep->t[k] : &ep->bytes[k - 4])) return -1;
                    seen |= 1u << (4 + k);
                    done = 1;
                }
            if (!done && value(j, 1)) return -1;
            ws(j);
            if (*j->p == '}') {
                j->p++;
                break;
            }
            if (expect(j, ',', "expected ',' or '}'")) return -1;
        }
    ws(j);
    if (*j->p) return fail(j, "unexpected text after the object");
    if (!type[0]) return fail(j, "the object has no \"type\"");
    if (strcmp(type, "eval") == 0) {
        if (!(seen & 2u)) return fail(j, "the eval object has no \"test_acc\"");
        if (isnan(*time_s)) return fail(j, "the eval object has no \"time_s\"");
        ep->test_acc = num[1];
        return 0;
    }
    if (strcmp(type, "epoch") != 0) return 0;
    for (int k = 0; k < 4; k++)
        if (!(seen & (1u << k))) {
            char msg[64];
            snprintf(msg, sizeof msg, "the epoch object has no \"%s\"", scalars[k]);
            return fail(j, msg);
        }
    unsigned times = (seen >> 4) & 15u;
    if (times != 0 && times != 15u) return fail(j, "the epoch object has some of compute_s, "
                                                   "comm_s, wait_s, delay_s but not all");
    *epoch = num[0];
    ep->test_acc = num[1];
    ep->samples_per_s = num[2];
    ep->elapsed_s = num[3];
    ep->vtime_s = vtime;
    return 0;
}

/* points twice as large (the old array is freed on failure): NULL when out of memory */
static cli_jsonl_point *grow_points(cli_jsonl_point *p, int *cap) {
    cli_jsonl_point *q = realloc(p, (size_t)*cap * 2 * sizeof *p);
    if (!q) {
        free(p);
        return NULL;
    }
    *cap *= 2;
    return q;
}

int cli_jsonl_read(cli_jsonl_run *r, const char *path, int ranks, int epochs) {
    memset(r, 0, sizeof *r);
    r->ranks = ranks;
    r->epochs = calloc((size_t)epochs, sizeof *r->epochs);
    r->points = malloc(sizeof *r->points);
    FILE *f = fopen(path, "r");
    if (!f || !r->epochs || !r->points) {
        int st = het_error_set(HET_EIO, "hetrain compare: %s: cannot read: %s", path,
                               f ? "out of memory" : strerror(errno));
        if (f) fclose(f);
        cli_jsonl_free(r);
        return st;
    }
    int cap_points = 1;
    char *line = NULL, type[32];
    size_t cap = 0;
    int lineno = 0, st = HET_OK;
    ssize_t len;
    while (!st && (len = getline(&line, &cap, f)) >= 0) {
        jr j = {line, line, ""};
        cli_jsonl_epoch ep;
        double epoch = 0, time_s = NAN;
        lineno++;
        if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
        if ((size_t)len != strlen(line)) {
            j.p = line + strlen(line);
            fail(&j, "NUL byte in the line");
        } else if (line_object(&j, ranks, type, sizeof type, &ep, &epoch, &time_s) ||
                   (strcmp(type, "epoch") != 0 && strcmp(type, "eval") != 0)) {
            /* an error, or another type */
        } else if (r->n_points == cap_points &&
                   !(r->points = grow_points(r->points, &cap_points))) {
            st = het_error_set(HET_ENOMEM, "hetrain compare: %s: out of memory", path);
            break;
        } else if (strcmp(type, "eval") == 0) {
            r->points[r->n_points++] = (cli_jsonl_point){time_s, ep.test_acc};
        } else {
            if (epoch != r->n_epochs + 1 || r->n_epochs == epochs) {
                char msg[96];
                snprintf(msg, sizeof msg, "epoch %g, expected epoch %d of %d", epoch,
                         r->n_epochs + 1, epochs);
                j.p = j.s;
                fail(&j, msg);
            } else {
                r->epochs[r->n_epochs++] = ep;
                r->points[r->n_points++] = (cli_jsonl_point){
                    isnan(ep.vtime_s) ? ep.elapsed_s : ep.vtime_s, ep.test_acc};
            }
        }
        if (j.err[0]) st = het_error_set(HET_EIO, "hetrain compare: %s:%d: %s", path, lineno,
                                         j.err);
    }
    if (!st && ferror(f)) st = het_error_set(HET_EIO, "hetrain compare: %s: read error", path);
    if (!st && r->n_epochs != epochs)
        st = het_error_set(HET_EIO, "hetrain compare: %s: %d epoch records, expected %d", path,
                           r->n_epochs, epochs);
    free(line);
    fclose(f);
    if (st) cli_jsonl_free(r);
    return st;
}

void cli_jsonl_free(cli_jsonl_run *r) {
    free(r->epochs);
    free(r->points);
    r->epochs = NULL;
    r->points = NULL;
    r->n_points = 0;
    r->n_epochs = 0;
}

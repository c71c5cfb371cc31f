/* A strict JSON syntax checker (RFC 8259: objects, arrays, strings with escapes, numbers,
 * true/false/null, nothing after the value), used by tests/test_trace.sh to check the Chrome
 * trace files hetrain writes (python is not allowed in tests).
 *   test_trace_json FILE...   exit 0 if every file is valid JSON, else 1 with the offset
 *   test_trace_json           self-test on valid and invalid samples (the CTest run) */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

typedef struct { const char *s; size_t n, i; int depth; } parser;

static void ws(parser *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                           p->s[p->i] == '\r'))
        p->i++;
}
static int peek(parser *p) { return p->i < p->n ? (unsigned char)p->s[p->i] : -1; }
static int value(parser *p);

static int string(parser *p) {
    if (peek(p) != '"') return 0;
    p->i++;
    while (p->i < p->n) {
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c == '"') return 1;
        if (c < 0x20) return 0;
        if (c == '\\') {
            int e = peek(p);
            p->i++;
            if (e == 'u') {
                for (int k = 0; k < 4; k++, p->i++)
                    if (!isxdigit(peek(p))) return 0;
            } else if (!e || !strchr("\"\\/bfnrt", e)) {
                return 0;
            }
        }
    }
    return 0;
}

static int digits(parser *p) {
    size_t start = p->i;
    while (isdigit(peek(p))) p->i++;
    return p->i > start;
}

static int number(parser *p) {
    if (peek(p) == '-') p->i++;
    if (peek(p) == '0') p->i++;
    else if (!digits(p)) return 0;
    if (peek(p) == '.') {
        p->i++;
        if (!digits(p)) return 0;
    }
    if (peek(p) == 'e' || peek(p) == 'E') {
        p->i++;
        if (peek(p) == '+' || peek(p) == '-') p->i++;
        if (!digits(p)) return 0;
    }
    return 1;
}

static int word(parser *p, const char *w) {
    size_t n = strlen(w);
    if (p->n - p->i < n || memcmp(p->s + p->i, w, n) != 0) return 0;
    p->i += n;
    return 1;
}

static int container(parser *p, char close) {
    if (++p->depth > 256) return 0;
    p->i++;
    ws(p);
    if (peek(p) == close) {
        p->i++;
        p->depth--;
        return 1;
    }
    for (;;) {
        ws(p);
        if (close == '}') {
            if (!string(p)) return 0;
            ws(p);
            if (peek(p) != ':') return 0;
            p->i++;
        }
        if (!value(p)) return 0;
        ws(p);
        if (peek(p) == ',') {
            p->i++;
            continue;
        }
        if (peek(p) != close) return 0;
        p->i++;
        p->depth--;
        return 1;
    }
}

static int value(parser *p) {
    ws(p);
    int c = peek(p);
    if (c == '{') return container(p, '}');
    if (c == '[') return container(p, ']');
    if (c == '"') return string(p);
    if (c == '-' || isdigit(c)) return number(p);
    return word(p, "true") || word(p, "false") || word(p, "null");
}

/* 1 if s[0..n) is one JSON value; *err_at gets the offset of the first error. */
static int json_valid(const char *s, size_t n, size_t *err_at) {
    parser p = {s, n, 0, 0};
    int ok = value(&p);
    if (ok) {
        ws(&p);
        ok = p.i == n;
    }
    *err_at = p.i;
    return ok;
}

static int check_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    size_t at;
    int ok = json_valid(buf, n, &at);
    if (!ok) fprintf(stderr, "%s: invalid JSON at offset %zu of %zu\n", path, at, n);
    free(buf);
    return !ok;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        int bad = 0;
        for (int i = 1; i < argc; i++) bad |= check_file(argv[i]);
        return bad;
    }
    static const char *const good[] = {
        "{}", "[]", "0", "-1.5e+3", "\"a\\u00e9\\n\"", "true", " null ",
        "{\"traceEvents\":[{\"name\":\"x\",\"ph\":\"X\",\"ts\":1.5,\"dur\":0}],\"a\":[1,2,{}]}",
    };
    static const char *const bad[] = {
        "", "{", "[1,]", "{\"a\":1,}", "{a:1}", "01", "1.", ".5", "-", "\"abc", "\"\\x\"",
        "[1 2]", "{} {}", "nul", "{\"a\" 1}", "[\"tab\there\"]", "1e", "NaN",
    };
    size_t at;
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECK(json_valid(good[i], strlen(good[i]), &at), "rejected valid '%s' at %zu", good[i], at);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(!json_valid(bad[i], strlen(bad[i]), &at), "accepted invalid '%s'", bad[i]);
    return het_test_finish("test_trace_json");
}

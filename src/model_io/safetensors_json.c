/* The strict reader of a safetensors header's JSON (see safetensors_json.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "hetrain/core.h"
#include "model_io/safetensors_json.h"

int het_json_fail(const char *path, uint64_t off, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return het_error_set(HET_EFORMAT, "%s: offset %llu: %s", path, (unsigned long long)off, msg);
}

/* What is at the cursor, for messages: "'x'", "byte 0x01" or "the header's end". */
const char *het_json_found(const het_json *c, char *buf, size_t n) {
    if (c->i >= c->n) return "the header's end";
    unsigned char ch = (unsigned char)c->p[c->i];
    if (ch >= 0x20 && ch < 0x7f) snprintf(buf, n, "'%c'", ch);
    else snprintf(buf, n, "byte 0x%02x", ch);
    return buf;
}

void het_json_ws(het_json *c) {
    while (c->i < c->n && (c->p[c->i] == ' ' || c->p[c->i] == '\t' || c->p[c->i] == '\n' ||
                           c->p[c->i] == '\r'))
        c->i++;
}

/* Skips white space, then consumes ch or fails saying what was expected `where`. */
int het_json_expect(het_json *c, char ch, const char *where) {
    char b[16];
    het_json_ws(c);
    if (c->i < c->n && c->p[c->i] == ch) {
        c->i++;
        return HET_OK;
    }
    return HET_JSON_ERR(c, "expected '%c' %s, found %s", ch, where,
                        het_json_found(c, b, sizeof b));
}

static int hex4(het_json *c, unsigned *v) {
    *v = 0;
    for (int k = 0; k < 4; k++, c->i++) {
        char ch = c->i < c->n ? c->p[c->i] : '\0';
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0) return HET_JSON_ERR(c, "bad \\u escape: 4 hex digits expected");
        *v = *v * 16 + (unsigned)d;
    }
    return HET_OK;
}

/* A JSON string (after white space) into out[cap] (NUL-terminated), or skipped if out is
 * NULL. Escapes are decoded (\u as UTF-8, surrogate pairs joined); raw control characters,
 * \u0000 and lone surrogates are refused. */
int het_json_string(het_json *c, char *out, size_t cap) {
    static const char esc_in[] = "\"\\/bfnrt", esc_out[] = "\"\\/\b\f\n\r\t";
    char b[16];
    size_t k = 0;
    het_json_ws(c);
    if (c->i >= c->n || c->p[c->i] != '"')
        return HET_JSON_ERR(c, "expected a string, found %s",
                            het_json_found(c, b, sizeof b));
    c->i++;
    for (;;) {
        if (c->i >= c->n) return HET_JSON_ERR(c, "unterminated string");
        unsigned char ch = (unsigned char)c->p[c->i];
        char u8[4];
        size_t nu = 1;
        if (ch == '"') {
            c->i++;
            break;
        }
        if (ch < 0x20) return HET_JSON_ERR(c, "control byte 0x%02x in a string", ch);
        u8[0] = (char)ch;
        if (ch == '\\') {
            c->i++;
            const char *e = c->i < c->n && c->p[c->i] ? strchr(esc_in, c->p[c->i]) : NULL;
            if (c->i < c->n && c->p[c->i] == 'u') {
                c->i++;
                unsigned v, lo;
                if (hex4(c, &v)) return HET_EFORMAT;
                if (v >= 0xdc00 && v < 0xe000) return HET_JSON_ERR(c, "lone low surrogate in \\u");
                if (v >= 0xd800 && v < 0xdc00) {
                    if (c->i + 1 >= c->n || c->p[c->i] != '\\' || c->p[c->i + 1] != 'u')
                        return HET_JSON_ERR(c, "high surrogate without its low half");
                    c->i += 2;
                    if (hex4(c, &lo)) return HET_EFORMAT;
                    if (lo < 0xdc00 || lo >= 0xe000)
                        return HET_JSON_ERR(c, "high surrogate without its low half");
                    v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
                }
                if (v == 0) return HET_JSON_ERR(c, "\\u0000 in a string");
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
                return HET_JSON_ERR(c, "bad escape in a string");
            }
        }
        c->i++;
        if (out) {
            if (k + nu >= cap) return HET_JSON_ERR(c, "string longer than %zu bytes", cap - 1);
            memcpy(out + k, u8, nu);
        }
        k += nu;
    }
    if (out) out[k] = '\0';
    return HET_OK;
}

/* A non-negative integer (after white space) without sign, fraction or exponent. */
int het_json_uint(het_json *c, uint64_t *v) {
    char b[16];
    het_json_ws(c);
    size_t s = c->i;
    *v = 0;
    while (c->i < c->n && c->p[c->i] >= '0' && c->p[c->i] <= '9') {
        unsigned d = (unsigned)(c->p[c->i] - '0');
        if (*v > (UINT64_MAX - d) / 10) return HET_JSON_ERR(c, "integer too large");
        *v = *v * 10 + d;
        c->i++;
    }
    if (c->i == s)
        return HET_JSON_ERR(c, "expected a non-negative integer, found %s",
                            het_json_found(c, b, sizeof b));
    if (c->i - s > 1 && c->p[s] == '0') return HET_JSON_ERR(c, "integer with a leading zero");
    if (c->i < c->n && (c->p[c->i] == '.' || c->p[c->i] == 'e' || c->p[c->i] == 'E'))
        return HET_JSON_ERR(c, "expected an integer, found a fraction or an exponent");
    return HET_OK;
}

/* Skips decimal digits; returns how many. */
static size_t digits(het_json *c) {
    size_t s = c->i;
    while (c->i < c->n && c->p[c->i] >= '0' && c->p[c->i] <= '9') c->i++;
    return c->i - s;
}

/* Any JSON value (after white space), skipped: the contents of "__metadata__". */
int het_json_skip(het_json *c, int depth) {
    char b[16];
    het_json_ws(c);
    if (depth > ST_MAX_DEPTH) return HET_JSON_ERR(c, "values nested deeper than %d", ST_MAX_DEPTH);
    if (c->i >= c->n) return HET_JSON_ERR(c, "expected a value, found the header's end");
    char ch = c->p[c->i];
    if (ch == '"') return het_json_string(c, NULL, 0);
    if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        c->i++;
        het_json_ws(c);
        if (c->i < c->n && c->p[c->i] == close) {
            c->i++;
            return HET_OK;
        }
        for (;;) {
            if (ch == '{' &&
                (het_json_string(c, NULL, 0) || het_json_expect(c, ':', "after a key")))
                return HET_EFORMAT;
            if (het_json_skip(c, depth + 1)) return HET_EFORMAT;
            het_json_ws(c);
            if (c->i < c->n && c->p[c->i] == ',') {
                c->i++;
                continue;
            }
            return het_json_expect(c, close,
                                   ch == '{' ? "or ',' in an object" : "or ',' in an array");
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
        else if (!digits(c)) return HET_JSON_ERR(c, "bad number");
        if (c->i < c->n && c->p[c->i] == '.') {
            c->i++;
            if (!digits(c)) return HET_JSON_ERR(c, "bad number: no digit after '.'");
        }
        if (c->i < c->n && (c->p[c->i] == 'e' || c->p[c->i] == 'E')) {
            c->i++;
            if (c->i < c->n && (c->p[c->i] == '+' || c->p[c->i] == '-')) c->i++;
            if (!digits(c)) return HET_JSON_ERR(c, "bad number: no digit in the exponent");
        }
        return HET_OK;
    }
    return HET_JSON_ERR(c, "expected a value, found %s", het_json_found(c, b, sizeof b));
}

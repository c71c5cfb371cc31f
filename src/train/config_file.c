/* Configuration text: config files (--config FILE) and the configuration section stored in a
 * checkpoint. One "key = value" (or "key value", or a bare boolean key) per line, '#' comments,
 * keys as in het_train_config_set. A key given twice in one text is refused (naming both
 * lines), except slowdown-at, whose settings append. */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "core/infile.h"
#include "train/internal.h"

#define CONFIG_MAX_BYTES (1u << 24)

/* Strips leading and trailing white space in place. */
static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

/* Splits one line (modified in place) into *key and *val (NULL: no value); *key is "" for a
 * blank or comment line. '#' at the start or after white space begins a comment. */
static void split_line(char *line, char **key, char **val) {
    for (char *p = line; *p; p++)
        if (*p == '#' && (p == line || isspace((unsigned char)p[-1]))) {
            *p = '\0';
            break;
        }
    char *s = trim(line);
    *key = s;
    *val = NULL;
    size_t kn = strcspn(s, " \t=");
    if (s[kn]) {
        char *rest = s + kn;
        int had_eq = *rest == '=';
        *rest = '\0';
        rest = trim(rest + 1); /* after the key: blanks, at most one '=', the value */
        if (!had_eq && *rest == '=') rest = trim(rest + 1);
        *val = rest;
    }
}

/* Applies config lines from text[0..n). from_ckpt 0: a config file (errors "FILE:LINE: ...",
 * unknown keys refused); 1: a checkpoint's config section at file offset `off` (errors
 * "FILE: offset N: ...", unknown keys ignored). */
static int apply_lines(het_train_config *c, const char *text, size_t n, const char *path,
                       int from_ckpt, uint64_t off) {
    const int bad = from_ckpt ? HET_EFORMAT : HET_EINVAL;
    char line[4096];
    /* line number or offset + 1 of each key's setting (built-in keys, then strategy options) */
    uint64_t first[HET_CONFIG_MAX_KEYS + HET_SOPT_MAX_NAMES] = {0};
    int lineno = 0;
    size_t pos = 0;
    while (pos < n) {
        size_t len = 0;
        while (pos + len < n && text[pos + len] != '\n') len++;
        size_t line_off = pos;
        pos += len + 1;
        lineno++;
        char where[HET_PATH_LEN + 64];
        uint64_t here = from_ckpt ? off + line_off : (uint64_t)lineno;
        if (from_ckpt)
            snprintf(where, sizeof where, "%s: offset %llu", path, (unsigned long long)here);
        else
            snprintf(where, sizeof where, "%s:%d", path, lineno);
        if (len >= sizeof line)
            return het_error_set(bad, "%s: line of %zu bytes, expected at most %zu", where, len,
                                 sizeof line - 1);
        memcpy(line, text + line_off, len);
        line[len] = '\0';
        if (memchr(line, '\0', len))
            return het_error_set(bad, "%s: NUL byte in a line, expected text", where);
        char *key, *val;
        split_line(line, &key, &val);
        if (!*key) continue;
        int k = het_config_key_index(key);
        if (k < 0) {
            if (from_ckpt) continue;
            return het_error_set(HET_EINVAL, "%s: unknown key '%s'", where, key);
        }
        if (first[k] && !het_config_key_appends(k))
            return het_error_set(bad, "%s: %s given twice (%s %llu)", where,
                                 het_config_key_name(k), from_ckpt ? "offset" : "line",
                                 (unsigned long long)(first[k] - 1));
        if (!first[k]) first[k] = here + 1;
        if (het_train_config_set(c, key, val)) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", het_error_msg());
            return het_error_set(bad, "%s: %s", where, msg);
        }
    }
    return HET_OK;
}

/* Reads a whole config file (a regular file of at most 16 MiB) into *buf, *n bytes. */
static int read_config(const char *path, char **buf, size_t *n) {
    uint8_t *b = NULL;
    int st = het_infile_load(path, "a config file", CONFIG_MAX_BYTES, &b, n);
    *buf = (char *)b;
    return st;
}

int het_train_config_load(het_train_config *c, const char *path) {
    char *buf;
    size_t n;
    int st = read_config(path, &buf, &n);
    if (!st) st = apply_lines(c, buf, n, path, 0, 0);
    free(buf);
    return st;
}

int het_train_config_apply_text(het_train_config *c, const char *path, uint64_t off,
                                const void *text, size_t n) {
    return apply_lines(c, text, n, path, 1, off);
}

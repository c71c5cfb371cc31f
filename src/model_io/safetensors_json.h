/* Internal to model_io/: the strict reader of a safetensors header's JSON
 * (safetensors_json.c), for safetensors_read.c. No JSON reader sits below train/ (cli/jsonl.c
 * is above it) and a dependency for ~150 lines was not worth it: this one reads the format's
 * flat grammar (strings with every escape, non-negative integers, and any value skipped for
 * "__metadata__"), positions reported as file offsets. */
#ifndef HET_MODEL_IO_SAFETENSORS_JSON_H
#define HET_MODEL_IO_SAFETENSORS_JSON_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DEPTH 64 /* nesting inside "__metadata__" */

/* A cursor over the header p[0..n) of file `path`; byte i is at file offset 8 + i. */
typedef struct het_json {
    const char *p;
    size_t n, i;
    const char *path;
} het_json;

/* HET_EFORMAT, "path: offset off: ..." */
int het_json_fail(const char *path, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same at the cursor. */
#define HET_JSON_ERR(c, ...) het_json_fail((c)->path, 8 + (uint64_t)(c)->i, __VA_ARGS__)

/* What is at the cursor, for messages: "'x'", "byte 0x01" or "the header's end". */
const char *het_json_found(const het_json *c, char *buf, size_t n);
/* Skips white space. */
void het_json_ws(het_json *c);
/* Skips white space, then consumes ch or fails saying what was expected `where`. */
int het_json_expect(het_json *c, char ch, const char *where);
/* A JSON string (after white space) into out[cap] (NUL-terminated), or skipped if out is
 * NULL. Escapes are decoded (\u as UTF-8, surrogate pairs joined); raw control characters,
 * \u0000 and lone surrogates are refused. */
int het_json_string(het_json *c, char *out, size_t cap);
/* A non-negative integer (after white space) without sign, fraction or exponent. */
int het_json_uint(het_json *c, uint64_t *v);
/* Any JSON value (after white space), skipped: the contents of "__metadata__". */
int het_json_skip(het_json *c, int depth);

#endif

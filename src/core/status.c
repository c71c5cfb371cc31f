/* Status codes and the per-thread error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "hetrain/core.h"

static _Thread_local char het_err_buf[512];

const char *het_strerror(int status) {
    switch (status) {
#define HET_X_CASE(name, val, text) \
    case val:                       \
        return text;
        HET_STATUS_LIST(HET_X_CASE)
#undef HET_X_CASE
    default:
        return "unknown error";
    }
}

/* The message is one line whatever it quotes from a file: control characters (a newline in a
 * model name read from a checkpoint, an escape sequence) are written as \xNN. */
int het_error_set(int status, const char *fmt, ...) {
    char raw[sizeof het_err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)raw; *p; p++) {
        int ctl = *p < 0x20 || *p == 0x7f;
        if (o + (ctl ? 4 : 1) >= sizeof het_err_buf) break;
        if (ctl) o += (size_t)snprintf(het_err_buf + o, 5, "\\x%02x", *p);
        else het_err_buf[o++] = (char)*p;
    }
    het_err_buf[o] = '\0';
    return status;
}

const char *het_error_msg(void) { return het_err_buf; }

void het_error_clear(void) { het_err_buf[0] = '\0'; }

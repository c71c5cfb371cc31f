/* Status codes and the per-thread error message. */
#include <stdarg.h>
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

int het_error_set(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(het_err_buf, sizeof het_err_buf, fmt, ap);
    va_end(ap);
    return status;
}

const char *het_error_msg(void) { return het_err_buf; }

void het_error_clear(void) { het_err_buf[0] = '\0'; }

/* Rank-aware logging: only rank 0 prints. */
#include <stdarg.h>

#include "hetrain/core.h"

static int het_rank = 0;
static het_log_level het_level = HET_LOG_INFO;

void het_log_set_rank(int rank) { het_rank = rank; }
int het_log_rank(void) { return het_rank; }
void het_log_set_level(het_log_level lvl) { het_level = lvl; }
het_log_level het_log_get_level(void) { return het_level; }

void het_log(het_log_level lvl, const char *fmt, ...) {
    if (het_rank != 0 || lvl > het_level) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fflush(stdout);
}

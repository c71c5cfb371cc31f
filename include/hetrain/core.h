/* hetrain core: status codes, error messages, logging, RNG, timers, aligned allocation.
 *
 * Errors: every fallible function returns an int status, HET_OK (0) or a negative HET_E*
 * code, and records a one-line human message with het_error_set(). Library code never exits;
 * only main() maps a status to an exit code and prints het_error_msg(). */
#ifndef HETRAIN_CORE_H
#define HETRAIN_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X-macro: name, value, default text. Negative means failure. */
#define HET_STATUS_LIST(X)                                  \
    X(HET_OK,       0, "ok")                                \
    X(HET_ENOMEM,  -1, "out of memory")                     \
    X(HET_EIO,     -2, "input/output error")                \
    X(HET_EFORMAT, -3, "malformed input")                   \
    X(HET_EINVAL,  -4, "invalid argument")                  \
    X(HET_ESHAPE,  -5, "shape mismatch")                    \
    X(HET_EMPI,    -6, "MPI error")                         \
    X(HET_ENOTSUP, -7, "not supported")                     \
    X(HET_EPEER,   -8, "another rank failed")

typedef enum het_status {
#define HET_X_ENUM(name, val, text) name = val,
    HET_STATUS_LIST(HET_X_ENUM)
#undef HET_X_ENUM
} het_status;

/* Static text for a status code; never NULL. */
const char *het_strerror(int status);

/* Record the current error message (printf format, one line, no trailing newline) and return
 * `status` so callers can write `return het_error_set(HET_EINVAL, "...", ...);`. The message is
 * per thread and overwritten by the next call; control characters in it (from quoted file
 * contents) are stored as \xNN, so it stays one line. */
int het_error_set(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The last message recorded on this thread, or het_strerror of nothing ("" if none). */
const char *het_error_msg(void);
void het_error_clear(void);

/* ---- logging: rank aware; only rank 0 prints unless `all` is used ---- */
typedef enum { HET_LOG_QUIET = 0, HET_LOG_INFO = 1, HET_LOG_DEBUG = 2 } het_log_level;
void het_log_set_rank(int rank);
int  het_log_rank(void);
void het_log_set_level(het_log_level lvl);
het_log_level het_log_get_level(void);
/* Prints to stdout on rank 0 when level >= lvl. */
void het_log(het_log_level lvl, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- RNG: xoshiro256** seeded by splitmix64; deterministic for a given seed ---- */
typedef struct het_rng { uint64_t s[4]; } het_rng;
void     het_rng_seed(het_rng *r, uint64_t seed);
/* Independent stream: seed mixed with a stream id (e.g. epoch, layer index). */
void     het_rng_seed2(het_rng *r, uint64_t seed, uint64_t stream);
uint64_t het_rng_u64(het_rng *r);
uint32_t het_rng_below(het_rng *r, uint32_t n);   /* uniform in [0, n), unbiased */
float    het_rng_uniform(het_rng *r);             /* [0, 1), 24 random bits */
float    het_rng_normal(het_rng *r);              /* standard normal (Box-Muller) */

/* ---- timers ---- */
double het_now(void); /* monotonic seconds */

/* ---- allocation: 64-byte aligned, zeroed; NULL on failure (sets the error message). Free with
 * het_free only. Blocks of 1 MiB and more are mappings: resident only where written. ---- */
void *het_alloc(size_t bytes);
void  het_free(void *p);

/* ---- shapes and paths ---- */
/* Per-sample shape of a tensor (C x H x W). A flat vector of F features is {F, 1, 1}. */
typedef struct het_shape {
    int c, h, w;
} het_shape;

static inline size_t het_shape_size(het_shape s) { return (size_t)s.c * (size_t)s.h * (size_t)s.w; }

/* Longest file path hetrain stores (configuration, checkpoint paths), NUL included. */
#define HET_PATH_LEN 1024

/* ---- SIGINT / SIGTERM (interrupt.c) ----
 * het_interrupt_install(rank) makes SIGINT and SIGTERM remove the temp file of a checkpoint
 * being written, print "hetrain: interrupted (checkpoint PATH: epoch N)" or "... (no
 * checkpoint written)" on stderr (rank 0 only; other ranks exit quietly 0.5 s later), and
 * exit 130 (SIGINT) / 143 (SIGTERM), in the handler itself (async-signal-safe), wherever the
 * process is, MPI waits included. With peers registered, a rank whose same-host peers have
 * vanished prints "hetrain: rank 1 (pid 1234) is gone; job ended by the launcher" instead
 * (the lowest surviving rank of the host). HET_EIO when sigaction fails. */
int  het_interrupt_install(int rank);
/* Every rank's pid, and whether it runs on this host (copied). HET_ENOMEM. */
int  het_interrupt_peers(int rank, int size, const int *pids, const unsigned char *local);
/* One byte per world rank shared by the ranks of this host (NULL: none): a rank sets its own
 * (het_interrupt_leaving) before it ends on its own, so that the others' handlers do not name
 * it as lost when the launcher then ends them. Borrowed until set to NULL. From
 * het_interrupt_leaving on, SIGINT / SIGTERM end the process quietly with `status`. */
void het_interrupt_shared(volatile unsigned char *left);
void het_interrupt_leaving(int status);
/* The checkpoint writer's hooks: the temp file it creates (NULL: none any more), the moment
 * before its rename, and the rename's success (which makes a pending message current). */
void het_interrupt_temp(const char *path);
void het_interrupt_renaming(void);
void het_interrupt_committed(void);
/* Any other output written through a temp file (core/outfile.c): `tmp` is about to be created
 * (NULL: written or given up), `what` names the output ("ONNX export FILE"), copied; the
 * handler removes tmp and prints "hetrain: interrupted (WHAT not written)" (with "; checkpoint
 * PATH: epoch N" when there is one). het_interrupt_output_renaming marks the rename: a temp
 * file gone then was renamed into place, and the output is not named. */
void het_interrupt_output(const char *tmp, const char *what);
void het_interrupt_output_renaming(void);
/* What the checkpoint at `path` holds: after epoch `epoch`; committed = 0: once the checkpoint
 * being written is renamed into place (het_interrupt_committed), 1: now (a resumed run). */
void het_interrupt_checkpoint(const char *path, int epoch, int committed);

/* ---- checksums ---- */
uint32_t het_crc32(uint32_t crc, const void *buf, size_t n); /* zlib crc32 */

#ifdef __cplusplus
}
#endif
#endif

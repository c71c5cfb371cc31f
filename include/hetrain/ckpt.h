/* hetrain ckpt: the checkpoint container, tagged sections with a CRC, written atomically.
 * A generic container: the trainer writes its sections (config, meta, params, ...) and each
 * strategy adds its own ("s.<name>..."), all through the same writer. */
#ifndef HETRAIN_CKPT_H
#define HETRAIN_CKPT_H

#include "hetrain/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- checkpoint files ----
 * Layout (integers little-endian):
 *   0   "HETCKPT1"                       8-byte magic
 *   8   u32 format version (1), u32 0
 *   16  sections: char tag[16] (NUL-padded), u64 length, `length` bytes
 *   ... last section: tag "end", length 4, u32 CRC-32 of every byte before it
 * Floats are stored as IEEE-754 little-endian. Every read is checked; a failure is one line
 * "<path>: offset N: <found>, expected <what>" and HET_EFORMAT (HET_EIO if unreadable). */
#define HET_CKPT_MAGIC "HETCKPT1"
#define HET_CKPT_VERSION 1u
#define HET_CKPT_TAG_LEN 16
/* The largest checkpoint a reader accepts (16 GiB; the zoo's largest model with Adam state
 * takes a few MB): a larger file is refused before anything is allocated. */
#define HET_CKPT_MAX_BYTES ((uint64_t)1 << 34)

typedef struct het_ckpt_writer het_ckpt_writer;
typedef struct het_ckpt_reader het_ckpt_reader;

/* Creates "<path>.tmp" and writes the header. */
int het_ckpt_writer_open(het_ckpt_writer **out, const char *path);
/* Appends section `tag` (1..15 characters of [a-z0-9_.-], not "end", unique). */
int het_ckpt_put(het_ckpt_writer *w, const char *tag, const void *data, size_t bytes);
/* Writes the CRC section, fsyncs, renames to the final path. Frees w in every case; on
 * failure the temporary file is removed and the old checkpoint (if any) is untouched. */
int het_ckpt_writer_commit(het_ckpt_writer *w);
/* Closes and removes the temporary file; frees w. NULL is fine. */
void het_ckpt_writer_abort(het_ckpt_writer *w);

/* Reads the whole file and verifies magic, version, end section, CRC and section framing. */
int het_ckpt_reader_open(het_ckpt_reader **out, const char *path);
void het_ckpt_reader_close(het_ckpt_reader *r);
/* Copies section `tag`, which must be exactly `bytes` long, into dst. */
int het_ckpt_get(het_ckpt_reader *r, const char *tag, void *dst, size_t bytes);
/* Section `tag` of any length: *data points into the reader (valid until close), *offset is
 * the file offset of its first byte (for messages). HET_EFORMAT if absent. */
int het_ckpt_find(het_ckpt_reader *r, const char *tag, const void **data, size_t *bytes,
                  uint64_t *offset);
/* 1 if section `tag` exists. */
int het_ckpt_has(const het_ckpt_reader *r, const char *tag);
const char *het_ckpt_reader_path(const het_ckpt_reader *r);

#ifdef __cplusplus
}
#endif
#endif
